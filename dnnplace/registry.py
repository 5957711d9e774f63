"""Looking methods up, and the one entry point that runs and re-scores them.

The methods themselves are listed in :mod:`dnnplace.methods`. :func:`solve` is where
the framework keeps them honest: it parses the method's options, times the run, checks
that the answer is of the request's graph, re-scores the placement with the
independent evaluator (:mod:`dnnplace.evaluation.evaluate`), derives the final status from
that evaluation (a placement the evaluator finds infeasible is never ``feasible`` or
``optimal``) and raises :class:`EvaluationMismatch` when a method's own objective
disagrees with the evaluator or lies below its own bound.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np

from dnnplace.evaluation.evaluate import PROBLEMS, evaluate
from dnnplace.evaluation.link_orders import link_priorities_to_json
from dnnplace.evaluation.sim_costs import TRANSFER_MODES, transfer_semantics
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.methods.base import POLICIES, Method, MethodOutput, Options, SolveRequest, WarmStart, parse_options
from dnnplace.results import Result, relative_gap

__all__ = ["SolveRequest", "SolverOptions", "Method", "MethodOutput", "EvaluationMismatch", "all_methods",
           "get_method", "methods_for", "method_options", "method_limits", "solve", "run_method",
           "warm_start_placement",
           "evaluation_options", "instance_lower_bound", "cluster_record", "infer_problem",
           "relaxed_lower_bound"]


class EvaluationMismatch(AssertionError):
    """A method's self-reported objective disagrees with the independent evaluator."""


def all_methods() -> dict[str, Method]:
    """Every listed method by name."""
    from dnnplace.methods import METHODS

    out: dict[str, Method] = {}
    for m in METHODS:
        if m.name in out:
            raise RuntimeError(f"method {m.name!r} listed twice")
        out[m.name] = m
    return out


def get_method(name: str) -> Method:
    """A method by name, with the known names in the error."""
    methods = all_methods()
    if name not in methods:
        raise InputError(f"unknown method {name!r}; known: {sorted(methods)}")
    return methods[name]


def methods_for(problem: str) -> list[Method]:
    """Methods that solve ``problem``."""
    return [m for m in all_methods().values() if problem in m.problems]


def method_options(method: str | Method, request: SolveRequest) -> Options:
    """The method's typed options from ``request.params`` (one-line error on a typo),
    after checking that the method solves the request's problem."""
    m = get_method(method) if isinstance(method, str) else method
    if request.problem not in PROBLEMS:
        raise InputError(f"unknown problem {request.problem!r}; use one of {PROBLEMS}")
    if request.problem not in m.problems:
        raise InputError(f"method {m.name!r} does not solve {request.problem!r} (it solves {list(m.problems)})")
    if request.policy not in POLICIES:
        raise InputError(f"unknown policy {request.policy!r}; use one of {POLICIES}")
    if request.transfer_mode not in TRANSFER_MODES:
        raise InputError(f"unknown transfer mode {request.transfer_mode!r}; use one of {TRANSFER_MODES}")
    return parse_options(m.options, request.params, method=m.name)


def infer_problem(method: str | Method) -> str:
    """The problem a method solves when it solves only one (``heft`` -> ``makespan``);
    an :class:`InputError` naming the choices otherwise."""
    m = get_method(method) if isinstance(method, str) else method
    if len(m.problems) == 1:
        return m.problems[0]
    raise InputError(f"method {m.name!r} solves {', '.join(m.problems)}: say which with --problem")


def instance_lower_bound(graph: OpGraph, cluster, problem: str) -> float:
    """A value no answer to ``problem`` on the instance beats, whatever the method:
    makespan, the critical path, comm-aware heads and tails, and work windows
    (:func:`~dnnplace.evaluation.bounds.makespan_lower_bound`; the comm-aware relaxation
    only on request, :func:`relaxed_lower_bound`); max-load, the work share
    (:func:`~dnnplace.evaluation.bounds.maxload_lower_bound`); latency, the critical path
    (:func:`~dnnplace.evaluation.bounds.critical_path_lower_bound`)."""
    from dnnplace.evaluation import bounds

    if problem == "makespan":
        return bounds.makespan_lower_bound(graph, cluster)
    if problem == "maxload":
        return bounds.maxload_lower_bound(graph, cluster)
    return bounds.critical_path_lower_bound(graph, cluster)


