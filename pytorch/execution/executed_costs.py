"""Costs timed as the executor runs them, and the cost model fitted to one model's runs
(docs/execution.md, Executed costs).

The profiled costs (``measured:cpu``) time each operator alone; in the executor the same
operator runs in the worker's conditions (its thread, its allocator, tensors as the step
leaves them), and the ratio of executed to profiled time differs by model
(results/execution/calibration/README.md). A run that places every node
on one device times every operator there: its per-node medians (``op_median_ms``) are the
graph's **executed costs** ``c_v``. From the runs of one model :func:`fit_model` then sets

* ``c_v`` -- the one-device run's median time of ``v`` (every device kind's column);
* ``op_overhead_d = (T_1 - sum_v c_v) / n``, with ``T_1`` that run's measured step: the
  executor's per-operator cost outside operators, so the one-device plan is simulated at
  its measured step;
* per-message costs and links by :func:`~dnnplace.pytorch.execution.calibration.fit` over
  the model's runs (docs/semantics.md 2.1, per-message costs);
* a top-up ``x >= 0`` on every device's ``send_overhead``: the least ``x`` at which the
  model's runs on more than one device are simulated, in sum, no shorter than they were
  measured (bisection; ``x = 0`` when they already are). Two workers that compute and talk
  at once on shared cores slow each other's operators (docs/execution.md, Executed
  costs), and gloo's threads that do it run per
  message: the top-up charges that loss per message, so the exact methods, which model
  per-message costs exactly, weigh it too.

The fitted cluster is in replay form (``speed = 1``): the costs are already the executor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.execution.calibration import RunTrace, calibrated_cluster, fit, simulate_run

__all__ = ["one_device_run", "executed_graph", "fit_model"]

TOP_UP_MS = 50.0
"""The largest per-message top-up the bisection tries (ms)."""


def one_device_run(graph: Any, runs: Sequence[RunTrace]) -> RunTrace:
    """The first of ``runs`` that places every node of ``graph`` on one device and timed
    each, or an :class:`InputError` saying that none does."""
    ids = [str(v) for v in graph.ids]
    for run in runs:
        if _spans_devices(run, ids) == 1 and all(v in run.op_ms for v in ids):
            return run
    raise InputError("executed costs need a run of the graph's one-device plan (dnnplace execute with every "
                     "node on one device, --out RUN.json): none of the runs places every node on one device")


def executed_graph(graph: Any, run: RunTrace) -> Any:
    """``graph`` with its compute times (every kind's column) set to ``run``'s measured
    median operator times."""
    ids = [str(v) for v in graph.ids]
    missing = next((v for v in ids if v not in run.op_ms), None)
    if missing is not None:
        raise InputError(f"{run.source}: no measured time for node {missing!r} of the graph (another model's run?)")
    cost = np.array([run.op_ms[v] for v in ids], dtype=np.float64)
    return graph.with_(compute=np.repeat(cost[:, None], len(graph.kinds), axis=1), unit="ms")


def _spans_devices(run: RunTrace, ids: Sequence[str]) -> int:
    """How many devices ``run`` places the nodes ``ids`` on."""
    return len({run.placement.get(v) for v in ids})


def _with_costs(cluster: Cluster, op_overhead: float, top_up: float, *, name: str | None = None,
                meta: dict | None = None) -> Cluster:
    devices = tuple(replace(d, op_overhead=op_overhead, send_overhead=d.send_overhead + top_up)
                    for d in cluster.devices)
    return Cluster(devices, cluster.beta0, cluster.beta1, cluster.cost_factor, name=name or cluster.name,
                   meta=cluster.meta if meta is None else meta, ports=cluster.ports)


def fit_model(graph: Any, base: Cluster, runs: Sequence[RunTrace], *,
              congestion: bool | None = None) -> tuple[Any, Cluster, dict]:
    """``(graph with executed costs, calibrated cluster, figures)`` from ``runs`` of one
    model (see the module docstring). ``congestion``: the link model of the top-up's
    simulations and the cluster's default (``None``: ``base``'s)."""
    one = one_device_run(graph, runs)
    g = executed_graph(graph, one)
    gap = max((one.step_ms - float(g.compute[:, 0].sum())) / max(g.n, 1), 0.0)
    queue = base.default_congestion if congestion is None else congestion
    fitted = calibrated_cluster(base, fit(runs), replay=True, congestion=queue)
    ids = [str(v) for v in graph.ids]
    spread = [r for r in runs if _spans_devices(r, ids) > 1]

    def shortfall(x: float) -> float:
        c = _with_costs(fitted, gap, x)
        return sum(r.step_ms - float(simulate_run(g, c, r, congestion=queue).makespan) for r in spread)

    top_up = 0.0
    if spread and shortfall(0.0) > 0:
        lo, top_up = 0.0, TOP_UP_MS
        for _ in range(40):
            mid = (lo + top_up) / 2
            lo, top_up = (mid, top_up) if shortfall(mid) > 0 else (lo, mid)
    figures = {"op_overhead_ms": gap, "send_top_up_ms": top_up, "one_device_run": one.source,
               "one_device_ms": one.step_ms, "spread_runs": len(spread)}
    return g, _with_costs(fitted, gap, top_up, name=f"{base.name}-executed",
                          meta={**fitted.meta, "executed_costs": figures}), figures
