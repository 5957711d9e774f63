"""Exact max-load DP over ideals and its linearisation heuristic (Tarnawski et al. 2020).

Methods ``dp`` (Sec. 5.1.1, Sec. 5.3, Appendix B) and ``dpl`` (Sec. 5.1.2).

The recurrence (Sec. 5.1.1), over ideals ``I`` of the preprocessed forward DAG ``H``
(:func:`dnnplace.heuristics.ideals.build_dp_graph`) and device counts ``k' <= k``, ``l' <= l``::

    dp[I][k'][l'] = min_{ideal I' subset I} min( max(dp[I'][k'-1][l'], acc(I \\ I')),
                                               max(dp[I'][k'][l'-1], cpu(I \\ I')) )

with ``dp[{}][.][.] = 0`` (devices may stay empty). ``acc(S)`` is the accelerator load
of docs/semantics.md 2.2 of *all original nodes* carried by ``S`` (forward members and their
colocated backward partners): compute plus every transfer ``c_u`` paid once per node
and direction, ``inf`` if ``S`` does not fit in memory or holds a node the accelerator
cannot run; ``cpu(S)`` is compute only. For training graphs a forward set is only used
when its backward partners form a contiguous set of the backward part (Sec. 5.3), so
the split is contiguous per part (the evaluator's ``contiguity="both"``), on CPUs too.

A node whose out-edges carry different transfer costs (every captured graph has some) is
first subdivided (:func:`subdivide_out_costs`, Appendix B with the evaluator's
largest-crossing-edge charge); the answer keeps the original nodes' devices.

Objectives: ``pipedream`` (sum of compute and transfers, the paper's default) and
``overlap`` (Appendix C.1: ``max(comm, compute)``). Not done: GPipe's objective (not
separable over devices), replication (C.2) and hierarchies (C.3).

Speed (see ``python -m benchmarks dp``): DPL runs first and its value bounds the exact
DP, whose superset walks stop as soon as a set's compute exceeds that bound
(:mod:`dnnplace.heuristics.dp_kernel`).

Size limit: the ideals are held as bitsets with their cover relation, so memory grows
with the number of ideals (``max_ideals``, default 6 million: about 2.4 GB, measured 1.7 GB at
4.3 million in ``results/bench-dp-scale.txt``). Past it the DP does not
give up silently: it returns DPL's split as the incumbent with ``complete=False`` and a
valid lower bound (:func:`load_lower_bound`), so the caller reports a gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.reach import closure_bits
from dnnplace.graphs.replication import Replication, node_weights
from dnnplace.heuristics.dp_kernel import ideal_sizes, new_tables, run_dp
from dnnplace.heuristics.ideals import (
    DPGraph,
    IdealLattice,
    TooManyIdeals,
    build_dp_graph,
    enumerate_ideals,
    linearize,
)

__all__ = ["DPResult", "maxload_dp", "node_transfer_cost", "load_lower_bound", "subdivide_out_costs"]

OBJECTIVES = ("pipedream", "overlap")


@dataclass
class DPResult:
    """Outcome of one DP run: the split, its max-load and counters for the benchmark."""

    placement: Placement | None
    value: float
    ideals: int
    pairs_visited: int
    dp_nodes: int
    seconds: dict[str, float] = field(default_factory=dict)
    linearized: bool = False
    complete: bool = True
    lower_bound: float | None = None
    stopped: str | None = None  # why an incomplete run stopped: "ideal_limit" or "time_limit"


def _devices(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
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


def _edge_costs(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Every edge's transfer cost: its explicit cost, or the link model accelerator->host."""
    accs, cpus = _devices(cluster)
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


