"""The plans ``dnnplace tune`` measures (docs/execution.md, "Measured selection" and "Layer plans").

- :func:`method_plans`: each makespan method's plan of the operator graph and, at
  ``"layer"`` granularity, of the *layer graph*: every layer of the model (the operators
  of one module call, forward and backward, its parameters and their updates) one
  colocation class (:func:`~dnnplace.graphs.transforms.layers.contract_layers`, the layer
  granularity of Tarnawski et al., Table 3), a layer that is not contiguous (a recurrent
  cell called at every time step) split into its calls. A layer plan cuts the step only
  between layers or calls, where a message is an activation or its gradient, never a
  layer's weights.
  Each layer plan is then refined by whole-layer moves under the simulator
  (:func:`~dnnplace.heuristics.refine.refine_placement`, the refinement stage of Pesto's
  pipeline), and so is the one-device plan (``moves (layers)``: layers moved off one
  device while the simulated step drops), so the plan of independent branches on their
  own devices is among the candidates even when no method's search reaches it.
- :func:`one_device_plan`: the whole step on one device, the baseline every answer is
  measured against.
- :func:`executed_instance`: the instance on the one-device run's operator times
  (docs/execution.md, Executed costs).

Every plan is predicted on the operator graph itself (:func:`dnnplace.execute_command.predict`:
each device in the plan's order); a refined plan replaces the method's own only where it
is predicted shorter.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["GRANULARITIES", "LAYER_SUFFIX", "MOVES", "ONE_DEVICE", "method_plans", "one_device_plan",
           "executed_instance", "shortlist"]

GRANULARITIES = ("op", "layer")
LAYER_SUFFIX = " (layers)"
MOVES = "moves" + LAYER_SUFFIX
"""The candidate made from the one-device plan by whole-layer moves alone."""
ONE_DEVICE = "one device"
REFINE_SHARE = 0.5
"""A layer plan's refinement runs within this share of the method's time limit."""


def _candidate(inst: Any, name: str, placement: dict, order: dict | None, took: float) -> tuple:
    """``(name, Plan, predicted SimResult, seconds)``; ``order`` ranks each device's nodes
    (a result's priorities or start times); a placement without one runs in the
    simulated FIFO order."""
    from dnnplace.execute_command import predict
    from dnnplace.pytorch.execution.launch import Plan
    sim = predict(inst, placement, order)
    order = order or dict(zip(inst.graph.ids, sim.schedule.priorities().tolist()))
    return name, Plan(dict(placement), dict(order)), sim, took


def refined(inst: Any, layers: Any, cand: tuple, time_limit: float) -> tuple:
    """``cand`` (a plan of ``inst``'s nodes that keeps every layer of ``layers`` whole)
    after whole-layer moves under the simulator (critical-path dispatch, the cluster's
    links), in the order the simulator gives it; ``cand`` itself where that is not
    predicted shorter."""
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.placement import Placement
    from dnnplace.heuristics.refine import refine_placement
    name, plan, sim, took = cand
    cl, ids = inst.cluster, inst.graph.ids
    t0 = time.perf_counter()
    dev = Placement.from_mapping(inst.graph, cl, plan.placement).device
    links = cl.default_congestion
    dev, _, _ = refine_placement(layers.graph, cl, dev, policy="critical_path", congestion=links,
                                 time_limit=time_limit)
    order = simulate(Placement(inst.graph, cl, dev), policy="critical_path", congestion=links).schedule.priorities()
    better = _candidate(inst, name, {v: cl.names[int(d)] for v, d in zip(ids, dev)},
                        dict(zip(ids, order.tolist())), took + time.perf_counter() - t0)
    return better if float(better[2].makespan) < float(sim.makespan) else cand


def method_plans(inst: Any, methods: dict[str, dict], time_limit: float | None,
                 granularities: Sequence[str] = ("op",)) -> list[tuple[str, Any, Any, float]]:
    """``[(method, Plan, predicted SimResult, solve seconds)]``: each method's makespan plan
    on ``inst`` (a method without a placement is reported on stderr and left out). With
    ``"layer"`` in ``granularities`` each method also solves the layer graph, its plan
    refined by layer moves and named ``method (layers)``, and the one-device plan refined
    the same way is added as :data:`MOVES` (module docstring)."""
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.transforms.layers import contract_layers
    from dnnplace.methods.base import SolveRequest
    from dnnplace.registry import solve
    layers = contract_layers(inst, calls=True)[0] if "layer" in granularities else None
    views = ([(inst, "")] if "op" in granularities else []) + ([(layers, LAYER_SUFFIX)] if layers else [])
    refine_s = REFINE_SHARE * (time_limit or 20.0)
    out = []
    for view, suffix in views:
        for method, params in methods.items():
            t0 = time.perf_counter()
            res = solve(view, method, SolveRequest("makespan", solver=SolverOptions(time_limit=time_limit),
                                                   congestion=inst.cluster.default_congestion, params=dict(params)))
            if res.placement is None:
                print(f"{method}{suffix}: no placement ({res.status}: {res.message})", file=sys.stderr)
                continue
            cand = _candidate(inst, method + suffix, res.placement, res.priorities or res.start,
                              time.perf_counter() - t0)
            out.append(refined(inst, layers, cand, refine_s) if view is layers else cand)
    if layers is not None:
        one = one_device_plan(inst)
        out.append(refined(inst, layers, (MOVES, *one[1:]), refine_s))
    return out


def one_device_plan(inst: Any, device: str | None = None) -> tuple[str, Any, Any, float]:
    """``(ONE_DEVICE, Plan, predicted SimResult, 0)``: the whole step on ``device`` (default:
    the cluster's first device whose kind has a finite cost for every node), in the
    simulator's FIFO order."""
    import numpy as np
    g, cl = inst.graph, inst.cluster
    if device is None:
        able = [d for d, k in zip(cl.names, cl.kinds)
                if k in g.kinds and bool(np.isfinite(g.compute[:, g.kind_index(k)]).all())]
        if not able:
            raise InputError(f"no device of the cluster ({', '.join(cl.names)}) can run every node of the graph "
                             f"(its cost columns: {', '.join(g.kinds)})")
        device = able[0]
    return _candidate(inst, ONE_DEVICE, {v: device for v in g.ids}, None, 0.0)


def executed_instance(spec: Any, inst: Any, one: tuple, args: argparse.Namespace) -> Any:
    """``inst`` with its executed costs: the one-device plan ``one`` run for ``--steps``
    steps, its operator times as the graph's costs and the cluster's per-operator
    overhead fitted to its step (:func:`~dnnplace.pytorch.execution.executed_costs.fit_model`;
    messages and links stay the cluster's)."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.pytorch.execution.calibration import read_run
    from dnnplace.pytorch.execution.executed_costs import fit_model
    from dnnplace.pytorch.execution.launch import execute
    from dnnplace.pytorch.execution.reference import captured_meta
    m = execute(spec, [one[1]], list(inst.cluster.names), steps=args.steps, warmup=args.warmup,
                timeout_s=args.timeout, captured=captured_meta(inst), live=False)[0]
    plan = {"placement": dict(one[1].placement), "start": dict(one[1].start)}
    run = read_run({**m.to_dict(), "plan": plan}, "the one-device run")
    graph, cluster, figures = fit_model(inst.graph, inst.cluster, [run])
    print(f"executed costs: the one-device plan measured {run.step_ms:.3f} ms over {args.steps} steps; its "
          f"operators sum to {float(graph.compute[:, 0].sum()):.3f} ms (profiled "
          f"{float(inst.graph.compute.min(axis=1).sum()):.3f} ms), {figures['op_overhead_ms']:.4f} ms per operator "
          "besides", file=sys.stderr, flush=True)
    return Instance(graph, cluster, inst.source)


def plan_key(ids: Sequence[str], plan: Any, kind: Mapping[str, str]) -> tuple:
    """Two plans are the same when they place every node alike and order each device alike,
    up to a renaming of devices of one kind (``kind``: device -> kind; on one host, two CPU
    processes or two GPUs of a model run a plan alike): devices are renamed by the first
    node each runs.

    >>> from types import SimpleNamespace as P
    >>> kind = {"cpu0": "cpu", "cpu1": "cpu"}
    >>> a = P(placement={"x": "cpu0", "y": "cpu1"}, start={"x": 0.0, "y": 0.0})
    >>> b = P(placement={"x": "cpu1", "y": "cpu0"}, start={"x": 0.0, "y": 0.0})
    >>> plan_key(["x", "y"], a, kind) == plan_key(["x", "y"], b, kind)
    True
    """
    start = plan.start or {}
    rank = {v: i for i, v in enumerate(ids)}
    seen: dict[str, str] = {}
    count: dict[str, int] = {}
    for v in ids:
        d = plan.placement[v]
        if d not in seen:
            k = kind.get(d, d)
            seen[d] = f"{k}#{count.get(k, 0)}"
            count[k] = count.get(k, 0) + 1
    name = [seen[plan.placement[v]] for v in ids]
    order = sorted(ids, key=lambda v: (seen[plan.placement[v]], float(start.get(v, 0.0)), rank[v]))
    return tuple(name), tuple(order)


def shortlist(ids: Sequence[str], found: Sequence[tuple], one: tuple, top: int,
              kind: Mapping[str, str] | None = None) -> list[tuple]:
    """The plans to measure: ``top`` distinct plans of ``found`` (a plan equal to an earlier
    one, or to the one-device plan ``one``, up to renaming devices of one kind (``kind``:
    device -> kind, :func:`plan_key`), named on stderr and dropped), then ``one``.

    The operator plans and the layer plans (named ``... (layers)``) take turns, each the
    best predicted of its kind left: the simulator's error is not the same for both kinds
    (an operator plan that sends a layer's weights each step was predicted 20-35 % short on
    the two towers, results/execution/tune/layer-plans.md), so the best of each is measured
    rather than ranked on the prediction alone.

    >>> from types import SimpleNamespace as P
    >>> c = lambda name, dev, ms: (name, P(placement={"x": dev}, start={"x": 0.0}), P(makespan=ms), 0.0)
    >>> found = [c("heft", "d1", 5.0), c("dpos", "d0", 4.0), c("heft (layers)", "d3", 6.0), c("etf", "d2", 4.5)]
    >>> [p[0] for p in shortlist(["x"], found, c("one device", "d0", 9.0), top=2)]   # dpos: one device's plan
    ['etf', 'heft (layers)', 'one device']
    >>> kind = {"d0": "cpu", "d1": "cpu", "d2": "cpu", "d3": "cpu"}   # any one-node plan is one device's
    >>> [p[0] for p in shortlist(["x"], found, c("one device", "d0", 9.0), top=2, kind=kind)]
    ['one device']
    """
    kind = kind or {}
    seen = {plan_key(ids, one[1], kind): one[0]}
    kinds: dict[bool, list[tuple]] = {False: [], True: []}
    for c in sorted(found, key=lambda c: float(c[2].makespan)):
        key = plan_key(ids, c[1], kind)
        if key in seen:
            print(f"{c[0]}: the same plan as {seen[key]}", file=sys.stderr)
            continue
        seen[key] = c[0]
        kinds[c[0].endswith(LAYER_SUFFIX)].append(c)
    out: list[tuple] = []
    turn = [kinds[False], kinds[True]]
    while len(out) < top and any(turn):
        for group in turn:
            if group and len(out) < top:
                out.append(group.pop(0))
    return out + [one]
