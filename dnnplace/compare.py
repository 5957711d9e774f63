"""Compare runs across methods, MIP backends and instances: ``dnnplace compare RESULTS...``.

Reads the records of one or more ``runs.jsonl`` files (or folders holding one) and
writes, beside them or into ``--out``:

- ``compare.md`` / ``compare.csv``: one row per run, methods x backends x instances,
  with the re-scored objective, the solver's bound, the **certified gap**
  ``|objective - bound| / |objective|`` (:func:`dnnplace.results.relative_gap`: the
  evaluator's objective against the bound the solver proved), the time to a 10 % and a
  1 % gap, the status and the solve time; a summary per backend under it;
- ``trace-<instance>.png``: incumbent (solid) and bound (dashed) over time, step plots
  on a log time axis, the backends of one instance overlaid;
  ``runs/<instance>-<backend>.png`` the same per run;
- ``profile.png``: a performance profile per backend: the fraction of its runs brought
  to a gap <= x within time t (x = 10 %, 1 %, 0.01 %); one row of panels per set of
  instances that the same backends ran (so that like is compared with like).

Times are the solver's clock from the start of its solve (trace times; model building
and hand-off come on top, see ``build_s``). "Time to x" is the first trace point whose
gap ``|incumbent - bound| / |incumbent|`` is at most x, or the solve time when the run
ended there; empty when it never got there. Runs of methods without a solver (heuristics)
appear in the table with backend ``-`` and without times.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.results import relative_gap
from dnnplace.tables import Column, fixed, percent, write_table

__all__ = ["load_records", "rows", "time_to_gap", "compare", "GAPS", "PROFILE_GAPS"]

GAPS = (0.10, 0.01)
"""Gaps whose time-to columns the table has."""

PROFILE_GAPS = (0.10, 0.01, 1e-4)
"""Gaps of the performance profile's panels."""

_COLOURS = {"highs": "#1f77b4", "scip": "#2ca02c", "gurobi": "#d62728"}
_OTHER = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def load_records(paths: Sequence[str | os.PathLike]) -> list[dict]:
    """The records of each ``runs.jsonl`` named (a folder stands for the
    ``runs.jsonl`` in it), the newest record of each run key."""
    from dnnplace.runner import read_runs

    out: dict[str, dict] = {}
    for p in map(Path, paths):
        f = p / "runs.jsonl" if p.is_dir() else p
        if not f.is_file():
            raise InputError(f"{p}: no runs.jsonl there (give a results folder or a runs.jsonl file)")
        recs = read_runs(f)
        if not recs:
            raise InputError(f"{f}: no run records")
        for r in recs:
            out[r["run_key"]] = r
    return list(out.values())


def _backend(rec: dict) -> str:
    """The MIP backend of a run (``-`` for a method that used none)."""
    name = rec.get("solver") or ""
    if not name:
        return "-"
    name = str(name).lower()
    return "gurobi" if name.startswith("gurobi") else ("scip" if name.startswith("scip") else name)


def _instance(rec: dict) -> str:
    """Graph stem, and the problem where it is not max-load."""
    run = rec.get("run") or {}
    stem = Path(str(run.get("graph") or rec.get("instance") or "?")).stem
    problem = rec.get("problem") or run.get("problem") or "maxload"
    return stem if problem == "maxload" else f"{stem} {problem}"


def time_to_gap(rec: dict, gap: float) -> float | None:
    """Seconds until the run's gap was at most ``gap``: the first trace point
    ``(t, incumbent, bound)`` there, else the solve time when its final certified gap
    is; ``None`` if never.

    >>> rec = {"trace": [[0.5, 120.0, 80.0], [2.0, 100.0, 95.0]], "objective": 100.0, "bound": 99.5,
    ...        "solve_seconds": 3.0, "status": "feasible"}
    >>> time_to_gap(rec, 0.10), time_to_gap(rec, 0.01), time_to_gap(rec, 0.001)
    (2.0, 3.0, None)
    """
    for t, inc, bnd in rec.get("trace") or ():
        g = relative_gap(inc, bnd)
        if g is not None and g <= gap + 1e-12:
            return float(t)
    final = _certified(rec)
    if final is not None and final <= gap + 1e-12:
        return float(rec.get("solve_seconds") or 0.0)
    return None


def _certified(rec: dict) -> float | None:
    if rec.get("status") not in ("optimal", "feasible"):
        return None
    return relative_gap(rec.get("objective"), rec.get("bound"))


