"""Baselines for every problem: one device, Tarnawski's greedy fill, a given split,
Pesto's layer-wise expert.

Wrappers import their algorithm inside the function, so that listing methods imports
nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option

__all__ = ["GreedyOptions", "ExpertOptions", "run_single", "run_greedy", "run_expert", "run_layer_split"]


@dataclass(frozen=True)
class GreedyOptions(Options):
    order: str = option("dfs", "topological order of the fill (dnnplace.graphs.orders.TOPO_ORDERS: dfs, level, ...)")


@dataclass(frozen=True)
class ExpertOptions(Options):
    split: str | None = option(None, "placement file; default: the bundled human-expert split of the workload")


def run_single(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.baselines import single_device

    return MethodOutput(single_device(inst.graph, inst.require_cluster()))


def run_greedy(inst, req: SolveRequest, opts: GreedyOptions) -> MethodOutput:
    from dnnplace.heuristics.baselines import greedy_fill

    return MethodOutput(greedy_fill(inst.graph, inst.require_cluster(), order=opts.order), extra={"order": opts.order})


def run_expert(inst, req: SolveRequest, opts: ExpertOptions) -> MethodOutput:
    from dnnplace.data import expert_split_path
    from dnnplace.graphs.io import load_placement

    path = opts.split or expert_split_path(inst.graph.name)
    return MethodOutput(load_placement(str(path), inst), extra={"split": opts.split or "bundled"})


def run_layer_split(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    """No order of its own: a makespan is simulated with the request's policy (``fifo`` by
    default, TensorFlow-like, as Pesto's expert baseline runs)."""
    from dnnplace.heuristics.baselines import layer_split

    return MethodOutput(layer_split(inst.graph, inst.require_cluster()))
