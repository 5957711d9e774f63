"""Tarnawski et al. (NeurIPS 2020): the max-load IP (Fig. 6) and the latency IPs (Figs. 3-4)
as a method: build, warm start, solve, decode and re-score (:func:`run_ip`); a model too big
for the memory limit is refused before the build, and a run stopped without an incumbent
returns the best cheap split.

Pyomo is loaded only when ``ip`` runs (the formulations are imported inside the function).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option
from dnnplace.runtime.deadline import NO_DEADLINE, TimeLimitReached
from dnnplace.runtime.termination import Termination

__all__ = ["IPOptions", "run_ip", "IP_ROWS_PER_UNIT"]


@dataclass(frozen=True)
class IPOptions(Options):
    subgraphs_per_device: int = option(1, "latency IP: q, subgraphs per accelerator (Fig. 3 is q = 1, Fig. 4 q > 1)")
    horizon: float | None = option(None, "latency IP: the big-M H; default the best known latency of a start split")
    contiguity_on_cpus: bool = option(True, "max-load IP: CPUs must hold contiguous sets too")

    def __post_init__(self):
        if self.subgraphs_per_device < 1:
            raise ValueError(f"option 'subgraphs_per_device' must be >= 1, got {self.subgraphs_per_device}")




def run_ip(inst, req: SolveRequest, opts: IPOptions) -> MethodOutput:
    """Tarnawski's IPs: build, warm start, solve, decode and re-score.

    - ``maxload``: contiguity ``None`` means ``"both"`` (the contiguous IP, forward and
      backward parts separately, with a pipeline order of the devices: the DP's splits),
      ``"convex-both"`` the paper's Fig. 6 as printed (convexity only), ``"none"`` the
      non-contiguous IP; ``req.objective`` picks PipeDream / GPipe / overlap.
    - ``latency``: ``q = subgraphs_per_device``. Without ``horizon``, ``H`` is the best
      evaluator latency among the warm start, greedy and all-CPU splits, and the solver
      always starts from the split that achieves ``H`` (a worse start would break the
      time bounds ``<= H``).
    - ``req.warm``: the start the framework resolved from ``--warm-start`` (a method's
      re-scored answer or a placement file); a start that violates the model (e.g.
      non-contiguous for the contiguous IP) is skipped with a note in ``extra``.

    The reported ``objective`` is the evaluator's score of the decoded placement (never
    worse than the IP incumbent for max-load, whose communication variables need not be
    tight); ``bound`` is the solver's bound and ``extra["ip_incumbent"]`` its incumbent.
    """
    from dnnplace.evaluation.evaluate import latency as eval_latency
    from dnnplace.evaluation.evaluate import maxload as eval_maxload
    from dnnplace.formulations import latency_ip, maxload_ip
    from dnnplace.formulations.solvers.driver import solve_model

    extra: dict[str, Any] = {}
    if req.problem == "maxload":
        contiguity = req.contiguity or "both"
        opts_ml = maxload_ip.MaxLoadOptions(objective=req.objective, contiguity=contiguity,
                                            contiguity_on_cpus=opts.contiguity_on_cpus)
        module = maxload_ip

        def score(p):
            return eval_maxload(p, objective=req.objective, contiguity=contiguity, include_cpus=opts.contiguity_on_cpus)
    else:
        contiguity = "none"
        q = opts.subgraphs_per_device
        extra["subgraphs_per_device"] = q
        module, score = latency_ip, eval_latency

    start, note = None, None
    if req.warm is not None:
        start, note = req.warm.placement, req.warm.source
        ev = score(start)
        if not ev.feasible:
            extra["warm_start"] = f"{note} skipped: infeasible for this model ({'; '.join(ev.violations[:2])})"
            start = None
        else:
            extra["warm_start"] = note
            extra["warm_start_objective"] = ev.objective

    t0 = time.perf_counter()
    deadline = req.deadline or NO_DEADLINE
    too_big = _ip_too_big(inst, req, opts)
    if too_big is not None:  # refused before the build: the best cheap split, termination memory_limit
        extra["model_estimate"] = too_big
        ready = _dpl_incumbent(inst, req, score, 10.0 if deadline.remaining() is None else 0.2 * deadline.remaining())
        return _ip_incumbent(inst, score, start, contiguity, extra, f"the IP was not built: {too_big}", None, 0.0,
                             ready, termination=Termination.MEMORY_LIMIT)
    ready = None
    if req.problem == "maxload" and start is None and deadline.remaining() is not None:
        # a time-limited max-load IP may end without an incumbent (a large model's build
        # and hand-off alone can take the limit): have one ready, DPL's split, found in
        # at most a fifth of the time (not a MIP start: the IP runs as without a limit)
        ready = _dpl_incumbent(inst, req, score, 0.2 * deadline.remaining())
    try:
        with deadline.guard("the IP's model build"):
            model = _build_ip(inst, req, opts, opts_ml if req.problem == "maxload" else None, start, note, extra)
    except TimeLimitReached as exc:
        return _ip_incumbent(inst, score, start, contiguity, extra, str(exc), None, time.perf_counter() - t0,
                             ready)
    start = extra.pop("_start", start)
    build = time.perf_counter() - t0
    values = None
    if start is not None:
        try:
            values = module.warm_start_values(model, start)
        except InputError as exc:
            extra["warm_start"] = f"{note} skipped: {exc}"
    solver = _no_restarts(req.solver) if req.problem == "maxload" else req.solver
    if solver is not req.solver:
        extra["solver_options_added"] = {"mip_allow_restart": False}
    out = solve_model(model, solver, warm_start=values, build_seconds=build, deadline=req.deadline)
    extra.update(ip_incumbent=out.incumbent, solver_gap=out.gap, nodes=out.nodes, variables=out.n_vars,
                 constraints=out.n_cons, binaries=out.n_binaries, handoff_seconds=out.handoff_seconds)
    if out.trace and out.trace[0][1] is not None:
        extra["first_incumbent"] = out.trace[0][1]
    res = MethodOutput(None, status=out.status, bound=out.bound, termination=out.termination, message=out.message,
                       solver=out.solver, solver_version=out.solver_version, build_seconds=build,
                       solve_seconds=out.solve_seconds, contiguity=contiguity, trace=list(out.trace), extra=extra)
    if not out.has_solution:
        if out.termination is Termination.TIME_LIMIT:  # stopped at the limit without an incumbent: the best cheap split
            return _ip_incumbent(inst, score, start, contiguity, extra, out.message or "the solver found no "
                                 "incumbent within the time limit", res, build, ready)
        return res
    p = module.decode(model)
    if req.problem == "latency":
        # the IP chooses how each accelerator's nodes are cut into its q slots (Fig. 4);
        # the evaluator scores that cut, and reports the fewest-pieces latency beside it
        res.pieces = latency_ip.decode_pieces(model)
        ev = eval_latency(p, pieces=res.pieces)
        extra["fewest_pieces_latency"] = eval_latency(p).objective
    else:
        ev = score(p)
    res.placement = p
    res.objective = ev.objective
    if start is not None and values is not None and bool((p.device == start.device).all()):
        res.answer_from = f"warm start: {extra.get('warm_start', 'given')}"  # the solver kept the start
    if ev.violations:
        res.message = "decoded placement violates: " + "; ".join(ev.violations[:3])
        res.status = "error"
    return res


IP_ROWS_PER_UNIT = 6.0
"""Variables and constraints of a Tarnawski IP per node or edge and device slot (at most; measured
5.4 for the max-load IP and 4.6 for the latency IP of a 300-node random DAG on 5 devices, 2.9 for
the captured ResNet-50's max-load IP)."""


def _ip_too_big(inst, req: SolveRequest, opts: IPOptions) -> str | None:
    """Why the IP must not be built under the run's memory limit (its estimated model,
    :func:`~dnnplace.formulations.solvers.model_memory.model_bytes`, more than the limit leaves), or
    ``None``."""
    from dnnplace.formulations.solvers.model_memory import model_bytes, over_budget
    from dnnplace.runtime.memory import headroom

    g = inst.graph
    slots = inst.require_cluster().size * (opts.subgraphs_per_device if req.problem == "latency" else 1)
    return over_budget(model_bytes(IP_ROWS_PER_UNIT * (g.n + g.m) * slots), headroom())


def _build_ip(inst, req: SolveRequest, opts: IPOptions, opts_ml, start, note, extra: dict):
    """The IP's model (max-load with ``opts_ml``, else latency; the latency IP's horizon
    may replace the start: ``extra["_start"]``)."""
    from dnnplace.formulations import latency_ip, maxload_ip

    if req.problem == "maxload":
        model = maxload_ip.build_maxload_ip(inst, opts_ml)
    else:
        q = opts.subgraphs_per_device
        horizon = opts.horizon
        if horizon is None:
            horizon, which, best = latency_ip.best_split(inst, q, [start] if start is not None else [])
            extra["horizon_from"] = which
            if which != "given":
                # the big-M H is the best known latency; a worse start would violate
                # the time bounds, so the solver starts from the split that set H
                if start is not None:
                    extra["warm_start"] = f"{note} (latency {extra.get('warm_start_objective')}); started " \
                                          f"from the better {which} split instead ({horizon})"
                else:
                    extra["warm_start"] = f"{which} split (it sets the big-M H = {horizon})"
                extra["_start"] = best
        extra["horizon"] = float(horizon)
        model = latency_ip.build_latency_ip(inst, latency_ip.LatencyOptions(subgraphs_per_device=q,
                                                                            horizon=float(horizon)))
    return model


def _no_restarts(solver):
    """The max-load IP's HiGHS runs without restarts (``mip_allow_restart=false``) unless the run
    sets that option. After its root, HiGHS restarts the search when it has fixed enough columns,
    presolving the smaller model again; on the IP of a large graph that second presolve (its
    probing) took as long as the first and left the tree search too little of a 10-minute
    limit (NASNet-A by call: not proven with restarts, proven without; on three mid-size graphs
    no difference beyond the machine's noise: results/dp-layers.md, "HiGHS without restarts")."""
    import dataclasses

    if solver.solver.lower() != "highs" or "mip_allow_restart" in solver.solver_options:
        return solver
    return dataclasses.replace(solver, solver_options={**solver.solver_options, "mip_allow_restart": False})


def _dpl_incumbent(inst, req: SolveRequest, score, seconds: float):
    """DPL's split (Tarnawski Sec. 5.1.2, contiguous), the incumbent of a time-limited
    max-load IP; ``None`` if it finds none in ``seconds`` or it does not fit the model."""
    from dnnplace.heuristics.maxload_dp import maxload_dp

    if req.contiguity not in (None, "both", "convex-both", "forward", "convex-forward", "none"):
        return None
    if inst.require_cluster().meta.get("hierarchy"):
        return None
    try:
        res = maxload_dp(inst, linearized=True, objective=req.objective, time_limit=max(0.1, seconds))
    except InputError:
        return None
    if res.placement is None or not score(res.placement).feasible:
        return None
    return res.placement


def _ip_incumbent(inst, score, start, contiguity: str, extra: dict, why: str, res: MethodOutput | None,
                  build: float, ready=None, termination: Termination = Termination.TIME_LIMIT) -> MethodOutput:
    """The IP stopped at its time limit without a solution (during the model build, the
    hand-off, or a solve that found no incumbent), or was not built under the memory limit: the
    best feasible one of the warm start, the split found ``ready`` (DPL's), the greedy split and the
    single-device split, as ``feasible`` with ``termination`` (the solver's bound kept where it got one)."""
    from dnnplace.heuristics.baselines import greedy_fill, single_device

    cluster = inst.require_cluster()
    best = None
    for name, make in (("warm start", lambda: start), ("dpl", lambda: ready),
                       ("greedy", lambda: greedy_fill(inst.graph, cluster)),
                       ("single", lambda: single_device(inst.graph, cluster))):
        try:
            p = make()
        except InputError:
            continue
        if p is None:
            continue
        ev = score(p)
        if ev.feasible and (best is None or ev.objective < best[2]):
            best = (name, p, ev.objective)
    extra = {k: v for k, v in extra.items() if not k.startswith("_")}
    bound = res.bound if res is not None else None
    common = dict(bound=bound, termination=termination, contiguity=contiguity, build_seconds=build,
                  solver=res.solver if res is not None else None, extra=extra,
                  solver_version=res.solver_version if res is not None else None,
                  solve_seconds=res.solve_seconds if res is not None else None,
                  trace=list(res.trace) if res is not None else [])
    if best is None:
        return MethodOutput(None, status="no_solution", message=f"{why}; no cheap split is feasible", **common)
    extra["incumbent_from"] = best[0]
    source = f"warm start: {extra.get('warm_start', 'given')}" if best[0] == "warm start" else f"fallback: {best[0]}"
    return MethodOutput(best[1], status="feasible", objective=best[2],
                        message=f"{why}; the {best[0]} split returned", answer_from=source, **common)
