"""Makespan runs of a reproduction and what is read back from their records: the
:class:`~dnnplace.config.RunSpec` of a method on a :class:`~dnnplace.experiments.instance_files.Variant`
(:func:`run_spec`, every list scheduler: :func:`list_specs`), the re-scored makespan of a
record (:func:`makespan_of`), the best list scheduler (:func:`best_list`), what a method
reported beside its placement (:func:`extra_of`) and :func:`replay` of a recorded placement
in its recorded order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.config import RunSpec
from dnnplace.evaluation.link_orders import link_priorities_from_doc
from dnnplace.evaluation.simulate import SimResult, simulate
from dnnplace.experiments.instance_files import Variant
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import placement_from_doc

__all__ = ["LIST_SCHEDULERS", "MAX_ETF_NODES", "run_spec", "list_specs", "makespan_of", "best_list", "extra_of",
           "replay"]

LIST_SCHEDULERS = ("heft", "etf", "m-topo", "m-etf", "m-sct")
MAX_ETF_NODES = 3000  # ETF-like schedulers are skipped above this size (as best_list_schedule does)


def run_spec(v: Variant, method: str, params: dict | None = None, solver: dict | None = None) -> RunSpec:
    """The makespan run of ``method`` on the instance file of ``v``."""
    return RunSpec(graph=str(v.path), graph_label=v.label, problem="makespan", method=method,
                   solver=dict(solver or {}), params=dict(params or {}))


def list_specs(v: Variant) -> list[RunSpec]:
    """The runs of every list scheduler on ``v`` (ETF-like ones up to :data:`MAX_ETF_NODES` nodes)."""
    return [run_spec(v, m) for m in LIST_SCHEDULERS
            if not (m in ("etf", "m-etf", "m-sct") and v.n > MAX_ETF_NODES)]


def makespan_of(rec: dict | None) -> float | None:
    """The record's re-scored makespan (``evaluation.objective``), ``None`` for an error."""
    if not rec or rec.get("status") == "error":
        return None
    return (rec.get("evaluation") or {}).get("objective")


def best_list(v: Variant, done: dict[str, dict]) -> tuple[str | None, float | None]:
    """The best list scheduler on ``v`` by re-scored makespan: (method, makespan)."""
    best: tuple[str | None, float | None] = (None, None)
    for s in list_specs(v):
        ms = makespan_of(done.get(s.key))
        if ms is not None and (best[1] is None or ms < best[1] - 1e-12):
            best = (s.method, ms)
    return best


def replay(rec: dict, inst: Instance, *, congestion: bool = True) -> SimResult:
    """Simulate a record's placement in its recorded order: nodes ranked by their
    recorded start times (ties in topological order), replayed per device
    (``policy="order"``), and transfers in the record's link order where it has one
    (else FCFS links)."""
    g = inst.graph
    pl = placement_from_doc(rec["placement"], inst)
    start = np.array([float(rec["start"][str(v)]) for v in g.ids])
    pr = np.empty(g.n, dtype=np.int64)
    pr[np.lexsort((g.topo_position, start))] = np.arange(g.n)
    return simulate(pl, policy="order", priorities=pr, congestion=congestion,
                    link_priorities=link_priorities_from_doc(rec, g))


def extra_of(rec: dict | None, key: str) -> Any:
    """``extra[key]`` of a record (what the method reported beside its placement), or ``None``."""
    return ((rec or {}).get("extra") or {}).get(key)
