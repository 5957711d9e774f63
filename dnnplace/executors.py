"""Where the runs of a sweep execute: in the driver's own process, in local worker
processes, or on a Ray cluster (the optional extra ``dnnplace[ray]``).

The sweep driver (:func:`dnnplace.runner.execute`) hands an executor a picklable
function and a list of :class:`Task` s and gets back a :class:`Finished` for each task
as it ends, in the order they end. The executor never touches ``runs.jsonl``: only the
driver appends to it, so resume-by-key and crash safety are the same for every
executor, and a driver or a worker that dies loses at most the runs in flight.

=============  ==============================================================
executor       what it does
=============  ==============================================================
``inline``     one run at a time in the driver's own process (``--jobs 1``, the
               default, and the mode for timing tables); a hung run is stopped by
               nothing but the solver's own time limit
``processes``  up to ``jobs`` CPU slots of local worker processes (``--jobs N``);
               one fresh process per run, forked from a server process that has
               imported the solvers once
``ray``        tasks on a Ray cluster (``ray start --head``, then ``--executor ray``,
               optionally ``--ray-address`` ``auto`` or the head's ``host:port``);
               with no address and no cluster found, a local Ray instance started
               for the sweep (Ray's own convention; stderr says so)
=============  ==============================================================

Slots: a run asking for ``threads = T`` (its solver threads) takes ``T`` of the
``jobs`` slots (at most all of them), a run without ``threads`` one slot; on Ray it
asks for ``num_cpus = T``. A run still going ``margin`` seconds after its time limit
is killed and finishes as ``hung``; a run without a time limit is never cancelled. A
worker that dies (killed, out of memory, a crash inside a solver) finishes as
``died``: nothing is recorded and the next invocation runs it again.

Runs in parallel share caches, memory bandwidth and cores, so their measured solve
times are perturbed; a time-limited MIP may also end with another incumbent.

A Python script that runs a sweep on worker processes needs the usual
``if __name__ == "__main__":`` guard (as any ``multiprocessing`` program: the fork
server imports the main module); ``dnnplace run`` has it. On every executor the hang
deadline counts from a run's start (on Ray, from when the driver sees the task's note
on a start board, within a second), not from its submission: a task waiting for a CPU
is never cancelled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["Task", "Finished", "Executor", "Inline", "LocalProcesses", "RayCluster", "EXECUTORS", "make_executor",
           "DEFAULT_MARGIN", "hang_deadline"]

EXECUTORS = ("local", "ray")
"""``--executor`` values: ``local`` (``inline`` for ``--jobs 1``, else ``processes``) and ``ray``."""

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


# ---------------------------------------------------------------------------- local processes
def _watch_parent(parent: int) -> None:
    """Exit when the process that forked this worker is gone (the driver was killed:
    its fork server exits, and so must we)."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(3)


