"""Never worse with more devices: Pesto's answer on a cluster is never worse than its answer on
the sub-clusters with fewer interchangeable devices that it tries (:func:`with_subclusters`).

Every plan of a sub-cluster is a plan of the cluster (its devices mapped, the other devices
left empty), yet the pipeline on the whole cluster can answer worse: the coarse ILP on more
devices has more (symmetric) choices, and a time-limited solve ends further from its optimum
(results/makespan-bounds.md: the stored transformer-base answer on 4 GPUs was slower than
the one on 2).

Which sub-clusters. The largest class of interchangeable devices
(:func:`~dnnplace.formulations.device_symmetry.identical_devices`: same kind, memory, speed and
overheads, the same link figures to and from the others), of ``k >= 2`` devices; the sub-cluster
of size ``j`` keeps every device outside the class (a host CPU) and the class's first ``j`` in
index order. The sizes are the powers of two below ``k`` (``k = 4``: 1 and 2; ``k = 8``: 1, 2, 4):
``log2 k`` solves, the sizes machines and the presets come in (so the ones a user compares
with), each a sub-cluster of the next. Size 1 is left out where the class is the whole cluster:
there the single-device placement, one of the obvious candidates
(:func:`~dnnplace.formulations.multilevel.never_worse.against_obvious`), is optimal among
one-device plans (no transfers, no idle time).

How. A ladder, smallest first: each rung is a run of the pipeline on its sub-cluster, started
from the best answer of the rungs below (a start of the ILP where the run solves the graph as
it is, a rival of its last stage where it coarsens), and its answer is the better of its run's
and that best one: so each rung answers as the method does on that sub-cluster alone (where
the solves finish inside their shares; the caller's starts are kept where they fit the
sub-cluster), and the whole cluster is the last rung. Every answer is lifted to the whole
cluster (device indices mapped) and replayed there by the simulator in the run's transfer
mode, congestion, device order and link order, and a lower rung's answer replaces a rung's
only where the evaluator finds it feasible
(:func:`~dnnplace.formulations.multilevel.never_worse.feasible`) and it is faster beyond
rounding. The sub-cluster rungs share :data:`SUB_SHARE` of the run's deadline (and of the
solver's time limit) in proportion to their device counts; the whole cluster keeps the rest
(a rung whose share is under :data:`MIN_RUNG_SECONDS` is skipped, so a tight limit holds);
Ctrl-C stops the run as before.

What is recorded: ``size["subclusters"]`` (each tried sub-cluster's lifted makespan, the source
of its answer and its seconds) and, where a sub-cluster's answer won, ``source`` names it
(``"sub-cluster 2 of 4 gpu"``). The bound stays the whole cluster's run's: a sub-cluster's bound
bounds only the plans on fewer devices and is never reported.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.formulations.device_symmetry import identical_devices
from dnnplace.formulations.multilevel.never_worse import feasible
from dnnplace.formulations.multilevel.options import PestoRun, PipelineOptions, Starts
from dnnplace.formulations.solvers.progress import stage
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.runtime.deadline import Deadline

__all__ = ["MIN_RUNG_SECONDS", "SUB_SHARE", "ladder", "subcluster", "with_subclusters"]

SUB_SHARE = 0.3
"""The share of the run's time the sub-cluster rungs get together (the whole cluster keeps the rest)."""

MIN_RUNG_SECONDS = 0.1
"""A sub-cluster rung whose share of the deadline is shorter is skipped."""

Solve = Callable[[Cluster, PipelineOptions, Starts, Deadline], PestoRun]


def ladder(cluster: Cluster) -> tuple[list[int], list[int]]:
    """The class of interchangeable devices the sub-clusters take from (the largest, the first
    of equal ones; ``[]`` without one) and the sub-cluster sizes tried (ascending; see the
    module docstring).

    >>> from dnnplace.graphs.presets import cluster_preset
    >>> ladder(cluster_preset("single-host-4-nvlink")), ladder(cluster_preset("single-host-2-nvlink"))
    (([0, 1, 2, 3], [1, 2]), ([0, 1], [1]))
    """
    classes = identical_devices(cluster)
    if not classes:
        return [], []
    cls = max(classes, key=len)
    k = len(cls)
    sizes = [1 << i for i in range(k.bit_length()) if (1 << i) < k]
    if k == cluster.size:
        sizes = [j for j in sizes if j > 1]
    return list(cls), sizes


def subcluster(cluster: Cluster, cls: list[int], j: int) -> tuple[Cluster, np.ndarray]:
    """The sub-cluster with the first ``j`` devices of ``cls`` and every device outside it,
    in the cluster's order, and its devices' indices in ``cluster``."""
    drop = set(cls[j:])
    keep = np.array([d for d in range(cluster.size) if d not in drop], dtype=np.int64)
    ix = np.ix_(keep, keep)
    sub = Cluster(tuple(cluster.devices[d] for d in keep), cluster.beta0[ix], cluster.beta1[ix],
                  cluster.cost_factor[ix], name=f"{cluster.name}[{rung_name(cluster, cls, j)}]",
                  meta=dict(cluster.meta), ports=cluster.ports)
    return sub, keep


def rung_name(cluster: Cluster, cls: list[int], j: int) -> str:
    """``"2 of 4 gpu"``."""
    return f"{j} of {len(cls)} {cluster.kinds[cls[0]]}"


def _to_rung(device: np.ndarray, keep: np.ndarray, size: int) -> np.ndarray | None:
    """A placement's devices (indices of the whole cluster) as indices of the sub-cluster of
    ``keep``; ``None`` where it uses a device the sub-cluster lacks."""
    lut = np.full(size, -1, dtype=np.int64)
    lut[keep] = np.arange(keep.size)
    out = lut[np.asarray(device, dtype=np.int64)]
    return None if out.size and out.min() < 0 else out


