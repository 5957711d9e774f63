"""The MIP backends behind :func:`dnnplace.formulations.solvers.driver.solve_model`: one
``solve_<backend>(model, solver, ...) -> SolveOutcome`` per kind of Pyomo interface,
each handing the model to the solver, passing the warm start and the options, collecting
the progress trace and mapping the solver's answer to a
:class:`~dnnplace.formulations.solvers.outcome.SolveOutcome`.

Backends (``pyomo.contrib.solver`` interfaces, see ``docs/backends.md``, "Solver facts"):

- :func:`solve_highs`: the persistent HiGHS interface; a warm start is passed with
  ``setSolution`` on the underlying ``highspy.Highs`` object through the interface's
  variable-to-column map, and the progress trace comes from the
  ``cbMipImprovingSolution`` / ``cbMipLogging`` callbacks. The gap is HiGHS's own
  ``mip_gap``. A Ctrl-C stops HiGHS through its interrupt callbacks
  (:mod:`dnnplace.formulations.solvers.interrupts`).
- :func:`solve_gurobi`: ``gurobi_persistent``; warm start through
  ``warmstart_discrete_vars`` (variable values), trace from the ``MIP``/``MIPSOL``
  callbacks. The size-limited pip licence (error 10010) becomes a one-line message, not
  a traceback.
- :func:`solve_scip`: ``scip_persistent`` (PySCIPOpt wheels ship SCIP, Apache-2.0;
  no executable needed); warm start as a partial solution (``createPartialSol``) through
  the interface's variable map, trace from SCIP events (``BESTSOLFOUND``,
  ``DUALBOUNDIMPROVED``).
- :func:`solve_contrib`: any other ``pyomo.contrib.solver`` interface (``ipopt`` ...);
  :func:`solve_legacy`: the classic ``pyomo.environ.SolverFactory`` (``cbc``, ``glpk``,
  ``cplex`` ...). These get no trace and no warm start. What each backend supports:
  ``docs/backends.md``.

Each takes ``base``, the outcome fields the driver knows before the solve (model size,
build time, whether a warm start was given), and returns the outcome; a backend failure
is an ``error`` outcome, an interrupt a :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import contextvars
import io
import math
import threading
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo

from dnnplace.formulations.solvers.interrupts import (
    InterruptGuard,
    SolverOverran,
    no_interrupt_warning,
    raise_if_interrupted,
    run_stoppable,
    wait_for_left_behind,
)
from dnnplace.formulations.solvers.options import SolverOptions, licence_hint
from dnnplace.formulations.solvers.outcome import SolveOutcome
from dnnplace.graphs.deadline import capped

__all__ = ["solve_highs", "solve_gurobi", "solve_scip", "solve_contrib", "solve_legacy"]


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) or abs(x) >= 1e99 else x


def _status(termination: str, solution: str) -> str:
    if solution == "optimal":
        return "optimal"
    if solution in ("feasible",):
        return "optimal" if termination == "convergenceCriteriaSatisfied" else "feasible"
    if termination in ("provenInfeasible", "locallyInfeasible", "infeasibleOrUnbounded"):
        return "infeasible"
    if termination in ("error", "licensingProblems", "unbounded"):
        return "error"
    return "no_solution"


def _rel_gap(inc: float | None, bound: float | None) -> float | None:
    if inc is None or bound is None:
        return None
    return abs(inc - bound) / max(abs(inc), 1e-10)


DEADLINE: contextvars.ContextVar = contextvars.ContextVar("dnnplace_solve_deadline", default=None)
"""The :class:`~dnnplace.graphs.deadline.Deadline` of the solve in progress
(:func:`~dnnplace.formulations.solvers.driver.solve_model` sets it): the hand-off stops at it
and the solver's time limit is cut to what it leaves."""


def _common_config(options: SolverOptions, seed_option: str | None = None) -> dict[str, Any]:
    """The ``solve`` keywords every backend shares; ``seed_option``: the engine's own name of
    the random seed, set from ``options.seed`` unless the user's solver options give it."""
    cfg: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False,
                               tee=bool(options.tee))
    limit = capped(options.time_limit, DEADLINE.get())  # the limit, or what the deadline leaves of it
    if limit is not None:
        cfg["time_limit"] = float(limit)
    if options.rel_gap is not None:
        cfg["rel_gap"] = float(options.rel_gap)
    if options.threads is not None:
        cfg["threads"] = int(options.threads)
    sopts = dict(options.solver_options)
    if seed_option is not None and options.seed is not None:
        sopts.setdefault(seed_option, int(options.seed))
    if sopts:
        cfg["solver_options"] = sopts
    return cfg


