"""Time costs of a placement for the simulator: compute per node, transfer per edge and link.

* :func:`node_durations` -- each node's compute time on its placed device.
* :func:`message_overheads` -- the device time messages add to nodes (docs/semantics.md
  2.1, per-message costs): ``send_overhead`` of the sender per transfer task a node sends, ``recv_overhead``
  of the receiver per transfer task on the task's first consumer.
* :func:`placed_durations` -- the two together: what a node occupies its device for.
* :func:`edge_transfer_times` -- each edge's uncongested link time (0 on one device).
* :func:`build_transfers` -- the *transfer tasks* the simulator schedules: by default
  (``dedup=True``, transfer mode ``"per_destination"``) one per (source node, output,
  destination device) that takes the longest of the edges it stands for (edges carrying
  one output carry the same bytes, so all of them when the graph is consistent), or
  (``dedup=False``, mode ``"per_edge"``) one per cross-device edge.
* :func:`tensor_keys` -- the (source node, output, destination device) of edges, as one
  integer.
* :func:`link_totals` -- busy time, bytes and transfer count per directed link.
* :func:`uneven_outputs` -- the outputs whose edges carry different bytes or costs (a graph
  written for one transfer per edge), which ``"per_destination"`` sends once at the
  largest size; the command line warns about them (docs/semantics.md 2.1).

How a transfer occupies its link over time (FCFS queue per directed link with
``congestion=True``, free overlap without) is decided by the event loop,
:mod:`dnnplace.evaluation.sim_events`; the execution model is described in
:mod:`dnnplace.evaluation.simulate`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement

__all__ = ["Transfers", "TRANSFER_MODES", "DEFAULT_TRANSFER_MODE", "check_transfer_mode", "transfer_semantics",
           "current_transfer_mode", "node_durations", "message_overheads", "placed_durations",
           "edge_transfer_times", "tensor_keys", "build_transfers", "link_totals", "uneven_outputs"]

#: What is sent (docs/semantics.md 2.1): ``"per_destination"`` -- a tensor once to each device that
#: consumes it, one transfer per (source node, output, destination device), the default
#: and what frameworks run; ``"per_edge"`` -- one transfer per cross-device edge
#: (Pesto's DAG augmentation, the accounting of Pesto's ILP).
TRANSFER_MODES = ("per_destination", "per_edge")
DEFAULT_TRANSFER_MODE = "per_destination"


_CURRENT: ContextVar[str] = ContextVar("dnnplace_transfer_mode", default=DEFAULT_TRANSFER_MODE)


def current_transfer_mode() -> str:
    """The transfer mode a simulation uses when none is given: ``"per_destination"``,
    or the mode of the innermost :func:`transfer_semantics` block."""
    return _CURRENT.get()


@contextmanager
def transfer_semantics(mode: str | None) -> Iterator[str]:
    """Within the block, simulations and makespan evaluations that name no transfer
    mode use ``mode`` (``None``: leave it as it is). The registry runs a method and
    its evaluation inside one such block, so a request for ``"per_edge"`` reaches every
    simulation a method makes without each method passing it on.

    >>> with transfer_semantics("per_edge"):
    ...     current_transfer_mode()
    'per_edge'
    >>> current_transfer_mode()
    'per_destination'
    """
    if mode is None:
        yield _CURRENT.get()
        return
    token = _CURRENT.set(check_transfer_mode(mode))
    try:
        yield mode
    finally:
        _CURRENT.reset(token)


def check_transfer_mode(transfer_mode: str | None, dedup_transfers: bool | None = None) -> str:
    """The transfer mode asked for (``None``: :func:`current_transfer_mode`);
    ``dedup_transfers`` is its older boolean spelling (``True``: ``"per_destination"``,
    ``False``: ``"per_edge"``) and wins when given, unless it contradicts an explicit
    ``transfer_mode``.

    >>> check_transfer_mode("per_edge"), check_transfer_mode(None, dedup_transfers=False)
    ('per_edge', 'per_edge')
    """
    if transfer_mode is None:
        if dedup_transfers is not None:
            return "per_destination" if dedup_transfers else "per_edge"
        return _CURRENT.get()
    if transfer_mode not in TRANSFER_MODES:
        raise InputError(f"unknown transfer mode {transfer_mode!r}; use one of {TRANSFER_MODES}")
    if dedup_transfers is None:
        return transfer_mode
    implied = "per_destination" if dedup_transfers else "per_edge"
    if transfer_mode != implied:
        raise InputError(f"transfer_mode={transfer_mode!r} contradicts dedup_transfers={dedup_transfers!r}")
    return implied


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


def message_overheads(placement: Placement, tx: Transfers) -> np.ndarray:
    """Device time the transfer tasks ``tx`` add to each node (docs/semantics.md 2.1,
    per-message costs).

    A task ``x`` of node ``u`` from device ``a`` to device ``b`` adds
    ``send_overhead[a]`` to ``u`` (the executor posts a node's messages right after
    computing it, on its device) and ``recv_overhead[b]`` to the first of the task's
    destination nodes in topological position (the executor takes a message in just
    before the first node that reads it runs; where a device's order puts another
    consumer first, the same time lands on that node instead)::

        extra[v] = send_overhead[dev v] * |{x : src(x) = v}|
                 + recv_overhead[dev v] * |{x : v = argmin_{w in dst(x)} topo_position(w)}|

    >>> from dnnplace.graphs import Cluster, Device, OpGraph, Placement
    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["cpu"], compute=[[1.0]] * 3, memory=[0] * 3)
    >>> c = Cluster.from_links([Device("p", "cpu", send_overhead=0.5), Device("q", "cpu", recv_overhead=0.25)])
    >>> pl = Placement(g, c, [0, 1, 1])
    >>> message_overheads(pl, build_transfers(pl, dedup=True)).tolist()
    [0.5, 0.25, 0.0]
    >>> message_overheads(pl, build_transfers(pl, dedup=False)).tolist()
    [1.0, 0.25, 0.25]
    """
    g, cl = placement.graph, placement.cluster
    extra = np.zeros(g.n, dtype=np.float64)
    if not cl.has_message_costs or tx.edge.shape[0] == 0:
        return extra
    extra += np.bincount(tx.src_node, weights=cl.send_overhead[tx.src_dev], minlength=g.n)
    first_pos = np.minimum.reduceat(g.topo_position[tx.dst_nodes], tx.dst_ptr[:-1])
    extra += np.bincount(g.topo_order[first_pos], weights=cl.recv_overhead[tx.dst_dev], minlength=g.n)
    return extra


def placed_durations(placement: Placement, tx: Transfers) -> np.ndarray:
    """What each node occupies its device for: :func:`node_durations` plus
    :func:`message_overheads` of the transfer tasks ``tx``."""
    return node_durations(placement) + message_overheads(placement, tx)


def edge_transfer_times(placement: Placement) -> np.ndarray:
    """Per-edge transfer time on the placed devices (0 for same-device edges)."""
    g, cl = placement.graph, placement.cluster
    a, b = placement.device[g.src], placement.device[g.dst]
    return cl.transfer_time(a, b, g.edge_bytes, g.edge_cost)


def tensor_keys(placement: Placement, edges: np.ndarray) -> np.ndarray:
    """One integer per edge in ``edges`` naming the tensor it delivers to a device: equal
    exactly for edges of the same (source node, output, destination device)."""
    g, D = placement.graph, placement.cluster.size
    out = g.edge_output
    if out.any():
        codes = np.unique(out, return_inverse=True)[1].astype(np.int64)
        k = int(codes.max()) + 1
    else:
        codes, k = out, 1
    return (g.src[edges] * k + codes[edges]) * D + placement.device[g.dst[edges]]


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

    With ``dedup`` one task per (source node, output, destination device): it takes the
    longest of its edges (ties: lowest edge id, which represents the task); edges of one
    output carry the same bytes, so the longest only matters for inconsistent graphs
    (or edges with different explicit costs), where it is the conservative choice.
    """
    g = placement.graph
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
        key = tensor_keys(placement, ce)
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


