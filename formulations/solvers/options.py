"""Backend options in Pyomo's vocabulary (``pyomo.contrib.solver`` config), and their checks.

A light module of its own so that the command line and the method list can carry solver
options without importing Pyomo; :mod:`dnnplace.formulations.solvers.driver` consumes them.

Two checks run at the edges (``dnnplace solve`` flags, experiment configs), before any
work starts; both raise :class:`~dnnplace.graphs.errors.InputError` naming the setting:

- :func:`check_values`: ``time_limit`` a finite number of seconds > 0 (``0`` is bad
  input: leave the limit out for none), ``rel_gap`` >= 0, ``threads`` a whole number
  >= 1 (leave it out for the backend's default), ``seed`` a whole number >= 0, ``tee``
  true/false, ``solver_options`` a table with string keys.
- :func:`check_backend`: the backend is usable here (``highs``; ``gurobi`` when
  gurobipy is installed; any other Pyomo solver when Pyomo finds it), and each raw
  ``solver_options`` key (and value) is one the backend knows: HiGHS through
  ``highspy.Highs.getOptionType``/``setOptionValue``, Gurobi through ``GRB.Param`` and
  ``Env.setParam`` on an empty environment, SCIP through ``Model.getParams`` and
  ``setParam``. Other backends publish no option list: their
  keys are passed on unchecked, and the check says so (a warning it returns).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["SolverOptions", "SolverLicenceError", "CLI_FLAGS", "GUROBI_SIZE_LIMITS", "SOLVER_ALIASES",
           "check_values", "check_backend", "backend_status", "licence_message"]

CLI_FLAGS = {"solver": "--solver", "time_limit": "--time-limit", "rel_gap": "--mip-gap", "threads": "--threads",
             "seed": "--seed", "tee": "--tee", "solver_options": "--solver-option"}
"""The ``dnnplace solve`` flag of each :class:`SolverOptions` field."""

GUROBI_SIZE_LIMITS = (2000, 2000)
"""(variables, linear constraints) that Gurobi's size-limited pip licence accepts."""

SOLVER_ALIASES = {"highs": "highs", "gurobi": "gurobi_persistent", "gurobi_persistent": "gurobi_persistent",
                  "gurobi_direct": "gurobi_persistent", "scip": "scip_persistent", "scip_direct": "scip_persistent",
                  "scip_persistent": "scip_persistent"}
"""Backend names -> ``pyomo.contrib.solver`` factory keys (the driver's choice)."""

_GUROBI_NAMES = ("gurobi", "gurobi_persistent", "gurobi_direct")


@dataclass(frozen=True)
class SolverOptions:
    """``solver`` (``highs`` default, ``gurobi``, or any Pyomo MIP solver name),
    ``time_limit`` (s), ``rel_gap``, ``threads``, ``seed``, ``tee`` and raw
    ``solver_options`` handed to the backend."""

    solver: str = "highs"
    time_limit: float | None = None
    rel_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    tee: bool = False
    solver_options: dict[str, Any] = field(default_factory=dict)


class SolverLicenceError(InputError):
    """The model is larger than the installed solver licence allows (Gurobi's
    size-limited pip licence): bad input for this backend, not a failed run."""


def licence_message(message: str | None, solver: str = "gurobi", *, flags: bool = True) -> str:
    """One line for a model over the size-limited licence: the model's size (from the
    driver's ``message``) and the licence's limits, headed ``--solver gurobi:`` (or
    ``solver 'gurobi':`` with ``flags=False``)."""
    nv, nc = GUROBI_SIZE_LIMITS
    limit = f"Gurobi's size-limited licence allows at most {nv} variables and {nc} constraints"
    msg = (message or "the model is over the restricted licence").strip()
    if "over the restricted licence" in msg:
        msg = msg.replace("over the restricted licence", f"over the restricted licence ({limit})")
    else:
        msg = f"{msg} ({limit})"
    return f"--solver {solver}: {msg}" if flags else f"solver {solver!r}: {msg}"


# ---------------------------------------------------------------------------- values
def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _problem(key: str, v: Any) -> str | None:
    """Why ``v`` is not a valid value of field ``key`` (``None`` if it is)."""
    if key == "solver":
        return None if isinstance(v, str) and v.strip() else "must be a solver name such as 'highs' or 'gurobi'"
    if key == "tee":
        return None if isinstance(v, bool) else "must be true or false"
    if key == "solver_options":
        if isinstance(v, Mapping) and all(isinstance(k, str) and k for k in v):
            return None
        return "must be a table of option = value"
    if v is None:
        return None
    if key == "time_limit":
        if not _number(v) or not math.isfinite(v) or v <= 0:
            return "must be a positive number of seconds (leave it out for no limit)"
    elif key == "rel_gap":
        if not _number(v) or not math.isfinite(v) or v < 0 or v >= 1:  # a gap of 1 (100 %) stops at any incumbent
            return "must be a relative gap >= 0 and < 1, e.g. 0.01 for 1%"
    elif key == "threads":
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return "must be a whole number of threads >= 1 (leave it out for the solver's default)"
    elif key == "seed":
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return "must be a whole number >= 0"
    return None


