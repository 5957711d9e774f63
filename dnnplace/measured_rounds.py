"""Plans measured interleaved in rounds until their medians are known (docs/execution.md,
"Measured selection"): :func:`measure_rounds` runs the plans' steps interleaved (each round
one :func:`~dnnplace.pytorch.execution.launch.execute` call with ``interleave=True``: after
each plan's warm-up, one step of each plan in turn, so a drift of the host falls on all of
them alike), ``steps`` measured steps per plan and round, and repeats rounds until every
plan's median has a confidence interval (level :data:`LEVEL`) within +-:data:`PRECISION`
of it, or ``max_steps`` steps per plan (the stated cap).

The interval is the distribution-free order-statistic confidence interval of the median
(:func:`median_ci`): with ``n`` sorted steps, ``[x_(j), x_(n+1-j)]`` for the largest ``j`` whose
binomial(n, 1/2) coverage is at least ``LEVEL``; it assumes only independent steps of one
distribution (no normality: step times are skewed by the host's interruptions). Under 6
steps no such pair exists, and the interval is unbounded (nothing is separated).
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PRECISION", "LEVEL", "median_ci", "converged", "Rounds", "measure_rounds", "ms_text"]

PRECISION = 0.03
"""Rounds stop when every plan's interval lies within +-3 % of its median."""
LEVEL = 0.95


def median_ci(xs: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(median, lo, hi)``: the order-statistic confidence interval of the median.

    With ``n`` sorted values, ``[x_(j), x_(n+1-j)]`` (1-based) covers the median with
    probability ``P(j <= B <= n - j)``, ``B ~ binomial(n, 1/2)``; ``j`` is the largest with
    coverage >= ``level``. With too few values for any ``j`` (``n < 6`` at 95 %) the
    interval is ``(-inf, inf)``.

    >>> median_ci([5, 1, 4, 2, 3, 6])
    (3.5, 1, 6)
    >>> median_ci(range(1, 21))   # j = 6: P(6 <= B <= 14) = 0.959
    (10.5, 6, 15)
    >>> median_ci([1, 2, 3])
    (2, -inf, inf)
    """
    s = sorted(xs)
    n = len(s)
    if not n:
        raise ValueError("no values")
    med = statistics.median(s)
    best = 0
    for j in range(1, n // 2 + 1):
        cover = sum(math.comb(n, i) for i in range(j, n - j + 1)) / 2 ** n
        if cover >= level:
            best = j
        else:
            break
    if not best:
        return med, -math.inf, math.inf
    return med, s[best - 1], s[n - best]


def converged(xs: Sequence[float], precision: float = PRECISION) -> bool:
    """Whether the median's interval lies within ``+-precision`` of the median."""
    med, lo, hi = median_ci(xs)
    return lo >= (1 - precision) * med and hi <= (1 + precision) * med


@dataclass
class Rounds:
    """What :func:`measure_rounds` measured, per plan (in the order given): every measured
    step (``samples``, ms), the last round's record (``last``: a
    :class:`~dnnplace.pytorch.execution.launch.Measured`, with that round's median step's
    timeline), whether every round equalled the eager step (``matches``), each operator's
    median time over every round's steps (``op_median_ms``, node id -> ms: the same steps as
    ``samples``, where a round's own medians would follow a drift of the host); and how many
    rounds ran."""

    samples: list[list[float]]
    last: list[Any]
    matches: list[bool]
    rounds: int
    op_median_ms: list[dict[str, float]]


def measure_rounds(spec: Any, plans: Sequence[Any], device_names: Sequence[str], names: Sequence[str], *,
                   steps: int, max_steps: int, warmup: int, timeout_s: float, captured: Any = None,
                   precision: float = PRECISION, desc: str = "rounds") -> Rounds:
    """Run ``plans`` (named ``names``) of the model ``spec`` interleaved in rounds of ``steps``
    measured steps each (``warmup`` before them, per plan and round) until every plan's
    median is :func:`converged` within ``precision`` or ``max_steps`` steps per plan ran;
    a progress bar on a terminal, else one line per round on stderr."""
    from tqdm import tqdm

    from dnnplace.formulations.solvers.progress import show_progress
    from dnnplace.pytorch.execution.launch import execute

    samples: list[list[float]] = [[] for _ in plans]
    durations: list[dict[str, list[float]]] = [{} for _ in plans]
    matches = [True] * len(plans)
    last: list[Any] = [None] * len(plans)
    rounds = 0
    bar = tqdm(total=math.ceil(max_steps / steps), desc=desc, unit="round", file=sys.stderr,
               disable=not show_progress(), leave=False)
    try:
        while True:
            n = min(steps, max_steps - len(samples[0]))
            runs = execute(spec, list(plans), list(device_names), steps=n, warmup=warmup, timeout_s=timeout_s,
                           captured=captured, interleave=True, live=False)
            rounds += 1
            for i, m in enumerate(runs):
                samples[i] += m.step_ms
                for v, d in m.op_durations_ms.items():
                    durations[i].setdefault(v, []).extend(d)
                matches[i] = matches[i] and m.matches_reference
                last[i] = m
            line = f"round {rounds}: " + ", ".join(f"{name} {ms_text(med)} ms [{ms_text(lo)}, {ms_text(hi)}]"
                                                   for name, (med, lo, hi) in zip(names, map(median_ci, samples)))
            if bar.disable:
                print(line, file=sys.stderr, flush=True)
            else:
                bar.write(line, file=sys.stderr)
            bar.update(1)
            if len(samples[0]) >= max_steps or all(converged(s, precision) for s in samples):
                break
    finally:
        bar.close()
    return Rounds(samples, last, matches, rounds,
                  [{v: statistics.median(d) for v, d in per.items()} for per in durations])


def ms_text(x: float) -> str:
    """``x`` in ms with three decimals, ``-`` where it is infinite (an unbounded interval)."""
    return f"{x:.3f}" if math.isfinite(x) else "-"