def cluster_record(cluster) -> str | dict[str, Any] | None:
    """The cluster as a result records it: its preset name where it came from one
    (:func:`dnnplace.graphs.io.load_instance` notes it), else its JSON form."""
    if cluster is None:
        return None
    preset = cluster.meta.get("preset")
    if isinstance(preset, str):
        return preset
    from dnnplace.graphs.io.native import cluster_to_dict

    return cluster_to_dict(cluster)


def evaluation_options(request: SolveRequest, contiguity: str) -> dict[str, Any]:
    """Evaluator keyword arguments for a request."""
    if request.problem == "maxload":
        return {"objective": request.objective, "contiguity": contiguity}
    if request.problem == "makespan":
        return {"congestion": request.congestion, "policy": request.policy, "transfer_mode": request.transfer_mode}
    return {}


def _check_shape(out: MethodOutput, instance: Instance, name: str) -> OpGraph:
    """The graph the answer is of: the request's, or the transformed graph the method
    reports explicitly (``out.graph``). Anything else is a bug, never truncated."""
    scored = instance.graph if out.graph is None else out.graph
    n = scored.n
    if out.placement is not None and out.placement.graph.n != n:
        raise EvaluationMismatch(f"{name}: placement has {out.placement.graph.n} nodes, the graph it should "
                                 f"place has {n} (a transformed graph must be mapped back or reported)")
    for field_name in ("start", "priorities", "pieces"):
        arr = getattr(out, field_name)
        if arr is not None and len(arr) != n:
            raise EvaluationMismatch(f"{name}: {field_name} has {len(arr)} entries for a graph of {n} nodes")
    if out.link_priorities is not None:
        if len(out.link_priorities) != scored.m:
            raise EvaluationMismatch(f"{name}: link_priorities has {len(out.link_priorities)} entries for a graph "
                                     f"of {scored.m} edges")
        if out.priorities is None:
            raise EvaluationMismatch(f"{name}: link_priorities without priorities (a link order is replayed "
                                     "together with a device order)")
    return scored


def run_method(instance: Instance, method: str | Method, request: SolveRequest) -> tuple[Result, Placement | None]:
    """:func:`solve`, also returning the placement object (for warm starts).

    The method, its warm start and the evaluation run under the request's transfer mode
    (:func:`~dnnplace.evaluation.sim_costs.transfer_semantics`), so every simulation a
    method makes to score itself uses the semantics it is evaluated under."""
    with transfer_semantics(request.transfer_mode):
        return _run_method(instance, method, request)


