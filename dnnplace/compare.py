"""Compare methods, MIP backends and instances: ``dnnplace compare RESULTS...``.

Reads sweep records (``runs.jsonl`` files, or folders holding one) and single results
(``dnnplace solve --out`` JSON files), keeps the newest record of each run, and writes,
beside them or into ``--out``:

- ``compare.md`` / ``compare.csv``: one row per run, keyed by **instance and cluster**
  (a 2-GPU and a 4-GPU run of one graph are different rows), method and backend, with
  the re-scored objective, the **lower bound** (the larger of the solver's proven bound
  and the instance's own bound, ``Result.lower_bound``: so heuristics have one too), the
  **certified gap** ``|objective - lower bound| / |objective|``
  (:func:`dnnplace.results.relative_gap`), the solver's own bound, the time to a 10 % and
  a 1 % gap, the status and the solve time; under it, **objectives by method**: one line
  per instance and cluster, every method's objective beside the instance's lower bound
  and the best method's certified gap, then a summary per backend;
- ``objective.png``: every method's objective divided by the instance's lower bound,
  one row per instance and cluster (1 = the bound; hollow markers: answers on a
  transformed graph, for which the input's critical-path bound does not hold);
- ``profile.png``: a performance profile over methods (Dolan and Moré): the fraction
  of the instances a method ran on which its objective is within a factor ``tau`` of
  the best objective any method found there;
- ``trace-<instance>-<cluster>-<method>.png``: for solvers, incumbent (solid) and bound
  (dashed) over time, step plots on a log time axis, the backends of one instance
  overlaid; ``runs/<...>-<backend>.png`` the same per run; ``gap-profile.png``: per
  solver, the fraction of its runs brought to a gap <= x within time t (x = 10 %, 1 %,
  0.01 %), one row of panels per set of instances that the same solvers ran.

Times are the solver's clock from the start of its solve (trace times; model building
and hand-off come on top, see ``build_s``). "Time to x" is the first trace point whose
gap ``|incumbent - bound| / |incumbent|`` is at most x, or the solve time when the run
ended with a certified gap at most x; empty when it never got there. Runs of methods
without a solver (heuristics) have backend ``-`` and no times.
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

__all__ = ["load_records", "rows", "method_rows", "method_profile", "time_to_gap", "compare", "GAPS",
           "PROFILE_GAPS"]

GAPS = (0.10, 0.01)
"""Gaps whose time-to columns the table has."""

PROFILE_GAPS = (0.10, 0.01, 1e-4)
"""Gaps of the performance profile's panels."""

_COLOURS = {"highs": "#1f77b4", "scip": "#2ca02c", "gurobi": "#d62728"}
_OTHER = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def load_records(paths: Sequence[str | os.PathLike]) -> list[dict]:
    """The records of each ``runs.jsonl`` named (a folder stands for the ``runs.jsonl``
    in it) and of each result JSON written by ``dnnplace solve --out``; the newest
    record of each run key of a file (a result file is its own run). The same run key in
    two files is two runs (e.g. one sweep run on two executors), each record noting its
    file in ``_source``."""
    from dnnplace.graphs.io import read_json
    from dnnplace.runner import read_runs

    out: dict[str, dict] = {}
    for p in map(Path, paths):
        f = p / "runs.jsonl" if p.is_dir() else p
        if not f.is_file():
            raise InputError(f"{p}: no runs.jsonl there (give a results folder, a runs.jsonl file or a result JSON "
                             "of dnnplace solve --out)")
        if f.suffix == ".jsonl":
            recs = read_runs(f)
            if not recs:
                raise InputError(f"{f}: no run records")
            for r in recs:
                out[f"{f.resolve()}|{r['run_key']}"] = {**r, "_source": str(f)}
            continue
        doc = read_json(f)
        if not (isinstance(doc, dict) and {"method", "status", "problem"} <= doc.keys()):
            raise InputError(f"{f}: not a result JSON (no 'method', 'status' and 'problem'); give the --out file of "
                             "dnnplace solve, or a runs.jsonl")
        out[f"file:{f.resolve()}"] = {**doc, "run_key": f"file:{f.resolve()}", "_source": str(f)}
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


