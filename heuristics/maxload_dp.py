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
first subdivided (:func:`~dnnplace.heuristics.transfer_costs.subdivide_out_costs`, Appendix B with the evaluator's
largest-crossing-edge charge); the answer keeps the original nodes' devices.

Objectives: ``pipedream`` (sum of compute and transfers, the paper's default) and
``overlap`` (Appendix C.1: ``max(comm, compute)``). Not done: GPipe's objective (not
separable over devices), replication (C.2) and hierarchies (C.3).

Speed (see ``python -m benchmarks dp`` and ``dp-scale``): DPL runs first and its value
bounds the exact DP, whose superset walks stop as soon as a set's compute exceeds that
bound (:mod:`dnnplace.heuristics.dp_kernel`). With ``prune`` (the default) the exact DP
runs as decisions "is the optimum at most ``T``?" for rising ``T`` from a knapsack lower
bound up to DPL's value (:func:`~dnnplace.heuristics.dp_runs.threshold_runs`); each run skips every ideal that no split
of max-load ``<= T`` passes through, by its table entries and a bound on what the
remaining devices can carry (:mod:`dnnplace.heuristics.dp_bounds`). A failed run proves
the optimum above ``T``, so a run cut by the time limit still reports that bound. Where
the DP graph has narrow cut nodes (nodes comparable to every other one, e.g. the cell
boundaries of Inception-like networks; ``pipedream`` objective, no replicas), a stage's load
across a cut separates into a term of each end ideal, so those stages come from sorted
min-max queries and the superset walks stay between two cuts
(:mod:`dnnplace.heuristics.dp_segments`).

Size limits: the ideals are held as bitsets with their cover relation, so memory grows
with the number of ideals (``max_ideals``, default 6 million; measured in
``results/dp-scale.md``) and with the DP graph's width (every ideal stores its addable
nodes). So there are three limits: ``max_ideals``, known at once to be exceeded where an
antichain of the DP graph has more subsets (:func:`~dnnplace.heuristics.ideals.antichain_width`;
the captured NASNet's DP graph has 1125 sources); a memory budget (``max_bytes``, default
:func:`~.dp_memory.memory_budget`; the ``dp`` method passes what the run's ``--memory-limit`` leaves,
:func:`dnnplace.runtime.memory.headroom`) checked before every growth of the arrays, with what
the DP allocates per ideal afterwards (:func:`~.dp_memory.bytes_per_ideal`), and between the preparation's
phases the memory watchdog's stop; and the time limit, which holds for the whole call. Past
any of them the DP does not give up silently: it returns DPL's split as the incumbent with
``complete=False`` and a valid lower bound (:func:`load_lower_bound`), so the caller reports a
gap.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.replication import Replication
from dnnplace.heuristics import aot
from dnnplace.heuristics.dp_bounds import load_lower_bound
from dnnplace.heuristics.dp_memory import memory_budget
from dnnplace.heuristics.dp_prepare import prepare
from dnnplace.heuristics.dp_runs import Prepared, prefix_lower_bound, run_table, threshold_runs
from dnnplace.heuristics.ideals import (
    LINEAR_ORDERS,
    TooManyIdeals,
)
from dnnplace.heuristics.transfer_costs import dp_devices, subdivide_out_costs
from dnnplace.runtime import memory
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached
from dnnplace.runtime.memory import stop_requested
from dnnplace.runtime.termination import Termination

__all__ = ["DPResult", "maxload_dp", "load_lower_bound"]

OBJECTIVES = ("pipedream", "overlap")

GRACE = 0.5
"""Seconds past its time limit after which a call still inside code that checks no deadline
(numba compiling a kernel on first use, where no compiled copy is cached) is stopped by a
watchdog (:meth:`~dnnplace.runtime.deadline.Deadline.guard`) and returns no split, with the
lower bound; its own checks end it well before (chunks of 0.05-0.25 s)."""


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
    stopped: Termination | None = None  # why an incomplete run stopped: IDEAL_LIMIT, MEMORY_LIMIT or TIME_LIMIT
    note: str | None = None  # what stopped the exact DP, in words (the enumeration's message)
    tied: dict[str, Placement] = field(default_factory=dict)  # tie-break rule -> its split (``tie_breaks``)
    tie_chains: dict[str, int] = field(default_factory=dict)  # tied chains per scope a ``uniform`` rule drew from


