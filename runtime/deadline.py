"""A wall-clock deadline passed down from a request's time limit to every stage of a
method (coarsening, model build, hand-off to the solver, the solve, refinement).

A method given ``--time-limit L`` must end within about ``L`` seconds as a whole
process, so a time limit is not only the solver's: each stage asks the
:class:`Deadline` how much time is left, a long loop checks it (:meth:`Deadline.check`
raises :class:`TimeLimitReached`) and the method then returns the best answer it
already has (its incumbent, e.g. the list schedule it started from) with termination
``time_limit``. ``dnnplace solve`` starts the deadline at the process's start (imports
and loading count) and keeps a small reserve for the evaluation and the output.

An exception delivered to a thread from outside (a guard's :class:`TimeLimitReached`, a
Ctrl-C's :class:`KeyboardInterrupt`) lands at the thread's next Python instruction, which
may belong to a finalizer (``__del__``, a weakref callback) or a ``gc`` callback: Python
drops it there ("Exception ignored in ...", under pytest a
``PytestUnraisableExceptionWarning``) and cuts that finalizer short. A guard therefore
waits while its thread collects garbage, and :func:`redeliver_dropped` catches the
remaining case (a finalizer run outside a collection): the dropped exception is not
reported but delivered again, from another thread, once no collection runs.

>>> d = Deadline(10.0)
>>> 9.0 < d.remaining() <= 10.0, d.expired()
(True, False)
>>> past = Deadline(0.0)
>>> past.expired(), past.remaining()
(True, 0.0)
>>> past.check("model build")
Traceback (most recent call last):
...
dnnplace.runtime.deadline.TimeLimitReached: time limit reached during model build
>>> Deadline(None).remaining() is None, Deadline(None).expired()
(True, False)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator

from dnnplace.runtime import memory
from dnnplace.runtime.memory import stop_requested

__all__ = ["Deadline", "TimeLimitReached", "process_start", "NO_DEADLINE", "capped", "redeliver_dropped",
           "finalizing"]


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
        """Seconds left (``0.0`` once past, or once the memory watchdog stopped the process:
        :func:`dnnplace.runtime.memory.stop_requested`; ``None`` without a deadline)."""
        if stop_requested():
            return 0.0
        if self.end is None:
            return None
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return stop_requested() or (self.end is not None and time.monotonic() >= self.end)

    def check(self, what: str = "this stage") -> None:
        """Raise :class:`TimeLimitReached` (naming ``what``) once the deadline has passed (or the
        memory limit: the same stop)."""
        if self.expired():
            raise TimeLimitReached(f"{'memory' if stop_requested() else 'time'} limit reached during {what}")

    def share(self, fraction: float) -> Deadline:
        """A deadline ``fraction`` of the remaining time from now (a stage's share);
        itself without a deadline. Stages derive their deadlines from the run's with
        :meth:`share`, :meth:`within` and :meth:`less`, never from a time limit's number."""
        if self.end is None:
            return self
        now = time.monotonic()
        return self._derived(now + fraction * max(0.0, self.end - now), now)

    def within(self, seconds: float | None) -> Deadline:
        """A stage's deadline: ``seconds`` from now, never past this one (``None``: this one).

        >>> Deadline(None).within(2.0).remaining() <= 2.0, Deadline(1.0).within(5.0).remaining() <= 1.0
        (True, True)
        """
        if seconds is None:
            return self
        now = time.monotonic()
        end = now + max(0.0, float(seconds))
        return self._derived(end if self.end is None else min(end, self.end), now)

    def later(self, seconds: float) -> Deadline:
        """This deadline ``seconds`` later (the grace a stage gets to return what it has before a
        watchdog stops it); itself without a deadline."""
        return self.less(-float(seconds))

    def less(self, seconds: float) -> Deadline:
        """This deadline ``seconds`` earlier (what a stage leaves for the ones after it); itself
        without a deadline.

        >>> Deadline(10.0).less(4.0).remaining() <= 6.0, Deadline(None).less(4.0).end is None
        (True, True)
        """
        if self.end is None:
            return self
        return self._derived(self.end - float(seconds), time.monotonic())

    @staticmethod
    def _derived(end: float, now: float) -> Deadline:
        """The deadline ending at ``end`` (a :func:`time.monotonic` reading; now at the latest)."""
        return Deadline(max(0.0, end - now), start=now)

    def guard(self, what: str = "this stage") -> _Guard:
        """A ``with`` block that stops at the deadline: where a stage runs library code
        that checks no deadline (a Pyomo model's hand-off to a solver), a watchdog
        raises :class:`TimeLimitReached` in the calling thread when the deadline passes, or
        the memory watchdog trips (:mod:`dnnplace.runtime.memory`), while the block runs
        (delivered at the next Python instruction: C code, e.g. a solver's own search,
        finishes its call first). Only for stages whose partial
        work is thrown away. Past the deadline already, the block is not entered. Library code
        that turns the exception into its own (naming it, or with it as the cause or context)
        leaves the block as :class:`TimeLimitReached` too."""
        return _Guard(self, what)

    def __repr__(self) -> str:
        left = self.remaining()
        return "Deadline(none)" if left is None else f"Deadline({left:.3f} s left)"


REFIRE = 0.25
"""Seconds between a guard's deliveries of :class:`TimeLimitReached` while its block runs on."""

GC_WAIT = 0.01
"""Seconds a guard waits before trying again when its thread is collecting garbage."""

REDELIVER_WAIT = 0.05
"""Seconds a dropped exception waits at most for its thread to leave a collection before it
is delivered again (dropped again, it comes back through the hook: a retry every few ms)."""


# ---------------------------------------------------------------------------- finalizers
class _Watch:
    """One :func:`redeliver_dropped` block: the exception type, the thread, how to deliver it."""

    __slots__ = ("exc_type", "thread_id", "deliver")

    def __init__(self, exc_type: type, thread_id: int, deliver: Callable[[], None]):
        self.exc_type, self.thread_id, self.deliver = exc_type, thread_id, deliver


_COLLECTOR: list = [None, 0.0]  # the thread running a garbage collection (if any) and since when
_WATCHED: list[_Watch] = []  # the redeliver_dropped blocks running
_HOOK_STATE: dict = {"prev": None}
_IN_HOOK: set[int] = set()  # threads inside _unraisable
_REDELIVERER: list[threading.Thread] = []
_LOCK = threading.RLock()


def _gc_phase(phase: str, info: dict) -> None:
    if phase == "start":
        _COLLECTOR[:] = [threading.get_ident(), time.monotonic()]


def _gc_end(phase: str, info: dict) -> None:
    if phase == "stop":
        _COLLECTOR[0] = None


STALE = 1.0
"""Seconds after which a collection that never said it ended counts as ended: an exception
that lands in :func:`_gc_end` itself (a Python function) cuts it short."""


def _track_collections() -> None:
    """Keep :func:`_gc_phase` first and :func:`_gc_end` last among ``gc.callbacks`` (a
    library may add its own later, hypothesis at the front), so the whole collection,
    other callbacks included, counts as one."""
    for cb in (_gc_phase, _gc_end):
        while cb in gc.callbacks:
            gc.callbacks.remove(cb)
    gc.callbacks.insert(0, _gc_phase)
    gc.callbacks.append(_gc_end)


def finalizing(thread_id: int) -> bool:
    """Whether thread ``thread_id`` is collecting garbage (running finalizers and gc callbacks)
    or handling an exception dropped by one (:func:`redeliver_dropped`): an exception
    delivered to it now would be dropped."""
    who, since = _COLLECTOR
    return (who == thread_id and time.monotonic() - since < STALE) or thread_id in _IN_HOOK


_REDELIVER: queue.SimpleQueue = queue.SimpleQueue()  # _WATCHED entries for the redelivering thread
_QUEUED: list[_Watch] = []  # entries queued and not delivered yet (one delivery each at a time)


def _redelivering() -> None:
    """The redelivering thread: each ``deliver()`` once its thread has left :func:`_unraisable`
    and is not collecting garbage (:func:`finalizing`; delivered in the hook or a gc
    callback, the exception would be dropped again)."""
    while True:
        entry = _REDELIVER.get()
        time.sleep(GC_WAIT)
        waited = GC_WAIT
        while finalizing(entry.thread_id) and waited < REDELIVER_WAIT:  # a collection that never says it ended
            time.sleep(GC_WAIT)  # (an exception cut its last callback short) must not hold the delivery
            waited += GC_WAIT
        with _LOCK:  # held while delivering: the block cannot end in between, so it never escapes the block
            if entry in _QUEUED:
                _QUEUED.remove(entry)
                if entry in _WATCHED:
                    entry.deliver()


def _unraisable(unraisable) -> None:
    """``sys.unraisablehook`` while :func:`redeliver_dropped` blocks run: a watched exception
    dropped in its thread is delivered again (:func:`_redelivering`); anything else goes to the
    hook that was installed before."""
    exc, me = unraisable.exc_value, threading.get_ident()
    _IN_HOOK.add(me)
    try:
        for entry in list(_WATCHED):
            if isinstance(exc, entry.exc_type) and entry.thread_id == me:
                if entry not in _QUEUED:
                    _QUEUED.append(entry)
                    _REDELIVER.put(entry)  # never blocks: the hook returns at once
                return
        (_HOOK_STATE["prev"] or sys.__unraisablehook__)(unraisable)
    finally:
        _IN_HOOK.discard(me)


@contextlib.contextmanager
def redeliver_dropped(exc_type: type, thread_id: int, deliver: Callable[[], None]):
    """While the block runs, an ``exc_type`` that Python drops in thread ``thread_id``
    because it was raised inside a finalizer or a gc callback is not reported
    (``sys.unraisablehook``) but delivered again: ``deliver()`` is called from another
    thread once ``thread_id`` is not :func:`finalizing`. Blocks nest; the hook installed
    before the outermost one is restored after it."""
    entry = _Watch(exc_type, thread_id, deliver)
    with _LOCK:
        _track_collections()
        if not _REDELIVERER:
            _REDELIVERER.append(threading.Thread(target=_redelivering, name="dnnplace-redeliver", daemon=True))
            _REDELIVERER[0].start()
        if not _WATCHED:
            _HOOK_STATE["prev"] = sys.unraisablehook
            sys.unraisablehook = _unraisable
        _WATCHED.append(entry)
    try:
        yield
    finally:
        with _LOCK:
            _WATCHED.remove(entry)
            while entry in _QUEUED:
                _QUEUED.remove(entry)
            if not _WATCHED:
                if sys.unraisablehook is _unraisable:
                    sys.unraisablehook = _HOOK_STATE["prev"]
                _HOOK_STATE["prev"] = None


class _Guard:
    """:meth:`Deadline.guard`."""

    def __init__(self, deadline: Deadline, what: str):
        self.deadline, self.what = deadline, what
        self._lock = threading.RLock()  # _fire delivers while holding it
        self._done = False
        self._fired = False
        self._timer: threading.Timer | None = None
        self._tid = 0
        self._last = -float("inf")  # when the last delivery was made
        self._watch: contextlib.AbstractContextManager | None = None

    def _arm(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        """Raise in the guarded thread, and again every :data:`REFIRE` seconds while the block
        still runs (the block may catch and drop it). Never while that thread collects
        garbage: an exception raised in a finalizer or a gc callback is dropped there (and
        cuts it short); the guard tries again :data:`GC_WAIT` later. One that still lands in
        a finalizer run outside a collection is delivered again at once
        (:func:`redeliver_dropped`), never reported."""
        with self._lock:
            if self._done:
                return
            wait = REFIRE - (time.monotonic() - self._last)
            if finalizing(self._tid) or wait > 0:  # one delivery outstanding at a time (see _deliver)
                self._arm(GC_WAIT if wait <= 0 else wait)
                return
            self._deliver()
            self._arm(REFIRE)

    def _deliver(self) -> None:
        """Deliver now (the timer, or :func:`redeliver_dropped` after a drop, which consumed the
        last delivery). Two outstanding at once would raise the second in :meth:`__exit__`,
        past the block's own handling."""
        with self._lock:
            if not self._done:
                self._fired, self._last = True, time.monotonic()
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid),
                                                           ctypes.py_object(TimeLimitReached))

    @property
    def fired(self) -> bool:
        """Whether the deadline's exception was raised in the block (code it interrupted, e.g.
        numba's compiler, may have turned it into another exception)."""
        return self._fired

    def __enter__(self) -> _Guard:
        self.deadline.check(self.what)
        left = self.deadline.remaining()
        if left is not None or memory.active() is not None:  # the memory watchdog stops it too (_stop_guards)
            self._tid = threading.get_ident()
            self._watch = redeliver_dropped(TimeLimitReached, self._tid, self._deliver)
            self._watch.__enter__()
            if left is not None:
                self._arm(left)
            with _LOCK:
                _GUARDS.add(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        with _LOCK:
            _GUARDS.discard(self)
        with self._lock:
            self._done = True
            if self._fired:  # an exception raised but not delivered yet must not escape the block
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), None)
            if self._timer is not None:
                self._timer.cancel()
        if self._watch is not None:
            self._watch.__exit__(None, None, None)
        interrupt = _interrupt_in(exc) if exc_type is TimeLimitReached else None
        if interrupt is not None:  # the deadline's exception landed while a Ctrl-C unwound the block: Ctrl-C wins
            raise interrupt
        why = f"{'memory' if stop_requested() else 'time'} limit reached during {self.what}"
        if exc_type is TimeLimitReached and not (exc is not None and exc.args):
            raise TimeLimitReached(why) from None
        if self._fired and exc is not None and _wraps_deadline(exc):
            raise TimeLimitReached(f"{why} (stopped there: {type(exc).__name__}: {exc})") from exc
        return False


