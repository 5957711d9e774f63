"""The comparisons that keep Pesto's answer never worse: memory feasibility (:func:`memory_ok`),
the evaluator's verdict that admits a candidate (:func:`feasible`), the obvious answers
(:func:`against_obvious`: one device, the original graph's best list schedule) and the last
stage of a coarsened run (:func:`refine_last_stage`: rivals, unit moves, then windows solved again)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.runtime.deadline import Deadline

__all__ = ["against_obvious", "feasible", "memory_ok", "refine_last_stage"]


def memory_ok(pl: Placement) -> bool:
    used = np.bincount(pl.device, weights=pl.graph.memory, minlength=pl.cluster.size)
    return bool(np.all(used <= pl.cluster.memory * (1 + 1e-12)))


def feasible(pl: Placement) -> bool:
    """The independent evaluator's verdict
    (:func:`~dnnplace.evaluation.evaluate.validate`: supported devices, device limits,
    colocation, static memory): a candidate (the start, one device, a list schedule, a rival, a
    refinement) may replace the answer only when it passes, however fast it replays. The
    single-device placement puts the nodes its accelerator cannot run on the CPU, which splits a
    colocation group holding both kinds of node (docs/bad-input.md, "Transfers and obvious
    candidates")."""
    from dnnplace.evaluation.evaluate import validate

    return not validate(pl)


def against_obvious(graph: OpGraph, cluster: Cluster, pl: Placement, pr: np.ndarray, ms: float, source: str,
                    lp: np.ndarray | None, congestion: bool, size: dict, orig_list: tuple | None,
                    deadline: Deadline | None = None):
    """The answer, or the obvious one when it is better: the single-device placement
    (:func:`~dnnplace.heuristics.baselines.single_device`, replayed in its critical-path
    order) and the best list schedule of the original graph (``orig_list``, computed here
    when the pipeline had none), each only where the evaluator finds it :func:`feasible`. So
    the pipeline never returns worse than either feasible one, and never an infeasible one
    (``size["obvious"]`` records their makespans, ``size["obvious_infeasible"]`` those left out)."""
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
        if not feasible(pl_x):
            size.setdefault("obvious_infeasible", []).append(what)
        elif ms_x < ms - 1e-9 * max(1.0, ms):
            pl, pr, ms, source, lp = pl_x, pr_x, ms_x, what, None
    return pl, pr, ms, source, lp


def refine_last_stage(graph: OpGraph, cluster: Cluster, labels: np.ndarray, pl: Placement, pr: np.ndarray,
                      ms: float, source: str, lp: np.ndarray | None, congestion: bool, size: dict, orig_list: tuple,
                      rivals: Sequence[tuple[str, Placement]], seconds: float, kicks: int = 0,
                      windows: float = 0.0):
    """The last stage of a coarsened run (see
    :attr:`~dnnplace.formulations.multilevel.options.PipelineOptions.refine_share`): never
    worse than the best list schedule of the original graph (``orig_list``, as
    :func:`~dnnplace.heuristics.list_scheduling.best_list_schedule` returns it) or any
    of the ``rivals`` (replayed in their ``fifo`` order), then unit moves: of coarse nodes,
    then of single nodes with up to ``kicks`` unsuccessful kicks in a row (an iterated
    local search around the incumbent, :func:`~dnnplace.heuristics.refine.refine_placement`),
    then, with the share ``windows`` of ``seconds`` kept for it, windows of the schedule
    around its critical chain solved again by CP-SAT
    (:func:`~dnnplace.formulations.window_search.window_search`; skipped without OR-Tools,
    whose share the moves then keep)."""
    from dnnplace.formulations.pesto_cpsat import available
    from dnnplace.formulations.window_search import window_search
    from dnnplace.heuristics.refine import refine_placement

    t0 = time.perf_counter()
    windows = windows if available() else 0.0
    ls, ls_ms, _ = orig_list
    size["original_best_list"] = {"algorithm": ls.algorithm, "makespan": ls_ms}
    tol = 1e-9 * max(1.0, ms)
    if feasible(ls.placement) and ls_ms < ms - tol:
        pl, pr, ms, source, lp = ls.placement, ls.priorities, ls_ms, f"list:{ls.algorithm}", None
    for name, pl_x in rivals:
        pr_x = simulate(pl_x, policy="fifo", congestion=congestion).schedule.priorities()
        ms_x = simulate(pl_x, policy="order", priorities=pr_x, congestion=congestion).makespan
        size.setdefault("rivals", {})[name] = ms_x
        if feasible(pl_x) and ms_x < ms - tol:
            pl, pr, ms, source, lp = pl_x, pr_x, ms_x, name, None
    dev = pl.device
    # coarse nodes first (few units, big moves), then single nodes (colocation groups) with the time left
    for level, units, k in (("coarse", labels, 0), ("nodes", None, kicks)):
        left = max(0.0, seconds * (1 - windows if level == "nodes" else 1) - (time.perf_counter() - t0))
        dev, _, info = refine_placement(graph, cluster, dev, units=units, policy="critical_path",
                                        congestion=congestion, time_limit=left, kicks=k)
        size[f"refine_{level}"] = info
    pl_r = Placement(graph, cluster, dev)
    pr_r = simulate(pl_r, policy="critical_path", congestion=congestion).schedule.priorities()
    ms_r = simulate(pl_r, policy="order", priorities=pr_r, congestion=congestion).makespan
    if ms_r < ms - tol and feasible(pl_r):
        pl, pr, ms, source, lp = pl_r, pr_r, ms_r, f"refined({source})", None
    if windows > 0:
        left = max(0.0, seconds - (time.perf_counter() - t0))
        dev_w, pr_w, ms_w, size["window_search"] = window_search(graph, cluster, pl.device, pr, time_limit=left,
                                                                 congestion=congestion)
        pl_w = Placement(graph, cluster, dev_w)
        if ms_w < ms - tol and feasible(pl_w):
            pl, pr, ms, lp = pl_w, pr_w, ms_w, None
            source = source if source.startswith("refined(") else f"refined({source})"
    return pl, pr, ms, source, lp
