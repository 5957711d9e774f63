"""Reproductions of Tarnawski et al. (NeurIPS 2020) Tables 1, 3 and 4.

``dnnplace reproduce tarnawski-table1|tarnawski-table3|tarnawski-table4 [--quick]``
reads ``experiments/<name>.toml`` (rows and columns of the table, methods and their
options), runs every cell through :func:`dnnplace.registry.solve` (so every placement
is re-scored by the independent evaluator), and writes ``results/<name>.md`` and
``results/<name>.csv``: one line per (row, column) with the published figure, ours,
the difference and a note. Nothing is dropped: a cell that was not run (``--quick``,
method not registered) or that failed says so.

``--quick`` (CI and tests) skips the IP columns, runs the exact DP only on rows with at
most ``quick_max_ideals`` ideals and runs a column with its ``quick_params`` (e.g. fewer
local-search restarts);
skipped cells are marked ``not run (--quick)``.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import platform
import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace import pesto_experiments
from dnnplace.data import experiment_config, reference_path, tarnawski_dir
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance
from dnnplace.registry import SolveRequest, SolverOptions, all_methods, solve
from dnnplace.runner import git_revision

__all__ = ["REPRODUCTIONS", "layer_labels", "contract_layers"]

ROOT = Path(__file__).resolve().parent.parent  # the checkout, for git provenance
WORKLOADS = tarnawski_dir()
REFERENCE = reference_path("tarnawski-neurips20")


@dataclass
class Cell:
    """One (row, column) of a reproduced table."""

    row: str
    column: str
    paper: Any
    ours: float | None = None
    seconds: float | None = None
    note: str = ""
    exact: bool = False
    limited: bool = False  # a time-limited run that stopped before its gap target
    feasible: bool = True  # the evaluator accepted the placement (else scored, marked)

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


def _config(name: str) -> dict:
    return tomllib.loads(experiment_config(name).read_text())


# ---------------------------------------------------------------------------- solving
def _run_cell(cell: Cell, inst: Instance, spec: dict, problem: str, quick: bool, extra_skip: str | None = None
              ) -> dict:
    """Fill ``cell`` by solving; returns the result's extra dict (empty if not run)."""
    method = spec["method"]
    if extra_skip:
        cell.note = extra_skip
        return {}
    if method not in all_methods():
        cell.note = f"not run: method {method!r} is not registered"
        return {}
    if quick and spec.get("skip_quick", False):
        cell.note = "not run (--quick)"
        return {}
    params = dict(spec.get("params", {}))
    if quick:
        params.update(spec.get("quick_params", {}))
    solver = SolverOptions(time_limit=spec.get("time_limit"), rel_gap=spec.get("rel_gap"),
                           threads=spec.get("threads", 1))
    warm = spec.get("quick_warm_start", spec.get("warm_start")) if quick else spec.get("warm_start")
    req = SolveRequest(problem, contiguity=spec.get("contiguity"), solver=solver, seed=spec.get("seed", 0),
                       warm_start=warm, params=params)
    t0 = time.perf_counter()
    try:
        res = solve(inst, method, req)
    except Exception as exc:  # a failed cell is reported, never hidden
        cell.note = f"error: {type(exc).__name__}: {str(exc)[:160]}"
        return {}
    cell.seconds = time.perf_counter() - t0
    ev = res.evaluation or {}
    cell.ours = ev.get("objective") if ev else res.objective
    notes = []
    if res.status not in ("optimal", "feasible"):
        notes.append(f"status {res.status}")
    if method == "ip" and res.gap is not None:
        notes.append(f"gap {100 * res.gap:.1f}%")
        cell.limited = res.gap > (spec.get("rel_gap") or 0.0) + 1e-9
    if spec.get("warm_start") and (res.extra or {}).get("warm_start_objective") is not None:
        notes.append(f"start {spec['warm_start']} {res.extra['warm_start_objective']:.2f}")
    if ev and not ev.get("feasible", True):
        cell.feasible = False
        viol = ev.get("violations", [])
        notes.append("infeasible: " + "; ".join(viol[:2]) + (f" (+{len(viol) - 2} more)" if len(viol) > 2 else ""))
    if method == "local-search":
        notes.append(f"{params.get('restarts', 10)} restarts")
    cell.note = ", ".join(notes)
    return res.extra or {}


# ---------------------------------------------------------------------------- output
def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.2f}"
    return str(x)


