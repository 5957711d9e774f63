"""The one solver driver for every Pyomo model of the project.

:func:`solve_model` hands a built ``ConcreteModel`` to a MIP backend chosen by name and
returns a :class:`SolveOutcome` that keeps *why the solver stopped* (``termination``)
apart from *what we have* (``status``: ``optimal`` / ``feasible`` / ``infeasible`` /
``no_solution`` / ``error``, the vocabulary of :data:`dnnplace.results.STATUSES`), and
the incumbent apart from the best bound. A time limit with an incumbent is a result,
never an exception.

Backends (``pyomo.contrib.solver`` interfaces, see ``docs/backends.md``, "Solver facts"; each in
:mod:`dnnplace.formulations.solvers.backends`, HiGHS in
:mod:`dnnplace.formulations.solvers.highs_backend`): ``highs`` (default, persistent HiGHS with warm
start and progress trace), ``gurobi`` (``gurobi_persistent``, the same; the size-limited
pip licence becomes a one-line message), ``scip`` (``scip_persistent`` on PySCIPOpt, the
extra ``dnnplace[scip]``: the same), and any other name that
``pyomo.contrib.solver`` knows (``ipopt`` ...) or, failing that, the
classic ``pyomo.environ.SolverFactory`` (``cbc``, ``glpk``, ``cplex`` ...) when
installed; these get no trace and no warm start.

Options use Pyomo's vocabulary (:class:`dnnplace.formulations.solvers.options.SolverOptions`):
``time_limit``, ``rel_gap``, ``threads``, ``seed``, ``tee``, ``solver_options``.

Interrupts: Ctrl-C during a solve raises :class:`KeyboardInterrupt` from
:func:`solve_model`, never an ``error`` or ``feasible`` outcome, whatever the backend
does with the signal (our own SIGINT handling around the solve:
:mod:`dnnplace.formulations.solvers.interrupts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import pyomo.environ as pyo

from dnnplace.formulations.solvers.backends import solve_contrib, solve_gurobi, solve_legacy, solve_scip
from dnnplace.formulations.solvers.highs_backend import solve_highs
from dnnplace.formulations.solvers.options import SOLVER_ALIASES as _ALIASES
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.outcome import SolveOutcome, Termination
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached

__all__ = ["SolveOutcome", "solve_model", "model_size", "available_solvers"]


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


def _make(name: str) -> tuple[Any, bool]:
    """``(solver, is_contrib)`` for a backend name."""
    from pyomo.contrib.solver.common.factory import SolverFactory as ContribFactory

    key = _ALIASES.get(name.lower(), name.lower())
    if key in ContribFactory:
        return ContribFactory(key), True
    return pyo.SolverFactory(name), False


def solve_model(model: pyo.ConcreteModel, options: SolverOptions | None = None, *,
                warm_start: Mapping[Any, float] | None = None, build_seconds: float = 0.0,
                deadline: Deadline | None = None) -> SolveOutcome:
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
    deadline : Deadline, optional
        When the caller's whole method must end: the hand-off to the solver stops at it
        and the solver's time limit is cut to what is left after the hand-off. Past it
        (before or during the hand-off) the outcome is ``no_solution`` with termination
        ``time_limit`` and nothing solved.
    """
    options = options or SolverOptions()
    name = options.solver.lower()
    try:
        with deadline.guard("counting the model's size") if deadline is not None else nullcontext():
            n_vars, n_cons, n_bin = model_size(model)
    except TimeLimitReached as exc:
        return SolveOutcome("no_solution", Termination.TIME_LIMIT, solver=name, message=str(exc),
                            build_seconds=build_seconds, warm_start_given=bool(warm_start))
    base = dict(build_seconds=build_seconds, n_vars=n_vars, n_cons=n_cons, n_binaries=n_bin,
                warm_start_given=bool(warm_start))
    try:
        solver, contrib = _make(name)
    except Exception as exc:  # noqa: BLE001 - report any factory failure as a result
        return SolveOutcome("error", Termination.ERROR, solver=name, message=f"cannot create solver {name!r}: {exc}",
                            **base)
    try:
        avail = solver.available()
    except Exception as exc:  # noqa: BLE001
        avail = False
        base["message"] = str(exc)
    if not avail:
        return SolveOutcome("error", Termination.ERROR, solver=name, message=base.pop("message", None) or
                            f"solver {name!r} is not available here; use solver 'highs'", **base)
    base.pop("message", None)
    try:
        return _dispatch(model, solver, contrib, name, options, warm_start, base, deadline or NO_DEADLINE)
    except TimeLimitReached as exc:
        return SolveOutcome("no_solution", Termination.TIME_LIMIT, solver=name, message=str(exc), **base)


def _dispatch(model, solver, contrib: bool, name: str, options: SolverOptions, warm_start, base,
              deadline: Deadline) -> SolveOutcome:
    if contrib and name == "highs":
        return solve_highs(model, solver, options, warm_start, base, deadline)
    if contrib and _ALIASES.get(name, name).startswith("gurobi"):
        return solve_gurobi(model, solver, options, warm_start, base, deadline)
    if contrib and _ALIASES.get(name, name) == "scip_persistent":
        return solve_scip(model, solver, options, warm_start, base, deadline)
    if contrib:
        return solve_contrib(model, solver, name, options, base, deadline)
    return solve_legacy(model, solver, name, options, base, deadline)
