"""The checks of an experiment config's values (:mod:`dnnplace.config`), each an
:class:`~dnnplace.graphs.errors.InputError` that names the table and key at fault
(``cfg.toml: [grid.solver] time_limit = -5: must be a positive number of seconds``):
table keys, sub-tables, solver settings and backend options, the type of every run key's
values (strings never read as booleans or numbers, as TOML writes them), method options,
transforms and warm starts."""

from __future__ import annotations

import json
import os
from typing import Any

from dnnplace.formulations.solvers.options import MAX_SEED
from dnnplace.graphs.errors import InputError
from dnnplace.registry import SolverOptions

__all__ = ["as_list", "check_keys", "sub_table", "check_solver", "toml_text", "check_sub_tables",
           "check_param_strings", "check_axis_types"]


def as_list(value: Any, key: str, where: str) -> list:
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where}: {key!r} is an empty list")
        return value
    return [value]


def check_keys(table: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; allowed: {sorted(allowed)}")
    return table


def sub_table(where: str, key: str) -> str:
    """``cfg.toml: [grid]`` -> ``cfg.toml: [grid.solver]`` (a sub-table's label)."""
    if where.endswith("]") and not where.endswith("]]") and "[" in where:
        return f"{where[:-1]}.{key}]"
    return f"{where} {key}"


def check_solver(solver: dict, where: str, checked: dict[str, list[str]] | None) -> None:
    """A run table's ``solver`` settings, checked before any run: values (``time_limit =
    -5`` or ``"fast"``, negative gaps, ``threads = 0``), the backend (an unknown or
    missing solver) and its raw ``solver_options`` against the backend's option list.
    ``checked`` caches backend checks (their warnings are printed once)."""
    import sys

    from dnnplace.formulations.solvers.options import check_backend, check_values

    try:
        check_values(solver)
        opts = SolverOptions(**solver)
    except InputError as exc:
        raise InputError(f"{where} {exc}") from None
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None
    if opts.solver.strip().lower() == "highs" and not opts.solver_options:
        return  # the default backend (a dependency) with no raw options: nothing to ask it
    key = json.dumps(solver, sort_keys=True, default=str)
    if checked is not None and key in checked:
        return
    try:
        warnings = check_backend(opts)
    except InputError as exc:
        raise InputError(f"{where} {exc}") from None
    for w in warnings:
        print(f"dnnplace: warning: {where} {w}", file=sys.stderr)
    if checked is not None:
        checked[key] = warnings


# what each run key's values must be, as TOML writes them: strings are never read as
# booleans or numbers (``congestion = "false"`` is an error, not ``True``)
_AXIS_TYPES = {"congestion": (bool, "true or false (a TOML boolean, not a string)"),
               "seed": (int, f"a whole number from 0 to {MAX_SEED}")}
_AXIS_NAMES = {"graphs": "a graph path or glob", "problems": "a problem name", "methods": "a method name",
               "objective": "an objective name", "contiguity": "a contiguity mode", "cluster": "a cluster preset",
               "warm_start": "a method name or a placement file", "policy": "a policy name",
               "transform": "a transform name", "transfer_mode": "a transfer mode"}


def toml_text(value: Any) -> str:
    """A value as TOML writes it (``"false"``, ``5``, ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value) if isinstance(value, (int, float)) else type(value).__name__


_SUB_TABLES = {"solver": 'solver settings (e.g. [grid.solver] with solver = "highs", time_limit = 60)',
               "params": "the method's options (e.g. [grid.params] with coarsen_to = 100)"}


def check_sub_tables(table: dict, where: str) -> None:
    """``solver`` and ``params`` of a run table (``[defaults]``, ``[grid]``, ``[[runs]]``)
    are tables: ``solver = "highs"`` is one line naming the key, not a failed merge."""
    for key, what in _SUB_TABLES.items():
        if key in table and not isinstance(table[key], dict):
            raise InputError(f"{where}: {key} = {toml_text(table[key])}: expected a table of {what}, got "
                             f"{_kind(table[key])}")


def _kind(value: Any) -> str:
    """``a string``, ``a number``, ``a boolean``, ``a list`` ... (what a TOML value is)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def _scalar_kind(hint: Any) -> str | None:
    """What a method option of type ``hint`` takes when that is only numbers or booleans
    (``"a whole number"``, ``"a number"``, ``"true or false"``), else ``None``."""
    import types
    import typing

    names = {int: "a whole number", float: "a number", bool: "true or false"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        kinds = [_scalar_kind(a) for a in inner]
        return " or ".join(dict.fromkeys(kinds)) if kinds and all(kinds) else None
    return None


def check_param_strings(options: type, params: dict, where: str) -> None:
    """A config's method options, as TOML writes them: a string is never read as a number
    or a boolean (``coarsen_to = "100"`` is an error naming the key, as every run key is;
    ``--param coarsen_to=100`` on the command line is parsed, the config's value is not).

    >>> from dnnplace.methods.makespan import PestoMethodOptions
    >>> check_param_strings(PestoMethodOptions, {"coarsen_to": "100"}, "c.toml: [grid.params]")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: c.toml: [grid.params]: coarsen_to = "100": expected a whole number (a TOML ...
    """
    import typing

    hints = typing.get_type_hints(options)
    for key, value in params.items():
        kind = _scalar_kind(hints.get(key))
        if kind is not None and isinstance(value, str):
            form = "a TOML boolean" if kind == "true or false" else "a TOML number"
            raise InputError(f"{where}: {key} = {toml_text(value)}: expected {kind} ({form}, not a string), "
                             "got a string")


def check_axis_types(axes: dict[str, list], where: str) -> None:
    """Every value of every run key of the right type, and the named transforms and
    warm starts known, before any run (``seed = "zero"``, ``methods = 5``, ``transform =
    "nope"`` and a missing warm-start file are one line each)."""
    for key, values in axes.items():
        for v in values:
            typ, what = _AXIS_TYPES.get(key, (str, _AXIS_NAMES.get(key, "a string")))
            ok = isinstance(v, typ) and (typ is bool or not isinstance(v, bool))
            if typ is str:
                ok = ok and bool(v.strip())
            if typ is int and ok:
                ok = 0 <= v <= MAX_SEED
            if not ok:
                got = ("an empty string" if isinstance(v, str) and not v.strip() else "a string" if isinstance(v, str)
                       else "a boolean" if isinstance(v, bool) else "a negative number" if typ is int and
                       isinstance(v, int) and v < 0 else "a number past the range" if typ is int and
                       isinstance(v, int) else "a number" if isinstance(v, (int, float)) else f"a {type(v).__name__}")
                raise InputError(f"{where}: {key} = {toml_text(v)}: expected {what}, got {got}")
    from dnnplace.graphs.transforms.replay import TRANSFORMS

    for v in axes.get("transform", []):
        if v not in TRANSFORMS:
            raise InputError(f"{where}: transform = {toml_text(v)}: unknown graph transform; "
                             f"known: {sorted(TRANSFORMS)}")
    if axes.get("warm_start"):
        from dnnplace.registry import all_methods

        known = all_methods()
        for v in axes["warm_start"]:
            if v not in known and not os.path.exists(v):
                raise InputError(f"{where}: warm_start = {toml_text(v)}: no such file, nor a method name (see "
                                 "`dnnplace methods`)")
