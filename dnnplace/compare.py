"""Compare methods, MIP backends and instances: ``dnnplace compare RESULTS...``.

Reads sweep records (``runs.jsonl`` files, or folders holding one) and single results
(``dnnplace solve --out`` JSON files), keeps the newest record of each run, and writes,
beside them or into ``--out``:

- ``compare.md`` / ``compare.csv``: one row per run, keyed by **instance, problem and
  cluster** (a 2-GPU and a 4-GPU run of one graph are different rows; a graph's rows
  line up whatever the problem), method and backend, with **where the answer came from**
  (``Result.answer_from``: the method, its warm start, a never-worse rival or a fallback
  split), the re-scored objective, the **lower bound** (the larger of the solver's proven bound
  and the instance's own bound, ``Result.lower_bound``: so heuristics have one too), the
  **certified gap** ``|objective - lower bound| / |objective|``
  (:func:`dnnplace.results.relative_gap`), the solver's own bound, the time to a 10 % and
  a 1 % gap, the status and the solve time; under it, **objectives by method**: one line
  per instance, problem and cluster, every method's objective beside the instance's lower bound
  and the best method's certified gap, then a summary per backend;
- ``objective.png``: every method's objective divided by the instance's lower bound,
  one row per instance, problem and cluster (1 = the bound; hollow markers: answers on a
  transformed graph, for which the input's critical-path bound does not hold);
- ``profile.png``: a performance profile over methods (Dolan and Moré): the fraction
  of the instances a method ran on which its objective is within a factor ``tau`` of
  the best objective any method found there (methods with identical curves share one
  line, named together in its legend entry);
- ``trace-<instance>-<cluster>-<method>.png``: for solvers, incumbent (solid) and bound
  (dashed) over time, step plots on a log time axis, the backends of one instance
  overlaid; ``runs/<...>-<backend>.png`` the same per run; ``gap-profile.png``: per
  solver, the fraction of its runs brought to a gap <= x within time t (x = 10 %, 1 %,
  0.01 %), panels per set of instances that the same solvers ran; a panel in which no
  run ever reaches its gap is left out (the figure says which), neighbouring gaps with
  the same curves share one panel, and there is no figure when no panel is left.

Every file is written atomically (:func:`dnnplace.graphs.io.write_atomic`), and the
output folder is made only when a file is written into it.

Times are the solver's clock from the start of its solve (trace times; model building
and hand-off come on top, see ``build_s``). "Time to x" is the first trace point whose
gap ``|incumbent - bound| / |incumbent|`` is at most x, or the solve time when the run
ended with a certified gap at most x; empty when it never got there. Runs of methods
without a solver (heuristics) have backend ``-`` and no times.

The records and the rows made of them are :mod:`dnnplace.compare_records`'s, the plots
:mod:`dnnplace.compare_plots`'s; this module writes the tables and puts them together.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dnnplace.compare_plots import plot_gap_profile, plot_method_profile, plot_objectives, plot_traces
from dnnplace.compare_records import GAPS, load_records, method_rows, pct, rows
from dnnplace.tables import Column, fixed, percent, write_table

__all__ = ["compare"]


def _columns() -> list[Column]:
    cols = [Column("instance"), Column("problem"), Column("cluster"), Column("method"), Column("backend"),
            Column("status"), Column("answer_from", "answer from"), Column("objective", numeric=True),
            Column("lower_bound", "lower bound", numeric=True),
            Column("certified_gap", "certified gap", fmt=percent(2), numeric=True),
            Column("bound", "solver bound", numeric=True), Column("transformed")]
    cols += [Column(f"t_{pct(g)}", f"t to {pct(g)} (s)", fmt=fixed(2), numeric=True) for g in GAPS]
    cols += [Column("solve_s", "solve s", fmt=fixed(2), numeric=True), Column("build_s", "build s", fmt=fixed(2),
                                                                           numeric=True),
             Column("time_limit", "limit s", fmt=lambda v: f"{v:g}", numeric=True), Column("message")]
    return cols


def _summary(table: list[dict]) -> list[str]:
    """Per backend: runs, proved optimal, within 1 %, best objective on how many of the
    instances it shares with another backend."""
    by_inst: dict[tuple, dict[str, dict]] = {}
    for r in table:
        if r["backend"] != "-":
            by_inst.setdefault((r["instance"], r["problem"], r["cluster"], r["method"]), {})[r["backend"]] = r
    if not by_inst:
        return []
    backends = sorted({b for d in by_inst.values() for b in d})
    lines = ["Per backend (MIP runs): runs; proved optimal; certified gap <= 1 %; best objective (ties count) "
             "among the instances it shares with another backend; errors.", "",
             "| backend | runs | optimal | gap <= 1 % | best where shared | errors |", "|---|---:|---:|---:|---:|---:|"]
    for b in backends:
        mine = [d[b] for d in by_inst.values() if b in d]
        opt = sum(1 for r in mine if r["status"] == "optimal")
        one = sum(1 for r in mine if r["certified_gap"] is not None and r["certified_gap"] <= 0.01 + 1e-12)
        err = sum(1 for r in mine if r["status"] == "error")
        shared = best = 0
        for d in by_inst.values():
            if b in d and len(d) > 1:
                shared += 1
                vals = [r["objective"] for r in d.values() if r["objective"] is not None
                        and r["status"] in ("optimal", "feasible")]
                mine_v = d[b]["objective"] if d[b]["status"] in ("optimal", "feasible") else None
                if mine_v is not None and vals and mine_v <= min(vals) * (1 + 1e-6) + 1e-9:
                    best += 1
        lines.append(f"| {b} | {len(mine)} | {opt} | {one} | {best} of {shared} | {err} |")
    return lines


def _method_lines(methods: list[str], table: list[dict]) -> list[str]:
    """The objectives-by-method table (:func:`method_rows`) as Markdown lines."""
    if not table:
        return []
    head = ["instance", "problem", "cluster", *methods, "lower bound", "best", "best's gap"]
    lines = ["## Objectives by method", "",
             "One line per instance, problem and cluster: every method's objective (empty: no answer, or not run), the "
             "instance's lower bound (critical path of least times and busiest device's work share for a makespan, "
             "the work share for a max-load, the critical path for a latency; a solver's own bound is in the table "
             "above), and the best method with its certified gap against that bound. Answers on a transformed graph "
             "(marked *) are not ranked: the input's critical-path bound does not hold for them.", "",
             "| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * len(methods) + "---:|---|---:|"]

    def num(v: Any) -> str:
        return "" if v is None else f"{v:.2f}"

    for r in table:
        cells = [num(r.get(m)) + ("*" if m in r["transformed"] and r.get(m) is not None else "") for m in methods]
        gap = r.get("best_gap")
        lines.append("| " + " | ".join([r["instance"], r["problem"], r["cluster"], *cells, num(r.get("lower_bound")),
                                        r.get("best") or "", "" if gap is None else f"{100 * gap:.2f}%"]) + " |")
    return lines + [""]


# ---------------------------------------------------------------------------- entry
def compare(paths: Sequence[str | os.PathLike], out: str | os.PathLike | None = None, *,
            plots: bool = True) -> tuple[Path, list[Path]]:
    """Write ``compare.md``/``compare.csv`` (and the plots) for the runs in ``paths``
    into ``out`` (default: the first results folder, or the folder of the first result
    file); return the Markdown file and the PNGs written."""
    records = load_records(paths)
    first = Path(paths[0])
    out = Path(out) if out is not None else (first if first.is_dir() else first.parent)  # made when written to
    table = rows(records)
    methods, mtable = method_rows(records)
    srcs = ", ".join(str(p) for p in paths)
    keys = {(r["instance"], r["problem"], r["cluster"]) for r in table}
    preamble = [f"Runs from {srcs}: {len(records)} runs of {len({r['method'] for r in table})} method(s) on "
                f"{len(keys)} instance/problem/cluster triple(s).",
                "lower bound = the larger of the solver's proven bound (solver bound) and the instance's own lower "
                "bound (every method has one); certified gap = |objective - lower bound| / |objective|, objective "
                "re-scored by the evaluator; t to x = solver seconds until the gap was at most x (trace), empty if "
                "never; times exclude model building (build s) and hand-off; transformed = the answer is for a graph "
                "the method built from the input (its lower bound is the input's work share only); answer from = "
                "where the answer came from: the method itself, its warm start, a never-worse rival or a fallback "
                "split (e.g. an IP whose build ran out of time)."]
    md = write_table(out / "compare", "Method comparison", _columns(), table, preamble=preamble,
                     footer=_method_lines(methods, mtable) + _summary(table))
    pngs: list[Path] = []
    if plots:
        for draw in (plot_objectives, plot_method_profile):
            path = draw(records, out)
            if path is not None:
                pngs.append(path)
        pngs += plot_traces(records, out)
        prof = plot_gap_profile(records, out)
        if prof is not None:
            pngs.append(prof)
    return md, pngs
