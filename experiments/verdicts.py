"""One rule for every reproduction's verdict: does our figure reproduce the paper's effect?

Each reproduction's table states, per cell (or per row where the paper's figure is per
row), the paper's figure (the number printed in the paper, kept in the project's
reference files with its table or figure; a figure we derive from printed ones is
labelled derived, with how), ours and one verdict. The figure judged is an *effect*: the
method against the paper's own baseline on the same row (FastT against DP, Celeritas
against Order-Place or METIS, PARDNN against CP and LC+GLB, Pesto against the expert and
the list schedule), never an absolute time. Three kinds come before any comparison of
values (:func:`qualify`, in this order):

``not comparable``
    the two figures do not measure the same thing: graphs of another size than the
    paper's, or ours against a baseline the paper did not run.
``infeasible``
    our placement does not fit memory (the evaluator's verdict under the memory model
    the method keeps), so its time shows no effect the paper's hardware could run.
``vacuous``
    our method returned its baseline or its start unchanged (no split accepted, the
    data-parallel deployment kept, the warm start passed through; a record's
    ``answer_from`` of ``warm start: ...``, ``never-worse: ...`` or ``fallback: ...``,
    :func:`vacuous_cause`): there is no effect of ours to compare, whatever the paper's.

Otherwise:

``reproduced``
    a value within the stated tolerance of the paper's (:func:`judge`); a ranking equal to
    the paper's over the methods both ran, where a tie of ours satisfies no pair the paper
    separates by more than the tie tolerance (:func:`judge_ranking`); a direction the
    paper states, which ours follows step by step (:func:`judge_direction`); or, for a
    figure the paper gives as an upper bound (a placement time), ours at or below it
    (:func:`judge_at_most`). A per-model figure summarising rows (a speed-up at its best
    GPU count) is at most ``trend`` where one of its rows is neither (:func:`summarise`).
``trend``
    the same side of the neutral value as the paper (a speed-up above 0, a ratio above 1),
    the same winner, or the same overall direction, but not the magnitude or the full order.
``not reproduced``
    neither; :func:`with_cause` appends the measured cause, which each writer cites from a
    measurement (its own table's columns, a benchmark or a results file), never a guess.

A cell the paper has no figure for, or that we did not run, gets no verdict (``""``).
:data:`TOLERANCE` is the rule in words, for the tables' preambles; :func:`tally` counts a
rendered table's verdicts by kind (the per-paper lines of results/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["REPRODUCED", "TREND", "NOT_REPRODUCED", "VACUOUS", "INFEASIBLE", "NOT_COMPARABLE", "KINDS", "REL_TOL",
           "TOLERANCE", "judge", "judge_ranking", "judge_direction", "judge_at_most", "with_cause", "qualify",
           "vacuous_cause", "summarise", "kind_of", "tolerance_note", "count", "tally", "summary_table"]

REPRODUCED, TREND, NOT_REPRODUCED = "reproduced", "trend", "not reproduced"
VACUOUS, INFEASIBLE, NOT_COMPARABLE = "vacuous", "infeasible", "not comparable"
KINDS = (REPRODUCED, TREND, NOT_REPRODUCED, VACUOUS, INFEASIBLE, NOT_COMPARABLE)
REL_TOL = 0.25  # the default relative tolerance of a value


def tolerance_note(rel: float = REL_TOL, abs_tol: float = 0.0, unit: str = "") -> str:
    """The value rule in words, for a table's preamble."""
    within = f"{rel:.0%} of the paper's figure" + (f" or {abs_tol:g}{unit}" if abs_tol else "")
    return (f"Verdicts (one rule, `dnnplace.experiments.verdicts`) on the effect, the method against the paper's "
            "own baseline on the same row: `not comparable` = graphs of another size or a baseline the paper did "
            "not run; `infeasible` = our placement over memory; `vacuous` = our method returned its baseline or "
            f"start unchanged; else `reproduced` = ours within {within} (a ranking: the same order over the "
            "methods both ran, a tie of ours not matching a gap of the paper's beyond the tie tolerance; a stated "
            "direction: followed at every step); `trend` = the same side of the neutral value as the paper (a "
            "speed-up above 0, a ratio above 1), the same winner or the same overall direction, not the magnitude; "
            "`not reproduced` = neither, with the measured cause. The paper column is the printed figure; a figure "
            "we derived is labelled so.")


