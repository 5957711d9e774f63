"""Tarnawski et al. (NeurIPS 2020): the exact DP and DPL, the latency local search, and the
Sec. 6 baselines (local search, PipeDream, a graph partitioner); the max-load and latency
IPs are :mod:`dnnplace.methods.tarnawski_ip`; ``auto``, which picks between the DP and the
IP, is :mod:`dnnplace.methods.exact_auto`.

Wrappers import their algorithm inside the function, so that listing methods imports
nothing heavy (the IP's Pyomo is loaded only when ``ip`` runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dnnplace.graphs.errors import InputError
from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option
from dnnplace.runtime.deadline import capped
from dnnplace.runtime.memory import stop_requested
from dnnplace.runtime.termination import Termination

__all__ = ["DPOptions", "DPLOptions", "LocalSearchOptions", "LatencySearchOptions", "run_dp", "run_dpl",
           "run_local_search", "run_pipedream", "run_partitioner", "run_latency_search"]


EXIT_RESERVE = 0.5
"""Seconds (at most 5 % of its limit) latency-ls leaves of its deadline for the process's exit:
its kernels load numba, whose teardown when the interpreter exits took 0.6-0.8 s on the shared
2-core machine at load 6-7 (beyond the reserve ``dnnplace solve`` keeps for the evaluation and
the output, which the exit used up: 10.6-11.0 s wall at ``--time-limit 10``)."""


@dataclass(frozen=True)
class DPOptions(Options):
    max_ideals: int = option(6_000_000, "size limit of the exact DP (~2.4 GB at the default on narrow graphs); "
                                        "past it: DPL's split with a lower bound")
    max_memory_gb: float | None = option(None, "memory budget of the exact DP's lattice and tables (default: 90% "
                                               "of what --memory-limit leaves; without the flag 4 GB, at most half "
                                               "the memory available); past it: DPL's split with a lower bound")
    replicas: int = option(1, "App. C.2: a stage may run on up to this many accelerators (1 = no replication)")
    sync_per_byte: float | None = option(None, "App. C.2: all-reduce time per byte of a replicated stage's "
                                               "weights; default the cluster's accelerator-to-accelerator beta1")

    def __post_init__(self):
        if self.max_ideals < 1:
            raise ValueError(f"option 'max_ideals' must be >= 1, got {self.max_ideals}")
        if self.max_memory_gb is not None and not self.max_memory_gb > 0:
            raise ValueError(f"option 'max_memory_gb' must be > 0, got {self.max_memory_gb}")
        if self.replicas < 1:
            raise ValueError(f"option 'replicas' must be >= 1, got {self.replicas}")


@dataclass(frozen=True)
class DPLOptions(Options):
    order: Literal["dfs", "narrow", "best"] = option(
        "dfs", "the topological order made into a path: dfs (the paper's depth-first order), narrow (prefixes that "
               "cut the cheapest transfers, dnnplace.graphs.orders.narrow_topological_order) or best (both, the "
               "lower max-load kept; the exact DP's own bound uses it)")


@dataclass(frozen=True)
class LocalSearchOptions(Options):
    restarts: int = option(10, "seeded random starts (the paper's Sec. 6 baseline uses 10)")

    def __post_init__(self):
        if self.restarts < 1:
            raise ValueError(f"option 'restarts' must be >= 1, got {self.restarts}")


@dataclass(frozen=True)
class LatencySearchOptions(Options):
    max_iters: int | None = option(None, "stop after this many perturbation rounds (reproducible with a seed)")
    eject_within: float = option(0.02, "ejection pairs are tried for moves within this relative loss")


def _dp(inst, req: SolveRequest, linearized: bool, max_ideals: int = 6_000_000, replicas: int = 1,
        sync_per_byte: float | None = None, max_memory_gb: float | None = None, order: str = "best") -> MethodOutput:
    from dnnplace.heuristics.maxload_dp import maxload_dp

    # DPL's split (a heuristic) also serves the weaker modes, e.g. as a warm start of the
    # convex-only IP; the exact DP is optimal for the pipeline-realisable mode only
    weaker = ("convex-both", "forward", "convex-forward") if linearized else ()
    if req.contiguity not in (None, "both", *weaker):
        raise InputError(f"the DP finds pipeline-realisable splits, contiguous per part (contiguity 'both'), "
                         f"not {req.contiguity!r}")
    if inst.require_cluster().meta.get("hierarchy") and not linearized:
        return _dp_hierarchy(inst, req)
    if replicas > 1 and req.problem != "maxload":
        raise InputError("replicated stages (option replicas) are a max-load model (Tarnawski App. C.2)")
    res = maxload_dp(inst, linearized=linearized, objective=req.objective if req.problem == "maxload" else "pipedream",
                     max_ideals=max_ideals, time_limit=req.solver.time_limit, deadline=req.deadline, replicas=replicas,
                     sync_per_byte=sync_per_byte, max_bytes=_dp_bytes(req, max_memory_gb), order=order)
    extra = {"ideals": res.ideals, "pairs_visited": res.pairs_visited, "dp_nodes": res.dp_nodes,
             "seconds": res.seconds}
    if res.placement is not None and res.placement.replication is not None:
        extra["replication"] = res.placement.replication.to_json(inst.require_cluster().names)
    if res.stopped is Termination.TIME_LIMIT and stop_requested():  # the memory watchdog's stop, not the clock
        res.stopped = Termination.MEMORY_LIMIT
    why = {Termination.IDEAL_LIMIT: f"more than {max_ideals} ideals", Termination.MEMORY_LIMIT: "memory budget",
           Termination.TIME_LIMIT: "time limit"}.get(res.stopped)
    if res.note:
        extra["stopped_because"] = res.note
    if res.placement is None and not res.complete:
        one = _one_device_split(inst, req) if res.stopped in (Termination.TIME_LIMIT, Termination.MEMORY_LIMIT) \
            else None
        if one is None:
            return MethodOutput(None, status="no_solution", bound=res.lower_bound, contiguity="both",
                                termination=res.stopped, extra=extra, message=f"{why}; DPL finds no split that fits")
        extra["incumbent_from"] = "single"
        res.placement, res.value = one
        res.lower_bound = min(res.lower_bound, res.value) if res.lower_bound is not None else None
    if res.placement is None:
        return MethodOutput(None, status="infeasible", contiguity="both", extra=extra,
                            message="no contiguous split fits the devices")
    if req.problem == "latency":
        # Sec. 7 baseline: the max-load optimal split, scored for latency by the evaluator
        extra["maxload"] = res.value
        return MethodOutput(res.placement, status="feasible", objective=None, contiguity="both", extra=extra)
    if not linearized and not res.complete:
        # past the memory or time limit: the best split known and a valid lower bound
        return MethodOutput(res.placement, status="feasible", objective=res.value, bound=res.lower_bound,
                            contiguity="both", termination=res.stopped, extra=extra,
                            message=f"{why}: best split so far with a lower bound")
    status = "feasible" if linearized else "optimal"
    bound = None if linearized else res.value
    return MethodOutput(res.placement, status=status, objective=res.value, bound=bound, contiguity="both",
                        termination=res.stopped or Termination.COMPLETED, extra=extra)


DP_ROOM_SHARE = 0.9
"""The exact DP's lattice and tables may take this share of what the run's memory limit leaves
(:func:`~dnnplace.runtime.memory.headroom`); the rest is for the temporaries around them."""


def _dp_bytes(req: SolveRequest, max_memory_gb: float | None) -> float | None:
    """The exact DP's memory budget in bytes: the option ``max_memory_gb`` where given; else, under
    ``--memory-limit``, :data:`DP_ROOM_SHARE` of what the limit leaves; else the DP's default
    (:func:`~dnnplace.heuristics.maxload_dp.memory_budget`), within what the default limit leaves."""
    from dnnplace.heuristics.maxload_dp import memory_budget
    from dnnplace.runtime.memory import headroom

    if max_memory_gb is not None:
        return max_memory_gb * 1e9
    room = headroom()
    if room is None:
        return None
    room = max(1.0, DP_ROOM_SHARE * room)
    return room if req.solver.memory_limit is not None else min(memory_budget(), room)


def _one_device_split(inst, req: SolveRequest):
    """``(placement, max-load)`` of the single-device split (contiguous), the DP's incumbent where
    DPL found none within the time left; ``None`` where it does not fit."""
    from dnnplace.evaluation.evaluate import maxload
    from dnnplace.heuristics.baselines import single_device

    try:
        p = single_device(inst.graph, inst.require_cluster())
    except InputError:
        return None
    ev = maxload(p, objective=req.objective if req.problem == "maxload" else "pipedream", contiguity="both")
    return (p, float(ev.objective)) if ev.feasible else None


def _dp_hierarchy(inst, req: SolveRequest) -> MethodOutput:
    """App. C.3: the level-by-level DP on a cluster of servers (graphs.hierarchy)."""
    from dnnplace.heuristics.hierarchy_dp import hierarchical_dp

    if req.problem != "maxload" or req.objective != "pipedream":
        raise InputError("the hierarchical DP optimises the max-load with the pipedream objective")
    res = hierarchical_dp(inst)
    extra = {"ideals": res.ideals, "server_blocks": res.blocks}
    if res.placement is None:
        return MethodOutput(None, status="infeasible", contiguity="both", extra=extra,
                            message="no split fits the servers")
    return MethodOutput(res.placement, status="optimal", objective=res.value, bound=res.value, contiguity="both",
                        termination=Termination.COMPLETED, extra=extra)


def run_dp(inst, req: SolveRequest, opts: DPOptions) -> MethodOutput:
    return _dp(inst, req, linearized=False, max_ideals=opts.max_ideals, replicas=opts.replicas,
               sync_per_byte=opts.sync_per_byte, max_memory_gb=opts.max_memory_gb)


def run_dpl(inst, req: SolveRequest, opts: DPLOptions) -> MethodOutput:
    return _dp(inst, req, linearized=True, order=opts.order)


def run_local_search(inst, req: SolveRequest, opts: LocalSearchOptions) -> MethodOutput:
    from dnnplace.heuristics.local_search import local_search

    p, val, values = local_search(inst, restarts=opts.restarts, seed=req.seed)
    return MethodOutput(p, objective=val, contiguity="none", extra={"restart_values": values,
                                                                    "restarts": opts.restarts})


def run_pipedream(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.pipedream import pipedream_split

    p, val = pipedream_split(inst)
    return MethodOutput(p, objective=val, contiguity="both")


def run_partitioner(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    from dnnplace.heuristics.partitioner import partition_split

    return MethodOutput(partition_split(inst, seed=req.seed), contiguity="none",
                        extra={"partitioner": "METIS (pymetis) k-way"})


def run_latency_search(inst, req: SolveRequest, opts: LatencySearchOptions) -> MethodOutput:
    """Time limit: the request's (without one, the method's ``default_limits``, 30 s), as what its
    deadline leaves once the bound is computed (``dnnplace solve`` counts it from the process
    start), less :data:`EXIT_RESERVE`; seed: the request's; ``--warm-start``: a single search
    lane from that split (default: greedy, dp and all-CPU lanes). The bound
    is :func:`~dnnplace.evaluation.bounds.latency_lower_bound` (contiguous splits): an answer
    that meets it is ``optimal``."""
    from dnnplace.evaluation.bounds import latency_lower_bound
    from dnnplace.heuristics.latency_search import latency_search

    start = req.warm.placement if req.warm is not None else None
    # the path segmentation bound holds for every contiguous split (one piece per accelerator);
    # computed first, so the search takes what the deadline leaves after it
    bound = latency_lower_bound(inst.graph, inst.require_cluster(), 1)
    limit = capped(float(req.solver.time_limit), req.deadline)
    p, val, info = latency_search(inst, time_limit=limit - min(EXIT_RESERVE, 0.05 * limit), seed=req.seed,
                                  start=start, max_iters=opts.max_iters, eject_within=opts.eject_within)
    if req.warm is not None:
        info["start"] = req.warm_start
    trace = [(t, v, None) for t, v in info.pop("trace")]
    status = "optimal" if val <= bound * (1 + 1e-9) else "feasible"
    return MethodOutput(p, status=status, objective=val, bound=bound, contiguity="none", trace=trace,
                        termination=Termination.TIME_LIMIT if opts.max_iters is None else Termination.ITERATION_LIMIT,
                        extra=info)