def subdivide_out_costs(graph: OpGraph, cluster: Cluster) -> OpGraph:
    """Tarnawski et al. Appendix B: a node whose out-edges carry different transfer costs
    is subdivided, so that every node has one cost ``c_u`` as the DP assumes; ``graph``
    itself when no node needs it.

    The evaluator charges such a node ``u``, per direction and device, the *largest*
    crossing edge (:func:`dnnplace.graphs.evaluation.loads.device_loads`). With ``u``'s distinct
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
    cost = _edge_costs(graph, cluster)
    n, m = graph.n, graph.m
    if m == 0:
        return graph
    hi = np.full(n, -np.inf)
    lo = np.full(n, np.inf)
    np.maximum.at(hi, graph.src, cost)
    np.minimum.at(lo, graph.src, cost)
    split = np.isfinite(hi) & (hi - lo > 1e-9 * np.maximum(1.0, np.abs(hi)))
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
    cost = _edge_costs(graph, cluster)
    hi = np.full(graph.n, -np.inf)
    lo = np.full(graph.n, np.inf)
    np.maximum.at(hi, graph.src, cost)
    np.minimum.at(lo, graph.src, cost)
    has = np.isfinite(hi)
    bad = np.flatnonzero(has & (hi - lo > 1e-9 * np.maximum(1.0, np.abs(hi))))
    if bad.size:
        raise InputError(f"node {graph.ids[bad[0]]!r} has out-edges with different transfer costs; this method "
                         "charges one cost per node (the DP and the IP handle such graphs: Appendix B)")
    return np.where(has, hi, 0.0)


@dataclass
class _Prepared:
    h: DPGraph
    lattice: IdealLattice
    arrays: dict[str, Any]


def _bitsets(rows: list[np.ndarray], nbits: int) -> np.ndarray:
    words = max(1, (nbits + 63) // 64)
    out = np.zeros((len(rows), words), dtype=np.uint64)
    for r, bits in enumerate(rows):
        for b in bits.tolist():
            out[r, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out


def _replication_settings(inst: Instance, replicas: int, sync_per_byte: float | None) -> float:
    """Check the replication factor against the accelerators; the all-reduce time per byte."""
    accs, _ = _devices(inst.require_cluster())
    if replicas < 1 or (replicas > 1 and replicas > accs.size):
        raise InputError(f"replication factor {replicas} needs between 1 and the {accs.size} accelerators "
                         "of the cluster")
    if sync_per_byte is not None:
        if not np.isfinite(sync_per_byte) or sync_per_byte < 0:
            raise InputError(f"sync_per_byte must be a finite number >= 0, got {sync_per_byte}")
        return float(sync_per_byte)
    cl = inst.require_cluster()
    return float(cl.beta1[np.ix_(accs, accs)].max(initial=0.0)) if accs.size > 1 else 0.0


def load_lower_bound(inst: Instance, replicas: int = 1) -> float:
    """A lower bound on the max-load of every split (any contiguity, either objective):
    every node runs somewhere, and a device's load is at least its compute, so the
    optimum is at least the largest ``min(p_acc(v), p_cpu(v))`` (divided by ``replicas``,
    the largest replication factor) and at least the total of these minima spread over
    all ``k + l`` devices (a stage on ``r`` replicas takes ``r`` devices).

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1, 2], kinds=("acc", "cpu"), compute=[[2, 9], [2, 9], [5, 9]],
    ...             memory=[0, 0, 0], src=[0, 1], dst=[1, 2])
    >>> load_lower_bound(Instance(g, Cluster.tarnawski(2, 0, 10)))  # max(5, 9 / 2)
    5.0
    """
    g, cl = inst.graph, inst.require_cluster()
    accs, cpus = _devices(cl)
    comp = cl.compute_matrix(g)
    cols = [comp[:, accs[0]]] if accs.size else []
    cols += [comp[:, cpus[0]]] if cpus.size else []
    best = np.nanmin(np.where(np.isnan(np.stack(cols, axis=1)), np.inf, np.stack(cols, axis=1)), axis=1)
    if not np.isfinite(best).all():
        return float("inf")
    return float(max(best.max(initial=0.0) / replicas, best.sum() / max(1, accs.size + cpus.size)))


def _prepare(inst: Instance, *, linear: bool, trivial: bool = True, max_ideals: int = 6_000_000,
             deadline: float | None = None) -> _Prepared:
    g, cl = inst.graph, inst.require_cluster()
    accs, cpus = _devices(cl)
    h = build_dp_graph(g, trivial=trivial)
    src, dst = h.src, h.dst
    if linear:
        ps, pd = linearize(h.n, src, dst)
        src, dst = np.concatenate([src, ps]), np.concatenate([dst, pd])
    lattice = enumerate_ideals(h.n, src, dst, max_ideals=max_ideals, deadline=deadline)
    grp = h.group
    comp = cl.compute_matrix(g)
    acc_t = comp[:, accs[0]] if accs.size else np.full(g.n, np.nan)
    cpu_t = comp[:, cpus[0]] if cpus.size else np.full(g.n, np.nan)
    acc_ok = np.bincount(grp, weights=np.isnan(acc_t).astype(float), minlength=h.n) == 0
    cpu_ok = np.bincount(grp, weights=np.isnan(cpu_t).astype(float), minlength=h.n) == 0
    acc_c = np.bincount(grp, weights=np.nan_to_num(acc_t), minlength=h.n)
    cpu_c = np.bincount(grp, weights=np.nan_to_num(cpu_t), minlength=h.n)
    mem = np.bincount(grp, weights=g.memory, minlength=h.n)
    wgt = np.bincount(grp, weights=node_weights(g), minlength=h.n)
    # one transfer term per original node with an out-edge to another DP node
    c = node_transfer_cost(g, cl)
    gs, gd = grp[g.src], grp[g.dst]
    cross = gs != gd
    pairs = np.unique(np.stack([g.src[cross], gd[cross]], axis=1), axis=0) if cross.any() \
        else np.empty((0, 2), np.int64)
    owners_u, term_of = np.unique(pairs[:, 0], return_inverse=True)
    owner = grp[owners_u].astype(np.int64)
    cost = c[owners_u]
    ntarget = np.bincount(term_of, minlength=owners_u.size).astype(np.int64)
    own_order = np.argsort(owner, kind="stable")
    own_ptr = np.zeros(h.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=h.n), out=own_ptr[1:])
    tgt = pairs[:, 1]
    tgt_order = np.argsort(tgt, kind="stable")
    tgt_ptr = np.zeros(h.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tgt, minlength=h.n), out=tgt_ptr[1:])
    # backward contiguity data (training graphs)
    bw = g.backward
    check_bw = bool(bw.any())
    if check_bw:
        bidx = np.full(g.n, -1, dtype=np.int64)
        bnodes = np.flatnonzero(bw)
        bidx[bnodes] = np.arange(bnodes.size)
        nb = bnodes.size
        bmask = _bitsets([bidx[bnodes[grp[bnodes] == x]] for x in range(h.n)], nb)
        be = bw[g.src] & bw[g.dst]
        es, ed = bidx[g.src[be]], bidx[g.dst[be]]
        desc, anc = closure_bits(OpGraph(ids=range(nb), kinds=("x",), compute=np.zeros((nb, 1)),
                                         memory=np.zeros(nb), src=es, dst=ed))
        ideal_bw = _ideal_union(lattice, bmask)
        ideal_ok = _is_filter(ideal_bw, es, ed)
    else:
        bmask = np.zeros((h.n, 1), dtype=np.uint64)
        desc = anc = np.zeros((1, 1), dtype=np.uint64)
        ideal_ok = np.ones(lattice.size, dtype=np.bool_)
    arrays = dict(acc_c=acc_c, acc_ok_node=acc_ok, cpu_c=cpu_c, cpu_ok_node=cpu_ok, mem=mem, wgt=wgt,
                  mem_cap=float(cl.memory[accs[0]]) if accs.size else 0.0,
                  owner=owner, cost=cost, ntarget=ntarget, own_ptr=own_ptr, own_term=own_order.astype(np.int64),
                  tgt_ptr=tgt_ptr, tgt_term=term_of[tgt_order].astype(np.int64),
                  ideal_ok=ideal_ok, bmask=bmask, desc=desc, anc=anc, check_bw=check_bw,
                  k=int(accs.size), l=int(cpus.size), accs=accs, cpus=cpus)
    return _Prepared(h, lattice, arrays)


def _ideal_union(lat: IdealLattice, bmask: np.ndarray) -> np.ndarray:
    """Backward nodes carried by every ideal (bitsets), along the cover relation."""
    out = np.zeros((lat.size, bmask.shape[1]), dtype=np.uint64)
    first = np.full(lat.size, -1, dtype=np.int64)
    src_of = np.repeat(np.arange(lat.size), np.diff(lat.cover_ptr))
    # the first cover reaching each ideal (BFS order: sources come earlier)
    order = np.argsort(lat.cover_to, kind="stable")
    tos = lat.cover_to[order]
    starts = np.flatnonzero(np.r_[True, tos[1:] != tos[:-1]])
    first[tos[starts]] = order[starts]
    for j in range(1, lat.size):
        e = first[j]
        out[j] = out[src_of[e]] | bmask[lat.cover_node[e]]
    return out


def _is_filter(sets: np.ndarray, es: np.ndarray, ed: np.ndarray) -> np.ndarray:
    """Rows that are closed under backward successors (then differences of two such
    sets are contiguous)."""
    ok = np.ones(sets.shape[0], dtype=np.bool_)
    one = np.uint64(1)
    for a, b in zip(es.tolist(), ed.tolist()):
        ina = (sets[:, a >> 6] >> np.uint64(a & 63)) & one
        inb = (sets[:, b >> 6] >> np.uint64(b & 63)) & one
        ok &= ~((ina == 1) & (inb == 0))
    return ok


def _run(prep: _Prepared, ub: float, overlap: bool,
         deadline: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Push the sources in chunks of about 0.25 s (by a budget of ideal pairs, adapted
    to the measured rate) until all are done or ``deadline`` (a ``perf_counter`` time)
    passes. Returns ``(dp, parent, kind, rep, pairs visited, sources done)``."""
    a, lat = prep.arrays, prep.lattice
    dp, parent, kind, rep, stamp = new_tables(lat.size, a["k"], a["l"])
    visited, done, budget = 0, 0, 100_000
    while done < lat.size - 1:
        t = time.perf_counter()
        pairs, done = run_dp(lat.size, lat.cover_ptr, lat.cover_node, lat.cover_to, a["acc_c"], a["acc_ok_node"],
                             a["cpu_c"], a["cpu_ok_node"], a["mem"], a["mem_cap"], a["owner"], a["cost"],
                             a["ntarget"], a["own_ptr"], a["own_term"], a["tgt_ptr"], a["tgt_term"], a["ideal_ok"],
                             a["bmask"], a["desc"], a["anc"], a["check_bw"], a["k"], a["l"], float(ub), overlap,
                             dp, parent, kind, rep, stamp, done, budget, a["wgt"], float(a.get("sync", 0.0)),
                             int(a.get("rmax", 1)))
        visited += pairs
        now = time.perf_counter()
        if deadline is not None and now > deadline:
            break
        if pairs and now > t:
            budget = int(min(max(pairs * 0.25 / (now - t), 10_000), 1e9))
    return dp, parent, kind, rep, visited, done


