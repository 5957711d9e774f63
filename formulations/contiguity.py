r"""Contiguity helpers of the Tarnawski et al. IPs (Definition 3.1 via Lemma 4.1) and the
pipeline order of the acyclic modes (:mod:`dnnplace.graphs.pipeline`).

A set ``S`` of a part ``P`` is contiguous iff there is ``z`` with (per device or slot)::

    z[v] >= x[v]                     v in P          (11)
    z[v] <= z[u]                     (u,v) in E(P)   (12)
    z[v] <= x[v] - x[u] + 1          (u,v) in E(P)   (13)

The witness is ``z[v] = 1`` iff ``v`` reaches a node of ``S`` inside ``P``
(:func:`reach_down`), which is how the warm starts complete ``z``.
:func:`contiguity_parts` lists the parts that must each be contiguous.

Pipeline order (:func:`add_unit_order`): one binary ``order[a,b]`` per pair of units
``a < b`` (1 iff ``a`` comes before ``b``; ``before(b,a) = 1 - order[a,b]``) and the
linear-ordering rows of every triple ``a < b < c``::

    0 <= order[a,b] + order[b,c] - order[a,c] <= 1                 order_transitive

Integer solutions are exactly the strict linear orders of the units: the pair
variables make a tournament, and the two rows exclude its two possible directed
triangles on ``{a, b, c}``; a tournament without directed triangles is transitive.
Each IP then links the order to its assignment: an arc of the quotient from ``a`` to
``b`` forces ``before(a,b) = 1``, so the quotient is contained in a linear order, i.e.
acyclic; and every acyclic quotient extends to a linear order (a topological order),
which satisfies all rows. Hence the rows cut off exactly the splits whose units wait on
each other in a cycle.

>>> import numpy as np
>>> from dnnplace.graphs.graph import OpGraph
>>> g = OpGraph.from_ids([0, 1, 2, 3], [(0, 1), (1, 2), (2, 3)], kinds=("acc",),
...                      compute=np.ones((4, 1)), memory=np.zeros(4))
>>> reach_down(g, np.ones(4, dtype=bool), np.array([False, False, True, False])).tolist()
[True, True, True, False]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyomo.environ as pyo

from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.pipeline import convex_part_mode

__all__ = ["contiguity_parts", "reach_down", "add_unit_order", "before", "order_values"]


def contiguity_parts(g: OpGraph, mode: str) -> list[np.ndarray]:
    """Node masks of the parts that must each be contiguous (as the evaluator's
    ``noncontiguous``): ``all`` the whole graph; ``forward`` / ``both`` the forward
    part (and the backward part) of a training graph, the whole graph otherwise; a
    ``convex-`` mode names the same parts."""
    mode = convex_part_mode(mode)
    if mode == "none":
        return []
    if mode == "all" or not g.is_training:
        return [np.ones(g.n, dtype=bool)]
    parts = [~g.backward]
    if mode == "both":
        parts.append(g.backward.copy())
    return parts


def reach_down(g: OpGraph, mask: np.ndarray, member: np.ndarray) -> np.ndarray:
    """For nodes in ``mask``: does ``v`` reach a ``member`` node (itself included) along
    edges inside ``mask``? The Lemma 4.1 witness ``z``."""
    z = member & mask
    inside = mask[g.src] & mask[g.dst]
    src, dst = g.src[inside], g.dst[inside]
    lvl = g.level[src]
    order = np.argsort(-lvl, kind="stable")  # deepest sources first
    src, dst, lvl = src[order], dst[order], lvl[order]
    cuts = np.flatnonzero(np.diff(lvl)) + 1
    z = z.copy()
    for s, t in zip(np.split(src, cuts), np.split(dst, cuts)):
        np.logical_or.at(z, s, z[t])
    return z


def add_unit_order(m: pyo.ConcreteModel, units: list[int], fixed: list[tuple[int, int]] = ()) -> None:
    """Add ``order[a,b]`` (``a < b`` in ``units``) and ``order_transitive`` (module
    docstring); ``fixed`` pairs ``(a, b)``, ``a < b``, must come in that order. The
    linking rows are the caller's; :func:`before` reads the order of any pair."""
    units = sorted(units)
    pairs = [(a, b) for i, a in enumerate(units) for b in units[i + 1:]]
    triples = [(a, b, c) for i, a in enumerate(units) for j, b in enumerate(units[i + 1:], i + 1)
               for c in units[j + 1:]]
    m.order_pairs = pyo.Set(dimen=2, initialize=pairs, doc="unit pairs (a, b), a < b")
    m.order = pyo.Var(m.order_pairs, within=pyo.Binary, doc="order[a,b] = 1 iff unit a precedes unit b")
    for a, b in fixed:
        m.order[a, b].fix(1)

    @m.Constraint(triples, doc="linear ordering: no directed triangle a->b->c->a")
    def order_transitive_up(m, a, b, c):
        return m.order[a, b] + m.order[b, c] - m.order[a, c] <= 1

    @m.Constraint(triples, doc="linear ordering: no directed triangle a->c->b->a")
    def order_transitive_down(m, a, b, c):
        return m.order[a, b] + m.order[b, c] - m.order[a, c] >= 0


def before(m: pyo.ConcreteModel, a: int, b: int):
    """``1`` iff unit ``a`` precedes unit ``b`` (an expression in ``order``)."""
    return m.order[a, b] if a < b else 1 - m.order[b, a]


def order_values(m: pyo.ConcreteModel, rank: dict[int, int]) -> list[tuple[Any, float]]:
    """``(variable, value)`` pairs of ``order`` for a linear order given as ``rank[unit]``."""
    return [(m.order[a, b], float(rank[a] < rank[b])) for a, b in m.order_pairs]