def _cluster(rec: dict) -> str:
    """The cluster a run was solved on: its preset name, a cluster file's name, or
    ``-`` (the graph file's own cluster, in records that do not say)."""
    cl = rec.get("cluster")
    if isinstance(cl, str):
        return cl
    if isinstance(cl, dict):
        return str(cl.get("name") or "custom")
    return str((rec.get("run") or {}).get("cluster") or "-")


def _lower_bound(rec: dict) -> float | None:
    """The record's ``lower_bound``; older records: the larger of the solver's bound and
    the evaluation's lower bound."""
    if "lower_bound" in rec:
        return rec["lower_bound"]
    vals = [v for v in (rec.get("bound"), (rec.get("evaluation") or {}).get("lower_bound")) if v is not None]
    return max(vals) if vals else None


def _instance_bound(rec: dict) -> float | None:
    """The instance's own lower bound (valid for every method's answer on the input
    graph): the evaluation's ``lower_bound``; none for an answer on a transformed graph."""
    if rec.get("transform") is not None:
        return None
    return (rec.get("evaluation") or {}).get("lower_bound")


def _options(rec: dict) -> dict[str, str]:
    """A run's options as flat ``key -> text`` (a sweep record's run identity, or a result
    file's options), for telling apart runs of one method on one instance."""
    run = rec.get("run")
    src = dict(run) if isinstance(run, dict) else dict(rec.get("options") or {})
    for k in ("graph", "problem", "method", "cluster"):
        src.pop(k, None)
    flat: dict[str, str] = {}
    for k, v in src.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if v2 is not None and k2 not in ("solver", "name", "tee"):
                    flat[f"{k2}"] = str(v2)
        elif v is not None:
            flat[k] = str(v)
    return flat


def _labels(records: Sequence[dict], with_backend: bool = True) -> dict[int, str]:
    """A label per record (by ``id``): the method, its backend where it used one (with
    ``with_backend``), and the options that differ between its runs on one instance and
    cluster."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((_instance(r), _cluster(r), str(r.get("method")), _backend(r)), []).append(r)
    out: dict[int, str] = {}
    for (_i, _c, method, backend), recs in groups.items():
        base = method if backend == "-" or not with_backend else f"{method}/{backend}"
        opts = [_options(r) for r in recs]
        if len({tuple(sorted(o.items())) for o in opts}) < len(opts):  # the same run from several files
            srcs = {r.get("_source") for r in recs}
            if len(srcs) > 1:
                for o, r in zip(opts, recs):
                    o["from"] = Path(str(r.get("_source"))).parent.name or str(r.get("_source"))
        keys = sorted({k for o in opts for k in o})
        differ = [k for k in keys if len({o.get(k) for o in opts}) > 1]
        for r, o in zip(recs, opts):
            extra = " ".join(f"{k}={o[k]}" for k in differ if k in o)
            out[id(r)] = f"{base} {extra}".strip()
    return out


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
    return relative_gap(rec.get("objective"), _lower_bound(rec))


def rows(records: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per run, sorted by instance, cluster, method, backend."""
    labels = _labels(records, with_backend=False)
    out = []
    for r in records:
        row = {"instance": _instance(r), "cluster": _cluster(r), "method": labels[id(r)], "backend": _backend(r),
               "status": r.get("status"), "objective": r.get("objective"), "lower_bound": _lower_bound(r),
               "certified_gap": _certified(r), "bound": r.get("bound"),
               "transformed": "yes" if r.get("transform") is not None else ""}
        for g in GAPS:
            row[f"t_{_pct(g)}"] = time_to_gap(r, g) if row["backend"] != "-" else None
        row.update(solve_s=r.get("solve_seconds"), build_s=r.get("build_seconds"),
                   time_limit=((r.get("run") or {}).get("solver") or {}).get("time_limit"), message=_short(r))
        out.append(row)
    out.sort(key=lambda x: (x["instance"], x["cluster"], str(x["method"]), x["backend"]))
    return out


