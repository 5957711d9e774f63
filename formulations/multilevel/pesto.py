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
   MIP start (``warm_start="none"`` disables the start, not the horizon);
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

__all__ = ["PestoRun", "pesto", "safe_horizon", "memory_ok"]


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


def pesto(graph: OpGraph, cluster: Cluster, *, coarsen_to: int | None = None, congestion: bool = True,
          ilp_congestion: bool | None = None, warm_start: bool = True, solver: SolverOptions | None = None,
          options: PestoOptions | None = None, fallback: bool = True,
          extra_starts: list | None = None, refine_share: float = 0.2, guided: bool = False,
          rivals: Sequence[tuple[str, Placement]] = (),
          coarsen_with: str = "pesto",
          engine: str = "mip", relaxed_start: float = 0.0,
          guide: tuple[str, Placement, np.ndarray] | None = None,
          transfer_mode: str | None = None, deadline: Deadline | None = None) -> PestoRun:
    """Run the Pesto pipeline (see the module docstring).

    Parameters
    ----------
    graph, cluster
        The instance.
    coarsen_to : int, optional
        Target node count of the coarsening (``None``: solve the graph as it is).
    coarsen_with : str
        The coarsener: ``"pesto"``, Pesto's batch merging (Sec. 3.3,
        :func:`~dnnplace.heuristics.coarsening.coarsen`), or ``"celeritas-fusion"``,
        Celeritas' optimal operation fusion with window ``R = ceil(n / coarsen_to)``, so at
        least ``coarsen_to`` nodes (:func:`~dnnplace.heuristics.fusion.fuse_to`; never guided).
    congestion : bool
        Semantics of the final simulation (and of the ILP unless ``ilp_congestion``).
    transfer_mode : {"per_destination", "per_edge"}, optional
        What the final simulation sends (docs/semantics.md 2.1; ``None``: the current mode,
        :func:`~dnnplace.graphs.evaluation.sim_costs.current_transfer_mode`, ``"per_destination"``
        unless set). The ILP always counts one transfer per edge, and every schedule it
        is compared with on its own graph (horizon, MIP starts) is simulated so; its
        bound and its proven optimum count for the answer only under ``"per_edge"``.
    ilp_congestion : bool, optional
        Model link congestion in the ILP (Pesto's ablation, Fig. 5, turns it off while
        still simulating with congestion).
    warm_start : bool
        Pass the best list schedule to the solver as a MIP start.
    solver : SolverOptions
        Backend and limits (default HiGHS, 60 s, 1 thread).
    options : PestoOptions
        Constraint families; its ``congestion`` is overridden by ``ilp_congestion``.
    fallback : bool
        Keep the better of the ILP's replay, the runtime orders (coarse runs) and the
        warm start. ``False`` reports the ILP's own placement and order only (for
        ablations that must compare ILP solutions as such).
    extra_starts : list of (device, priorities), optional
        Further schedules *of the graph the ILP sees* (the coarse graph: coarsening is
        deterministic, so a previous run's ``coarse_placement.device`` and an order of
        its ``coarse_start`` qualify); the best re-simulated one (under the ILP's
        congestion setting) replaces the list schedule as horizon and MIP start.
    rivals : sequence of (name, Placement), optional
        Placements *of the original graph* from other heuristics (e.g. the layer-wise
        expert, :func:`~dnnplace.heuristics.baselines.layer_split`) that the last stage of
        a coarsened run also compares against, each replayed in its ``fifo`` order; the
        best memory-feasible one is refined if it beats the answer so far. Pesto's
        pipeline is then never worse than these either (measured on the captured
        RNNLM-2x2048: without it, the expert won by 23-34 % where communication
        dominates).
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
    guided : bool
        Coarsened runs: merge only nodes that the best list schedule of the original
        graph keeps on one device, and offer that schedule as a coarse MIP start
        (module docstring, step 1; skipped when that schedule overflows a device).
    guide : (name, Placement, priorities), optional
        Coarsened runs: guide the coarsening with this schedule of the original graph
        instead (a previous answer: :func:`~dnnplace.formulations.multilevel.vcycle.pesto_vcycle`).
    engine : {"mip", "cpsat"}
        The exact engine: the Pyomo MIP (:mod:`~dnnplace.formulations.pesto_ip`) through
        the solver named in ``solver``, or the same model in OR-Tools CP-SAT
        (:mod:`~dnnplace.formulations.pesto_cpsat`, extra ``dnnplace[cpsat]``; its
        ``threads`` are CP-SAT workers). Both hand over placement, device and link
        orders the same way.
    deadline : Deadline, optional
        When the whole run must end (default: ``solver.time_limit`` from now): list
        schedules stop starting, a model too large to build in the time left is not
        started, the model build and the hand-off to the solver stop at it, the solver
        gets what is left, the refinement stops before it; a run stopped before its ILP
        answers returns its list-schedule start (termination ``time_limit``).
    relaxed_start : float
        With congestion in the ILP: first solve the same model *without* congestion
        constraints (7) for this share of the ILP's time, replay its schedule with
        congestion (FCFS links) and, when it beats the list schedule, make it the
        horizon and MIP start of the full model (``0`` skips the phase;
        ``extra["model_size"]["relaxed_start"]`` records it). Without (7) the model has
        no transfer-pair order variables, so on coarse graphs it solves far sooner.
    """
    if coarsen_with not in ("pesto", "celeritas-fusion"):
        raise InputError(f"coarsen_with {coarsen_with!r}: expected 'pesto' or 'celeritas-fusion'")
    if engine not in ("mip", "cpsat"):
        raise InputError(f"pesto: unknown engine {engine!r}; known: 'mip', 'cpsat'")
    if engine == "cpsat":
        from dnnplace.formulations.pesto_cpsat import available

        if not available():
            raise InputError("pesto: engine 'cpsat' needs OR-Tools: pip install 'dnnplace[cpsat]'")
    solver = solver or SolverOptions(time_limit=60.0, threads=1)
    transfer_mode = check_transfer_mode(transfer_mode)
    deadline = deadline or Deadline(solver.time_limit)
    with transfer_semantics(transfer_mode):
        return _pesto(graph, cluster, coarsen_to=coarsen_to, congestion=congestion, ilp_congestion=ilp_congestion,
                      warm_start=warm_start, solver=solver, options=options, fallback=fallback,
                      extra_starts=extra_starts, refine_share=refine_share, guided=guided, rivals=rivals,
                      coarsen_with=coarsen_with, engine=engine, relaxed_start=relaxed_start, guide=guide,
                      transfer_mode=transfer_mode, deadline=deadline)