def _finish(res: Any, base: dict, name: str, version: Any, solve_seconds: float, *, termination: str | None = None,
            **extra: Any) -> SolveOutcome:
    """``res`` as an outcome; ``termination`` overrides the one Pyomo read (a stop we asked
    for at the deadline is a time limit, not an interrupt)."""
    term = termination or res.termination_condition.name
    raise_if_interrupted(term)
    sol = res.solution_status.name
    status = _status(term, sol)
    inc = _num(res.incumbent_objective) if status in ("optimal", "feasible") else None
    bound = _num(res.objective_bound)
    if status in ("optimal", "feasible"):
        res.solution_loader.load_vars()
    ver = ".".join(str(x) for x in version) if isinstance(version, tuple) else (str(version) if version else None)
    gap = extra.pop("gap", None)
    if gap is None:
        gap = _rel_gap(inc, bound)
    return SolveOutcome(status, term, inc, bound, gap if inc is not None else None, solver=name,
                        solver_version=ver, solve_seconds=solve_seconds, **base, **extra)


_HIGHS_THREADS: list = []  # the thread count HiGHS's process-wide scheduler was started with


def _highs_threads(threads: int | None) -> None:
    """HiGHS's task scheduler is process-wide: a solve asking for a different thread
    count than an earlier one fails quietly (docs/backends.md, "HiGHS threads"), so reset it on a change."""
    import highspy

    if _HIGHS_THREADS and _HIGHS_THREADS[-1] != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS[:] = [threads]


def _hand_over(model, solver, base) -> None:
    """Give ``model`` to the persistent ``solver`` (timed as ``handoff_seconds``) and turn
    its automatic model updates off: the model is not changed after the hand-over."""
    t0 = time.perf_counter()
    deadline = DEADLINE.get()
    if deadline is None:
        solver.set_instance(model)
    else:  # Pyomo's hand-off checks no deadline: stop it there (TimeLimitReached, caught by solve_model)
        with deadline.guard("the model's hand-off to the solver"):
            solver.set_instance(model)
    base["handoff_seconds"] = time.perf_counter() - t0
    for key in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints",
                "update_vars", "update_parameters", "update_named_expressions", "update_objective"):
        if hasattr(solver.config.auto_updates, key):
            setattr(solver.config.auto_updates, key, False)


def _grace(deadline: Any) -> float:
    """Seconds a solver asked to stop at ``deadline`` gets to return before it is left
    behind: 2 % of the limit, between 1 and 5 s (the whole call then ends within the 10 %
    issue 24 allows for limits of 10 s and more)."""
    return min(5.0, max(1.0, 0.02 * (deadline.seconds or 0.0)))


def solve_highs(model, solver, options, warm_start, base) -> SolveOutcome:
    """Solve with the persistent HiGHS interface ``solver``: warm start through
    ``setSolution``, trace from the MIP callbacks, Ctrl-C and the hard end of the deadline
    through the interrupt callbacks.

    HiGHS checks its time limit (and the interrupt callbacks) between root cut rounds,
    and one round ran 119 s past a 60 s limit on a 225k-row Pesto model
    (results/time-limits.md). So the solve runs in a helper thread
    (:func:`~dnnplace.formulations.solvers.interrupts.run_stoppable`): at the deadline it
    is asked to stop, and if it has not returned a grace later (:func:`_grace`) the
    answer is what HiGHS last reported: its last
    improving solution (from ``cbMipImprovingSolution``, else the warm start) loaded into
    the model, the last bound of the trace, termination ``maxTimeLimit``; the solver
    thread is asked to stop and left behind (a later HiGHS solve waits for it)."""
    waited = wait_for_left_behind()
    _hand_over(model, solver, base)
    h = solver._solver_model  # the underlying highspy.Highs object
    trace: list[tuple[float, float | None, float | None]] = []
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
    cfg = _common_config(options, "random_seed")
    _highs_threads(options.threads)
    stop = threading.Event()

    def on_interrupt_poll(e: Any) -> None:  # HiGHS asks whether to stop: yes after a Ctrl-C or the hard end
        if stop.is_set():
            e.interrupt()

    for poll in (h.cbMipInterrupt, h.cbSimplexInterrupt, h.cbIpmInterrupt):
        poll.subscribe(on_interrupt_poll)
    deadline = DEADLINE.get()
    hard_end = None if deadline is None else deadline.end
    if waited > 1.0:
        base["message"] = f"waited {waited:.1f} s for an earlier HiGHS solve left running past its deadline"
    grace = 2.0 if deadline is None else _grace(deadline)
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
                   termination="maxTimeLimit" if timed_out else None)


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
    return SolveOutcome("feasible" if has else "no_solution", "maxTimeLimit", inc, bound,
                        _rel_gap(inc, bound), solver="highs", solver_version=_ver(solver), solve_seconds=wall,
                        trace=trace, **{**base, "message": why})


