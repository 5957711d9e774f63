"""Reproductions of published tables: Tarnawski et al. (NeurIPS 2020) Tables 1, 3 and 4,
and Pesto's simulated experiments (:mod:`dnnplace.experiments.pesto`).

``dnnplace reproduce tarnawski-table1|tarnawski-table3|tarnawski-table4 [--quick]``
reads ``experiments/<name>.toml`` (the columns of the table: the method behind each and
its options) and the published rows (``experiments/reference/``), turns every cell into
a run of the one sweep driver (:func:`dnnplace.runner.execute`: each run through
:func:`dnnplace.registry.solve`, so every placement is re-scored by the independent
evaluator; records appended to ``results/<name>/runs.jsonl`` as they finish, so an
interrupted reproduction resumes), and writes ``results/<name>.md`` and ``.csv``: one
line per (row, column) with the published figure, ours, the difference and a note.
Nothing is dropped: a cell that was not run (``--quick``, method not listed, a size
limit of the config) or that failed says so.

``--quick`` (CI and tests) skips the IP columns, runs the exact DP only on rows with at
most ``quick_max_ideals`` ideals and runs a column with its ``quick_params`` and
``quick_warm_start`` (e.g. fewer local-search restarts); its runs and tables are named
``<name>-quick``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnnplace.config import RunSpec, graph_label_of
from dnnplace.data import reference_path, tarnawski_dir
from dnnplace.experiments.config import Key, Reproduction, Schema, load
from dnnplace.graphs.io import load_instance
from dnnplace.registry import all_methods
from dnnplace.runner import execute
from dnnplace.tables import Column, write_table

__all__ = ["Cell", "reproduce_table", "reproduce", "SCHEMA"]


@dataclass
class Cell:
    """One (row, column) of a reproduced table: the run behind it (``spec``), or why none
    (``note``); ``runtime_of``: a runtime cell showing another cell's wall time."""

    row: str
    column: str
    paper: Any
    exact: bool = False
    spec: RunSpec | None = None
    note: str = ""
    runtime_of: Cell | None = None
    ours: float | None = None
    seconds: float | None = None
    limited: bool = False  # a time-limited run that stopped before its gap target
    feasible: bool = True  # the evaluator accepted the placement (else scored, marked)
    extra: dict | None = None

    def diff(self) -> float | None:
        p = _number(self.paper, self.column)
        if p is None or self.ours is None:
            return None
        return self.ours - p

    def verdict(self) -> str:
        d = self.diff()
        if d is None:
            return ""
        if not self.feasible:
            return "infeasible"
        if self.exact:
            if f"{self.ours:.2f}" == f"{_number(self.paper):.2f}":
                return "match"
            return "match (±0.01)" if abs(d) <= 0.01 + 1e-9 else "MISMATCH"
        if self.column.startswith("runtime"):
            if self.limited:
                return "time limit"
            tol = _resolution(str(self.paper))  # the paper prints whole seconds / minutes
            return "same" if abs(d) <= tol else ("faster" if d < 0 else "slower")
        if abs(d) < 0.005 + 1e-9:
            return "same"
        return "better" if d < 0 else "worse"


def _duration(x: str) -> float | None:
    """Seconds in a published runtime such as ``"32m"``, ``"1s"``, ``">20m (1m*)"``, ``">1h (7m*)"``."""
    m = re.match(r"^\s*>?\s*([0-9.]+)\s*([smh])", x)
    if not m:
        return None
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def _resolution(x: str) -> float:
    """Half the unit of a printed runtime (``"0s"`` means under half a second)."""
    m = re.match(r"^\s*>?\s*[0-9.]+\s*([smh])", x)
    return 0.5 * {"s": 1, "m": 60, "h": 3600}[m.group(1)] if m else 0.0


def _number(x: Any, column: str = "") -> float | None:
    if isinstance(x, str) and column.startswith("runtime"):
        return _duration(x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, str):
        m = re.match(r"^\s*([0-9.]+)", x)
        if m:
            return float(m.group(1))
    return None


@functools.cache
def _reference() -> dict:
    return json.loads(reference_path("tarnawski-neurips20").read_text())


