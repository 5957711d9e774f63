"""Backend options in Pyomo's vocabulary (``pyomo.contrib.solver`` config), and their checks.

A light module of its own so that the command line and the method list can carry solver
options without importing Pyomo; :mod:`dnnplace.formulations.solvers.driver` consumes them.

Two checks run at the edges (``dnnplace solve`` flags, experiment configs), before any
work starts; both raise :class:`SettingError` (an :class:`~dnnplace.graphs.errors.InputError`)
naming the setting by its field name, as a config writes it (``time_limit = -5: ...``);
the command line re-words it with its flag (:mod:`dnnplace.commands`), a config with its
table. This module knows no flag names:

- :func:`check_values`: ``time_limit`` a finite number of seconds > 0 (``0`` is bad
  input: leave the limit out for none), ``rel_gap`` >= 0, ``threads`` a whole number
  >= 1 (leave it out for the backend's default), ``seed`` a whole number in 0 ..
  :data:`MAX_SEED`, ``tee``
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

__all__ = ["SolverOptions", "SolverLicenceError", "SettingError", "SettingNote", "GUROBI_SIZE_LIMITS",
           "SOLVER_ALIASES", "check_values", "check_backend", "backend_status", "licence_message", "licence_hint",
           "setting_name", "show_value", "MAX_SEED", "SEED_RANGE"]

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
    ``time_limit`` (s), ``rel_gap``, ``threads``, ``seed``, ``tee``, raw
    ``solver_options`` handed to the backend, and ``memory_limit`` (bytes, the whole run's:
    :mod:`dnnplace.runtime.memory`; ``None``: the default share of the machine's memory).

    The field defaults are the only defaults of these settings (``None``: no limit, the
    backend's own choice). A method that needs a limit to stop declares it once, in its
    entry of the method list (:attr:`dnnplace.methods.base.Method.default_limits`); the
    object is passed down as it is, never rebuilt from a dict inside a run."""

    solver: str = "highs"
    time_limit: float | None = None
    rel_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    tee: bool = False
    solver_options: dict[str, Any] = field(default_factory=dict)
    memory_limit: float | None = None


class SolverLicenceError(InputError):
    """The model is larger than the installed solver licence allows (Gurobi's
    size-limited pip licence): bad input for this backend, not a failed run."""


class SettingError(InputError):
    """A solver setting that cannot be used: ``key`` (a :class:`SolverOptions` field, or
    ``solver_options.NAME`` for a raw backend option), its ``value`` and the ``reason``.
    The message names the setting as a config writes it (``time_limit = -5: must be
    ...``); a caller with other names for the settings (the command line's flags)
    re-words it from ``key``, ``value`` and ``reason``."""

    def __init__(self, key: str, value: Any, reason: str):
        self.key, self.value, self.reason = key, value, reason
        super().__init__(f"{key} = {show_value(value)}: {reason}")


class SettingNote(str):
    """A warning about a setting (a ``str``: ``"solver_options keys are not checked
    ..."``), with its ``key`` and the ``text`` after it, so that a caller can name the
    setting its own way."""

    key: str
    text: str

    def __new__(cls, key: str, text: str) -> SettingNote:
        note = super().__new__(cls, f"{key} {text}")
        note.key, note.text = key, text
        return note


def setting_name(key: str, value: Any) -> str:
    """A setting as this layer names it in a sentence: ``solver 'highs'``."""
    return f"{key} {value!r}"


def licence_hint(name: Callable[[str, Any], str] = setting_name) -> str:
    """What to do about a model over the size-limited licence (the end of the driver's
    message), naming the other backend with ``name``."""
    return f"use {name('solver', 'highs')} or a full licence"


def licence_message(message: str | None, solver: str = "gurobi", *,
                    name: Callable[[str, Any], str] = setting_name) -> str:
    """One line for a model over the size-limited licence: the model's size (from the
    driver's ``message``) and the licence's limits, headed ``solver 'gurobi':``; ``name``
    names the settings otherwise (the command line names them by its flags)."""
    nv, nc = GUROBI_SIZE_LIMITS
    limit = f"Gurobi's size-limited licence allows at most {nv} variables and {nc} constraints"
    msg = (message or "the model is over the restricted licence").strip()
    if "over the restricted licence" in msg:
        msg = msg.replace("over the restricted licence", f"over the restricted licence ({limit})")
    else:
        msg = f"{msg} ({limit})"
    msg = msg.replace(licence_hint(), licence_hint(name))
    return f"{name('solver', solver)}: {msg}"


# ---------------------------------------------------------------------------- values
MAX_SEED = 2 ** 31 - 1
"""The largest seed: HiGHS's ``random_seed`` option is a 32-bit signed integer (numpy's
generators and METIS take larger ones, but one seed reaches them all), so a run's seed lies
in ``0 .. 2147483647``."""
SEED_RANGE = f"must be a whole number from 0 to {MAX_SEED} (a 32-bit seed, as HiGHS takes it)"


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
    elif key == "memory_limit":
        if not _number(v) or not math.isfinite(v) or v <= 0:
            return "must be a positive number of bytes, e.g. 4GB (leave it out for the default share of the memory)"
    elif key == "rel_gap":
        if not _number(v) or not math.isfinite(v) or v < 0 or v >= 1:  # a gap of 1 (100 %) stops at any incumbent
            return "must be a relative gap >= 0 and < 1, e.g. 0.01 for 1%"
    elif key == "threads":
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            return "must be a whole number of threads >= 1 (leave it out for the solver's default)"
    elif key == "seed":
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_SEED:
            return SEED_RANGE
    return None


