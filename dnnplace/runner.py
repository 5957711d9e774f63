"""The experiment runner: a TOML file -> a sweep of :func:`dnnplace.registry.solve` runs.

A config (schema in ``docs/formats.md``; example ``experiments/quickstart.toml``) names
graphs, problems, methods and options. Every combination is one *run* with a stable
*run key*. Results are appended to ``<out>/runs.jsonl`` one JSON line per finished run,
flushed and fsynced, so an interrupted sweep loses at most the run in progress; a
second invocation skips every run whose key is already recorded and goes on. A run
that fails is recorded with ``status: "error"`` and the sweep continues. At the end
``table.md`` and ``table.csv`` summarise the config's runs.

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

import dataclasses
import datetime as _dt
import glob
import hashlib
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tomllib
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dnnplace.data import workloads_dir
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.io import jsonable
from dnnplace.graphs.presets import cluster_preset
from dnnplace.registry import SolveRequest, SolverOptions
from dnnplace.tables import Column, write_table

__all__ = ["REPO_ROOT", "WORKLOADS_DIR", "RunSpec",
           "ExperimentConfig", "load_config", "parse_config", "run_config", "read_runs", "git_revision",
           "environment", "write_tables", "progress_enabled"]

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout (git provenance); a wheel has none
WORKLOADS_DIR = workloads_dir()

# ---------------------------------------------------------------------------- config
_TOP_KEYS = {"name", "description", "out_dir", "defaults", "grid", "runs"}
_SOLVER_KEYS = {f.name for f in dataclasses.fields(SolverOptions)}
# run keys; those in _AXES may be a list (one run per value)
_RUN_KEYS = {"graphs", "problems", "methods", "objective", "contiguity", "cluster", "seed", "warm_start",
             "congestion", "policy", "transform", "solver", "params"}
_AXES = ("graphs", "problems", "methods", "objective", "contiguity", "cluster", "seed", "warm_start", "congestion",
         "policy", "transform")
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
    solver: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same run (everything but the resolved path; makespan
        settings only where they differ from their default, so older keys stay valid)."""
        d = dataclasses.asdict(self)
        d.pop("graph")
        d["graph"] = d.pop("graph_label")
        for k, v in _DEFAULTS.items():
            if d[k] == v:
                d.pop(k)
        return d

    def request(self) -> SolveRequest:
        """The :class:`~dnnplace.registry.SolveRequest` of this run."""
        return SolveRequest(problem=self.problem, objective=self.objective, contiguity=self.contiguity,
                            solver=SolverOptions(**self.solver), warm_start=self.warm_start, seed=self.seed,
                            congestion=self.congestion, policy=self.policy, params=dict(self.params))

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


def _as_list(value: Any, key: str, where: str) -> list:
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where}: {key!r} is an empty list")
        return value
    return [value]


def _check_keys(table: Any, allowed: set[str], where: str) -> dict:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r}; allowed: {sorted(allowed)}")
    return table


def graph_label_of(path: Path) -> str:
    """How a graph file is named in run keys and tables: relative to the checkout or to
    the bundled workloads where it lies there, else its absolute path."""
    for root in (REPO_ROOT, WORKLOADS_DIR):
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        return rel.as_posix() if root == REPO_ROOT else f"graphs/workloads/{rel.as_posix()}"
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
    raise InputError(f"{where}: graph {pattern!r} matches no file (looked in {base}, {REPO_ROOT} "
                     f"and {WORKLOADS_DIR})")


def _expand(spec: dict, base: Path, where: str) -> list[RunSpec]:
    from dnnplace.graphs.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES, PROBLEMS

    _check_keys(spec, _RUN_KEYS, where)
    if "graphs" not in spec:
        raise InputError(f"{where}: missing key 'graphs'")
    if "methods" not in spec:
        raise InputError(f"{where}: missing key 'methods'")
    solver = dict(_check_keys(spec.get("solver", {}), _SOLVER_KEYS, f"{where}.solver"))
    try:
        SolverOptions(**solver)
    except TypeError as exc:
        raise InputError(f"{where}.solver: {exc}") from None
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise InputError(f"{where}: 'params' must be a table")
    params = dict(params)
    axes = {k: _as_list(spec[k], k, where) for k in _AXES if k in spec}
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
        cluster_preset(v)  # validate early
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
                           transform=kw.get("transform"),
                           solver=solver, params=params))
    return out


