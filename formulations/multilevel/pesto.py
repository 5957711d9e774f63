"""The ``pesto`` makespan method: coarsen, warm-start, solve the Pesto ILP, expand, re-simulate.

Pipeline (Pesto Sec. 3.2-3.3):

1. optionally coarsen the graph to about ``coarsen_to`` nodes with cycle-free batch
   merging (:func:`dnnplace.heuristics.coarsening.coarsen`); with ``guided`` the
   coarsening is guided by the best list schedule *of the original graph*: it merges
   only nodes that schedule puts on one device, so that placement is a placement of
   the coarse graph too (the incumbent survives coarsening, as in a multilevel
   partitioner's refinement-guided coarsening; off by default: see
   ``results/pesto/guided.md``);
2. list-schedule the (coarse) graph with every algorithm of
   :mod:`dnnplace.heuristics.list_scheduling`, re-simulate each, and, when guided, also
   the guiding placement on the coarse graph (coarse nodes ordered by their members'
   first place in the guiding schedule, and by the simulator's critical-path order);
   keep the best: its makespan is the horizon ``U`` of every big-M and its schedule the
   MIP start (``PipelineOptions.warm_start=False``, the method's ``--warm-start none``, disables the
   start, not the horizon);
3. build (:func:`dnnplace.formulations.pesto_ip.build_pesto_model`) and solve the ILP with the
   project's driver (:func:`dnnplace.formulations.solvers.driver.solve_model`), or, with
   ``engine="cpsat"``, the same model in CP-SAT
   (:func:`dnnplace.formulations.pesto_cpsat.solve_pesto_cpsat`);
4. expand: every original node takes its coarse node's device; the per-device order is
   the coarse start time, members of one coarse node in topological order; with
   congestion in the ILP, the order of the transfers on each link (constraint (7)) is
   read off the ILP's transfer starts, and a coarse edge's place in its link's order
   goes to its member edges in topological order of their sources
   (:func:`~dnnplace.formulations.pesto_solution.decode_times`,
   :func:`~dnnplace.graphs.evaluation.link_orders.orders_from_times`: device and link orders come
   from one sort of all tasks, so they never contradict each other);
5. re-simulate the *original* graph with ``policy="order"``, the ILP's link order
   (``link_priorities``) and the requested congestion: that simulated makespan is the
   reported objective. With ``fallback`` the same device order is also replayed with
   first-come-first-served links and the better is kept (``extra["model_size"]
   ["link_order"]``: ``"ilp"`` or ``"fcfs"``); with coarsening, the ILP placement is
   also replayed under the simulator's ``critical_path`` and ``fifo`` device orders
   (FCFS links) and the best order is kept (Pesto Sec. 3.3 falls back to the runtime's
   scheduler when merged nodes are large); ``extra["model_size"]["order_policy"]`` says
   which order won.

The ILP lets a link serve its transfers in any order (Pesto's constraint (7)) and
counts one transfer per edge (Pesto's DAG augmentation). The simulator replays that
order when it is given (the earliest schedule with the ILP's device and link orders, so
its makespan is at most the ILP's, in either transfer mode: sending a tensor once per
consuming device only removes transfers), and serves links first come first served
otherwise (docs/semantics.md 2.1); an FCFS schedule is one of the orders the ILP allows. Under the
per-edge transfer mode (``transfer_mode="per_edge"``), without coarsening, the ILP's
bound is therefore a valid lower bound for the simulated problem (reported as
``bound``), and an uncoarsened instance solved to optimality with the evaluation's
congestion setting is replayed at the ILP optimum and reported ``optimal``. Under the
default mode (a tensor sent once to each device that consumes it, docs/semantics.md 2.1) the ILP
over-counts transfers: its optimum is an upper bound of what its schedule replays at,
not a lower bound of the problem, so neither its bound nor its proof of optimality is
reported (``extra["ilp_bound"]`` keeps the number) and ``optimal`` needs the replay to
meet the combinatorial bound below. On a cluster whose devices share their link ports
(``cluster.ports == "shared"``, the PCIe presets) the ILP still queues transfers per
link, a relaxation of the simulation: its bound stays valid (per edge), but its
schedule may replay above its objective. With coarsening the ILP bounds only the coarse
problem and is kept in ``extra["coarse_bound"]``. The reported ``bound`` is never weaker than
:func:`~dnnplace.graphs.evaluation.bounds.makespan_lower_bound` of the original graph (critical
path, busiest device's share of the work), valid in every case, so a coarsened run still
states its gap (the 766-node LSTM of ``results/pesto``: 34.183 ms against a bound of
34.179). When the replay of the ILP's order is worse than the
warm start's replay, the better of the two is returned (``extra["source"]`` says
which; the warm start has FCFS links).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dnnplace.formulations.pesto_ip import PestoOptions, build_pesto_model, canonical_relabel, warm_start_values
from dnnplace.formulations.pesto_solution import decode_times, ilp_orders
from dnnplace.formulations.solvers.driver import SolveOutcome, solve_model
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.deadline import NO_DEADLINE, Deadline, TimeLimitReached
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.evaluation.bounds import makespan_lower_bound
from dnnplace.graphs.evaluation.sim_costs import check_transfer_mode, transfer_semantics
from dnnplace.graphs.evaluation.simulate import simulate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.coarsening import expand_priorities

__all__ = ["PestoRun", "PipelineOptions", "Starts", "pesto", "safe_horizon", "memory_ok"]


@dataclass
class PestoRun:
    """Everything one Pesto run produced (all times in ``graph.unit``)."""

    placement: Placement
    priorities: np.ndarray
    makespan: float                 # simulated on the original graph (reported objective)
    status: str
    termination: str | None
    bound: float | None             # valid lower bound for the original graph
    ilp_objective: float | None     # ILP makespan on the (coarse) graph
    ilp_bound: float | None
    ilp_gap: float | None
    warm_makespan: float            # best list schedule, simulated on the original graph
    warm_algorithm: str
    source: str                     # "ilp" or "warm_start"
    coarse_n: int
    build_seconds: float
    solve_seconds: float
    coarsen_seconds: float
    size: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    solver_version: str | None = None
    coarse_placement: Placement | None = None
    coarse_start: np.ndarray | None = None
    message: str | None = None
    link_priorities: np.ndarray | None = None  # per edge, the replayed link order (None: FCFS links)


def memory_ok(pl: Placement) -> bool:
    used = np.bincount(pl.device, weights=pl.graph.memory, minlength=pl.cluster.size)
    return bool(np.all(used <= pl.cluster.memory * (1 + 1e-12)))


def safe_horizon(graph: OpGraph, cluster: Cluster) -> float:
    """A makespan every feasible instance attains: all nodes and transfers one after
    another in topological order, each at its slowest allowed device/link."""
    p = cluster.compute_matrix(graph)
    D = cluster.size
    worst = np.zeros(graph.m)
    for a in range(D):
        for b in range(D):
            if a != b:
                t = cluster.transfer_time(np.full(graph.m, a), np.full(graph.m, b), graph.edge_bytes, graph.edge_cost)
                worst = np.maximum(worst, t)
    return float(np.nansum(np.nanmax(p, axis=1)) + worst.sum())


@dataclass(frozen=True)
class PipelineOptions:
    """How :func:`pesto` runs: one object, built once by its caller (the ``pesto`` method
    builds it from its options and the request) and passed down as it is.

    Parameters
    ----------
    coarsen_to : int, optional
        Target node count of the coarsening (``None``: solve the graph as it is).
    coarsen_with : {"pesto", "celeritas-fusion"}
        The coarsener: ``"pesto"``, Pesto's batch merging (Sec. 3.3,
        :func:`~dnnplace.heuristics.coarsening.coarsen`), or ``"celeritas-fusion"``,
        Celeritas' optimal operation fusion with window ``R = ceil(n / coarsen_to)``, so at
        least ``coarsen_to`` nodes (:func:`~dnnplace.heuristics.fusion.fuse_to`; never guided).
    guided : bool
        Coarsened runs: merge only nodes that the best list schedule of the original
        graph keeps on one device, and offer that schedule as a coarse MIP start
        (module docstring, step 1; skipped when that schedule overflows a device).
    congestion : bool
        Semantics of the final simulation (and of the ILP unless ``ilp_congestion``).
    ilp_congestion : bool, optional
        Model link congestion in the ILP (Pesto's ablation, Fig. 5, turns it off while
        still simulating with congestion).
    transfer_mode : {"per_destination", "per_edge"}, optional
        What the final simulation sends (docs/semantics.md 2.1; ``None``: the current mode,
        :func:`~dnnplace.graphs.evaluation.sim_costs.current_transfer_mode`, ``"per_destination"``
        unless set). The ILP always counts one transfer per edge, and every schedule it
        is compared with on its own graph (horizon, MIP starts) is simulated so; its
        bound and its proven optimum count for the answer only under ``"per_edge"``.
    engine : {"mip", "cpsat"}
        The exact engine: the Pyomo MIP (:mod:`~dnnplace.formulations.pesto_ip`) through
        the solver named in ``solver``, or the same model in OR-Tools CP-SAT
        (:mod:`~dnnplace.formulations.pesto_cpsat`, extra ``dnnplace[cpsat]``; its
        ``threads`` are CP-SAT workers). Both hand over placement, device and link
        orders the same way.
    solver : SolverOptions
        Backend and limits, as given (its own defaults: HiGHS without a limit; the
        ``pesto`` method's default limits are declared in :mod:`dnnplace.methods`).
    model : PestoOptions
        Constraint families; its ``congestion`` is overridden by ``ilp_congestion``.
    warm_start : bool
        Pass the best list schedule to the solver as a MIP start.
    relaxed_start : float
        With congestion in the ILP: first solve the same model *without* congestion
        constraints (7) for this share of the ILP's time, replay its schedule with
        congestion (FCFS links) and, when it beats the list schedule, make it the
        horizon and MIP start of the full model (``0`` skips the phase;
        ``extra["model_size"]["relaxed_start"]`` records it). Without (7) the model has
        no transfer-pair order variables, so on coarse graphs it solves far sooner.
    fallback : bool
        Keep the better of the ILP's replay, the runtime orders (coarse runs) and the
        warm start. ``False`` reports the ILP's own placement and order only (for
        ablations that must compare ILP solutions as such).
    refine_share : float
        Coarsened runs with ``fallback``: the share of the solver's time limit kept for
        the last stage on the original graph (the ILP gets the rest; the refinement
        stops at the run's ``deadline``, leaving time for the closing simulations; 60 s
        of refinement without a limit). The answer so far
        is compared with the best list schedule *of the original graph* (so the
        pipeline is never worse than the best heuristic it knows), and the better one is refined by unit moves
        (:func:`~dnnplace.heuristics.refine.refine_placement`: coarse nodes as units,
        then single nodes, scored by the simulator under the critical-path policy and
        replayed in its order). ``0`` skips the stage.
    """

    coarsen_to: int | None = None
    coarsen_with: str = "pesto"
    guided: bool = False
    congestion: bool = True
    ilp_congestion: bool | None = None
    transfer_mode: str | None = None
    engine: str = "mip"
    solver: SolverOptions = field(default_factory=SolverOptions)
    model: PestoOptions = field(default_factory=PestoOptions)
    warm_start: bool = True
    relaxed_start: float = 0.0
    fallback: bool = True
    refine_share: float = 0.2

    @property
    def ilp_cong(self) -> bool:
        """Link congestion in the ILP."""
        return self.congestion if self.ilp_congestion is None else bool(self.ilp_congestion)


@dataclass(frozen=True)
class Starts:
    """What a run knows besides the instance.

    Parameters
    ----------
    extra_starts : sequence of (device, priorities)
        Further schedules *of the graph the ILP sees* (the coarse graph: coarsening is
        deterministic, so a previous run's ``coarse_placement.device`` and an order of
        its ``coarse_start`` qualify); the best re-simulated one (under the ILP's
        congestion setting) replaces the list schedule as horizon and MIP start.
    guide : (name, Placement, priorities), optional
        Coarsened runs: guide the coarsening with this schedule of the original graph
        (a previous answer: :func:`~dnnplace.formulations.multilevel.vcycle.pesto_vcycle`;
        ``PipelineOptions.guided`` makes it the original graph's best list schedule).
    rivals : sequence of (name, Placement)
        Placements *of the original graph* from other heuristics (e.g. the layer-wise
        expert, :func:`~dnnplace.heuristics.baselines.layer_split`) that the last stage of
        a coarsened run also compares against, each replayed in its ``fifo`` order; the
        best memory-feasible one is refined if it beats the answer so far. Pesto's
        pipeline is then never worse than these either (measured on the captured
        RNNLM-2x2048: without it, the expert won by 23-34 % where communication
        dominates).
    """

    extra_starts: Sequence[tuple[np.ndarray, np.ndarray]] = ()
    guide: tuple[str, Placement, np.ndarray] | None = None
    rivals: Sequence[tuple[str, Placement]] = ()


def pesto(graph: OpGraph, cluster: Cluster, options: PipelineOptions | None = None, starts: Starts | None = None, *,
          deadline: Deadline | None = None) -> PestoRun:
    """Run the Pesto pipeline (see the module docstring) as ``options`` say
    (:class:`PipelineOptions`; default: its defaults) from ``starts`` (:class:`Starts`).

    ``deadline`` (:class:`~dnnplace.graphs.deadline.Deadline`): when the whole run must
    end (default: ``options.solver.time_limit`` from now): list schedules stop starting,
    a model too large to build in the time left is not started, the model build and the
    hand-off to the solver stop at it, the solver gets what is left, the refinement
    stops before it; a run stopped before its ILP answers returns its list-schedule
    start (termination ``time_limit``).

    The stages, in order (:class:`_Pipeline`): coarsen, the start and horizon on the
    graph the ILP sees, the ILP's share of the time, the relaxed start, solve, lift the
    answer to the original graph, and the comparisons that keep it never worse.
    """
    options = options or PipelineOptions()
    if options.coarsen_with not in ("pesto", "celeritas-fusion"):
        raise InputError(f"coarsen_with {options.coarsen_with!r}: expected 'pesto' or 'celeritas-fusion'")
    if options.engine not in ("mip", "cpsat"):
        raise InputError(f"pesto: unknown engine {options.engine!r}; known: 'mip', 'cpsat'")
    if options.engine == "cpsat":
        from dnnplace.formulations.pesto_cpsat import available

        if not available():
            raise InputError("pesto: engine 'cpsat' needs OR-Tools: pip install 'dnnplace[cpsat]'")
    options = dataclasses.replace(options, transfer_mode=check_transfer_mode(options.transfer_mode))
    deadline = deadline or Deadline(options.solver.time_limit)
    with transfer_semantics(options.transfer_mode):
        return _Pipeline(graph, cluster, options, starts or Starts(), deadline).run()


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


class _Pipeline:
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

    def run(self) -> PestoRun:
        """The stages in order; returns the run's answer and what it measured."""
        o = self.o
        cg, labels, named, t_coarsen = self.coarsen()
        start, scores = self.ilp_start(cg, named)
        horizon = safe_horizon(cg, self.cluster) if not memory_ok(start.placement) else start.sim.makespan
        horizon = horizon if horizon > 0 else 1.0
        solver, ilp_deadline = self.ilp_budget()
        start_ok = o.warm_start and memory_ok(start.placement)
        size = {"engine": o.engine, "coarse_nodes": cg.n, "coarse_edges": cg.m, "list_scores": scores}
        if self.ilp_cong and o.relaxed_start > 0 and solver.time_limit is not None:
            solver, start, horizon, start_ok = self.relaxed_start(cg, start, horizon, start_ok, solver, size)
        size["horizon"] = horizon
        warm = self.warm_answer(labels, start)
        xs0 = {int(e): float(s) for e, s in zip(start.sim.xfer_edge, start.sim.xfer_start)}
        out, times, build, extra_size = _solve_exact(cg, self.cluster, horizon, self.model, solver, o.engine,
                                                     (start.device, start.sim.start, xs0) if start_ok else None,
                                                     ilp_deadline)
        size.update(extra_size)
        size.update(vars=out.n_vars, constraints=out.n_cons, binaries=out.n_binaries)
        coarse = cg is not self.graph
        bound, trace = self.bounds(out, coarse)
        run_kw = dict(warm_makespan=warm.ms, warm_algorithm=start.name, coarse_n=cg.n, build_seconds=build,
                      solve_seconds=out.solve_seconds + out.handoff_seconds, coarsen_seconds=t_coarsen, size=size,
                      trace=trace, solver_version=out.solver_version, ilp_gap=out.gap,
                      ilp_objective=out.incumbent, ilp_bound=out.bound)
        if not out.has_solution:
            return self.without_ilp_answer(out, labels, warm, bound, size, run_kw)
        cpl, cstart, ans, status = self.lift(out, times, cg, labels, coarse, bound, size)
        ans, status = self.never_worse(ans, status, warm, labels, bound, size)
        return PestoRun(ans.pl, ans.pr, ans.ms, status, out.termination, bound, source=ans.source,
                        coarse_placement=cpl, coarse_start=cstart, link_priorities=ans.lp, **run_kw)

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
                              *_guided_start(cg, cluster, labels, cres.meta["guide"], guide[2], self.ilp_cong)))
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
        return dataclasses.replace(solver, time_limit=max(0.05, left)), Deadline(max(0.0, left))

    # ---- stage 4: the relaxed start
    def relaxed_start(self, cg: OpGraph, start: _Start, horizon: float, start_ok: bool, solver: SolverOptions,
                      size: dict) -> tuple[SolverOptions, _Start, float, bool]:
        """The congestion-free model (far fewer order variables) first; its schedule,
        replayed with congestion, is a candidate start for the full model, which gets
        the time left."""
        cluster = self.cluster
        t_r = time.perf_counter()
        share = dataclasses.replace(solver, time_limit=max(1.0, self.o.relaxed_start * solver.time_limit))
        out_r, times_r, _, _ = _solve_exact(cg, cluster, horizon, dataclasses.replace(self.model, congestion=False),
                                            share, self.o.engine,
                                            (start.device, start.sim.start, {}) if start_ok else None)
        size["relaxed_start"] = {"status": out_r.status, "objective": out_r.incumbent, "bound": out_r.bound}
        if times_r is not None:
            cpl_r, pr_r, _, _ = ilp_orders(times_r, cg, np.arange(cg.n), cg)
            sim_r = simulate(cpl_r, policy="order", priorities=pr_r, congestion=True, transfer_mode="per_edge")
            size["relaxed_start"]["replayed"] = sim_r.makespan
            if memory_ok(cpl_r) and (sim_r.makespan < start.sim.makespan or not memory_ok(start.placement)):
                dev0 = canonical_relabel(cg, cluster, cpl_r.device) if self.model.symmetry else cpl_r.device
                start, horizon = _Start(dev0, Placement(cg, cluster, dev0), sim_r, "relaxation"), sim_r.makespan
                start_ok = self.o.warm_start
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
        """What the deadline leaves the refinement after the closing simulations (60 s without a limit)."""
        left = self.deadline.remaining()
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
        term = "time_limit" if out.termination == "maxTimeLimit" else out.termination
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
        """With ``fallback``: the start where it replays better (and fits in memory); the
        refinement of coarse runs; the obvious answers (:func:`_never_worse`)."""
        tol = 1e-6 * max(1.0, ans.ms)
        if self.o.fallback and warm.ms < ans.ms - tol and memory_ok(warm.pl):
            # never trade the ILP's (memory-feasible) answer for a faster start that
            # overflows a device: the ILP's bound holds for memory-feasible schedules only
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
        return _Answer(*_refine(self.graph, self.cluster, labels, *ans, self.o.congestion, size, self.orig_list,
                                self.starts.rivals, self.refine_seconds()))

    def obvious(self, ans: _Answer, size: dict) -> _Answer:
        return _Answer(*_never_worse(self.graph, self.cluster, *ans, self.o.congestion, size, self.orig_list,
                                     self.deadline))


