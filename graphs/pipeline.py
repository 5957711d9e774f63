r"""Contiguity modes, and the pipeline order of a split (Tarnawski et al. Sec. 5.1, 5.3).

Per-device convexity (Definition 3.1: no path leaves a device's set and comes back) is
what the paper's IPs enforce (Lemma 4.1). It does not make a split runnable as a
pipeline: with edges ``0->2`` and ``3->5`` and the sets ``{0, 5}`` and ``{2, 3, 4}`` both
sets are convex, yet each device waits for the other. The paper's DP (Sec. 5.1.1)
carves successive ideals, so its splits have more: the *quotient graph* of the devices
(an arc ``a -> b`` for every edge from a node on ``a`` to a node on ``b != a``) is
acyclic, i.e. the devices can be ordered as pipeline stages. Conversely, if the quotient
is acyclic, the union of the first ``t`` devices of a topological order is down-closed
for every ``t`` (an ideal), so each device's set is a difference of two ideals (Fact 5.2)
and the split is one the DP searches. Acyclicity implies convexity (a path leaving ``S``
and returning closes a cycle of the quotient through ``S``'s device).

Modes (``CONTIGUITY_MODES``):

- ``none``: no constraint (non-contiguous splits, Sec. 5.2);
- ``all`` / ``forward`` / ``both`` (pipeline-realisable, the default where the DP's
  semantics apply): every device convex in the whole graph / the forward part / the
  forward and the backward parts separately, **and** the quotient over the *pipeline
  edges* acyclic;
- ``convex-all`` / ``convex-forward`` / ``convex-both``: convexity only (the paper's
  IPs as printed; ``convex-forward`` is what the authors' reference IP enforces).

Pipeline edges (:func:`pipeline_edges`): ``all`` every edge; ``forward`` the edges of
the forward part; ``both`` the forward edges and, mirrored, every backward edge that
touches an *orphan* (a backward node whose colocation class has no forward node):
Appendix B gives an orphan a forward image whose edges mirror its backward edges, and
the DP orders stages by that forward graph. Other backward edges are only asked to keep
each device's backward set convex (Sec. 5.3: "contiguous subgraphs on the forward side
whose corresponding backward nodes also form contiguous subgraphs").

>>> import numpy as np
>>> from dnnplace.graphs.graph import OpGraph
>>> g = OpGraph(ids=range(6), kinds=("acc",), compute=np.ones((6, 1)), memory=np.zeros(6),
...             src=[0, 3], dst=[2, 5])
>>> device_cycle(g, np.array([0, 9, 1, 1, 1, 0]), "all")  # node 1 sits on device 9
[(0, 1, 0), (1, 0, 1)]
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["CONTIGUITY_MODES", "check_mode", "convex_part_mode", "is_acyclic_mode", "orphans", "pipeline_edges",
           "device_cycle", "device_order"]

CONTIGUITY_MODES = ("none", "all", "forward", "both", "convex-all", "convex-forward", "convex-both")


def check_mode(mode: str | None) -> str:
    """The mode itself (``None`` is ``none``); a one-line ``InputError`` for an unknown one."""
    mode = "none" if mode is None else mode
    if mode not in CONTIGUITY_MODES:
        raise InputError(f"unknown contiguity mode {mode!r}; use one of {CONTIGUITY_MODES}")
    return mode


def convex_part_mode(mode: str | None) -> str:
    """Which parts must be convex: ``none``, ``all``, ``forward`` or ``both``."""
    return check_mode(mode).removeprefix("convex-")


def is_acyclic_mode(mode: str | None) -> bool:
    """Does the mode ask for an acyclic device quotient (a pipeline order)?"""
    return check_mode(mode) in ("all", "forward", "both")


def orphans(g: OpGraph) -> np.ndarray:
    """Backward nodes whose colocation class holds no forward node (Appendix B)."""
    coloc = g.colocation
    fw_classes = np.unique(coloc[(coloc >= 0) & ~g.backward])
    partnered = (coloc >= 0) & np.isin(coloc, fw_classes)
    return g.backward & ~partnered


def pipeline_edges(g: OpGraph, mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, edge)``: the arcs whose device order must be acyclic in ``mode``
    (empty for convex-only modes), each with the index of the graph edge it comes from
    (mirrored orphan edges run from the edge's head to its tail)."""
    mode = check_mode(mode)
    none = np.empty(0, dtype=np.int64)
    if not is_acyclic_mode(mode):
        return none, none, none
    if mode == "all" or not g.is_training:
        e = np.arange(g.m, dtype=np.int64)
        return g.src.copy(), g.dst.copy(), e
    bw = g.backward
    fw = np.flatnonzero(~bw[g.src] & ~bw[g.dst])
    if mode == "forward":
        return g.src[fw], g.dst[fw], fw
    orph = orphans(g)
    mir = np.flatnonzero(bw[g.src] & bw[g.dst] & (orph[g.src] | orph[g.dst]))
    return (np.concatenate([g.src[fw], g.dst[mir]]), np.concatenate([g.dst[fw], g.src[mir]]),
            np.concatenate([fw, mir]))


