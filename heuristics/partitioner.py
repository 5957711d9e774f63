"""Graph-partitioner baseline standing in for Scotch (Tarnawski et al. Tables 1 and 4).

The paper partitions the colocation-contracted graph with Scotch's ``gpart`` into ``k``
parts (accelerators only), balancing compute, with communication as edge weight. Here
the partitioner is METIS (k-way, through ``pymetis``): it installs from PyPI as a
self-contained wheel on a fresh machine (no system library or compiler needed), and
solves the same problem as ``gpart`` (balanced k-way partition minimising the weighted
edge cut). Units are colocation classes; a unit's weight is its accelerator compute
time; the weight of the edge between two units is the sum of ``c_u`` over the distinct
nodes ``u`` with an edge from one unit to the other, in both directions (as the
authors' driver builds it). Weights are scaled to integers (METIS needs them).

Memory is not a partitioning constraint (as for Scotch in the paper): the independent
evaluator reports any violation with its percentage, and the result is marked
infeasible rather than hidden. Splits may be non-contiguous.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels
from dnnplace.heuristics.transfer_costs import dp_devices, node_transfer_cost, subdivide_out_costs

__all__ = ["partition_split"]

_SCALE = 1_000_000  # total integer weight of all units


def partition_split(inst: Instance, *, seed: int = 0, memory: bool = False,
                    edge_costs: np.ndarray | None = None) -> Placement:
    """METIS k-way partition of the colocation classes onto the accelerators.

    ``memory=True`` balances memory as a second constraint (METIS multi-constraint
    partitioning: every part within the imbalance tolerance of its share of both compute
    and memory; Celeritas' Metis baseline). ``edge_costs`` (one per edge, e.g. nominal
    transfer times) weights the cut by the sum over crossing edges instead of Tarnawski's
    per-node ``c_u``.

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=range(4), kinds=("acc", "cpu"), compute=[[1, 1]] * 4, memory=[0] * 4,
    ...             src=[0, 2], dst=[1, 3], edge_cost=[5, 5])
    >>> p = partition_split(Instance(g, Cluster.tarnawski(2, 1, 10)))
    >>> sorted(np.bincount(p.device).tolist())  # the two chains land on different devices
    [2, 2]
    """
    import pymetis

    g, cl = inst.graph, inst.require_cluster()
    if edge_costs is None:
        sub = subdivide_out_costs(g, cl)
        if sub is not g:  # out-edges of different costs (Appendix B): partition the subdivided graph
            p = partition_split(Instance(sub, cl, inst.source), seed=seed, memory=memory)
            return Placement(g, cl, p.device[: g.n])
    accs, cpus = dp_devices(cl)
    if accs.size == 0:  # a CPU-only cluster (local-cpu-N): its CPUs are the parts
        accs, cpus = cpus, cpus[:0]
    if accs.size == 0:
        raise InputError("the partitioner needs at least one device")
    comp = cl.compute_matrix(g)[:, accs[0]]
    lab = colocation_labels(g)
    k = int(lab.max()) + 1
    unsupported = np.bincount(lab, weights=np.isnan(comp).astype(float), minlength=k) > 0
    w = np.bincount(lab, weights=np.nan_to_num(comp), minlength=k)
    total = max(float(w.sum()), 1e-300)
    vw = np.maximum(np.rint(w / total * _SCALE), 1).astype(np.int64)
    if memory:
        um = np.bincount(lab, weights=g.memory, minlength=k)
        mw = np.maximum(np.rint(um / max(float(um.sum()), 1e-300) * _SCALE), 1).astype(np.int64)
        vw = np.stack([vw, mw], axis=1).ravel()  # METIS: ncon = 2 weights per vertex, interleaved
    a, b = lab[g.src], lab[g.dst]
    cross = a != b
    if edge_costs is None:
        c = node_transfer_cost(g, cl)
        # distinct (source node, target unit) pairs, then summed per unordered unit pair
        pairs = np.unique(np.stack([g.src[cross], b[cross]], axis=1), axis=0) if cross.any() \
            else np.empty((0, 2), np.int64)
        ua, ub, cw = lab[pairs[:, 0]], pairs[:, 1], c[pairs[:, 0]]
    else:
        ua, ub, cw = a[cross], b[cross], np.asarray(edge_costs, dtype=np.float64)[cross]
    lo, hi = np.minimum(ua, ub), np.maximum(ua, ub)
    key, inv = np.unique(lo * k + hi, return_inverse=True)
    ew = np.bincount(inv, weights=cw, minlength=key.size)
    scale_e = _SCALE / max(float(ew.max()) if ew.size else 1.0, 1e-300) / 10
    ewi = np.maximum(np.rint(ew * scale_e), 1).astype(np.int64)
    s_, d_ = key // k, key % k
    src = np.concatenate([s_, d_])
    dst = np.concatenate([d_, s_])
    wts = np.concatenate([ewi, ewi])
    order = np.lexsort((dst, src))
    src, dst, wts = src[order], dst[order], wts[order]
    xadj = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=k), out=xadj[1:])
    nparts = int(accs.size)
    if nparts == 1 or k <= 1:
        parts = np.zeros(k, dtype=np.int64)
    else:
        opts = pymetis.Options(seed=seed)
        adj = pymetis.CSRAdjacency(xadj.tolist(), dst.tolist())
        _, parts = pymetis.part_graph(nparts, adj, vweights=vw.tolist(), eweights=wts.tolist(), options=opts)
        parts = np.asarray(parts, dtype=np.int64)
    unit_dev = accs[parts]
    if unsupported.any():
        if cpus.size == 0:
            raise InputError("some nodes cannot run on the accelerators and there is no CPU")
        unit_dev[unsupported] = cpus[0]
    return Placement(g, cl, unit_dev[lab])