BUILD_PAIRS_PER_SECOND = 50_000
"""A generous rate at which a Pesto model's device-order pairs are built and handed to
the solver (measured: Pyomo builds and hands over a few thousand per second, CP-SAT
tens of thousands): a model with more pairs than this rate times the time left is not
started (:func:`_too_big`)."""


def _too_big(cg: OpGraph, deadline: Deadline) -> str | None:
    """Why the model of ``cg`` cannot be built before ``deadline`` (``None`` if it may):
    nodes of one topological level are never ordered by precedence, so each pair of them
    gets an order variable (at least ``sum w (w - 1) / 2`` pairs over the level widths
    ``w``; the n x n reachability that finds the rest alone takes seconds at 20k nodes)."""
    from dnnplace.graphs.levels import level_widths

    left = deadline.remaining()
    if left is None:
        return None
    w = level_widths(cg).astype(np.float64)
    pairs = float((w * (w - 1) / 2).sum())
    if pairs > BUILD_PAIRS_PER_SECOND * left:
        return (f"time limit: the exact model has at least {pairs:.3g} device-order pairs, more than can be built in "
                f"the {left:.1f} s left (coarsen first: coarsen_to)")
    return None


def _solve_exact(cg: OpGraph, cluster: Cluster, horizon: float, opts: PestoOptions, solver: SolverOptions,
                 engine: str, start: tuple | None, deadline: Deadline | None = None):
    """Build and solve the makespan model of ``cg`` with ``engine`` from ``start``
    (``(device, start, transfer starts)`` or ``None``): ``(outcome, times or None,
    build seconds, model-size entries)``, ``times`` as
    :func:`~dnnplace.formulations.pesto_solution.ilp_orders` reads them. Past
    ``deadline`` (in the model build or the hand-off) the outcome is ``no_solution``
    with termination ``maxTimeLimit``, nothing solved."""
    deadline = deadline or NO_DEADLINE
    why = _too_big(cg, deadline)
    if why is not None:  # a model that cannot be built in the time left is not started
        return SolveOutcome("no_solution", "maxTimeLimit", solver="cpsat" if engine == "cpsat" else solver.solver,
                            message=why), None, 0.0, {"stopped": why}
    if engine == "cpsat":
        from dnnplace.formulations.pesto_cpsat import solve_pesto_cpsat

        out, times = solve_pesto_cpsat(cg, cluster, horizon=horizon, options=opts, solver=solver, warm_start=start,
                                       deadline=deadline)
        return out, None if times is None else times.as_tuple(), out.build_seconds, {}
    t1 = time.perf_counter()
    try:
        with deadline.guard("the ILP's model build"):
            model = build_pesto_model(cg, cluster, horizon=horizon, options=opts)
            ws = warm_start_values(model, *start) if start is not None else None
    except TimeLimitReached as exc:
        build = time.perf_counter() - t1
        return SolveOutcome("no_solution", "maxTimeLimit", solver=solver.solver, message=str(exc),
                            build_seconds=build), None, build, {"stopped": str(exc)}
    build = time.perf_counter() - t1
    out = solve_model(model, solver, warm_start=ws, build_seconds=build, deadline=deadline)
    times = decode_times(model) if out.has_solution else None
    return out, times, build, {"node_pairs": len(model.pesto.node_pairs),
                               "transfer_pairs": len(model.pesto.xfer_pairs)}


