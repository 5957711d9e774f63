"""The result record of one method run (docs/semantics.md 4) and its JSON form.

"Why it stopped" (``termination``, a :class:`~dnnplace.runtime.termination.Termination`) is kept apart from "what we
have" (``status``), and the incumbent (``objective``) apart from the ``bound``:

=============  ==============================================================
status         meaning
=============  ==============================================================
optimal        proved optimal (to the requested gap, see ``gap``)
feasible       a solution, not proved optimal (heuristic, or a limit was hit)
infeasible     the model was proved infeasible, or the evaluator rejects the placement
memory_infeasible  the placement is valid except that a device's memory overflows under the
               result's ``memory_model`` (a best-effort heuristic that found no room; never
               shown as feasible)
no_solution    stopped (time limit, interrupt) before any solution was found
error          the backend failed; ``message`` says why
=============  ==============================================================

``bound`` is the method's own (a solver's proven bound, for the request's feasible set:
contiguity, coarsening as the method states); ``lower_bound`` is the best bound known for
the answer, the larger of ``bound`` and the instance's own lower bound
(:func:`dnnplace.registry.instance_lower_bound`: critical path and busiest device's work
share for a makespan, the work share for a max-load, the critical path for a latency), so
every method, heuristics included, has a certified gap ``|objective - lower_bound| /
|objective|`` (``gap`` stays the gap to the method's own ``bound``).

``cluster`` is the cluster the run was solved on: a preset name (``single-host-2-nvlink``)
or the cluster as JSON (``docs/formats.md``), so ``evaluate``, ``simulate`` and ``compare``
need no ``--cluster`` again. ``transform`` is set when the placement is for a graph the
method built from the input (FastT's data-parallel graph, OS-DPOS's split operators,
:func:`dnnplace.graphs.transforms.answer_graph_record`): the steps that rebuild it from
the input (or the graph itself), its fingerprint, and ``bound_note``, how its objective
compares with the input graph's bound (``lower_bound`` is then the input's work share
only, or ``None`` where not comparable).

``graph_fingerprint`` is the input graph the run was solved on
(:func:`dnnplace.graphs.io.graph_fingerprint`: name, node and edge counts, a digest of ids,
edges, costs and memory; the cluster is ``cluster``): ``evaluate``, ``simulate``,
``execute`` and warm starts refuse the result on another graph
(:func:`dnnplace.graphs.io.check_result_doc`); results without one are read as before.

``memory_model`` is the memory a method keeps within capacity and the evaluation judges:
``static`` (docs/semantics.md 1: the sum of ``memory`` per device) or ``dynamic`` (PARDNN's peak of live
tensors, Eq. 2). A makespan evaluation reports both verdicts in
``evaluation["memory_feasible"]``.

``answer_from`` says where the placement came from (:class:`dnnplace.methods.base.MethodOutput`):
the method's own name, ``warm start: ...``, ``never-worse: ...`` or ``fallback: ...``;
``None`` without a placement.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from dnnplace.graphs.io import jsonable
from dnnplace.runtime.termination import Termination

__all__ = ["STATUSES", "Result", "answer_from_of", "relative_gap"]

STATUSES = ("optimal", "feasible", "infeasible", "memory_infeasible", "no_solution", "error")


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / |objective|`` (the MIP-solver convention), ``None`` if
    either is missing; 0 when both are 0.

    >>> relative_gap(110.0, 100.0)
    0.09090909090909091
    """
    if objective is None or bound is None or math.isnan(objective) or math.isnan(bound):
        return None
    if objective == bound:
        return 0.0
    return abs(objective - bound) / max(abs(objective), 1e-12)


@dataclass
class Result:
    """One run of one method on one instance (docs/semantics.md 4)."""

    problem: str
    method: str
    instance: str
    status: str
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    termination: str | None = None
    message: str | None = None
    solver: str | None = None
    solver_version: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    wall_seconds: float = 0.0
    placement: dict[str, str] | None = None
    start: dict[str, float] | None = None
    priorities: dict[str, int] | None = None
    link_priorities: dict[str, int] | None = None
    evaluation: dict[str, Any] | None = None
    trace: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    unit: str = "ms"
    extra: dict[str, Any] = field(default_factory=dict)
    memory_model: str = "static"
    cluster: str | dict[str, Any] | None = None
    lower_bound: float | None = None
    transform: dict[str, Any] | None = None
    answer_from: str | None = None
    graph_fingerprint: dict[str, Any] | None = None

    @property
    def certified_gap(self) -> float | None:
        """``|objective - lower_bound| / |objective|`` (``None`` without both)."""
        return relative_gap(self.objective, self.lower_bound)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} not in {STATUSES}")
        if self.gap is None:
            self.gap = relative_gap(self.objective, self.bound)
        self.termination = Termination.of(self.termination)  # older records' words ("maxTimeLimit") map here

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (non-finite numbers become ``None``)."""
        return jsonable(asdict(self))

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Result:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in doc.items() if k in known})


def answer_from_of(rec: dict) -> str | None:
    """Where a run's answer came from (``Result.answer_from``: the method itself, ``warm
    start: ...``, ``never-worse: ...``, ``fallback: ...``); older records: the IP's
    ``extra.incumbent_from`` where set, else the method for a run with a placement.

    >>> answer_from_of({"method": "ip", "placement": {"a": "gpu0"}, "extra": {"incumbent_from": "dpl"}})
    'fallback: dpl'
    >>> answer_from_of({"method": "ip", "status": "error"}) is None
    True
    """
    if "answer_from" in rec:
        return rec["answer_from"]
    if not rec.get("placement"):
        return None
    extra = rec.get("extra") or {}
    kept = extra.get("incumbent_from")
    if kept:
        return f"warm start: {extra.get('warm_start')}" if kept == "warm start" else f"fallback: {kept}"
    return str(rec.get("method")) if rec.get("method") else None