TOLERANCE = tolerance_note()


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def judge(paper: float | None, ours: float | None, *, rel: float = REL_TOL, abs_tol: float = 0.0,
          neutral: float | None = None) -> str:
    """The verdict on one value.

    ``reproduced`` when ``|ours - paper| <= max(rel * |paper|, abs_tol)``; else ``trend``
    when ours and the paper's lie on the same side of ``neutral`` (0 for a speed-up or a
    reduction, 1 for a ratio; ``None``: the figure has no direction, so no trend), ours by
    more than ``abs_tol`` (the noise floor); else ``not reproduced``. ``""`` when either
    figure is missing.
    """
    if _missing(paper) or _missing(ours):
        return ""
    if abs(ours - paper) <= max(rel * abs(paper), abs_tol) + 1e-12:
        return REPRODUCED
    if neutral is not None and (ours - neutral) * (paper - neutral) > 0 and abs(ours - neutral) > abs_tol:
        return TREND
    return NOT_REPRODUCED


def judge_ranking(paper: Sequence[str] | Mapping[str, float], ours: Sequence[str] | Mapping[str, float], *,
                  tie: float = 0.0) -> str:
    """The verdict on a ranking (best first), over the items both rankings hold.

    ``reproduced``: the same order; ``trend``: the paper's first item first in ours too;
    else ``not reproduced``. ``""`` when fewer than two items are common. Either ranking
    may come as values (lower is better); two values within ``tie`` (relative) of each
    other count as tied: a tie in the paper's asks for no order, and a tie in ours
    satisfies only such a pair: where the paper separates two items by more than ``tie``
    (or ranks them as a list), ours must put them in the paper's order by more than
    ``tie`` too (equal to Order-Place is no win over it). Where the paper separates no two
    of the common items (all within ``tie``), its ranking asks nothing of ours:
    ``not comparable``.
    """
    def values(r: Sequence[str] | Mapping[str, float]) -> dict[str, float]:
        return dict(r) if isinstance(r, Mapping) else {x: float(i) for i, x in enumerate(r)}

    pv, ov = values(paper), values(ours)
    t_p = tie if isinstance(paper, Mapping) else 0.0
    t_o = tie if isinstance(ours, Mapping) else 0.0
    p = sorted((x for x in pv if x in ov), key=pv.get)
    if len(p) < 2:
        return ""

    def holds(a: str, b: str) -> bool:  # the paper ranks a before b beyond a tie: so must ours, beyond a tie
        if isinstance(paper, Mapping) and pv[b] <= pv[a] * (1 + t_p):
            return True
        return ov[a] * (1 + t_o) < ov[b] if t_o else ov[a] < ov[b]

    if isinstance(paper, Mapping) and all(pv[b] <= pv[a] * (1 + t_p) for i, a in enumerate(p) for b in p[i + 1:]):
        return f"{NOT_COMPARABLE}: the paper's times of the items both ran ({', '.join(p)}) are within {t_p:.0%}"
    if all(holds(a, b) for i, a in enumerate(p) for b in p[i + 1:]):
        return REPRODUCED
    return TREND if all(holds(p[0], b) for b in p[1:]) else NOT_REPRODUCED


def judge_direction(values: Iterable[float | None], increasing: bool, *, abs_tol: float = 0.0) -> str:
    """The verdict on a series the paper says grows (``increasing``) or shrinks along its axis.

    ``reproduced``: every step moves the paper's way or stays within ``abs_tol``, and the
    whole series moves by more than ``abs_tol``; ``trend``: last minus first moves the
    paper's way by more than ``abs_tol`` but some step goes against it; else ``not
    reproduced``. Missing values are skipped; ``""`` when fewer than two remain.
    """
    v = [x for x in values if not _missing(x)]
    if len(v) < 2:
        return ""
    sign = 1.0 if increasing else -1.0
    steps = [sign * (b - a) for a, b in zip(v, v[1:], strict=False)]
    total = sign * (v[-1] - v[0])
    if total <= abs_tol:
        return NOT_REPRODUCED
    return REPRODUCED if all(s >= -abs_tol for s in steps) else TREND


