"""Runs as tasks on a Ray cluster (the optional extra ``dnnplace[ray]``): joining or starting
the cluster, and a start board on which each task notes its start, so that its hang
deadline counts from then."""

from __future__ import annotations

import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.sweeps.base import Executor, Finished, Task

__all__ = ["RayCluster", "POLL"]


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
