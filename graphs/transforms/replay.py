"""Graph transforms: solve another graph, then map the answer back, or say so.

Several methods do not solve the graph they are given: Pesto coarsens it (Sec. 3.3),
Celeritas fuses operators (Sec. 5.1), Tarnawski's Table 3 contracts operators into
layers, FastT splits operators into parts. Every one of them is a :class:`Transformed`:
the transformed graph and, for a *contraction* (every original node inside exactly one
transformed node), ``labels``, the transformed node of every original node. Then

- an answer maps back exactly: :meth:`Transformed.lift` puts every original node on its
  transformed node's device, so the evaluator scores the user's graph;
- a transform that *splits* nodes has no labels: a method that solves it must report
  the transformed graph it answers for (``MethodOutput.graph``), and
  :func:`dnnplace.registry.solve` scores that graph and labels the record with it;
  a placement of some other size is refused, never truncated.

:data:`TRANSFORMS` names the transforms an experiment can apply before solving
(``transform = "contract-layers"`` in a config); the result is then, explicitly, a
result for the transformed graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.layers import contract_layers

__all__ = ["Transformed", "TRANSFORMS", "apply_transform", "replay", "fingerprint", "answer_graph_record",
           "graph_of_record"]


@dataclass(frozen=True, eq=False)
class Transformed:
    """A transformed graph; ``labels[v]`` is the transformed node holding original node
    ``v`` (``None`` when the transform splits nodes); ``meta`` holds transform-specific
    facts (e.g. coarsening rounds, the layer grouping rule)."""

    graph: OpGraph
    labels: np.ndarray | None
    name: str
    meta: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What a result solved on this graph records (``extra["transform"]``)."""
        return {"name": self.name, "nodes": self.graph.n, **self.meta}

    @property
    def sizes(self) -> np.ndarray:
        """Number of original nodes per transformed node."""
        if self.labels is None:
            raise InputError(f"transform {self.name!r} splits nodes: no sizes")
        return np.bincount(self.labels, minlength=self.graph.n)

    def lift(self, placement: Placement, original: OpGraph) -> Placement:
        """Every original node on its transformed node's device.

        >>> from dnnplace.graphs import Cluster, OpGraph
        >>> g = OpGraph(ids=[0, 1, 2], kinds=("gpu",), compute=[[1.0]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2])
        >>> coarse = OpGraph(ids=[0, 1], kinds=("gpu",), compute=[[2.0], [1.0]], memory=[0, 0], src=[0], dst=[1])
        >>> t = Transformed(coarse, np.array([0, 0, 1]), "demo")
        >>> cl = Cluster.single_host(2, with_cpu=False)
        >>> t.lift(Placement(coarse, cl, np.array([1, 0])), g).device.tolist()
        [1, 1, 0]
        """
        if self.labels is None:
            raise InputError(f"transform {self.name!r} splits nodes: its answers cannot be mapped back; "
                             "report the transformed graph instead")
        if self.labels.size != original.n or placement.graph.n != self.graph.n:
            raise InputError(f"transform {self.name!r}: labels for {self.labels.size} nodes, placement of "
                             f"{placement.graph.n}, graphs of {original.n} and {self.graph.n} nodes")
        return Placement(original, placement.cluster, placement.device[self.labels])


def _contract(name: str, calls: bool) -> Callable[[Instance], Transformed]:
    def transform(inst: Instance) -> Transformed:
        coarse, rule = contract_layers(inst, calls=calls)
        return Transformed(coarse.graph, np.arange(inst.graph.n, dtype=np.int64), name,
                           {"rule": rule, "groups": int(np.unique(coarse.graph.colocation).size)})
    return transform


TRANSFORMS: dict[str, Callable[[Instance], Transformed]] = {
    # layers become colocation groups (same nodes); non-contiguous layers left alone (Tarnawski
    # Table 3's rule) or split into their calls
    "contract-layers": _contract("contract-layers", calls=False),
    "contract-calls": _contract("contract-calls", calls=True),
}


def apply_transform(name: str, inst: Instance) -> tuple[Instance, Transformed]:
    """The instance to solve after transform ``name``, and the transform's record."""
    if name not in TRANSFORMS:
        raise InputError(f"unknown graph transform {name!r}; known: {sorted(TRANSFORMS)}")
    t = TRANSFORMS[name](inst)
    return Instance(t.graph, inst.cluster, f"{inst.source or inst.name} | {name}"), t


# ---------------------------------------------------------------------------- answers on another graph
# A method that answers on a graph it built from the input (FastT's data-parallel graph,
# OS-DPOS's split operators) cannot map its placement back. Its result carries instead
# what rebuilds that graph from the input: the steps each transform recorded in
# ``graph.meta["transforms"]`` (:func:`dnnplace.graphs.transforms.data_parallel.data_parallel`,
# :func:`dnnplace.graphs.transforms.op_split.split_operation`) and a fingerprint to check the rebuild
# against; a graph whose steps do not replay is carried whole. ``evaluate``, ``simulate``
# and ``compare`` read a result through :func:`graph_of_record`.

def fingerprint(graph: OpGraph) -> dict[str, Any]:
    """Nodes, edges and a digest of ids, edges and costs: what a rebuilt graph must match
    (:func:`dnnplace.graphs.io.fingerprint.graph_fingerprint`, the one hash of a graph's content).

    >>> g = OpGraph(ids=[0, 1], kinds=("gpu",), compute=[[1.0], [2.0]], memory=[0, 0], src=[0], dst=[1])
    >>> fingerprint(g)["nodes"], len(fingerprint(g)["digest"])
    (2, 16)
    """
    from dnnplace.graphs.io.fingerprint import graph_fingerprint

    return graph_fingerprint(graph)


