"""The tables, plots and verdicts of FastT's experiments (:mod:`dnnplace.experiments.fastt`):
:func:`write_table` (``table.md`` and ``table.csv``), the bar charts and the scaling plot, the
verdict appended to each row of the scaling, splits and memory tables, the paper's printed numbers
(:func:`reference`: ``experiments/reference/fastt-middleware20.json``, each with its table) and
:func:`read_rows` (a written ``table.csv`` back into rows, to re-judge a table whose records are
not in the tree)."""

from __future__ import annotations

import csv
import functools
import json
from pathlib import Path

import numpy as np

from dnnplace.experiments import verdicts as V
from dnnplace.tables import csv_cell

__all__ = ["bar_chart", "write_table", "fmt", "speedup", "scaling_plot", "scaling_verdicts", "splits_verdicts",
           "memory_verdict", "reference", "read_rows", "PAPER_FIG2_MAX", "NO_RECORDS"]

NO_RECORDS = "records: not in the tree; rerun with `dnnplace reproduce {name}`"


@functools.cache
def reference() -> dict:
    """FastT's printed numbers (Tables 1-3, 5, 6 and Fig. 2), each block with its table."""
    from dnnplace.data import reference_path

    return json.loads(reference_path("fastt-middleware20").read_text())


def read_rows(out: Path) -> list[list]:
    """The rows of ``<out>/table.csv`` without its header and verdict column (numbers parsed)."""
    with open(out / "table.csv", newline="") as f:
        rows = list(csv.reader(f))[1:]
    return [[csv_cell(x, None) for x in r[:-1]] for r in rows]


def bar_chart(path: Path, labels: list[str], ours: list[float], paper: list[float], ylabel: str, title: str) -> None:
    """A grouped bar chart of ours beside the paper's values (``NaN``: no bar)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(labels)), 3.6))
    ax.bar(x - 0.2, ours, 0.4, label="ours (simulation)")
    ax.bar(x + 0.2, paper, 0.4, label="paper (hardware)")
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_table(out: Path, header: list[str], rows: list[list], notes: list[str], title: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "table.csv", "w", newline="") as f:
        csv.writer(f).writerows([header] + rows)
    lines = [f"# {title}", "", *notes, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return out / "table.md"


def fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def speedup(one: float, dp: list[float], ft: list[float]) -> float:
    """The paper's metric: best FastT over the best baseline (1 GPU included), minus 1."""
    return max(ft) / max([one] + dp) - 1.0


def scaling_plot(rows: list[list], path: Path) -> None:
    """FastT/DP throughput against GPUs from the rows of the scaling table: FastT (solid),
    OS-DPOS's own schedule (dotted) and the paper (dashed), one colour per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, mode in zip(axes, ("strong", "weak")):
        fams = list(dict.fromkeys(r[1] for r in rows if r[0] == mode and str(r[2]) != "speedup"))
        for i, fam in enumerate(fams):
            mine = [r for r in rows if r[0] == mode and r[1] == fam and str(r[2]) != "speedup"]
            k = [int(r[2]) for r in mine]
            color = f"C{i % 10}"
            ax.plot(k, [float(r[7]) for r in mine], marker="o", color=color, label=f"{fam}")
            ax.plot(k, [float(r[5]) / float(r[3]) for r in mine], linestyle=":", color=color)
            ax.plot(k, [float(r[10]) for r in mine], linestyle="--", marker="x", color=color)
        ax.set_title(f"{mode} scaling, FastT / DP throughput\nours solid (simulation), OS-DPOS own schedule dotted, "
                     "paper dashed", fontsize=8)
        ax.set_xlabel("GPUs")
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


KEPT_DP = "FastT kept the DP deployment (FastT/DP = 1: no schedule of its own simulated faster)"


def scaling_verdicts(rows: list[list], passed: dict[tuple, str] | None = None) -> None:
    """Append the verdict to every row of the scaling table: FastT/DP - 1 against the paper's per GPU count
    (``vacuous`` where FastT kept DP: its record's ``answer_from`` in ``passed``, keyed by (scaling, model,
    GPUs), or FastT/DP = 1), the speedup per model against the paper's printed one (at most ``trend`` where a
    row of the model is neither, :func:`~dnnplace.experiments.verdicts.summarise`; ``vacuous`` where FastT kept
    DP at every GPU count), with the cause measured in the model's rows where it is not reproduced."""
    passed = passed or {}
    for i, r in enumerate(rows):
        if r[2] != "speedup":
            kept = passed.get((r[0], r[1], r[2])) or (KEPT_DP if r[7] == 1.0 else None)
            r.append("" if r[2] == 1 else V.qualify(V.with_cause(
                V.judge(r[10] - 1, r[7] - 1, abs_tol=0.01, neutral=0.0),
                f"OS-DPOS's own schedule (strict replay) differs from DP's throughput by {r[5] / r[3] - 1:+.0%}"),
                vacuous=kept))
            continue
        mine = [x for x in rows[:i] if x[0] == r[0] and r[1].startswith(f"{x[1]}:") and x[2] != "speedup"]
        multi = [x for x in mine if x[2] != 1]
        own = [x[5] / x[3] - 1 for x in multi]
        one, top = mine[0], mine[-1]
        cause = (f"OS-DPOS's own schedule (strict replay) differs from DP's throughput by {min(own):+.0%} to "
                 f"{max(own):+.0%} at 2-{top[2]} GPUs (FastT keeps DP unless its own is faster); our DP scales "
                 f"{top[3] / one[3]:.2f}x from 1 to {top[2]} GPUs, the paper's {top[8] / one[8]:.2f}x")
        verdict = V.summarise(V.with_cause(V.judge(r[10], r[7], abs_tol=0.01, neutral=0.0), cause),
                              [x[-1] for x in multi])
        r.append(V.qualify(verdict, vacuous=f"{KEPT_DP.split(' (')[0]} at every GPU count"
                           if all(V.kind_of(x[-1]) == V.VACUOUS for x in multi) else None))


