"""Multilevel Pesto (a V-cycle, as multilevel graph partitioners refine): solve the Pesto
pipeline (:func:`~dnnplace.formulations.multilevel.pesto.pesto`) at ``coarsen_to`` nodes, then again at
``2 * coarsen_to``, ``4 * coarsen_to``, ... nodes, each finer level coarsened *guided by the
best answer so far*: only nodes that answer keeps on one device are merged
(:func:`~dnnplace.heuristics.coarsening.coarsen` with ``guide=``), so the answer is a
placement of the finer coarse graph too and enters its ILP as a MIP start (with its own
order), and it is a rival of the level's last stage on the original graph. A level's
answer therefore never loses to the one before it, and the finer ILP can move nodes that
were merged at the coarser level. The time limit is split evenly over the levels.

Every level is a full ``pesto`` run: its answer is re-simulated on the original graph and
its bound is the original graph's combinatorial bound (the coarse ILP bounds only its
coarse problem). The run that is returned records the levels in
``size["vcycle"]``: coarse nodes, makespan and source of each. With
``options.subclusters`` the whole V-cycle runs on each sub-cluster of the ladder first
(:func:`~dnnplace.formulations.multilevel.subclusters.with_subclusters`), its levels without it.
"""

from __future__ import annotations

import dataclasses

from dnnplace.evaluation.sim_costs import check_transfer_mode, transfer_semantics
from dnnplace.formulations.multilevel.pesto import PestoRun, PipelineOptions, Starts, pesto
from dnnplace.formulations.multilevel.subclusters import with_subclusters
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline

__all__ = ["pesto_vcycle"]


def pesto_vcycle(graph: OpGraph, cluster: Cluster, options: PipelineOptions, starts: Starts | None = None, *,
                 levels: int = 2, deadline: Deadline | None = None) -> PestoRun:
    """Run ``levels`` Pesto levels at ``options.coarsen_to * 2**l`` nodes (``l = 0 ..
    levels - 1``; levels at or above the graph's size are skipped), each a
    :func:`~dnnplace.formulations.multilevel.pesto.pesto` run with ``options`` (its
    ``coarsen_to`` the level's, its solver's time limit the level's share, its deadline
    the level's :meth:`~dnnplace.runtime.deadline.Deadline.share` of ``deadline``) and
    ``starts`` (its ``guide`` and a rival: the previous level's answer, which this
    function supplies). Returns the best level's run."""
    if levels < 1:
        raise InputError(f"pesto V-cycle: levels must be >= 1, got {levels}")
    if options.coarsen_to is None:
        raise InputError("pesto V-cycle: needs coarsen_to")
    with transfer_semantics(check_transfer_mode(options.transfer_mode)):
        return with_subclusters(graph, cluster, options, starts or Starts(), deadline or NO_DEADLINE,
                                lambda cl, opts, st, dl: _levels(graph, cl, opts, st, levels, dl))


def _levels(graph: OpGraph, cluster: Cluster, options: PipelineOptions, starts: Starts, levels: int,
            deadline: Deadline) -> PestoRun:
    """The V-cycle's levels on ``cluster`` (each a pipeline run without sub-clusters)."""
    options = dataclasses.replace(options, subclusters=False)
    solver = options.solver
    sizes = [options.coarsen_to * 2 ** lv for lv in range(levels)]
    sizes = [k for k in sizes if k < graph.n] or sizes[:1]
    share = None if solver.time_limit is None else solver.time_limit / len(sizes)
    level_solver = dataclasses.replace(solver, time_limit=share)
    rivals = tuple(starts.rivals)
    best: PestoRun | None = None
    trace = []
    for lv, k in enumerate(sizes):
        guide = None if best is None else ("vcycle", best.placement, best.priorities)
        extra = () if best is None else (("vcycle:previous", best.placement),)
        level = deadline.share(1.0 / (len(sizes) - lv))
        run = pesto(graph, cluster, dataclasses.replace(options, coarsen_to=k, solver=level_solver),
                    dataclasses.replace(starts, guide=guide, rivals=rivals + extra), deadline=level)
        trace.append({"coarse_nodes": run.coarse_n, "makespan": run.makespan, "source": run.source,
                      "ilp_gap": run.ilp_gap})
        if best is None or run.makespan < best.makespan:
            best = run
    best.size["vcycle"] = trace
    return best
