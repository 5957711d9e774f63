"""Log-scale axes whose tick labels never overlap: :func:`log_ticks` picks the labelled
ticks of a log axis for its width, :func:`plain_log_ticks` puts them on a matplotlib axis
(the plots of ``dnnplace compare``, :mod:`dnnplace.compare_plots`)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["log_ticks", "plain_log_ticks"]


_TICK_STEPS = ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 5), (1, 3), (1,))
"""Mantissas of the labelled ticks of a log axis, densest first."""


def log_ticks(lo: float, hi: float, width_in: float, fontsize: float = 10.0) -> list[tuple[float, str]]:
    """Labelled ticks ``(value, text)`` of a log axis from ``lo`` to ``hi`` drawn
    ``width_in`` inches wide: the densest of 1..9, 1-2-5, 1-3 and 1 per decade (then every
    k-th decade) whose labels (plain numbers, ``0.007``, ``20``) keep a gap between them; at
    least two ticks, evenly spaced nice values where no decade mark falls inside a short axis.

    >>> [t for _v, t in log_ticks(0.0065, 0.0105, 6.0)]
    ['0.007', '0.008', '0.009', '0.01']
    >>> [t for _v, t in log_ticks(0.05, 0.7, 2.0)]
    ['0.05', '0.1', '0.2', '0.5']
    >>> [t for _v, t in log_ticks(0.05, 0.7, 1.0)]
    ['0.1', '0.3']
    >>> [t for _v, t in log_ticks(1e-3, 1e3, 6.0)]
    ['0.001', '0.01', '0.1', '1', '10', '100', '1000']
    """
    import numpy as np

    span = math.log10(hi / lo)
    char_in = 0.62 * fontsize / 72  # a digit's width, generously

    def fits(vals: list[float]) -> bool:
        texts = [_tick_text(v, vals) for v in vals]
        pos = [math.log10(v / lo) / span * width_in for v in vals]
        return all(pos[k + 1] - pos[k] >= char_in * (0.5 * (len(texts[k]) + len(texts[k + 1])) + 1.5)
                   for k in range(len(vals) - 1))

    d0, d1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    inside = lambda vals: [v for v in vals if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]  # noqa: E731
    cands = [inside([m * 10.0 ** d for d in range(d0, d1 + 1) for m in subs]) for subs in _TICK_STEPS]
    cands += [inside([10.0 ** d for d in range(d0, d1 + 1) if d % k == 0]) for k in (2, 3, 5, 10)]
    for vals in cands:
        if len(vals) >= 2 and fits(vals):
            return [(v, _tick_text(v, vals)) for v in vals]
    from matplotlib.ticker import MaxNLocator  # too short for decade marks: nice linear values

    for n in (5, 4, 3, 2, 1):
        vals = inside([float(v) for v in MaxNLocator(nbins=n, steps=[1, 2, 5, 10]).tick_values(lo, hi)
                       if v > 0])
        if len(vals) >= 2 and fits(vals) or n == 1:
            vals = vals or [float(np.sqrt(lo * hi))]
            return [(v, _tick_text(v, vals)) for v in vals]
    return []


def _tick_text(v: float, vals: list[float]) -> str:
    """``v`` as a plain number (``20``, ``0.007``) with the fewest significant digits that
    tell ``vals`` apart."""
    def text(u: float, digits: int) -> str:
        t = f"{u:.{digits}g}"
        return f"{u:.0f}" if "e+" in t else t

    for digits in range(1, 8):
        if len({text(u, digits) for u in vals}) == len(vals):
            return text(v, digits)
    return text(v, 8)


def plain_log_ticks(ax: Any) -> None:
    """The x axis's labelled ticks from :func:`log_ticks` for its current limits and width;
    the other decade marks unlabelled."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, LogLocator, NullFormatter

    lo, hi = ax.get_xlim()
    fig = ax.get_figure()
    width = ax.get_position().width * fig.get_size_inches()[0]
    size = ax.xaxis.get_ticklabels()[0].get_fontsize() if ax.xaxis.get_ticklabels() else 10.0
    ticks = log_ticks(lo, hi, width, size)
    ax.xaxis.set_major_locator(FixedLocator([v for v, _t in ticks]))
    ax.xaxis.set_major_formatter(FixedFormatter([t for _v, t in ticks]))
    ax.xaxis.set_minor_locator(LogLocator(subs="all"))
    ax.xaxis.set_minor_formatter(NullFormatter())
