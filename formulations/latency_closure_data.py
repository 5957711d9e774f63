"""What the closure segmentation bound (:mod:`dnnplace.formulations.latency_bound`) reads of
an instance, computed once per graph: least compute per node on a CPU and on an accelerator,
memory and colocation-group memory, the least host transfers of each node's output, the
descendant / ancestor relation (as boolean rows and as Python-integer bit sets) and the
colocation groups (for ``q = 1``; singletons otherwise). The minimum-cut refinement
(:mod:`dnnplace.formulations.latency_piece_cut`) reads the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.reach import reachability

__all__ = ["ClosureData", "closure_data", "descendants", "group_close", "as_bits", "bit_members"]

_INF = float("inf")


def descendants(g: OpGraph) -> np.ndarray:
    """``D[v, w]``: ``w`` is reachable from ``v`` (``v`` itself included); ``(n, n)`` bool."""
    return reachability(g) | np.eye(g.n, dtype=bool)


@dataclass
class ClosureData:
    """See the module docstring; built by :func:`closure_data`."""

    g: OpGraph
    q: int
    stretches: int          # q * number of accelerators
    p_cpu: np.ndarray       # least CPU time (inf: no CPU runs it)
    p_acc: np.ndarray       # least accelerator time (inf: no accelerator runs it)
    cap: float              # largest accelerator memory
    mem: np.ndarray         # node memory
    gmem: np.ndarray        # memory of the node's colocation group (q = 1), else its own
    c_in: np.ndarray        # least host->accelerator transfer of the node's output
    c_out: np.ndarray       # least accelerator->host transfer of the node's output
    down: np.ndarray        # descendants(g)
    up: np.ndarray          # its transpose (ancestors), row-major
    gid: np.ndarray         # group index of every node (singletons their own; the identity for q >= 2)
    n_groups: int
    down_bits: list         # rows of down / up and each node's group as bit sets (see _bits)
    up_bits: list
    group_bits: list
    nonrun: int             # bit set of the nodes no accelerator runs
    mem_list: list
    uneven: bool            # some node's out-edges carry different transfer costs


def closure_data(g: OpGraph, cl: Cluster, q: int) -> ClosureData:
    """The data of ``g`` on ``cl`` for splits of at most ``q`` pieces per accelerator."""
    comp = np.where(np.isnan(cl.compute_matrix(g)), _INF, cl.compute_matrix(g))
    accs = [d for d in range(cl.size) if cl.kinds[d] != "cpu"]
    cpus = cl.devices_of_kind("cpu").tolist()
    p_cpu = comp[:, cpus].min(axis=1, initial=_INF)
    p_acc = comp[:, accs].min(axis=1, initial=_INF)
    mem = g.memory.astype(np.float64)
    group = g.colocation.copy() if q == 1 else np.full(g.n, -1)
    gmem = mem.copy()
    grouped = group >= 0
    if grouped.any():
        _, inv = np.unique(group[grouped], return_inverse=True)
        gmem[grouped] = np.bincount(inv, weights=mem[grouped])[inv]
    c_in, c_out = (np.full(g.n, _INF), np.full(g.n, _INF))
    uneven = False
    if cpus and accs and g.m:
        h = cpus[0]
        b, cost = g.edge_bytes, g.edge_cost
        e_in = np.min([np.where(np.isnan(cost), cl.beta0[h, a] + cl.beta1[h, a] * b, cost) for a in accs], axis=0)
        e_out = np.min([np.where(np.isnan(cost), cl.beta0[a, h] + cl.beta1[a, h] * b, cost) for a in accs], axis=0)
        np.minimum.at(c_in, g.src, np.maximum(e_in, 0.0))
        np.minimum.at(c_out, g.src, np.maximum(e_out, 0.0))
        uneven = bool((c_in[g.src] < e_in).any() or (c_out[g.src] < e_out).any())
    c_in[~np.isfinite(c_in)] = 0.0   # no out-edge (never charged) or no host (transfers not bounded)
    c_out[~np.isfinite(c_out)] = 0.0
    down = descendants(g)
    gid = np.unique(np.where(group >= 0, group, -1 - np.arange(g.n)), return_inverse=True)[1].ravel()
    up = np.ascontiguousarray(down.T)
    members = [as_bits(gid == k) for k in range(int(gid.max(initial=-1)) + 1)]
    return ClosureData(g, q, q * len(accs), p_cpu, p_acc, float(np.max(cl.memory[accs])) if accs else 0.0, mem, gmem,
                 c_in, c_out, down, up, gid, len(members), [as_bits(r) for r in down], [as_bits(r) for r in up],
                 [members[k] for k in gid.tolist()], as_bits(~np.isfinite(p_acc)), mem.tolist(), uneven)


def group_close(d: ClosureData, mask: np.ndarray) -> np.ndarray:
    """``mask`` plus every colocation group it meets (q = 1; ``gid`` is the identity otherwise)."""
    hit = np.zeros(d.n_groups, dtype=bool)
    hit[d.gid[mask]] = True
    return hit[d.gid]


def as_bits(mask: np.ndarray) -> int:
    """A boolean vector as a Python integer bit set (bit ``v`` = ``mask[v]``)."""
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def bit_members(bits: int):
    """The node indices in a bit set."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low
