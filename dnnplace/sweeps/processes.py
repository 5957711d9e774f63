"""Local worker processes: one fresh process per run, forked from a server process that
imported the solvers once (:data:`PRELOAD`); a run past its deadline is killed, a worker
that dies is reported as ``died``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dnnplace.sweeps.base import Executor, Finished, Task

__all__ = ["LocalProcesses", "PRELOAD"]


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
           "dnnplace.methods", "dnnplace.evaluation.evaluate", "dnnplace.evaluation.simulate",
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
