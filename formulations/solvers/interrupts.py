"""Our SIGINT handling around a solve: Ctrl-C becomes a :class:`KeyboardInterrupt` from
:func:`dnnplace.formulations.solvers.driver.solve_model`, never an ``error`` or ``feasible``
outcome, whatever the backend does with the signal.

HiGHS (highspy >= 1.16) runs Python callbacks inside its solve, so Python's default
handler raised the ``KeyboardInterrupt`` inside a callback, where HiGHS caught it and
returned an error; Gurobi installs its own SIGINT handler and returns ``interrupted``
with its incumbent. So, in the main thread, the solve runs under our own SIGINT handler
(:class:`InterruptGuard`), which only records the request: the backend stops the solver
(HiGHS through its interrupt callbacks), and when the solver returns the interrupt is
re-raised. An ``interrupted`` termination (Gurobi's own handler) is re-raised too
(:func:`raise_if_interrupted`). A second Ctrl-C raises at once.

- :func:`stop_on_ctrl_c`: a whole command's SIGINT handling (``dnnplace``'s main): a
  Ctrl-C raises :class:`KeyboardInterrupt` also in a process started with SIGINT ignored
  (a background job of a script: ``dnnplace solve ... & sleep 15; kill -INT $!``), and
  one that Python drops because its handler ran inside a finalizer or a gc callback is
  raised again right after (:func:`~dnnplace.runtime.deadline.redeliver_dropped`);
- :class:`InterruptGuard`: the context manager around the solver call;
- :func:`raise_if_interrupted`: a termination the solver reports after catching the
  signal itself;
- :func:`no_interrupt_warning`: silences Pyomo's HiGHS interface warning about the
  ``kInterrupt`` status, which is our own interrupt;
- :func:`run_stoppable`: a native solve that may not run Python code for a long time
  (OR-Tools CP-SAT: its search and its callbacks run in C++ threads; HiGHS between its
  root cut rounds) runs in a helper thread while the calling thread waits (in the main
  thread under :class:`InterruptGuard`); a Ctrl-C or the hard end of the time limit
  calls the solver's own stop and gives it a grace to return; past the grace its thread
  is left behind (:class:`SolverOverran`, :func:`wait_for_left_behind`);
- :func:`exit_process`: the command's exit; after a Ctrl-C (130) without the interpreter's
  teardown, which would free the interrupted model first and so keep a large one's process
  alive for seconds after the Ctrl-C (results/time-limits.md, "Ctrl-C and the interpreter's
  teardown").
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from dnnplace.formulations.solvers.outcome import Termination
from dnnplace.runtime.deadline import redeliver_dropped
from dnnplace.runtime.memory import stop_requested

__all__ = ["InterruptGuard", "raise_if_interrupted", "no_interrupt_warning", "run_stoppable", "SolverOverran",
           "wait_for_left_behind", "exit_process", "stop_on_ctrl_c", "INTERRUPTED"]

INTERRUPTED = 130
"""The exit status of a command stopped by Ctrl-C."""


@contextlib.contextmanager
def stop_on_ctrl_c():
    """A command's SIGINT handling, in the main thread (elsewhere the block just runs).

    - A process started with SIGINT ignored (a shell starts a script's background job so)
      gets Python's own handler back for the block, so ``kill -INT`` stops it as Ctrl-C
      stops a foreground one; the ignoring is restored after.
    - Python runs a signal's handler at the main thread's next instruction; inside a
      finalizer or a gc callback (a Pesto model's build spends seconds collecting) the
      :class:`KeyboardInterrupt` is dropped ("Exception ignored in ...") and the work ran
      on to its time limit and saved its answer. Such a drop raises it again right after
      the finalizer (after the collection), through the same handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGINT)
    if prev == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with redeliver_dropped(KeyboardInterrupt, threading.get_ident(), _thread.interrupt_main):
            yield
    finally:
        if prev == signal.SIG_IGN:
            signal.signal(signal.SIGINT, prev)

T = TypeVar("T")


class InterruptGuard:
    """Our own SIGINT handler around a solve (main thread only): a Ctrl-C is recorded in
    :attr:`requested` instead of raising inside the solver (where HiGHS catches it and
    reports an error); on exit the interrupt is raised, as a :class:`KeyboardInterrupt`
    (or handed to the handler that was installed before). A second Ctrl-C raises at once."""

    def __init__(self) -> None:
        self.requested = False
        self._prev: Any = None
        self._installed = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            prev = signal.getsignal(signal.SIGINT)
            if callable(prev):  # not SIG_IGN / SIG_DFL / a handler set from C
                signal.signal(signal.SIGINT, self._handler)
                self._prev, self._installed = prev, True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self._installed:
            signal.signal(signal.SIGINT, self._prev)
            self._installed = False
        if self.requested and not isinstance(exc, KeyboardInterrupt):
            if self._prev is not None and self._prev is not signal.default_int_handler:
                self._prev(signal.SIGINT, None)  # a caller's own handler decides
            else:
                raise KeyboardInterrupt("interrupted during the solve") from exc
        return False


def raise_if_interrupted(termination: Termination) -> None:
    """An interrupt the solver caught itself (Gurobi's SIGINT handler) is ours to raise."""
    if termination is Termination.INTERRUPTED:
        raise KeyboardInterrupt(f"the solver stopped on an interrupt ({termination})")


class _DropInterruptWarning:
    """Logging filter: Pyomo's HiGHS interface warns of an 'unhandled' kInterrupt status,
    which is our own interrupt (it is raised as KeyboardInterrupt right after)."""

    @staticmethod
    def filter(record: Any) -> bool:
        return "kInterrupt" not in record.getMessage()


@contextlib.contextmanager
def no_interrupt_warning():
    """Drop Pyomo's HiGHS warning about the ``kInterrupt`` status while the block runs."""
    log = logging.getLogger("pyomo.contrib.solver.solvers.highs")
    log.addFilter(_DropInterruptWarning)
    try:
        yield
    finally:
        log.removeFilter(_DropInterruptWarning)


class SolverOverran(Exception):
    """The solver did not return by the hard end of its time limit, nor within the grace
    after it was asked to stop: :func:`run_stoppable` left its thread behind (it ends at
    the solver's next check of its stop flag) and the caller answers with what the solver
    reported so far."""


_LEFT_BEHIND: list[threading.Thread] = []


def _leave_behind(worker: threading.Thread) -> None:
    """Keep ``worker`` (asked to stop) for :func:`wait_for_left_behind`, which also runs at
    the interpreter's exit: a thread still inside native code then would abort the process
    (a script ends through :func:`exit_process` instead)."""
    _LEFT_BEHIND.append(worker)


def exit_process(code: int) -> NoReturn:
    """End the process with exit status ``code`` (the command line's last step).

    Where :func:`run_stoppable` left a solver thread behind, it is still inside the
    solver's native code, and an interpreter shutting down around it aborts the process
    (HiGHS: ``terminate called without an active exception``, status 134) or, waiting for
    it, overruns the time limit: the output is flushed and the process ends at once.
    After a Ctrl-C (:data:`INTERRUPTED`) the ``atexit`` functions run (a Ray instance the
    sweep started is shut down; left-behind solver threads are not waited for) and the
    process ends without the interpreter's teardown: freeing the interrupted model (the
    command keeps it alive: ``dnnplace.cli``) took seconds."""
    if code == INTERRUPTED or any(t.is_alive() for t in _LEFT_BEHIND):
        if code == INTERRUPTED:
            atexit.unregister(wait_for_left_behind)
            with contextlib.suppress(Exception):
                atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def wait_for_left_behind() -> float:
    """Wait for the solver threads :func:`run_stoppable` left behind (each was asked to
    stop); returns the seconds waited. A solve that shares process-wide state with them
    (HiGHS's task scheduler) calls this first."""
    t0 = time.monotonic()
    while _LEFT_BEHIND:
        _LEFT_BEHIND.pop().join()
    return time.monotonic() - t0


atexit.register(wait_for_left_behind)


def run_stoppable(run: Callable[[], T], stop: Callable[[], None], *, poll: float = 0.05,
                  hard_end: float | None = None, grace: float = 2.0) -> T:
    """``run()``, stoppable by Ctrl-C and by a hard end although it may not return to
    Python for minutes (CP-SAT's search and callbacks run in C++ threads; HiGHS checks its
    limits and interrupt callbacks between root cut rounds, which can take minutes on a large
    Pesto model: results/time-limits.md, "HiGHS held to its deadline").

    ``run`` goes to a helper thread and the calling thread waits for it (in the main
    thread under :class:`InterruptGuard`, whose waits wake up for signals). On a Ctrl-C,
    at ``hard_end`` (a :func:`time.monotonic` time) or past the memory limit
    (:func:`~dnnplace.runtime.memory.stop_requested`), ``stop()`` asks the solver to stop
    (thread-safe: CP-SAT's ``stop_search``, a flag HiGHS's interrupt callbacks read), and
    the helper gets ``grace`` seconds more to return. After a Ctrl-C the answer is dropped
    and :class:`KeyboardInterrupt` raised (a second Ctrl-C raises at once); at the hard
    end a helper that returned gives its answer, one that did not is left behind
    (:func:`wait_for_left_behind`) and :class:`SolverOverran` is raised. Without
    ``hard_end``, outside the main thread (where no signal arrives), ``run()`` is simply
    called. An exception of ``run`` is re-raised.

    >>> run_stoppable(lambda: 6 * 7, lambda: None)
    42
    >>> import time
    >>> run_stoppable(lambda: time.sleep(5), lambda: None, hard_end=time.monotonic() + 0.1, grace=0.1)
    Traceback (most recent call last):
    ...
    dnnplace.formulations.solvers.interrupts.SolverOverran: the solver ran 0.1 s past its time limit ...
    """
    if hard_end is None and threading.current_thread() is not threading.main_thread():
        return run()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="dnnplace-stoppable-solve", daemon=True)
    stopped_at: float | None = None
    with InterruptGuard() as guard:
        worker.start()
        try:
            while worker.is_alive():
                worker.join(poll)
                now = time.monotonic()
                ended = stop_requested() or (hard_end is not None and now >= hard_end)  # memory limit or deadline
                if stopped_at is None and (guard.requested or ended):
                    stop()
                    stopped_at = now
                elif stopped_at is not None and now >= stopped_at + grace:
                    break
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait for the solver
            if stopped_at is None:
                stop()
            _leave_behind(worker)
            raise
        if worker.is_alive():
            _leave_behind(worker)
            if not guard.requested:  # (a Ctrl-C is raised by the guard on leaving the block)
                raise SolverOverran(f"the solver ran {grace:g} s past its time limit and did not stop when asked "
                                    "(it stops at its next check; its thread is left behind)")
    if "error" in box:
        raise box["error"]
    return box["value"]
