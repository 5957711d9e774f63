"""The MIP backends behind :func:`dnnplace.formulations.solvers.driver.solve_model`: one
``solve_<backend>(model, solver, ...) -> SolveOutcome`` per kind of Pyomo interface,
each handing the model to the solver, passing the warm start and the options, collecting
the progress trace and mapping the solver's answer to a
:class:`~dnnplace.formulations.solvers.outcome.SolveOutcome`.

Backends (``pyomo.contrib.solver`` interfaces, see ``docs/backends.md``, "Solver facts"):

- ``solve_highs``: the persistent HiGHS interface, in
  :mod:`dnnplace.formulations.solvers.highs_backend` (its stoppable run is its own concern);
  it shares this module's helpers (:func:`_common_config`, :func:`_hand_over`, :func:`_finish`).
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
build time, whether a warm start was given), and ``deadline``, the caller's
:class:`~dnnplace.runtime.deadline.Deadline` (the hand-off stops at it, the solver's time limit
is cut to what it leaves), and returns the outcome; a backend failure
is an ``error`` outcome, an interrupt a :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pyomo.environ as pyo

from dnnplace.formulations.solvers.interrupts import InterruptGuard, raise_if_interrupted
from dnnplace.formulations.solvers.options import SolverOptions, licence_hint
from dnnplace.formulations.solvers.outcome import SolveOutcome, Termination
from dnnplace.formulations.solvers.progress import Trace, stage
from dnnplace.runtime.deadline import Deadline, capped

__all__ = ["solve_gurobi", "solve_scip", "solve_contrib", "solve_legacy"]


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) or abs(x) >= 1e99 else x


def _status(termination: Termination, solution: str) -> str:
    if solution == "optimal":
        return "optimal"
    if solution in ("feasible",):
        return "optimal" if termination is Termination.OPTIMAL else "feasible"
    if termination is Termination.INFEASIBLE:
        return "infeasible"
    if termination in (Termination.ERROR, Termination.LICENCE, Termination.UNBOUNDED):
        return "error"
    return "no_solution"


def _rel_gap(inc: float | None, bound: float | None) -> float | None:
    if inc is None or bound is None:
        return None
    return abs(inc - bound) / max(abs(inc), 1e-10)


def _common_config(options: SolverOptions, deadline: Deadline, seed_option: str | None = None) -> dict[str, Any]:
    """The ``solve`` keywords every backend shares: the time limit is ``options.time_limit`` cut to
    what ``deadline`` leaves; ``seed_option``: the engine's own name of the random seed, set from
    ``options.seed`` unless the user's solver options give it."""
    cfg: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False,
                               tee=bool(options.tee))
    limit = capped(options.time_limit, deadline)  # the limit, or what the deadline leaves of it
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


def _finish(res: Any, base: dict, name: str, version: Any, solve_seconds: float, *,
            termination: Termination | None = None,
            **extra: Any) -> SolveOutcome:
    """``res`` as an outcome; ``termination`` overrides the one Pyomo read (a stop we asked
    for at the deadline is a time limit, not an interrupt)."""
    term = termination or Termination.of(res.termination_condition.name)
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


def _hand_over(model, solver, base, deadline: Deadline) -> None:
    """Give ``model`` to the persistent ``solver`` (timed as ``handoff_seconds``) and turn
    its automatic model updates off: the model is not changed after the hand-over. Pyomo's
    hand-off checks no deadline: it stops at ``deadline`` (:class:`TimeLimitReached`, caught by
    ``solve_model``)."""
    t0 = time.perf_counter()
    stage("hand-off to the solver")
    with deadline.guard("the model's hand-off to the solver"):
        solver.set_instance(model)
    base["handoff_seconds"] = time.perf_counter() - t0
    for key in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints",
                "update_vars", "update_parameters", "update_named_expressions", "update_objective"):
        if hasattr(solver.config.auto_updates, key):
            setattr(solver.config.auto_updates, key, False)