def _show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


def _head(key: str, value: Any, flags: bool) -> str:
    """How a setting is named in a message: ``--time-limit -5`` or ``time_limit = -5``."""
    if flags:
        return f"{CLI_FLAGS.get(key, key)} {value if isinstance(value, str) else _show(value)}"
    return f"{key} = {_show(value)}"


def check_values(values: Mapping[str, Any] | SolverOptions, *, flags: bool = False) -> None:
    """Raise :class:`InputError` on the first ill-typed or out-of-range setting.

    ``values`` maps :class:`SolverOptions` field names to values (or is a
    ``SolverOptions``); ``flags=True`` names them as ``dnnplace solve`` flags
    (``--time-limit -5: ...``), else as config keys (``time_limit = -5: ...``).

    >>> check_values({"time_limit": 30, "rel_gap": 0.01, "threads": 1})
    >>> check_values({"time_limit": -5})
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: time_limit = -5: must be a positive number of seconds (leave it out for no limit)
    """
    if isinstance(values, SolverOptions):
        values = {k: getattr(values, k) for k in CLI_FLAGS}
    for key, value in values.items():
        why = _problem(key, value)
        if why:
            raise InputError(f"{_head(key, value, flags)}: {why}")


# ---------------------------------------------------------------------------- backends
@contextlib.contextmanager
def _quiet_fds():
    """Silence what a native library prints on fds 1 and 2 (HiGHS's banner)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = []
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(devnull, fd)
            except OSError:
                pass
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def _suggest(name: str, known: list[str], *, lower: bool = False) -> str:
    pool = {k.lower(): k for k in known} if lower else {k: k for k in known}
    hits = difflib.get_close_matches(name.lower() if lower else name, list(pool), n=1, cutoff=0.6)
    return f" (did you mean {pool[hits[0]]!r}?)" if hits else ""


def _usable() -> list[str]:
    """Backends that are certainly usable here, cheaply (no Pyomo import)."""
    import importlib.util

    return [n for n, pkg in (("highs", "highspy"), ("gurobi", "gurobipy"), ("scip", "pyscipopt"))
            if importlib.util.find_spec(pkg)]


_HIGHS_DOCS = "https://ergo-code.github.io/HiGHS/stable/options/definitions/"


def _highs_options(h: Any) -> dict[str, str]:
    """HiGHS's documented options (``writeOptions``): name -> ``type ..., range ...``."""
    import re
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".txt")
    os.close(fd)
    try:
        with _quiet_fds():
            h.writeOptions(path)
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return {}
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    out = {}
    for info, name in re.findall(r"^# \[(.*?)\]\s*\n([A-Za-z_0-9]+)\s*=", text, re.M):
        out[name] = ", ".join(b.strip() for b in info.split(", ") if not b.strip().startswith("advanced"))
    return out


def _check_highs(opts: Mapping[str, Any], head: Callable[[str, Any], str]) -> None:
    import importlib.util

    if importlib.util.find_spec("highspy") is None:
        raise InputError("solver 'highs' needs highspy (pip install highspy)")
    if not opts:
        return  # nothing to ask HiGHS: do not import it
    import highspy

    with _quiet_fds():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    for key, value in opts.items():
        with _quiet_fds():
            status, kind = h.getOptionType(key)
        if status != highspy.HighsStatus.kOk:
            hint = _suggest(key, list(_highs_options(h))) or f" (the list: {_HIGHS_DOCS})"
            raise InputError(f"{head(key, value)}: not a HiGHS option{hint}")
        v = float(value) if kind == highspy.HighsOptionType.kDouble and _number(value) else value
        with _quiet_fds():
            ok = _number(v) or isinstance(v, (str, bool))
            ok = ok and h.setOptionValue(key, v) == highspy.HighsStatus.kOk
        if not ok:
            info = _highs_options(h).get(key) or f"type: {str(kind.name).removeprefix('k').lower()}"
            raise InputError(f"{head(key, value)}: HiGHS rejects this value ({info})")


