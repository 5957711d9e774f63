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

The parts: :mod:`~dnnplace.sweeps.base` (tasks, outcomes, the inline executor, hang
deadlines), :mod:`~dnnplace.sweeps.processes` (local worker processes) and
:mod:`~dnnplace.sweeps.ray_cluster` (Ray); this package chooses among them
(:func:`make_executor`).
"""


from __future__ import annotations

from dnnplace.graphs.errors import InputError
from dnnplace.sweeps.base import DEFAULT_MARGIN, Executor, Finished, Inline, Task, hang_deadline
from dnnplace.sweeps.processes import LocalProcesses
from dnnplace.sweeps.ray_cluster import RayCluster

__all__ = ["Task", "Finished", "Executor", "Inline", "LocalProcesses", "RayCluster", "EXECUTORS", "make_executor",
           "DEFAULT_MARGIN", "hang_deadline"]

EXECUTORS = ("local", "ray")
"""``--executor`` values: ``local`` (``inline`` for ``--jobs 1``, else ``processes``) and ``ray``."""


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
