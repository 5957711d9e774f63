"""FastT's methods (Yi et al., Middleware'20): DPOS, OS-DPOS, the data-parallel baseline
and CPOP (:mod:`dnnplace.heuristics.fastt`, :mod:`dnnplace.heuristics.os_dpos`,
:mod:`dnnplace.graphs.transforms.data_parallel`).

DPOS, OS-DPOS and CPOP output a placement and a per-device order; the objective is the
simulator replaying that order strictly (``policy="order"``) under the request's
congestion and transfer mode, and ``extra`` keeps the planner's own estimate
(``planner_estimate``, which equals the congestion-free replay with one transfer per
edge, the planner's accounting; the default transfer mode sends a tensor once per
consuming device), the replay without congestion and the makespan under
the non-delay ``priority`` policy (what FastT's TensorFlow patch enforces, A10) and under
TensorFlow's ``fifo`` (``fifo_policy``; FastT Fig. 2 compares the two).
``planner_congestion`` (our extension) lets the planner queue transfers on their links
(or on the devices' shared ports, where the cluster says so) and send what the request's
``transfer_mode`` sends (by default a tensor once per consuming device): it then plans on
the model it is scored on, hands over its link order, and with congestion on the
objective equals its ``planner_estimate``.

``start="data-parallel"`` solves FastT's start deployment instead of the given graph: the
graph replicated once per GPU with the batch split (:func:`~dnnplace.graphs.transforms.data_parallel.data_parallel`,
costs from a :class:`~dnnplace.graphs.batch_model.BatchModel` at the graph's ``meta["batch"]``
with ``half_batch``), and OS-DPOS answers on its split graph: such a result is for the
transformed graph, which the method reports (``MethodOutput.graph``) and the evaluator
scores; ``extra`` names it. ``start="auto"`` is FastT's rule (Sec. 5.2, "if the model fits on one
device"): the data-parallel start when its deployment (the DP baseline: one replica at
``batch / GPUs`` per GPU, the shared parameters on the first) fits in static memory, else the
graph itself.
The DP baseline's ``variables="cpu"`` puts the shared nodes (parameters, gradient sums, updates) on the
host CPU instead of GPU 0, as TF-slim's ``model_deploy`` does (the paper's baseline; the ablation in
results/fastt/fastt-scaling/dp-baseline-ablation.md); FastT's start stays the GPU-0 deployment.
FastT starts from data parallelism; with ``keep_start`` (default) the method keeps that
start deployment (the DP baseline's placement, replaying the order its fifo simulation
followed) when it fits in memory and simulates faster than the planner's schedule (or the
planner's schedule does not fit) (*paper*: FastT activates a new strategy only when its estimated
iteration time beats the current one, Sec. 4, and Alg. 2 hands the start strategy ``S`` to every
DPOS call), and says so in ``extra["kept_start"]``; the planner's own
schedule stays in ``extra`` (``planner_makespan``, ``priority_policy``, ``fifo_policy`` are always the
planner's schedule's). For OS-DPOS the start is also the *incumbent* of the split loop
(:func:`~dnnplace.heuristics.os_dpos.os_dpos`): its value under the model the splits are judged
on (the planner's: with ``planner_congestion`` the congested replay, else the congestion-free
one; or the simulation, ``score="simulation"``) is the time a split must beat
(``extra["incumbent"]``, ``extra["incumbent_kept"]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dnnplace.graphs.errors import InputError
from dnnplace.methods.base import MethodOutput, Options, SolveRequest, option
from dnnplace.runtime.termination import Termination

__all__ = ["DPOSOptions", "OSDPOSOptions", "CPOPOptions", "DPBaselineOptions", "run_dpos", "run_os_dpos",
           "run_cpop", "run_dp_baseline", "parse_rules"]

_START = option("graph", "graph: the given graph; data-parallel: FastT's start, the graph replicated once per GPU "
                         "at batch / GPUs (needs node roles for shared parameters); auto: data-parallel when the "
                         "DP deployment fits in memory, else the graph (FastT Sec. 5.2)")
_HALF = option(0.0, "data-parallel start: the batch at which a GPU reaches half its throughput (BatchModel; 0 = "
                    "linear scaling)")
_KEEP = option(True, "data-parallel start: keep the DP deployment when it simulates faster than the planner's schedule")
_CONG = option(False, "our extension: the planner models link congestion (transfers queue on their link, or on shared "
                      "ports) and the request's transfer mode, and hands its link order to the evaluator")


@dataclass(frozen=True)
class _PlannerOptions(Options):
    """The options every FastT planner (DPOS, CPOP, OS-DPOS) shares."""

    start: Literal["graph", "data-parallel", "auto"] = _START
    half_batch: float = _HALF
    keep_start: bool = _KEEP
    planner_congestion: bool = _CONG


@dataclass(frozen=True)
class DPOSOptions(_PlannerOptions):
    nominal: Literal["max", "mean", "min"] = option("max", "nominal costs of the upward rank (FastT: max)")
    on_oom: Literal["best_effort", "raise"] = option("best_effort", "an op no device has memory for: the device "
                                                                    "with most free memory, or an error")


@dataclass(frozen=True)
class CPOPOptions(_PlannerOptions):
    nominal: Literal["max", "mean", "min"] = option("mean", "nominal costs of rank_u + rank_d (CPOP: mean)")
    on_oom: Literal["best_effort", "raise"] = option("best_effort", "as for dpos")


@dataclass(frozen=True)
class OSDPOSOptions(_PlannerOptions):
    rules: str | None = option(None, "split rules 'OpType=dim+dim;...' ('*' = every type; dims: batch, channel, "
                                     "batch-sum); default: the table of graphs/transforms/op_split.py")
    parts: str | None = option(None, "part counts to try, e.g. '2,4' (default 2..number of GPUs)")
    recompute_cp: bool = option(False, "recompute the critical path after each accepted split")
    max_candidates: int | None = option(None, "try at most this many critical-path ops")
    kappa: float | None = option(None, "per-part kernel overhead in the graph's unit (default 5 us)")
    nominal: Literal["max", "mean", "min"] = option("max", "nominal costs of the upward rank")
    on_oom: Literal["best_effort", "raise"] = option("best_effort", "as for dpos")
    score: Literal["planner", "simulation"] = option("planner", "what a split must lower: the planner's estimate "
                                                                "(paper) or the strict replay under the request's "
                                                                "congestion")


@dataclass(frozen=True)
class DPBaselineOptions(Options):
    scaling: Literal["strong", "weak"] = option("strong", "strong: the global batch is split over the GPUs; weak: "
                                                          "every GPU runs the full batch")
    half_batch: float = _HALF
    variables: Literal["gpu0", "cpu"] = option("gpu0", "where the parameters, the gradient sum (AddN) and the updates "
                                                       "go: gpu0 (ours) or the host's first CPU device, as TF-slim's "
                                                       "model_deploy places them (needs a cpu device and cpu costs "
                                                       "for those nodes)")


def parse_rules(text: str | None) -> dict[str, list[str]] | None:
    """``"Conv2D=batch+channel;MatMul=batch"`` as a rule mapping (``None`` = the default table).

    >>> parse_rules("Conv2D=batch+channel; *=batch")
    {'Conv2D': ['batch', 'channel'], '*': ['batch']}
    """
    if text is None:
        return None
    out: dict[str, list[str]] = {}
    for item in filter(None, (x.strip() for x in text.split(";"))):
        if "=" not in item:
            raise InputError(f"split rule {item!r}: expected OpType=dim+dim")
        key, dims = item.split("=", 1)
        out[key.strip()] = [d.strip() for d in dims.split("+") if d.strip()]
    return out


def _instance_graph(inst, start: str, scaling: str = "strong", half_batch: float = 0.0):
    """The graph to solve: the given one, or FastT's data-parallel start."""
    from dnnplace.graphs.batch_model import BatchModel
    from dnnplace.graphs.transforms.data_parallel import accelerators, data_parallel, dp_baseline_devices

    g, cl = inst.graph, inst.require_cluster()
    if start == "graph":
        return g, None
    n = int(accelerators(cl).size)
    batch = g.meta.get("batch", n)
    dp = data_parallel(g, n, batch_model=BatchModel(batch, half_batch=half_batch), scaling=scaling)
    if start == "auto":  # FastT Sec. 5.2: start from data parallelism when its deployment fits
        from dnnplace.evaluation.evaluate import validate
        from dnnplace.graphs.placement import Placement

        if validate(Placement(dp.graph, cl, dp_baseline_devices(dp, cl)), memory=True):
            return g, None
    return dp.graph, dp