# ---------------------------------------------------------------------------- cells -> runs
def _cell(row: str, column: str, paper: Any, path: Path, problem: str, col: dict, quick: bool, *,
          exact: bool = False, skip: str | None = None, transform: str | None = None) -> Cell:
    """A cell and the run behind it, or the reason it has none."""
    cell = Cell(row, column, paper, exact=exact)
    method = col["method"]
    if skip:
        cell.note = skip
    elif method not in all_methods():
        cell.note = f"not run: method {method!r} is not listed"
    elif quick and col.get("skip_quick", False):
        cell.note = "not run (--quick)"
    else:
        params = dict(col.get("params", {}))  # with --quick, the loader has applied quick_params / quick_warm_start
        warm = col.get("warm_start")
        solver = {"time_limit": col.get("time_limit"), "rel_gap": col.get("rel_gap"), "threads": col.get("threads", 1)}
        cell.spec = RunSpec(graph=str(path), graph_label=graph_label_of(path), problem=problem, method=method,
                            contiguity=col.get("contiguity"), seed=int(col.get("seed", 0)), warm_start=warm,
                            transform=transform, solver=solver, params=params)
    return cell


def _fill(cell: Cell, rec: dict | None) -> None:
    """Our figure and notes from the run's record."""
    if rec is None:
        cell.note = cell.note or "not run: interrupted"
        return
    if rec.get("status") == "error":
        cell.note = f"error: {str(rec.get('message'))[:160]}"
        return
    spec = cell.spec
    ev = rec.get("evaluation") or {}
    cell.ours = ev.get("objective") if ev else rec.get("objective")
    cell.seconds = rec.get("wall_seconds")
    cell.extra = rec.get("extra") or {}
    notes = []
    if rec.get("status") not in ("optimal", "feasible", "infeasible", "memory_infeasible"):
        notes.append(f"status {rec.get('status')}")
    if spec.method == "ip":   # stopped short of its gap target, or with no bound at all
        gap = rec.get("gap")
        if gap is not None:
            notes.append(f"gap {100 * gap:.1f}%")
        cell.limited = rec.get("status") != "optimal" and (gap is None or gap > (spec.solver.get("rel_gap") or 0.0)
                                                           + 1e-9)
    if spec.warm_start and cell.extra.get("warm_start_objective") is not None:
        notes.append(f"start {spec.warm_start} {cell.extra['warm_start_objective']:.2f}")
    if ev and not ev.get("feasible", True):
        cell.feasible = False
        viol = ev.get("violations", [])
        notes.append("infeasible: " + "; ".join(viol[:2]) + (f" (+{len(viol) - 2} more)" if len(viol) > 2 else ""))
    if spec.method == "local-search":
        notes.append(f"{cell.extra.get('restarts')} restarts")
    if spec.method in ("dp", "dpl") and cell.extra.get("ideals") is not None:
        notes.append(f"{cell.extra['ideals']} " + ("ideals" if spec.method == "dp" else
                                                   "ideals of the linearised graph"))
    if "transform" in cell.extra:
        t = cell.extra["transform"]
        notes.append(f"grouped by {t.get('rule')} ({t.get('groups')} groups)")
    cell.note = ", ".join(filter(None, [cell.note, *notes]))


def _fmt(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, float) else str(x)


_COLUMNS = [Column("row"), Column("column"), Column("paper", fmt=_fmt, numeric=True),
            Column("ours", fmt=lambda x: f"{x:.2f}", numeric=True),
            Column("diff", fmt=lambda x: f"{x:+.2f}", numeric=True), Column("verdict"),
            Column("seconds", "our time (s)", fmt=lambda x: f"{x:.2f}", numeric=True), Column("note")]


