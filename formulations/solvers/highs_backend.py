"""The HiGHS backend of :func:`dnnplace.formulations.solvers.driver.solve_model`: the
persistent HiGHS interface held to the solve's deadline.

A warm start is passed with ``setSolution`` on the underlying ``highspy.Highs`` object
through the interface's variable-to-column map; the progress trace comes from the
``cbMipImprovingSolution`` / ``cbMipLogging`` callbacks; the gap is HiGHS's own
``mip_gap``. HiGHS checks its time limit and its interrupt callbacks only between the
steps of its search (one round of root cuts on a large Pesto model can run for minutes
without a check: results/time-limits.md, "HiGHS held to its deadline"), so ``Highs.run`` runs in a helper thread
(:func:`~dnnplace.formulations.solvers.interrupts.run_stoppable`): a Ctrl-C or the
deadline asks it to stop through the interrupt callbacks, and one that has not returned a
grace later (:func:`_grace`) is left behind, the answer being what HiGHS last reported
(:func:`_overran`). docs/backends.md, "HiGHS past its time limit".
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo

from dnnplace.formulations.solvers.backends import _common_config, _finish, _hand_over, _num, _rel_gap, _ver
from dnnplace.formulations.solvers.interrupts import (
    SolverOverran,
    no_interrupt_warning,
    run_stoppable,
    wait_for_left_behind,
)
from dnnplace.formulations.solvers.outcome import SolveOutcome, Termination
from dnnplace.formulations.solvers.progress import Trace, stage
from dnnplace.runtime.deadline import Deadline

__all__ = ["solve_highs"]

_HIGHS_THREADS: list = []  # the thread count HiGHS's process-wide scheduler was started with


def _highs_threads(threads: int | None) -> None:
    """HiGHS's task scheduler is process-wide: a solve asking for a different thread
    count than an earlier one fails quietly (docs/backends.md, "HiGHS threads"), so reset it on a change."""
    import highspy

    if _HIGHS_THREADS and _HIGHS_THREADS[-1] != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS[:] = [threads]


def _grace(deadline: Deadline) -> float:
    """Seconds a solver asked to stop at ``deadline`` gets to return before it is left
    behind: 2 % of the limit, between 1 and 5 s, so that a solve that has to be left
    behind still ends close to its limit (docs/backends.md, "HiGHS past its time limit")."""
    return min(5.0, max(1.0, 0.02 * (deadline.seconds or 0.0)))


def solve_highs(model, solver, options, warm_start, base, deadline: Deadline) -> SolveOutcome:
    """Solve with the persistent HiGHS interface ``solver``: warm start through
    ``setSolution``, trace from the MIP callbacks, Ctrl-C and the hard end of the deadline
    through the interrupt callbacks.

    HiGHS checks its time limit (and the interrupt callbacks) between root cut rounds,
    and one round can run far past the limit (results/time-limits.md, "HiGHS held to its
    deadline"). So the solve runs in a helper thread
    (:func:`~dnnplace.formulations.solvers.interrupts.run_stoppable`): at the deadline it
    is asked to stop, and if it has not returned a grace later (:func:`_grace`) the
    answer is what HiGHS last reported: its last
    improving solution (from ``cbMipImprovingSolution``, else the warm start) loaded into
    the model, the last bound of the trace, termination ``time_limit``; the solver
    thread is asked to stop and left behind (a later HiGHS solve waits for it)."""
    waited = wait_for_left_behind()
    _hand_over(model, solver, base, deadline)
    h = solver._solver_model  # the underlying highspy.Highs object
    stage("solve (highs)")
    trace = Trace()
    last: dict[str, Any] = {}

    def on_event(e: Any) -> None:
        d = e.data_out
        inc, bnd = _num(d.mip_primal_bound), _num(d.mip_dual_bound)
        if inc is None and bnd is None:
            return
        if trace and trace[-1][1] == inc and trace[-1][2] == bnd:
            return
        trace.append((float(d.running_time), inc, bnd))

    def on_improving(e: Any) -> None:
        on_event(e)
        last["x"] = np.array(e.data_out.mip_solution, dtype=float)

    h.cbMipImprovingSolution.subscribe(on_improving)
    h.cbMipLogging.subscribe(on_event)
    if warm_start:
        cmap = solver._pyomo_var_to_solver_var_map
        items = [(cmap[id(v)], float(val)) for v, val in warm_start.items() if id(v) in cmap and val is not None]
        idx = np.array([i for i, _ in items], dtype=np.int32)
        vals = np.array([x for _, x in items], dtype=np.float64)
        h.setSolution(len(items), idx, vals)
    cfg = _common_config(options, deadline, "random_seed")
    _highs_threads(options.threads)
    stop = threading.Event()

    def on_interrupt_poll(e: Any) -> None:  # HiGHS asks whether to stop: yes after a Ctrl-C or the hard end
        if stop.is_set():
            e.interrupt()

    for poll in (h.cbMipInterrupt, h.cbSimplexInterrupt, h.cbIpmInterrupt):
        poll.subscribe(on_interrupt_poll)
    hard_end = deadline.end
    if waited > 1.0:
        base["message"] = f"waited {waited:.1f} s for an earlier HiGHS solve left running past its deadline"
    grace = 2.0 if deadline.end is None else _grace(deadline)
    solver._solve = _highs_solve_step(solver, lambda run: run_stoppable(run, stop.set, hard_end=hard_end,
                                                                        grace=grace))
    t0 = time.perf_counter()
    try:
        with no_interrupt_warning():
            res = solver.solve(model, **cfg)
    except SolverOverran as exc:
        return _overran(model, solver, warm_start, last.get("x"), trace, base, time.perf_counter() - t0, str(exc))
    wall = time.perf_counter() - t0
    import highspy

    timed_out = h.getModelStatus() == getattr(highspy.HighsModelStatus, "kInterrupt", None)
    info = h.getInfo()
    gap = _num(info.mip_gap)
    nodes = int(info.mip_node_count) if info.mip_node_count >= 0 else None
    return _finish(res, base, "highs", solver.version(), wall, nodes=nodes, trace=trace, gap=gap,
                   termination=Termination.TIME_LIMIT if timed_out else None)


def _highs_solve_step(solver: Any, runner: Any) -> Any:
    """The persistent interface's solve step (Pyomo's ``Highs._solve``: the options, HiGHS's
    run, reading the results) with the run handed to ``runner`` and HiGHS's log on the
    console only with ``tee``. Pyomo's own step captures the process's standard output
    *file descriptors* for the whole run, so a run left behind at its deadline would
    swallow everything the process prints after it (and abort the process at its exit):
    here nothing is redirected."""

    def step() -> Any:
        config = solver._active_config
        h = solver._solver_model
        h.setOptionValue("log_to_console", bool(config.tee))
        for key, value in (("threads", config.threads), ("time_limit", config.time_limit),
                           ("mip_rel_gap", config.rel_gap), ("mip_abs_gap", config.abs_gap)):
            if value is not None:
                h.setOptionValue(key, value)
        for key, value in config.solver_options.items():
            h.setOptionValue(key, value)
        config.timer.start("optimize")
        runner(h.run)
        config.timer.stop("optimize")
        return solver._postsolve(io.StringIO())

    return step


def _overran(model, solver, warm_start, x, trace, base, wall: float, why: str) -> SolveOutcome:
    """The outcome of a HiGHS solve left behind at its hard end: HiGHS's last improving
    solution ``x`` (column values), else the warm start, loaded into the model's variables
    and scored by the model's objective; the bound is the last one HiGHS reported."""
    if x is not None:
        for v_id, col in solver._pyomo_var_to_solver_var_map.items():
            solver._vars[v_id][0].set_value(float(x[col]), skip_validation=True)
    elif warm_start:
        for v, val in warm_start.items():
            if val is not None:
                v.set_value(float(val), skip_validation=True)
    obj = next(model.component_data_objects(pyo.Objective, active=True))
    has = x is not None or bool(warm_start)
    inc = float(pyo.value(obj)) if has else None
    bounds = [b for _, _, b in trace if b is not None]
    bound = bounds[-1] if bounds else None
    return SolveOutcome("feasible" if has else "no_solution", Termination.TIME_LIMIT, inc, bound,
                        _rel_gap(inc, bound), solver="highs", solver_version=_ver(solver), solve_seconds=wall,
                        trace=trace, **{**base, "message": why})