def _prefix_lower_bound(prep: _Prepared, dp: np.ndarray, done: int) -> float:
    """A lower bound on the optimum from a DP stopped after ``done`` sources.

    Ideals come in order of size, so every ideal of size at most ``L`` (the size of
    ideal ``done + 1`` less one) has its exact entries. On an optimal chain of ideals let
    ``I`` be the last one of size ``<= L``, split over ``a`` accelerators and ``b``
    CPUs: the optimum is at least ``dp[I][a][b]``; at least the load of the next stage,
    which holds ``>= L + 1 - |I|`` DP nodes (its work divided by the largest
    replication factor, Appendix C.2), so at least the sum ``P`` of that many
    smallest per-node minimum times, and at least the least work of an ideal of size
    ``L + 1`` less the work of ``I``; and at least the minimum work outside ``I``
    spread over the ``k + l - a - b`` devices left. The bound is the minimum of the
    largest of the three over all such ``(I, a, b)`` (entries above the pruning bound
    are never on an optimal chain, so their ``inf`` is harmless).
    """
    a, lat = prep.arrays, prep.lattice
    k, l = a["k"], a["l"]  # noqa: E741 (the paper's k, l)
    both = np.stack([np.where(a["acc_ok_node"] & (k > 0), a["acc_c"], np.inf),
                     np.where(a["cpu_ok_node"] & (l > 0), a["cpu_c"], np.inf)], axis=1)
    w = both.min(axis=1)
    if not np.isfinite(w).all():
        return float("inf")
    size, work = ideal_sizes(lat.cover_ptr, lat.cover_node, lat.cover_to, w, lat.size)
    cut = size[done + 1] - 1 if done + 1 < lat.size else lat.n_nodes
    m = int(np.searchsorted(size[: done + 1], cut, side="right"))  # ideals of size <= cut
    prefix = np.concatenate([[0.0], np.cumsum(np.sort(w))])
    # the next chain ideal J has size >= cut + 1, so work(J) >= the least work of an ideal
    # of size cut + 1 (work grows along inclusion), and the stage J \ I has work(J) - work(I)
    next_work = work[size == cut + 1].min(initial=np.inf) if cut + 1 <= lat.n_nodes else np.inf
    stage = np.maximum(prefix[np.clip(cut + 1 - size[:m], 0, w.size)], next_work - work[:m]) / a.get("rmax", 1)
    left = (k + l) - np.add.outer(np.arange(k + 1), np.arange(l + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = (w.sum() - work[:m])[:, None, None] / np.where(left > 0, left, np.nan)[None]
    cand = np.maximum(np.maximum(dp[:m], stage[:, None, None]), rest)
    cand[:, left <= 0] = np.inf
    return float(np.nan_to_num(cand, nan=np.inf).min(initial=np.inf))


def _decode(inst: Instance, prep: _Prepared, parent: np.ndarray, kind: np.ndarray, rep: np.ndarray) -> Placement:
    """Follow the parents from the full ideal; a stage with ``rep = r > 1`` takes ``r``
    accelerators (the first is its primary, the others its replica group)."""
    lat, h, a = prep.lattice, prep.h, prep.arrays
    dev_of_dp = np.full(h.n, -1, dtype=np.int64)
    cur, kk, ll = lat.size - 1, a["k"], a["l"]
    ia = ic = 0
    groups = []
    while cur != 0:
        prev = int(parent[cur, kk, ll])
        if prev < 0:
            raise RuntimeError("DP backtracking hit an unset entry")
        nodes = np.setdiff1d(lat.nodes(cur), lat.nodes(prev))
        if kind[cur, kk, ll] == 0:
            r = int(rep[cur, kk, ll])
            dev_of_dp[nodes] = a["accs"][ia]
            if r > 1:
                groups.append(tuple(int(d) for d in a["accs"][ia:ia + r]))
            ia += r
            kk -= r
        else:
            dev_of_dp[nodes] = a["cpus"][ic]
            ic += 1
            ll -= 1
        cur = prev
    replication = Replication(tuple(groups), float(a.get("sync", 0.0))) if a.get("rmax", 1) > 1 else None
    return Placement(inst.graph, inst.require_cluster(), dev_of_dp[h.group], replication)


def maxload_dp(inst: Instance, *, linearized: bool = False, objective: str = "pipedream",
               upper_bound: float | None = None, trivial: bool = True, max_ideals: int = 6_000_000,
               time_limit: float | None = None, replicas: int = 1, sync_per_byte: float | None = None) -> DPResult:
    """Optimal contiguous max-load split (or DPL's, with ``linearized=True``).

    Parameters
    ----------
    inst : Instance
        Graph with a cluster of identical accelerators and CPUs (Tarnawski's model).
    linearized : bool
        Run DPL (Sec. 5.1.2): add the path of a DFS topological order first.
    objective : {"pipedream", "overlap"}
        Load = compute + transfers (default) or their maximum (Appendix C.1).
    upper_bound : float, optional
        A known achievable max-load; by default the exact DP runs DPL first to get one.
    trivial : bool
        Merge zero-cost one-neighbour nodes into their neighbour first (exact for the
        loads; see :func:`dnnplace.heuristics.ideals._merge_trivial`).
    max_ideals : int
        Memory limit of the exact DP. With more ideals the result is DPL's split with
        ``complete=False`` and ``lower_bound`` from :func:`load_lower_bound`.
    replicas : int
        Largest replication factor of a stage (Appendix C.2; 1 = none): a stage may run on
        up to this many accelerators (:mod:`dnnplace.graphs.replication`), and the
        placement then carries its replica groups.
    sync_per_byte : float, optional
        All-reduce time per byte of a replicated stage's weights (the paper's ``1/B``);
        default the cluster's accelerator-to-accelerator ``beta1`` (largest pair).
    time_limit : float, optional
        Seconds for the exact DP's table (checked between chunks of sources). When it
        runs out: the better of DPL's split and the best full split in the table so
        far, ``complete=False``, and the lower bound of the exact prefix of the table
        (:func:`_prefix_lower_bound`, at least :func:`load_lower_bound`).

    Returns
    -------
    DPResult
        ``placement`` is ``None`` when no split is feasible (``value`` is ``inf``);
        ``complete`` says whether ``value`` is the optimum (``lower_bound`` = ``value``).

    References
    ----------
    Tarnawski, Phanishayee, Devanur, Mahajan, Nina Paravecino. Efficient Algorithms for
    Device Placement of DNN Graph Operators. NeurIPS 2020, Sec. 5.1, 5.3, App. B.

    Examples
    --------
    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> from dnnplace.graphs.instance import Instance
    >>> g = OpGraph(ids=[0, 1, 2], kinds=("acc", "cpu"), compute=[[2, 9], [2, 9], [2, 9]],
    ...             memory=[0, 0, 0], src=[0, 1], dst=[1, 2], edge_cost=[1, 1])
    >>> maxload_dp(Instance(g, Cluster.tarnawski(2, 0, 10))).value  # {0,1} + {2}: 4 + 1
    5.0
    """
    if objective not in OBJECTIVES:
        raise InputError(f"the DP supports objectives {OBJECTIVES}, not {objective!r}")
    sub = subdivide_out_costs(inst.graph, inst.require_cluster())
    if sub is not inst.graph:  # Appendix B: solve the subdivided graph, keep the original nodes' devices
        res = maxload_dp(Instance(sub, inst.cluster, inst.source), linearized=linearized, objective=objective,
                         upper_bound=upper_bound, trivial=trivial, max_ideals=max_ideals, time_limit=time_limit,
                         replicas=replicas, sync_per_byte=sync_per_byte)
        if res.placement is not None:
            res.placement = Placement(inst.graph, inst.cluster, res.placement.device[: inst.graph.n],
                                      res.placement.replication)
        res.seconds["subdivided_nodes"] = float(sub.n - inst.graph.n)
        return res
    sync = _replication_settings(inst, replicas, sync_per_byte)
    t0 = time.perf_counter()
    deadline = None if time_limit is None or linearized else t0 + float(time_limit)
    try:
        prep = _prepare(inst, linear=linearized, trivial=trivial, max_ideals=max_ideals, deadline=deadline)
    except TooManyIdeals as exc:
        if linearized:
            raise
        res = maxload_dp(inst, linearized=True, objective=objective, trivial=trivial, replicas=replicas,
                         sync_per_byte=sync)
        why = "time_limit" if exc.timed_out else "ideal_limit"
        res.seconds = {why: time.perf_counter() - t0, **res.seconds}
        res.complete, res.linearized, res.stopped = False, False, why
        res.lower_bound = min(load_lower_bound(inst, replicas), res.value)
        res.ideals = exc.count
        return res
    prep.arrays.update(rmax=int(replicas), sync=sync)
    t1 = time.perf_counter()
    seconds = {"prepare": t1 - t0}
    ub = np.inf if upper_bound is None else float(upper_bound)
    if not linearized and upper_bound is None:
        first = maxload_dp(inst, linearized=True, objective=objective, trivial=trivial, replicas=replicas,
                           sync_per_byte=sync)
        ub = first.value
        seconds["dpl_bound"] = sum(first.seconds.values())
    ub_slack = ub * (1 + 1e-9) + 1e-12 if np.isfinite(ub) else np.inf
    t2 = time.perf_counter()
    dp, parent, kind, rep, visited, done = _run(prep, ub_slack, objective == "overlap", deadline)
    t3 = time.perf_counter()
    seconds["dp"] = t3 - t2
    a = prep.arrays
    value = float(dp[-1, a["k"], a["l"]])
    placement = _decode(inst, prep, parent, kind, rep) if np.isfinite(value) else None
    res = DPResult(placement, value, prep.lattice.size, int(visited), prep.h.n, seconds, linearized,
                   lower_bound=None if linearized else value)
    if done < prep.lattice.size - 1:
        res.complete, res.stopped = False, "time_limit"
        if upper_bound is None and first.value < res.value:
            res.placement, res.value = first.placement, first.value
        lb = max(_prefix_lower_bound(prep, dp, done), load_lower_bound(inst, replicas))
        res.lower_bound = min(lb, res.value)
        seconds["lower_bound"] = time.perf_counter() - t3
        seconds["sources_done"] = done
    return res
