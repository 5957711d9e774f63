"""The exact stage of Pesto's pipeline: a horizon every feasible schedule meets
(:func:`safe_horizon`), the check that a model can be built in the time left (:func:`too_big`)
and the build and solve of the makespan model with the MIP or CP-SAT engine (:func:`solve_exact`)."""

from __future__ import annotations

import time

import numpy as np

from dnnplace.formulations.pesto_ip import PestoOptions, build_pesto_model, warm_start_values
from dnnplace.formulations.pesto_solution import decode_times
from dnnplace.formulations.solvers.driver import SolveOutcome, solve_model
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.outcome import Termination
from dnnplace.formulations.solvers.progress import stage
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached

__all__ = ["BUILD_PAIRS_PER_SECOND", "safe_horizon", "solve_exact", "too_big"]


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


BUILD_PAIRS_PER_SECOND = 50_000
"""A generous rate at which a Pesto model's device-order pairs are built and handed to
the solver (measured: Pyomo builds and hands over a few thousand per second, CP-SAT
tens of thousands): a model with more pairs than this rate times the time left is not
started (:func:`too_big`)."""


def too_big(cg: OpGraph, deadline: Deadline) -> str | None:
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


def solve_exact(cg: OpGraph, cluster: Cluster, horizon: float, opts: PestoOptions, solver: SolverOptions,
                 engine: str, start: tuple | None, deadline: Deadline | None = None):
    """Build and solve the makespan model of ``cg`` with ``engine`` from ``start``
    (``(device, start, transfer starts)`` or ``None``): ``(outcome, times or None,
    build seconds, model-size entries)``, ``times`` as
    :func:`~dnnplace.formulations.pesto_solution.ilp_orders` reads them. Past
    ``deadline`` (in the model build or the hand-off) the outcome is ``no_solution``
    with termination ``time_limit``, nothing solved."""
    deadline = deadline or NO_DEADLINE
    why = too_big(cg, deadline)
    if why is not None:  # a model that cannot be built in the time left is not started
        name = "cpsat" if engine == "cpsat" else solver.solver
        out = SolveOutcome("no_solution", Termination.TIME_LIMIT, solver=name, message=why)
        return out, None, 0.0, {"stopped": why}
    stage(f"model build ({cg.n} nodes)")
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
        return SolveOutcome("no_solution", Termination.TIME_LIMIT, solver=solver.solver, message=str(exc),
                            build_seconds=build), None, build, {"stopped": str(exc)}
    build = time.perf_counter() - t1
    out = solve_model(model, solver, warm_start=ws, build_seconds=build, deadline=deadline)
    times = decode_times(model) if out.has_solution else None
    return out, times, build, {"node_pairs": len(model.pesto.node_pairs),
                               "transfer_pairs": len(model.pesto.xfer_pairs)}