def solve_gurobi(model, solver, options, warm_start, base) -> SolveOutcome:
    """Solve with ``gurobi_persistent``: warm start through the variable values, trace from
    the ``MIP``/``MIPSOL`` callbacks, a licence error as a one-line ``error`` outcome."""
    import gurobipy

    trace: list[tuple[float, float | None, float | None]] = []
    GRB = gurobipy.GRB

    def cb(_m: Any, s: Any, where: Any) -> None:
        grb = s._solver_model
        if where == GRB.Callback.MIP:
            inc, bnd = grb.cbGet(GRB.Callback.MIP_OBJBST), grb.cbGet(GRB.Callback.MIP_OBJBND)
            t = grb.cbGet(GRB.Callback.RUNTIME)
        elif where == GRB.Callback.MIPSOL:
            inc, bnd = grb.cbGet(GRB.Callback.MIPSOL_OBJBST), grb.cbGet(GRB.Callback.MIPSOL_OBJBND)
            t = grb.cbGet(GRB.Callback.RUNTIME)
        else:
            return
        inc, bnd = _num(inc), _num(bnd)
        if trace and trace[-1][1] == inc and trace[-1][2] == bnd:
            return
        trace.append((float(t), inc, bnd))

    if warm_start:
        for v in model.component_data_objects(pyo.Var, descend_into=True):
            v.set_value(None, skip_validation=True)
        for v, val in warm_start.items():
            v.set_value(val, skip_validation=True)
    cfg = _common_config(options, "Seed")
    cfg["warmstart_discrete_vars"] = bool(warm_start)
    t0 = time.perf_counter()
    try:
        deadline = DEADLINE.get()
        if deadline is None:
            solver.set_instance(model)
        else:
            with deadline.guard("the model's hand-off to the solver"):
                solver.set_instance(model)
        base["handoff_seconds"] = time.perf_counter() - t0
        solver.set_callback(cb)
        t0 = time.perf_counter()
        with InterruptGuard():
            res = solver.solve(model, **cfg)
    except gurobipy.GurobiError as exc:
        if getattr(exc, "errno", None) == 10010 or "size-limited" in str(exc):
            msg = (f"model has {base['n_vars']} variables / {base['n_cons']} constraints, over the restricted "
                   f"licence; {licence_hint()}")
        else:
            msg = f"Gurobi error {getattr(exc, 'errno', '')}: {exc}"
        return SolveOutcome("error", "licensingProblems" if "licen" in msg else "error", solver="gurobi",
                            solver_version=_ver(solver), message=msg, **base)
    wall = time.perf_counter() - t0
    grb = solver._solver_model
    nodes = int(grb.NodeCount) if grb is not None else None
    try:
        gap = float(grb.MIPGap)
    except Exception:  # noqa: BLE001 - no gap without a MIP incumbent
        gap = None
    return _finish(res, base, "gurobi", solver.version(), wall, nodes=nodes, trace=trace, gap=_num(gap))


def _scip_version() -> str | None:
    """The SCIP library's version (Pyomo's ``version()`` is PySCIPOpt's)."""
    try:
        import pyscipopt

        m = pyscipopt.Model()
        return f"{m.getMajorVersion()}.{m.getMinorVersion()}.{m.getTechVersion()}"
    except Exception:  # noqa: BLE001
        return None


