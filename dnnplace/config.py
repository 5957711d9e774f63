"""Experiment configs: a TOML file -> validated :class:`RunSpec` runs (schema in
``docs/formats.md``; example ``experiments/quickstart.toml``).

A config names graphs, problems, methods and options; every combination is one *run*
with a stable *run key*. Everything is checked before the first run: keys, problems,
methods, each method's options, graph paths, cluster presets, and the solver settings
(``time_limit`` > 0, ``rel_gap`` >= 0, ``threads`` >= 1, a solver usable here, raw
``solver_options`` the backend knows); an error names the table and key, e.g.
``cfg.toml: [grid.solver] time_limit = -5: must be a positive number of seconds``.

Example
-------
>>> cfg = parse_config({"name": "demo", "grid": {
...     "graphs": "tarnawski/throughput-inputs/LayerGraphs/bert24_*.json",
...     "methods": ["greedy", "single"]}})
>>> [(s.graph_label.rsplit("/", 1)[1], s.method, s.problem) for s in cfg.specs]  # doctest: +NORMALIZE_WHITESPACE
[('bert24_inference.json', 'greedy', 'maxload'), ('bert24_inference.json', 'single', 'maxload'),
 ('bert24_training.json', 'greedy', 'maxload'), ('bert24_training.json', 'single', 'maxload')]
"""

from __future__ import annotations

import contextvars
import dataclasses
import glob
import hashlib
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnplace.config_checks import (
    as_list,
    check_axis_types,
    check_keys,
    check_param_strings,
    check_solver,
    check_sub_tables,
    sub_table,
    toml_text,
)
from dnnplace.data import bundled_graph, workloads_dir
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.presets import cluster_preset
from dnnplace.registry import SolveRequest, SolverOptions

__all__ = ["REPO_ROOT", "WORKLOADS_DIR", "RECORDS_ONLY", "RunSpec", "ExperimentConfig", "graph_label_of", "load_config",
           "parse_config"]

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout (git provenance); a wheel has none
WORKLOADS_DIR = workloads_dir()

_TOP_KEYS = {"name", "description", "out_dir", "defaults", "grid", "runs"}
_SOLVER_KEYS = {f.name for f in dataclasses.fields(SolverOptions)}
# run keys; those in _AXES may be a list (one run per value)
_RUN_KEYS = {"graphs", "problems", "methods", "objective", "contiguity", "cluster", "seed", "warm_start",
             "congestion", "policy", "transfer_mode", "transform", "solver", "params"}
_AXES = ("graphs", "problems", "methods", "objective", "contiguity", "cluster", "seed", "warm_start", "congestion",
         "policy", "transfer_mode", "transform")
_DEFAULTS = {"congestion": True, "policy": "fifo", "transform": None}  # left out of a run's identity at their default


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a graph file, a problem, a method and its options."""

    graph: str  # resolved path
    graph_label: str  # as shown in tables and keys (relative to the repo where possible)
    problem: str
    method: str
    objective: str = "pipedream"
    contiguity: str | None = None
    cluster: str | None = None
    seed: int = 0
    warm_start: str | None = None
    congestion: bool = True
    policy: str = "fifo"
    transform: str | None = None  # a graph transform applied before solving (dnnplace.graphs.transforms)
    transfer_mode: str = "per_destination"  # makespan: what is sent (semantics.md 2.1; "per_edge": Pesto's accounting)
    solver: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same run (everything but the resolved path; makespan
        settings only where they differ from their default, so older keys stay valid).
        A makespan run always names its transfer mode: records made before a tensor was
        sent once per consuming device (docs/semantics.md 2.1) were made per edge, so their keys no
        longer match and a resumed sweep runs them again; other problems do not simulate
        and keep their keys."""
        d = dataclasses.asdict(self)
        d.pop("graph")
        d["graph"] = d.pop("graph_label")
        for k, v in _DEFAULTS.items():
            if d[k] == v:
                d.pop(k)
        if self.problem != "makespan":
            d.pop("transfer_mode")
        return d

    def request(self) -> SolveRequest:
        """The :class:`~dnnplace.registry.SolveRequest` of this run."""
        return SolveRequest(problem=self.problem, objective=self.objective, contiguity=self.contiguity,
                            solver=SolverOptions(**self.solver), warm_start=self.warm_start, seed=self.seed,
                            congestion=self.congestion, policy=self.policy, params=dict(self.params),
                            transfer_mode=self.transfer_mode)

    @property
    def key(self) -> str:
        """Stable run key: ``graph|problem|method|<hash of the options>``."""
        blob = json.dumps(self.identity(), sort_keys=True, default=str)
        digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
        return f"{self.graph_label}|{self.problem}|{self.method}|{digest}"

    def option_items(self) -> list[str]:
        """The run's options as short ``key=value`` strings."""
        bits = []
        if self.problem == "maxload":
            bits.append(f"obj={self.objective}")
        if self.contiguity is not None:
            bits.append(f"contig={self.contiguity}")
        if self.cluster:
            bits.append(f"cluster={self.cluster}")
        if self.seed:
            bits.append(f"seed={self.seed}")
        if self.warm_start:
            bits.append(f"ws={self.warm_start}")
        bits += [f"{k}={getattr(self, k)}" for k, v in _DEFAULTS.items() if getattr(self, k) != v]
        if self.problem == "makespan" and self.transfer_mode != "per_destination":
            bits.append(f"transfers={self.transfer_mode}")
        short = {"time_limit": "tl", "rel_gap": "gap", "threads": "thr", "solver": "solver"}
        for k, v in self.solver.items():
            if v is not None and k != "tee":
                bits.append(f"{short.get(k, k)}={v}")
        bits += [f"{k}={v}" for k, v in self.params.items()]
        return bits

    def options_summary(self) -> str:
        """Short human summary of the options."""
        return " ".join(self.option_items())


@dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment config."""

    name: str
    description: str
    out_dir: Path | None
    specs: tuple[RunSpec, ...]
    source: str | None = None


RECORDS_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("RECORDS_ONLY", default=False)
"""True while a table is re-rendered from its records (``dnnplace reproduce NAME --check``):
:func:`dnnplace.runner.execute` then refuses (``InputError``) to run a spec that has no record."""

LABEL_ROOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("LABEL_ROOT", default=None)
"""A folder that stands for the checkout in graph labels (first, where set): ``dnnplace
reproduce NAME --check`` re-renders a copy of ``results/...`` under a temporary folder and
sets it, so the copy's instance files keep the run keys they were recorded under."""


def graph_label_of(path: Path) -> str:
    """How a graph file is named in run keys and tables: relative to the checkout (or
    :data:`LABEL_ROOT`) or to the bundled workloads where it lies there, else its absolute path."""
    roots = (REPO_ROOT, WORKLOADS_DIR) if LABEL_ROOT.get() is None else (LABEL_ROOT.get(), REPO_ROOT, WORKLOADS_DIR)
    for root in roots:
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        return rel.as_posix() if root != WORKLOADS_DIR else f"graphs/workloads/{rel.as_posix()}"
    return str(path.resolve())


def _resolve_graphs(pattern: str, base: Path, where: str) -> list[tuple[str, str]]:
    """(resolved path, label) for a graph path or glob, relative to the config's
    folder, else the repository, else the bundled workloads."""
    p = Path(os.path.expanduser(str(pattern)))
    roots = [p.parent] if p.is_absolute() else [base, REPO_ROOT, WORKLOADS_DIR]
    for root in roots:
        full = str(p) if p.is_absolute() else str(root / p)
        hits = sorted(glob.glob(full, recursive=True)) if glob.has_magic(full) else (
            [full] if Path(full).is_file() else [])
        if hits:
            return [(str(Path(h).resolve()), graph_label_of(Path(h))) for h in hits]
    bundled = None if p.is_absolute() or glob.has_magic(str(p)) else bundled_graph(str(pattern))
    if bundled is not None:  # a bundled workload by name, as the command line takes it (".json" left out)
        return [(str(bundled.resolve()), graph_label_of(bundled))]
    raise InputError(f"{where}: graph {pattern!r} matches no file (looked in {base}, {REPO_ROOT} "
                     f"and {WORKLOADS_DIR})")