def _worker(conn: Any, fn: Callable[[Any], Any], payload: Any) -> None:
    """A worker process: run ``fn(payload)`` and send ``("done", value)`` or
    ``("raised", message)``. SIGINT is the driver's to handle (it stops every worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    try:
        msg: tuple[str, Any] = ("done", fn(payload))
    except BaseException as exc:  # noqa: BLE001 - whatever it was, the driver records it
        msg = ("raised", f"{type(exc).__name__}: {exc}")
    conn.send(msg)
    conn.close()


PRELOAD = ("dnnplace.runner", "dnnplace.graphs.io", "dnnplace.graphs.transforms.replay", "dnnplace.registry",
           "dnnplace.methods", "dnnplace.graphs.evaluation.evaluate", "dnnplace.graphs.evaluation.simulate",
           "dnnplace.heuristics.baselines", "dnnplace.formulations.solvers.driver")
"""What the fork server imports once, so that a run's process starts warm (a run that
imports them itself takes about a second longer)."""


class LocalProcesses(Executor):
    """Up to ``jobs`` CPU slots of worker processes on this machine, one fresh process
    per task (forked by a ``forkserver`` that imported ``preload`` once)."""

    kind = "processes"
    parallel = True

    def __init__(self, jobs: int, *, preload: tuple[str, ...] = PRELOAD):
        self.jobs = int(jobs)
        self.preload = preload

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "jobs": self.jobs}

    def run(self, fn: Callable[[Any], Any], tasks: Iterable[Task]) -> Iterator[Finished]:
        import multiprocessing as mp
        from multiprocessing.connection import wait

        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(self.preload))
        host = socket.gethostname()
        pending = deque(tasks)
        running: dict[Any, tuple[Any, Any, Task, float]] = {}  # sentinel -> (process, conn, task, start)
        free = self.jobs

        def need(t: Task) -> int:
            return max(1, min(int(t.slots), self.jobs))

        try:
            while pending or running:
                while pending and (need(pending[0]) <= free or not running):
                    t = pending.popleft()
                    recv, send = ctx.Pipe(duplex=False)
                    p = ctx.Process(target=_worker, args=(send, fn, t.payload), daemon=True,
                                    name=f"dnnplace-run-{t.key}"[:60])
                    p.start()
                    send.close()
                    running[p.sentinel] = (p, recv, t, time.monotonic())
                    free -= need(t)
                now = time.monotonic()
                limits = [s + t.deadline - now for _, _, t, s in running.values() if t.deadline is not None]
                timeout = max(0.0, min(limits)) if limits else None
                ready = set(wait([*running, *(c for _, c, _, _ in running.values())], timeout))
                now = time.monotonic()
                for sentinel, (p, conn, t, start) in list(running.items()):
                    fin = None
                    if conn in ready or sentinel in ready:
                        try:
                            kind, value = conn.recv() if conn.poll() else (None, None)
                        except (EOFError, OSError):
                            kind, value = None, None
                        if kind is None:  # the process ended without an answer
                            p.join(5)
                            code = p.exitcode
                            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
                            fin = Finished(t, "died", message=f"worker process {p.pid} died ({why})", host=host,
                                           seconds=now - start)
                        else:
                            p.join(5)
                            fin = Finished(t, kind, value if kind == "done" else None,
                                           message=value if kind == "raised" else None, host=host,
                                           seconds=now - start)
                    elif t.deadline is not None and now - start >= t.deadline:
                        p.kill()
                        p.join(5)
                        fin = Finished(t, "hung", message=f"cancelled: still running {now - start:.0f} s after its "
                                       f"start (time limit plus margin {t.deadline:.0f} s)", host=host,
                                       seconds=now - start)
                    if fin is not None:
                        del running[sentinel]
                        conn.close()
                        free += need(t)
                        yield fin
        finally:
            for p, _conn, _, _ in running.values():  # an interrupt (or the caller stopped): stop the runs in flight
                with contextlib.suppress(Exception):
                    p.kill()
            for p, conn, _, _ in running.values():
                with contextlib.suppress(Exception):
                    p.join(5)
                    conn.close()


# ---------------------------------------------------------------------------- Ray
def _ray_task(fn: Callable[[Any], Any], payload: Any, board: Any = None, ident: int = -1) -> tuple[str, Any]:
    """What a Ray worker runs: tell ``board`` (a :class:`_StartBoard` actor) that task
    ``ident`` has started, then return ``(host, fn(payload))``."""
    if board is not None:
        board.start.remote(ident)  # fire and forget: the driver polls the board
    return socket.gethostname(), fn(payload)


class _StartBoard:
    """A Ray actor (no CPU) where each task notes its start: the driver polls it and
    counts a task's hang deadline from when it first sees the task started, not from
    its submission (a submitted task may wait for a worker, or for a CPU another job
    holds)."""

    def __init__(self) -> None:
        self.started: list[int] = []

    def start(self, ident: int) -> None:
        self.started.append(ident)

    def take(self) -> list[int]:
        out, self.started = self.started, []
        return out


POLL = 1.0
"""Seconds between two polls of the start board while a submitted task has not started."""


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """``host:port`` must accept a TCP connection (``ray.init`` would retry for long)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray-address {address}: expected 'auto' or HOST:PORT of a running Ray head "
                         "(ray start --head)")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise InputError(f"--ray-address {address}: no Ray head reachable there ({exc.strerror or exc}); "
                         "start one with `ray start --head` or use --executor local") from None