_GUARDS: set[_Guard] = set()  # the guards whose blocks run


def _stop_guards() -> None:
    """The memory watchdog tripped (:mod:`dnnplace.runtime.memory`): every guarded block is
    stopped as at its deadline."""
    with _LOCK:
        guards = list(_GUARDS)
    for g in guards:
        g._fire()


memory.on_stop(_stop_guards)


def _chain(exc: BaseException | None, most: int = 20) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised while handling (``__context__``, which ``raise
    ... from`` sets too), nearest first, at most ``most``."""
    while exc is not None and most > 0:
        yield exc
        exc, most = exc.__context__, most - 1


def _wraps_deadline(exc: BaseException) -> bool:
    """Whether ``exc`` is a library's wrapping of the guard's :class:`TimeLimitReached`: it
    names it or has it in its chain (Pyomo's output capture, interrupted in its clean-up,
    raises ``RuntimeError("TimeLimitReached: (5: <redirect_fd ...>)")``). A Ctrl-C is never one."""
    for e in _chain(exc):
        if isinstance(e, KeyboardInterrupt):
            return False
        if isinstance(e, TimeLimitReached) or "TimeLimitReached" in str(e):
            return True
    return False


def _interrupt_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The :class:`KeyboardInterrupt` in ``exc``'s chain, if any: a guard's exception that
    lands while a Ctrl-C unwinds the block replaces it (``exc.__context__``)."""
    return next((e for e in _chain(exc) if isinstance(e, KeyboardInterrupt)), None)


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