PAPER_FIG2_MAX = 26.9  # FastT Fig. 2: "up to 26.9%" (reference(): fig2_max_gain_percent)


def splits_verdicts(rows: list[list], t6: dict[str, tuple[float, float]], f2: dict[str, float]) -> None:
    """Append the verdict to every row of the splits table (Table 5 per op, Table 6 per model on the planner's
    splits against the printed speed-up, Fig. 2 on the model with the largest gain). ``vacuous``: an op of
    Table 5 our planner left unsplit (a planner that never splits gives that too), a Table 6 run that
    accepted no split (its time is the no-split time)."""
    accepted = next((r[5] for r in rows if r[0] == "table5" and r[2] == "all accepted splits"), "none")
    best = max(f2, key=f2.get) if f2 else None
    for r in rows:
        fam = r[1].split(" (")[0]
        if r[0] == "table5" and r[3] is not None:
            same = r[4].endswith(r[5])
            verdict = V.REPRODUCED if same else V.with_cause(
                V.NOT_REPRODUCED, f"our planner accepts no split of {r[2]}; its accepted splits: {accepted}")
            r.append(V.qualify(verdict, vacuous=f"our planner left {r[2]} unsplit (paper: {r[4].split(', ')[-1]}; "
                                                f"our accepted splits: {accepted})" if r[5] == "split: no" else None))
        elif r[0] == "table6" and fam in t6:
            inner = str(r[5]).partition("(")[2].partition(")")[0]  # "<n> splits; planner estimate <a> -> <b>"
            n = inner.partition(" splits")[0]
            cause = (f"the {r[2].split()[-1]} accepts {n} splits on our graph (planner "
                     f"estimate {inner.partition('planner estimate ')[2]} ms)") if "splits;" in inner else None
            r.append(V.qualify(V.with_cause(V.judge(t6[fam][1], 100 * (r[3] / r[4] - 1), abs_tol=1.0, neutral=0.0),
                                            cause),
                               vacuous=f"the {r[2].split()[-1]} accepted no split: the split run is the no-split "
                                       "run" if n == "0" else None))
        elif r[0] == "fig2" and fam == best:
            r.append(f"{V.judge(PAPER_FIG2_MAX, f2[fam], abs_tol=1.0, neutral=0.0)} (largest gain, all models)")
        else:
            r.append("")


def memory_verdict(ours: list, paper: list) -> str:
    """One row of Table 3: ``vacuous`` where our FastT's time is DP's (it kept the data-parallel start; the
    paper's FastT is faster or fits where DP does not); else reproduced when every cell is within the tolerance
    (OOM where the paper's is OOM), trend when the same cells are OOM, else not reproduced (naming the cells
    that differ)."""
    pairs = [(p, o) for p, o in zip(paper, ours, strict=True) if p is not None]
    oom_same = all((p == "OOM") == (o == "OOM") for p, o in pairs)
    if not oom_same:
        cols = ", ".join(c for c, (p, o) in zip(("1 GPU", "DP 2", "FastT 2"), zip(paper, ours, strict=True))
                         if p is not None and (p == "OOM") != (o == "OOM"))
        verdict = V.with_cause(V.NOT_REPRODUCED, f"fits where the paper's OOM or the reverse: {cols}")
    else:
        vals = [V.judge(p, o) for p, o in pairs if p != "OOM"]
        verdict = V.REPRODUCED if all(v == V.REPRODUCED for v in vals) else V.TREND
    dp, ft = ours[1], ours[2]
    kept = isinstance(dp, float) and dp == ft and paper[1] != paper[2]
    return V.qualify(verdict, vacuous=f"our FastT 2 = DP 2 ({ft:.4g} s: DPOS kept the data-parallel start)"
                     if kept else None)
