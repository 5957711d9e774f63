"""A memory limit for the whole process (``dnnplace solve --memory-limit SIZE``), held the way
a time limit is (:mod:`dnnplace.runtime.deadline`): the methods that can grow (the DP's
lattice, an IP's model, CP-SAT, coarsening) estimate what they are about to allocate and
stop before they commit past :func:`headroom`, and a watchdog (:class:`MemoryWatch`) samples
this process's resident memory every :data:`INTERVAL` seconds; past the limit it raises the
process's stop (:func:`stop_requested`), which every :class:`~dnnplace.runtime.deadline.Deadline`
and the solver hand-off (:func:`~dnnplace.formulations.solvers.interrupts.run_stoppable`)
read as their deadline reached, and every stage inside a deadline's guard
(:meth:`~dnnplace.runtime.deadline.Deadline.guard`: a Pyomo model's build, the DP's kernels) is
stopped as at its deadline. The method then returns its best answer with a bound, and
the run's termination is ``memory_limit`` (:class:`~dnnplace.runtime.termination.Termination`),
not a process killed by the kernel (exit 137).

``resource.setrlimit(RLIMIT_AS)`` alone is no such limit: an allocation past it fails as a
``MemoryError`` wherever it happens (inside numpy, Pyomo or a solver), with no answer.

Default limit (:func:`default_limit`): :data:`DEFAULT_SHARE` of the machine's physical memory,
less what this process already holds.

>>> watch = MemoryWatch(100.0, sampler=lambda: 50)
>>> watch.check(), watch.tripped, watch.peak
(False, False, 50)
>>> watch.sampler = lambda: 150
>>> watch.check(), watch.tripped, watch.peak, stop_requested()  # outside its block: no stop
(True, True, 150, False)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["MemoryWatch", "on_stop", "rss_bytes", "physical_memory", "default_limit", "headroom", "stop_requested",
           "active", "DEFAULT_SHARE", "INTERVAL"]

DEFAULT_SHARE = 0.75
"""The default limit: this share of the machine's physical memory, less this process's resident
memory when the run starts."""

INTERVAL = 0.2
"""Seconds between two samples of the resident memory."""

_STOP = threading.Event()  # set while a tripped watch runs: every deadline reads as reached
_ACTIVE: list[MemoryWatch] = []  # the watches running, innermost last
_ON_STOP: list[Callable[[], None]] = []  # called by a watch's thread when it trips (the deadline's guards)


def on_stop(callback: Callable[[], None]) -> None:
    """Have ``callback()`` called (from the watchdog's thread) when a running watch trips: how
    :mod:`dnnplace.runtime.deadline` stops the stages it guards, which check no deadline."""
    if callback not in _ON_STOP:
        _ON_STOP.append(callback)


def rss_bytes() -> int:
    """This process's resident memory in bytes (psutil where installed, else ``/proc/self/statm``;
    ``0`` where neither can be read)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return int(psutil.Process().memory_info().rss)
        except Exception:  # noqa: BLE001 - fall back to /proc
            pass
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def physical_memory() -> float | None:
    """The machine's physical memory in bytes (``None`` where it cannot be read)."""
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def default_limit(rss: int | None = None) -> float | None:
    """:data:`DEFAULT_SHARE` of :func:`physical_memory` less ``rss`` (default: this process's
    resident memory now); ``None`` where the machine's memory cannot be read."""
    total = physical_memory()
    if total is None:
        return None
    return max(0.0, DEFAULT_SHARE * total - (rss_bytes() if rss is None else rss))


def stop_requested() -> bool:
    """Whether a running :class:`MemoryWatch` found the process past its limit: the deadlines
    read as reached until the watch ends."""
    return _STOP.is_set()


def active() -> MemoryWatch | None:
    """The innermost running :class:`MemoryWatch` (``None`` outside one)."""
    return _ACTIVE[-1] if _ACTIVE else None


def headroom() -> float | None:
    """Bytes a stage may still allocate: the running watch's limit less the resident memory now
    (at least 0; ``None`` outside a watch or without a limit). A stage that can estimate what it
    will allocate compares the estimate with this before it commits."""
    watch = active()
    if watch is None or watch.limit is None:
        return None
    return max(0.0, watch.limit - watch.sampler())


class MemoryWatch:
    """The watchdog of one run: a thread that calls ``sampler()`` (resident bytes, default
    this module's :func:`rss_bytes`) every ``interval`` seconds while the ``with`` block runs and, past
    ``limit`` bytes, raises the process's stop (:func:`stop_requested`) until the block ends.
    ``limit`` ``None``: no limit (only the peak is kept). ``tripped``: whether it did;
    ``peak``: the largest sample."""

    def __init__(self, limit: float | None, *, sampler: Callable[[], int] | None = None, interval: float = INTERVAL):
        self.limit = None if limit is None else float(limit)
        self.sampler = sampler if sampler is not None else (lambda: rss_bytes())  # looked up when sampled
        self.interval = float(interval)
        self.tripped, self.peak, self.at = False, 0, None  # ``at``: the sample that tripped it
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> bool:
        """Take one sample; past the limit, trip (and, inside the ``with`` block, raise the process's
        stop). Returns ``tripped``."""
        now = int(self.sampler())
        self.peak = max(self.peak, now)
        if self.limit is not None and now > self.limit and not self.tripped:
            self.tripped, self.at = True, now
        if self.tripped and self in _ACTIVE:
            _STOP.set()
        return self.tripped

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            if not self.tripped and self.check():
                for callback in list(_ON_STOP):
                    callback()

    def __enter__(self) -> MemoryWatch:
        _ACTIVE.append(self)
        self.check()
        self._thread = threading.Thread(target=self._run, name="dnnplace-memory-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self.check()
        _ACTIVE.remove(self)
        if not any(w.tripped for w in _ACTIVE):
            _STOP.clear()
        return False

    def record(self) -> dict:
        """What a result records of the run's memory: the limit, the peak sample, whether the limit
        stopped it (bytes)."""
        return {"limit": self.limit, "peak_rss": self.peak, "stopped": self.tripped}