def _expand(spec: dict, base: Path, where: str, checked: dict[str, list[str]] | None = None) -> list[RunSpec]:
    from dnnplace.evaluation.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES, PROBLEMS

    check_keys(spec, _RUN_KEYS, where)
    if "graphs" not in spec:
        raise InputError(f"{where}: missing key 'graphs'")
    if "methods" not in spec:
        raise InputError(f"{where}: missing key 'methods'")
    solver = dict(check_keys(spec.get("solver", {}), _SOLVER_KEYS, sub_table(where, "solver")))
    check_solver(solver, sub_table(where, "solver"), checked)
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise InputError(f"{where}: 'params' must be a table")
    params = dict(params)
    axes = {k: as_list(spec[k], k, where) for k in _AXES if k in spec}
    check_axis_types(axes, where)
    if params:
        from dnnplace.registry import all_methods

        known = all_methods()
        for m in axes.get("methods", []):
            if m in known:  # an unknown method is named by the method check
                check_param_strings(known[m].options, params, sub_table(where, "params"))
    axes.setdefault("problems", ["maxload"])
    for v in axes["problems"]:
        if v not in PROBLEMS:
            raise InputError(f"{where}: unknown problem {v!r}; use one of {list(PROBLEMS)}")
    for v in axes.get("objective", []):
        if v not in MAXLOAD_OBJECTIVES:
            raise InputError(f"{where}: unknown objective {v!r}; use one of {list(MAXLOAD_OBJECTIVES)}")
    for v in axes.get("contiguity", []):
        if v not in CONTIGUITY_MODES:
            raise InputError(f"{where}: unknown contiguity {v!r}; use one of {list(CONTIGUITY_MODES)}")
    for v in axes.get("cluster", []):
        try:
            cluster_preset(v)  # validate early
        except InputError as exc:
            raise InputError(f"{where}: cluster = {toml_text(v)}: {exc}") from None
    from dnnplace.evaluation.sim_costs import TRANSFER_MODES

    for v in axes.get("transfer_mode", []):
        if v not in TRANSFER_MODES:
            raise InputError(f"{where}: unknown transfer_mode {v!r}; use one of {list(TRANSFER_MODES)}")
    graphs: list[tuple[str, str]] = []
    for pat in axes.pop("graphs"):
        graphs += _resolve_graphs(pat, base, where)
    axes = {"graphs": graphs, **axes}
    names = list(axes)
    out = []
    for combo in itertools.product(*(axes[k] for k in names)):
        kw = dict(zip(names, combo, strict=True))
        gpath, glabel = kw.pop("graphs")
        out.append(RunSpec(graph=gpath, graph_label=glabel, problem=kw.pop("problems"), method=kw.pop("methods"),
                           objective=kw.get("objective", "pipedream"), contiguity=kw.get("contiguity"),
                           cluster=kw.get("cluster"), seed=int(kw.get("seed", 0)), warm_start=kw.get("warm_start"),
                           congestion=bool(kw.get("congestion", True)), policy=kw.get("policy", "fifo"),
                           transform=kw.get("transform"), transfer_mode=kw.get("transfer_mode", "per_destination"),
                           solver=solver, params=params))
    return out


def parse_config(doc: dict, *, base: str | os.PathLike | None = None, source: str | None = None) -> ExperimentConfig:
    """Validate a parsed TOML document into an :class:`ExperimentConfig`.

    ``[defaults]`` applies to every run table; ``[grid]`` and each ``[[runs]]`` table
    expand to the product of their list-valued axes. Unknown keys are errors.
    """
    where = source or "config"
    check_keys(doc, _TOP_KEYS, where)
    name = doc["name"] if "name" in doc else (Path(source).stem if source else None)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        shown = f" = {toml_text(name)}" if "name" in doc else f" (the file's stem {name!r})" if name else ""
        raise InputError(f"{where}: name{shown}: must be a non-empty word of letters, digits, '.', '_' or '-' "
                         "(it names the results folder)")
    base_dir = Path(base) if base is not None else Path.cwd()
    defaults = dict(check_keys(doc.get("defaults", {}), _RUN_KEYS, f"{where}: [defaults]"))
    tables: list[tuple[str, dict]] = []
    if "grid" in doc:
        tables.append(("[grid]", doc["grid"]))
    runs = doc.get("runs", [])
    if not isinstance(runs, list):
        raise InputError(f"{where}: 'runs' must be an array of tables ([[runs]])")
    tables += [(f"[[runs]] #{i + 1}", t) for i, t in enumerate(runs)]
    if not tables:
        raise InputError(f"{where}: no runs (add a [grid] table or [[runs]] tables)")
    specs: list[RunSpec] = []
    checked: dict[str, list[str]] = {}
    for label, table in [("[defaults]", defaults), *tables]:
        check_keys(table, _RUN_KEYS, f"{where}: {label}")
        check_sub_tables(table, f"{where}: {label}")
    for label, table in tables:
        merged = {**defaults, **table}
        for sub in ("solver", "params"):
            if sub in defaults or sub in table:
                merged[sub] = {**defaults.get(sub, {}), **table.get(sub, {})}
        specs += _expand(merged, base_dir, f"{where}: {label}", checked)
    from dnnplace.registry import method_options

    for s in specs:  # every method, problem and option checked before the first run
        try:
            method_options(s.method, s.request())
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    seen: dict[str, RunSpec] = {}
    for s in specs:
        seen.setdefault(s.key, s)  # the same run listed twice runs once
    out_dir = doc.get("out_dir")
    return ExperimentConfig(name=str(name), description=str(doc.get("description", "")),
                            out_dir=(base_dir / out_dir) if out_dir else None, specs=tuple(seen.values()),
                            source=source)


def load_config(path: str | os.PathLike) -> ExperimentConfig:
    """Read and validate a TOML experiment config."""
    from dnnplace.graphs.io import read_text

    p = Path(path)
    try:
        doc = tomllib.loads(read_text(p))  # missing, compressed or non-UTF-8: one line naming the file
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: invalid TOML: {exc}") from None
    return parse_config(doc, base=p.resolve().parent, source=str(p))