def _write(name: str, title: str, cells: list[Cell], notes: list[str], out_dir: Path | None, quick: bool) -> Path:
    out = Path(out_dir) if out_dir is not None else Path("results")
    out.mkdir(parents=True, exist_ok=True)
    stem = name + ("-quick" if quick else "")
    fields = ["row", "column", "paper", "ours", "diff", "verdict", "seconds", "note"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(fields)
    for c in cells:
        d = c.diff()
        w.writerow([c.row, c.column, "" if c.paper is None else c.paper,
                    "" if c.ours is None else f"{c.ours:.6f}", "" if d is None else f"{d:.6f}", c.verdict(),
                    "" if c.seconds is None else f"{c.seconds:.3f}", c.note])
    (out / f"{stem}.csv").write_text(buf.getvalue())
    lines = [f"# {title}", "", *_provenance(name, quick), "",
             "| row | column | paper | ours | diff | verdict | our time (s) | note |",
             "|---|---|---:|---:|---:|---|---:|---|"]
    for c in cells:
        d = c.diff()
        lines.append(f"| {c.row} | {c.column} | {_fmt(c.paper)} | {_fmt(c.ours)} | "
                     f"{'' if d is None else f'{d:+.2f}'} | {c.verdict()} | "
                     f"{'' if c.seconds is None else f'{c.seconds:.2f}'} | {c.note} |")
    n_exact = [c for c in cells if c.exact and c.verdict()]
    ok = sum(c.verdict().startswith("match") for c in n_exact)
    lines += ["", f"Exact cells matching the paper to its printed precision: {ok} of {len(n_exact)} run.", ""]
    lines += ["## Notes", ""] + [f"- {n}" for n in notes]
    path = out / f"{stem}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


@functools.cache
def _revision() -> str:
    """The git revision, read once per process (by the first row's write), so that a
    commit made while a long reproduction runs does not relabel its output."""
    return (git_revision(ROOT) or "unknown")[:7]


def _provenance(name: str, quick: bool) -> list[str]:
    rev = _revision()
    cmd = f"dnnplace reproduce {name}" + (" --quick" if quick else "")
    return [f"Generated by `{cmd}` at git {rev or 'unknown'} on {platform.node()} "
            f"({platform.machine()}, {platform.python_version()}), "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Times in ms per sample (TPS) "
            "or ms (latency), as in the paper; `verdict`: exact columns must `match`; heuristic "
            "columns say whether ours is `better`/`worse` (lower is better) than the published figure."]


# ---------------------------------------------------------------------------- Table 1
def _row_name(r: dict) -> str:
    return f"{r['granularity']} {r['mode']} {r['model']}"


def table1(quick: bool = False, out_dir: Path | None = None) -> Path:
    """Table 1: max-load (TPS) of every method on the 16 throughput workloads."""
    cfg = _config("tarnawski-table1")
    ref = json.loads(REFERENCE.read_text())["table1_throughput"]
    cells: list[Cell] = []
    for r in ref:
        inst = load_instance(WORKLOADS / r["input"])
        row = _row_name(r)
        for col, spec in cfg["columns"].items():
            cell = Cell(row, col, r["tps"].get(spec.get("paper", col)), exact=spec.get("exact", False))
            skip = None
            if spec["method"] == "dp" and quick and r["ideals"] > cfg.get("quick_max_ideals", 20000):
                skip = f"not run (--quick: {r['ideals']} ideals; full run: see tarnawski-table1.md)"
            if spec.get("only") and r["granularity"] not in spec["only"]:
                skip = f"not run: the paper has no {col} split for {r['granularity']} graphs"
            if spec.get("max_nodes") and r["nodes"] > spec["max_nodes"] and not (quick and spec.get("skip_quick")):
                skip = (f"not run: {r['nodes']} nodes > max_nodes = {spec['max_nodes']} of this config "
                        "(time budget of the run)")
            extra = _run_cell(cell, inst, spec, "maxload", quick, skip)
            cells.append(cell)
            if spec["method"] in ("dp", "dpl") and extra:
                what = "ideals" if spec["method"] == "dp" else "ideals of the linearised graph"
                cell.note = (cell.note + ", " if cell.note else "") + f"{extra.get('ideals')} {what}"
            if spec["method"] == "dp":
                rt = Cell(row, "runtime dp (s)", r["runtime"]["dp_cpp"], cell.seconds,
                          note="paper: authors' C++ on a Xeon E5-2673 v4; ours: numba DP incl. the DPL bound")
                rt.ours = None if cell.seconds is None else cell.seconds
                cells.append(rt)
            if spec["method"] == "ip":
                key = "ip_contiguous_gurobi" if spec.get("contiguity") != "none" else "ip_noncontiguous_gurobi"
                cells.append(Cell(row, f"runtime {col} (s)", r["runtime"][key], cell.seconds,
                                  note=f"paper: Gurobi 8.1, 4 cores, 20 min; ours: HiGHS, "
                                       f"{spec.get('time_limit')} s limit", limited=cell.limited))
        _write("tarnawski-table1", "Tarnawski et al. Table 1 (in progress)", cells, [], out_dir, quick)
    return _write("tarnawski-table1", "Tarnawski et al. Table 1: max-load (time per sample) by method", cells,
                  cfg.get("notes", []), out_dir, quick)


# ---------------------------------------------------------------------------- Table 3
def _between(g: OpGraph, members: np.ndarray, part: np.ndarray) -> np.ndarray:
    """Nodes outside ``members`` on a path between two members, within the subgraph
    induced by ``part`` (empty iff ``members`` is contiguous, Definition 3.1)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    keep = part[g.src] & part[g.dst]
    n = g.n
    fwd = csr_matrix((np.ones(int(keep.sum())), (g.src[keep], g.dst[keep])), shape=(n + 1, n + 1)).tolil()
    # a virtual root n linked to every member: reachable sets in one BFS
    fwd[n, members] = 1
    fwd = fwd.tocsr()
    down = breadth_first_order(fwd, n, directed=True, return_predecessors=False)
    bwd = csr_matrix((np.ones(int(keep.sum())), (g.dst[keep], g.src[keep])), shape=(n + 1, n + 1)).tolil()
    bwd[n, members] = 1
    up = breadth_first_order(bwd.tocsr(), n, directed=True, return_predecessors=False)
    between = np.intersect1d(down[down < n], up[up < n])
    return np.setdiff1d(between, members)


def layer_labels(g: OpGraph) -> tuple[np.ndarray, str]:
    """Group operators into layers.

    Where the file gives ``layerId``: one group per id, except that a layer with
    operators of *another layer* on a path between two of its operators (per part for
    training graphs) is left ungrouped, since contracting it would swallow the layers
    between its pieces (BERT-12's ``layerId`` 13 holds both the embedding and the
    pooler/classifier); nodes without an id stay alone, as in the authors' driver (the
    DP's SCC contraction absorbs those lying inside a layer). Without ``layerId``: chains, i.e. an edge
    ``u -> v`` with ``u`` having one successor and ``v`` one predecessor is merged
    (Conv -> BatchNorm -> ReLU collapses into one layer). Returns labels and the rule.
    """
    if g.layers is not None and any(x is not None for x in g.layers):
        lay = np.array([-1 if x is None else hash(str(x)) for x in g.layers], dtype=np.int64)
        labels = np.arange(g.n, dtype=np.int64)
        dropped = []
        for key in np.unique(lay[lay != -1]):
            members = np.flatnonzero(lay == key)
            parts = [~g.backward, g.backward] if g.is_training else [np.ones(g.n, bool)]
            inner = [_between(g, np.intersect1d(members, np.flatnonzero(pt)), pt) for pt in parts
                     if np.intersect1d(members, np.flatnonzero(pt)).size]
            if not any((lay[b] != -1).any() for b in inner):
                labels[members] = members[0]
            else:
                dropped.append(g.layers[members[0]])
        rule = "layerId" + (f" (non-contiguous layer(s) {sorted(map(str, dropped))} left ungrouped)"
                            if dropped else "")
        return np.unique(labels, return_inverse=True)[1].astype(np.int64), rule
    outdeg = np.bincount(g.src, minlength=g.n)
    indeg = np.bincount(g.dst, minlength=g.n)
    chain = (outdeg[g.src] == 1) & (indeg[g.dst] == 1) & (g.backward[g.src] == g.backward[g.dst])
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    adj = coo_matrix((np.ones(int(chain.sum())), (g.src[chain], g.dst[chain])), shape=(g.n, g.n))
    return connected_components(adj, directed=False)[1].astype(np.int64), "chains"


def contract_layers(inst: Instance) -> tuple[Instance, str]:
    """The layer graph of an operator graph: layers merged into colocation classes
    (so the DP contracts them, forward and backward parts separately, Appendix B)."""
    g = inst.graph
    lab, rule = layer_labels(g)
    # merge layers with the existing colocation classes
    base = np.where(g.colocation >= 0, g.colocation, -1)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = g.n
    rows, cols = [np.arange(n)], [lab + n]
    has = base >= 0
    rows.append(np.flatnonzero(has))
    cols.append(base[has] + n + int(lab.max()) + 1)
    r, c = np.concatenate(rows), np.concatenate(cols)
    size = n + int(lab.max()) + 1 + (int(base.max()) + 1 if has.any() else 0)
    comp = connected_components(coo_matrix((np.ones(r.size), (r, c)), shape=(size, size)), directed=False)[1][:n]
    comp = np.unique(comp, return_inverse=True)[1]
    g2 = g.with_(colocation=comp, colocation_labels=tuple(range(int(comp.max()) + 1)))
    return Instance(g2, inst.cluster, inst.source), rule


def table3(quick: bool = False, out_dir: Path | None = None) -> Path:
    """Table 3: DP on operator graphs vs on layer graphs contracted from them."""
    cfg = _config("tarnawski-table3")
    ref = json.loads(REFERENCE.read_text())
    inputs = {(r["model"], r["mode"]): r["input"] for r in ref["table1_throughput"] if r["granularity"] == "op"}
    cells: list[Cell] = []
    dp = {"method": "dp"}
    for r in ref["table3_operator_vs_layer"]:
        inst = load_instance(WORKLOADS / inputs[(r["model"], r["mode"])])
        row = f"{r['mode']} {r['model']}"
        c1 = Cell(row, "dp operator graph", r["dp_operator_graph"], exact=True)
        _run_cell(c1, inst, dp, "maxload", quick)
        cells.append(c1)
        coarse, rule = contract_layers(inst)
        # the layer-graph optimum is exact for *our* grouping; it matches the paper only
        # where the grouping is the authors' (layerId present)
        c2 = Cell(row, "dp contracted layer graph", r["dp_contracted_layer_graph"], exact=rule.startswith("layerId"))
        _run_cell(c2, coarse, dp, "maxload", quick)
        n_layers = int(np.unique(coarse.graph.colocation).size)
        c2.note = (c2.note + ", " if c2.note else "") + f"grouped by {rule} ({n_layers} groups)"
        cells.append(c2)
    return _write("tarnawski-table3", "Tarnawski et al. Table 3: DP on operator vs contracted layer graphs", cells,
                  cfg.get("notes", []), out_dir, quick)


# ---------------------------------------------------------------------------- Table 4
def _ideal_count(inst: Instance) -> int:
    from dnnplace.heuristics.ideals import build_dp_graph, enumerate_ideals

    h = build_dp_graph(inst.graph)
    return enumerate_ideals(h.n, h.src, h.dst).size


def table4(quick: bool = False, out_dir: Path | None = None) -> Path:
    """Table 4: single-sample latency of the baselines and the latency IP."""
    cfg = _config("tarnawski-table4")
    ref = json.loads(REFERENCE.read_text())["table4_latency"]
    cells: list[Cell] = []
    for r in ref:
        inst = load_instance(WORKLOADS / r["input"])
        row = r["input"].split("/", 1)[1].replace("Graphs/", " ").replace(".json", "")
        for col, spec in cfg["columns"].items():
            paper = r["latency"].get(spec.get("paper", col))
            cell = Cell(row, col, paper)
            skip = None
            if spec.get("max_nodes") and inst.graph.n > spec["max_nodes"] and not quick:
                skip = (f"not run: {inst.graph.n} nodes > max_nodes = {spec['max_nodes']} of this config "
                        "(time budget of the run)")
            if spec["method"] == "dp" and quick and _ideal_count(inst) > cfg.get("quick_max_ideals", 20000):
                skip = "not run (--quick: too many ideals; full run: see tarnawski-table4.md)"
            if spec["method"] == "expert" and paper is None:
                skip = "not run: no expert split for this graph (none in the paper either)"
            _run_cell(cell, inst, spec, "latency", quick, skip)
            cells.append(cell)
            if spec["method"] == "ip":
                cells.append(Cell(row, "runtime ip", r["ip_runtime_gurobi"], cell.seconds,
                                  note=f"paper: Gurobi, 1 h limit, certified gap {r['ip_certified_gap']}; "
                                       f"ours: {spec.get('time_limit')} s limit", limited=cell.limited))
        _write("tarnawski-table4", "Tarnawski et al. Table 4 (in progress)", cells, [], out_dir, quick)
    return _write("tarnawski-table4", "Tarnawski et al. Table 4: single-sample latency by method", cells,
                  cfg.get("notes", []), out_dir, quick)


REPRODUCTIONS: dict[str, Callable[..., Path]] = {
    "tarnawski-table1": table1,
    "tarnawski-table3": table3,
    "tarnawski-table4": table4,
    **{name: functools.partial(pesto_experiments.reproduce, name) for name in pesto_experiments.EXPERIMENTS},
}