def judge_at_most(paper: float | None, ours: float | None) -> str:
    """The verdict on a figure the paper's claim bounds from above (a placement time):
    ``reproduced`` when ours is at most the paper's, else ``not reproduced``."""
    if _missing(paper) or _missing(ours):
        return ""
    return REPRODUCED if ours <= paper else NOT_REPRODUCED


def qualify(verdict: str, *, not_comparable: str | None = None, infeasible: str | None = None,
            vacuous: str | None = None) -> str:
    """The verdict of a judged cell after the rules that come before any comparison.

    ``"not comparable: <why>"``, else ``"infeasible: <why>"``, else ``"vacuous: <why>"``
    for the first reason given (each a measured fact about our cell: the graph sizes, the
    memory overflow, what our method returned); ``verdict`` itself when none is. A cell
    without a verdict (``""``: nothing to judge) stays without one.
    """
    if not verdict:
        return verdict
    for kind, why in ((NOT_COMPARABLE, not_comparable), (INFEASIBLE, infeasible), (VACUOUS, vacuous)):
        if why:
            return f"{kind}: {why}"
    return verdict


_PASSED_THROUGH = ("warm start:", "never-worse:", "fallback:")


def vacuous_cause(rec: Mapping | None) -> str | None:
    """Why a run's answer is not its method's own (its record's ``answer_from`` names a warm
    start, a never-worse rival or a fallback), e.g. ``"answer from warm start: dp"``; else
    ``None`` (the method's own answer, or a record without ``answer_from``)."""
    src = (rec or {}).get("answer_from")
    return f"answer from {src}" if isinstance(src, str) and src.startswith(_PASSED_THROUGH) else None


def kind_of(verdict: str) -> str:
    """The kind of a rendered verdict (``"not reproduced: a cause"`` -> ``"not reproduced"``), ``""`` if none."""
    v = verdict.strip()
    return next((k for k in sorted(KINDS, key=len, reverse=True) if v == k or v.startswith((k + ":", k + " ("))), "")


def summarise(verdict: str, parts: Iterable[str]) -> str:
    """A per-model figure summarising rows (a speed-up at its best GPU count): ``reproduced`` only
    where every judged row is ``reproduced`` or ``trend``; else at most ``trend`` (one peak
    does not reproduce a model whose other rows show no effect)."""
    kinds = [kind_of(p) for p in parts if p]
    if verdict == REPRODUCED and any(k not in (REPRODUCED, TREND) for k in kinds):
        return TREND
    return verdict


def with_cause(verdict: str, cause: str | None) -> str:
    """``not reproduced: <cause>`` (the cause only where the verdict is not reproduced; a
    cause no ablation measured is ``cause unknown``)."""
    if verdict == NOT_REPRODUCED:
        return f"{NOT_REPRODUCED}: {cause or 'cause unknown'}"
    return verdict


def count(verdicts: Iterable[str]) -> str:
    """``"3 reproduced, 1 trend, 2 not reproduced"`` (verdicts with causes counted by their kind; the
    kinds :func:`qualify` gives only where they occur)."""
    n = {k: 0 for k in KINDS}
    for v in verdicts:
        if k := kind_of(v or ""):
            n[k] += 1
    return ", ".join(f"{c} {k}" for k, c in n.items() if c or k in (REPRODUCED, TREND, NOT_REPRODUCED))


def tally(markdown: str) -> dict[str, int]:
    """The verdicts of a rendered table by kind: every table row's cell under a header cell
    that starts with ``verdict`` (``table.md`` as the reproductions write it)."""
    n = {k: 0 for k in KINDS}
    col: list[int] = []
    for line in markdown.splitlines():
        if not line.startswith("|"):
            col = [] if not line.strip() else col
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(line.replace("|", "").strip()) <= set("-: "):
            continue
        if any(c.lower().startswith("verdict") for c in cells) and not col:
            col = [i for i, c in enumerate(cells) if c.lower().startswith("verdict")]
            continue
        for i in col:
            if i < len(cells) and (k := kind_of(cells[i])):
                n[k] += 1
    return n


def _cell(x) -> str:
    return "" if x is None else str(x).replace("|", "/")


def summary_table(rows: Iterable[Sequence], header: Sequence[str] = ("figure", "paper", "ours", "verdict")
                  ) -> list[str]:
    """Markdown lines of a small paper / ours / verdict table (for a table's footer)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(x) for x in r) + " |" for r in rows]
    return lines
