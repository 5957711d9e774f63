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
from dnnplace.graphs.layers import contract_layers
from dnnplace.graphs.placement import Placement

__all__ = ["Transformed", "TRANSFORMS", "apply_transform"]


@dataclass(frozen=True, eq=False)
class Transformed:
    """A transformed graph; ``labels[v]`` is the transformed node holding original node
    ``v`` (``None`` when the transform splits nodes); ``meta`` holds transform-specific
    facts (e.g. coarsening rounds, the layer grouping rule)."""

    graph: OpGraph
    labels: np.ndarray | None
    name: str
    meta: dict[str, Any] = field(default_factory=dict)

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


def _contract_layers(inst: Instance) -> Transformed:
    coarse, rule = contract_layers(inst)
    return Transformed(coarse.graph, np.arange(inst.graph.n, dtype=np.int64), "contract-layers",
                       {"rule": rule, "groups": int(np.unique(coarse.graph.colocation).size)})


TRANSFORMS: dict[str, Callable[[Instance], Transformed]] = {
    "contract-layers": _contract_layers,  # layers become colocation groups (same nodes)
}


def apply_transform(name: str, inst: Instance) -> tuple[Instance, Transformed]:
    """The instance to solve after transform ``name``, and the transform's record."""
    if name not in TRANSFORMS:
        raise InputError(f"unknown graph transform {name!r}; known: {sorted(TRANSFORMS)}")
    t = TRANSFORMS[name](inst)
    return Instance(t.graph, inst.cluster, f"{inst.source or inst.name} | {name}"), t
