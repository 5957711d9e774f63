"""The one loader of the reproductions' TOML configs (``experiments/<name>.toml``).

Every reproduction config has one schema: the common keys below, which every module reads
alike, plus the keys its module declares in its :data:`SCHEMA` (a :class:`Schema`: the
kinds it runs, its own top-level keys, the extra keys of a method table and of a model
table). :func:`load` reads a bundled config by name or any TOML file by path, resolves its
include (``models = "<name>"``), checks every key and type against the schema (an error
names the file and the key) and returns one typed :class:`Reproduction`.

Common keys (docs/formats.md, "Reproduction config"):

``reproduction``  the module of :mod:`dnnplace.experiments` that runs the config (required)
``name``          the reproduction's name (default: the file's stem)
``kind``          which of the module's tables it writes (required where the module has several)
``description``, ``notes``   text printed with the table
``out_dir``       where outputs go (default: the module's)
``graph``         one graph source: a table (``generate(**graph)``) or a bundled workload by name
                  (``"captured/nasnet-4x44"``, ``.json`` optional, as the command line takes it)
``models``        the models: a list of tables, or the name of a shared TOML file (an *include*,
                  e.g. ``"celeritas-models"``) whose keys are defaults under the config's own
``cluster``       ``Cluster.single_host`` keyword arguments (``n_gpus``, ``interconnect``,
                  ``gpu_memory``, ``with_cpu``, ...)
``methods``       label -> a method table (``method``, ``params``, ``time_limit``, ``rel_gap`` and
                  the module's method keys) or a method name alone; ``params`` are checked
                  against the method's declared options (``dnnplace methods NAME``)
``time_limit``, ``rel_gap``  solver settings of the config's exact runs
``quick_<key>``   the value of ``<key>`` under ``--quick`` (top level and in a method table;
                  ``quick_params`` are merged into ``params``)

The module's own keys (its grid axes such as ``gpus`` or ``coarse_sizes``, and what
genuinely differs between papers) are read as attributes: ``cfg.gpus``.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnplace.data import bundled_graph, experiment_config, experiments_dir, workloads_dir
from dnnplace.graphs.errors import InputError

__all__ = ["Key", "Schema", "MethodSpec", "Reproduction", "load", "load_include", "REQUIRED", "OPTIONAL"]


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


REQUIRED = _Marker("REQUIRED")  # the key must be given
OPTIONAL = _Marker("OPTIONAL")  # the key may be left out (then absent: no default)


@dataclass(frozen=True)
class Key:
    """One key of a schema: its type(s) (``float`` accepts an integer; ``list`` with ``item``
    checks each element), its default (:data:`REQUIRED`, :data:`OPTIONAL` or a value) and
    the values it may take (``choices``)."""

    type: type | tuple[type, ...]
    default: Any = OPTIONAL
    item: type | tuple[type, ...] | None = None
    choices: tuple | None = None


@dataclass(frozen=True)
class Schema:
    """What a reproduction module declares: the kinds it runs, its default ``out_dir`` and
    solver settings, and its own keys at the top level, in a method table and in a model table."""

    kinds: tuple[str, ...]
    out_dir: str
    options: Mapping[str, Key] = field(default_factory=dict)
    method_keys: Mapping[str, Key] = field(default_factory=dict)
    model_keys: Mapping[str, Key] = field(default_factory=dict)
    time_limit: float | None = None
    rel_gap: float | None = None


_CLUSTER_KEYS = {"n_gpus": Key(int), "interconnect": Key(str, choices=("nvlink", "pcie")), "gpu_memory": Key(float),
                 "with_cpu": Key(bool), "cpu_memory": Key(float), "latency": Key(float), "bandwidth": Key(float),
                 "unit": Key(str)}
_COMMON = {"reproduction": Key(str, REQUIRED), "name": Key(str), "kind": Key(str), "description": Key(str, ""),
           "notes": Key(list, [], item=str), "out_dir": Key(str), "graph": Key((str, dict)),
           "models": Key((str, list), item=dict), "cluster": Key(dict, {}), "methods": Key(dict, {}),
           "time_limit": Key(float), "rel_gap": Key(float)}
_NOT_QUICK = {"reproduction", "name", "kind", "models", "methods"}
_METHOD_COMMON = {"method": Key(str, REQUIRED), "params": Key(dict, {}), "time_limit": Key(float),
                  "rel_gap": Key(float)}


@dataclass(frozen=True)
class MethodSpec:
    """One method of a config: its label (a table column), the registered method, its
    options, solver limits (``None``: the config's or the method's) and the module's
    method keys (``extra``). ``spec["method"]`` / ``spec.get(key, default)`` read any of them."""

    label: str
    method: str
    params: dict = field(default_factory=dict)
    time_limit: float | None = None
    rel_gap: float | None = None
    extra: dict = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key) if key in _METHOD_COMMON else self.extra.get(key)
        return default if value is None else value

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value


@dataclass(frozen=True)
class Reproduction:
    """A loaded reproduction config: the common keys as fields, the module's own keys in
    ``options`` (also readable as attributes, ``cfg.gpus``, or items, ``cfg["gpus"]``)."""

    path: Path
    reproduction: str
    name: str
    kind: str
    description: str = ""
    notes: tuple[str, ...] = ()
    out_dir: str = "results"
    graph: dict | str | None = None
    models: tuple[dict, ...] = ()
    cluster: dict = field(default_factory=dict)
    methods: dict[str, MethodSpec] = field(default_factory=dict)
    time_limit: float | None = None
    rel_gap: float | None = None
    options: dict = field(default_factory=dict)
    quick: bool = False

    def __getattr__(self, key: str) -> Any:
        options = self.__dict__.get("options", {})
        if key in options:
            return options[key]
        raise AttributeError(f"{self.__dict__.get('path', 'config')}: no key {key!r}")

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, None)
        return default if value is None else value


# ---------------------------------------------------------------------------- checking
def _type_name(t: type | tuple) -> str:
    names = {str: "a string", bool: "true or false", int: "an integer", float: "a number", list: "a list",
             dict: "a table"}
    ts = t if isinstance(t, tuple) else (t,)
    return " or ".join(names.get(x, x.__name__) for x in ts)


def _matches(value: Any, t: type | tuple) -> bool:
    for x in t if isinstance(t, tuple) else (t,):
        if x is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if x is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if x not in (int, float) and isinstance(value, x):
            return True
    return False


def _checked(value: Any, key: Key, where: str) -> Any:
    if not _matches(value, key.type):
        raise InputError(f"{where} = {value!r}: must be {_type_name(key.type)}")
    if isinstance(value, list) and key.item is not None:
        for i, x in enumerate(value):
            if not _matches(x, key.item):
                raise InputError(f"{where}[{i}] = {x!r}: must be {_type_name(key.item)}")
        if key.item is float:
            value = [float(x) for x in value]
    if key.type is float:
        value = float(value)
    if key.choices is not None and value not in key.choices:
        raise InputError(f"{where} = {value!r}: must be one of {', '.join(map(repr, key.choices))}")
    return value


def _table(doc: Mapping, keys: Mapping[str, Key], where: str, *, defaults: bool = True,
           quick: bool | None = None) -> dict:
    """``doc`` checked against ``keys`` (``quick_<key>`` allowed where ``quick`` is not None:
    applied when true, dropped when false); defaults filled in."""
    out: dict = {}
    unknown = []
    for k, v in doc.items():
        base = k.removeprefix("quick_") if quick is not None and k.startswith("quick_") else None
        if k in keys:
            out[k] = _checked(v, keys[k], f"{where} {k}")
        elif base in keys and base not in _NOT_QUICK:
            v = _checked(v, keys[base], f"{where} {k}")
            if quick:
                out.setdefault("__quick__", {})[base] = v
        else:
            unknown.append(k)
    if unknown:
        raise InputError(f"{where} unknown keys {', '.join(map(repr, unknown))}; known: {', '.join(sorted(keys))}")
    for base, v in out.pop("__quick__", {}).items():
        out[base] = {**out.get(base, {}), **v} if base == "params" else v
    for k, spec in keys.items():
        if k not in out and defaults:  # (an include: neither defaults nor required keys)
            if spec.default is REQUIRED:
                raise InputError(f"{where} missing key {k!r}")
            if spec.default is not OPTIONAL:
                out[k] = spec.default
    return out


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def _find(source: str | Path, near: Path | None = None) -> Path:
    """A config or include by path, by name beside ``near``, or by name among the bundled configs."""
    p = Path(source)
    if p.suffix == ".toml" or p.parent != Path("."):
        if not p.is_file():
            raise InputError(f"{p}: no such config file")
        return p
    if near is not None and (near / f"{source}.toml").is_file():
        return near / f"{source}.toml"
    return experiment_config(str(source))


def load_include(source: str, *, near: Path | None = None) -> tuple[Path, dict]:
    """The shared file an include names (``models = "celeritas-models"``): its path and doc."""
    path = _find(source, near)
    doc = _read(path)
    if "reproduction" in doc:
        raise InputError(f"{path}: an include is no reproduction; remove its key 'reproduction'")
    if not isinstance(doc.get("models"), list):
        raise InputError(f"{path}: an include must have its [[models]] tables")
    return path, doc


def _schema(module: str, where: str) -> Schema:
    try:
        mod = importlib.import_module(f"dnnplace.experiments.{module}")
    except ModuleNotFoundError:
        raise InputError(f"{where} reproduction = {module!r}: no module dnnplace.experiments.{module}") from None
    schema = getattr(mod, "SCHEMA", None)
    if not isinstance(schema, Schema):
        raise InputError(f"{where} reproduction = {module!r}: that module declares no reproduction SCHEMA")
    return schema


def _graph(value: Any, where: str) -> Any:
    """A ``graph`` naming a bundled workload, as its path under ``graphs/workloads/``
    (``"captured/nasnet-4x44"`` -> ``"captured/nasnet-4x44.json"``:
    :func:`dnnplace.data.bundled_graph`, the command line's resolver); a table stays a table."""
    if not isinstance(value, str):
        return value
    path = bundled_graph(value)
    if path is None:
        raise InputError(f"{where} graph = {value!r}: no bundled workload of that name (e.g. "
                         "'captured/rnnlm-2x2048'; see graphs/workloads/)")
    return path.relative_to(workloads_dir()).as_posix()


def _methods(doc: Mapping, schema: Schema, where: str, quick: bool) -> dict[str, MethodSpec]:
    from dnnplace.config_checks import check_param_strings
    from dnnplace.methods.base import parse_options
    from dnnplace.registry import all_methods

    keys = {**_METHOD_COMMON, **schema.method_keys}
    known = all_methods()
    out = {}
    for label, table in doc.items():
        at = f"{where} [methods.{label!r}]" if " " in label else f"{where} [methods.{label}]"
        if isinstance(table, str):
            table = {"method": table}
        if not isinstance(table, dict):
            raise InputError(f"{at} = {table!r}: must be a method name or a table")
        t = _table(table, keys, at, quick=quick)
        if t["method"] not in known:
            raise InputError(f"{at} method = {t['method']!r}: no such method; see `dnnplace methods`")
        for pk in ("params", "quick_params"):
            if pk in table:
                check_param_strings(known[t["method"]].options, table[pk], f"{at} {pk}")
                try:
                    parse_options(known[t["method"]].options, table[pk], method=t["method"])
                except InputError as exc:
                    raise InputError(f"{at} {pk}: {exc}") from None
        out[label] = MethodSpec(label, t.pop("method"), dict(t.pop("params")), t.pop("time_limit", None),
                                t.pop("rel_gap", None), t)
    return out


def load(source: str | Path, *, quick: bool = False, module: str | None = None) -> Reproduction:
    """Read, check and return a reproduction config.

    Parameters
    ----------
    source : str or Path
        A bundled config's name (``"fastt-splits"``) or a TOML file's path (any ``.toml``: a
        user's config for an existing module is a new reproduction).
    quick : bool
        Apply the ``quick_<key>`` values (``--quick``).
    module : str, optional
        The module expected to run it; a file without ``reproduction`` is read as that module's.
    """
    path = _find(source)
    where = f"{path}:"
    doc = _read(path)
    if module is not None:
        doc.setdefault("reproduction", module)
        if doc["reproduction"] != module:
            raise InputError(f"{where} reproduction = {doc['reproduction']!r}: expected {module!r}")
    if not isinstance(doc.get("reproduction"), str):
        raise InputError(f"{where} missing key 'reproduction' (the module of dnnplace.experiments that runs it)")
    schema = _schema(doc["reproduction"], where)
    keys = {**_COMMON, **schema.options}
    models: list[dict] = []
    if isinstance(doc.get("models"), str):  # an include: its keys are defaults under the config's own
        try:
            inc_path, inc = load_include(doc["models"], near=path.parent)
        except InputError as exc:
            raise InputError(f"{where} models = {doc['models']!r} (an include): {exc}") from None
        inc_keys = {k: v for k, v in keys.items() if k not in _NOT_QUICK or k == "models"}
        inc = _table(inc, inc_keys, f"{inc_path}:", defaults=False)
        models = inc.pop("models")
        model_where = f"{inc_path}:"
        doc = {**inc, **doc}
    else:
        model_where = where
    cfg = _table(doc, keys, where, quick=quick)
    if "name" in cfg and not cfg["name"].strip():
        raise InputError(f"{where} name = {cfg['name']!r}: must be a non-empty name (leave it out for the file's "
                         f"stem, {path.stem!r})")
    if "graph" in cfg:
        cfg["graph"] = _graph(cfg["graph"], where)
    if isinstance(cfg.get("models"), list):
        models = cfg["models"]
    checked_models = []
    for i, m in enumerate(models):
        at = f"{model_where} [[models]] #{i + 1}" + (f" ({m['name']})" if isinstance(m.get("name"), str) else "")
        checked_models.append(_table(m, schema.model_keys, at) if schema.model_keys else dict(m))
    kind = cfg.get("kind") or (schema.kinds[0] if len(schema.kinds) == 1 else None)
    if kind not in schema.kinds:
        raise InputError(f"{where} kind = {kind!r}: must be one of {', '.join(schema.kinds)}")
    cluster = _table(cfg["cluster"], _CLUSTER_KEYS, f"{where} [cluster]", defaults=False)
    for k in ("time_limit", "rel_gap"):
        v = cfg.get(k, getattr(schema, k))
        if v is not None and (v < 0 or (k == "time_limit" and v == 0)):
            raise InputError(f"{where} {k} = {v!r}: must be {'positive' if k == 'time_limit' else '>= 0'}")
        cfg[k] = v
    return Reproduction(path=path, reproduction=cfg["reproduction"], name=cfg.get("name") or path.stem, kind=kind,
                        description=cfg["description"], notes=tuple(cfg["notes"]),
                        out_dir=cfg.get("out_dir") or schema.out_dir, graph=cfg.get("graph"),
                        models=tuple(checked_models), cluster=cluster,
                        methods=_methods(cfg["methods"], schema, where, quick), time_limit=cfg["time_limit"],
                        rel_gap=cfg["rel_gap"], options={k: cfg.get(k) for k in schema.options}, quick=quick)


def bundled() -> list[Path]:
    """The bundled reproduction configs (files with a ``reproduction`` key)."""
    return [p for p in sorted(experiments_dir().glob("*.toml")) if "reproduction" in _read(p)]

