r"""Iterated local search for single-sample latency over contiguous splits (method ``latency-ls``).

Problem (SPEC 2.3; Tarnawski et al. Sec. 4, Fig. 3 with ``q = 1``): every accelerator
holds one contiguous node set, run as one subgraph (``CommIn + compute + CommOut``,
constraint (7)) once all its inputs are in host memory; CPU nodes run on an unbounded
pool (constraints (8)-(9)); minimise the time the last output is ready.
:func:`dnnplace.graphs.evaluate.latency` is the reference semantics.

Search space. *Units* are colocation classes (:func:`dnnplace.graphs.contract.colocation_labels`);
a unit sits on one usable accelerator (the first ``device_limit`` of its kind) or on the
CPU pool (the first CPU device; all CPU nodes are put there). A split is kept only if

- every unit can run where it sits, and every accelerator's memory holds its units;
- the *unit graph* (one vertex per accelerator set, one per CPU node, an arc per
  crossing edge) is acyclic. This is exactly "every accelerator set is contiguous and no
  two subgraphs wait on each other": a non-contiguous set ``S`` has a path
  ``S -> w -> S`` through an outside vertex, i.e. a cycle. So every kept split is one
  evaluator piece per accelerator, and its latency is the longest path of the unit
  graph, which :func:`_score` computes in ``O(n + m)`` (compiled) and which equals
  :func:`dnnplace.graphs.evaluate.latency` (asserted by the tests; the method reports the
  evaluator's value).

Neighbourhood of a split (all moves that stay in the space above):

1. *unit move*: move one unit to the CPU pool, to a device that holds a graph neighbour
   of one of its nodes (this shifts the boundary between two subgraphs or between a
   subgraph and the pool), or to an empty accelerator (opens a new subgraph);
2. *merge*: move every unit of one accelerator to another accelerator, or to the pool;
3. *ejection pair* (only once 1-2 are exhausted, and only for promising rounds, see
   ``eject_within``): move a unit onto an accelerator it does not fit on, and a boundary
   unit of that accelerator out to another device (or the pool) so that it fits.

Acceptance (descent): a move is taken as soon as it is found (first improvement, units
in a random order per sweep) when it lowers the pair ``(latency, sum of the finish
times of all subgraphs and CPU nodes)`` lexicographically by more than a relative
``1e-9``; the second key breaks the plateaus of the max-objective (a move that lets
non-critical work finish earlier is kept). A descent ends when a full sweep improves
nothing.

Iteration (ILS): one search *lane* per distinct valid start split (see Start), run in
turn. A lane's round: from its current local optimum (with probability 0.2 first empty
a random accelerator into the pool) apply ``s`` random feasible unit moves (``s`` grows
with the lane's number of consecutive failures, then resets), descend, and make the
result the lane's current split if its latency is no worse (else go back). The best
split over all lanes is returned. The search stops at ``time_limit`` seconds or after
``max_iters`` perturbations (for repeatable runs: with a fixed ``seed`` and without a
binding time limit the result is deterministic).

Start: ``params["start"]``, a method name or a placement file (one lane); by default
every valid (feasible, one piece per accelerator) split among ``greedy`` (Sec. 7), the
max-load DP split (``dp``) and the all-CPU split, one lane each (different starts reach
different basins: on BERT-6 the greedy lane finds the paper's IP value, the DP lane
does not). The result is never worse than the best start.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from dnnplace.graphs.contract import colocation_labels
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.evaluate import latency
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.baselines import latency_starts

__all__ = ["latency_search", "LatencyScorer"]

_EPS = 1e-9


# ---------------------------------------------------------------------------- scoring
@njit(cache=True)
def _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin, indeg,
           uptr, uadj, stamp, tmp, queue):
    """Latency and sum of finish times of a split (``inf`` if its unit graph has a cycle).

    Unit of node ``v``: ``v`` itself on the CPU, ``n + a`` on accelerator slot ``a``.
    Work arrays are passed in to avoid allocation.
    """
    n = dev.shape[0]
    nu = n + n_acc
    for w in range(nu):
        dur[w] = 0.0
        start[w] = 0.0
        indeg[w] = 0
        uptr[w + 1] = 0
        stamp[w] = -1
    active = 0
    for v in range(n):
        a = acc_idx[dev[v]]
        if a >= 0:
            unit[v] = n + a
        else:
            unit[v] = v
        dur[unit[v]] += comp[v, dev[v]]
    for w in range(nu):
        fin[w] = -1.0  # marks active units below
    for v in range(n):
        fin[unit[v]] = 0.0
    for w in range(nu):
        if fin[w] == 0.0:
            active += 1
    # transfers: CommOut once per node leaving its piece (max crossing edge), CommIn once per
    # (source node, piece) (max crossing edge into that piece)
    for u in range(n):
        uu = unit[u]
        ua = acc_idx[dev[u]]
        mo = -np.inf
        for q in range(out_ptr[u], out_ptr[u + 1]):
            v = out_nbr[q]
            uv = unit[v]
            if uv == uu:
                continue
            e = out_eid[q]
            uptr[uu + 1] += 1
            indeg[uv] += 1
            if ua >= 0:
                c = cout[e, ua]
                if c > mo:
                    mo = c
            va = acc_idx[dev[v]]
            if va >= 0:
                c = cin[e, va]
                if stamp[uv] != u:
                    stamp[uv] = u
                    tmp[uv] = c
                elif c > tmp[uv]:
                    tmp[uv] = c
        if mo > -np.inf:
            dur[uu] += mo
        for q in range(out_ptr[u], out_ptr[u + 1]):
            uv = unit[out_nbr[q]]
            if uv != uu and stamp[uv] == u:
                dur[uv] += tmp[uv]
                stamp[uv] = -2
    # unit adjacency (CSR, arcs repeated per edge) and Kahn's longest path
    for w in range(nu):
        uptr[w + 1] += uptr[w]
    fill = uptr[:nu].copy()
    for u in range(n):
        uu = unit[u]
        for q in range(out_ptr[u], out_ptr[u + 1]):
            uv = unit[out_nbr[q]]
            if uv != uu:
                uadj[fill[uu]] = uv
                fill[uu] += 1
    head = 0
    tail = 0
    for w in range(nu):
        if fin[w] == 0.0 and indeg[w] == 0:
            queue[tail] = w
            tail += 1
    best = 0.0
    total = 0.0
    while head < tail:
        w = queue[head]
        head += 1
        f = start[w] + dur[w]
        fin[w] = f
        total += f
        if f > best:
            best = f
        for q in range(uptr[w], uptr[w + 1]):
            t = uadj[q]
            if f > start[t]:
                start[t] = f
            indeg[t] -= 1
            if indeg[t] == 0:
                queue[tail] = t
                tail += 1
    if head < active:
        return np.inf, np.inf
    return best, total


@njit(cache=True)
def _apply(x, b, dev, unit_ptr, unit_nodes):
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        dev[unit_nodes[q]] = b


@njit(cache=True)
def _better(val, sec, cur, cursec):
    tol = _EPS * max(1.0, abs(cur))
    if val < cur - tol:
        return True
    return val <= cur + tol and sec < cursec - _EPS * max(1.0, abs(cursec))


@njit(cache=True)
def _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok, used, mark,
             out):
    """Candidate devices for unit ``x`` (written to ``out``; returns their count)."""
    a = dev[unit_nodes[unit_ptr[x]]]
    cnt = 0
    for d in range(mark.shape[0]):
        mark[d] = False
    mark[a] = True
    if pool >= 0 and ok[x, pool] and not mark[pool]:
        mark[pool] = True
        out[cnt] = pool
        cnt += 1
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        v = unit_nodes[q]
        for r in range(in_ptr[v], in_ptr[v + 1]):
            d = dev[in_nbr[r]]
            if not mark[d] and ok[x, d]:
                mark[d] = True
                out[cnt] = d
                cnt += 1
        for r in range(out_ptr[v], out_ptr[v + 1]):
            d = dev[out_nbr[r]]
            if not mark[d] and ok[x, d]:
                mark[d] = True
                out[cnt] = d
                cnt += 1
    for i in range(accs.shape[0]):  # empty accelerators open a new subgraph
        d = accs[i]
        if used[acc_idx[d]] == 0 and not mark[d] and ok[x, d]:
            mark[d] = True
            out[cnt] = d
            cnt += 1
    return cnt


@njit(cache=True)
def _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc):
    """Memory and node count on every accelerator slot."""
    mem = np.zeros(n_acc)
    used = np.zeros(n_acc, dtype=np.int64)
    for v in range(dev.shape[0]):
        a = acc_idx[dev[v]]
        if a >= 0:
            used[a] += 1
    for x in range(unit_ptr.shape[0] - 1):
        a = acc_idx[dev[unit_nodes[unit_ptr[x]]]]
        if a >= 0:
            mem[a] += umem[x]
    return mem, used


@njit(cache=True)
def _account(x, a, b, acc_idx, unit_ptr, umem, mem, used):
    """Book the move of unit ``x`` from device ``a`` to device ``b`` in ``mem``/``used``."""
    size = unit_ptr[x + 1] - unit_ptr[x]
    ia = acc_idx[a]
    ib = acc_idx[b]
    if ia >= 0:
        mem[ia] -= umem[x]
        used[ia] -= size
    if ib >= 0:
        mem[ib] += umem[x]
        used[ib] += size


@njit(cache=True)
def _descend(dev, order, unit_ptr, unit_nodes, umem, ok, cap, acc_idx, accs, pool, in_ptr, in_nbr, out_ptr,
             out_nbr, out_eid, comp, cin, cout, work, unit_dev_buf, max_evals, eject):
    """First-improvement descent over unit moves and merges (then, with ``eject``,
    ejection pairs once those are exhausted); returns (latency, sec, evals)."""
    unit, dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue = work
    n_acc = accs.shape[0]
    n_dev = cap.shape[0]
    mem, used = _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc)
    cur, cursec = _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin,
                         indeg, uptr, uadj, stamp, tmp, queue)
    evals = 1
    mark = np.zeros(n_dev, dtype=np.bool_)
    cand = np.empty(n_dev, dtype=np.int64)
    improved = True
    while improved and evals < max_evals:
        improved = False
        for i in range(order.shape[0]):
            x = order[i]
            a = dev[unit_nodes[unit_ptr[x]]]
            k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok,
                         used, mark, cand)
            for j in range(k):
                b = cand[j]
                ib = acc_idx[b]
                if ib >= 0 and mem[ib] + umem[x] > cap[b] * (1 + 1e-12):
                    continue
                _apply(x, b, dev, unit_ptr, unit_nodes)
                val, sec = _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur,
                                  start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                evals += 1
                if _better(val, sec, cur, cursec):
                    cur, cursec = val, sec
                    _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
                    improved = True
                    break
                _apply(x, a, dev, unit_ptr, unit_nodes)
        # merges: all of accelerator a onto accelerator b, or onto the pool
        for ia in range(n_acc):
            if used[ia] == 0:
                continue
            a = accs[ia]
            for jb in range(-1, n_acc):
                if jb == ia:
                    continue
                if jb >= 0:
                    b = accs[jb]
                    if used[jb] == 0 or mem[jb] + mem[ia] > cap[b] * (1 + 1e-12):
                        continue
                else:
                    b = pool
                    if b < 0:
                        continue
                feasible = True
                nunits = 0
                for x in range(unit_ptr.shape[0] - 1):
                    if dev[unit_nodes[unit_ptr[x]]] == a:
                        unit_dev_buf[nunits] = x
                        nunits += 1
                        if not ok[x, b]:
                            feasible = False
                if not feasible:
                    continue
                for t in range(nunits):
                    _apply(unit_dev_buf[t], b, dev, unit_ptr, unit_nodes)
                val, sec = _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur,
                                  start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                evals += 1
                if _better(val, sec, cur, cursec):
                    cur, cursec = val, sec
                    if jb >= 0:
                        mem[jb] += mem[ia]
                        used[jb] += used[ia]
                    mem[ia] = 0.0
                    used[ia] = 0
                    improved = True
                    break
                for t in range(nunits):
                    _apply(unit_dev_buf[t], a, dev, unit_ptr, unit_nodes)
        if improved or not eject:
            continue
        # ejection: x onto a full accelerator b, and a boundary unit y of b out to another device
        cand2 = np.empty(n_dev, dtype=np.int64)
        for i in range(order.shape[0]):
            x = order[i]
            a = dev[unit_nodes[unit_ptr[x]]]
            ia = acc_idx[a]
            k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok,
                         used, mark, cand)
            for j in range(k):
                b = cand[j]
                ib = acc_idx[b]
                if ib < 0 or mem[ib] + umem[x] <= cap[b] * (1 + 1e-12):
                    continue  # plain moves were tried above
                _apply(x, b, dev, unit_ptr, unit_nodes)
                found = False
                for y in range(unit_ptr.shape[0] - 1):
                    if y == x or dev[unit_nodes[unit_ptr[y]]] != b:
                        continue
                    if mem[ib] + umem[x] - umem[y] > cap[b] * (1 + 1e-12):
                        continue
                    boundary = False
                    for q in range(unit_ptr[y], unit_ptr[y + 1]):
                        v = unit_nodes[q]
                        for r in range(in_ptr[v], in_ptr[v + 1]):
                            if dev[in_nbr[r]] != b:
                                boundary = True
                        for r in range(out_ptr[v], out_ptr[v + 1]):
                            if dev[out_nbr[r]] != b:
                                boundary = True
                    if not boundary:
                        continue
                    k2 = _targets(y, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs,
                                  pool, ok, used, mark, cand2)
                    for j2 in range(k2):
                        c = cand2[j2]
                        ic = acc_idx[c]
                        if ic >= 0:
                            mc = mem[ic] + umem[y] - (umem[x] if ic == ia else 0.0)
                            if mc > cap[c] * (1 + 1e-12):
                                continue
                        _apply(y, c, dev, unit_ptr, unit_nodes)
                        val, sec = _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit,
                                          dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                        evals += 1
                        if _better(val, sec, cur, cursec):
                            cur, cursec = val, sec
                            _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
                            _account(y, b, c, acc_idx, unit_ptr, umem, mem, used)
                            found = True
                            break
                        _apply(y, b, dev, unit_ptr, unit_nodes)
                    if found:
                        break
                if found:
                    improved = True
                    break
                _apply(x, a, dev, unit_ptr, unit_nodes)
    return cur, cursec, evals


@njit(cache=True)
def _perturb(dev, units, targets_pick, unit_ptr, unit_nodes, umem, ok, cap, acc_idx, accs, pool, in_ptr, in_nbr,
             out_ptr, out_nbr, out_eid, comp, cin, cout, work):
    """Apply random feasible unit moves: unit ``units[i]`` to its candidate number
    ``targets_pick[i] % count``; a move that breaks memory or acyclicity is undone."""
    unit, dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue = work
    n_acc = accs.shape[0]
    n_dev = cap.shape[0]
    mem, used = _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc)
    mark = np.zeros(n_dev, dtype=np.bool_)
    cand = np.empty(n_dev, dtype=np.int64)
    moved = 0
    for i in range(units.shape[0]):
        x = units[i]
        a = dev[unit_nodes[unit_ptr[x]]]
        k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok, used,
                     mark, cand)
        if k == 0:
            continue
        b = cand[targets_pick[i] % k]
        ib = acc_idx[b]
        if ib >= 0 and mem[ib] + umem[x] > cap[b] * (1 + 1e-12):
            continue
        _apply(x, b, dev, unit_ptr, unit_nodes)
        val, _ = _score(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin,
                        indeg, uptr, uadj, stamp, tmp, queue)
        if val == np.inf:
            _apply(x, a, dev, unit_ptr, unit_nodes)
            continue
        _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
        moved += 1
    return moved


class LatencyScorer:
    """Compiled latency of contiguous splits of one instance (see the module docstring).

    ``score(device)`` returns ``(latency, sum of finish times)`` of a device array, or
    ``(inf, inf)`` when some accelerator set is not contiguous or two subgraphs wait on
    each other; memory and device support are *not* checked here.

    Devices: the usable accelerators (the first ``device_limit`` of each kind) and the
    pool (the first CPU device, or none). CPU nodes must be on the pool device.
    """

    def __init__(self, inst: Instance):
        g, cl = inst.graph, inst.require_cluster()
        self.graph, self.cluster = g, cl
        limit = cl.meta.get("device_limit", {})
        accs: list[int] = []
        for kind in dict.fromkeys(k for k in cl.kinds if k != "cpu"):
            accs += cl.devices_of_kind(kind)[: limit.get(kind, cl.size)].tolist()
        self.accs = np.array(sorted(accs), dtype=np.int64)
        cpus = cl.devices_of_kind("cpu")
        self.pool = int(cpus[0]) if cpus.size and limit.get("cpu", 1) >= 1 else -1
        self.acc_idx = np.full(cl.size, -1, dtype=np.int64)
        self.acc_idx[self.accs] = np.arange(self.accs.size)
        comp = cl.compute_matrix(g)
        self.supported = ~np.isnan(comp)
        self.comp = np.nan_to_num(comp, nan=np.inf)
        # host transfer cost of every edge for every accelerator slot, as the evaluator's _host_cost:
        # the explicit edge cost, else the link model between the accelerator and the host (first CPU)
        m = g.m
        self.cin = np.zeros((m, max(1, self.accs.size)))
        self.cout = np.zeros((m, max(1, self.accs.size)))
        missing = np.isnan(g.edge_cost)
        if missing.any() and not cpus.size:
            raise InputError("latency-ls needs explicit edge costs when the cluster has no CPU host")
        for a, d in enumerate(self.accs.tolist()):
            self.cin[:, a] = self.cout[:, a] = g.edge_cost
            if missing.any():
                h = int(cpus[0])
                self.cin[missing, a] = cl.beta0[h, d] + cl.beta1[h, d] * g.edge_bytes[missing]
                self.cout[missing, a] = cl.beta0[d, h] + cl.beta1[d, h] * g.edge_bytes[missing]
        n = g.n
        nu = n + self.accs.size
        self.work = (np.empty(n, np.int64), np.empty(nu), np.empty(nu), np.empty(nu), np.empty(nu, np.int64),
                     np.zeros(nu + 1, np.int64), np.empty(max(1, m), np.int64), np.empty(nu, np.int64),
                     np.empty(nu), np.empty(nu, np.int64))

    def score(self, device: np.ndarray) -> tuple[float, float]:
        """``(latency, sum of finish times)`` of ``device`` (``inf`` if not a valid split)."""
        g = self.graph
        return _score(np.asarray(device, dtype=np.int64), self.acc_idx, self.accs.size, self.comp, self.cin,
                      self.cout, g.out_ptr, g.out_nbr, g.out_eid, *self.work)


def _units(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = colocation_labels(g)
    k = int(labels.max()) + 1 if labels.size else 0
    nodes = np.argsort(labels, kind="stable").astype(np.int64)
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=ptr[1:])
    return labels, ptr, nodes


def latency_search(inst: Instance, *, time_limit: float = 30.0, seed: int = 0, start: Placement | None = None,
                   max_iters: int | None = None, eject_within: float = 0.02) -> tuple[Placement, float, dict]:
    """Iterated local search for the best contiguous latency split.

    Parameters
    ----------
    inst : Instance
        Graph with a cluster (accelerators and, usually, CPUs).
    time_limit : float
        Seconds for the search (the start heuristics are not counted).
    seed : int
        Seed of the local ``numpy.random.default_rng`` (sweep orders, perturbations).
    start : Placement, optional
        The start of a single search lane (the method wrapper resolves a method name
        or a placement file into one); default: one lane per valid split among
        ``greedy``, ``dp`` and all-CPU.
    max_iters : int, optional
        Stop after this many perturbation rounds (with a fixed seed, and a time limit
        that does not bind, the result is deterministic).
    eject_within : float
        A round's descent also tries ejection pairs (move 3 of the module docstring)
        when its plain local optimum is within this fraction of the best value.

    Returns
    -------
    (Placement, float, dict)
        The best split, its latency (the evaluator's) and run information (start name
        and value, iterations, score evaluations, trace of ``(seconds, best)``).

    References
    ----------
    Tarnawski, Phanishayee, Devanur, Mahajan, Nina Paravecino. Efficient Algorithms for
    Device Placement of DNN Graph Operators. NeurIPS 2020, Sec. 4 (latency), Sec. 7.

    Examples
    --------
    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1], kinds=("acc", "cpu"), compute=[[1, 5], [1, 5]], memory=[1, 1],
    ...             src=[0], dst=[1], edge_cost=[1])
    >>> latency_search(Instance(g, Cluster.tarnawski(1, 1, 10)), max_iters=5)[1]  # both on acc0
    2.0
    """
    t0 = time.perf_counter()
    g, cl = inst.graph, inst.require_cluster()
    sc = LatencyScorer(inst)
    labels, unit_ptr, unit_nodes = _units(g)
    nunit = unit_ptr.size - 1
    # ok[x, d]: unit x may sit on device d (every member supported; usable device)
    usable = np.zeros(cl.size, dtype=bool)
    usable[sc.accs] = True
    if sc.pool >= 0:
        usable[sc.pool] = True
    ok = np.zeros((nunit, cl.size), dtype=np.bool_)
    for d in np.flatnonzero(usable):
        ok[:, d] = np.bincount(labels, weights=(~sc.supported[:, d]).astype(float), minlength=nunit) == 0
    umem = np.bincount(labels, weights=g.memory, minlength=nunit)
    cap = np.asarray(cl.memory, dtype=float)

    def normalise(p: Placement) -> np.ndarray | None:
        dev = p.device.astype(np.int64).copy()
        on_cpu = np.array([cl.kinds[d] == "cpu" for d in dev], dtype=bool)
        if on_cpu.any():
            if sc.pool < 0:
                return None
            dev[on_cpu] = sc.pool
        first = dev[unit_nodes[unit_ptr[:-1]]]
        if (dev != first[labels]).any() or not ok[np.arange(nunit), first].all():
            return None
        accm = np.bincount(dev, weights=g.memory, minlength=cl.size)
        if (accm[sc.accs] > cap[sc.accs] * (1 + 1e-12)).any():
            return None
        return dev

    if start is not None:
        cands = [("given", start)]
    else:
        cands = latency_starts(inst, dp=True)
    best_dev, best_val, best_name, starts, valid = None, np.inf, None, {}, []
    for name, p in cands:
        dev = normalise(p)
        val = sc.score(dev)[0] if dev is not None else np.inf
        starts[name] = None if not np.isfinite(val) else float(val)
        if np.isfinite(val) and not any(np.array_equal(dev, d) for _, d in valid):
            valid.append((val, dev))
        if val < best_val:
            best_dev, best_val, best_name = dev, val, name
    if best_dev is None:
        raise InputError(f"no valid contiguous start split among {[n for n, _ in cands]} "
                         "(memory, support, device limits, one subgraph per accelerator)")
    start_val = float(best_val)
    t_start = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    args_static = (unit_ptr, unit_nodes, umem, ok, cap, sc.acc_idx, sc.accs, sc.pool, g.in_ptr, g.in_nbr,
                   g.out_ptr, g.out_nbr, g.out_eid, sc.comp, sc.cin, sc.cout, sc.work)
    buf = np.empty(nunit, dtype=np.int64)
    evals = 0
    lanes = []  # one ILS per distinct valid start, run in turn: [current split, its latency, failures]
    for _, dev in sorted(valid, key=lambda t: t[0]):
        cur = dev.copy()
        cur_val, _, e = _descend(cur, rng.permutation(nunit).astype(np.int64), *args_static, buf, 1 << 62, True)
        evals += e
        lanes.append([cur, cur_val, 0])
        if cur_val < best_val - _EPS * max(1.0, abs(best_val)):
            best_val, best_dev = cur_val, cur.copy()
    trace = [(time.perf_counter() - t0, float(best_val))]
    iters = 0
    t_end = time.perf_counter() + time_limit
    while (max_iters is None or iters < max_iters) and time.perf_counter() < t_end and nunit:
        lane = lanes[iters % len(lanes)]
        cur, cur_val, fails = lane
        iters += 1
        strength = 2 + (fails // 20) % max(1, min(30, nunit // 4))
        trial = cur.copy()
        if sc.pool >= 0 and rng.random() < 0.2:  # kick: empty one accelerator into the pool
            full = np.flatnonzero(np.bincount(sc.acc_idx[trial][sc.acc_idx[trial] >= 0], minlength=sc.accs.size))
            if full.size:
                on = trial == sc.accs[rng.choice(full)]
                if ok[labels[on], sc.pool].all():
                    trial[on] = sc.pool
        _perturb(trial, rng.integers(0, nunit, strength).astype(np.int64),
                 rng.integers(0, 1 << 30, strength).astype(np.int64), *args_static)
        val, _, e = _descend(trial, rng.permutation(nunit).astype(np.int64), *args_static, buf, 1 << 62, False)
        evals += e
        if val <= best_val * (1 + eject_within):  # promising: also try the ejection pairs
            val, _, e = _descend(trial, rng.permutation(nunit).astype(np.int64), *args_static, buf, 1 << 62, True)
            evals += e
        if val <= cur_val + _EPS * max(1.0, abs(cur_val)):
            fails = 0 if val < cur_val - _EPS * max(1.0, abs(cur_val)) else fails + 1
            lane[0], lane[1] = trial, val
        else:
            fails += 1
        lane[2] = fails
        if val < best_val - _EPS * max(1.0, abs(best_val)):
            best_val, best_dev = val, trial.copy()
            trace.append((time.perf_counter() - t0, float(best_val)))
    p = Placement(g, cl, best_dev)
    ev = latency(p)
    info = {"start": best_name, "start_value": start_val, "starts": starts, "iterations": iters,
            "evaluations": int(evals), "start_seconds": t_start, "search_value": float(best_val), "trace": trace}
    return p, float(ev.objective), info
