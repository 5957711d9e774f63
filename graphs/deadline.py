"""A wall-clock deadline passed down from a request's time limit to every stage of a
method (coarsening, model build, hand-off to the solver, the solve, refinement).

A method given ``--time-limit L`` must end within about ``L`` seconds as a whole
process, so a time limit is not only the solver's: each stage asks the
:class:`Deadline` how much time is left, a long loop checks it (:meth:`Deadline.check`
raises :class:`TimeLimitReached`) and the method then returns the best answer it
already has (its incumbent, e.g. the list schedule it started from) with termination
``time_limit``. ``dnnplace solve`` starts the deadline at the process's start (imports
and loading count) and keeps a small reserve for the evaluation and the output.

>>> d = Deadline(10.0)
>>> 9.0 < d.remaining() <= 10.0, d.expired()
(True, False)
>>> past = Deadline(0.0)
>>> past.expired(), past.remaining()
(True, 0.0)
>>> past.check("model build")
Traceback (most recent call last):
...
dnnplace.graphs.deadline.TimeLimitReached: time limit reached during model build
>>> Deadline(None).remaining() is None, Deadline(None).expired()
(True, False)
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

__all__ = ["Deadline", "TimeLimitReached", "process_start", "NO_DEADLINE", "capped"]


class TimeLimitReached(Exception):
    """Raised by :meth:`Deadline.check` past the deadline: the stage stops and the
    method falls back to the best answer it has."""


class Deadline:
    """``seconds`` after ``start`` (a :func:`time.monotonic` reading; default now);
    ``None`` seconds: no deadline (never expires)."""

    __slots__ = ("end", "seconds")

    def __init__(self, seconds: float | None, *, start: float | None = None):
        self.seconds = None if seconds is None else float(seconds)
        self.end = None if seconds is None else (time.monotonic() if start is None else float(start)) + float(seconds)

    def remaining(self) -> float | None:
        """Seconds left (``0.0`` once past; ``None`` without a deadline)."""
        if self.end is None:
            return None
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def check(self, what: str = "this stage") -> None:
        """Raise :class:`TimeLimitReached` (naming ``what``) once the deadline has passed."""
        if self.expired():
            raise TimeLimitReached(f"time limit reached during {what}")

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the remaining time from now (a stage's share);
        itself without a deadline."""
        left = self.remaining()
        return self if left is None else Deadline(fraction * left)

    def guard(self, what: str = "this stage") -> _Guard:
        """A ``with`` block that stops at the deadline: where a stage runs library code
        that checks no deadline (a Pyomo model's hand-off to a solver), a watchdog
        raises :class:`TimeLimitReached` in the calling thread when the deadline passes
        while the block runs (delivered at the next Python instruction: C code, e.g.
        a solver's own search, finishes its call first). Only for stages whose partial
        work is thrown away. Past the deadline already, the block is not entered."""
        return _Guard(self, what)

    def __repr__(self) -> str:
        left = self.remaining()
        return "Deadline(none)" if left is None else f"Deadline({left:.3f} s left)"


REFIRE = 0.25
"""Seconds between a guard's deliveries of :class:`TimeLimitReached` while its block runs on."""


class _Guard:
    """:meth:`Deadline.guard`."""

    def __init__(self, deadline: Deadline, what: str):
        self.deadline, self.what = deadline, what
        self._lock = threading.Lock()
        self._done = False
        self._fired = False
        self._timer: threading.Timer | None = None
        self._tid = 0

    def _fire(self) -> None:
        """Raise in the guarded thread, and again every :data:`REFIRE` seconds while the block
        still runs: an exception delivered inside a weakref callback or a ``__del__`` is
        printed and dropped by Python ("Exception ignored ..."), and the block would run on."""
        with self._lock:
            if self._done:
                return
            self._fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), ctypes.py_object(TimeLimitReached))
            self._timer = threading.Timer(REFIRE, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def __enter__(self) -> _Guard:
        self.deadline.check(self.what)
        left = self.deadline.remaining()
        if left is not None:
            self._tid = threading.get_ident()
            self._timer = threading.Timer(left, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        with self._lock:
            self._done = True
            if self._fired:  # an exception raised but not delivered yet must not escape the block
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), None)
            if self._timer is not None:
                self._timer.cancel()
        if exc_type is TimeLimitReached and not (exc is not None and exc.args):
            raise TimeLimitReached(f"time limit reached during {self.what}") from None
        return False


NO_DEADLINE = Deadline(None)
"""The deadline of a run without a time limit."""


def capped(limit: float | None, deadline: Deadline | None, *, floor: float = 0.05) -> float | None:
    """A solver's time limit: ``limit``, cut to what ``deadline`` has left (at least
    ``floor`` seconds, so a solver asked for a time limit always gets a positive one).

    >>> capped(30.0, Deadline(5.0)) <= 5.0, capped(30.0, None), capped(None, Deadline(None))
    (True, 30.0, None)
    >>> capped(30.0, Deadline(0.0))
    0.05
    """
    left = None if deadline is None else deadline.remaining()
    if left is None:
        return limit
    return max(floor, left if limit is None else min(float(limit), left))


def process_start() -> float:
    """This process's start as a :func:`time.monotonic` reading (Linux ``/proc``; now
    where it cannot be read), so a deadline can count the interpreter's start-up and
    imports too."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - min(max(age, 0.0), 60.0)  # a clock oddity never moves the start more than a minute back
