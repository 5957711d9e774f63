"""Makespan methods: list schedulers (HEFT, ETF, Baechi's m-TOPO / m-ETF / m-SCT) and
Pesto's ILP pipeline. Every one simulates under the request's ``congestion`` setting
and transfer mode (the registry runs methods inside
:func:`~dnnplace.evaluation.sim_costs.transfer_semantics`).

Wrappers import their algorithm inside the function, so that listing methods imports
nothing heavy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option

__all__ = ["InsertionOptions", "PestoMethodOptions", "run_list_scheduler", "run_pesto"]


@dataclass(frozen=True)
class InsertionOptions(Options):
    insertion: bool = option(True, "insert into idle gaps of a device's timeline (else append)")


@dataclass(frozen=True)
class PestoMethodOptions(Options):
    coarsen_to: int | None = option(None, "coarsen to about this many nodes first (default: solve as is)")
    coarsen_with: Literal["pesto", "celeritas-fusion"] = option(
        "pesto", "the coarsener: Pesto's batch merging, or Celeritas' optimal fusion (at least coarsen_to nodes)")
    ilp_congestion: bool | None = option(None, "model link congestion in the ILP (default: as the request's "
                                               "congestion; Pesto Fig. 5 turns it off)")
    memory: bool = option(True, "memory capacity constraints in the ILP")
    fallback: bool = option(True, "keep the better of the ILP's replay, the runtime's orders (coarse runs) and the "
                                  "list-schedule start; false reports the ILP's own placement and order (ablations, "
                                  "Pesto Fig. 5)")
    engine: str = option("mip", "exact engine: 'mip' (Pyomo MIP, --solver picks HiGHS/Gurobi) or 'cpsat' (OR-Tools "
                                "CP-SAT, extra dnnplace[cpsat]; --threads = its workers)")
    guided: bool = option(False, "coarsen only inside the devices of the original graph's best list schedule and "
                                 "start the ILP from it (on the 766-node LSTM graph it measured worse: see "
                                 "results/pesto/guided.md)")
    relaxed_start: float = option(0.0, "with congestion in the ILP: share of the ILP's time for the same model "
                                        "without congestion constraints first, whose schedule (replayed with "
                                        "congestion) becomes the start when it beats the list schedule")
    vcycle_levels: int = option(1, "coarsened runs: solve at coarsen_to, 2x, 4x, ... nodes (this many levels), each "
                                   "level coarsened guided by the best answer so far "
                                   "(formulations/multilevel/vcycle.py)")
    expert_rival: bool = option(True, "coarsened runs: the last stage also compares with the layer-wise expert "
                                      "(layer-split) where the graph has layer ids")
    kicks: int = option(200, "coarsened runs: after the last stage's node moves converge, kick a stretch of the "
                             "critical chain to another device and descend again, until this many kicks in a row "
                             "improve nothing (at most one per eight units, at least 10) or time is up "
                             "(heuristics/refine.py; 0: stop at the first local optimum)")
    windows: float = option(0.5, "coarsened runs: share of the last stage for re-solving windows of the schedule "
                                 "around its critical chain with CP-SAT, the rest held, each kept where the "
                                 "simulator replays it faster (formulations/window_search.py; 0: off; needs "
                                 "dnnplace[cpsat], else the moves keep the whole stage)")
    subclusters: bool = option(True, "with fallback, on k interchangeable devices: also solve the sub-clusters with "
                                     "k/2, k/4, ..., 1 of them (30% of the time together) and return the best answer "
                                     "lifted to the whole cluster: never worse than any of them "
                                     "(formulations/multilevel/subclusters.py; extra.model_size.subclusters)")

    def __post_init__(self):
        if self.coarsen_to is not None and self.coarsen_to < 1:
            raise ValueError(f"option 'coarsen_to' must be >= 1, got {self.coarsen_to}")
        if self.kicks < 0:
            raise ValueError(f"option 'kicks' must be >= 0, got {self.kicks}")
        if not 0.0 <= self.windows < 1.0:
            raise ValueError(f"option 'windows' must be in [0, 1), got {self.windows}")
        if self.vcycle_levels < 1:
            raise ValueError(f"option 'vcycle_levels' must be >= 1, got {self.vcycle_levels}")
        if self.vcycle_levels > 1 and self.coarsen_to is None:
            raise ValueError("option 'vcycle_levels' > 1 needs 'coarsen_to'")
        if not 0.0 <= self.relaxed_start < 1.0:
            raise ValueError(f"option 'relaxed_start' must be in [0, 1), got {self.relaxed_start}")
        if self.engine not in ("mip", "cpsat"):
            raise ValueError(f"option 'engine' must be 'mip' or 'cpsat', got {self.engine!r}")


def run_list_scheduler(name: str):
    """The wrapper of list scheduler ``name`` (a key of ``heuristics.list_scheduling.ALGORITHMS``)."""

    def run(inst, req: SolveRequest, opts: Options) -> MethodOutput:
        from dnnplace.heuristics.list_scheduling import ALGORITHMS, simulated_makespan

        kw = {"congestion": req.congestion, **dataclasses.asdict(opts)}
        ls = ALGORITHMS[name](inst.graph, inst.require_cluster(), **kw)
        ms = simulated_makespan(ls, congestion=req.congestion)
        return MethodOutput(ls.placement, objective=ms, priorities=ls.priorities,
                            extra={"scheduler_makespan": ls.makespan, **ls.extra})

    run.__name__ = f"run_{name.replace('-', '_')}"
    return run


def _expert_rival(inst) -> list:
    """The layer-wise expert's placement as a rival of Pesto's last stage, where the graph
    has the layer ids it needs (none otherwise)."""
    from dnnplace.graphs.errors import InputError
    from dnnplace.heuristics.baselines import layer_split

    if inst.graph.layers is None:
        return []
    try:
        return [("expert:layer-split", layer_split(inst.graph, inst.require_cluster()))]
    except InputError:
        return []


def _given_start(inst, req: SolveRequest, coarsening: bool) -> dict:
    """``--warm-start FILE`` (or a method's answer), resolved by the registry into
    ``req.warm``, as the pipeline's start: a start of the ILP where it solves the graph as
    it is (``extra_starts``); where it coarsens, the guide of the coarsening (the coarse
    graph keeps the start's devices, and it is offered as the coarse MIP start) and a
    rival of the last stage. Either way the answer is never worse than the start."""
    from dnnplace.evaluation.simulate import simulate

    w = req.warm
    if w is None:
        return {}
    pr = simulate(w.placement, policy="critical_path", congestion=req.congestion).schedule.priorities()
    if not coarsening:
        return {"extra_starts": [(w.placement.device, pr)]}
    return {"guide": (w.source, w.placement, pr), "rivals": [(w.source, w.placement)]}


def run_pesto(inst, req: SolveRequest, opts: PestoMethodOptions) -> MethodOutput:
    """The solver settings as the request gives them (without a time limit: the method's
    ``default_limits`` in :mod:`dnnplace.methods`); ``--warm-start none`` turns the
    list-schedule start off; ``--warm-start FILE`` (a placement or result of the input
    graph) or a method name gives the start (:func:`_given_start`)."""
    from dnnplace.formulations.multilevel.pesto import PipelineOptions, Starts, pesto
    from dnnplace.formulations.pesto_ip import PestoOptions

    sopts = req.solver
    coarsening = opts.coarsen_to is not None and inst.graph.n > opts.coarsen_to
    given = _given_start(inst, req, coarsening)
    rivals = tuple(_expert_rival(inst) if opts.expert_rival else ()) + tuple(given.get("rivals", ()))
    pipeline = PipelineOptions(coarsen_to=opts.coarsen_to, coarsen_with=opts.coarsen_with, guided=opts.guided,
                               congestion=req.congestion, ilp_congestion=opts.ilp_congestion,
                               transfer_mode=req.transfer_mode, engine=opts.engine, solver=sopts,
                               model=PestoOptions(memory=opts.memory), warm_start=(req.warm_start or "list") != "none",
                               relaxed_start=opts.relaxed_start, fallback=opts.fallback,
                               kicks=opts.kicks, windows=opts.windows, subclusters=opts.subclusters)
    starts = Starts(extra_starts=given.get("extra_starts", ()), guide=given.get("guide"), rivals=rivals)
    if opts.vcycle_levels > 1:
        from dnnplace.formulations.multilevel.vcycle import pesto_vcycle

        # the V-cycle guides each level by the best answer so far; the start is a rival
        r = pesto_vcycle(inst.graph, inst.require_cluster(), pipeline, dataclasses.replace(starts, guide=None),
                         levels=opts.vcycle_levels, deadline=req.deadline)
    else:
        r = pesto(inst.graph, inst.require_cluster(), pipeline, starts, deadline=req.deadline)
    extra = {"ilp_objective": r.ilp_objective, "ilp_bound": r.ilp_bound, "ilp_gap": r.ilp_gap,
             "coarse_bound": r.ilp_bound if r.coarse_n < inst.graph.n else None,
             "warm_makespan": r.warm_makespan, "warm_algorithm": r.warm_algorithm, "source": r.source,
             "warm_start": None if req.warm is None else req.warm.source,
             "coarse_nodes": r.coarse_n, "coarsen_seconds": r.coarsen_seconds, "model_size": r.size,
             "semantics": "ILP: links in any order (Pesto (7)), one transfer per edge; objective: simulation "
                          "replaying the ILP's device order and, where model_size.link_order is 'ilp', its link "
                          f"order (else FCFS links, semantics.md 2.1), transfer mode {req.transfer_mode!r}; the "
                          "ILP's bound and proven optimum count only under 'per_edge'"}
    return MethodOutput(r.placement, status=r.status, objective=r.makespan, bound=r.bound,
                        termination=r.termination, message=r.message,
                        solver="cpsat" if opts.engine == "cpsat" else sopts.solver,
                        solver_version=r.solver_version, build_seconds=r.build_seconds + r.coarsen_seconds,
                        solve_seconds=r.solve_seconds, priorities=r.priorities, link_priorities=r.link_priorities,
                        trace=r.trace, extra=extra, answer_from=_pesto_answer_from(r.source, r.warm_algorithm))


def _pesto_answer_from(source: str | None, warm_algorithm: str | None) -> str | None:
    """``MethodOutput.answer_from`` of a Pesto run from the pipeline's ``source``: its ILP's
    answer (``None``: the method's own), the start it replayed, or the rival its never-worse
    stages (:mod:`dnnplace.formulations.multilevel.never_worse`) returned instead.

    >>> _pesto_answer_from("ilp", "heft"), _pesto_answer_from("warm_start", "heft")
    (None, 'warm start: heft')
    >>> _pesto_answer_from("single:gpu0", "heft"), _pesto_answer_from("sub-cluster 2 of 4 gpu", "heft")
    ('never-worse: single:gpu0', 'never-worse: sub-cluster 2 of 4 gpu')
    """
    if source in (None, "ilp"):
        return None
    if source == "warm_start":
        return f"warm start: {warm_algorithm or 'list schedule'}"
    return f"never-worse: {source}"