def _output(sched, cl, req: SolveRequest, original, *, graph=None, extra=None, dp=None,
            keep_start: bool = False) -> MethodOutput:
    from dnnplace.evaluation.simulate import simulate

    p, prio = sched.placement, sched.priorities
    links = sched.link_priorities if req.congestion else None
    ms = simulate(p, policy="order", priorities=prio, congestion=req.congestion, link_priorities=links).makespan
    free = simulate(p, policy="order", priorities=prio, congestion=False).makespan
    nondelay = simulate(p, policy="priority", priorities=prio, congestion=req.congestion).makespan
    fifo = simulate(p, policy="fifo", congestion=req.congestion).makespan
    ex = {"planner_estimate": sched.planner_estimate, "planner_makespan": ms, "order_no_congestion": free,
          "priority_policy": nondelay, "fifo_policy": fifo, "memory_model": "static", **sched.extra,
          **(extra or {})}
    if dp is not None and keep_start:
        from dnnplace.evaluation.evaluate import validate

        start_p, start_prio, start_ms = _start_deployment(dp, cl, req)
        ex["start_makespan"] = start_ms
        # the start is kept when it fits in memory and is faster, or fits where the planner's schedule does not
        fits_start, fits_plan = not validate(start_p, memory=True), not validate(p, memory=True)
        ex["kept_start"] = fits_start and (start_ms < ms or not fits_plan)
        if ex["kept_start"]:
            p, prio, ms, graph, links = start_p, start_prio, start_ms, dp.graph, None
    scored = graph if graph is not None and graph is not original else None
    if scored is not None:
        ex["solved_graph"] = f"{scored.name}: {scored.n} nodes, {scored.m} edges (the input has {original.n})"
    return MethodOutput(p, objective=ms, priorities=prio, link_priorities=links, graph=scored, extra=ex,
                        answer_from="never-worse: data-parallel start" if ex.get("kept_start") else None)


