"""What every executor shares: the :class:`Task` it is handed, the :class:`Finished` it
yields, the :class:`Executor` interface, the in-process :class:`Inline` executor and the
hang deadline of a time-limited run (:func:`hang_deadline`)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Task", "Finished", "Executor", "Inline", "DEFAULT_MARGIN", "hang_deadline"]

DEFAULT_MARGIN = 60.0
"""Seconds past a run's time limit before it counts as hung (see :func:`hang_deadline`)."""


@dataclass(frozen=True)
class Task:
    """One run to execute: ``payload`` is handed to the function; ``slots`` CPU slots;
    ``deadline`` seconds after its start it is cancelled as hung (``None``: never)."""

    key: str
    payload: Any
    slots: int = 1
    deadline: float | None = None


@dataclass
class Finished:
    """How a task ended: ``outcome`` is ``done`` (``value`` is the function's return
    value), ``raised`` (the function raised; ``message`` says what), ``hung`` (cancelled
    at its deadline) or ``died`` (its worker vanished; nothing to record). ``host`` is
    where it ran; ``seconds`` its wall time as the executor saw it."""

    task: Task
    outcome: str
    value: Any = None
    message: str | None = None
    host: str | None = None
    seconds: float = 0.0


class Executor:
    """Base class: :meth:`run` yields a :class:`Finished` per task as each ends; leaving
    the iteration early (an interrupt) stops every run in flight."""

    kind = "executor"
    parallel = False

    def describe(self) -> dict[str, Any]:
        """What each record says about where it ran (besides its host)."""
        return {"kind": self.kind}

    def run(self, fn: Callable[[Any], Any], tasks: Iterable[Task]) -> Iterator[Finished]:
        raise NotImplementedError


class Inline(Executor):
    """Each task in the calling process, one after the other; an exception (a
    :class:`KeyboardInterrupt` too) propagates to the caller."""

    kind = "inline"

    def run(self, fn: Callable[[Any], Any], tasks: Iterable[Task]) -> Iterator[Finished]:
        host = socket.gethostname()
        for t in tasks:
            t0 = time.perf_counter()
            value = fn(t.payload)
            yield Finished(t, "done", value, host=host, seconds=time.perf_counter() - t0)


def hang_deadline(time_limit: float | None, margin: float = DEFAULT_MARGIN) -> float | None:
    """Seconds after its start when a run with this time limit counts as hung: the
    limit, plus the larger of ``margin`` and the limit itself (model building, the
    evaluator, a warm-start heuristic and the solver's own overrun all come on top);
    ``None`` without a limit.

    >>> hang_deadline(30), hang_deadline(300), hang_deadline(None)
    (90.0, 600.0, None)
    """
    if time_limit is None:
        return None
    return float(time_limit) + max(float(margin), float(time_limit))
