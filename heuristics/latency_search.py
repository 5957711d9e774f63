r"""Iterated local search for single-sample latency over contiguous splits (method ``latency-ls``).

Problem (docs/semantics.md 2.3; Tarnawski et al. Sec. 4, Fig. 3 with ``q = 1``): every accelerator
holds one contiguous node set, run as one subgraph (``CommIn + compute + CommOut``,
constraint (7)) once all its inputs are in host memory; CPU nodes run on an unbounded
pool (constraints (8)-(9)); minimise the time the last output is ready.
:func:`dnnplace.evaluation.evaluate.latency` is the reference semantics.

Search space. *Units* are colocation classes (:func:`dnnplace.graphs.transforms.contract.colocation_labels`);
a unit sits on one usable accelerator (the first ``device_limit`` of its kind) or on the
CPU pool (the first CPU device; all CPU nodes are put there). A split is kept only if

- every unit can run where it sits, and every accelerator's memory holds its units;
- the *unit graph* (one vertex per accelerator set, one per CPU node, an arc per
  crossing edge) is acyclic. This is exactly "every accelerator set is contiguous and no
  two subgraphs wait on each other": a non-contiguous set ``S`` has a path
  ``S -> w -> S`` through an outside vertex, i.e. a cycle. So every kept split is one
  evaluator piece per accelerator, and its latency is the longest path of the unit
  graph, which :func:`~dnnplace.heuristics.latency_score.score_split` computes in
  ``O(n + m)`` (compiled) and which equals :func:`dnnplace.evaluation.evaluate.latency`
  (asserted by the tests; the method reports the evaluator's value).

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

Layout: the scorer (:class:`LatencyScorer` and its compiled kernel) lives in
:mod:`dnnplace.heuristics.latency_score`, the compiled descent and perturbation kernels
in :mod:`dnnplace.heuristics.latency_moves`; this module drives the search.
"""

from __future__ import annotations

import time

import numpy as np

from dnnplace.evaluation.evaluate import latency
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels
from dnnplace.heuristics.baselines import latency_starts
from dnnplace.heuristics.latency_moves import EPS, descend, perturb
from dnnplace.heuristics.latency_score import LatencyScorer

__all__ = ["latency_search", "LatencyScorer"]


def _units(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Colocation label of every node, and the units as CSR (``ptr``, ``nodes``)."""
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
        Seconds for the whole call: the max-load DP's start split gets at most half of
        what is left once the scorer is built (its best split by then), the search runs
        until ``time_limit`` after the call began. Without ``max_iters``, a descent stops
        once it has spent the score evaluations the time left allows (at the rate
        measured so far; checked before each unit's moves), so the call ends within about
        one unit's moves of ``time_limit``; every split it keeps is valid.
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
        cands = latency_starts(inst, dp=True, dp_time_limit=max(0.0, 0.5 * (time_limit - (time.perf_counter() - t0))))
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
    t_end = t0 + time_limit
    # score evaluations per second (first: the starts' scoring, then the descents'): a descent
    # stops once it has spent the evaluations the time left allows
    t = time.perf_counter()
    sc.score(best_dev)  # once more, compiled by now: the first estimate of the rate
    rate = [1.0 / max(time.perf_counter() - t, 1e-6), 0, 0.0]  # [estimate, evaluations, seconds] of the descents

    def budget() -> int:
        if max_iters is not None:
            return 1 << 62
        return max(1, min(1 << 62, int(rate[0] * (t_end - time.perf_counter()))))

    def timed(*args):
        t = time.perf_counter()
        out = descend(*args)
        rate[1], rate[2] = rate[1] + out[2], rate[2] + time.perf_counter() - t
        if rate[2] > 0.05:
            rate[0] = rate[1] / rate[2]
        return out

    lanes = []  # one ILS per distinct valid start, run in turn: [current split, its latency, failures]
    for _, dev in sorted(valid, key=lambda t: t[0]):
        cur = dev.copy()
        cur_val, _, e = timed(cur, rng.permutation(nunit).astype(np.int64), *args_static, buf, budget(), True)
        evals += e
        lanes.append([cur, cur_val, 0])
        if cur_val < best_val - EPS * max(1.0, abs(best_val)):
            best_val, best_dev = cur_val, cur.copy()
    trace = [(time.perf_counter() - t0, float(best_val))]
    iters = 0
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
        perturb(trial, rng.integers(0, nunit, strength).astype(np.int64),
                rng.integers(0, 1 << 30, strength).astype(np.int64), *args_static)
        val, _, e = timed(trial, rng.permutation(nunit).astype(np.int64), *args_static, buf, budget(), False)
        evals += e
        if val <= best_val * (1 + eject_within):  # promising: also try the ejection pairs
            val, _, e = timed(trial, rng.permutation(nunit).astype(np.int64), *args_static, buf, budget(), True)
            evals += e
        if val <= cur_val + EPS * max(1.0, abs(cur_val)):
            fails = 0 if val < cur_val - EPS * max(1.0, abs(cur_val)) else fails + 1
            lane[0], lane[1] = trial, val
        else:
            fails += 1
        lane[2] = fails
        if val < best_val - EPS * max(1.0, abs(best_val)):
            best_val, best_dev = val, trial.copy()
            trace.append((time.perf_counter() - t0, float(best_val)))
    p = Placement(g, cl, best_dev)
    ev = latency(p)
    info = {"start": best_name, "start_value": start_val, "starts": starts, "iterations": iters,
            "evaluations": int(evals), "start_seconds": t_start, "search_value": float(best_val), "trace": trace}
    return p, float(ev.objective), info
