"""The stages of one Pesto pipeline run (:class:`PestoPipeline`, called by
:func:`~dnnplace.formulations.multilevel.pesto.pesto`): coarsen, the start and horizon on the
graph the ILP sees (with the guiding schedule as a coarse start, :func:`guided_start`), the ILP's
share of the time, the relaxed start, solve, lift the answer to the original graph, and the
comparisons that keep it never worse."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from dnnplace.evaluation.bounds import makespan_lower_bound
from dnnplace.evaluation.sim_costs import transfer_semantics
from dnnplace.evaluation.simulate import simulate
from dnnplace.formulations.device_symmetry import canonical_relabel
from dnnplace.formulations.multilevel.exact import coarse_messages, model_start, safe_horizon, solve_exact
from dnnplace.formulations.multilevel.never_worse import against_obvious, feasible, memory_ok, refine_last_stage
from dnnplace.formulations.multilevel.options import PestoRun, PipelineOptions, Starts
from dnnplace.formulations.pesto_solution import ilp_orders
from dnnplace.formulations.solvers.driver import SolveOutcome
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.progress import stage
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.coarsening import expand_priorities
from dnnplace.runtime.deadline import Deadline

__all__ = ["PestoPipeline", "guided_start"]


class _Answer(NamedTuple):
    """An answer on the original graph: placement, device order, replayed makespan,
    where it came from, and the link order (``None``: first come first served)."""

    pl: Placement
    pr: np.ndarray
    ms: float
    source: str
    lp: np.ndarray | None


@dataclass
class _Start:
    """A schedule of the graph the ILP sees: its devices, placement, per-edge simulation
    and where it came from (the ILP's horizon and MIP start)."""

    device: np.ndarray
    placement: Placement
    sim: object
    name: str


class PestoPipeline:
    """One :func:`pesto` run inside its transfer mode: simulations of the original graph
    use it, those of the graph the ILP sees count one transfer per edge (the ILP's
    accounting). Each stage is a method; :meth:`run` calls them in order."""

    def __init__(self, graph: OpGraph, cluster: Cluster, options: PipelineOptions, starts: Starts,
                 deadline: Deadline):
        self.graph, self.cluster, self.o, self.starts, self.deadline = graph, cluster, options, starts, deadline
        self.ilp_cong = options.ilp_cong
        self.model = dataclasses.replace(options.model, congestion=self.ilp_cong)
        self.t0 = time.perf_counter()
        self.coarsening = options.coarsen_to is not None and graph.n > options.coarsen_to
        self.refining = options.fallback and options.refine_share > 0 and self.coarsening
        self.orig_list = None  # the best list schedule of the original graph (guide and last-stage rival)
        self.messages = None  # per coarse edge, the messages it stands for (None: one per edge)

    def run(self) -> PestoRun:
        """The stages in order; returns the run's answer and what it measured."""
        o = self.o
        stage("coarsen" if self.coarsening else "start")
        cg, labels, named, t_coarsen = self.coarsen()
        stage(f"list schedules ({cg.n} nodes)")
        start, scores = self.ilp_start(cg, named)
        if cg is not self.graph and self.cluster.has_message_costs:  # a coarse edge may stand for several messages
            self.messages = coarse_messages(self.graph, labels, cg, o.transfer_mode)
        horizon = safe_horizon(cg, self.cluster, self.messages) if not memory_ok(start.placement) \
            else self.model_start(cg, start)[0]
        horizon = horizon if horizon > 0 else 1.0
        solver, ilp_deadline = self.ilp_budget()
        start_ok = o.warm_start and memory_ok(start.placement)
        size = {"engine": o.engine, "coarse_nodes": cg.n, "coarse_edges": cg.m, "list_scores": scores}
        if self.ilp_cong and o.relaxed_start > 0 and solver.time_limit is not None:
            solver, start, horizon, start_ok = self.relaxed_start(cg, start, horizon, start_ok, solver, size,
                                                                  ilp_deadline)
        size["horizon"] = horizon
        warm = self.warm_answer(labels, start)
        out, times, build, extra_size = solve_exact(cg, self.cluster, horizon, self.model, solver, o.engine,
                                                     (start.device, *self.model_start(cg, start)[1:])
                                                     if start_ok else None, ilp_deadline, self.messages)
        size.update(extra_size)
        size.update(vars=out.n_vars, constraints=out.n_cons, binaries=out.n_binaries)
        coarse = cg is not self.graph
        bound, trace = self.bounds(out, coarse)
        run_kw = dict(warm_makespan=warm.ms, warm_algorithm=start.name, coarse_n=cg.n, build_seconds=build,
                      solve_seconds=out.solve_seconds + out.handoff_seconds, coarsen_seconds=t_coarsen, size=size,
                      trace=trace, solver_version=out.solver_version, ilp_gap=out.gap,
                      ilp_objective=out.incumbent, ilp_bound=out.bound)
        stage("never worse: refine and compare")
        if not out.has_solution:
            return self.without_ilp_answer(out, labels, warm, bound, size, run_kw)
        cpl, cstart, ans, status = self.lift(out, times, cg, labels, coarse, bound, size)
        ans, status = self.never_worse(ans, status, warm, labels, bound, size)
        return PestoRun(ans.pl, ans.pr, ans.ms, status, out.termination, bound, source=ans.source,
                        coarse_placement=cpl, coarse_start=cstart, link_priorities=ans.lp, **run_kw)

    def model_start(self, cg: OpGraph, start: _Start) -> tuple[float, np.ndarray, dict]:
        """The start's makespan, node starts and transfer starts as the model of ``cg``
        counts its messages (:func:`~dnnplace.formulations.multilevel.exact.model_start`)."""
        return model_start(cg, self.cluster, start.device, start.sim, self.ilp_cong, self.messages)

    # ---- stage 1: coarsen (or not)
    def coarsen(self) -> tuple[OpGraph, np.ndarray, list, float]:
        """The graph the ILP sees, each original node's coarse node, the named starts of
        that graph (``Starts.extra_starts``, the guiding schedule) and the seconds taken."""
        from dnnplace.heuristics.coarsening import coarsen
        from dnnplace.heuristics.fusion import fuse_to
        from dnnplace.heuristics.list_scheduling import best_list_schedule

        o, graph, cluster = self.o, self.graph, self.cluster
        named = [(f"extra_start[{k}]", dev_x, pr_x) for k, (dev_x, pr_x) in enumerate(self.starts.extra_starts or ())]
        if self.coarsening and (o.guided or self.refining):
            self.orig_list = best_list_schedule(graph, cluster, congestion=o.congestion, deadline=self.deadline)
        if not self.coarsening:
            return graph, np.arange(graph.n), named, time.perf_counter() - self.t0
        guide = self.starts.guide
        if guide is None and o.guided:
            guide = (self.orig_list[0].algorithm, self.orig_list[0].placement, self.orig_list[0].priorities)
        guide = guide if guide is not None and memory_ok(guide[1]) else None
        if o.coarsen_with == "celeritas-fusion":
            guide, cres = None, fuse_to(graph, cluster, target=int(o.coarsen_to))
        else:
            cres = coarsen(graph, cluster, target=int(o.coarsen_to), guide=None if guide is None else guide[1].device)
        cg, labels = cres.graph, cres.labels
        if guide is not None:
            with transfer_semantics("per_edge"):
                named.append((f"guided:{guide[0]}",
                              *guided_start(cg, cluster, labels, cres.meta["guide"], guide[2], self.ilp_cong)))
        return cg, labels, named, time.perf_counter() - self.t0

    # ---- stage 2: the start and horizon on the graph the ILP sees
    def ilp_start(self, cg: OpGraph, named: list) -> tuple[_Start, dict]:
        """The best of the list schedules of ``cg`` and the ``named`` starts, simulated
        with the ILP's one transfer per edge (a horizon or start below its per-edge
        makespan would cut off the start, or every schedule, from the ILP)."""
        from dnnplace.heuristics.list_scheduling import best_list_schedule

        cluster, symmetry = self.cluster, self.model.symmetry
        with transfer_semantics("per_edge"):
            ls, _, scores = best_list_schedule(cg, cluster, congestion=self.ilp_cong, deadline=self.deadline)
        dev0 = canonical_relabel(cg, cluster, ls.placement.device) if symmetry else ls.placement.device
        pl0 = Placement(cg, cluster, dev0)
        sim0 = simulate(pl0, policy="order", priorities=ls.priorities, congestion=self.ilp_cong,
                        transfer_mode="per_edge")
        best = _Start(dev0, pl0, sim0, ls.algorithm)
        for name_x, dev_x, pr_x in named:
            dev_x = canonical_relabel(cg, cluster, np.asarray(dev_x)) if symmetry else np.asarray(dev_x)
            pl_x = Placement(cg, cluster, dev_x)
            sim_x = simulate(pl_x, policy="order", priorities=pr_x, congestion=self.ilp_cong, transfer_mode="per_edge")
            if memory_ok(pl_x) and (sim_x.makespan < best.sim.makespan or not memory_ok(best.placement)):
                best = _Start(dev_x, pl_x, sim_x, name_x)
        return best, scores

    # ---- stage 3: the ILP's share of the time
    def ilp_budget(self) -> tuple[SolverOptions, Deadline]:
        """The solver options and deadline of the ILP (model build, hand-off and solve):
        the run's, less the refinement's share of the whole limit when it refines."""
        solver, limit = self.o.solver, self.o.solver.time_limit
        if not (self.refining and limit is not None):
            return solver, self.deadline
        remaining = self.deadline.remaining()
        left = (remaining if remaining is not None else limit - (time.perf_counter() - self.t0)) \
            - limit * self.o.refine_share
        return dataclasses.replace(solver, time_limit=max(0.05, left)), self.deadline.less(limit * self.o.refine_share)

    # ---- stage 4: the relaxed start
    def relaxed_start(self, cg: OpGraph, start: _Start, horizon: float, start_ok: bool, solver: SolverOptions,
                      size: dict, deadline: Deadline) -> tuple[SolverOptions, _Start, float, bool]:
        """The congestion-free model (far fewer order variables) first, within its share of
        the ILP's ``deadline``; its schedule, replayed with congestion, is a candidate start
        for the full model, which gets the time left."""
        cluster = self.cluster
        stage("relaxed start")
        t_r = time.perf_counter()
        share = dataclasses.replace(solver, time_limit=max(1.0, self.o.relaxed_start * solver.time_limit))
        out_r, times_r, _, _ = solve_exact(cg, cluster, horizon, dataclasses.replace(self.model, congestion=False),
                                            share, self.o.engine,
                                            (start.device, self.model_start(cg, start)[1], {}) if start_ok else None,
                                            deadline.within(share.time_limit), self.messages)
        size["relaxed_start"] = {"status": out_r.status, "objective": out_r.incumbent, "bound": out_r.bound}
        if times_r is not None:
            cpl_r, pr_r, _, _ = ilp_orders(times_r, cg, np.arange(cg.n), cg)
            sim_r = simulate(cpl_r, policy="order", priorities=pr_r, congestion=True, transfer_mode="per_edge")
            size["relaxed_start"]["replayed"] = sim_r.makespan
            if memory_ok(cpl_r):  # compared as the model counts its messages
                dev0 = canonical_relabel(cg, cluster, cpl_r.device) if self.model.symmetry else cpl_r.device
                cand = _Start(dev0, Placement(cg, cluster, dev0), sim_r, "relaxation")
                ms_r = self.model_start(cg, cand)[0]
                if not memory_ok(start.placement) or ms_r < self.model_start(cg, start)[0]:
                    start, horizon, start_ok = cand, ms_r, self.o.warm_start
        solver = dataclasses.replace(solver, time_limit=max(1.0, solver.time_limit - (time.perf_counter() - t_r)))
        return solver, start, horizon, start_ok

    # ---- stage 5: the start as an answer on the original graph
    def warm_answer(self, labels: np.ndarray, start: _Start) -> _Answer:
        """The start expanded to the original graph, replayed in its order (what it would
        give alone); times one simulation of the original graph (``self.t_sim``)."""
        graph = self.graph
        pr_warm = expand_priorities(labels, start.sim.start, graph)
        pl_warm = Placement(graph, self.cluster, start.device[labels])
        t_sim = time.perf_counter()
        warm_ms = simulate(pl_warm, policy="order", priorities=pr_warm, congestion=self.o.congestion).makespan
        self.t_sim = time.perf_counter() - t_sim  # one simulation of the original graph: the closing stages make ~8
        return _Answer(pl_warm, pr_warm, warm_ms, "warm_start", None)

    # ---- stage 6: what the ILP's bound is worth
    def bounds(self, out: SolveOutcome, coarse: bool) -> tuple[float, list]:
        """The reported bound and the solver's trace as the answer's. The ILP's bound is
        valid for the simulated problem only without coarsening, when the ILP relaxes the
        simulation (FCFS links are one feasible link order; an ILP with congestion does
        not bound a simulation without it) and when the simulation counts one transfer
        per edge as the ILP does (sending a tensor once per device can beat the ILP's
        optimum); the combinatorial bound always is. The trace's bounds count only where
        the ILP's bound does (else the graph's lower bound stands in), so time-to-gap is
        never read off a coarse bound."""
        per_edge = self.o.transfer_mode == "per_edge"
        lower = makespan_lower_bound(self.graph, self.cluster)
        bound = lower
        ilp_valid = per_edge and not (coarse or out.bound is None or (self.ilp_cong and not self.o.congestion))
        if ilp_valid:
            bound = max(bound, float(out.bound))
        trace = [(t, inc, max(lower, float(b)) if ilp_valid and b is not None else lower) for t, inc, b in out.trace]
        return bound, trace

    def refine_seconds(self) -> float:
        """What the deadline (else the solver's time limit, counted from the run's start)
        leaves the refinement after the closing simulations (60 s without either)."""
        left = self.deadline.remaining()
        if left is None and self.o.solver.time_limit is not None:
            left = self.o.solver.time_limit - (time.perf_counter() - self.t0)
        return 60.0 if left is None else max(0.0, left - 8 * self.t_sim)

    # ---- stage 7a: no ILP answer
    def without_ilp_answer(self, out: SolveOutcome, labels: np.ndarray, warm: _Answer, bound: float, size: dict,
                           run_kw: dict) -> PestoRun:
        """The start, refined and compared as an ILP answer would be."""
        ans = warm
        if self.refining:  # the last stage still runs: never worse than the original graph's best list schedule
            ans = self.refine(ans, labels, size)
        if self.o.fallback:
            ans = self.obvious(ans, size)
        status = "optimal" if ans.ms <= bound + 1e-6 * max(1.0, ans.ms) else "feasible"
        term = out.termination
        return PestoRun(ans.pl, ans.pr, ans.ms, status, term, bound, source=ans.source, link_priorities=ans.lp,
                        message=out.message or f"ILP: {out.status} ({out.termination}); {ans.source} returned",
                        **run_kw)

    # ---- stage 7b: lift the ILP's answer to the original graph
    def lift(self, out: SolveOutcome, times, cg: OpGraph, labels: np.ndarray, coarse: bool, bound: float,
             size: dict) -> tuple[Placement, np.ndarray, _Answer, str]:
        """The ILP's placement and orders on the original graph, replayed: with
        ``fallback``, FCFS links where they replay better, and (coarse runs, Pesto Sec.
        3.3: with large merged nodes the coarse order loses scheduling opportunities)
        the runtime's own device orders on the ILP's placement where they do. Returns the
        coarse placement and start, the answer and its status."""
        graph, cluster, congestion, fallback = self.graph, self.cluster, self.o.congestion, self.o.fallback
        cpl, pr, lp, cstart = ilp_orders(times, graph, labels, cg)
        pl = Placement(graph, cluster, cpl.device[labels])
        ms = simulate(pl, policy="order", priorities=pr, congestion=congestion, link_priorities=lp).makespan
        link_order = "ilp" if lp is not None else "fcfs"
        if lp is not None and fallback:
            # the ILP's link order is optimal for its own (coarse) schedule; on an expanded
            # graph or a time-limited incumbent, first come first served may still be better
            ms_fcfs = simulate(pl, policy="order", priorities=pr, congestion=congestion).makespan
            if ms_fcfs < ms - 1e-9 * max(1.0, ms):
                lp, ms, link_order = None, ms_fcfs, "fcfs"
        order_policy = "ilp"
        if coarse and fallback:
            for pol in ("critical_path", "fifo"):
                sched = simulate(pl, policy=pol, congestion=congestion).schedule
                pr_pol = sched.priorities()
                ms_pol = simulate(pl, policy="order", priorities=pr_pol, congestion=congestion).makespan
                if ms_pol < ms - 1e-9 * max(1.0, ms):
                    pr, ms, order_policy, lp, link_order = pr_pol, ms_pol, pol, None, "fcfs"
        size["order_policy"] = order_policy
        size["link_order"] = link_order
        status = "feasible"
        tol = 1e-6 * max(1.0, ms)
        if (self.o.transfer_mode == "per_edge" and not coarse and out.status == "optimal"
                and out.incumbent is not None and abs(ms - out.incumbent) <= tol and self.ilp_cong == congestion):
            status = "optimal"  # the replay attains the ILP optimum, a lower bound of the simulated problem
        elif bound is not None and ms <= bound + tol:
            status = "optimal"  # the replay meets a valid lower bound
        return cpl, cstart, _Answer(pl, pr, ms, "ilp", lp), status

    # ---- stage 8: never worse than the start, the original graph's list schedules, the obvious
    def never_worse(self, ans: _Answer, status: str, warm: _Answer, labels: np.ndarray, bound: float,
                    size: dict) -> tuple[_Answer, str]:
        """With ``fallback``: the start where it replays better (and is feasible); the
        refinement of coarse runs; the obvious answers
        (:func:`~dnnplace.formulations.multilevel.never_worse.against_obvious`)."""
        tol = 1e-6 * max(1.0, ans.ms)
        if self.o.fallback and warm.ms < ans.ms - tol and feasible(warm.pl):
            # never trade the ILP's (feasible) answer for a faster start that overflows a
            # device or splits a colocation group: the ILP's bound holds for feasible schedules only
            ans = warm
            status = "optimal" if bound is not None and ans.ms <= bound + tol else "feasible"
        if self.refining:
            ans = self.refine(ans, labels, size)
            status = "optimal" if bound is not None and ans.ms <= bound + tol else "feasible"
        if self.o.fallback:
            ms_before = ans.ms
            ans = self.obvious(ans, size)
            if ans.ms < ms_before:
                status = "optimal" if bound is not None and ans.ms <= bound + tol else "feasible"
        return ans, status

    def refine(self, ans: _Answer, labels: np.ndarray, size: dict) -> _Answer:
        return _Answer(*refine_last_stage(self.graph, self.cluster, labels, *ans, self.o.congestion, size,
                                          self.orig_list, self.starts.rivals, self.refine_seconds(),
                                          self.o.kicks, self.o.windows))

    def obvious(self, ans: _Answer, size: dict) -> _Answer:
        return _Answer(*against_obvious(self.graph, self.cluster, *ans, self.o.congestion, size, self.orig_list,
                                        self.deadline))


def guided_start(cg: OpGraph, cluster: Cluster, labels: np.ndarray, cdev: np.ndarray, priorities: np.ndarray,
                  congestion: bool) -> tuple[np.ndarray, np.ndarray]:
    """The guiding schedule as a schedule of the coarse graph: its placement (uniform on
    every coarse node) and the better coarse order of (a) coarse nodes by their members'
    first place in the guiding order (as ready-queue priorities, so a coarse node whose
    members interleave with another's never deadlocks) and (b) the critical-path order."""
    first = np.full(cg.n, np.inf)
    np.minimum.at(first, labels, np.asarray(priorities, dtype=np.float64))
    pl = Placement(cg, cluster, cdev)
    best = None
    for kw in ({"policy": "priority", "priorities": first}, {"policy": "critical_path"}):
        r = simulate(pl, congestion=congestion, **kw)
        if best is None or r.makespan < best.makespan:
            best = r
    return np.asarray(cdev), best.schedule.priorities()