def _starts_on(starts: Starts, sub: Cluster, keep: np.ndarray, size: int) -> Starts:
    """The caller's starts that fit the sub-cluster, in its device indices (the others dropped)."""
    extra = []
    for dev, pr in starts.extra_starts or ():
        d = _to_rung(dev, keep, size)
        if d is not None:
            extra.append((d, pr))
    rivals = []
    for name, pl in starts.rivals or ():
        d = _to_rung(pl.device, keep, size)
        if d is not None:
            rivals.append((name, Placement(pl.graph, sub, d)))
    guide = None
    if starts.guide is not None:
        d = _to_rung(starts.guide[1].device, keep, size)
        if d is not None:
            guide = (starts.guide[0], Placement(starts.guide[1].graph, sub, d), starts.guide[2])
    return Starts(extra_starts=tuple(extra), guide=guide, rivals=tuple(rivals))


def _with_best(starts: Starts, best: tuple | None, graph: OpGraph, sub: Cluster, keep: np.ndarray, size: int,
               coarsening: bool) -> tuple[Starts, str | None]:
    """``starts`` with the best lower rung's answer (``(name, placement, priorities, ...)`` on
    the whole cluster) added: a start of the ILP (uncoarsened) or a rival of the last stage
    (named as the rung); and the name the pipeline gives that start
    (:class:`~dnnplace.formulations.multilevel.options.PestoRun`'s ``warm_algorithm``), if any."""
    d = None if best is None else _to_rung(best[1].device, keep, size)
    if d is None:  # no lower rung answered (the rungs nest: a lower rung's answer always fits)
        return starts, None
    if coarsening:
        return dataclasses.replace(starts, rivals=tuple(starts.rivals) + ((best[0], Placement(graph, sub, d)),)), None
    return (dataclasses.replace(starts, extra_starts=tuple(starts.extra_starts) + ((d, best[2]),)),
            f"extra_start[{len(starts.extra_starts)}]")


def with_subclusters(graph: OpGraph, cluster: Cluster, options: PipelineOptions, starts: Starts,
                     deadline: Deadline, solve: Solve) -> PestoRun:
    """``solve`` (one run of the pipeline, or a V-cycle, on a cluster) on the ladder of
    sub-clusters and then on ``cluster`` (module docstring), with ``options.subclusters``
    and ``options.fallback``; else ``solve`` on ``cluster`` alone. Returns the whole cluster's
    run with the best answer of the ladder."""
    cls, sizes = ladder(cluster) if options.subclusters and options.fallback else ([], [])
    if not sizes:
        return solve(cluster, options, starts, deadline)
    k, D = len(cls), cluster.size
    limit = options.solver.time_limit
    weights = [SUB_SHARE * j / sum(sizes) for j in sizes] + [1.0 - SUB_SHARE]
    coarsening = options.coarsen_to is not None and graph.n > options.coarsen_to
    tried: dict[str, dict] = {}
    best = None  # (source, placement, priorities, makespan, link priorities) on the whole cluster
    for i, j in enumerate(sizes + [k]):
        share = weights[i] / sum(weights[i:])
        rung_deadline = deadline.share(share)
        last = j == k
        if last:
            sub, keep, rung_starts = cluster, np.arange(D), starts
        else:
            left = rung_deadline.remaining()
            if left is not None and left < MIN_RUNG_SECONDS:
                tried[rung_name(cluster, cls, j)] = {"skipped": f"{left:.2f} s left for it"}
                continue
            sub, keep = subcluster(cluster, cls, j)
            rung_starts = _starts_on(starts, sub, keep, D)
            stage(f"sub-cluster {rung_name(cluster, cls, j)}")
        rung_starts, ours = _with_best(rung_starts, best, graph, sub, keep, D, coarsening)
        rung_options = dataclasses.replace(options, solver=dataclasses.replace(
            options.solver, time_limit=None if limit is None else limit * weights[i]))
        t0 = time.perf_counter()
        run = solve(sub, rung_options, rung_starts, rung_deadline)
        pl = Placement(graph, cluster, keep[run.placement.device])
        ms = simulate(pl, policy="order", priorities=run.priorities, congestion=options.congestion,
                      transfer_mode=options.transfer_mode, link_priorities=run.link_priorities).makespan
        source = best[0] if run.source == "warm_start" and ours is not None and run.warm_algorithm == ours \
            else run.source  # the run kept the lower rung's answer it started from
        own = (source, pl, run.priorities, ms, run.link_priorities)
        if not last:
            tried[rung_name(cluster, cls, j)] = {"makespan": ms, "source": source, "status": run.status,
                                                 "seconds": time.perf_counter() - t0}
            if best is None or source != best[0]:  # else it kept the lower rung's answer: that rung's name
                own = (f"sub-cluster {rung_name(cluster, cls, j)}", *own[1:])
            if not feasible(pl):
                tried[rung_name(cluster, cls, j)]["infeasible"] = True
                continue
        if best is None or (own[3] <= best[3] + 1e-9 * max(1.0, own[3]) and (not last or feasible(pl))):
            best = own  # ties go to the rung's own run; a lower rung's answer is feasible
    run.size["subclusters"] = tried
    if best[1] is pl:  # the whole cluster's own answer (named for the rung it kept, if it did)
        return run if best[0] == run.source else dataclasses.replace(run, source=best[0])
    tol = 1e-6 * max(1.0, best[3])
    status = "optimal" if run.bound is not None and best[3] <= run.bound + tol else "feasible"
    return dataclasses.replace(run, placement=best[1], priorities=best[2], makespan=best[3], source=best[0],
                               link_priorities=best[4], status=status)
