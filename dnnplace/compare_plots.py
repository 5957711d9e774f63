"""The plots of ``dnnplace compare``: objectives over the lower bound, the performance
profile over methods, solver traces and the time-to-gap profile per backend.

Each ``plot_*`` function writes its PNGs into a folder (atomically, the folder made only
when a PNG is written: :func:`dnnplace.graphs.io.write_figure`) and returns their paths
(or ``None`` when there is nothing to draw); matplotlib is imported only when one runs.
Log time axes get ticks whose labels never overlap (:mod:`dnnplace.log_axis`).
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path
from typing import Any

from dnnplace.compare_records import (
    backend_of,
    certified_gap_of,
    lower_bound_of,
    method_profile,
    method_rows,
    pct,
    run_labels,
    time_to_gap,
    where_of,
)
from dnnplace.graphs.io import write_figure
from dnnplace.log_axis import plain_log_ticks

__all__ = ["plot_objectives", "plot_method_profile", "plot_traces", "plot_gap_profile", "PROFILE_GAPS",
           "same_curves"]

PROFILE_GAPS = (0.10, 0.01, 1e-4)
"""Gaps of the performance profile's panels."""

_COLOURS = {"highs": "#1f77b4", "scip": "#2ca02c", "gurobi": "#d62728"}
_OTHER = ("#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


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
        lb = lower_bound_of(rec)
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
            # the final state as a marker: a run without trace points (or ending at once) is still seen
            ax.plot([x[-1]], [y[-1]], linestyle="none", marker="o" if style == "-" else "^", color=c, markersize=6)
            drawn = True
        if rec.get("objective") is not None:
            finals.append(float(rec["objective"]))
        if rec.get("bound") is not None:
            finals.append(float(rec["bound"]))
    if not drawn:
        return False
    if not any(rec.get("trace") for _b, rec in recs):
        ax.annotate("no solver trace: the run's final answer (o) and lower bound (^) only", xy=(0.99, 0.02),
                    xycoords="axes fraction", ha="right", va="bottom", fontsize=8, color="#555555")
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
    plain_log_ticks(ax)
    ax.grid(True, which="both", alpha=0.3)
    return True


def _unique(path: Path, written: list[Path]) -> Path:
    """``path``, or ``path`` with ``-2``, ``-3``... when this comparison already wrote it."""
    k, cand = 2, path
    while cand in written:
        cand = path.with_name(f"{path.stem}-{k}{path.suffix}")
        k += 1
    return cand


def plot_traces(table_recs: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    labels = run_labels(table_recs, with_backend=False)
    groups: dict[tuple[str, str, str], list[tuple[str, dict]]] = {}
    for r in table_recs:
        b = backend_of(r)
        if b != "-":
            groups.setdefault((*where_of(r), labels[id(r)]), []).append((b, r))
    order = sorted({b for g in groups.values() for b, _ in g})
    for (inst, problem, cl, method), recs in sorted(groups.items()):
        recs.sort(key=lambda x: x[0])
        stem = inst if problem == "maxload" else f"{inst} {problem}"
        name = _slug(f"{stem}-{cl}-{method}" if cl != "-" else f"{stem}-{method}")
        where = f"{inst} ({problem})" + (f" on {cl}" if cl != "-" else "")
        fig, ax = plt.subplots(figsize=(9.5, 4.8), dpi=110)
        if _draw_trace(ax, recs, order):
            ax.set_title(f"{where} ({method}): incumbent (solid) and bound (dashed)")
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            fig.tight_layout()
            plain_log_ticks(ax)  # again for the axes' final width
            path = _unique(out / f"trace-{name}.png", written)
            written.append(write_figure(fig, path))
        plt.close(fig)
        for b, rec in recs:
            fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=100)
            if _draw_trace(ax, [(b, rec)], order):
                gap = certified_gap_of(rec)
                ax.set_title(f"{where} ({method}) on {b}: {rec.get('status')}"
                             + (f", certified gap {100 * gap:.2f}%" if gap is not None else ""))
                ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
                fig.tight_layout()
                plain_log_ticks(ax)  # again for the axes' final width
                path = _unique(out / "runs" / f"{name}-{b}.png", written)
                written.append(write_figure(fig, path))
            plt.close(fig)
    return written


def plot_gap_profile(table_recs: list[dict], out: Path) -> Path | None:
    """``gap-profile.png``: per MIP backend, the fraction of its runs at gap <= x by time t;
    only the panels (instance set, gap x) where some run reaches x, the others named in
    the title, and one panel for neighbouring gaps with the same curves (``gap <= 10% =
    1%``); ``None`` (no figure) when no run reaches any of :data:`PROFILE_GAPS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # instances grouped by the backends that ran them: a profile compares like with like
    labels = run_labels(table_recs, with_backend=False)
    runs: dict[tuple, dict[str, list[dict]]] = {}
    for r in table_recs:
        b = backend_of(r)
        if b != "-":
            runs.setdefault((*where_of(r), labels[id(r)]), {}).setdefault(b, []).append(r)
    if not runs:
        return None
    # panels per method and set of backends that ran the same instances, and per gap
    groups: dict[tuple[str, ...], list[dict[str, list[dict]]]] = {}
    for key, by_b in runs.items():
        groups.setdefault((key[-1], *sorted(by_b)), []).append(by_b)
    order = sorted({b for key in groups for b in key[1:]})
    tmax = max(float(r.get("solve_seconds") or 0.0) for by_b in runs.values() for rs in by_b.values() for r in rs)
    tmax = max(tmax, 1e-2)
    panels, empty = [], []
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        for g in PROFILE_GAPS:
            curves = {}
            for b in key[1:]:
                rs = [r for by_b in groups[key] for r in by_b[b]]
                curves[b] = (len(rs), sorted(t for t in (time_to_gap(r, g) for r in rs) if t is not None))
            if not any(times for _n, times in curves.values()):
                empty.append(f"{key[0]} at {pct(g)}")
            elif panels and panels[-1][0] == key and panels[-1][2] == curves:  # the same curves: one panel
                panels[-1][1].append(g)
            else:
                panels.append((key, [g], curves))
    if not panels:
        return None
    ncols = min(len(panels), len(PROFILE_GAPS))
    nrows = math.ceil(len(panels) / ncols)
    width = max(4.6 * ncols + 0.8, 9.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 3.6 * nrows + 1.2), dpi=110, sharey=True, squeeze=False)
    flat = list(axes.flat)
    for ax, (key, gaps, curves) in zip(flat, panels):
        for b, (n, times) in curves.items():
            x = [1e-3] + [max(t, 1e-3) for t in times] + [tmax * 1.5]
            y = [0.0] + [(k + 1) / n for k in range(len(times))] + [len(times) / n]
            ax.step(x, y, where="post", color=_colour(b, order), linewidth=2, label=f"{b} ({n} run{'s' * (n != 1)})")
        ax.set_xscale("log")
        ax.set_xlim(1e-2, tmax * 1.5)
        ax.set_ylim(-0.02, 1.02)
        insts = len(groups[key])
        ax.set_title(f"{key[0]}, {insts} instance{'s' * (insts != 1)} on {', '.join(key[1:])}: gap <= "
                     + " = ".join(map(pct, gaps)), fontsize=10)
        ax.set_xlabel("solver time t (s, log scale)")
        ax.set_ylabel("fraction at gap <= x by t")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=9, loc="lower right")
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    title = "Time to gap per solver: fraction of runs at gap <= x within solver time t"
    if empty:
        title += "\n" + textwrap.fill("not drawn (no run got there): " + ", ".join(empty), width=int(width * 11))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    for ax in flat[:len(panels)]:
        plain_log_ticks(ax)  # after the layout: the ticks fit the axes' final width
    path = write_figure(fig, out / "gap-profile.png")
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


def plot_objectives(records: list[dict], out: Path) -> Path | None:
    """``objective.png``: every method's objective over the instance's lower bound, one
    row per instance and cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods, table = method_rows(records)
    units = {where_of(r): _ylabel(r) for r in records}
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
    ax.set_yticklabels([f"{r['instance']} | {r['problem']} | {r['cluster']}\n(bound {r['lower_bound']:.4g}: "
                        f"{units[(r['instance'], r['problem'], r['cluster'])]})" for r in reversed(lines)], fontsize=8)
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
    ax.set_title("Objective / lower bound per instance, problem and cluster"
                 + (f" ({skipped} without a lower bound in their records not shown)" if skipped else ""), fontsize=11)
    fig.tight_layout()
    path = write_figure(fig, out / "objective.png")
    plt.close(fig)
    return path


def plot_method_profile(records: list[dict], out: Path) -> Path | None:
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
    curves = {}
    for m in methods:
        total = len(ran.get(m, ()))
        xs = ratios[m]
        x, y = [1.0], [sum(1 for v in xs if v <= 1.0 + 1e-9) / total]
        for v in sorted(set(xs)):  # one step per distinct ratio: ties rise at once
            if v > 1.0 + 1e-9:
                x.append(v)
                y.append(sum(1 for u in xs if u <= v) / total)
        curves[m] = (x + [tmax], y + [y[-1]])
    twin = same_curves(curves)
    nth: dict[str, int] = {}
    for k, m in enumerate(methods):
        total = len(ran.get(m, ()))
        label = f"{m} ({total} instance{'s' if total != 1 else ''})"
        first = twin.get(m)
        if first is None:  # its own curve
            ax.step(*curves[m], where="post", color=colours[m], linewidth=2.2, label=label,
                    linestyle=("-", "--", "-.", ":")[k // 10 % 4])
        else:  # the same curve as an earlier method's: dashed on top of it (staggered), every colour seen
            nth[first] = nth.get(first, 0) + 1
            ax.step(*curves[m], where="post", color=colours[m], linewidth=2.2, label=f"{label}: identical to {first}",
                    linestyle=(3 * (nth[first] % 3), (3, 6)), zorder=3 + k)
    ax.set_xlim(0.995, tmax)
    if tmax > 10:
        ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau: objective within tau x the best objective found on the instance")
    ax.set_ylabel("fraction of the method's instances")
    ax.set_title(f"Performance profile over methods ({len(table)} instance/problem/cluster triples)"
                 + (f"\nleft out (answers on a transformed graph): {', '.join(left_out)}" if left_out else ""),
                 fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    path = write_figure(fig, out / "profile.png")
    plt.close(fig)
    return path


def same_curves(curves: dict[str, tuple[list[float], list[float]]]) -> dict[str, str]:
    """Each curve identical (to 1e-9) to an earlier one, by name, with the first's name:
    the performance profile draws those dashed over the first and says so in the legend.

    >>> same_curves({"a": ([1, 2], [0.5, 1]), "b": ([1, 2], [0.5, 1]), "c": ([1, 2], [0, 1])})
    {'b': 'a'}
    """
    out: dict[str, str] = {}
    seen: list[tuple[str, tuple[list[float], list[float]]]] = []
    for name, (x, y) in curves.items():
        for first, (x0, y0) in seen:
            if len(x) == len(x0) and all(abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in zip(x + y, x0 + y0)):
                out[name] = first
                break
        else:
            seen.append((name, (x, y)))
    return out