def machine_cores() -> int:
    """CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def with_limits(request: SolveRequest, method: Method | None = None) -> SolveRequest:
    """The request as a method runs it: solver ``threads`` capped at this machine's
    cores (with a warning: threads far beyond the cores slow a solve many times over,
    results/time-limits.md, "Solver threads beyond the cores"), and the run's
    :class:`~dnnplace.runtime.deadline.Deadline` unless the caller set one (``dnnplace solve``
    counts from the process's start): ``solver.time_limit`` (else ``method``'s default
    limit, :func:`method_limits`) from now. This is the deadline of one call of the Python API
    (:func:`solve`, :func:`dnnplace.api.solve`, the sweep runner's runs), made once here and
    passed down; docs/architecture.md, "Time limits"."""
    from dnnplace.runtime.deadline import Deadline

    threads = request.solver.threads
    cores = machine_cores()
    if threads is not None and threads > cores:
        from dnnplace.textout import warn

        warn(f"--threads {threads}: this machine has {cores} cores; using {cores}")
        request = dataclasses.replace(request, solver=dataclasses.replace(request.solver, threads=cores))
    limit = request.solver.time_limit
    if limit is None and method is not None and method.default_limits:
        limit = method.default_limits.get("time_limit")
    if request.deadline is None and limit is not None:
        request = dataclasses.replace(request, deadline=Deadline(limit))
    return request


def memory_watch(request: SolveRequest):
    """The run's :class:`~dnnplace.runtime.memory.MemoryWatch`: ``solver.memory_limit`` bytes, else
    the default share of the machine's memory (:func:`~dnnplace.runtime.memory.default_limit`)."""
    from dnnplace.runtime.memory import MemoryWatch, default_limit

    limit = request.solver.memory_limit
    return MemoryWatch(default_limit() if limit is None else limit)


def _memory_stopped(out: MethodOutput, watch) -> MethodOutput:
    """A method stopped by the memory watchdog (its deadlines read as reached) reports
    termination ``memory_limit`` where it says ``time_limit``; the message says how much was
    resident (a method that ran on to its end keeps its termination)."""
    from dnnplace.runtime.termination import Termination

    if not watch.tripped:
        return out
    note = f"memory limit: {watch.at / 1e6:,.0f} MB resident, over the limit of {watch.limit / 1e6:,.0f} MB"
    if out.message and note in out.message:
        return out
    stopped = out.termination in (Termination.TIME_LIMIT, Termination.MEMORY_LIMIT)
    return dataclasses.replace(out, termination=Termination.MEMORY_LIMIT if stopped else out.termination,
                               message="; ".join(filter(None, [note, out.message])))


def method_limits(request: SolveRequest, method: Method) -> SolveRequest:
    """The request as ``method`` runs it: where the request sets no ``time_limit``, the
    method's :attr:`~dnnplace.methods.base.Method.default_limits` fill the settings it
    leaves out (the run's deadline, that limit from now, is :func:`with_limits`'s)."""
    if request.solver.time_limit is not None or not method.default_limits:
        return request
    fill = {k: v for k, v in method.default_limits.items() if getattr(request.solver, k) is None}
    return dataclasses.replace(request, solver=dataclasses.replace(request.solver, **fill))


def _run_method(instance: Instance, method: str | Method, request: SolveRequest) -> tuple[Result, Placement | None]:
    m = get_method(method) if isinstance(method, str) else method
    opts = method_options(m, request)
    asked_threads = request.solver.threads
    request = with_limits(request, m)
    if m.warm_start and request.warm_start and request.warm_start != "none" and request.warm is None:
        if request.warm_start == m.name:
            raise InputError(f"the {m.name} method cannot warm start itself")
        contiguity = request.contiguity or m.default_contiguity
        request = dataclasses.replace(request, warm=warm_start_placement(instance, request, contiguity))
    if request.warm is not None:  # one rule for every method that takes a start (files: graphs.io.load_placement)
        from dnnplace.graphs.io import check_same_graph

        check_same_graph(request.warm.placement.graph, instance.graph, f"warm start {request.warm.source}")
    t0 = time.perf_counter()
    with memory_watch(request) as watch:  # the run's memory limit (docs/guide.md, "Time and memory limits")
        out = m.run(instance, method_limits(request, m), opts)  # the record keeps `request`, as asked
    wall = time.perf_counter() - t0
    out = _memory_stopped(out, watch)
    scored = _check_shape(out, instance, m.name)
    contiguity = out.contiguity or request.contiguity or m.default_contiguity
    res = Result(problem=request.problem, method=m.name, instance=instance.source or instance.name,
                 status=out.status, objective=out.objective, bound=out.bound, termination=out.termination,
                 message=out.message, solver=out.solver, solver_version=out.solver_version,
                 options=_request_dict(request, contiguity), build_seconds=out.build_seconds,
                 solve_seconds=wall - out.build_seconds if out.solve_seconds is None else out.solve_seconds,
                 wall_seconds=wall, trace=list(out.trace), unit=instance.graph.unit, extra=dict(out.extra),
                 memory_model=out.memory_model if request.problem == "makespan" else "static")
    res.answer_from = (out.answer_from or m.name) if out.placement is not None else None
    res.extra["memory"] = watch.record()
    res.cluster = cluster_record(instance.cluster)
    from dnnplace.graphs.io import graph_fingerprint  # read back by dnnplace.graphs.io.check_result_doc

    res.graph_fingerprint = graph_fingerprint(instance.graph)
    if asked_threads != request.solver.threads:
        res.extra["threads_asked"] = asked_threads  # capped at the machine's cores (with_limits)
    if out.graph is not None:
        from dnnplace.graphs.transforms.replay import answer_graph_record

        res.extra["scored_graph"] = f"transformed: {out.graph.n} nodes, {out.graph.m} edges"
        res.transform = answer_graph_record(out.graph, instance.graph)
    res.lower_bound = _lower_bound(instance, request.problem, res)
    if out.placement is None:
        return res, None
    p = out.placement
    ids = scored.ids
    res.placement = p.to_mapping()
    opts_ev = evaluation_options(request, contiguity)
    if request.problem == "makespan":
        opts_ev["memory_model"] = res.memory_model
    if request.problem == "makespan" and out.priorities is not None:
        opts_ev.update(policy="order", priorities=out.priorities)
        if out.link_priorities is not None:  # the method's order of transfers on each link (else FCFS)
            opts_ev["link_priorities"] = out.link_priorities
            res.link_priorities = link_priorities_to_json(p, out.link_priorities)
    if request.problem == "latency" and out.pieces is not None:
        opts_ev["pieces"] = out.pieces
    if out.start is not None:
        res.start = {str(v): float(t) for v, t in zip(ids, out.start, strict=True)}
    ev = evaluate(p, request.problem, **opts_ev)
    res.evaluation = ev.to_dict()
    if res.start is None and ev.schedule is not None:  # makespan: the start times the evaluator simulated
        res.start = {str(v): float(t) for v, t in zip(ids, ev.schedule.start, strict=True)}
    if ev.schedule is not None:  # and its order, which equal start times alone do not fix
        res.priorities = {str(v): int(r) for v, r in zip(ids, ev.schedule.priorities(), strict=True)}
    if res.objective is None:
        res.objective = ev.objective
    elif ev.objective is not None:
        tol = 1e-6 * max(1.0, abs(ev.objective))
        if (m.objective_exact and abs(res.objective - ev.objective) > tol) or res.objective < ev.objective - tol:
            raise EvaluationMismatch(
                f"{m.name} on {res.instance}: method reports {res.objective!r}, the evaluator {ev.objective!r}")
    if not ev.feasible and res.status in ("optimal", "feasible"):
        # the status comes from the evaluation, whatever the method said
        only_memory = ev.memory_only if request.problem == "makespan" else _only_memory(p, ev)
        res.status = "memory_infeasible" if only_memory else "infeasible"
        res.message = "; ".join(filter(None, [res.message, "evaluation: " + "; ".join(ev.violations[:3])]))
    if (res.bound is not None and res.objective is not None and np.isfinite(res.bound)
            and res.objective < res.bound - 1e-6 * max(1.0, abs(res.bound)) and ev.feasible):
        raise EvaluationMismatch(f"{m.name} on {res.instance}: objective {res.objective!r} is below the method's "
                                 f"own bound {res.bound!r}")
    lb = res.lower_bound
    if (lb is not None and res.objective is not None and ev.feasible
            and res.objective < lb - 1e-6 * max(1.0, abs(lb))):
        raise EvaluationMismatch(f"{m.name} on {res.instance}: objective {res.objective!r} is below the instance's "
                                 f"lower bound {lb!r}")
    res.gap = relative_gap(res.objective, res.bound)
    return res, p


def _lower_bound(instance: Instance, problem: str, res: Result) -> float | None:
    """The best bound known for the answer in ``res`` (see :class:`~dnnplace.results.Result`):
    the larger of the method's own bound and :func:`instance_lower_bound`; for an answer
    on a transformed graph, the input's work share where it holds (``res.transform``)."""
    cluster = instance.cluster
    if cluster is None or instance.graph.n == 0:
        return res.bound
    if res.transform is not None:
        if not res.transform.get("work_bound_holds"):
            return None
        from dnnplace.evaluation.bounds import work_lower_bound

        return work_lower_bound(instance.graph, cluster)
    lb = instance_lower_bound(instance.graph, cluster, problem)
    if res.bound is not None and np.isfinite(res.bound):
        lb = max(lb, float(res.bound))
    return lb


def relaxed_lower_bound(instance: Instance, res: Result, time_limit: float, *, threads: int = 1) -> Result:
    """Raise ``res.lower_bound`` of a makespan answer with the comm-aware subgraph relaxation
    (:func:`~dnnplace.formulations.makespan_relaxation.makespan_relaxation_bound`, CP-SAT,
    ``time_limit`` seconds; opt-in: ``dnnplace solve --bound-time-limit S``). Its static
    memory constraint is kept only for answers judged under the static model, and a
    feasible answer's makespan serves as the horizon. Other answers are left as they are;
    ``res.extra["relaxation_bound"]`` records what the relaxation proved."""
    if (res.problem != "makespan" or res.transform is not None or instance.cluster is None or instance.graph.n == 0
            or time_limit <= 0):
        return res
    from dnnplace.formulations.makespan_relaxation import makespan_relaxation_bound

    feasible = bool((res.evaluation or {}).get("feasible")) and res.objective is not None
    rb = makespan_relaxation_bound(instance.graph, instance.cluster, time_limit=time_limit, threads=threads,
                                   memory=res.memory_model == "static",
                                   horizon=res.objective if feasible else None)
    res.extra["relaxation_bound"] = {"bound": rb.bound, "combinatorial": rb.combinatorial,
                                     "seconds": round(rb.seconds, 3), "sets": rb.sets}
    if feasible and rb.bound > res.objective * (1 + 1e-6) + 1e-9:
        raise EvaluationMismatch(f"{res.method} on {res.instance}: objective {res.objective!r} is below the "
                                 f"relaxation's lower bound {rb.bound!r}")
    if res.lower_bound is None or rb.bound > res.lower_bound:
        res.lower_bound = rb.bound
    return res


def _only_memory(p: Placement, ev) -> bool:
    """Every violation the evaluator found is a static-memory overflow (the placement is
    otherwise valid): the number of violations equals what memory alone adds."""
    from dnnplace.evaluation.evaluate import validate

    memory_only = len(validate(p, memory=True)) - len(validate(p, memory=False))
    return memory_only > 0 and len(ev.violations) == memory_only


def solve(instance: Instance, method: str | Method, request: SolveRequest) -> Result:
    """Run a method, re-score its placement independently and return the Result."""
    return run_method(instance, method, request)[0]


WARM_START_SHARE = 0.5
"""The share of a run's remaining time a warm-start method may take: a local search that
runs to its deadline would otherwise leave the method it starts nothing (the run's limit
holds the start and the method together; docs/architecture.md, Time limits)."""


def warm_start_placement(inst: Instance, request: SolveRequest, contiguity: str | None = None) -> WarmStart:
    """The placement named by ``request.warm_start``: a placement file, or a method's
    answer, run through :func:`run_method` (so re-scored) with the same problem,
    objective and contiguity (a max-load-only method is run for max-load), within
    :data:`WARM_START_SHARE` of the run's remaining time."""
    from dnnplace.graphs.io import load_placement

    name = request.warm_start
    if name is None:
        raise InputError("no warm start requested")
    if os.path.exists(name):
        return WarmStart(load_placement(name, inst), f"file {name}")
    if name not in all_methods() and (os.sep in name or "/" in name or os.path.splitext(name)[1]):
        raise InputError(f"warm start {name}: no such file (nor a method name)")  # a path, not a mistyped method
    try:
        method = get_method(name)
    except InputError as exc:
        raise InputError(f"warm start {name}: not a file, and {exc}") from None
    # a max-load method (e.g. the DP) still gives a good split to start the latency IP from
    problem = request.problem if request.problem in method.problems else "maxload"
    if problem not in method.problems:
        raise InputError(f"warm-start method {name!r} solves {list(method.problems)}, not {request.problem!r}")
    share = None if request.deadline is None else request.deadline.share(WARM_START_SHARE)
    sub = SolveRequest(problem=problem, objective=request.objective,
                       contiguity=contiguity if request.problem == "maxload" else None,
                       solver=request.solver, seed=request.seed, congestion=request.congestion,
                       transfer_mode=request.transfer_mode, deadline=share)
    res, p = run_method(inst, method, sub)
    if p is None:
        raise InputError(f"warm-start method {name!r} returned no placement ({res.message})")
    return WarmStart(p, f"method {name}")


def _request_dict(r: SolveRequest, contiguity: str) -> dict[str, Any]:
    return {"objective": r.objective, "contiguity": contiguity, "warm_start": r.warm_start, "seed": r.seed,
            "congestion": r.congestion, "policy": r.policy, "transfer_mode": r.transfer_mode,
            "solver": {"name": r.solver.solver, "time_limit": r.solver.time_limit, "rel_gap": r.solver.rel_gap,
                       "threads": r.solver.threads, "seed": r.solver.seed, "solver_options": r.solver.solver_options,
                       "memory_limit": r.solver.memory_limit},
            "params": r.params}