def rows(records: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per run, sorted by instance, method, backend."""
    out = []
    for r in records:
        row = {"instance": _instance(r), "method": r.get("method"), "backend": _backend(r),
               "status": r.get("status"), "objective": r.get("objective"), "bound": r.get("bound"),
               "certified_gap": _certified(r)}
        for g in GAPS:
            row[f"t_{_pct(g)}"] = time_to_gap(r, g) if row["backend"] != "-" else None
        row.update(solve_s=r.get("solve_seconds"), build_s=r.get("build_seconds"),
                   time_limit=((r.get("run") or {}).get("solver") or {}).get("time_limit"), message=_short(r))
        out.append(row)
    out.sort(key=lambda x: (x["instance"], str(x["method"]), x["backend"]))
    return out


def _short(rec: dict) -> str | None:
    if rec.get("status") != "error":
        return None
    msg = str(rec.get("message") or "")
    return msg if len(msg) <= 90 else msg[:87] + "..."


def _pct(g: float) -> str:
    return f"{100 * g:g}%"


def _columns() -> list[Column]:
    cols = [Column("instance"), Column("method"), Column("backend"), Column("status"),
            Column("objective", numeric=True), Column("bound", numeric=True),
            Column("certified_gap", "certified gap", fmt=percent(2), numeric=True)]
    cols += [Column(f"t_{_pct(g)}", f"t to {_pct(g)} (s)", fmt=fixed(2), numeric=True) for g in GAPS]
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
            by_inst.setdefault((r["instance"], r["method"]), {})[r["backend"]] = r
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


# ---------------------------------------------------------------------------- plots
def _colour(backend: str, order: list[str]) -> str:
    if backend in _COLOURS:
        return _COLOURS[backend]
    others = [b for b in order if b not in _COLOURS]
    return _OTHER[others.index(backend) % len(_OTHER)] if backend in others else "#000000"


def _series(rec: dict) -> tuple[list[float], list[float | None], list[float | None], float]:
    """Trace as step-plot series, with the final state appended at the solve time."""
    t0 = 1e-3  # a log axis has no 0
    ts, inc, bnd = [], [], []
    for t, i, b in rec.get("trace") or ():
        ts.append(max(float(t), t0))
        inc.append(i)
        bnd.append(b)
    end = max(float(rec.get("solve_seconds") or 0.0), ts[-1] if ts else t0, t0)
    if rec.get("status") in ("optimal", "feasible"):
        ts.append(end)
        inc.append(rec.get("objective") if not inc or inc[-1] is None else inc[-1])
        bnd.append(rec.get("bound") if rec.get("bound") is not None else (bnd[-1] if bnd else None))
    return ts, inc, bnd, end


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _draw_trace(ax: Any, recs: list[tuple[str, dict]], order: list[str]) -> bool:
    """Incumbent and bound steps of each (backend, record) on ``ax``; False if none has
    a trace point."""
    import numpy as np

    drawn = False
    finals = []
    for backend, rec in recs:
        ts, inc, bnd, end = _series(rec)
        if not ts:
            continue
        c = _colour(backend, order)
        for vals, style, what in ((inc, "-", "incumbent"), (bnd, "--", "bound")):
            pts = [(t, v) for t, v in zip(ts, vals) if v is not None]
            if not pts:
                continue
            x = [p[0] for p in pts] + [end]
            y = [p[1] for p in pts] + [pts[-1][1]]
            ax.step(x, y, where="post", color=c, linestyle=style, linewidth=2 if style == "-" else 1.6,
                    label=f"{backend} {what}")
            drawn = True
        if rec.get("objective") is not None:
            finals.append(float(rec["objective"]))
        if rec.get("bound") is not None:
            finals.append(float(rec["bound"]))
    if not drawn:
        return False
    ax.set_xscale("log")
    ax.set_xlabel("solver time (s, log scale)")
    ax.set_ylabel("objective (ms per sample)")
    if finals:  # frame the end game: starts far above and early bounds far below are cut, and said so
        lo, hi = min(finals), max(finals)
        width = max(hi - lo, 0.1 * max(abs(hi), 1e-9))
        ys = np.concatenate([np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()])
        ymin, ymax = float(np.nanmin(ys)), float(np.nanmax(ys))
        bottom, top = max(lo - width, ymin), min(hi + 1.5 * width, ymax)
        if ymin >= 0:
            bottom = max(bottom, 0.0)
        cut = [what for what, yes in (("incumbents start above", ymax > top), ("bounds start below", ymin < bottom))
               if yes]
        if cut:
            ax.annotate(" and ".join(cut) + " the frame", xy=(0.01, 0.98), xycoords="axes fraction", va="top",
                        fontsize=8, color="#555555")
        pad = 0.05 * max(top - bottom, 1e-9)
        ax.set_ylim(bottom - pad, top + pad)
    _plain_log_ticks(ax)
    ax.grid(True, which="both", alpha=0.3)
    return True


def _plain_log_ticks(ax: Any) -> None:
    """Seconds as plain numbers (0.1, 2, 20) on a log axis; the 2-9 ticks labelled only
    when the axis spans less than about a decade and a half."""
    import math

    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    lo, hi = ax.get_xlim()
    few = lo > 0 and math.log10(hi / lo) < 1.5
    ax.xaxis.set_minor_formatter(plain if few else NullFormatter())


def _plot_traces(table_recs: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    groups: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for r in table_recs:
        b = _backend(r)
        if b != "-":
            groups.setdefault((_instance(r), str(r.get("method"))), []).append((b, r))
    order = sorted({b for g in groups.values() for b, _ in g})
    methods = {m for _, m in groups}
    for (inst, method), recs in sorted(groups.items()):
        recs.sort(key=lambda x: x[0])
        name = inst if len(methods) == 1 else f"{inst}-{method}"
        fig, ax = plt.subplots(figsize=(9.5, 4.8), dpi=110)
        if _draw_trace(ax, recs, order):
            ax.set_title(f"{inst} ({method}): incumbent (solid) and bound (dashed)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            fig.tight_layout()
            path = out / f"trace-{_slug(name)}.png"
            fig.savefig(path)
            written.append(path)
        plt.close(fig)
        for b, rec in recs:
            fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=100)
            if _draw_trace(ax, [(b, rec)], order):
                gap = _certified(rec)
                ax.set_title(f"{inst} ({method}) on {b}: {rec.get('status')}"
                             + (f", certified gap {100 * gap:.2f}%" if gap is not None else ""))
                ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
                fig.tight_layout()
                (out / "runs").mkdir(exist_ok=True)
                path = out / "runs" / f"{_slug(name)}-{b}.png"
                fig.savefig(path)
                written.append(path)
            plt.close(fig)
    return written


def _plot_profile(table_recs: list[dict], out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # instances grouped by the backends that ran them: a profile compares like with like
    runs: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for r in table_recs:
        b = _backend(r)
        if b != "-":
            runs.setdefault((_instance(r), str(r.get("method"))), {}).setdefault(b, []).append(r)
    if not runs:
        return None
    groups: dict[tuple[str, ...], list[dict[str, list[dict]]]] = {}
    for by_b in runs.values():
        groups.setdefault(tuple(sorted(by_b)), []).append(by_b)
    order = sorted({b for key in groups for b in key})
    tmax = max(float(r.get("solve_seconds") or 0.0) for by_b in runs.values() for rs in by_b.values() for r in rs)
    tmax = max(tmax, 1e-2)
    keys = sorted(groups, key=lambda k: (-len(groups[k]), k))
    fig, axes = plt.subplots(len(keys), len(PROFILE_GAPS), figsize=(4.6 * len(PROFILE_GAPS), 3.6 * len(keys) + 0.6),
                             dpi=110, sharey=True, squeeze=False)
    for row, key in zip(axes, keys):
        insts = groups[key]
        for ax, g in zip(row, PROFILE_GAPS):
            for b in key:
                rs = [r for by_b in insts for r in by_b[b]]
                times = sorted(t for t in (time_to_gap(r, g) for r in rs) if t is not None)
                x = [1e-3] + [max(t, 1e-3) for t in times] + [tmax * 1.5]
                y = [0.0] + [(k + 1) / len(rs) for k in range(len(times))] + [len(times) / len(rs)]
                ax.step(x, y, where="post", color=_colour(b, order), linewidth=2, label=f"{b} ({len(rs)} runs)")
            ax.set_xscale("log")
            ax.set_xlim(1e-2, tmax * 1.5)
            _plain_log_ticks(ax)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{len(insts)} instances on {', '.join(key)}: gap <= {_pct(g)}", fontsize=10)
            ax.set_xlabel("solver time t (s, log scale)")
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel("fraction at gap <= x by t")
        row[-1].legend(fontsize=9, loc="lower right")
    fig.suptitle("Performance profile: fraction of runs at gap <= x within solver time t", fontsize=12)
    fig.tight_layout()
    path = out / "profile.png"
    fig.savefig(path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- entry
def compare(paths: Sequence[str | os.PathLike], out: str | os.PathLike | None = None, *,
            plots: bool = True) -> tuple[Path, list[Path]]:
    """Write ``compare.md``/``compare.csv`` (and the plots) for the runs in ``paths``
    into ``out`` (default: the first results folder); return the Markdown file and the
    PNGs written."""
    records = load_records(paths)
    first = Path(paths[0])
    out = Path(out) if out is not None else (first if first.is_dir() else first.parent)
    out.mkdir(parents=True, exist_ok=True)
    table = rows(records)
    srcs = ", ".join(str(p) for p in paths)
    preamble = [f"Runs from {srcs}: {len(records)} records.",
                "certified gap = |objective - bound| / |objective|, objective re-scored by the evaluator, bound "
                "proved by the solver; t to x = solver seconds until the gap was at most x (trace), empty if "
                "never; times exclude model building (build s) and hand-off."]
    md = write_table(out / "compare", "Backend comparison", _columns(), table, preamble=preamble,
                     footer=_summary(table))
    pngs: list[Path] = []
    if plots:
        pngs += _plot_traces(records, out)
        prof = _plot_profile(records, out)
        if prof is not None:
            pngs.append(prof)
    return md, pngs
