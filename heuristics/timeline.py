"""Busy intervals of each device and the insertion-based earliest start time.

FastT (Yi et al. Sec. 5.1) and Celeritas (Adjusting Placement, Alg. 2) both start a node at
the earliest *idle gap* of its device that holds it, not after the last node placed there;
HEFT (Topcuoglu et al.) calls this the insertion-based policy. One implementation serves
every list scheduler (``docs/heuristics.md`` 0):

.. math::

    \\operatorname{earliest\\_slot}(d, r, p) = \\min \\{ t \\ge r : [t, t + p)
    \\cap \\operatorname{busy}(d) = \\emptyset \\},

ties going to the earliest gap; zero-length nodes fit anywhere (they start at ``r``).

Each device keeps its *free gaps* as two sorted lists (starts, ends), the last gap
``[end of last busy interval, inf)``. A query bisects to the first gap ending after ``r``
and walks forward to the first gap long enough; the length of the longest finite gap is
cached, so a node longer than every gap jumps straight to the tail. Reserving an interval
splits one gap in O(log g) plus a list insertion.
"""

from __future__ import annotations

import bisect
import math

__all__ = ["Timeline"]

_EPS = 1e-9


class Timeline:
    """Per-device busy intervals with insertion-based (``insertion=True``) or append-only
    earliest start times.

    Examples
    --------
    >>> tl = Timeline(1)
    >>> tl.reserve(0, 0.0, 2.0); tl.reserve(0, 5.0, 6.0)
    >>> tl.earliest_slot(0, 1.0, 3.0)   # the gap [2, 5) holds 3 units
    2.0
    >>> tl.earliest_slot(0, 1.0, 4.0)   # too long for it: after the last interval
    6.0
    >>> Timeline(1, insertion=False).earliest_slot(0, 1.0, 1.0)
    1.0
    """

    def __init__(self, devices: int, *, insertion: bool = True):
        self.insertion = insertion
        self._starts: list[list[float]] = [[0.0] for _ in range(devices)]
        self._ends: list[list[float]] = [[math.inf] for _ in range(devices)]
        self._longest: list[float | None] = [0.0] * devices  # longest finite gap; None = recompute

    def finish(self, d: int) -> float:
        """End of the last busy interval of device ``d`` (0 when idle)."""
        return self._starts[d][-1]

    def busy(self, d: int) -> list[tuple[float, float]]:
        """The busy intervals of ``d`` in time order (the complement of its gaps)."""
        s, e = self._starts[d], self._ends[d]
        out, t = [], 0.0
        for a, b in zip(s, e):
            if a > t:
                out.append((t, a))
            t = b
        return out

    def _longest_gap(self, d: int) -> float:
        if self._longest[d] is None:
            s, e = self._starts[d], self._ends[d]
            self._longest[d] = max((e[j] - s[j] for j in range(len(s) - 1)), default=0.0)
        return self._longest[d]

    def earliest_slot(self, d: int, ready: float, dur: float) -> float:
        """The earliest ``t >= ready`` at which ``[t, t + dur)`` is free on device ``d``."""
        starts, ends = self._starts[d], self._ends[d]
        if dur <= 0.0:
            return ready
        if not self.insertion or dur > self._longest_gap(d) + _EPS:
            return max(ready, starts[-1])
        j = bisect.bisect_right(ends, ready)
        while True:
            t = starts[j] if starts[j] > ready else ready
            if ends[j] - t >= dur - _EPS * max(1.0, dur):
                return t
            j += 1

    def reserve(self, d: int, start: float, end: float) -> None:
        """Mark ``[start, end)`` busy on ``d``; it must lie in one free gap."""
        if end <= start:
            return
        starts, ends = self._starts[d], self._ends[d]
        j = bisect.bisect_right(starts, start + _EPS * max(1.0, abs(start))) - 1
        tol = _EPS * max(1.0, abs(end))
        if j < 0 or end > ends[j] + tol:
            raise ValueError(f"device {d}: [{start}, {end}) overlaps a busy interval")
        gs, ge = starts[j], ends[j]
        if self._longest[d] is not None and ge != math.inf and ge - gs >= self._longest[d] - _EPS:
            self._longest[d] = None
        pieces = [(a, b) for a, b in ((gs, start), (end, ge)) if b - a > 0.0]
        starts[j:j + 1] = [a for a, _ in pieces]
        ends[j:j + 1] = [b for _, b in pieces]
        if ge == math.inf and self._longest[d] is not None and start > gs:
            self._longest[d] = max(self._longest[d], start - gs)