def _replication_settings(inst: Instance, replicas: int, sync_per_byte: float | None) -> float:
    """Check the replication factor against the accelerators; the all-reduce time per byte."""
    accs, _ = dp_devices(inst.require_cluster())
    if replicas < 1 or (replicas > 1 and replicas > accs.size):
        raise InputError(f"replication factor {replicas} needs between 1 and the {accs.size} accelerators "
                         "of the cluster")
    if sync_per_byte is not None:
        if not np.isfinite(sync_per_byte) or sync_per_byte < 0:
            raise InputError(f"sync_per_byte must be a finite number >= 0, got {sync_per_byte}")
        return float(sync_per_byte)
    cl = inst.require_cluster()
    return float(cl.beta1[np.ix_(accs, accs)].max(initial=0.0)) if accs.size > 1 else 0.0


def _decode(inst: Instance, prep: Prepared, parent: np.ndarray, kind: np.ndarray, rep: np.ndarray) -> Placement:
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


def _on_original_nodes(inst: Instance, sub: OpGraph, res: DPResult) -> DPResult:
    """A result on the subdivided graph ``sub`` (Appendix B) as one on ``inst``: the
    original nodes (the first ``inst.graph.n``) keep their devices."""
    if res.placement is not None:
        res.placement = Placement(inst.graph, inst.cluster, res.placement.device[: inst.graph.n],
                                  res.placement.replication)
    res.tied = {r: Placement(inst.graph, inst.cluster, p.device[: inst.graph.n]) for r, p in res.tied.items()}
    res.seconds["subdivided_nodes"] = float(sub.n - inst.graph.n)
    return res


def _dpl_instead(inst: Instance, exc: TooManyIdeals, t0: float, deadline: float | None, *, objective: str,
                 trivial: bool, replicas: int, sync: float, order: str) -> DPResult:
    """Past the ideal, memory or time limit of the exact DP: DPL's split (within what the
    deadline leaves) as the incumbent, with ``complete=False`` and :func:`load_lower_bound`
    as the bound."""
    res = _maxload_dp(inst, linearized=True, objective=objective, upper_bound=None, trivial=trivial,
                      max_ideals=6_000_000, time_limit=_left(deadline), replicas=replicas, sync_per_byte=sync,
                      prune=True, segments=True, max_bytes=None, order=order)
    why = exc.reason
    res.seconds = {why: time.perf_counter() - t0, **res.seconds}
    res.complete, res.linearized, res.stopped = False, False, why
    res.lower_bound = min(load_lower_bound(inst, replicas), res.value)
    res.ideals = exc.count
    res.note = str(exc)
    return res


def _left(deadline: float | None) -> float | None:
    """Seconds to ``deadline`` (a ``perf_counter`` time; ``0.0`` once past, ``None`` without one)."""
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


