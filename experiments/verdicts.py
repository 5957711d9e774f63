"""One rule for every reproduction's verdict: does our figure reproduce the paper's?

Each reproduction's table states, per cell (or per row where the paper's figure is per
row), the paper's figure, ours and one of three verdicts:

``reproduced``
    a value within the stated tolerance of the paper's (:func:`judge`); a ranking equal to
    the paper's over the methods both ran (:func:`judge_ranking`); a direction the paper
    states, which ours follows step by step (:func:`judge_direction`); or, for a figure
    the paper gives as an upper bound (a placement time), ours at or below it
    (:func:`judge_at_most`).
``trend``
    the same side of the neutral value as the paper (a speed-up above 0, a ratio above 1),
    the same winner, or the same overall direction, but not the magnitude or the full order.
``not reproduced``
    neither; :func:`with_cause` appends the measured cause, which each writer cites from a
    measurement (its own table's columns, a benchmark or a results file), never a guess.

A cell the paper has no figure for, or that we did not run, gets no verdict (``""``).
:data:`TOLERANCE` is the rule in words, for the tables' preambles.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["REPRODUCED", "TREND", "NOT_REPRODUCED", "REL_TOL", "TOLERANCE", "judge", "judge_ranking",
           "judge_direction", "judge_at_most", "with_cause", "tolerance_note", "count", "summary_table"]

REPRODUCED, TREND, NOT_REPRODUCED = "reproduced", "trend", "not reproduced"
REL_TOL = 0.25  # the default relative tolerance of a value


def tolerance_note(rel: float = REL_TOL, abs_tol: float = 0.0, unit: str = "") -> str:
    """The value rule in words, for a table's preamble."""
    within = f"{rel:.0%} of the paper's figure" + (f" or {abs_tol:g}{unit}" if abs_tol else "")
    return (f"Verdicts (one rule, `dnnplace.experiments.verdicts`): `reproduced` = ours within {within} (a ranking: "
            "the same order over the methods both ran; a stated direction: followed at every step); `trend` = the "
            "same side of the neutral value as the paper (a speed-up above 0, a ratio above 1), the same winner or "
            "the same overall direction, not the magnitude; `not reproduced` = neither, with the measured cause.")


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
    other count as tied: a tie in ours matches either order, a tie in the paper's asks
    for none.
    """
    def values(r: Sequence[str] | Mapping[str, float]) -> dict[str, float]:
        return dict(r) if isinstance(r, Mapping) else {x: float(i) for i, x in enumerate(r)}

    pv, ov = values(paper), values(ours)
    t_p = tie if isinstance(paper, Mapping) else 0.0
    t_o = tie if isinstance(ours, Mapping) else 0.0
    p = sorted((x for x in pv if x in ov), key=pv.get)
    if len(p) < 2:
        return ""

    def holds(a: str, b: str) -> bool:  # the paper ranks a before b (not tied): so must ours, up to a tie
        return pv[b] <= pv[a] * (1 + t_p) or ov[a] <= ov[b] * (1 + t_o)

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


def with_cause(verdict: str, cause: str | None) -> str:
    """``not reproduced: <cause>`` (the cause only where the verdict is not reproduced)."""
    if verdict == NOT_REPRODUCED and cause:
        return f"{NOT_REPRODUCED}: {cause}"
    return verdict


def count(verdicts: Iterable[str]) -> str:
    """``"3 reproduced, 1 trend, 2 not reproduced"`` (verdicts with causes counted by their head)."""
    vs = [v for v in verdicts if v]
    n = {k: sum(v.startswith(k) for v in vs) for k in (REPRODUCED, TREND, NOT_REPRODUCED)}
    return ", ".join(f"{c} {k}" for k, c in n.items())


def _cell(x) -> str:
    return "" if x is None else str(x).replace("|", "/")


def summary_table(rows: Iterable[Sequence], header: Sequence[str] = ("figure", "paper", "ours", "verdict")
                  ) -> list[str]:
    """Markdown lines of a small paper / ours / verdict table (for a table's footer)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(x) for x in r) + " |" for r in rows]
    return lines