def show_value(v: Any) -> str:
    """A setting's value as a message shows it: ``30``, ``0.01``, ``"fast"``, ``true``."""
    if isinstance(v, float):
        return f"{v:g}"
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)


_FIELDS = ("solver", "time_limit", "rel_gap", "threads", "seed", "tee", "solver_options", "memory_limit")


def check_values(values: Mapping[str, Any] | SolverOptions) -> None:
    """Raise :class:`SettingError` on the first ill-typed or out-of-range setting.

    ``values`` maps :class:`SolverOptions` field names to values (or is a
    ``SolverOptions``); the error names the field (``time_limit = -5: ...``).

    >>> check_values({"time_limit": 30, "rel_gap": 0.01, "threads": 1})
    >>> check_values({"time_limit": -5})
    Traceback (most recent call last):
    ...
    dnnplace.formulations.solvers.options.SettingError: time_limit = -5: must be a positive number of seconds ...
    """
    if isinstance(values, SolverOptions):
        values = {k: getattr(values, k) for k in _FIELDS}
    for key, value in values.items():
        why = _problem(key, value)
        if why:
            raise SettingError(key, value, why)


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


def _option_error(key: str, value: Any, reason: str) -> SettingError:
    return SettingError(f"solver_options.{key}", value, reason)


def _check_highs(opts: Mapping[str, Any]) -> None:
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
            raise _option_error(key, value, f"not a HiGHS option{hint}")
        v = float(value) if kind == highspy.HighsOptionType.kDouble and _number(value) else value
        with _quiet_fds():
            ok = _number(v) or isinstance(v, (str, bool))
            ok = ok and h.setOptionValue(key, v) == highspy.HighsStatus.kOk
        if not ok:
            info = _highs_options(h).get(key) or f"type: {str(kind.name).removeprefix('k').lower()}"
            raise _option_error(key, value, f"HiGHS rejects this value ({info})")


def _check_gurobi(opts: Mapping[str, Any]) -> None:
    import importlib.util

    if importlib.util.find_spec("gurobipy") is None:
        raise InputError("solver 'gurobi' is not installed here (pip install gurobipy, or use solver 'highs')")
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
                raise _option_error(key, value, f"not a Gurobi parameter{hint}")
            if env is None:
                env = gurobipy.Env(empty=True)  # not started: no licence check, no banner
                env.setParam("OutputFlag", 0)
            try:
                env.setParam(key, value)
            except (gurobipy.GurobiError, TypeError, ValueError) as exc:
                raise _option_error(key, value, f"Gurobi rejects this value ({exc})") from None
    finally:
        if env is not None:
            with contextlib.suppress(Exception):
                env.dispose()


_SCIP_NAMES = ("scip", "scip_direct", "scip_persistent")


def _check_scip(opts: Mapping[str, Any]) -> None:
    import importlib.util

    if importlib.util.find_spec("pyscipopt") is None:
        raise InputError("solver 'scip' needs PySCIPOpt: pip install 'dnnplace[scip]' (or use solver 'highs')")
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
            raise _option_error(key, value, f"not a SCIP parameter{hint}")
        try:
            with _quiet_fds():
                m.setParam(key, value)
        except Exception as exc:  # noqa: BLE001 - pyscipopt raises ValueError, TypeError, KeyError ...
            raise _option_error(key, value, f"SCIP rejects this value ({exc})") from None


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


def check_backend(options: SolverOptions) -> list[str]:
    """Raise :class:`InputError` if ``options.solver`` cannot run here or one of its raw
    ``solver_options`` is unknown to it (with a close match) or has a value it rejects
    (a :class:`SettingError` naming ``solver`` or ``solver_options.NAME``); return
    warnings (:class:`SettingNote`, e.g. that a backend's options could not be checked).

    Imports the backend's Python package (and Pyomo only for backends other than
    HiGHS and Gurobi); nothing is solved and nothing is printed.
    """
    name = options.solver.strip().lower()
    sopts = dict(options.solver_options)
    if name == "highs":
        _check_highs(sopts)
        return []
    if name in _GUROBI_NAMES:
        _check_gurobi(sopts)
        return []
    if name in _SCIP_NAMES:
        _check_scip(sopts)
        return []
    usable = _usable()
    known, available = backend_status(name)
    if not known:
        hint = _suggest(name, usable + ["scip", "cbc", "glpk"])
        raise SettingError("solver", options.solver, f"unknown solver{hint}; usable here: {', '.join(usable)}")
    if not available:
        raise SettingError("solver", options.solver, "not available here (not installed, not on PATH or not "
                           f"licensed); usable here: {', '.join(usable)}")
    if sopts:
        return [SettingNote("solver_options", f"keys are not checked for solver {options.solver!r} (it publishes no "
                            f"option list): {', '.join(sorted(sopts))}")]
    return []