def _pesto(graph: OpGraph, cluster: Cluster, *, coarsen_to: int | None, congestion: bool,
           ilp_congestion: bool | None, warm_start: bool, solver: SolverOptions, options: PestoOptions | None,
           fallback: bool, extra_starts: list | None, refine_share: float, guided: bool,
           rivals: Sequence[tuple[str, Placement]], coarsen_with: str, engine: str, relaxed_start: float,
           guide: tuple[str, Placement, np.ndarray] | None, transfer_mode: str, deadline: Deadline) -> PestoRun:
    """:func:`pesto` inside its transfer mode: simulations of the original graph use it,
    those of the graph the ILP sees count one transfer per edge (the ILP's accounting)."""
    from dnnplace.heuristics.coarsening import coarsen
    from dnnplace.heuristics.fusion import fuse_to
    from dnnplace.heuristics.list_scheduling import best_list_schedule

    ilp_cong = congestion if ilp_congestion is None else bool(ilp_congestion)
    opts = options or PestoOptions()
    opts = PestoOptions(congestion=ilp_cong, memory=opts.memory, colocation=opts.colocation,
                        symmetry=opts.symmetry, load_cuts=opts.load_cuts)
    t0 = time.perf_counter()
    limit = solver.time_limit
    coarsening = coarsen_to is not None and graph.n > coarsen_to
    refining = fallback and refine_share > 0 and coarsening
    starts = [(f"extra_start[{k}]", dev_x, pr_x) for k, (dev_x, pr_x) in enumerate(extra_starts or ())]
    orig_list = None  # the best list schedule of the original graph (guide and last-stage rival)
    if coarsening and (guided or refining):
        orig_list = best_list_schedule(graph, cluster, congestion=congestion, deadline=deadline)
    if coarsening:
        if guide is None and guided:
            guide = (orig_list[0].algorithm, orig_list[0].placement, orig_list[0].priorities)
        guide = guide if guide is not None and memory_ok(guide[1]) else None
        if coarsen_with == "celeritas-fusion":
            guide, cres = None, fuse_to(graph, cluster, target=int(coarsen_to))
        else:
            cres = coarsen(graph, cluster, target=int(coarsen_to), guide=None if guide is None else guide[1].device)
        cg, labels = cres.graph, cres.labels
        if guide is not None:
            with transfer_semantics("per_edge"):
                starts.append((f"guided:{guide[0]}",
                               *_guided_start(cg, cluster, labels, cres.meta["guide"], guide[2], ilp_cong)))
    else:
        cg, labels = graph, np.arange(graph.n)
    t_coarsen = time.perf_counter() - t0
    coarse = cg is not graph

    # ---- heuristic horizon and warm start on the graph the ILP sees, simulated with the
    # ILP's one transfer per edge (a horizon or start below its per-edge makespan would
    # cut off the start, or every schedule, from the ILP)
    with transfer_semantics("per_edge"):
        ls, _, scores = best_list_schedule(cg, cluster, congestion=ilp_cong, deadline=deadline)
    dev0 = canonical_relabel(cg, cluster, ls.placement.device) if opts.symmetry else ls.placement.device
    pl0 = Placement(cg, cluster, dev0)
    sim0 = simulate(pl0, policy="order", priorities=ls.priorities, congestion=ilp_cong, transfer_mode="per_edge")
    warm_name = ls.algorithm
    for name_x, dev_x, pr_x in starts:
        dev_x = canonical_relabel(cg, cluster, np.asarray(dev_x)) if opts.symmetry else np.asarray(dev_x)
        pl_x = Placement(cg, cluster, dev_x)
        sim_x = simulate(pl_x, policy="order", priorities=pr_x, congestion=ilp_cong, transfer_mode="per_edge")
        if memory_ok(pl_x) and (sim_x.makespan < sim0.makespan or not memory_ok(pl0)):
            dev0, pl0, sim0, warm_name = dev_x, pl_x, sim_x, name_x
    horizon = safe_horizon(cg, cluster) if not memory_ok(pl0) else sim0.makespan
    horizon = horizon if horizon > 0 else 1.0
    ilp_deadline = deadline  # the ILP (model build, hand-off and solve) stops at it
    if refining and limit is not None:  # the ILP leaves the refinement its share of the whole limit
        left = (deadline.remaining() if deadline.remaining() is not None else limit - (time.perf_counter() - t0)) \
            - limit * refine_share
        ilp_deadline = Deadline(max(0.0, left))
        solver = dataclasses.replace(solver, time_limit=max(0.05, left))
    start_ok = warm_start and memory_ok(pl0)
    size = {"engine": engine, "coarse_nodes": cg.n, "coarse_edges": cg.m, "list_scores": scores}
    if ilp_cong and relaxed_start > 0 and solver.time_limit is not None:
        # the congestion-free model (far fewer order variables) first; its schedule,
        # replayed with congestion, is a candidate start for the full model
        t_r = time.perf_counter()
        share = dataclasses.replace(solver, time_limit=max(1.0, relaxed_start * solver.time_limit))
        out_r, times_r, _, _ = _solve_exact(cg, cluster, horizon, dataclasses.replace(opts, congestion=False), share,
                                            engine, (dev0, sim0.start, {}) if start_ok else None)
        size["relaxed_start"] = {"status": out_r.status, "objective": out_r.incumbent, "bound": out_r.bound}
        if times_r is not None:
            cpl_r, pr_r, _, _ = ilp_orders(times_r, cg, np.arange(cg.n), cg)
            sim_r = simulate(cpl_r, policy="order", priorities=pr_r, congestion=True, transfer_mode="per_edge")
            size["relaxed_start"]["replayed"] = sim_r.makespan
            if memory_ok(cpl_r) and (sim_r.makespan < sim0.makespan or not memory_ok(pl0)):
                dev0 = canonical_relabel(cg, cluster, cpl_r.device) if opts.symmetry else cpl_r.device
                pl0, sim0, warm_name, horizon = Placement(cg, cluster, dev0), sim_r, "relaxation", sim_r.makespan
                start_ok = warm_start
        solver = dataclasses.replace(solver, time_limit=max(1.0, solver.time_limit - (time.perf_counter() - t_r)))
    size["horizon"] = horizon
    # the warm start on the original graph (what it would give alone)
    pr_warm = expand_priorities(labels, sim0.start, graph)
    pl_warm = Placement(graph, cluster, dev0[labels])
    t_sim = time.perf_counter()
    warm_ms = simulate(pl_warm, policy="order", priorities=pr_warm, congestion=congestion).makespan
    t_sim = time.perf_counter() - t_sim  # one simulation of the original graph: the closing stages make ~8
    xs0 = {int(e): float(s) for e, s in zip(sim0.xfer_edge, sim0.xfer_start)}
    out, times, build, extra_size = _solve_exact(cg, cluster, horizon, opts, solver, engine,
                                                 (dev0, sim0.start, xs0) if start_ok else None, ilp_deadline)
    size.update(extra_size)
    size.update(vars=out.n_vars, constraints=out.n_cons, binaries=out.n_binaries)
    run_kw = dict(warm_makespan=warm_ms, warm_algorithm=warm_name, coarse_n=cg.n, build_seconds=build,
                  solve_seconds=out.solve_seconds + out.handoff_seconds, coarsen_seconds=t_coarsen, size=size,
                  trace=out.trace, solver_version=out.solver_version, ilp_gap=out.gap,
                  ilp_objective=out.incumbent, ilp_bound=out.bound)
    # the ILP's bound is valid for the simulated problem only without coarsening, when
    # the ILP relaxes the simulation (FCFS links are one feasible link order; an ILP with
    # congestion does not bound a simulation without it) and when the simulation counts
    # one transfer per edge as the ILP does (sending a tensor once per device can beat
    # the ILP's optimum); the combinatorial bound always is
    per_edge = transfer_mode == "per_edge"
    lower = makespan_lower_bound(graph, cluster)
    bound = lower
    ilp_valid = per_edge and not (coarse or out.bound is None or (ilp_cong and not congestion))
    if ilp_valid:
        bound = max(bound, float(out.bound))
    # the solver's trace as the answer's: its bounds count only where the ILP's bound does
    # (else the graph's lower bound stands in), so time-to-gap is never read off a coarse bound
    run_kw["trace"] = [(t, inc, max(lower, float(b)) if ilp_valid and b is not None else lower)
                       for t, inc, b in out.trace]
    def refine_seconds() -> float:  # what the deadline leaves after the closing simulations (60 s without a limit)
        left = deadline.remaining()
        return 60.0 if left is None else max(0.0, left - 8 * t_sim)

    if not out.has_solution:
        pl, pr, ms, source, lp = pl_warm, pr_warm, warm_ms, "warm_start", None
        if refining:  # the last stage still runs: never worse than the original graph's best list schedule
            pl, pr, ms, source, lp = _refine(graph, cluster, labels, pl, pr, ms, source, lp, congestion, size,
                                             orig_list, rivals, refine_seconds())
        if fallback:
            pl, pr, ms, source, lp = _never_worse(graph, cluster, pl, pr, ms, source, lp, congestion, size, orig_list,
                                                  deadline)
        status = "optimal" if ms <= bound + 1e-6 * max(1.0, ms) else "feasible"
        term = "time_limit" if out.termination == "maxTimeLimit" else out.termination
        return PestoRun(pl, pr, ms, status, term, bound, source=source, link_priorities=lp,
                        message=out.message or f"ILP: {out.status} ({out.termination}); {source} returned",
                        **run_kw)
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
        # Pesto Sec. 3.3: with large merged nodes the coarse order loses scheduling
        # opportunities; keep the ILP placement and try the runtime's own orders too
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
    if (per_edge and not coarse and out.status == "optimal" and out.incumbent is not None
            and abs(ms - out.incumbent) <= tol and ilp_cong == congestion):
        status = "optimal"  # the replay attains the ILP optimum, a lower bound of the simulated problem
    elif bound is not None and ms <= bound + tol:
        status = "optimal"  # the replay meets a valid lower bound
    source = "ilp"
    if fallback and warm_ms < ms - tol and memory_ok(pl_warm):
        # never trade the ILP's (memory-feasible) answer for a faster start that
        # overflows a device: the ILP's bound holds for memory-feasible schedules only
        pl, pr, ms, source, lp = pl_warm, pr_warm, warm_ms, "warm_start", None
        status = "optimal" if bound is not None and ms <= bound + tol else "feasible"
    if refining:
        pl, pr, ms, source, lp = _refine(graph, cluster, labels, pl, pr, ms, source, lp, congestion, size, orig_list,
                                         rivals, refine_seconds())
        status = "optimal" if bound is not None and ms <= bound + tol else "feasible"
    if fallback:
        ms_before = ms
        pl, pr, ms, source, lp = _never_worse(graph, cluster, pl, pr, ms, source, lp, congestion, size, orig_list,
                                              deadline)
        if ms < ms_before:
            status = "optimal" if bound is not None and ms <= bound + tol else "feasible"
    return PestoRun(pl, pr, ms, status, out.termination, bound, source=source, coarse_placement=cpl,
                    coarse_start=cstart, link_priorities=lp, **run_kw)


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
    """The last stage of a coarsened run (see ``refine_share`` of :func:`pesto`): never
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
