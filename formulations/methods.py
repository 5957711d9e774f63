"""The ``ip`` method: Tarnawski et al.'s max-load IP (Fig. 6) and latency IP (Figs. 3-4)
solved by :mod:`dnnplace.formulations.driver` with any backend.

Request handling:

- ``problem="maxload"``: ``request.contiguity`` ``None`` means ``"both"`` (the
  contiguous IP, forward and backward parts separately), ``"none"`` the non-contiguous
  IP; ``request.objective`` picks PipeDream / GPipe / overlap.
- ``problem="latency"``: ``request.params["subgraphs_per_device"]`` is ``q`` (default 1,
  Fig. 3); ``request.params["horizon"]`` overrides the big-M. Without it, ``H`` is the
  best evaluator latency among the warm start, greedy and all-CPU splits, and the
  solver always starts from the split that achieves ``H`` (a worse start would break
  the time bounds ``<= H``).
- ``request.warm_start``: a registered method name (``greedy``, ``dp``, ...) or a
  placement file; the method is run first, its placement completed into every variable
  and handed to the backend. A start that violates the model (e.g. non-contiguous for
  the contiguous IP) is skipped with a message in ``extra["warm_start"]``.

The reported ``objective`` is the independent evaluator's score of the decoded
placement (never worse than the IP incumbent for max-load, whose communication
variables need not be tight); ``bound`` is the solver's proven bound and
``extra["ip_incumbent"]`` the solver's own incumbent value.
"""

from __future__ import annotations

import os
import time
from typing import Any

from dnnplace.formulations import latency_ip, maxload_ip
from dnnplace.formulations.driver import solve_model
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.evaluate import latency as eval_latency
from dnnplace.graphs.evaluate import maxload as eval_maxload
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_placement
from dnnplace.graphs.placement import Placement
from dnnplace.registry import Method, MethodOutput, SolveRequest, get_method

__all__ = ["METHODS", "warm_start_placement", "run_ip"]


def warm_start_placement(inst: Instance, request: SolveRequest, contiguity: str) -> tuple[Placement, str]:
    """The placement named by ``request.warm_start``: a registered method's output
    (run with the same problem, objective and contiguity; a max-load-only method is run
    for max-load) or a placement file."""
    name = request.warm_start
    if name is None:
        raise InputError("no warm start requested")
    if os.path.exists(name):
        return load_placement(name, inst), f"file {name}"
    method = get_method(name)
    if method.name == "ip":
        raise InputError("the ip method cannot warm start itself")
    # a max-load method (e.g. the DP) still gives a good split to start the latency IP from
    problem = request.problem if request.problem in method.problems else "maxload"
    if problem not in method.problems:
        raise InputError(f"warm-start method {name!r} solves {list(method.problems)}, not {request.problem!r}")
    sub = SolveRequest(problem=problem, objective=request.objective,
                       contiguity=contiguity if request.problem == "maxload" else None,
                       solver=request.solver, seed=request.seed, params=dict(request.params))
    out = method.run(inst, sub)
    if out.placement is None:
        raise InputError(f"warm-start method {name!r} returned no placement ({out.message})")
    return out.placement, f"method {name}"


def run_ip(inst: Instance, request: SolveRequest) -> MethodOutput:
    """Build, warm start, solve, decode and re-score one IP."""
    extra: dict[str, Any] = {}
    if request.problem == "maxload":
        contiguity = request.contiguity or "both"
        opts_ml = maxload_ip.MaxLoadOptions(objective=request.objective, contiguity=contiguity,
                                            contiguity_on_cpus=bool(request.params.get("contiguity_on_cpus", True)))
        module, score = maxload_ip, (lambda p: eval_maxload(p, objective=request.objective, contiguity=contiguity,
                                                             include_cpus=opts_ml.contiguity_on_cpus))
    elif request.problem == "latency":
        contiguity = "none"
        q = int(request.params.get("subgraphs_per_device", 1))
        extra["subgraphs_per_device"] = q
        module, score = latency_ip, eval_latency
    else:
        raise InputError(f"the ip method solves maxload and latency, not {request.problem!r}")

    start, note = None, None
    if request.warm_start:
        start, note = warm_start_placement(inst, request, contiguity)
        ev = score(start)
        if not ev.feasible:
            extra["warm_start"] = f"{note} skipped: infeasible for this model ({'; '.join(ev.violations[:2])})"
            start = None
        else:
            extra["warm_start"] = note
            extra["warm_start_objective"] = ev.objective

    t0 = time.perf_counter()
    if request.problem == "maxload":
        model = maxload_ip.build_maxload_ip(inst, opts_ml)
    else:
        horizon = request.params.get("horizon")
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
                start = best
        extra["horizon"] = float(horizon)
        model = latency_ip.build_latency_ip(inst, latency_ip.LatencyOptions(subgraphs_per_device=q,
                                                                            horizon=float(horizon)))
    build = time.perf_counter() - t0
    values = None
    if start is not None:
        try:
            values = module.warm_start_values(model, start)
        except InputError as exc:
            extra["warm_start"] = f"{note} skipped: {exc}"
    out = solve_model(model, request.solver, warm_start=values, build_seconds=build)
    extra.update(ip_incumbent=out.incumbent, solver_gap=out.gap, nodes=out.nodes, variables=out.n_vars,
                 constraints=out.n_cons, binaries=out.n_binaries, handoff_seconds=out.handoff_seconds)
    if out.trace and out.trace[0][1] is not None:
        extra["first_incumbent"] = out.trace[0][1]
    res = MethodOutput(None, status=out.status, bound=out.bound, termination=out.termination, message=out.message,
                       solver=out.solver, solver_version=out.solver_version, build_seconds=build,
                       solve_seconds=out.solve_seconds, contiguity=contiguity, trace=list(out.trace), extra=extra)
    if not out.has_solution:
        return res
    p = module.decode(model)
    if request.problem == "latency":
        # the IP chooses how each accelerator's nodes are cut into its q slots (Fig. 4);
        # the evaluator scores that cut, and reports the fewest-pieces latency beside it
        res.pieces = latency_ip.decode_pieces(model)
        ev = eval_latency(p, pieces=res.pieces)
        extra["fewest_pieces_latency"] = eval_latency(p).objective
    else:
        ev = score(p)
    res.placement = p
    res.objective = ev.objective
    if ev.violations:
        res.message = "decoded placement violates: " + "; ".join(ev.violations[:3])
        res.status = "error"
    return res


METHODS = [
    Method("ip", ("maxload", "latency"), run_ip,
           "Tarnawski et al. integer programs (max-load Fig. 6; latency Figs. 3-4) on any Pyomo MIP backend",
           kind="ip", objective_exact=False, default_contiguity="both"),
]