def maxload_dp(inst: Instance, *, linearized: bool = False, objective: str = "pipedream",
               upper_bound: float | None = None, trivial: bool = True, max_ideals: int = 6_000_000,
               time_limit: float | None = None, replicas: int = 1, sync_per_byte: float | None = None,
               prune: bool = True, segments: bool = True, max_bytes: float | None = None,
               deadline: Deadline | None = None, tie_breaks: tuple[str, ...] = (), order: str = "best") -> DPResult:
    """Optimal contiguous max-load split (or DPL's, with ``linearized=True``).

    Parameters
    ----------
    inst : Instance
        Graph with a cluster of identical accelerators and CPUs (Tarnawski's model).
    linearized : bool
        Run DPL (Sec. 5.1.2): add the path of a topological order first.
    order : {"best", "dfs", "narrow"}
        DPL's topological order (:data:`~dnnplace.heuristics.ideals.LINEAR_ORDERS`): the
        paper's depth-first one, the one whose prefixes cut the cheapest transfers, or
        ``best``: both, the lower max-load kept (the time limit shared, the narrow run
        first: on the captured graphs it was more often the better and the faster). Also the order
        of the DPL run that bounds the exact DP and that stands in for it past its limits.
    objective : {"pipedream", "overlap"}
        Load = compute + transfers (default) or their maximum (Appendix C.1).
    upper_bound : float, optional
        A known achievable max-load; by default the exact DP runs DPL first to get one.
    trivial : bool
        Merge zero-cost one-neighbour nodes into their neighbour first (exact for the
        loads; see :func:`dnnplace.heuristics.ideals._merge_trivial`).
    max_ideals : int
        Size limit of the exact DP. With more ideals (known at once where an antichain of
        the DP graph has more subsets, :func:`~dnnplace.heuristics.ideals.antichain_width`)
        the result is DPL's split with ``complete=False`` and ``lower_bound`` from
        :func:`load_lower_bound`.
    max_bytes : float, optional
        Memory budget of the exact DP (default :func:`~.dp_memory.memory_budget`): an enumeration whose
        arrays, with the tables to come (:func:`~.dp_memory.bytes_per_ideal`), would outgrow it stops
        before it allocates more, with the same answer as past ``max_ideals``
        (``stopped`` ``MEMORY_LIMIT``).
    replicas : int
        Largest replication factor of a stage (Appendix C.2; 1 = none): a stage may run on
        up to this many accelerators (:mod:`dnnplace.graphs.replication`), and the
        placement then carries its replica groups.
    sync_per_byte : float, optional
        All-reduce time per byte of a replicated stage's weights (the paper's ``1/B``);
        default the cluster's accelerator-to-accelerator ``beta1`` (largest pair).
    time_limit : float, optional
        Seconds for the whole call, from its start: the subdivision, the enumeration of the
        ideals (checked between chunks of ideals; past it, DPL's split as past ``max_ideals``),
        DPL's run and the exact DP's table (checked between chunks of sources), which leaves
        time for the lower bound that follows. When it runs out in the table: the better of
        DPL's split and the best full split in the table so far, ``complete=False``, and the
        larger of the bound the failed threshold runs proved and the lower bound of the exact
        prefix of the table (at most the run's threshold;
        :func:`~dnnplace.heuristics.dp_runs.prefix_lower_bound`, at least :func:`load_lower_bound`).
        DPL itself (``linearized=True``) stops there too, without a split if its table is not
        done (``placement`` ``None``, ``stopped`` ``TIME_LIMIT``); its first chunk always runs.
        With ``deadline`` (the run's :class:`~dnnplace.runtime.deadline.Deadline`) the call
        ends by the earlier of the two.
        Under a time limit a missing AOT extension of the kernels is built in the background
        (:func:`dnnplace.heuristics.aot.no_build_wait`), and a call still running :data:`GRACE`
        past the limit (in a kernel's first compilation) returns no split, with the lower bound.
    prune : bool
        Bound pruning with threshold runs (see the module docstring); ``False`` runs the
        DP once with DPL's value as the only bound (the benchmark's comparison).
    segments : bool
        Where the DP graph has narrow cut nodes (:mod:`dnnplace.heuristics.dp_segments`;
        ``pipedream`` without replicas), the stages across a cut come from sorted
        queries and the superset walks stay between cuts; ``False`` walks everywhere.
    tie_breaks : tuple of str
        Also decode the finished table by these tie-break rules (``earliest``, ``latest``,
        ``random:SEED``, ``uniform:SEED``, optionally ``any-``: :mod:`dnnplace.heuristics.dp_ties`)
        into ``tied`` (rule -> split, each of max-load ``value``; ``first`` is ``placement``, the
        kernel's own choice, which is unchanged) and, for ``uniform`` rules, ``tie_chains``
        (how many tied chains they drew from). Exact DP of an inference graph only; nothing for
        a run that did not complete; the decoding, after the table, is not held to ``time_limit``.

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
    mine = (deadline or NO_DEADLINE).within(time_limit)  # the call's deadline: its limit, within the run's
    time_limit = mine.remaining()
    if time_limit is not None or memory.active() is not None:  # the memory watchdog stops the guard too
        t0 = time.perf_counter()
        guard = mine.later(GRACE).guard("the DP's kernels")
        try:
            with aot.no_build_wait() if time_limit is not None else contextlib.nullcontext(), guard:
                return _maxload_dp(inst, linearized=linearized, objective=objective, upper_bound=upper_bound,
                                   trivial=trivial, max_ideals=max_ideals, time_limit=time_limit, replicas=replicas,
                                   sync_per_byte=sync_per_byte, prune=prune, segments=segments, max_bytes=max_bytes,
                                   tie_breaks=tie_breaks, order=order)
        except Exception as exc:  # stuck in code that checks no deadline (a kernel's first compilation)
            if not (isinstance(exc, TimeLimitReached) or guard.fired):  # numba may turn it into a RuntimeError
                raise
            note = str(exc) if isinstance(exc, TimeLimitReached) else \
                f"time limit reached during the DP's kernels (stopped there: {type(exc).__name__}: {exc})"
            lb = None if linearized else load_lower_bound(inst, replicas)
            why = Termination.MEMORY_LIMIT if stop_requested() else Termination.TIME_LIMIT
            return DPResult(None, np.inf, 0, 0, 0, {str(why): time.perf_counter() - t0}, linearized,
                            complete=False, lower_bound=lb, stopped=why, note=note)
    return _maxload_dp(inst, linearized=linearized, objective=objective, upper_bound=upper_bound,
                       trivial=trivial, max_ideals=max_ideals, time_limit=time_limit, replicas=replicas,
                       sync_per_byte=sync_per_byte, prune=prune, segments=segments, max_bytes=max_bytes,
                       tie_breaks=tie_breaks, order=order)


def _maxload_dp(inst: Instance, *, linearized: bool, objective: str, upper_bound: float | None, trivial: bool,
                max_ideals: int, time_limit: float | None, replicas: int, sync_per_byte: float | None, prune: bool,
                segments: bool, max_bytes: float | None, tie_breaks: tuple[str, ...] = (),
                order: str = "best") -> DPResult:
    """:func:`maxload_dp` without its watchdog."""
    if objective not in OBJECTIVES:
        raise InputError(f"the DP supports objectives {OBJECTIVES}, not {objective!r}")
    if order not in ("best", *LINEAR_ORDERS):
        raise InputError(f"unknown DPL order {order!r}; use one of {('best', *LINEAR_ORDERS)}")
    if linearized and order == "best":
        t0 = time.perf_counter()
        deadline = None if time_limit is None else t0 + float(time_limit)
        runs = []
        for one in ("narrow", "dfs"):   # the second only with time left
            if runs and deadline is not None and time.perf_counter() >= deadline:
                break
            runs.append(_maxload_dp(inst, linearized=True, objective=objective, upper_bound=upper_bound,
                                    trivial=trivial, max_ideals=max_ideals, time_limit=_left(deadline),
                                    replicas=replicas, sync_per_byte=sync_per_byte, prune=prune, segments=segments,
                                    max_bytes=max_bytes, order=one))
        best = min(runs, key=lambda r: (r.placement is None, r.value))
        best.seconds = {**best.seconds, "dpl_orders": time.perf_counter() - t0}
        return best
    if tie_breaks:
        from dnnplace.heuristics.dp_ties import parse_rule

        for rule in tie_breaks:
            if rule != "first":
                parse_rule(rule)
        if replicas > 1:
            raise InputError("tie-breaks of the max-load DP are for splits without replicated stages")
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    sub = subdivide_out_costs(inst.graph, inst.require_cluster())
    if sub is not inst.graph:  # Appendix B: solve the subdivided graph, keep the original nodes' devices
        return _on_original_nodes(inst, sub, _maxload_dp(
            Instance(sub, inst.cluster, inst.source), linearized=linearized, objective=objective,
            upper_bound=upper_bound, trivial=trivial, max_ideals=max_ideals, time_limit=_left(deadline),
            replicas=replicas, sync_per_byte=sync_per_byte, prune=prune, segments=segments, max_bytes=max_bytes,
            tie_breaks=tie_breaks, order=order))
    sync = _replication_settings(inst, replicas, sync_per_byte)
    try:
        prep = prepare(inst, linear=linearized, trivial=trivial, max_ideals=max_ideals,
                        deadline=None if linearized else deadline,
                        segments=segments and replicas == 1 and objective == "pipedream",
                        max_bytes=None if linearized else (memory_budget() if max_bytes is None else max_bytes),
                        order=order)
    except TooManyIdeals as exc:
        if linearized:
            raise
        return _dpl_instead(inst, exc, t0, deadline, objective=objective, trivial=trivial, replicas=replicas,
                            sync=sync, order=order)
    prep.arrays.update(rmax=int(replicas), sync=sync)
    t1 = time.perf_counter()
    seconds = {"prepare": t1 - t0}
    ub = np.inf if upper_bound is None else float(upper_bound)
    if not linearized and upper_bound is None:
        first = _maxload_dp(inst, linearized=True, objective=objective, upper_bound=None, trivial=trivial,
                            max_ideals=max_ideals, time_limit=_left(deadline), replicas=replicas, sync_per_byte=sync,
                            prune=prune, segments=segments, max_bytes=None, order=order)
        ub = first.value
        seconds["dpl_bound"] = sum(first.seconds.values())
    ub_slack = ub * (1 + 1e-9) + 1e-12 if np.isfinite(ub) else np.inf
    t2 = time.perf_counter()
    a = prep.arrays
    lo = load_lower_bound(inst, replicas) if not linearized else 0.0
    if prune and not linearized and np.isfinite(ub):
        out, lo, t_run, seconds["thresholds"], had_first = threshold_runs(prep, lo, ub_slack,
                                                                          objective == "overlap", deadline)
        seconds["first_run"] = float(had_first)
    else:
        out, t_run = run_table(prep, ub_slack, objective == "overlap", deadline), ub_slack
    dp, parent, kind, rep, visited, done = out
    t3 = time.perf_counter()
    seconds["dp"] = t3 - t2
    value = float(dp[-1, a["k"], a["l"]])
    placement = _decode(inst, prep, parent, kind, rep) if np.isfinite(value) else None
    res = DPResult(placement, value, prep.lattice.size, int(visited), prep.h.n, seconds, linearized,
                   lower_bound=None if linearized else value)
    if tie_breaks and placement is not None and not linearized and done >= prep.lattice.size - 1:
        from dnnplace.heuristics.dp_ties import tied_splits

        t4 = time.perf_counter()
        rules = [r for r in tie_breaks if r != "first"]
        tied, res.tie_chains = tied_splits(prep, dp, rules, overlap=objective == "overlap")
        res.tied = {r: placement if r == "first" else Placement(inst.graph, inst.require_cluster(),
                                                                 tied[r][prep.h.group]) for r in tie_breaks}
        seconds["tie_breaks"] = time.perf_counter() - t4
    if done < prep.lattice.size - 1 and linearized:  # DPL cut short: the best full split pushed so far, if any
        res.complete, res.stopped = False, Termination.TIME_LIMIT
        seconds["sources_done"] = done
    elif done < prep.lattice.size - 1:
        res.complete, res.stopped = False, Termination.TIME_LIMIT
        if upper_bound is None and first.value < res.value:
            res.placement, res.value = first.placement, first.value
        # a split of max-load <= t_run passes only through pushed states, so the prefix
        # argument holds for it; any other split is above t_run
        lb = max(lo, min(t_run, prefix_lower_bound(prep, dp, done)))
        res.lower_bound = min(lb, res.value)
        seconds["lower_bound"] = time.perf_counter() - t3
        seconds["sources_done"] = done
    return res
