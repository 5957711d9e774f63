"""Celeritas (Xu et al.): fusion plus Adjusting Placement, its Order-Place baseline, and
METIS as a makespan baseline with memory as a second constraint.

These methods output a placement only (no order): the registry scores it with the
simulator under the request's policy, by default ``fifo`` with congestion on
(TensorFlow's executor, ``docs/heuristics.md`` 5.2). The planner's own congestion-free
makespan is kept in ``extra["planner_estimate"]``, never reported as the objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option

__all__ = ["OrderPlaceOptions", "CeleritasOptions", "MetisOptions", "run_celeritas", "run_order_place", "run_metis"]

Order = Literal["cpd-topo", "dfs-topo", "m-topo"]


@dataclass(frozen=True)
class OrderPlaceOptions(Options):
    R: int = option(200, "fusion window: at most R nodes per fused node (1: no fusion)")
    M_frac: float = option(0.25, "memory bound of a fused node, as a share of the smallest device memory "
                                 "(paper: 'M = 0.25*', truncated)")
    order: Order = option("cpd-topo", "topological order for fusion and placement")
    nominal: Literal["mean", "max", "min"] = option("mean", "placement-free costs over the devices")
    on_oom: Literal["best_effort", "raise"] = option("best_effort", "when no device has room: the device with the "
                                                                    "most free memory (memory_infeasible), or an error")

    def __post_init__(self):
        if self.R < 1:
            raise ValueError(f"option 'R' must be >= 1, got {self.R}")
        if not self.M_frac > 0:
            raise ValueError(f"option 'M_frac' must be > 0, got {self.M_frac}")


@dataclass(frozen=True)
class CeleritasOptions(OrderPlaceOptions):
    adjust: bool = option(True, "Adjusting Placement (Eq. 9); false gives Order-Place")


@dataclass(frozen=True)
class MetisOptions(Options):
    memory: bool = option(True, "balance memory as a second METIS constraint (besides compute)")


def _run(inst, opts: OrderPlaceOptions, adjust: bool) -> MethodOutput:
    from dnnplace.heuristics.celeritas import celeritas, one_device_reason

    run = celeritas(inst.graph, inst.require_cluster(), R=opts.R, M_frac=opts.M_frac, order=opts.order,
                    adjust=adjust, nominal=opts.nominal, on_oom=opts.on_oom)
    fz = run.fusion.meta
    extra = {"planner_estimate": run.coarse.planner_estimate, "coarse_nodes": run.fusion.graph.n,
             "ccr_before": fz["ccr_before"], "ccr_after": fz["ccr_after"], "fusion_cut": fz["cut"],
             "fusion_M": fz["M"], "fusion_seconds": run.fusion_seconds, "placement_seconds": run.placement_seconds,
             "best_effort_nodes": run.coarse.best_effort, "colocation_repairs": run.colocation_repairs,
             "semantics": "placement only; objective: simulation under the request's policy (fifo: TensorFlow's "
                          "executor) with its congestion setting"}
    why = one_device_reason(run, adjust=adjust, R=opts.R)
    if why is not None:
        extra["one_device"] = why
    return MethodOutput(run.placement, build_seconds=run.fusion_seconds, extra=extra, message=why)


def run_celeritas(inst, req: SolveRequest, opts: CeleritasOptions) -> MethodOutput:
    return _run(inst, opts, opts.adjust)


def run_order_place(inst, req: SolveRequest, opts: OrderPlaceOptions) -> MethodOutput:
    return _run(inst, opts, False)


def run_metis(inst, req: SolveRequest, opts: MetisOptions) -> MethodOutput:
    from dnnplace.heuristics.nominal import nominal_costs
    from dnnplace.heuristics.partitioner import partition_split

    cl = inst.require_cluster()
    _, c = nominal_costs(inst.graph, cl, "mean")
    p = partition_split(inst, seed=req.seed, memory=opts.memory, edge_costs=c)
    balance = "compute and memory balanced" if opts.memory else "compute balanced"
    return MethodOutput(p, extra={"partitioner": f"METIS (pymetis) k-way, cut = nominal transfer time, {balance}"})