def _start_deployment(dp, cl, req: SolveRequest):
    """The DP baseline's placement of ``dp``, the device order of its fifo simulation, and
    the makespan of replaying that order strictly."""
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.placement import Placement
    from dnnplace.graphs.transforms.data_parallel import dp_baseline_devices

    p = Placement(dp.graph, cl, dp_baseline_devices(dp, cl))
    prio = simulate(p, policy="fifo", congestion=req.congestion).schedule.priorities()
    return p, prio, simulate(p, policy="order", priorities=prio, congestion=req.congestion).makespan


def run_dpos(inst, req: SolveRequest, opts: DPOSOptions) -> MethodOutput:
    from dnnplace.heuristics.fastt import dpos

    g, dp = _instance_graph(inst, opts.start, half_batch=opts.half_batch)
    s = dpos(g, inst.require_cluster(), nominal=opts.nominal, on_oom=opts.on_oom, congestion=opts.planner_congestion,
             transfer_mode=req.transfer_mode)
    return _output(s, inst.cluster, req, inst.graph, graph=g, dp=dp, keep_start=opts.keep_start)


def run_cpop(inst, req: SolveRequest, opts: CPOPOptions) -> MethodOutput:
    from dnnplace.heuristics.fastt import cpop

    g, dp = _instance_graph(inst, opts.start, half_batch=opts.half_batch)
    s = cpop(g, inst.require_cluster(), nominal=opts.nominal, on_oom=opts.on_oom, congestion=opts.planner_congestion,
             transfer_mode=req.transfer_mode)
    return _output(s, inst.cluster, req, inst.graph, graph=g, dp=dp, keep_start=opts.keep_start)


