"""Tarnawski et al. (NeurIPS 2020): the exact DP and DPL, the max-load and latency IPs,
the latency local search, and the Sec. 6 baselines (local search, PipeDream, a
graph partitioner); ``auto``, which picks between the DP and the IP, is
:mod:`dnnplace.methods.exact_auto`.

Wrappers import their algorithm inside the function, so that listing methods imports
nothing heavy (the IP's Pyomo is loaded only when ``ip`` runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option
from dnnplace.runtime.deadline import NO_DEADLINE, TimeLimitReached, capped
from dnnplace.runtime.memory import stop_requested
from dnnplace.runtime.termination import Termination

__all__ = ["DPOptions", "LocalSearchOptions", "IPOptions", "LatencySearchOptions", "run_dp", "run_dpl",
           "run_local_search", "run_pipedream", "run_partitioner", "run_latency_search", "run_ip"]


EXIT_RESERVE = 0.5
"""Seconds (at most 5 % of its limit) latency-ls leaves of its deadline for the process's exit:
its kernels load numba, whose teardown when the interpreter exits took 0.6-0.8 s on the shared
2-core machine at load 6-7 (beyond the reserve ``dnnplace solve`` keeps for the evaluation and
the output, which the exit used up: 10.6-11.0 s wall at ``--time-limit 10``)."""


@dataclass(frozen=True)
class DPOptions(Options):
    max_ideals: int = option(6_000_000, "size limit of the exact DP (~2.4 GB at the default on narrow graphs); "
                                        "past it: DPL's split with a lower bound")
    max_memory_gb: float | None = option(None, "memory budget of the exact DP's lattice and tables (default: 90% "
                                               "of what --memory-limit leaves; without the flag 4 GB, at most half "
                                               "the memory available); past it: DPL's split with a lower bound")
    replicas: int = option(1, "App. C.2: a stage may run on up to this many accelerators (1 = no replication)")
    sync_per_byte: float | None = option(None, "App. C.2: all-reduce time per byte of a replicated stage's "
                                               "weights; default the cluster's accelerator-to-accelerator beta1")

    def __post_init__(self):
        if self.max_ideals < 1:
            raise ValueError(f"option 'max_ideals' must be >= 1, got {self.max_ideals}")
        if self.max_memory_gb is not None and not self.max_memory_gb > 0:
            raise ValueError(f"option 'max_memory_gb' must be > 0, got {self.max_memory_gb}")
        if self.replicas < 1:
            raise ValueError(f"option 'replicas' must be >= 1, got {self.replicas}")


@dataclass(frozen=True)
class LocalSearchOptions(Options):
    restarts: int = option(10, "seeded random starts (the paper's Sec. 6 baseline uses 10)")

    def __post_init__(self):
        if self.restarts < 1:
            raise ValueError(f"option 'restarts' must be >= 1, got {self.restarts}")


@dataclass(frozen=True)
class IPOptions(Options):
    subgraphs_per_device: int = option(1, "latency IP: q, subgraphs per accelerator (Fig. 3 is q = 1, Fig. 4 q > 1)")
    horizon: float | None = option(None, "latency IP: the big-M H; default the best known latency of a start split")
    contiguity_on_cpus: bool = option(True, "max-load IP: CPUs must hold contiguous sets too")

    def __post_init__(self):
        if self.subgraphs_per_device < 1:
            raise ValueError(f"option 'subgraphs_per_device' must be >= 1, got {self.subgraphs_per_device}")


@dataclass(frozen=True)
class LatencySearchOptions(Options):
    max_iters: int | None = option(None, "stop after this many perturbation rounds (reproducible with a seed)")
    eject_within: float = option(0.02, "ejection pairs are tried for moves within this relative loss")


def _dp(inst, req: SolveRequest, linearized: bool, max_ideals: int = 6_000_000, replicas: int = 1,
        sync_per_byte: float | None = None, max_memory_gb: float | None = None) -> MethodOutput:
    from dnnplace.heuristics.maxload_dp import maxload_dp

    # DPL's split (a heuristic) also serves the weaker modes, e.g. as a warm start of the
    # convex-only IP; the exact DP is optimal for the pipeline-realisable mode only
    weaker = ("convex-both", "forward", "convex-forward") if linearized else ()
    if req.contiguity not in (None, "both", *weaker):
        raise InputError(f"the DP finds pipeline-realisable splits, contiguous per part (contiguity 'both'), "
                         f"not {req.contiguity!r}")
    if inst.require_cluster().meta.get("hierarchy") and not linearized:
        return _dp_hierarchy(inst, req)
    if replicas > 1 and req.problem != "maxload":
        raise InputError("replicated stages (option replicas) are a max-load model (Tarnawski App. C.2)")
    res = maxload_dp(inst, linearized=linearized, objective=req.objective if req.problem == "maxload" else "pipedream",
                     max_ideals=max_ideals, time_limit=req.solver.time_limit, deadline=req.deadline, replicas=replicas,
                     sync_per_byte=sync_per_byte, max_bytes=_dp_bytes(req, max_memory_gb))
    extra = {"ideals": res.ideals, "pairs_visited": res.pairs_visited, "dp_nodes": res.dp_nodes,
             "seconds": res.seconds}
    if res.placement is not None and res.placement.replication is not None:
        extra["replication"] = res.placement.replication.to_json(inst.require_cluster().names)
    if res.stopped is Termination.TIME_LIMIT and stop_requested():  # the memory watchdog's stop, not the clock
        res.stopped = Termination.MEMORY_LIMIT
    why = {Termination.IDEAL_LIMIT: f"more than {max_ideals} ideals", Termination.MEMORY_LIMIT: "memory budget",
           Termination.TIME_LIMIT: "time limit"}.get(res.stopped)
    if res.note:
        extra["stopped_because"] = res.note
    if res.placement is None and not res.complete:
        one = _one_device_split(inst, req) if res.stopped in (Termination.TIME_LIMIT, Termination.MEMORY_LIMIT) \
            else None
        if one is None:
            return MethodOutput(None, status="no_solution", bound=res.lower_bound, contiguity="both",
                                termination=res.stopped, extra=extra, message=f"{why}; DPL finds no split that fits")
        extra["incumbent_from"] = "single"
        res.placement, res.value = one
        res.lower_bound = min(res.lower_bound, res.value) if res.lower_bound is not None else None
    if res.placement is None:
        return MethodOutput(None, status="infeasible", contiguity="both", extra=extra,
                            message="no contiguous split fits the devices")
    if req.problem == "latency":
        # Sec. 7 baseline: the max-load optimal split, scored for latency by the evaluator
        extra["maxload"] = res.value
        return MethodOutput(res.placement, status="feasible", objective=None, contiguity="both", extra=extra)
    if not linearized and not res.complete:
        # past the memory or time limit: the best split known and a valid lower bound
        return MethodOutput(res.placement, status="feasible", objective=res.value, bound=res.lower_bound,
                            contiguity="both", termination=res.stopped, extra=extra,
                            message=f"{why}: best split so far with a lower bound")
    status = "feasible" if linearized else "optimal"
    bound = None if linearized else res.value
    return MethodOutput(res.placement, status=status, objective=res.value, bound=bound, contiguity="both",
                        termination=res.stopped or Termination.COMPLETED, extra=extra)


DP_ROOM_SHARE = 0.9
"""The exact DP's lattice and tables may take this share of what the run's memory limit leaves
(:func:`~dnnplace.runtime.memory.headroom`); the rest is for the temporaries around them."""


def _dp_bytes(req: SolveRequest, max_memory_gb: float | None) -> float | None:
    """The exact DP's memory budget in bytes: the option ``max_memory_gb`` where given; else, under
    ``--memory-limit``, :data:`DP_ROOM_SHARE` of what the limit leaves; else the DP's default
    (:func:`~dnnplace.heuristics.maxload_dp.memory_budget`), within what the default limit leaves."""
    from dnnplace.heuristics.maxload_dp import memory_budget
    from dnnplace.runtime.memory import headroom

    if max_memory_gb is not None:
        return max_memory_gb * 1e9
    room = headroom()
    if room is None:
        return None
    room = max(1.0, DP_ROOM_SHARE * room)
    return room if req.solver.memory_limit is not None else min(memory_budget(), room)


def _one_device_split(inst, req: SolveRequest):
    """``(placement, max-load)`` of the single-device split (contiguous), the DP's incumbent where
    DPL found none within the time left; ``None`` where it does not fit."""
    from dnnplace.evaluation.evaluate import maxload
    from dnnplace.heuristics.baselines import single_device

    try:
        p = single_device(inst.graph, inst.require_cluster())
    except InputError:
        return None
    ev = maxload(p, objective=req.objective if req.problem == "maxload" else "pipedream", contiguity="both")
    return (p, float(ev.objective)) if ev.feasible else None


def _dp_hierarchy(inst, req: SolveRequest) -> MethodOutput:
    """App. C.3: the level-by-level DP on a cluster of servers (graphs.hierarchy)."""
    from dnnplace.heuristics.hierarchy_dp import hierarchical_dp

    if req.problem != "maxload" or req.objective != "pipedream":
        raise InputError("the hierarchical DP optimises the max-load with the pipedream objective")
    res = hierarchical_dp(inst)
    extra = {"ideals": res.ideals, "server_blocks": res.blocks}
    if res.placement is None:
        return MethodOutput(None, status="infeasible", contiguity="both", extra=extra,
                            message="no split fits the servers")
    return MethodOutput(res.placement, status="optimal", objective=res.value, bound=res.value, contiguity="both",
                        termination=Termination.COMPLETED, extra=extra)


def run_dp(inst, req: SolveRequest, opts: DPOptions) -> MethodOutput:
    return _dp(inst, req, linearized=False, max_ideals=opts.max_ideals, replicas=opts.replicas,
               sync_per_byte=opts.sync_per_byte, max_memory_gb=opts.max_memory_gb)


def run_dpl(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    return _dp(inst, req, linearized=True)


def run_local_search(inst, req: SolveRequest, opts: LocalSearchOptions) -> MethodOutput:
    from dnnplace.heuristics.local_search import local_search

    p, val, values = local_search(inst, restarts=opts.restarts, seed=req.seed)
    return MethodOutput(p, objective=val, contiguity="none", extra={"restart_values": values,
                                                                    "restarts": opts.restarts})


def run_pipedream(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.pipedream import pipedream_split

    p, val = pipedream_split(inst)
    return MethodOutput(p, objective=val, contiguity="both")


def run_partitioner(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.partitioner import partition_split

    return MethodOutput(partition_split(inst, seed=req.seed), contiguity="none",
                        extra={"partitioner": "METIS (pymetis) k-way"})


def run_latency_search(inst, req: SolveRequest, opts: LatencySearchOptions) -> MethodOutput:
    """Time limit: the request's (without one, the method's ``default_limits``, 30 s), as what its
    deadline leaves once the bound is computed (``dnnplace solve`` counts it from the process
    start), less :data:`EXIT_RESERVE`; seed: the request's; ``--warm-start``: a single search
    lane from that split (default: greedy, dp and all-CPU lanes). The bound
    is :func:`~dnnplace.evaluation.bounds.latency_lower_bound` (contiguous splits): an answer
    that meets it is ``optimal``."""
    from dnnplace.evaluation.bounds import latency_lower_bound
    from dnnplace.heuristics.latency_search import latency_search

    start = req.warm.placement if req.warm is not None else None
    # the path segmentation bound holds for every contiguous split (one piece per accelerator);
    # computed first, so the search takes what the deadline leaves after it
    bound = latency_lower_bound(inst.graph, inst.require_cluster(), 1)
    limit = capped(float(req.solver.time_limit), req.deadline)
    p, val, info = latency_search(inst, time_limit=limit - min(EXIT_RESERVE, 0.05 * limit), seed=req.seed,
                                  start=start, max_iters=opts.max_iters, eject_within=opts.eject_within)
    if req.warm is not None:
        info["start"] = req.warm_start
    trace = [(t, v, None) for t, v in info.pop("trace")]
    status = "optimal" if val <= bound * (1 + 1e-9) else "feasible"
    return MethodOutput(p, status=status, objective=val, bound=bound, contiguity="none", trace=trace,
                        termination=Termination.TIME_LIMIT if opts.max_iters is None else Termination.ITERATION_LIMIT,
                        extra=info)


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
    out = solve_model(model, req.solver, warm_start=values, build_seconds=build, deadline=req.deadline)
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


# ---------------------------------------------------------------------------- auto