def parse_config(doc: dict, *, base: str | os.PathLike | None = None, source: str | None = None) -> ExperimentConfig:
    """Validate a parsed TOML document into an :class:`ExperimentConfig`.

    ``[defaults]`` applies to every run table; ``[grid]`` and each ``[[runs]]`` table
    expand to the product of their list-valued axes. Unknown keys are errors.
    """
    where = source or "config"
    _check_keys(doc, _TOP_KEYS, where)
    name = doc.get("name") or (Path(source).stem if source else None)
    if not name or not re.fullmatch(r"[A-Za-z0-9._-]+", str(name)):
        raise InputError(f"{where}: 'name' must be a non-empty word of letters, digits, '.', '_' or '-'")
    base_dir = Path(base) if base is not None else Path.cwd()
    defaults = dict(_check_keys(doc.get("defaults", {}), _RUN_KEYS, f"{where}: [defaults]"))
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
    for label, table in tables:
        _check_keys(table, _RUN_KEYS, f"{where}: {label}")
        merged = {**defaults, **table}
        for sub in ("solver", "params"):
            if sub in defaults or sub in table:
                merged[sub] = {**defaults.get(sub, {}), **table.get(sub, {})}
        specs += _expand(merged, base_dir, f"{where}: {label}")
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
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: invalid TOML: {exc}") from None
    return parse_config(doc, base=p.resolve().parent, source=str(p))


# ---------------------------------------------------------------------------- provenance
def git_revision(path: str | os.PathLike = REPO_ROOT) -> str | None:
    """``git rev-parse HEAD`` of the checkout holding ``path``, or ``None``."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _pkg_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Python, platform and the versions of the numerical packages."""
    from dnnplace import __version__
    return {"dnnplace": __version__, "python": platform.python_version(), "platform": platform.platform(),
            "packages": {p: _pkg_version(p) for p in ("numpy", "scipy", "pyomo", "highspy", "gurobipy")}}


_SOLVER_PACKAGES = {"highs": "highspy", "appsi_highs": "highspy", "gurobi": "gurobipy", "gurobi_direct": "gurobipy",
                    "gurobi_persistent": "gurobipy", "appsi_gurobi": "gurobipy", "scip": "pyscipopt",
                    "scip_direct": "pyscipopt"}


