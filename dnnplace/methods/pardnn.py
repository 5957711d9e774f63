"""PARDNN (Qararyah et al., ParCo 2021) and the clustering baselines of its comparison:
Mayer et al.'s CP heuristic, linear clustering + GLB (+ EST-first) and DSC + GLB.

All output a placement only, scored by the simulator under the request's policy (by
default ``fifo`` with congestion: TensorFlow's executor, ``docs/heuristics.md`` 5.2);
``lc-glb`` can also hand over its EST-first order (``est_order=true``, then replayed
per device). PARDNN's memory model is the *dynamic* peak (PARDNN Eq. 2); the baselines
ignore memory and are judged on the static footprint (docs/semantics.md 1); the evaluation reports
both either way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from dnnplace.graphs.errors import InputError
from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option
from dnnplace.runtime.termination import Termination

__all__ = ["PardnnOptions", "LCOptions", "run_pardnn", "run_cp_mayer", "run_lc_glb", "run_dsc_glb"]

_SEMANTICS = ("placement only; objective: simulation under the request's policy (fifo: TensorFlow's executor) with "
              "its congestion setting")


@dataclass(frozen=True)
class PardnnOptions(Options):
    memory: Literal["none", "I", "II", "II+I"] = option(
        "I", "Step 2: none; I (emulation-based, meets the limit when it succeeds); II (CP chunking + residual "
             "balancing, no guarantee); II+I")
    margin: float = option(0.1, "share of device memory kept free (PARDNN Sec. 4: 10 %)")
    lookahead: bool = option(True, "locality-first lookahead before level-aware balancing (Alg. 2 l. 5-7)")
    rule_c: Literal["each", "sum"] = option("each", "lookahead condition (c): comm above each of weight, primary "
                                                    "work and unmapped work, or above their sum")
    ccr_threshold: float = option(10.0, "CCR from which maximally-communicating clusters map by locality")
    emulator_congestion: bool = option(False, "heuristic I emulates with link congestion (paper: without)")

    def __post_init__(self):
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"option 'margin' must lie in [0, 1), got {self.margin}")


@dataclass(frozen=True)
class LCOptions(Options):
    est_order: bool = option(False, "hand over the EST-first order (replayed per device) instead of fifo")
    max_nodes: int = option(20000, "without a time limit, refuse larger graphs: LC is O(V (V + E))")


def run_pardnn(inst, req: SolveRequest, opts: PardnnOptions) -> MethodOutput:
    """Heuristic I's re-emulation loop stops at the run's deadline (the solver time limit; without one, the method's
    ``default_limits``, 300 s)."""
    from dnnplace.heuristics.pardnn import pardnn

    limit = req.solver.time_limit
    if req.deadline is not None and req.deadline.remaining() is not None:
        limit = req.deadline.remaining()  # what the whole run's deadline leaves
    r = pardnn(inst.graph, inst.require_cluster(), memory=opts.memory, margin=opts.margin,
               lookahead=opts.lookahead, rule_c=opts.rule_c, ccr_threshold=opts.ccr_threshold,
               emulator_congestion=opts.emulator_congestion, time_limit=limit)
    # the status comes from the evaluation (dynamic model, the request's congestion); the
    # emulator's verdict (fifo, no congestion, (1 - margin) * cap) is kept beside it
    return MethodOutput(r.placement, message=r.message or None, memory_model="dynamic",
                        termination=Termination.TIME_LIMIT if r.extra.get("memory_i_timed_out") else None,
                        extra={**r.extra, "emulated_status": r.status, "semantics": _SEMANTICS})


def run_cp_mayer(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.clustering import cp_mayer

    r = cp_mayer(inst.graph, inst.require_cluster())
    return MethodOutput(r.placement, extra={**r.extra, "semantics": _SEMANTICS})


def run_lc_glb(inst, req: SolveRequest, opts: LCOptions) -> MethodOutput:
    """The time limit (default none) cuts the quadratic clustering short: the nodes left
    become heaviest paths with levels computed once."""
    from dnnplace.heuristics.clustering import lc_glb

    limit = req.solver.time_limit
    if inst.graph.n > opts.max_nodes and limit is None:
        raise InputError(f"lc-glb: linear clustering is O(V (V + E)); the graph has {inst.graph.n} nodes > "
                         f"max_nodes = {opts.max_nodes} (raise it with --param max_nodes=N, or give a time limit)")
    left = req.deadline.remaining() if req.deadline is not None else limit
    # the clustering stops at 85 % of what is left: the paths, the mapping and the order
    # after it take the rest (measured on a 20k-node random DAG: 1.3 s after a 10 s cut)
    r = lc_glb(inst.graph, inst.require_cluster(),
               deadline=None if left is None else time.perf_counter() + 0.85 * left)
    return MethodOutput(r.placement, priorities=r.priorities if opts.est_order else None,
                        termination=Termination.TIME_LIMIT if r.extra["time_limited"] else None,
                        extra={**r.extra, "semantics": "EST-first order replayed per device" if opts.est_order
                               else _SEMANTICS})


def run_dsc_glb(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.clustering import dsc_glb

    r = dsc_glb(inst.graph, inst.require_cluster())
    return MethodOutput(r.placement, extra={**r.extra, "semantics": _SEMANTICS})