def reproduce_table(name: str, title: str, cells: list[Cell], notes: list[str], *, quick: bool,
                    out_dir: str | Path | None = None, fresh: bool = False, progress: bool = True) -> Path:
    """Run the cells' specs through :func:`dnnplace.runner.execute` (resuming from
    ``<out>/<name>[-quick]/runs.jsonl``), fill the cells and write the table."""
    out = Path(out_dir) if out_dir is not None else Path("results")
    stem = name + ("-quick" if quick else "")
    specs = [c.spec for c in cells if c.spec is not None]
    done = execute(specs, out / stem / "runs.jsonl", name=stem, fresh=fresh, progress=progress)
    for c in cells:
        if c.spec is not None:
            _fill(c, done.get(c.spec.key))
        elif c.runtime_of is not None:
            c.ours, c.limited = c.runtime_of.seconds, c.runtime_of.limited
    from dnnplace.provenance import stamp

    cmd = f"dnnplace reproduce {name}" + (" --quick" if quick else "")
    preamble = [f"Generated by `{cmd}`, {stamp(done[s.key] for s in specs if s.key in done)}; "
                f"runs in `{stem}/runs.jsonl`. Times in ms "
                "per sample (TPS) or ms (latency), as in the paper; `verdict`: exact columns must `match`; "
                "heuristic columns say whether ours is `better`/`worse` (lower is better) than the published figure."]
    rows = [{"row": c.row, "column": c.column, "paper": c.paper, "ours": c.ours, "diff": c.diff(),
             "verdict": c.verdict(), "seconds": c.seconds, "note": c.note} for c in cells]
    exact = [c for c in cells if c.exact and c.verdict()]
    ok = sum(c.verdict().startswith("match") for c in exact)
    footer = [f"Exact cells matching the paper to its printed precision: {ok} of {len(exact)} run.", "",
              "## Notes", "", *[f"- {n}" for n in notes]]
    return write_table(out / stem, title, _COLUMNS, rows, preamble=preamble, footer=footer)


# ---------------------------------------------------------------------------- Table 1
def table1(cfg: Reproduction, quick: bool = False, out_dir: Path | None = None, **kw) -> Path:
    """Table 1: max-load (TPS) of every method on the 16 throughput workloads."""
    cells: list[Cell] = []
    for r in _reference()["table1_throughput"]:
        path = tarnawski_dir() / r["input"]
        row = f"{r['granularity']} {r['mode']} {r['model']}"
        for col, spec in cfg.methods.items():
            skip = None
            if spec["method"] == "dp" and cfg.max_ideals is not None and r["ideals"] > cfg.max_ideals:
                skip = f"not run (--quick: {r['ideals']} ideals; full run: see tarnawski-table1.md)"
            if spec.get("only") and r["granularity"] not in spec["only"]:
                skip = f"not run: the paper has no {col} split for {r['granularity']} graphs"
            if spec.get("max_nodes") and r["nodes"] > spec["max_nodes"] and not (quick and spec.get("skip_quick")):
                skip = (f"not run: {r['nodes']} nodes > max_nodes = {spec['max_nodes']} of this config "
                        "(time budget of the run)")
            cell = _cell(row, col, r["tps"].get(spec.get("paper", col)), path, "maxload", spec, quick,
                         exact=spec.get("exact", False), skip=skip)
            cells.append(cell)
            if spec["method"] == "dp":
                cells.append(Cell(row, "runtime dp (s)", r["runtime"]["dp_cpp"], runtime_of=cell,
                                  note="paper: authors' C++ on a Xeon E5-2673 v4; ours: numba DP incl. the DPL bound"))
            if spec["method"] == "ip":
                key = "ip_contiguous_gurobi" if spec.get("contiguity") != "none" else "ip_noncontiguous_gurobi"
                cells.append(Cell(row, f"runtime {col} (s)", r["runtime"][key], runtime_of=cell,
                                  note=f"paper: Gurobi 8.1, 4 cores, 20 min; ours: HiGHS, "
                                       f"{spec.get('time_limit')} s limit"))
    return reproduce_table(cfg.name, "Tarnawski et al. Table 1: max-load (time per sample) by method",
                           cells, list(cfg.notes), quick=quick, out_dir=out_dir, **kw)


