"""The transfer costs the max-load DP charges: one cost ``c_u`` per node (Tarnawski et al.).

:func:`dp_devices` picks the identical accelerators and the CPUs the DP places on;
:func:`edge_transfer_costs` prices every edge (its explicit cost, else the link model
accelerator->host); :func:`node_transfer_cost` is the per-node ``c_u`` where a node's
out-edges agree, and :func:`subdivide_out_costs` (Appendix B) rewrites a graph whose nodes'
out-edges differ so that they agree, charging the evaluator's largest crossing edge.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["dp_devices", "edge_transfer_costs", "node_transfer_cost", "subdivide_out_costs"]


def dp_devices(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """Accelerator and CPU device indices, capped by ``meta['device_limit']``."""
    accs = np.array([i for i, kd in enumerate(cluster.kinds) if kd != "cpu"], dtype=np.int64)
    cpus = cluster.devices_of_kind("cpu").astype(np.int64)
    limit = cluster.meta.get("device_limit", {})
    if accs.size:
        akind = cluster.kinds[accs[0]]
        if any(cluster.kinds[a] != akind for a in accs):
            raise InputError("the max-load DP needs identical accelerators (one device kind besides 'cpu')")
        accs = accs[: limit.get(akind, accs.size)]
        if (np.unique(cluster.memory[accs]).size > 1 or np.unique(cluster.speed[accs]).size > 1
                or np.unique(cluster.op_overhead[accs]).size > 1):
            raise InputError("the max-load DP needs identical accelerators (same memory, speed and op_overhead)")
    cpus = cpus[: limit.get("cpu", cpus.size)]
    return accs, cpus


def edge_transfer_costs(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Every edge's transfer cost: its explicit cost, or the link model accelerator->host."""
    accs, cpus = dp_devices(cluster)
    cost = graph.edge_cost.copy()
    miss = np.isnan(cost)
    if miss.any():
        if accs.size == 0:
            cost[miss] = 0.0
        else:
            a = accs[0]
            h = cpus[0] if cpus.size else a
            cost[miss] = cluster.beta0[a, h] + cluster.beta1[a, h] * graph.edge_bytes[miss]
    return cost


