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

- :class:`InterruptGuard`: the context manager around the solver call;
- :func:`raise_if_interrupted`: a termination the solver reports after catching the
  signal itself;
- :func:`no_interrupt_warning`: silences Pyomo's HiGHS interface warning about the
  ``kInterrupt`` status, which is our own interrupt;
- :func:`run_stoppable`: a native solve that never runs Python code in the main thread
  (OR-Tools CP-SAT: its search and its callbacks run in C++ threads, so Python's SIGINT
  handler would wait for the whole solve) runs in a helper thread while the main thread
  waits under :class:`InterruptGuard`; a Ctrl-C calls the solver's own stop (CP-SAT's
  ``stop_search``), awaits its return and raises :class:`KeyboardInterrupt`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["InterruptGuard", "raise_if_interrupted", "no_interrupt_warning", "run_stoppable"]

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


def raise_if_interrupted(termination: str) -> None:
    """An interrupt the solver caught itself (Gurobi's SIGINT handler) is ours to raise."""
    if termination == "interrupted":
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


def run_stoppable(run: Callable[[], T], stop: Callable[[], None], *, poll: float = 0.05) -> T:
    """``run()``, stoppable by Ctrl-C although it never returns to Python in between.

    In the main thread, ``run`` goes to a helper thread and the main thread waits for it
    under :class:`InterruptGuard` (its waits wake up for signals): on a Ctrl-C, ``stop()``
    asks the solver to stop (CP-SAT's ``stop_search``, thread-safe), the helper's return
    is awaited (its answer dropped) and :class:`KeyboardInterrupt` is raised. A second
    Ctrl-C raises at once (after ``stop()``). Elsewhere (a worker thread, where no
    signal arrives) ``run()`` is simply called. An exception of ``run`` is re-raised.

    >>> run_stoppable(lambda: 6 * 7, lambda: None)
    42
    """
    if threading.current_thread() is not threading.main_thread():
        return run()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = exc

    worker = threading.Thread(target=target, name="dnnplace-stoppable-solve", daemon=True)
    stopped = False
    with InterruptGuard() as guard:
        worker.start()
        try:
            while worker.is_alive():
                worker.join(poll)
                if guard.requested and not stopped:
                    stop()
                    stopped = True
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait for the solver
            if not stopped:
                stop()
            raise
    if "error" in box:
        raise box["error"]
    return box["value"]
