r"""Contiguity helpers of the Tarnawski et al. IPs (Definition 3.1 via Lemma 4.1).

A set ``S`` of a part ``P`` is contiguous iff there is ``z`` with (per device or slot)::

    z[v] >= x[v]                     v in P          (11)
    z[v] <= z[u]                     (u,v) in E(P)   (12)
    z[v] <= x[v] - x[u] + 1          (u,v) in E(P)   (13)

The witness is ``z[v] = 1`` iff ``v`` reaches a node of ``S`` inside ``P``
(:func:`reach_down`), which is how the warm starts complete ``z``.
:func:`contiguity_parts` lists the parts that must each be contiguous.

>>> import numpy as np
>>> from dnnplace.graphs.graph import OpGraph
>>> g = OpGraph.from_ids([0, 1, 2, 3], [(0, 1), (1, 2), (2, 3)], kinds=("acc",),
...                      compute=np.ones((4, 1)), memory=np.zeros(4))
>>> reach_down(g, np.ones(4, dtype=bool), np.array([False, False, True, False])).tolist()
[True, True, True, False]
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.graph import OpGraph

__all__ = ["contiguity_parts", "reach_down"]


def contiguity_parts(g: OpGraph, mode: str) -> list[np.ndarray]:
    """Node masks of the parts that must each be contiguous (as the evaluator's
    ``noncontiguous``): ``all`` the whole graph; ``forward`` / ``both`` the forward
    part (and the backward part) of a training graph, the whole graph otherwise."""
    if mode in (None, "none"):
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