# ---------------------------------------------------------------------------- runs.jsonl
def read_runs(path: str | os.PathLike, *, repair: bool = False) -> list[dict]:
    """The records of a ``runs.jsonl`` file (missing file: ``[]``).

    A last line cut short by a crash is ignored; with ``repair=True`` it is also cut
    off the file, so that the next append starts on a fresh line.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end < len(data):
        with open(p, "r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    out = []
    for i, line in enumerate(data[:end].decode().splitlines()):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            print(f"dnnplace: warning: {p}:{i + 1}: skipping a line that is not JSON", file=sys.stderr)
            continue
        if isinstance(rec, dict) and "run_key" in rec:
            out.append(rec)
    return out


def _append(path: Path, record: dict) -> None:
    line = json.dumps(record, allow_nan=False, default=str) + "\n"
    with open(path, "a") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _execute(spec: RunSpec) -> dict:
    """Run one spec; any exception except an interrupt becomes an ``error`` result."""
    from dnnplace.graphs.io import prepare_instance
    from dnnplace.graphs.transforms import apply_transform
    from dnnplace.registry import solve
    from dnnplace.results import Result

    try:
        inst = prepare_instance(spec.graph, spec.cluster)
        if spec.transform is None:
            return solve(inst, spec.method, spec.request()).to_dict()
        inst, t = apply_transform(spec.transform, inst)  # the result is, explicitly, for the transformed graph
        res = solve(inst, spec.method, spec.request())
        res.extra["transform"] = {"name": t.name, "nodes": t.graph.n, **t.meta}
        return res.to_dict()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a failing run is a result, the sweep goes on
        tb = traceback.format_exc().strip().splitlines()[-20:]
        return Result(problem=spec.problem, method=spec.method, instance=spec.graph_label, status="error",
                      message=f"{type(exc).__name__}: {exc}", extra={"traceback": tb}).to_dict()


def progress_enabled(progress: bool) -> bool:
    """Progress bars only when asked for and stderr is a terminal."""
    return bool(progress) and sys.stderr.isatty()


def execute(specs: list[RunSpec], runs_path: str | os.PathLike, *, name: str, fresh: bool = False,
            progress: bool = True, retry_errors: bool = False) -> dict[str, dict]:
    """Run every spec whose key ``runs_path`` does not hold yet; return the newest record
    of every key, finished or found (the one sweep driver: experiment configs and
    reproductions both run through it).

    Each record is the :class:`~dnnplace.results.Result` of :func:`dnnplace.registry.solve`
    plus the run key, its identity, git revision, solver package and version, the
    environment and a timestamp, appended and fsynced as soon as the run ends.
    ``fresh`` renames the old file to ``runs.jsonl.bak`` first; ``retry_errors`` runs the
    ``error`` records again (the newest record of a key wins).
    """
    runs_path = Path(runs_path)
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    if fresh and runs_path.exists():
        os.replace(runs_path, runs_path.with_name(runs_path.name + ".bak"))
    done = {r["run_key"]: r for r in read_runs(runs_path, repair=True)}
    unique = list({s.key: s for s in specs}.values())
    todo = [s for s in unique if s.key not in done or (retry_errors and done[s.key].get("status") == "error")]
    rev = git_revision()
    env = environment()
    from tqdm import tqdm

    total = len(unique)
    show_bar = progress_enabled(progress)
    log = bool(progress) and not show_bar  # not a terminal: one line per run instead of a bar
    bar = tqdm(total=total, initial=total - len(todo), desc=name, unit="run", disable=not show_bar,
               file=sys.stderr, dynamic_ncols=True)
    if log and len(todo) < total:
        print(f"{name}: {total - len(todo)} of {total} runs already in {runs_path}", file=sys.stderr)
    try:
        for k, spec in enumerate(todo):
            bar.set_postfix_str(f"{Path(spec.graph_label).stem} {spec.problem} {spec.method}", refresh=True)
            rec = _execute(spec)
            pkg = _SOLVER_PACKAGES.get(str(spec.solver.get("solver", "highs")))
            rec = {"run_key": spec.key, "config": name, "run": spec.identity(), **jsonable(rec),
                   "git_revision": rev, "solver_package": pkg, "solver_package_version": _pkg_version(pkg) if pkg
                   else None, "environment": env,
                   "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
            _append(runs_path, rec)
            done[spec.key] = rec
            bar.update(1)
            if log:
                obj = rec.get("objective")
                what = rec.get("message") if rec.get("status") == "error" else (
                    f"{obj:.6g}" if isinstance(obj, (int, float)) else "-")
                print(f"[{total - len(todo) + k + 1}/{total}] {Path(spec.graph_label).stem} "
                      f"{spec.problem} {spec.method}: {rec.get('status')} {what} ({rec.get('wall_seconds', 0):.1f} s)",
                      file=sys.stderr, flush=True)
    finally:
        bar.close()
    return done


def run_config(path: str | os.PathLike | ExperimentConfig, *, fresh: bool = False, progress: bool = True,
               out_dir: str | os.PathLike | None = None, retry_errors: bool = False) -> list[dict]:
    """Run (or resume) an experiment config and write its tables.

    Parameters
    ----------
    path : path or ExperimentConfig
        The TOML file (or an already parsed config).
    fresh : bool
        Start over: the old ``runs.jsonl`` is renamed to ``runs.jsonl.bak``.
    progress : bool
        Report progress on stderr: a tqdm bar on a terminal, else one line per run.
    out_dir : path, optional
        Overrides the config's ``out_dir`` (default ``results/<name>`` in the current
        directory).
    retry_errors : bool
        Run again the runs recorded with status ``error`` (the newest record wins).

    Returns
    -------
    list of dict
        One record per run of the config, in config order (the newest record of a key).
    """
    cfg = path if isinstance(path, ExperimentConfig) else load_config(path)
    out = Path(out_dir) if out_dir is not None else (cfg.out_dir or Path("results") / cfg.name)
    done = execute(list(cfg.specs), out / "runs.jsonl", name=cfg.name, fresh=fresh, progress=progress,
                   retry_errors=retry_errors)
    records = [done[s.key] for s in cfg.specs if s.key in done]
    write_tables(cfg, records, out)
    return records


# ---------------------------------------------------------------------------- tables
def _short_names(specs: list[RunSpec]) -> dict[str, str]:
    """Graph file stems where they are unique, else the full labels."""
    labels = sorted({s.graph_label for s in specs})
    stems = [Path(x).stem for x in labels]
    if len(set(stems)) == len(stems):
        return dict(zip(labels, stems, strict=True))
    return {x: x for x in labels}


def _row(spec: RunSpec, rec: dict, graph: str, options: str) -> dict[str, Any]:
    ev = rec.get("evaluation") or {}
    return {"graph": graph, "problem": spec.problem, "method": spec.method,
            "options": options, "status": rec.get("status"), "objective": rec.get("objective"),
            "bound": rec.get("bound"), "gap": rec.get("gap"), "eval_objective": ev.get("objective"),
            "feasible": ev.get("feasible"), "build_s": rec.get("build_seconds"), "solve_s": rec.get("solve_seconds")}


def _fmt_gap(v: float) -> str:
    return f"{100 * v:.2f}%"


def _fmt_seconds(v: float) -> str:
    return f"{v:.3f}"


_COLUMNS = [Column("graph"), Column("problem"), Column("method"), Column("options"), Column("status"),
            Column("objective", numeric=True), Column("bound", numeric=True),
            Column("gap", fmt=_fmt_gap, numeric=True), Column("eval_objective", numeric=True), Column("feasible"),
            Column("build_s", fmt=_fmt_seconds, numeric=True), Column("solve_s", fmt=_fmt_seconds, numeric=True)]


def write_tables(cfg: ExperimentConfig, records: list[dict], out: str | os.PathLike) -> Path:
    """Write ``table.md`` and ``table.csv`` (one row per run of ``cfg`` with a record);
    return the Markdown file's path."""
    by_key = {r["run_key"]: r for r in records}
    specs = [s for s in cfg.specs if s.key in by_key]
    items = [s.option_items() for s in specs]
    common = [b for b in items[0] if all(b in it for it in items)] if items else []
    short = _short_names(specs)
    rows = [_row(s, by_key[s.key], short[s.graph_label], " ".join(b for b in it if b not in common))
            for s, it in zip(specs, items, strict=True)]
    preamble = [cfg.description.strip()] if cfg.description else []
    preamble.append("Times in the graphs' unit (ms for the bundled workloads); gap = |objective - bound| / "
                    "|objective|; eval_objective is the independent evaluator's score.")
    if common:
        preamble.append(f"Options of every run: {' '.join(common)}")
    errors = [(s, by_key[s.key]) for s in specs if by_key[s.key].get("status") == "error"]
    footer = ["Errors:", ""] + [f"- {s.graph_label} {s.problem} {s.method}: {rec.get('message')}"
                                for s, rec in errors] if errors else []
    return write_table(Path(out) / "table", cfg.name, _COLUMNS, rows, preamble=preamble, footer=footer)
