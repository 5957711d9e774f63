"""A progress line for a long solve on a terminal: the stage, the time used against the limit,
and the incumbent and bound once the solver has them (``pesto: solve (HiGHS) 12s/60s
incumbent=43.3 bound=16.6``).

On stderr through tqdm, only when :func:`show_progress` says so: stderr is a terminal and
the command was not asked to be quiet (``dnnplace -q``, :func:`quiet`; a sweep's own bar
quiets the runs under it). A helper thread redraws the line twice a second, so the time
moves while a solver holds the main thread. The pipeline and the driver name the stages
(:func:`stage`); the backends report each new incumbent and bound (:func:`solver_event`,
called from the solvers' callback threads); both go to the outermost line open then (a
line opened inside another, a V-cycle's level, shows nothing itself).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, TextIO

__all__ = ["Progress", "show_progress", "quiet", "stage", "solver_event", "Trace"]

_QUIET: list[bool] = [False]
_OPEN: list[Progress] = []  # the lines open now, outermost first
REDRAW = 0.5
"""Seconds between redraws of an open line."""


@contextlib.contextmanager
def quiet(on: bool = True):
    """No progress line while the block runs (``dnnplace -q``, a sweep's runs)."""
    before = _QUIET[0]
    _QUIET[0] = before or bool(on)
    try:
        yield
    finally:
        _QUIET[0] = before


def show_progress(stream: TextIO | None = None) -> bool:
    """Whether a progress line goes to ``stream`` (default stderr): a terminal, not quieted."""
    stream = sys.stderr if stream is None else stream
    try:
        return not _QUIET[0] and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def stage(name: str) -> None:
    """The run entered stage ``name``, for the progress line open now (if any)."""
    if _OPEN:
        _OPEN[0].stage(name)


def solver_event(incumbent: float | None, bound: float | None) -> None:
    """A solver's new incumbent and bound, for the progress line open now (if any); thread-safe."""
    if _OPEN:
        _OPEN[0].solver(incumbent, bound)


class Trace(list):
    """A solver's trace of ``(seconds, incumbent, bound)`` that also reports each point to
    the progress line (:func:`solver_event`)."""

    def append(self, point: tuple) -> None:
        super().append(point)
        solver_event(point[1], point[2])


class Progress:
    """One progress line (a context manager): ``what`` (the method), ``limit`` (seconds,
    or ``None``), counted from ``start`` (a :func:`time.monotonic` reading; default now).
    Does nothing unless :func:`show_progress` says so for ``stream`` and no other line is open."""

    def __init__(self, what: str, limit: float | None, *, start: float | None = None,
                 stream: TextIO | None = None):
        self.what, self.limit = what, limit
        self.start = time.monotonic() if start is None else start
        self.stream = sys.stderr if stream is None else stream
        self.enabled = show_progress(self.stream) and not _OPEN
        self._stage = "start"
        self._inc: float | None = None
        self._bnd: float | None = None
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def line(self) -> str:
        """The text of the line now."""
        used = time.monotonic() - self.start
        when = f"{used:.0f}s" + (f"/{self.limit:.0f}s" if self.limit is not None else "")
        parts = [f"{self.what}: {self._stage}", when]
        if self._inc is not None:
            parts.append(f"incumbent={self._inc:.6g}")
        if self._bnd is not None:
            parts.append(f"bound={self._bnd:.6g}")
        return " ".join(parts)

    def stage(self, name: str) -> None:
        """The run entered stage ``name`` (the last incumbent and bound stay until a solver reports new ones)."""
        with self._lock:
            self._stage = name
        self._draw()

    def solver(self, incumbent: float | None, bound: float | None) -> None:
        with self._lock:
            self._inc = incumbent if incumbent is not None else self._inc
            self._bnd = bound if bound is not None else self._bnd

    def _draw(self) -> None:
        if self._bar is not None:
            with self._lock:
                text = self.line()
            self._bar.set_description_str(text, refresh=True)

    def _redraw(self) -> None:
        while not self._stop.wait(REDRAW):
            self._draw()

    def __enter__(self) -> Progress:
        _OPEN.append(self)
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(file=self.stream, bar_format="{desc}", leave=False, dynamic_ncols=True)
            self._draw()
            self._thread = threading.Thread(target=self._redraw, name="dnnplace-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> bool:
        with contextlib.suppress(ValueError):
            _OPEN.remove(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        if self._bar is not None:
            self._bar.close()  # the line goes: the result's own output follows
        return False