def solve_scip(model, solver, options, warm_start, base) -> SolveOutcome:
    """Solve with ``scip_persistent`` (PySCIPOpt, which ships SCIP): warm start as a
    partial solution that SCIP completes, trace from ``BESTSOLFOUND`` /
    ``DUALBOUNDIMPROVED`` events; a Ctrl-C is caught by SCIP itself (``userinterrupt``,
    re-raised); the trace ends with the state at the end of the solve (a model closed in
    presolve fires no event). ``threads`` sets ``lp/threads`` only (SCIP's tree search is sequential);
    ``seed`` sets ``randomization/randomseedshift``. The gap is ``|inc - bound| / |inc|``
    like the other backends' (SCIP's own divides by the smaller of the two, so its
    ``limits/gap`` stops a little later than HiGHS or Gurobi at the same ``rel_gap``)."""
    import pyscipopt

    _hand_over(model, solver, base)
    scip = solver._solver_model  # the underlying pyscipopt.Model
    trace: list[tuple[float, float | None, float | None]] = []
    events = pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND | pyscipopt.SCIP_EVENTTYPE.DUALBOUNDIMPROVED

    class _Trace(pyscipopt.Eventhdlr):
        def eventinit(self) -> None:
            self.model.catchEvent(events, self)

        def eventexit(self) -> None:
            self.model.dropEvent(events, self)

        def eventexec(self, event: Any) -> None:
            m = self.model
            inc, bnd = m.getPrimalbound(), m.getDualbound()
            inc = None if m.getNSols() == 0 or m.isInfinity(abs(inc)) else _num(inc)
            bnd = None if m.isInfinity(abs(bnd)) else _num(bnd)
            if inc is None and bnd is None:
                return
            if trace and trace[-1][1] == inc and trace[-1][2] == bnd:
                return
            trace.append((float(m.getSolvingTime()), inc, bnd))

    scip.includeEventhdlr(_Trace(), "dnnplace_trace", "incumbent and bound over time")
    if warm_start:
        cmap = solver._pyomo_var_to_solver_var_map
        sol = scip.createPartialSol()
        for v, val in warm_start.items():
            if val is not None and v in cmap:
                scip.setSolVal(sol, cmap[v], float(val))
        scip.addSol(sol)
    cfg = _common_config(options, "randomization/randomseedshift")
    t0 = time.perf_counter()
    with InterruptGuard():
        res = solver.solve(model, **cfg)
    wall = time.perf_counter() - t0
    nodes = res.extra_info["NNodes"] if "NNodes" in res.extra_info else None
    out = _finish(res, base, "scip", _scip_version(), wall, nodes=nodes, trace=trace)
    # events fire from the start of the tree search on: a model closed in presolve (and
    # the state at a limit) gets the end point, so every trace ends where the solve did
    end = (float(scip.getSolvingTime()), out.incumbent, out.bound)
    if (end[1] is not None or end[2] is not None) and (not trace or trace[-1][1:] != end[1:]):
        trace.append(end)
    return out


def _ver(solver: Any) -> str | None:
    try:
        v = solver.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        return None


def solve_contrib(model, solver, name, options, base) -> SolveOutcome:
    """Solve with another ``pyomo.contrib.solver`` interface (no trace, no warm start)."""
    cfg = _common_config(options)
    t0 = time.perf_counter()
    try:
        with InterruptGuard():
            res = solver.solve(model, **cfg)
    except Exception as exc:  # noqa: BLE001 - a backend failure is a result
        return SolveOutcome("error", "error", solver=name, message=f"{type(exc).__name__}: {exc}", **base)
    wall = time.perf_counter() - t0
    nodes = None
    for key in ("mip_node_count", "NodeCount", "nodes"):
        if key in res.extra_info:
            nodes = res.extra_info[key]
    return _finish(res, base, name, solver.version(), wall, nodes=nodes)


_LEGACY_KEYS = {"cbc": ("sec", "ratioGap", "threads"), "glpk": ("tmlim", "mipgap", None),
                "cplex": ("timelimit", "mipgap", "threads")}


def solve_legacy(model, solver, name, options, base) -> SolveOutcome:
    """Solve with a classic ``pyomo.environ.SolverFactory`` solver (no trace, no warm
    start); the common options are mapped to its own keys (:data:`_LEGACY_KEYS`)."""
    from pyomo.opt import SolutionStatus, TerminationCondition

    opts = dict(options.solver_options)
    tl, gp, th = _LEGACY_KEYS.get(name, ("timelimit", "mipgap", "threads"))
    if options.time_limit is not None:
        opts[tl] = options.time_limit
    if options.rel_gap is not None:
        opts[gp] = options.rel_gap
    if options.threads is not None and th:
        opts[th] = options.threads
    t0 = time.perf_counter()
    try:
        with InterruptGuard():
            res = solver.solve(model, tee=bool(options.tee), load_solutions=False, options=opts)
    except Exception as exc:  # noqa: BLE001
        return SolveOutcome("error", "error", solver=name, message=f"{type(exc).__name__}: {exc}", **base)
    wall = time.perf_counter() - t0
    tc = res.solver.termination_condition
    if tc == TerminationCondition.userInterrupt:
        raise KeyboardInterrupt(f"{name} stopped on a user interrupt")
    has = len(res.solution) > 0 and res.solution(0).status in (SolutionStatus.optimal, SolutionStatus.feasible)
    if has:
        model.solutions.load_from(res)
    if tc == TerminationCondition.optimal and has:
        status, term = "optimal", "convergenceCriteriaSatisfied"
    elif has:
        status, term = "feasible", str(tc)
    elif tc == TerminationCondition.infeasible:
        status, term = "infeasible", "provenInfeasible"
    else:
        status, term = "no_solution", str(tc)
    obj = next(model.component_data_objects(pyo.Objective, active=True))
    inc = pyo.value(obj) if has else None
    bound = None
    try:
        bound = _num(res.problem.lower_bound if obj.sense == pyo.minimize else res.problem.upper_bound)
    except Exception:  # noqa: BLE001
        pass
    return SolveOutcome(status, term, inc, bound, _rel_gap(inc, bound), solver=name, solve_seconds=wall, **base)