def run_os_dpos(inst, req: SolveRequest, opts: OSDPOSOptions) -> MethodOutput:
    """Time limit: the request's solver time limit (without one, the method's ``default_limits``, 60 s); the best
    state is kept."""
    from dnnplace.heuristics.os_dpos import os_dpos

    g, dp = _instance_graph(inst, opts.start, half_batch=opts.half_batch)
    parts = None
    if opts.parts is not None:
        try:
            parts = [int(x) for x in opts.parts.split(",") if x.strip()]
        except ValueError:
            raise InputError(f"method 'os-dpos' option 'parts': expected integers like '2,4', got {opts.parts!r}") \
                from None
    limit = req.solver.time_limit
    score = None
    if opts.score == "simulation":
        from dnnplace.evaluation.simulate import simulate

        def score(sched):
            links = sched.link_priorities if req.congestion else None
            return simulate(sched.placement, policy="order", priorities=sched.priorities,
                            congestion=req.congestion, link_priorities=links).makespan

    incumbent = None
    if dp is not None and opts.keep_start:  # the start strategy S as the incumbent, on the model splits are judged on
        from dnnplace.evaluation.evaluate import validate
        from dnnplace.evaluation.simulate import simulate

        start_p, start_prio, _ = _start_deployment(dp, inst.cluster, req)
        if not validate(start_p, memory=True):
            cong = req.congestion if opts.score == "simulation" else opts.planner_congestion
            incumbent = simulate(start_p, policy="order", priorities=start_prio, congestion=cong).makespan
    r = os_dpos(g, inst.require_cluster(), rules=parse_rules(opts.rules), parts=parts, recompute_cp=opts.recompute_cp,
                max_candidates=opts.max_candidates, kappa=opts.kappa, time_limit=limit, nominal=opts.nominal,
                on_oom=opts.on_oom, score=score, congestion=opts.planner_congestion, transfer_mode=req.transfer_mode,
                incumbent=incumbent)
    extra = {"incumbent": incumbent, "incumbent_kept": r.incumbent_kept,
             "splits": [list(s) for s in r.splits], "dpos_estimate": r.dpos_estimate, "score": opts.score,
             "score_value": r.score, "trials": r.trials, "time_to_first_improvement": r.time_to_first_improvement,
             "timed_out": r.timed_out,
             "candidates": len(r.candidates)}
    out = _output(r.schedule, inst.cluster, req, inst.graph, graph=r.graph, extra=extra, dp=dp,
                  keep_start=opts.keep_start)
    if r.timed_out:
        out.termination = Termination.TIME_LIMIT
    return out


def run_dp_baseline(inst, req: SolveRequest, opts: DPBaselineOptions) -> MethodOutput:
    """Replica k on GPU k, parameters and gradient aggregation on GPU 0 (``variables="cpu"``:
    on the cluster's first CPU device, TF-slim's ``model_deploy``: its ``variables_device`` and
    ``optimizer_device`` are ``CPU:0``); no order (the evaluator runs the request's policy, by
    default TensorFlow's fifo)."""
    import numpy as np

    from dnnplace.graphs.placement import Placement
    from dnnplace.graphs.transforms.data_parallel import dp_baseline_devices

    g, dp = _instance_graph(inst, "data-parallel", opts.scaling, opts.half_batch)
    cl = inst.require_cluster()
    devices = dp_baseline_devices(dp, cl)
    if opts.variables == "cpu":  # the shared nodes; on one GPU (no replication) the parameters and updates
        roles = np.asarray(g.roles or ("compute",) * g.n, dtype=object)
        shared = (dp.replica < 0) | np.isin(roles, ("param", "apply"))
        if dp.replicas == 1:
            g = _update_groups(g, roles)
        devices[shared] = _variables_cpu(g, cl, shared)
    p = Placement(g, cl, devices)
    scored = g if g is not inst.graph else None
    extra = {"replicas": dp.replicas, "scaling": opts.scaling, "variables": opts.variables, "memory_model": "static"}
    if scored is not None:
        extra["solved_graph"] = f"{g.name}: {g.n} nodes, {g.m} edges (the input has {inst.graph.n})"
    return MethodOutput(p, graph=scored, extra=extra)


def _update_groups(g, roles):
    """``g`` with each update colocated with its parameters only, as
    :func:`~dnnplace.graphs.transforms.data_parallel.data_parallel` groups them on more than one
    replica: a captured graph colocates a parameter with the op producing its gradient (PyTorch
    accumulates ``.grad`` on the parameter's device), which TF-slim computes on the clone's GPU
    and sends to the CPU's update."""
    import numpy as np

    coloc, labels = g.colocation.copy(), list(g.colocation_labels)
    for a in np.flatnonzero(roles == "apply").tolist():
        members = [a] + [int(p) for p in g.predecessors(a).tolist() if roles[p] == "param"]
        coloc[members] = len(labels)
        labels.append(f"dp:{g.ids[a]}")
    return g.with_(colocation=coloc, colocation_labels=tuple(labels))


def _variables_cpu(g, cl, shared) -> int:
    """The device of the shared nodes (``shared``: a mask of ``g``) under ``variables="cpu"``: the
    cluster's first CPU device; an error naming the cluster or the first shared node without a cpu cost."""
    cpus = cl.devices_of_kind("cpu")
    if not cpus.size:
        raise InputError(f"method 'dp-baseline' option 'variables': cluster {cl.name!r} has no cpu device")
    bad = shared & ~g.supports("cpu")
    if bad.any():
        raise InputError(f"method 'dp-baseline' option 'variables': node {g.ids[int(bad.argmax())]!r} has no "
                         "'cpu' compute cost (the parameters, their updates and gradient sums run on the CPU)")
    return int(cpus[0])