class RayCluster(Executor):
    """Tasks on a Ray cluster: ``address`` ``None`` (Ray's own convention: the cluster
    this machine belongs to, ``RAY_ADDRESS`` or the latest ``ray start``, else a local
    Ray instance started here, which stops with this process; stderr says so),
    ``"auto"`` (that cluster, an error if there is none) or the head's ``host:port``.
    At most ``jobs`` slots are in flight (default: the cluster's CPUs); each task asks
    for ``num_cpus`` = its slots and is never retried by Ray (a lost run is run again
    by the next invocation). A task's hang deadline counts from its start (each task
    notes its start on a zero-CPU actor the driver polls)."""

    kind = "ray"
    parallel = True

    def __init__(self, address: str | None = None, jobs: int | None = None):
        self.address = address
        self.jobs = jobs
        self.started_local = False
        self._ray: Any = None

    def describe(self) -> dict[str, Any]:
        where = "local (started by this sweep)" if self.started_local else (self.address or "auto")
        return {"kind": self.kind, "address": where, "jobs": self.jobs}

    def connect(self) -> Any:
        """Import Ray and join the cluster (once), or start a local one when no address
        was given and none is found; a missing extra or an unreachable cluster is a
        one-line :class:`InputError`."""
        if self._ray is not None:
            return self._ray
        try:
            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'dnnplace[ray]' (or use --executor local)") \
                from None
        if self.address not in (None, "auto"):
            _check_reachable(self.address.removeprefix("ray://") if self.address.startswith("ray://")
                             else self.address)
        if not ray.is_initialized():
            import logging

            quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
            try:
                ray.init(address=self.address or "auto", **quiet)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError ... all mean "no cluster"
                if self.address is not None:
                    text = " ".join(str(exc).split())[:200]
                    raise InputError(f"--ray-address {self.address}: cannot join a Ray cluster ({text}); start one "
                                     "with `ray start --head` or use --executor local") from None
                self._start_local(ray, quiet)
        if self.jobs is None:
            self.jobs = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._ray = ray
        return ray

    def _start_local(self, ray: Any, quiet: dict[str, Any]) -> None:
        """No address and no cluster found: start a local Ray instance (``ray.init()``)
        and say so on stderr."""
        import sys

        try:
            ray.init(include_dashboard=False, **quiet)
        except Exception as exc:  # noqa: BLE001
            text = " ".join(str(exc).split())[:200]
            raise InputError(f"--executor ray: no Ray cluster found and a local Ray instance did not start ({text}); "
                             "start one with `ray start --head` or use --executor local") from None
        self.started_local = True
        cpus = int(ray.cluster_resources().get("CPU", 0))
        print(f"dnnplace: no Ray cluster found (no --ray-address, RAY_ADDRESS or `ray start` on this machine): "
              f"started a local Ray instance with {cpus} CPUs for this sweep; it stops when the sweep ends",
              file=sys.stderr, flush=True)

    def run(self, fn: Callable[[Any], Any], tasks: Iterable[Task]) -> Iterator[Finished]:
        ray = self.connect()
        remote = ray.remote(max_retries=0)(_ray_task)
        board = ray.remote(_StartBoard).options(num_cpus=0).remote()
        jobs = int(self.jobs or 1)
        pending = deque(tasks)
        # ObjectRef -> (task, ident, submitted, started or None, slots)
        running: dict[Any, tuple[Task, int, float, float | None, int]] = {}
        free = jobs
        ident = 0
        try:
            while pending or running:
                while pending and (max(1, min(int(pending[0].slots), jobs)) <= free or not running):
                    t = pending.popleft()
                    n = max(1, min(int(t.slots), jobs))
                    ref = remote.options(num_cpus=n, name=f"dnnplace-run:{t.key}"[:100]).remote(
                        fn, t.payload, board, ident)
                    running[ref] = (t, ident, time.monotonic(), None, n)
                    ident += 1
                    free -= n
                now = time.monotonic()
                limits = [st + t.deadline - now for t, _, _, st, _ in running.values()
                          if t.deadline is not None and st is not None]
                if any(st is None for _, _, _, st, _ in running.values()):
                    limits.append(POLL)  # a task not seen started yet: poll the board again soon
                timeout = max(0.0, min(limits)) if limits else None
                ready, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
                started = set(ray.get(board.take.remote()))
                now = time.monotonic()
                for ref in list(running):
                    t, i, submitted, st, n = running[ref]
                    if st is None and (i in started or ref in ready):
                        st = now
                        running[ref] = (t, i, submitted, st, n)
                    fin = None
                    if ref in ready:
                        took = now - (st if st is not None else submitted)
                        try:
                            host, value = ray.get(ref)
                            fin = Finished(t, "done", value, host=host, seconds=took)
                        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                                ray.exceptions.OwnerDiedError, ray.exceptions.ObjectLostError) as exc:
                            fin = Finished(t, "died", message=f"Ray worker died ({type(exc).__name__})",
                                           seconds=took)
                        except ray.exceptions.RayTaskError as exc:
                            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                            fin = Finished(t, "raised", message=f"{type(cause).__name__}: {cause}", seconds=took)
                        except ray.exceptions.RayError as exc:
                            fin = Finished(t, "died", message=f"Ray: {type(exc).__name__}", seconds=took)
                    elif t.deadline is not None and st is not None and now - st >= t.deadline:
                        ray.cancel(ref, force=True)
                        fin = Finished(t, "hung", message=f"cancelled: still running {now - st:.0f} s after its "
                                       f"start (time limit plus margin {t.deadline:.0f} s)", seconds=now - st)
                    if fin is not None:
                        del running[ref]
                        free += n
                        yield fin
        finally:
            for ref in running:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            with contextlib.suppress(Exception):
                ray.kill(board)


# ---------------------------------------------------------------------------- choice
def make_executor(kind: str = "local", jobs: int | None = 1, *, address: str | None = None) -> Executor:
    """The executor of ``dnnplace run --executor KIND --jobs N [--ray-address A]``.

    ``local`` with one job runs inline (the driver's process), with more in worker
    processes; ``ray`` joins the cluster at ``address`` at once (default: this
    machine's cluster, else a local Ray instance started here), so a missing extra or an
    unreachable cluster is an :class:`InputError` before any run.

    >>> make_executor("local", 1).kind, make_executor("local", 4).describe()
    ('inline', {'kind': 'processes', 'jobs': 4})
    >>> make_executor("local", 0)
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: --jobs 0: must be a whole number of parallel runs >= 1
    """
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise InputError(f"--jobs {jobs}: must be a whole number of parallel runs >= 1")
    if kind == "local":
        if address is not None:
            raise InputError("--ray-address needs --executor ray")
        return Inline() if (jobs or 1) == 1 else LocalProcesses(jobs or 1)
    if kind == "ray":
        ex = RayCluster(address, jobs)
        ex.connect()
        return ex
    raise InputError(f"--executor {kind}: unknown executor; use one of {', '.join(EXECUTORS)}")


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