def _out_cost_spread(graph: OpGraph, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the largest cost of its out-edges (``-inf`` without one), and whether its
    out-edges cost differently (beyond rounding)."""
    hi = np.full(graph.n, -np.inf)
    lo = np.full(graph.n, np.inf)
    np.maximum.at(hi, graph.src, cost)
    np.minimum.at(lo, graph.src, cost)
    return hi, np.isfinite(hi) & (hi - lo > 1e-9 * np.maximum(1.0, np.abs(hi)))


def subdivide_out_costs(graph: OpGraph, cluster: Cluster) -> OpGraph:
    """Tarnawski et al. Appendix B: a node whose out-edges carry different transfer costs
    is subdivided, so that every node has one cost ``c_u`` as the DP assumes; ``graph``
    itself when no node needs it.

    The evaluator charges such a node ``u``, per direction and device, the *largest*
    crossing edge (:func:`dnnplace.evaluation.loads.device_loads`). With ``u``'s distinct
    costs ``a_1 < ... < a_k`` (``a_0 = 0``), ``u`` gets ``k`` new nodes ``u/appB{j}``,
    colocated with ``u`` (zero compute where ``u`` runs, zero memory, ``u``'s forward or
    backward part), an edge ``u -> u/appB{j}`` of cost 0 and, for every successor ``v``
    whose edge costs at least ``a_j``, an edge ``u/appB{j} -> v`` of cost ``a_j - a_{j-1}``;
    ``u``'s own out-edges go. A device holding successors of ``u`` whose largest edge
    costs ``a_t`` then pays the increments of levels ``1..t``, i.e. exactly ``a_t``, and
    ``u``'s device pays the largest crossing cost out: a split of the new graph restricted
    to the original nodes (its first ``graph.n``) has the same loads, contiguity and
    pipeline order as the split of ``graph``, and every split of ``graph`` extends to one
    of the new graph (the new nodes on ``u``'s device). The paper's subdivision charges the
    sum of a node's crossing edges; this staircase charges their maximum, the evaluator's
    rule (the same staircase as the max-load IP's comm levels).

    >>> from dnnplace.graphs import Cluster
    >>> g = OpGraph(ids="uvw", kinds=["acc"], compute=[[1.0]] * 3, memory=[0] * 3, src=[0, 0], dst=[1, 2],
    ...             edge_cost=[2.0, 5.0])
    >>> s = subdivide_out_costs(g, Cluster.tarnawski(2, 0, 10))
    >>> sorted((s.ids[a], s.ids[b], c) for a, b, c in zip(s.src.tolist(), s.dst.tolist(), s.edge_cost.tolist()))
    [('u', 'u/appB0', 0.0), ('u', 'u/appB1', 0.0), ('u/appB0', 'v', 2.0), ('u/appB0', 'w', 2.0), ('u/appB1', 'w', 3.0)]
    """
    cost = edge_transfer_costs(graph, cluster)
    n, m = graph.n, graph.m
    if m == 0:
        return graph
    hi, split = _out_cost_spread(graph, cost)
    if not split.any():
        return graph
    keep = ~split[graph.src]
    src, dst, cst = [graph.src[keep]], [graph.dst[keep]], [graph.edge_cost[keep]]
    byts = [graph.edge_bytes[keep]]
    new_ids, owner = [], []
    coloc = graph.colocation.copy()
    labels = list(graph.colocation_labels)
    ids = [str(x) for x in graph.ids]
    taken = set(ids)
    for u in np.flatnonzero(split).tolist():
        rows = np.flatnonzero(graph.src == u)
        succ, inv = np.unique(graph.dst[rows], return_inverse=True)
        best = np.full(succ.size, -np.inf)
        np.maximum.at(best, inv, cost[rows])  # the largest edge to each successor
        levels = np.unique(np.round(best, 12))
        if coloc[u] < 0:
            coloc[u] = len(labels)
            labels.append(f"{ids[u]}/appB")
        prev = 0.0
        for j, a in enumerate(levels.tolist()):
            name, k = f"{ids[u]}/appB{j}", 0
            while name in taken:
                k += 1
                name = f"{ids[u]}/appB{j}.{k}"
            taken.add(name)
            y = n + len(new_ids)
            new_ids.append(name)
            owner.append(u)
            targets = succ[best >= a - 1e-12 * max(1.0, abs(a))]
            src += [np.array([u]), np.full(targets.size, y)]
            dst += [np.array([y]), targets]
            cst += [np.array([0.0]), np.full(targets.size, a - prev)]
            byts += [np.zeros(1), np.zeros(targets.size)]
            prev = a
    own = np.asarray(owner, dtype=np.int64)
    k = own.size

    def extend(values, fill=None):
        if values is None:
            return None
        return tuple(values) + tuple(values[u] if fill is None else fill for u in own.tolist())

    comp = graph.compute[own]
    return graph.with_(
        ids=tuple(graph.ids) + tuple(new_ids),
        compute=np.vstack([graph.compute, np.where(np.isnan(comp), np.nan, 0.0)]),
        memory=np.concatenate([graph.memory, np.zeros(k)]), src=np.concatenate(src), dst=np.concatenate(dst),
        edge_bytes=np.concatenate(byts), edge_cost=np.concatenate(cst),
        edge_batch_scaled=np.zeros(sum(a.size for a in src), dtype=bool),
        persistent_bytes=np.concatenate([graph.persistent_bytes, np.zeros(k)]),
        output_bytes=np.concatenate([graph.output_bytes, np.zeros(k)]),
        colocation=np.concatenate([coloc, coloc[own]]), colocation_labels=tuple(labels),
        backward=np.concatenate([graph.backward, graph.backward[own]]),
        names=None if graph.names is None else tuple(graph.names) + tuple(new_ids),
        op_types=extend(graph.op_types, "AppendixB"), layers=extend(graph.layers), roles=extend(graph.roles))


def node_transfer_cost(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Tarnawski's ``c_u`` per node: the explicit cost of u's out-edges, or the link
    model accelerator->host; raises if u's out-edges cost differently (the evaluator
    would charge the largest crossing one, which a per-node cost cannot represent:
    :func:`subdivide_out_costs` first, as :func:`maxload_dp` does)."""
    cost = edge_transfer_costs(graph, cluster)
    hi, split = _out_cost_spread(graph, cost)
    has = np.isfinite(hi)
    bad = np.flatnonzero(split)
    if bad.size:
        raise InputError(f"node {graph.ids[bad[0]]!r} has out-edges with different transfer costs; this method "
                         "charges one cost per node (the DP and the IP handle such graphs: Appendix B)")
    return np.where(has, hi, 0.0)