def replay(original: OpGraph, steps: Any) -> OpGraph:
    """``original`` with the recorded transform ``steps`` applied in order (data-parallel
    replication, operator splits); an :class:`InputError` names a step that cannot be
    replayed.

    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("b", "c")], kinds=["gpu"], compute=[[1.0], [4.0], [1.0]],
    ...                      memory=[0, 2, 0], edge_bytes=[8.0, 6.0], op_types=["Relu", "MatMul", "Relu"])
    >>> from dnnplace.graphs.transforms.op_split import split_operation
    >>> s = split_operation(g, 1, "batch", 2, kappa=0.1)
    >>> replay(g, s.meta["transforms"]).ids == s.ids
    True
    """
    from dnnplace.graphs.batch_model import BatchModel
    from dnnplace.graphs.transforms.data_parallel import data_parallel
    from dnnplace.graphs.transforms.op_split import split_operation

    if not isinstance(steps, (list, tuple)):
        raise InputError(f"transform steps: expected a list, got {type(steps).__name__}")
    g = original
    for k, step in enumerate(steps):
        kind = step.get("kind") if isinstance(step, dict) else None
        try:
            if kind == "data-parallel":
                if step.get("profiled"):
                    raise InputError("its batch model was profiled (tables are not in the record)")
                bm = BatchModel(step["batch"], t0=step.get("t0"), half_batch=float(step.get("half_batch", 0.0)))
                g = data_parallel(g, int(step["replicas"]), batch_model=bm, scaling=str(step["scaling"])).graph
            elif kind == "split":
                g = split_operation(g, g.index_of(step["op"]), str(step["dim"]), int(step["parts"]),
                                    kappa=float(step.get("kappa", 0.0)),
                                    aux_cost_per_byte=float(step.get("aux_cost_per_byte", 0.0)))
            else:
                raise InputError(f"unknown kind {kind!r} (known: 'data-parallel', 'split')")
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"transform step {k} ({kind}): missing or bad field {exc}") from None
        except InputError as exc:
            raise InputError(f"transform step {k} ({kind}): {exc}") from None
    return g


def _new_steps(scored: OpGraph, original: OpGraph) -> list | None:
    """The steps that lead from ``original`` to ``scored`` (``None``: not recorded)."""
    before = list(original.meta.get("transforms", ()))
    after = list(scored.meta.get("transforms", ()))
    if len(after) <= len(before) or after[: len(before)] != before:
        return None
    return after[len(before):]


def _bound_note(steps: list | None) -> tuple[bool, str]:
    """Whether the input graph's work bound still holds for answers on the transformed
    graph, and why its critical-path bound does not."""
    kinds = [s.get("kind") for s in steps or ()]
    if any(s.get("kind") == "data-parallel" and s.get("scaling") == "weak" for s in steps or ()):
        return False, ("weak scaling: every replica runs the whole batch, so a step processes replicas x the "
                       "input's batch; not comparable with one step of the input graph")
    what = " and ".join(dict.fromkeys({"data-parallel": "replicates the graph over the batch",
                                       "split": "splits operators into parts"}.get(k, str(k)) for k in kinds))
    return True, (f"the answer's graph {what or 'differs from the input'}: the input's critical-path bound does "
                  "not hold (split or replicated operators run shorter), its busiest-device work share does "
                  "(splitting never removes work)")


def answer_graph_record(scored: OpGraph, original: OpGraph) -> dict[str, Any]:
    """What a result says about the graph its placement is for, when that is not the
    input graph: ``steps`` (replayed from the input by :func:`graph_of_record`, checked
    against ``graph``, the :func:`fingerprint`) or, when the steps are not recorded or do
    not replay to the same graph, the whole graph (``graph_doc``, native JSON);
    ``work_bound_holds`` and ``bound_note`` say how its objective compares with the
    input's lower bounds."""
    from dnnplace.graphs.io.native import instance_to_native

    fp = fingerprint(scored)
    steps = _new_steps(scored, original)
    holds, note = _bound_note(steps)
    rec: dict[str, Any] = {"graph": fp, "work_bound_holds": holds, "bound_note": note}
    if steps is not None:
        try:
            if fingerprint(replay(original, steps)) == fp:
                rec["steps"] = steps
                return rec
        except InputError:
            pass
    doc = instance_to_native(Instance(scored, None, None))
    rec["graph_doc"] = doc
    rec["work_bound_holds"] = False
    rec["bound_note"] = "the answer's graph was not built by a recorded transform: not comparable with the input's"
    return rec


def graph_of_record(record: dict[str, Any], original: OpGraph, source: str = "result") -> OpGraph:
    """The graph a result's placement is for (its ``transform`` record, see
    :func:`answer_graph_record`), rebuilt from ``original`` and checked."""
    from dnnplace.graphs.io.native import instance_from_native

    if not isinstance(record, dict):
        raise InputError(f"{source}: 'transform' must be an object")
    want = record.get("graph") if isinstance(record.get("graph"), dict) else {}
    if "steps" in record:
        g = replay(original, record["steps"])
    elif isinstance(record.get("graph_doc"), dict):
        g = instance_from_native(record["graph_doc"], source=f"{source} (transform.graph_doc)").graph
    else:
        raise InputError(f"{source}: 'transform' has neither 'steps' nor 'graph_doc'")
    got = fingerprint(g)
    if want and {k: got[k] for k in ("nodes", "edges", "digest")} != {k: want.get(k) for k in
                                                                       ("nodes", "edges", "digest")}:
        raise InputError(f"{source}: its transformed graph rebuilt from {original.name!r} differs from the one it "
                         f"was solved on ({got['nodes']} nodes, {got['edges']} edges vs {want.get('nodes')}, "
                         f"{want.get('edges')}): is this the graph the result was solved on?")
    return g
