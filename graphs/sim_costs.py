"""Time costs of a placement for the simulator: compute per node, transfer per edge and link.

* :func:`node_durations` -- each node's compute time on its placed device.
* :func:`edge_transfer_times` -- each edge's uncongested link time (0 on one device).
* :func:`build_transfers` -- the *transfer tasks* the simulator schedules: one per
  cross-device edge, or (``dedup=True``) one per (source node, destination device) that
  takes the longest of the edges it stands for.
* :func:`link_totals` -- busy time, bytes and transfer count per directed link.

How a transfer occupies its link over time (FCFS queue per directed link with
``congestion=True``, free overlap without) is decided by the event loop,
:mod:`dnnplace.graphs.sim_events`; the execution model is described in
:mod:`dnnplace.graphs.simulate`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement

__all__ = ["Transfers", "node_durations", "edge_transfer_times", "build_transfers", "link_totals"]


def node_durations(placement: Placement) -> np.ndarray:
    """Compute time of every node on its placed device.

    Raises
    ------
    InputError
        A node is placed on a device kind it has no compute time for.
    """
    g, cl = placement.graph, placement.cluster
    dur = cl.compute_matrix(g)[np.arange(g.n), placement.device]
    bad = np.isnan(dur)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        d = cl.devices[placement.device[i]]
        raise InputError(f"{g._node(i)} cannot run on device {d.name!r} (kind {d.kind!r}): "
                         f"no compute time for that kind; {int(bad.sum())} node(s) placed unsupported")
    return dur


def edge_transfer_times(placement: Placement) -> np.ndarray:
    """Per-edge transfer time on the placed devices (0 for same-device edges)."""
    g, cl = placement.graph, placement.cluster
    a, b = placement.device[g.src], placement.device[g.dst]
    return cl.transfer_time(a, b, g.edge_bytes, g.edge_cost)


class Transfers(NamedTuple):
    """Transfer tasks sorted by (source node, edge id); ``X`` tasks in all.

    ``dst_ptr`` (X+1) and ``dst_nodes`` are the CSR of the destination nodes each task
    delivers to (exactly one per task unless deduplicated).
    """

    edge: np.ndarray      # (X,) edge id (the representative edge when deduplicated)
    src_node: np.ndarray  # (X,) source node
    src_dev: np.ndarray   # (X,) link source device
    dst_dev: np.ndarray   # (X,) link destination device
    duration: np.ndarray  # (X,) link time
    dst_ptr: np.ndarray   # (X+1,) CSR row pointer into dst_nodes
    dst_nodes: np.ndarray


def build_transfers(placement: Placement, dedup: bool) -> Transfers:
    """Build transfer tasks, sorted by (source node, edge id).

    With ``dedup`` one task per (source node, destination device): it takes the longest
    of its edges (ties: lowest edge id, which represents the task).
    """
    g, D = placement.graph, placement.cluster.size
    dev = placement.device
    src, dst = g.src, g.dst
    ce = np.flatnonzero(dev[src] != dev[dst])
    tt = placement.cluster.transfer_time(dev[src[ce]], dev[dst[ce]], g.edge_bytes[ce], g.edge_cost[ce])
    if not dedup:
        order = np.lexsort((ce, src[ce]))  # by source node, then edge id
        xe = ce[order]
        xdur = tt[order]
        xd_ptr = np.arange(xe.shape[0] + 1, dtype=np.int64)
        xd_nodes = dst[xe]
    else:
        key = src[ce] * D + dev[dst[ce]]
        # groups contiguous by key; first member = representative (longest, lowest id)
        by_key = np.lexsort((ce, -tt, key))
        first = np.ones(by_key.shape[0], dtype=bool)
        first[1:] = key[by_key][1:] != key[by_key][:-1]
        gid = np.cumsum(first) - 1  # group of each member (in by_key order)
        reps = by_key[first]
        xe, xdur = ce[reps], tt[reps]
        # renumber groups by (source node, representative edge id)
        g_order = np.lexsort((xe, src[xe]))
        new_gid = np.empty_like(g_order)
        new_gid[g_order] = np.arange(g_order.shape[0])
        mgid = new_gid[gid]
        members = ce[by_key][np.lexsort((ce[by_key], mgid))]
        xd_nodes = dst[members]
        xd_ptr = np.zeros(g_order.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(mgid, minlength=g_order.shape[0]), out=xd_ptr[1:])
        xe, xdur = xe[g_order], xdur[g_order]
    return Transfers(xe, src[xe], dev[src[xe]], dev[dst[xe]], xdur, xd_ptr, xd_nodes)


def link_totals(placement: Placement, tx: Transfers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(link_busy, link_bytes, link_count)``, each ``(D, D)`` indexed ``[src dev, dst dev]``."""
    D = placement.cluster.size
    lk = tx.src_dev * D + tx.dst_dev
    link_busy = np.bincount(lk, weights=tx.duration, minlength=D * D).reshape(D, D)
    link_bytes = np.bincount(lk, weights=placement.graph.edge_bytes[tx.edge], minlength=D * D).reshape(D, D)
    link_count = np.bincount(lk, minlength=D * D).reshape(D, D).astype(np.int64)
    return link_busy, link_bytes, link_count