def solve_gurobi(model, solver, options, warm_start, base, deadline: Deadline) -> SolveOutcome:
    """Solve with ``gurobi_persistent``: warm start through the variable values, trace from
    the ``MIP``/``MIPSOL`` callbacks, a licence error as a one-line ``error`` outcome."""
    import gurobipy

    trace = Trace()
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
    cfg = _common_config(options, deadline, "Seed")
    cfg["warmstart_discrete_vars"] = bool(warm_start)
    t0 = time.perf_counter()
    try:
        with deadline.guard("the model's hand-off to the solver"):
            solver.set_instance(model)
        base["handoff_seconds"] = time.perf_counter() - t0
        solver.set_callback(cb)
        stage("solve (gurobi)")
        t0 = time.perf_counter()
        with InterruptGuard():
            res = solver.solve(model, **cfg)
    except gurobipy.GurobiError as exc:
        if getattr(exc, "errno", None) == 10010 or "size-limited" in str(exc):
            msg = (f"model has {base['n_vars']} variables / {base['n_cons']} constraints, over the restricted "
                   f"licence; {licence_hint()}")
        else:
            msg = f"Gurobi error {getattr(exc, 'errno', '')}: {exc}"
        return SolveOutcome("error", Termination.LICENCE if "licen" in msg else Termination.ERROR, solver="gurobi",
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


def solve_scip(model, solver, options, warm_start, base, deadline: Deadline) -> SolveOutcome:
    """Solve with ``scip_persistent`` (PySCIPOpt, which ships SCIP): warm start as a
    partial solution that SCIP completes, trace from ``BESTSOLFOUND`` /
    ``DUALBOUNDIMPROVED`` events; a Ctrl-C is caught by SCIP itself (``userinterrupt``,
    re-raised); the trace ends with the state at the end of the solve (a model closed in
    presolve fires no event). ``threads`` sets ``lp/threads`` only (SCIP's tree search is sequential);
    ``seed`` sets ``randomization/randomseedshift``. The gap is ``|inc - bound| / |inc|``
    like the other backends' (SCIP's own divides by the smaller of the two, so its
    ``limits/gap`` stops a little later than HiGHS or Gurobi at the same ``rel_gap``)."""
    import pyscipopt

    _hand_over(model, solver, base, deadline)
    scip = solver._solver_model  # the underlying pyscipopt.Model
    stage("solve (scip)")
    trace = Trace()
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
    cfg = _common_config(options, deadline, "randomization/randomseedshift")
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


def solve_contrib(model, solver, name, options, base, deadline: Deadline) -> SolveOutcome:
    """Solve with another ``pyomo.contrib.solver`` interface (no trace, no warm start)."""
    cfg = _common_config(options, deadline)
    t0 = time.perf_counter()
    try:
        with InterruptGuard():
            res = solver.solve(model, **cfg)
    except Exception as exc:  # noqa: BLE001 - a backend failure is a result
        return SolveOutcome("error", Termination.ERROR, solver=name, message=f"{type(exc).__name__}: {exc}", **base)
    wall = time.perf_counter() - t0
    nodes = None
    for key in ("mip_node_count", "NodeCount", "nodes"):
        if key in res.extra_info:
            nodes = res.extra_info[key]
    return _finish(res, base, name, solver.version(), wall, nodes=nodes)


_LEGACY_KEYS = {"cbc": ("sec", "ratioGap", "threads"), "glpk": ("tmlim", "mipgap", None),
                "cplex": ("timelimit", "mipgap", "threads")}


def solve_legacy(model, solver, name, options, base, deadline: Deadline) -> SolveOutcome:
    """Solve with a classic ``pyomo.environ.SolverFactory`` solver (no trace, no warm
    start); the common options are mapped to its own keys (:data:`_LEGACY_KEYS`)."""
    from pyomo.opt import SolutionStatus, TerminationCondition

    opts = dict(options.solver_options)
    tl, gp, th = _LEGACY_KEYS.get(name, ("timelimit", "mipgap", "threads"))
    limit = capped(options.time_limit, deadline)
    if limit is not None:
        opts[tl] = limit
    if options.rel_gap is not None:
        opts[gp] = options.rel_gap
    if options.threads is not None and th:
        opts[th] = options.threads
    t0 = time.perf_counter()
    try:
        with InterruptGuard():
            res = solver.solve(model, tee=bool(options.tee), load_solutions=False, options=opts)
    except Exception as exc:  # noqa: BLE001
        return SolveOutcome("error", Termination.ERROR, solver=name, message=f"{type(exc).__name__}: {exc}", **base)
    wall = time.perf_counter() - t0
    tc = res.solver.termination_condition
    if tc == TerminationCondition.userInterrupt:
        raise KeyboardInterrupt(f"{name} stopped on a user interrupt")
    has = len(res.solution) > 0 and res.solution(0).status in (SolutionStatus.optimal, SolutionStatus.feasible)
    if has:
        model.solutions.load_from(res)
    if tc == TerminationCondition.optimal and has:
        status, term = "optimal", Termination.OPTIMAL
    elif has:
        status, term = "feasible", Termination.of(str(tc))
    elif tc == TerminationCondition.infeasible:
        status, term = "infeasible", Termination.INFEASIBLE
    else:
        status, term = "no_solution", Termination.of(str(tc))
    obj = next(model.component_data_objects(pyo.Objective, active=True))
    inc = pyo.value(obj) if has else None
    bound = None
    try:
        bound = _num(res.problem.lower_bound if obj.sense == pyo.minimize else res.problem.upper_bound)
    except Exception:  # noqa: BLE001
        pass
    return SolveOutcome(status, term, inc, bound, _rel_gap(inc, bound), solver=name, solve_seconds=wall, **base)