def device_cycle(g: OpGraph, device: np.ndarray, mode: str,
                 checked: np.ndarray | None = None) -> list[tuple[int, int, int]] | None:
    """A cycle of the device quotient over the pipeline edges, or ``None`` when the
    devices can be ordered as a pipeline. The cycle is a list of ``(from device, to
    device, graph edge)`` arcs, each witnessed by one edge. ``checked``: device indices
    that take part (default all); arcs touching other devices are ignored."""
    src, dst, edge = pipeline_edges(g, mode)
    a, b = device[src], device[dst]
    keep = a != b
    if checked is not None:
        keep &= np.isin(a, checked) & np.isin(b, checked)
    a, b, edge = a[keep], b[keep], edge[keep]
    witness: dict[int, dict[int, int]] = {}
    for x, y, e in zip(a.tolist(), b.tolist(), edge.tolist()):
        witness.setdefault(x, {}).setdefault(y, e)
    # iterative DFS with colours over the (small) quotient graph
    colour: dict[int, int] = {}
    for root in sorted(witness):
        if colour.get(root):
            continue
        stack = [(root, iter(sorted(witness.get(root, {}))))]
        path = [root]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(nxt) == 1:
                cyc = path[path.index(nxt):] + [nxt]
                return [(x, y, witness[x][y]) for x, y in zip(cyc, cyc[1:])]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(witness.get(nxt, {})))))
    return None


def device_order(g: OpGraph, device: np.ndarray, mode: str, checked: list[int]) -> list[int]:
    """The ``checked`` devices in a pipeline order (a topological order of the quotient
    over the pipeline edges, ties by index); ``InputError`` naming the cycle if none."""
    cyc = device_cycle(g, device, mode, np.asarray(checked, dtype=np.int64))
    if cyc is not None:
        raise InputError("devices wait on each other in a cycle: " + " -> ".join(str(a) for a, _, _ in cyc))
    src, dst, _ = pipeline_edges(g, mode)
    a, b = device[src], device[dst]
    inside = np.isin(a, checked) & np.isin(b, checked) & (a != b)
    succ: dict[int, set[int]] = {d: set() for d in checked}
    indeg = dict.fromkeys(checked, 0)
    for x, y in set(zip(a[inside].tolist(), b[inside].tolist())):
        succ[x].add(y)
        indeg[y] += 1
    ready = sorted(d for d in checked if indeg[d] == 0)
    out = []
    while ready:
        d = ready.pop(0)
        out.append(d)
        for y in sorted(succ[d]):
            indeg[y] -= 1
            if indeg[y] == 0:
                ready.append(y)
        ready.sort()
    return out