def method_rows(records: Sequence[dict]) -> tuple[list[str], list[dict[str, Any]]]:
    """Objectives by method: the method labels, and one row per instance and cluster
    with each method's objective (``None``: no usable answer), the instance's lower
    bound, the best method and its certified gap against that bound."""
    labels = _labels(records)
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        by_key.setdefault((_instance(r), _cluster(r)), []).append(r)
    methods = sorted({labels[id(r)] for r in records})
    out = []
    for (inst, cl), recs in sorted(by_key.items()):
        row: dict[str, Any] = {"instance": inst, "cluster": cl,
                               "transformed": {labels[id(r)] for r in recs if r.get("transform") is not None}}
        for r in recs:
            ok = r.get("status") in ("optimal", "feasible") and r.get("objective") is not None
            row[labels[id(r)]] = r["objective"] if ok else None
        lbs = [b for b in map(_instance_bound, recs) if b is not None]
        row["lower_bound"] = max(lbs) if lbs else None
        vals = [(r["objective"], labels[id(r)]) for r in recs if row.get(labels[id(r)]) is not None
                and r.get("transform") is None]
        if vals:
            best, who = min(vals)
            row["best"], row["best_gap"] = who, relative_gap(best, row["lower_bound"])
        out.append(row)
    return methods, out


def _short(rec: dict) -> str | None:
    if rec.get("status") != "error":
        return None
    msg = str(rec.get("message") or "")
    return msg if len(msg) <= 90 else msg[:87] + "..."


def _pct(g: float) -> str:
    return f"{100 * g:g}%"