# ---------------------------------------------------------------------------- Table 3
def table3(cfg: Reproduction, quick: bool = False, out_dir: Path | None = None, **kw) -> Path:
    """Table 3: DP on operator graphs vs on layer graphs contracted from them (the
    ``contract-layers`` transform of :mod:`dnnplace.graphs.transforms`)."""
    ref = _reference()
    inputs = {(r["model"], r["mode"]): r["input"] for r in ref["table1_throughput"] if r["granularity"] == "op"}
    dp = {"method": "dp"}
    cells: list[Cell] = []
    for r in ref["table3_operator_vs_layer"]:
        path = tarnawski_dir() / inputs[(r["model"], r["mode"])]
        row = f"{r['mode']} {r['model']}"
        cells.append(_cell(row, "dp operator graph", r["dp_operator_graph"], path, "maxload", dp, quick, exact=True))
        # the layer-graph optimum is exact for *our* grouping; it matches the paper only
        # where the grouping is the authors' (layerId present in the file)
        g = load_instance(path).graph
        by_id = g.layers is not None and any(x is not None for x in g.layers)
        cells.append(_cell(row, "dp contracted layer graph", r["dp_contracted_layer_graph"], path, "maxload", dp,
                           quick, exact=by_id, transform="contract-layers"))
    return reproduce_table(cfg.name, "Tarnawski et al. Table 3: DP on operator vs contracted layer graphs",
                           cells, list(cfg.notes), quick=quick, out_dir=out_dir, **kw)


# ---------------------------------------------------------------------------- Table 4
def _ideal_count(path: Path) -> int:
    from dnnplace.heuristics.ideals import build_dp_graph, enumerate_ideals

    h = build_dp_graph(load_instance(path).graph)
    return enumerate_ideals(h.n, h.src, h.dst).size


def table4(cfg: Reproduction, quick: bool = False, out_dir: Path | None = None, **kw) -> Path:
    """Table 4: single-sample latency of the baselines and the latency IP."""
    cells: list[Cell] = []
    for r in _reference()["table4_latency"]:
        path = tarnawski_dir() / r["input"]
        n = load_instance(path).graph.n
        row = r["input"].split("/", 1)[1].replace("Graphs/", " ").replace(".json", "")
        for col, spec in cfg.methods.items():
            paper = r["latency"].get(spec.get("paper", col))
            skip = None
            if spec.get("max_nodes") and n > spec["max_nodes"] and not quick:
                skip = (f"not run: {n} nodes > max_nodes = {spec['max_nodes']} of this config "
                        "(time budget of the run)")
            if spec["method"] == "dp" and cfg.max_ideals is not None and _ideal_count(path) > cfg.max_ideals:
                skip = "not run (--quick: too many ideals; full run: see tarnawski-table4.md)"
            if spec["method"] == "expert" and paper is None:
                skip = "not run: no expert split for this graph (none in the paper either)"
            cell = _cell(row, col, paper, path, "latency", spec, quick, skip=skip)
            cells.append(cell)
            if spec["method"] == "ip":
                cells.append(Cell(row, "runtime ip", r["ip_runtime_gurobi"], runtime_of=cell,
                                  note=f"paper: Gurobi, 1 h limit, certified gap {r['ip_certified_gap']}; "
                                       f"ours: {spec.get('time_limit')} s limit"))
    return reproduce_table(cfg.name, "Tarnawski et al. Table 4: single-sample latency by method", cells,
                           list(cfg.notes), quick=quick, out_dir=out_dir, **kw)


TABLES: dict[str, Callable[..., Path]] = {"table1": table1, "table3": table3, "table4": table4}

# Tarnawski's own keys of a reproduction config: the table (kind), a limit on the exact DP, and the
# keys of a method table (a column of the paper's table; methods, params, time_limit, rel_gap are common)
SCHEMA = Schema(kinds=tuple(TABLES), out_dir="results", options={
    "max_ideals": Key(int, None),            # the exact DP only on rows with at most this many ideals (None: all)
}, method_keys={
    "paper": Key(str),                       # the paper's column it is compared with (default: its label)
    "exact": Key(bool, False),               # must match the paper to its printed precision
    "contiguity": Key(str), "warm_start": Key(str), "seed": Key(int, 0), "threads": Key(int),
    "max_nodes": Key(int),                   # not run on larger graphs (time budget)
    "skip_quick": Key(bool, False),          # not run with --quick
    "only": Key(list, item=str),             # granularities the paper reports it for
})


def reproduce(name: str, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run one of Tables 1, 3 and 4 (``name`` is its config, ``tarnawski-table1`` ..., or a TOML file)."""
    cfg = load(name, quick=quick, module="tarnawski")
    return TABLES[cfg.kind](cfg, quick=quick, out_dir=cfg.out_dir if out_dir is None else out_dir, fresh=fresh,
                            progress=progress)