def uneven_outputs(graph, limit: int = 3) -> tuple[int, list[str]]:
    """``(count, examples)``: how many outputs (source node, ``edges.output``) of ``graph``
    have edges that carry different bytes or explicit costs, and up to ``limit`` of them
    named (``'a' output 0: 4 edges, 50000 to 557000 bytes``). Under ``"per_destination"``
    each such output is sent once per consuming device at its largest edge's size; a
    graph written for one transfer per edge means ``"per_edge"``.

    >>> from dnnplace.graphs.graph import OpGraph
    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["gpu"], compute=[[1.0]] * 3,
    ...                      memory=[0] * 3, edge_bytes=[8.0, 2.0])
    >>> uneven_outputs(g)
    (1, ["'a' output 0: 2 edges, 2 to 8 bytes"])
    """
    m = graph.m
    if m < 2:
        return 0, []
    cost = np.nan_to_num(np.asarray(graph.edge_cost, dtype=np.float64), nan=-1.0)
    nbytes = np.asarray(graph.edge_bytes, dtype=np.float64)
    out = np.asarray(graph.edge_output, dtype=np.int64)
    order = np.lexsort((out, graph.src))
    src, out = graph.src[order], out[order]
    start = np.ones(m, dtype=bool)
    start[1:] = (src[1:] != src[:-1]) | (out[1:] != out[:-1])
    gid = np.cumsum(start) - 1
    k = int(gid[-1]) + 1
    uneven = np.zeros(k, dtype=bool)
    for arr in (nbytes[order], cost[order]):
        lo = np.full(k, np.inf)
        hi = np.full(k, -np.inf)
        np.minimum.at(lo, gid, arr)
        np.maximum.at(hi, gid, arr)
        uneven |= lo != hi
    groups = np.flatnonzero(uneven)
    examples = []
    for grp in groups[:limit]:
        members = order[gid == grp]
        b = nbytes[members]
        examples.append(f"{graph.ids[int(graph.src[members[0]])]!r} output {int(graph.edge_output[members[0]])}: "
                        f"{members.size} edges, {b.min():g} to {b.max():g} bytes")
    return int(groups.size), examples