def _columns() -> list[Column]:
    cols = [Column("instance"), Column("cluster"), Column("method"), Column("backend"), Column("status"),
            Column("objective", numeric=True), Column("lower_bound", "lower bound", numeric=True),
            Column("certified_gap", "certified gap", fmt=percent(2), numeric=True),
            Column("bound", "solver bound", numeric=True), Column("transformed")]
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
            by_inst.setdefault((r["instance"], r["cluster"], r["method"]), {})[r["backend"]] = r
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
    head = ["instance", "cluster", *methods, "lower bound", "best", "best's gap"]
    lines = ["## Objectives by method", "",
             "One line per instance and cluster: every method's objective (empty: no answer, or not run), the "
             "instance's lower bound (critical path of least times and busiest device's work share for a makespan, "
             "the work share for a max-load, the critical path for a latency; a solver's own bound is in the table "
             "above), and the best method with its certified gap against that bound. Answers on a transformed graph "
             "(marked *) are not ranked: the input's critical-path bound does not hold for them.", "",
             "| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(methods) + "---:|---|---:|"]

    def num(v: Any) -> str:
        return "" if v is None else f"{v:.2f}"

    for r in table:
        cells = [num(r.get(m)) + ("*" if m in r["transformed"] and r.get(m) is not None else "") for m in methods]
        gap = r.get("best_gap")
        lines.append("| " + " | ".join([r["instance"], r["cluster"], *cells, num(r.get("lower_bound")),
                                        r.get("best") or "", "" if gap is None else f"{100 * gap:.2f}%"]) + " |")
    return lines + [""]


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
        # the run's answer at the end: the re-scored objective where it is better than the last
        # incumbent (a pipeline's refinement after the solver), and its certified lower bound
        obj = rec.get("objective")
        last = inc[-1] if inc else None
        inc.append(obj if last is None or (obj is not None and obj < last) else last)
        lb = _lower_bound(rec)
        bnd.append(lb if lb is not None else (bnd[-1] if bnd else None))
    return ts, inc, bnd, end


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _ylabel(rec: dict) -> str:
    """The objective's name and unit for a record's problem."""
    unit = rec.get("unit") or "ms"
    what = {"maxload": "time per sample", "latency": "latency", "makespan": "makespan"}.get(
        str(rec.get("problem")), "objective")
    return f"{what} ({unit})"


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
    ax.set_ylabel(_ylabel(recs[0][1]))
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


def _unique(path: Path, written: list[Path]) -> Path:
    """``path``, or ``path`` with ``-2``, ``-3``... when this comparison already wrote it."""
    k, cand = 2, path
    while cand in written:
        cand = path.with_name(f"{path.stem}-{k}{path.suffix}")
        k += 1
    return cand


def _plot_traces(table_recs: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    labels = _labels(table_recs, with_backend=False)
    groups: dict[tuple[str, str, str], list[tuple[str, dict]]] = {}
    for r in table_recs:
        b = _backend(r)
        if b != "-":
            groups.setdefault((_instance(r), _cluster(r), labels[id(r)]), []).append((b, r))
    order = sorted({b for g in groups.values() for b, _ in g})
    for (inst, cl, method), recs in sorted(groups.items()):
        recs.sort(key=lambda x: x[0])
        name = _slug(f"{inst}-{cl}-{method}" if cl != "-" else f"{inst}-{method}")
        where = f"{inst} on {cl}" if cl != "-" else inst
        fig, ax = plt.subplots(figsize=(9.5, 4.8), dpi=110)
        if _draw_trace(ax, recs, order):
            ax.set_title(f"{where} ({method}): incumbent (solid) and bound (dashed)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            fig.tight_layout()
            path = _unique(out / f"trace-{name}.png", written)
            fig.savefig(path)
            written.append(path)
        plt.close(fig)
        for b, rec in recs:
            fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=100)
            if _draw_trace(ax, [(b, rec)], order):
                gap = _certified(rec)
                ax.set_title(f"{where} ({method}) on {b}: {rec.get('status')}"
                             + (f", certified gap {100 * gap:.2f}%" if gap is not None else ""))
                ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
                fig.tight_layout()
                (out / "runs").mkdir(exist_ok=True)
                path = _unique(out / "runs" / f"{name}-{b}.png", written)
                fig.savefig(path)
                written.append(path)
            plt.close(fig)
    return written


def _plot_gap_profile(table_recs: list[dict], out: Path) -> Path | None:
    """``gap-profile.png``: per MIP backend, the fraction of its runs at gap <= x by time t."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # instances grouped by the backends that ran them: a profile compares like with like
    labels = _labels(table_recs, with_backend=False)
    runs: dict[tuple[str, str, str], dict[str, list[dict]]] = {}
    for r in table_recs:
        b = _backend(r)
        if b != "-":
            runs.setdefault((_instance(r), _cluster(r), labels[id(r)]), {}).setdefault(b, []).append(r)
    if not runs:
        return None
    # one row of panels per method and set of backends that ran the same instances
    groups: dict[tuple[str, ...], list[dict[str, list[dict]]]] = {}
    for (_inst, _cl, method), by_b in runs.items():
        groups.setdefault((method, *sorted(by_b)), []).append(by_b)
    order = sorted({b for key in groups for b in key[1:]})
    tmax = max(float(r.get("solve_seconds") or 0.0) for by_b in runs.values() for rs in by_b.values() for r in rs)
    tmax = max(tmax, 1e-2)
    keys = sorted(groups, key=lambda k: (-len(groups[k]), k))
    fig, axes = plt.subplots(len(keys), len(PROFILE_GAPS), figsize=(4.6 * len(PROFILE_GAPS), 3.6 * len(keys) + 0.6),
                             dpi=110, sharey=True, squeeze=False)
    for row, key in zip(axes, keys):
        insts = groups[key]
        for ax, g in zip(row, PROFILE_GAPS):
            for b in key[1:]:
                rs = [r for by_b in insts for r in by_b[b]]
                times = sorted(t for t in (time_to_gap(r, g) for r in rs) if t is not None)
                x = [1e-3] + [max(t, 1e-3) for t in times] + [tmax * 1.5]
                y = [0.0] + [(k + 1) / len(rs) for k in range(len(times))] + [len(times) / len(rs)]
                ax.step(x, y, where="post", color=_colour(b, order), linewidth=2, label=f"{b} ({len(rs)} runs)")
            ax.set_xscale("log")
            ax.set_xlim(1e-2, tmax * 1.5)
            _plain_log_ticks(ax)
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(f"{key[0]}, {len(insts)} instances on {', '.join(key[1:])}: gap <= {_pct(g)}",
                         fontsize=10)
            ax.set_xlabel("solver time t (s, log scale)")
            ax.grid(True, which="both", alpha=0.3)
        row[0].set_ylabel("fraction at gap <= x by t")
        row[-1].legend(fontsize=9, loc="lower right")
    fig.suptitle("Time to gap per solver: fraction of runs at gap <= x within solver time t", fontsize=12)
    fig.tight_layout()
    path = out / "gap-profile.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def _method_colours(methods: list[str]) -> dict[str, str]:
    """A distinct colour per method label (matplotlib's tab10, then tab20)."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(methods) <= 10 else "tab20"]
    return {m: matplotlib_hex(cmap(k % cmap.N)) for k, m in enumerate(methods)}


def matplotlib_hex(rgba: tuple) -> str:
    return "#{:02X}{:02X}{:02X}".format(*(int(round(255 * c)) for c in rgba[:3]))


_MARKERS = "osD^v<>PXh*p"


def _plot_objectives(records: list[dict], out: Path) -> Path | None:
    """``objective.png``: every method's objective over the instance's lower bound, one
    row per instance and cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods, table = method_rows(records)
    units = {(_instance(r), _cluster(r)): _ylabel(r) for r in records}
    lines = [r for r in table if r.get("lower_bound") and any(r.get(m) is not None for m in methods)]
    if not lines:
        return None
    colours = _method_colours(methods)
    fig, ax = plt.subplots(figsize=(10.5, 1.2 + 0.55 * len(lines)), dpi=110)
    ratios = []
    jitter = 0.5 / max(len(methods), 1)  # methods side by side within a row: equal values stay visible
    for y, r in enumerate(reversed(lines)):
        for k, m in enumerate(methods):
            v = r.get(m)
            if v is None:
                continue
            ratio = v / r["lower_bound"]
            ratios.append(ratio)
            hollow = m in r["transformed"]
            ax.scatter([ratio], [y + (k - (len(methods) - 1) / 2) * jitter], s=60,
                       marker=_MARKERS[k % len(_MARKERS)], zorder=3,
                       facecolors="none" if hollow else colours[m], edgecolors=colours[m], linewidths=1.8,
                       label=m)
    ax.axvline(1.0, color="#333333", linestyle="--", linewidth=1.2, zorder=2)
    ax.set_yticks(range(len(lines)))
    ax.set_yticklabels([f"{r['instance']} | {r['cluster']}\n(bound {r['lower_bound']:.4g}: "
                        f"{units[(r['instance'], r['cluster'])]})" for r in reversed(lines)], fontsize=8)
    ax.set_ylim(-0.6, len(lines) - 0.4)
    lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
    if hi / max(lo, 1e-12) > 20:
        ax.set_xscale("log")
        ax.set_xlim(max(lo, 1e-12) / 1.15, hi * 1.15)
    else:
        pad = 0.04 * (hi - lo if hi > lo else 1.0)
        ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel("objective / the instance's lower bound (1 = the bound, dashed; lower is better)")
    handles, names = ax.get_legend_handles_labels()
    seen = dict(zip(names, handles))
    ax.legend(list(seen.values()), list(seen), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0, title="method" + (" (hollow: transformed graph)" if any(r["transformed"]
                                                                                       for r in lines) else ""),
              title_fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    skipped = len(table) - len(lines)
    ax.set_title("Objective / lower bound per instance and cluster"
                 + (f" ({skipped} without a lower bound in their records not shown)" if skipped else ""), fontsize=11)
    fig.tight_layout()
    path = out / "objective.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def method_profile(records: Sequence[dict]) -> tuple[dict[str, set], dict[str, list[float]], list[str]]:
    """The data of the performance profile over methods: the instance/cluster pairs each
    method ran on, its sorted ratios ``objective / best objective there`` (one per
    instance where it answered), and the methods left out (answers on a transformed graph)."""
    methods, table = method_rows(records)
    labels = _labels(records)
    ran: dict[str, set] = {}
    for r in records:
        if r.get("transform") is None:
            ran.setdefault(labels[id(r)], set()).add((_instance(r), _cluster(r)))
    ratios: dict[str, list[float]] = {m: [] for m in methods if m in ran}
    for r in table:
        vals = [r[m] for m in ratios if r.get(m) is not None and m not in r["transformed"]]
        if not vals:
            continue
        best = min(vals)
        for m in ratios:
            if r.get(m) is not None and m not in r["transformed"]:
                ratios[m].append(r[m] / best if best > 0 else (1.0 if r[m] == best else float("inf")))
    left_out = sorted({labels[id(r)] for r in records if r.get("transform") is not None} - set(ran))
    return ran, {m: sorted(v) for m, v in ratios.items()}, left_out


def _plot_method_profile(records: list[dict], out: Path) -> Path | None:
    """``profile.png``: the performance profile over methods (Dolan and Moré 2002):
    ``rho_m(tau)``, the fraction of the instances method ``m`` ran on where its objective
    is at most ``tau`` times the best any method found there (a run without an answer
    never counts). Answers on transformed graphs are left out (not comparable)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran, ratios, left_out = method_profile(records)
    methods = sorted(ratios)
    table = method_rows(records)[1]
    if not any(ratios.values()):
        return None
    colours = _method_colours(methods)
    finite = [x for v in ratios.values() for x in v if x != float("inf")]
    tmax = max(finite + [1.0]) * 1.05
    if tmax <= 1.0001:
        tmax = 1.1
    fig, ax = plt.subplots(figsize=(9.5, 5.0), dpi=110)
    for k, m in enumerate(methods):
        total = len(ran.get(m, ()))
        xs = ratios[m]
        x, y = [1.0], [sum(1 for v in xs if v <= 1.0 + 1e-9) / total]
        for v in sorted(set(xs)):  # one step per distinct ratio: ties rise at once
            if v > 1.0 + 1e-9:
                x.append(v)
                y.append(sum(1 for u in xs if u <= v) / total)
        x.append(tmax)
        y.append(y[-1])
        ax.step(x, y, where="post", color=colours[m], linewidth=2.2,
                label=f"{m} ({total} instance{'s' if total != 1 else ''})",
                linestyle=("-", "--", "-.", ":")[k // 10 % 4])
    ax.set_xlim(0.995, tmax)
    if tmax > 10:
        ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau: objective within tau x the best objective found on the instance")
    ax.set_ylabel("fraction of the method's instances")
    ax.set_title(f"Performance profile over methods ({len(table)} instance/cluster pairs)"
                 + (f"\nleft out (answers on a transformed graph): {', '.join(left_out)}" if left_out else ""),
                 fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    path = out / "profile.png"
    fig.savefig(path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------- entry
def compare(paths: Sequence[str | os.PathLike], out: str | os.PathLike | None = None, *,
            plots: bool = True) -> tuple[Path, list[Path]]:
    """Write ``compare.md``/``compare.csv`` (and the plots) for the runs in ``paths``
    into ``out`` (default: the first results folder, or the folder of the first result
    file); return the Markdown file and the PNGs written."""
    records = load_records(paths)
    first = Path(paths[0])
    out = Path(out) if out is not None else (first if first.is_dir() else first.parent)
    out.mkdir(parents=True, exist_ok=True)
    table = rows(records)
    methods, mtable = method_rows(records)
    srcs = ", ".join(str(p) for p in paths)
    keys = {(r["instance"], r["cluster"]) for r in table}
    preamble = [f"Runs from {srcs}: {len(records)} runs of {len({r['method'] for r in table})} method(s) on "
                f"{len(keys)} instance/cluster pair(s).",
                "lower bound = the larger of the solver's proven bound (solver bound) and the instance's own lower "
                "bound (every method has one); certified gap = |objective - lower bound| / |objective|, objective "
                "re-scored by the evaluator; t to x = solver seconds until the gap was at most x (trace), empty if "
                "never; times exclude model building (build s) and hand-off; transformed = the answer is for a graph "
                "the method built from the input (its lower bound is the input's work share only)."]
    md = write_table(out / "compare", "Method comparison", _columns(), table, preamble=preamble,
                     footer=_method_lines(methods, mtable) + _summary(table))
    pngs: list[Path] = []
    if plots:
        for draw in (_plot_objectives, _plot_method_profile):
            path = draw(records, out)
            if path is not None:
                pngs.append(path)
        pngs += _plot_traces(records, out)
        prof = _plot_gap_profile(records, out)
        if prof is not None:
            pngs.append(prof)
    return md, pngs
