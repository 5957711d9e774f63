"""The one sweep driver: :class:`~dnnplace.config.RunSpec` runs -> :func:`dnnplace.registry.solve`
-> ``runs.jsonl`` -> tables.

Experiment configs (``dnnplace run``) and reproductions (``dnnplace reproduce``) both
run through :func:`execute`. The contract of ``<out>/runs.jsonl``:

- **One line per run key.** A finished run is appended as one JSON line, flushed and
  fsynced, so an interrupted sweep loses at most the run in progress; a second
  invocation skips every key already recorded and goes on. ``retry_errors`` runs the
  ``error`` records again and the new record *replaces* the old line (the file is
  rewritten atomically: a temporary file in the same folder, fsynced, then renamed), so
  the file never holds two records for one key and keeps no history; a file written by
  an older version with repeated keys is compacted the same way on the next run (the
  newest record of a key wins, with a warning). History is what ``fresh`` keeps.
- **Visible repairs.** A half-written last line (a crash in the middle of a write) is
  cut off on resume with one warning on stderr naming the file, the line and the bytes
  dropped; its run is simply run again. A complete last line that only lacks its
  newline is kept.
- **Interrupts.** Ctrl-C (:class:`KeyboardInterrupt`, also when it arrives inside a
  solver: :mod:`dnnplace.formulations.solvers.driver`) stops the sweep; the run in progress is
  not recorded, never as an error; the CLI exits 130 and the same command resumes.
- **Failures.** A run that raises any other exception is recorded with ``status:
  "error"`` and the sweep continues.
- **Executors.** Runs execute inline (default), in local worker processes or on a Ray
  cluster (:mod:`dnnplace.sweeps`); only this driver appends to the file, so all of
  the above holds for each. A killed driver or worker loses at most the runs in flight;
  a run that hangs past its time limit plus a margin is recorded as an ``error`` with
  termination ``cancelled``.
- **One sweep per file.** A sweep holds an exclusive lock on ``runs.jsonl.lock``
  beside the file (:func:`sweep_lock`) while it reads and appends; a second ``dnnplace
  run`` on the same file waits for it (saying so), then skips every key it finds, so two
  sweeps never run one key twice.
- **fresh** starts over: ``runs.jsonl`` and the ``table.md``/``table.csv`` beside it are
  renamed to ``<name>.<UTC time>.bak`` (e.g. ``runs.jsonl.20261123T170000Z.bak``); no
  backup is ever overwritten, and a killed fresh run leaves no earlier table looking
  current.

At the end of a config, ``table.md`` and ``table.csv`` summarise its runs.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

from dnnplace.config import RECORDS_ONLY, ExperimentConfig, RunSpec, load_config
from dnnplace.graphs.io import jsonable
from dnnplace.provenance import git_revision
from dnnplace.results import answer_from_of
from dnnplace.runs_file import (
    append_record,
    compact,
    fresh_start,
    read_runs,
    replace_record,
    sweep_lock,
    warn,
)
from dnnplace.runtime.termination import Termination
from dnnplace.sweeps import DEFAULT_MARGIN, Executor, Inline, Task, hang_deadline
from dnnplace.tables import Column, fixed, percent, write_table

__all__ = ["execute", "run_config", "read_runs", "sweep_lock", "git_revision", "environment", "write_tables",
           "progress_enabled"]

# ---------------------------------------------------------------------------- provenance


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
            "packages": {p: _pkg_version(p) for p in ("numpy", "scipy", "pyomo", "highspy", "gurobipy", "pyscipopt")}}


_SOLVER_PACKAGES = {"highs": "highspy", "appsi_highs": "highspy", "gurobi": "gurobipy", "gurobi_direct": "gurobipy",
                    "gurobi_persistent": "gurobipy", "appsi_gurobi": "gurobipy", "scip": "pyscipopt",
                    "scip_direct": "pyscipopt", "scip_persistent": "pyscipopt"}


def _execute(spec: RunSpec) -> dict:
    """Run one spec; any exception except an interrupt becomes an ``error`` result."""
    from dnnplace.formulations.solvers.progress import quiet
    from dnnplace.graphs.io import prepare_instance
    from dnnplace.graphs.transforms.replay import apply_transform
    from dnnplace.registry import solve
    from dnnplace.results import Result

    try:
        with quiet():  # the sweep's own bar (or lines) reports progress, not each solve
            inst = prepare_instance(spec.graph, spec.cluster)
            if spec.transform is None:
                res = solve(inst, spec.method, spec.request())
            else:
                inst, t = apply_transform(spec.transform, inst)  # the result is for the transformed graph
                res = solve(inst, spec.method, spec.request())
                res.extra["transform"] = t.record()
        if res.status == "error" and res.termination is Termination.LICENCE:  # say the licence's limits too
            from dnnplace.formulations.solvers.options import licence_message

            res.message = licence_message(res.message, str(spec.solver.get("solver", "highs")))
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
            progress: bool = True, retry_errors: bool = False, executor: Executor | None = None,
            margin: float = DEFAULT_MARGIN) -> dict[str, dict]:
    """Run every spec whose key ``runs_path`` does not hold yet; return the newest record
    of every key, finished or found (the one sweep driver: experiment configs and
    reproductions both run through it).

    Each record is the :class:`~dnnplace.results.Result` of :func:`dnnplace.registry.solve`
    plus the run key, its identity, git revision, solver package and version, the
    environment and a timestamp, appended and fsynced as soon as the run ends (the file
    contract, one line per key, is in the module docstring). ``fresh`` first renames
    ``runs.jsonl`` and the ``table.md``/``table.csv`` beside it to timestamped ``.bak``
    files; ``retry_errors`` runs the ``error`` records again, each new record replacing
    the old line.

    ``executor`` (:mod:`dnnplace.sweeps`; default inline, one run at a time in this
    process) decides where the runs execute; this function alone writes the file, so
    the contract holds for every executor. Each record says where it ran (``host``,
    ``executor``). With a worker executor a run still going ``margin`` seconds past its
    time limit (:func:`~dnnplace.sweeps.hang_deadline`) is killed and recorded as an
    ``error`` with termination ``cancelled``; a run whose worker died is not recorded
    (a warning names it) and the next invocation runs it again.
    """
    runs_path = Path(runs_path)
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    with sweep_lock(runs_path, name):
        return _execute_locked(specs, runs_path, name=name, fresh=fresh, progress=progress,
                               retry_errors=retry_errors, executor=executor, margin=margin)


def _execute_locked(specs: list[RunSpec], runs_path: Path, *, name: str, fresh: bool, progress: bool,
                    retry_errors: bool, executor: Executor | None, margin: float) -> dict[str, dict]:
    """:func:`execute` while this process holds the sweep lock of ``runs_path``."""
    if fresh:
        moved = fresh_start(runs_path)
        if moved:
            print(f"{name}: starting over; the previous results are kept in {runs_path.parent}/ as "
                  f"{', '.join(m.name for m in moved)}", file=sys.stderr, flush=True)
    found = read_runs(runs_path, repair=True)
    compact(runs_path, found)
    done = {r["run_key"]: r for r in found}
    unique = list({s.key: s for s in specs}.values())
    todo = [s for s in unique if s.key not in done or (retry_errors and done[s.key].get("status") == "error")]
    if todo and RECORDS_ONLY.get():
        from dnnplace.graphs.errors import InputError

        raise InputError(f"{name}: {len(todo)} of {len(unique)} runs have no record in {runs_path} (first: "
                         f"{todo[0].key}); re-rendering runs nothing")
    rev = git_revision()
    env = environment()
    from dnnplace.provenance import provenance

    prov = provenance() if todo else None  # once per sweep: its load is the load at the start
    from tqdm import tqdm

    total = len(unique)
    executor = executor or Inline()
    show_bar = progress_enabled(progress)
    log = bool(progress) and not show_bar  # not a terminal: one line per run instead of a bar
    if executor.parallel and todo:
        warn(f"{name}: {len(todo)} runs on {executor.kind} executor {executor.describe()}: runs side by side "
              "perturb each other's measured solve times (and a time-limited MIP's incumbent); use --jobs 1 for "
              "timing tables")
    bar = tqdm(total=total, initial=total - len(todo), desc=name, unit="run", disable=not show_bar,
               file=sys.stderr, dynamic_ncols=True)
    if log and len(todo) < total:
        print(f"{name}: {total - len(todo)} of {total} runs already in {runs_path}", file=sys.stderr)
    tasks = [Task(s.key, s, slots=int(s.solver.get("threads") or 1),
                  deadline=hang_deadline(s.solver.get("time_limit"), margin)) for s in todo]
    where = executor.describe()
    lost: list[RunSpec] = []
    count = total - len(todo)
    try:
        for fin in executor.run(_execute, tasks):
            spec = fin.task.payload
            if fin.outcome == "died":
                lost.append(spec)
                warn(f"{name}: {spec.key}: {fin.message}; not recorded, the same command runs it again")
                continue
            if fin.outcome == "done":
                rec = fin.value
            else:  # hung (cancelled at its deadline) or raised outside the run's own error handling
                from dnnplace.results import Result

                rec = Result(problem=spec.problem, method=spec.method, instance=spec.graph_label, status="error",
                             termination=Termination.CANCELLED if fin.outcome == "hung" else Termination.ERROR,
                             message=fin.message, wall_seconds=fin.seconds).to_dict()
            pkg = _SOLVER_PACKAGES.get(str(spec.solver.get("solver", "highs")))
            rec = {"run_key": spec.key, "config": name, "run": spec.identity(), **jsonable(rec),
                   "git_revision": rev, "solver_package": pkg, "solver_package_version": _pkg_version(pkg) if pkg
                   else None, "environment": env, "host": fin.host, "executor": where,
                   "timestamp": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "provenance": prov}
            if spec.key in done:  # a retried error: the new record replaces its line
                replace_record(runs_path, rec)
            else:
                append_record(runs_path, rec)
            done[spec.key] = rec
            count += 1
            bar.set_postfix_str(f"{Path(spec.graph_label).stem} {spec.problem} {spec.method}", refresh=False)
            bar.update(1)
            if log:
                obj = rec.get("objective")
                what = rec.get("message") if rec.get("status") == "error" else (
                    f"{obj:.6g}" if isinstance(obj, (int, float)) else "-")
                print(f"[{count}/{total}] {Path(spec.graph_label).stem} "
                      f"{spec.problem} {spec.method}: {rec.get('status')} {what} ({rec.get('wall_seconds', 0):.1f} s)",
                      file=sys.stderr, flush=True)
    finally:
        bar.close()
    if lost:
        warn(f"{name}: {len(lost)} run(s) not recorded because their worker died; run the same command again to "
              "run them")
    return done


def run_config(path: str | os.PathLike | ExperimentConfig, *, fresh: bool = False, progress: bool = True,
               out_dir: str | os.PathLike | None = None, retry_errors: bool = False,
               executor: Executor | None = None, margin: float = DEFAULT_MARGIN) -> list[dict]:
    """Run (or resume) an experiment config and write its tables.

    Parameters
    ----------
    path : path or ExperimentConfig
        The TOML file (or an already parsed config).
    fresh : bool
        Start over: the old ``runs.jsonl``, ``table.md`` and ``table.csv`` are renamed to
        timestamped backups (``runs.jsonl.<UTC time>.bak``; none is ever overwritten).
    progress : bool
        Report progress on stderr: a tqdm bar on a terminal, else one line per run.
    out_dir : path, optional
        Overrides the config's ``out_dir`` (default ``results/<name>`` in the current
        directory).
    retry_errors : bool
        Run again the runs recorded with status ``error`` (the new record replaces the
        old line: one line per run key).
    executor : Executor, optional
        Where the runs execute (:func:`dnnplace.sweeps.make_executor`); default one
        at a time in this process.
    margin : float
        Seconds past a run's time limit before a worker executor cancels it as hung.

    Returns
    -------
    list of dict
        One record per run of the config, in config order (the newest record of a key).
    """
    cfg = path if isinstance(path, ExperimentConfig) else load_config(path)
    out = Path(out_dir) if out_dir is not None else (cfg.out_dir or Path("results") / cfg.name)
    done = execute(list(cfg.specs), out / "runs.jsonl", name=cfg.name, fresh=fresh, progress=progress,
                   retry_errors=retry_errors, executor=executor, margin=margin)
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
            "options": options, "status": rec.get("status"), "answer_from": answer_from_of(rec),
            "objective": rec.get("objective"),
            "bound": rec.get("bound"), "gap": rec.get("gap"), "eval_objective": ev.get("objective"),
            "eval_lower_bound": ev.get("lower_bound"), "feasible": ev.get("feasible"),
            "build_s": rec.get("build_seconds"), "solve_s": rec.get("solve_seconds")}


_COLUMNS = [Column("graph"), Column("problem"), Column("method"), Column("options"), Column("status"),
            Column("answer_from", "answer from"), Column("objective", numeric=True), Column("bound", numeric=True),
            Column("gap", fmt=percent(2), numeric=True), Column("eval_objective", numeric=True),
            Column("eval_lower_bound", numeric=True), Column("feasible"),
            Column("build_s", fmt=fixed(3), numeric=True), Column("solve_s", fmt=fixed(3), numeric=True)]


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
                    "|objective|; eval_objective is the independent evaluator's score; eval_lower_bound (makespan) "
                    "the evaluator's bound that no schedule beats (critical path, busiest device's share of the "
                    "work).")
    if common:
        preamble.append(f"Options of every run: {' '.join(common)}")
    errors = [(s, by_key[s.key]) for s in specs if by_key[s.key].get("status") == "error"]
    footer = ["Errors:", ""] + [f"- {s.graph_label} {s.problem} {s.method}: {rec.get('message')}"
                                for s, rec in errors] if errors else []
    return write_table(Path(out) / "table", cfg.name, _COLUMNS, rows, preamble=preamble, footer=footer)