def _check_gurobi(opts: Mapping[str, Any], head: Callable[[str, Any], str]) -> None:
    import importlib.util

    if importlib.util.find_spec("gurobipy") is None:
        raise InputError("solver 'gurobi' is not installed here (pip install gurobipy, or use --solver highs)")
    if not opts:
        return
    import gurobipy

    known = [n for n in dir(gurobipy.GRB.Param) if not n.startswith("_")]
    lowered = {n.lower() for n in known}
    env = None
    try:
        for key, value in opts.items():
            if key.lower() not in lowered:
                hint = _suggest(key, known, lower=True) or " (the list: gurobipy.GRB.Param)"
                raise InputError(f"{head(key, value)}: not a Gurobi parameter{hint}")
            if env is None:
                env = gurobipy.Env(empty=True)  # not started: no licence check, no banner
                env.setParam("OutputFlag", 0)
            try:
                env.setParam(key, value)
            except (gurobipy.GurobiError, TypeError, ValueError) as exc:
                raise InputError(f"{head(key, value)}: Gurobi rejects this value ({exc})") from None
    finally:
        if env is not None:
            with contextlib.suppress(Exception):
                env.dispose()


_SCIP_NAMES = ("scip", "scip_direct", "scip_persistent")


def _check_scip(opts: Mapping[str, Any], head: Callable[[str, Any], str]) -> None:
    import importlib.util

    if importlib.util.find_spec("pyscipopt") is None:
        raise InputError("solver 'scip' needs PySCIPOpt: pip install 'dnnplace[scip]' (or use --solver highs)")
    if not opts:
        return
    import pyscipopt

    with _quiet_fds():
        m = pyscipopt.Model()
        m.hideOutput()
        known = m.getParams()
    for key, value in opts.items():
        if key not in known:
            hint = _suggest(key, list(known)) or " (the list: pyscipopt.Model().getParams())"
            raise InputError(f"{head(key, value)}: not a SCIP parameter{hint}")
        try:
            with _quiet_fds():
                m.setParam(key, value)
        except Exception as exc:  # noqa: BLE001 - pyscipopt raises ValueError, TypeError, KeyError ...
            raise InputError(f"{head(key, value)}: SCIP rejects this value ({exc})") from None


def backend_status(name: str) -> tuple[bool, bool]:
    """``(known, available)``: does Pyomo know a backend called ``name`` (its
    ``pyomo.contrib.solver`` factory or, failing that, the classic ``SolverFactory``, the
    driver's order), and can it run here (installed, found, licensed)? Nothing printed."""
    import logging

    logging.disable(logging.WARNING)  # Pyomo logs a warning (and a traceback) per solver it cannot find
    try:
        with _quiet_fds():
            return _backend_status(name)
    finally:
        logging.disable(logging.NOTSET)


def _backend_status(name: str) -> tuple[bool, bool]:
    try:
        import pyomo.environ as pyo
        from pyomo.contrib.solver.common.factory import SolverFactory as ContribFactory
        from pyomo.opt.base.solvers import UnknownSolver
    except ImportError:  # pragma: no cover - pyomo is a dependency
        return False, False
    key = SOLVER_ALIASES.get(name.lower(), name.lower())
    try:
        if key in ContribFactory:
            return True, bool(ContribFactory(key).available())
        solver = pyo.SolverFactory(name)
        if isinstance(solver, UnknownSolver):
            return False, False
        return True, bool(solver.available(exception_flag=False))
    except Exception:  # noqa: BLE001 - probing a backend
        return True, False


def check_backend(options: SolverOptions, *, flags: bool = False) -> list[str]:
    """Raise :class:`InputError` if ``options.solver`` cannot run here or one of its raw
    ``solver_options`` is unknown to it (with a close match) or has a value it rejects;
    return warnings (e.g. that a backend's options could not be checked).

    Imports the backend's Python package (and Pyomo only for backends other than
    HiGHS and Gurobi); nothing is solved and nothing is printed.
    """
    name = options.solver.strip().lower()
    sopts = dict(options.solver_options)

    def head(key: str, value: Any) -> str:
        if flags:
            return f"--solver-option {key}={value if isinstance(value, str) else _show(value)}"
        return f"solver_options.{key} = {_show(value)}"

    if name == "highs":
        _check_highs(sopts, head)
        return []
    if name in _GUROBI_NAMES:
        _check_gurobi(sopts, head)
        return []
    if name in _SCIP_NAMES:
        _check_scip(sopts, head)
        return []
    solver_head = f"--solver {options.solver}" if flags else f"solver = {_show(options.solver)}"
    usable = _usable()
    known, available = backend_status(name)
    if not known:
        raise InputError(f"{solver_head}: unknown solver{_suggest(name, usable + ['scip', 'cbc', 'glpk'])}; "
                         f"usable here: {', '.join(usable)}")
    if not available:
        raise InputError(f"{solver_head}: not available here (not installed, not on PATH or not licensed); "
                         f"usable here: {', '.join(usable)}")
    if sopts:
        return [f"{'--solver-option' if flags else 'solver_options'} keys are not checked for solver "
                f"{options.solver!r} (it publishes no option list): {', '.join(sorted(sopts))}"]
    return []
