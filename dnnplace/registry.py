"""Registered methods and the one entry point that runs and re-scores them.

A method is a plain function ``run(instance, request) -> MethodOutput``. Modules that
implement methods expose a module-level ``METHODS`` list (pure data, no import-time
registration); :data:`METHOD_MODULES` names those modules, so adding a method means
adding it to its module's ``METHODS`` (and a new module to this tuple).

:func:`solve` is where the framework keeps methods honest: it times the run, re-scores
the returned placement with the independent evaluator (:mod:`dnnplace.graphs.evaluate`) and
raises :class:`EvaluationMismatch` when a method's own objective disagrees with it.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.evaluate import PROBLEMS, evaluate
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.results import Result

__all__ = ["METHOD_MODULES", "Method", "MethodOutput", "SolverOptions", "SolveRequest",
           "EvaluationMismatch", "all_methods", "get_method", "methods_for", "solve", "evaluation_options"]

METHOD_MODULES = (
    "dnnplace.heuristics.baselines",
    "dnnplace.formulations.methods",
    "dnnplace.heuristics.list_scheduling",
    "dnnplace.formulations.pesto",
    "dnnplace.heuristics.maxload_dp",
    "dnnplace.heuristics.local_search",
    "dnnplace.heuristics.pipedream",
    "dnnplace.heuristics.partitioner",
    "dnnplace.heuristics.latency_search",
)


@dataclass(frozen=True)
class SolverOptions:
    """Backend options in Pyomo's vocabulary (``pyomo.contrib.solver`` config)."""

    solver: str = "highs"
    time_limit: float | None = None
    rel_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    tee: bool = False
    solver_options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SolveRequest:
    """What to solve and how.

    ``objective`` is the max-load variant (``pipedream``/``gpipe``/``overlap``);
    ``contiguity`` is ``None`` for the method's default or a mode of
    :data:`dnnplace.graphs.evaluate.CONTIGUITY_MODES`; ``warm_start`` is a method name or a
    placement file; ``params`` holds method-specific options (e.g. ``split`` for the
    expert baseline, ``subgraphs_per_device``, ``coarsen_to``, ``congestion``).
    """

    problem: str
    objective: str = "pipedream"
    contiguity: str | None = None
    solver: SolverOptions = field(default_factory=SolverOptions)
    warm_start: str | None = None
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class MethodOutput:
    """What a method returns; :func:`solve` turns it into a :class:`Result`.

    ``objective`` is the method's own value for its placement (``None`` if it has none);
    ``priorities`` (makespan methods) is the order the simulator replays; ``pieces``
    (latency methods with several subgraphs per device) is the method's own cut of each
    accelerator's nodes, which the evaluator then scores instead of its fewest-pieces rule.
    """

    placement: Placement | None
    status: str = "feasible"
    objective: float | None = None
    bound: float | None = None
    termination: str | None = None
    message: str | None = None
    solver: str | None = None
    solver_version: str | None = None
    build_seconds: float = 0.0
    solve_seconds: float | None = None
    start: np.ndarray | None = None
    priorities: np.ndarray | None = None
    pieces: np.ndarray | None = None
    contiguity: str | None = None
    trace: list = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """A registered method.

    ``objective_exact``: the method's own objective must equal the evaluator's (DP,
    heuristics); otherwise it must be an upper bound on it (an IP whose communication
    variables need not be tight for a time-limited incumbent).
    """

    name: str
    problems: tuple[str, ...]
    run: Callable[[Instance, SolveRequest], MethodOutput]
    summary: str
    kind: str = "heuristic"  # baseline | heuristic | exact | ip
    objective_exact: bool = True
    default_contiguity: str = "none"


class EvaluationMismatch(AssertionError):
    """A method's self-reported objective disagrees with the independent evaluator."""


def all_methods() -> dict[str, Method]:
    """Every registered method by name (modules imported on first call)."""
    out: dict[str, Method] = {}
    for mod in METHOD_MODULES:
        for m in importlib.import_module(mod).METHODS:
            if m.name in out:
                raise RuntimeError(f"method {m.name!r} registered twice")
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


def evaluation_options(request: SolveRequest, contiguity: str) -> dict[str, Any]:
    """Evaluator keyword arguments for a request."""
    if request.problem == "maxload":
        return {"objective": request.objective, "contiguity": contiguity}
    if request.problem == "makespan":
        return {"congestion": bool(request.params.get("congestion", True)),
                "policy": request.params.get("policy", "fifo")}
    return {}


def solve(instance: Instance, method: str | Method, request: SolveRequest) -> Result:
    """Run a method, re-score its placement independently and return the Result."""
    m = get_method(method) if isinstance(method, str) else method
    if request.problem not in PROBLEMS:
        raise InputError(f"unknown problem {request.problem!r}; use one of {PROBLEMS}")
    if request.problem not in m.problems:
        raise InputError(f"method {m.name!r} does not solve {request.problem!r} (it solves {list(m.problems)})")
    t0 = time.perf_counter()
    out = m.run(instance, request)
    wall = time.perf_counter() - t0
    contiguity = out.contiguity or request.contiguity or m.default_contiguity
    res = Result(problem=request.problem, method=m.name, instance=instance.source or instance.name,
                 status=out.status, objective=out.objective, bound=out.bound, termination=out.termination,
                 message=out.message, solver=out.solver, solver_version=out.solver_version,
                 options=_request_dict(request, contiguity), build_seconds=out.build_seconds,
                 solve_seconds=wall - out.build_seconds if out.solve_seconds is None else out.solve_seconds,
                 wall_seconds=wall, trace=list(out.trace), unit=instance.graph.unit, extra=dict(out.extra))
    if out.placement is None:
        return res
    p = out.placement
    res.placement = p.to_mapping()
    opts = evaluation_options(request, contiguity)
    if request.problem == "makespan" and out.priorities is not None:
        opts.update(policy="order", priorities=out.priorities)
    if request.problem == "latency" and out.pieces is not None:
        opts["pieces"] = out.pieces
    if out.start is not None:
        res.start = {str(v): float(t) for v, t in zip(instance.graph.ids, out.start)}
    ev = evaluate(p, request.problem, **opts)
    res.evaluation = ev.to_dict()
    if res.start is None and ev.schedule is not None:  # makespan: the start times the evaluator simulated
        res.start = {str(v): float(t) for v, t in zip(instance.graph.ids, ev.schedule.start)}
    if res.objective is None:
        res.objective = ev.objective
    elif ev.objective is not None:
        tol = 1e-6 * max(1.0, abs(ev.objective))
        if (m.objective_exact and abs(res.objective - ev.objective) > tol) or res.objective < ev.objective - tol:
            raise EvaluationMismatch(
                f"{m.name} on {res.instance}: method reports {res.objective!r}, the evaluator {ev.objective!r}")
    if res.bound is not None and res.objective is not None and not math.isnan(res.bound):
        res.gap = abs(res.objective - res.bound) / max(abs(res.objective), 1e-12)
    return res


def _request_dict(r: SolveRequest, contiguity: str) -> dict[str, Any]:
    return {"objective": r.objective, "contiguity": contiguity, "warm_start": r.warm_start, "seed": r.seed,
            "solver": {"name": r.solver.solver, "time_limit": r.solver.time_limit, "rel_gap": r.solver.rel_gap,
                       "threads": r.solver.threads, "seed": r.solver.seed, "solver_options": r.solver.solver_options},
            "params": r.params}
