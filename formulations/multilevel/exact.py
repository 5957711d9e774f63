"""The exact stage of Pesto's pipeline: a horizon every feasible schedule meets
(:func:`safe_horizon`), the check that a model can be built in the time left (:func:`too_big`),
the messages a coarse edge stands for (:func:`coarse_messages`), a start re-timed with the
model's own message costs (:func:`model_start`) and the build and solve of the makespan model
with the MIP or CP-SAT engine (:func:`solve_exact`)."""

from __future__ import annotations

import time

import numpy as np

from dnnplace.formulations.pesto_ip import PestoOptions, build_pesto_model, warm_start_values
from dnnplace.formulations.pesto_precompute import edge_messages, message_time
from dnnplace.formulations.pesto_solution import coarse_edge_of, decode_times, replay_orders
from dnnplace.formulations.solvers.driver import SolveOutcome, solve_model
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.outcome import Termination
from dnnplace.formulations.solvers.progress import stage
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached

__all__ = ["BUILD_PAIRS_PER_SECOND", "safe_horizon", "solve_exact", "too_big", "coarse_messages", "model_start"]


def safe_horizon(graph: OpGraph, cluster: Cluster, messages: np.ndarray | None = None) -> float:
    """A makespan every feasible instance attains: all nodes and transfers one after
    another in topological order, each at its slowest allowed device/link, every edge
    also at its dearest message costs (``messages[e]`` messages, default 1: the models'
    accounting, docs/semantics.md 2.1)."""
    p = cluster.compute_matrix(graph)
    D = cluster.size
    worst = np.zeros(graph.m)
    for a in range(D):
        for b in range(D):
            if a != b:
                t = cluster.transfer_time(np.full(graph.m, a), np.full(graph.m, b), graph.edge_bytes, graph.edge_cost)
                worst = np.maximum(worst, t)
    msg = 0.0
    if cluster.has_message_costs:
        msg = float(edge_messages(graph, messages).sum() * (cluster.send_overhead.max() + cluster.recv_overhead.max()))
    return float(np.nansum(np.nanmax(p, axis=1)) + worst.sum()) + msg


def coarse_messages(graph: OpGraph, labels: np.ndarray, coarse: OpGraph, transfer_mode: str) -> np.ndarray:
    """Per edge of ``coarse`` (``graph`` contracted by ``labels``), the messages it stands
    for when its ends are on different devices (docs/semantics.md 2.1): under
    ``"per_edge"`` its original edges, every one a message (exact); under
    ``"per_destination"`` the distinct tensors (source node, output) they carry, one
    message each to the coarse target's device (at least the true count: a tensor two
    coarse nodes on one device consume is sent once, counted twice here, as the models
    count a transfer per edge)."""
    ce = coarse_edge_of(graph, labels, coarse)
    keep = ce >= 0
    if transfer_mode == "per_edge":
        return np.bincount(ce[keep], minlength=coarse.m).astype(np.float64)
    tensors = np.unique(np.stack([ce[keep], graph.src[keep], graph.edge_output[keep]], axis=1), axis=0)
    return np.bincount(tensors[:, 0], minlength=coarse.m).astype(np.float64)


def model_start(cg: OpGraph, cluster: Cluster, device: np.ndarray, sim, congestion: bool,
                messages: np.ndarray | None) -> tuple[float, np.ndarray, dict]:
    """A start for the model of ``cg``: ``(makespan, node starts, transfer starts)`` of
    ``sim`` (a per-edge simulation of ``device`` on ``cg``), re-timed in its own device and
    link orders (:func:`~dnnplace.formulations.pesto_solution.replay_orders`) with the
    model's message costs where a coarse edge stands for other than one message
    (``messages``): the simulator of ``cg`` counts one per edge, so its makespan would be
    no horizon of the model, its schedule no start."""
    xs = {int(e): float(s) for e, s in zip(sim.xfer_edge, sim.xfer_start)}
    w = edge_messages(cg, messages)
    if not cluster.has_message_costs or messages is None or np.all(w == 1):
        return float(sim.makespan), sim.start, xs
    dev = np.asarray(device, dtype=np.int64)
    a, b = dev[cg.src], dev[cg.dst]
    tt = np.where(a != b, cluster.transfer_time(a, b, cg.edge_bytes, cg.edge_cost), 0.0)
    dur = cluster.compute_matrix(cg)[np.arange(cg.n), dev] + message_time(cg, cluster, dev, w)
    st, xs2 = replay_orders(cg, dev, sim.start, sim.schedule.finish, xs, tt, dur, tt, congestion)
    st = np.asarray(st, dtype=np.float64)
    return float((st + dur).max()) if cg.n else 0.0, st, xs2


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
                 engine: str, start: tuple | None, deadline: Deadline | None = None,
                 messages: np.ndarray | None = None):
    """Build and solve the makespan model of ``cg`` with ``engine`` from ``start``
    (``(device, start, transfer starts)`` or ``None``), each edge of ``cg`` standing for
    ``messages[e]`` messages (:func:`coarse_messages`; default one): ``(outcome, times or None,
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
                                       deadline=deadline, messages=messages)
        return out, None if times is None else times.as_tuple(), out.build_seconds, {}
    t1 = time.perf_counter()
    try:
        with deadline.guard("the ILP's model build"):
            model = build_pesto_model(cg, cluster, horizon=horizon, options=opts, messages=messages)
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