def _guided_start(cg: OpGraph, cluster: Cluster, labels: np.ndarray, cdev: np.ndarray, priorities: np.ndarray,
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


def _never_worse(graph: OpGraph, cluster: Cluster, pl: Placement, pr: np.ndarray, ms: float, source: str,
                 lp: np.ndarray | None, congestion: bool, size: dict, orig_list: tuple | None,
                 deadline: Deadline | None = None):
    """The answer, or the obvious one when it is better: the single-device placement
    (:func:`~dnnplace.heuristics.baselines.single_device`, replayed in its critical-path
    order) and the best list schedule of the original graph (``orig_list``, computed here
    when the pipeline had none), each where it fits in memory. So the pipeline never
    returns worse than either (``size["obvious"]`` records their makespans)."""
    from dnnplace.heuristics.baselines import single_device
    from dnnplace.heuristics.list_scheduling import best_list_schedule

    if orig_list is None:
        orig_list = best_list_schedule(graph, cluster, congestion=congestion, deadline=deadline)
    ls, ls_ms, _ = orig_list
    one = single_device(graph, cluster)
    pr_one = simulate(one, policy="critical_path", congestion=congestion).schedule.priorities()
    ms_one = simulate(one, policy="order", priorities=pr_one, congestion=congestion).makespan
    name = "single:" + cluster.names[int(one.device[0])] if graph.n else "single"
    size["obvious"] = {name: ms_one, f"list:{ls.algorithm}": ls_ms}
    for what, pl_x, pr_x, ms_x in ((f"list:{ls.algorithm}", ls.placement, ls.priorities, ls_ms),
                                   (name, one, pr_one, ms_one)):
        if memory_ok(pl_x) and ms_x < ms - 1e-9 * max(1.0, ms):
            pl, pr, ms, source, lp = pl_x, pr_x, ms_x, what, None
    return pl, pr, ms, source, lp


def _refine(graph: OpGraph, cluster: Cluster, labels: np.ndarray, pl: Placement, pr: np.ndarray, ms: float,
            source: str, lp: np.ndarray | None, congestion: bool, size: dict, orig_list: tuple,
            rivals: Sequence[tuple[str, Placement]], seconds: float):
    """The last stage of a coarsened run (see :attr:`PipelineOptions.refine_share`): never
    worse than the best list schedule of the original graph (``orig_list``, as
    :func:`~dnnplace.heuristics.list_scheduling.best_list_schedule` returns it) or any
    of the ``rivals`` (replayed in their ``fifo`` order), then unit moves."""
    from dnnplace.heuristics.refine import refine_placement

    t0 = time.perf_counter()
    ls, ls_ms, _ = orig_list
    size["original_best_list"] = {"algorithm": ls.algorithm, "makespan": ls_ms}
    tol = 1e-9 * max(1.0, ms)
    if memory_ok(ls.placement) and ls_ms < ms - tol:
        pl, pr, ms, source, lp = ls.placement, ls.priorities, ls_ms, f"list:{ls.algorithm}", None
    for name, pl_x in rivals:
        pr_x = simulate(pl_x, policy="fifo", congestion=congestion).schedule.priorities()
        ms_x = simulate(pl_x, policy="order", priorities=pr_x, congestion=congestion).makespan
        size.setdefault("rivals", {})[name] = ms_x
        if memory_ok(pl_x) and ms_x < ms - tol:
            pl, pr, ms, source, lp = pl_x, pr_x, ms_x, name, None
    dev = pl.device
    # coarse nodes first (few units, big moves), then single nodes (colocation groups) with the time left
    for level, units in (("coarse", labels), ("nodes", None)):
        left = max(0.0, seconds - (time.perf_counter() - t0))
        dev, _, info = refine_placement(graph, cluster, dev, units=units, policy="critical_path",
                                        congestion=congestion, time_limit=left)
        size[f"refine_{level}"] = info
    pl_r = Placement(graph, cluster, dev)
    pr_r = simulate(pl_r, policy="critical_path", congestion=congestion).schedule.priorities()
    ms_r = simulate(pl_r, policy="order", priorities=pr_r, congestion=congestion).makespan
    if ms_r < ms - tol:
        pl, pr, ms, source, lp = pl_r, pr_r, ms_r, f"refined({source})", None
    return pl, pr, ms, source, lp
