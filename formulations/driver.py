"""The one solver driver for every Pyomo model of the project.

:func:`solve_model` hands a built ``ConcreteModel`` to a MIP backend chosen by name and
returns a :class:`SolveOutcome` that keeps *why the solver stopped* (``termination``)
apart from *what we have* (``status``: ``optimal`` / ``feasible`` / ``infeasible`` /
``no_solution`` / ``error``, the vocabulary of :data:`dnnplace.results.STATUSES`), and
the incumbent apart from the best bound. A time limit with an incumbent is a result,
never an exception.

Backends (``pyomo.contrib.solver`` interfaces, see ``/work/shared/SOLVERS.md``):

- ``highs`` (default): the persistent HiGHS interface; a warm start is passed with
  ``setSolution`` on the underlying ``highspy.Highs`` object through the interface's
  variable-to-column map, and the progress trace comes from the
  ``cbMipImprovingSolution`` / ``cbMipLogging`` callbacks. The gap is HiGHS's own
  ``mip_gap``.
- ``gurobi``: ``gurobi_persistent``; warm start through ``warmstart_discrete_vars``
  (variable values), trace from the ``MIP``/``MIPSOL`` callbacks. The size-limited pip
  licence (error 10010) becomes a one-line message, not a traceback.
- any other name that ``pyomo.contrib.solver`` knows (``scip_direct``, ``ipopt`` ...) or,
  failing that, the classic ``pyomo.environ.SolverFactory`` (``cbc``, ``glpk``,
  ``cplex`` ...) when installed; these get no trace and no warm start.

Options use Pyomo's vocabulary (:class:`dnnplace.formulations.solver_options.SolverOptions`):
``time_limit``, ``rel_gap``, ``threads``, ``seed``, ``tee``, ``solver_options``.

Interrupts: Ctrl-C during a solve raises :class:`KeyboardInterrupt` from
:func:`solve_model`, never an ``error`` or ``feasible`` outcome, whatever the backend
does with the signal. HiGHS (highspy >= 1.16) runs Python callbacks inside its solve, so
Python's default handler raised the ``KeyboardInterrupt`` inside a callback, where HiGHS
caught it and returned an error; Gurobi installs its own SIGINT handler and returns
``interrupted`` with its incumbent. So, in the main thread, the solve runs under our own
SIGINT handler (:class:`_InterruptGuard`), which only records the request: HiGHS is
stopped through its interrupt callbacks, and when the solver returns the interrupt is
re-raised. An ``interrupted`` termination (Gurobi's own handler, HiGHS ``kInterrupt``)
is re-raised too. A second Ctrl-C raises at once.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo

from dnnplace.formulations.solver_options import SOLVER_ALIASES as _ALIASES
from dnnplace.formulations.solver_options import SolverOptions

__all__ = ["SolveOutcome", "solve_model", "model_size", "available_solvers"]


@dataclass
class SolveOutcome:
    """What a solve produced.

    ``status`` is what we have (``optimal`` / ``feasible`` / ``infeasible`` /
    ``no_solution`` / ``error``); ``termination`` why the solver stopped (the name of a
    ``pyomo.contrib.solver`` ``TerminationCondition``). ``incumbent`` and ``bound`` are
    in the model's objective sense; ``gap`` is the solver's relative MIP gap where it
    reports one (HiGHS ``mip_gap``, Gurobi ``MIPGap``), else ``|inc - bound| / |inc|``.
    ``trace`` holds ``(seconds, incumbent, bound)`` triples; the variables of the model
    hold the incumbent's values when ``status`` is optimal or feasible.
    """

    status: str
    termination: str
    incumbent: float | None = None
    bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    handoff_seconds: float = 0.0
    solver: str = ""
    solver_version: str | None = None
    nodes: int | None = None
    n_vars: int = 0
    n_cons: int = 0
    n_binaries: int = 0
    message: str | None = None
    warm_start_given: bool = False
    trace: list[tuple[float, float | None, float | None]] = field(default_factory=list)

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible")


def model_size(model: pyo.ConcreteModel) -> tuple[int, int, int]:
    """``(variables, constraints, binaries)`` of an active model."""
    n_vars = n_bin = 0
    for v in model.component_data_objects(pyo.Var, descend_into=True):
        n_vars += 1
        if v.is_binary():
            n_bin += 1
    n_cons = sum(1 for _ in model.component_data_objects(pyo.Constraint, active=True, descend_into=True))
    return n_vars, n_cons, n_bin


def available_solvers() -> list[str]:
    """Backend names usable here (``highs`` always; others when installed/licensed)."""
    out = []
    for name in ("highs", "gurobi", "scip", "cbc", "glpk"):
        try:
            if _make(name)[0].available():
                out.append(name)
        except Exception:  # noqa: BLE001 - probing optional backends
            pass
    return out


class _InterruptGuard:
    """Our own SIGINT handler around a solve (main thread only): a Ctrl-C is recorded in
    :attr:`requested` instead of raising inside the solver (where HiGHS catches it and
    reports an error); on exit the interrupt is raised, as a :class:`KeyboardInterrupt`
    (or handed to the handler that was installed before). A second Ctrl-C raises at once."""

    def __init__(self) -> None:
        self.requested = False
        self._prev: Any = None
        self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> _InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGINT)
            if callable(prev):  # not SIG_IGN / SIG_DFL / a handler set from C
                signal.signal(signal.SIGINT, self._handler)
                self._prev, self._installed = prev, True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._installed:
            signal.signal(signal.SIGINT, self._prev)
            self._installed = False
        if self.requested and not isinstance(exc, KeyboardInterrupt):
            if self._prev is not None and self._prev is not signal.default_int_handler:
                self._prev(signal.SIGINT, None)  # a caller's own handler decides
            else:
                raise KeyboardInterrupt("interrupted during the solve") from exc
        return False


def _raise_if_interrupted(termination: str) -> None:
    """An interrupt the solver caught itself (Gurobi's SIGINT handler) is ours to raise."""
    if termination == "interrupted":
        raise KeyboardInterrupt(f"the solver stopped on an interrupt ({termination})")


class _DropInterruptWarning:
    """Logging filter: Pyomo's HiGHS interface warns of an 'unhandled' kInterrupt status,
    which is our own interrupt (it is raised as KeyboardInterrupt right after)."""

    @staticmethod
    def filter(record: Any) -> bool:
        return "kInterrupt" not in record.getMessage()


@contextlib.contextmanager
def _no_interrupt_warning():
    log = logging.getLogger("pyomo.contrib.solver.solvers.highs")
    log.addFilter(_DropInterruptWarning)
    try:
        yield
    finally:
        log.removeFilter(_DropInterruptWarning)


def _make(name: str) -> tuple[Any, bool]:
    """``(solver, is_contrib)`` for a backend name."""
    from pyomo.contrib.solver.common.factory import SolverFactory as ContribFactory

    key = _ALIASES.get(name.lower(), name.lower())
    if key in ContribFactory:
        return ContribFactory(key), True
    return pyo.SolverFactory(name), False


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


def solve_model(model: pyo.ConcreteModel, options: SolverOptions | None = None, *,
                warm_start: Mapping[Any, float] | None = None, build_seconds: float = 0.0) -> SolveOutcome:
    """Solve a built model and load its incumbent (if any) into the model's variables.

    Parameters
    ----------
    model : ConcreteModel
        A model with exactly one active objective.
    options : SolverOptions
        Backend name and options; default HiGHS without limits.
    warm_start : mapping VarData -> value, optional
        A start for (a subset of) the variables; the formulation's
        ``warm_start_values`` completes every variable so the start is feasible.
    build_seconds : float
        Time the caller spent building the model (copied into the outcome).
    """
    options = options or SolverOptions()
    n_vars, n_cons, n_bin = model_size(model)
    name = options.solver.lower()
    base = dict(build_seconds=build_seconds, n_vars=n_vars, n_cons=n_cons, n_binaries=n_bin,
                warm_start_given=bool(warm_start))
    try:
        solver, contrib = _make(name)
    except Exception as exc:  # noqa: BLE001 - report any factory failure as a result
        return SolveOutcome("error", "error", solver=name, message=f"cannot create solver {name!r}: {exc}", **base)
    try:
        avail = solver.available()
    except Exception as exc:  # noqa: BLE001
        avail = False
        base["message"] = str(exc)
    if not avail:
        return SolveOutcome("error", "error", solver=name, message=base.pop("message", None) or
                            f"solver {name!r} is not available here; use --solver highs", **base)
    base.pop("message", None)
    if contrib and name == "highs":
        return _solve_highs(model, solver, options, warm_start, base)
    if contrib and _ALIASES.get(name, name).startswith("gurobi"):
        return _solve_gurobi(model, solver, options, warm_start, base)
    if contrib:
        return _solve_contrib(model, solver, name, options, base)
    return _solve_legacy(model, solver, name, options, base)


def _common_config(options: SolverOptions) -> dict[str, Any]:
    cfg: dict[str, Any] = dict(load_solutions=False, raise_exception_on_nonoptimal_result=False,
                               tee=bool(options.tee))
    if options.time_limit is not None:
        cfg["time_limit"] = float(options.time_limit)
    if options.rel_gap is not None:
        cfg["rel_gap"] = float(options.rel_gap)
    if options.threads is not None:
        cfg["threads"] = int(options.threads)
    return cfg


def _finish(res: Any, base: dict, name: str, version: Any, solve_seconds: float, **extra: Any) -> SolveOutcome:
    term = res.termination_condition.name
    _raise_if_interrupted(term)
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
    count than an earlier one fails quietly (SOLVERS.md), so reset it on a change."""
    import highspy

    if _HIGHS_THREADS and _HIGHS_THREADS[-1] != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _HIGHS_THREADS[:] = [threads]


def _solve_highs(model, solver, options, warm_start, base) -> SolveOutcome:
    t0 = time.perf_counter()
    solver.set_instance(model)
    base["handoff_seconds"] = time.perf_counter() - t0
    for key in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints",
                "update_vars", "update_parameters", "update_named_expressions", "update_objective"):
        if hasattr(solver.config.auto_updates, key):
            setattr(solver.config.auto_updates, key, False)
    h = solver._solver_model  # the underlying highspy.Highs object
    sense = 1.0
    trace: list[tuple[float, float | None, float | None]] = []

    def on_event(e: Any) -> None:
        d = e.data_out
        inc, bnd = _num(d.mip_primal_bound), _num(d.mip_dual_bound)
        if inc is None and bnd is None:
            return
        if trace and trace[-1][1] == inc and trace[-1][2] == bnd:
            return
        trace.append((float(d.running_time), None if inc is None else sense * inc,
                      None if bnd is None else sense * bnd))

    h.cbMipImprovingSolution.subscribe(on_event)
    h.cbMipLogging.subscribe(on_event)
    if warm_start:
        cmap = solver._pyomo_var_to_solver_var_map
        items = [(cmap[id(v)], float(val)) for v, val in warm_start.items() if id(v) in cmap and val is not None]
        idx = np.array([i for i, _ in items], dtype=np.int32)
        vals = np.array([x for _, x in items], dtype=np.float64)
        h.setSolution(len(items), idx, vals)
    cfg = _common_config(options)
    sopts = dict(options.solver_options)
    if options.seed is not None:
        sopts.setdefault("random_seed", int(options.seed))
    if sopts:
        cfg["solver_options"] = sopts
    _highs_threads(options.threads)
    guard = _InterruptGuard()

    def on_interrupt_poll(e: Any) -> None:  # HiGHS asks whether to stop; yes after a Ctrl-C
        if guard.requested:
            e.interrupt()

    for poll in (h.cbMipInterrupt, h.cbSimplexInterrupt, h.cbIpmInterrupt):
        poll.subscribe(on_interrupt_poll)
    t0 = time.perf_counter()
    with guard, _no_interrupt_warning():
        res = solver.solve(model, **cfg)
    wall = time.perf_counter() - t0
    import highspy

    if h.getModelStatus() == getattr(highspy.HighsModelStatus, "kInterrupt", None):
        raise KeyboardInterrupt("HiGHS stopped on a user interrupt")
    info = h.getInfo()
    gap = _num(info.mip_gap)
    nodes = int(info.mip_node_count) if info.mip_node_count >= 0 else None
    out = _finish(res, base, "highs", solver.version(), wall, nodes=nodes, trace=trace, gap=gap)
    return out


def _solve_gurobi(model, solver, options, warm_start, base) -> SolveOutcome:
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
    cfg = _common_config(options)
    cfg["warmstart_discrete_vars"] = bool(warm_start)
    sopts = dict(options.solver_options)
    if options.seed is not None:
        sopts.setdefault("Seed", int(options.seed))
    if sopts:
        cfg["solver_options"] = sopts
    t0 = time.perf_counter()
    try:
        solver.set_instance(model)
        base["handoff_seconds"] = time.perf_counter() - t0
        solver.set_callback(cb)
        t0 = time.perf_counter()
        with _InterruptGuard():
            res = solver.solve(model, **cfg)
    except gurobipy.GurobiError as exc:
        if getattr(exc, "errno", None) == 10010 or "size-limited" in str(exc):
            msg = (f"model has {base['n_vars']} variables / {base['n_cons']} constraints, over the restricted "
                   "licence; use --solver highs or a full licence")
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


def _ver(solver: Any) -> str | None:
    try:
        v = solver.version()
        return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        return None


def _solve_contrib(model, solver, name, options, base) -> SolveOutcome:
    cfg = _common_config(options)
    if options.solver_options:
        cfg["solver_options"] = dict(options.solver_options)
    t0 = time.perf_counter()
    try:
        with _InterruptGuard():
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


def _solve_legacy(model, solver, name, options, base) -> SolveOutcome:
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
        with _InterruptGuard():
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
