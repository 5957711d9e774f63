r"""The spine bound: a lower bound on the single-sample latency (docs/semantics.md 2.3) of
every split with at most ``q`` contiguous pieces per accelerator (Tarnawski et al.'s
latency IP, Figs. 3-4) that sees *all* parallel branches of a fork-join graph, where the
closure segmentation bound (:mod:`dnnplace.formulations.latency_bound`) follows one path.

**Cut nodes.** A node :math:`a` is a cut node when every other node is its ancestor or its
descendant and no edge jumps over it (none from a strict ancestor to a strict descendant).
They are totally ordered, :math:`a_0 < \dots < a_K`; the *block* :math:`B_m` holds the
nodes strictly between :math:`a_{m-1}` and :math:`a_m` (:math:`B_0` before :math:`a_0`,
:math:`B_{K+1}` after :math:`a_K`). An edge into :math:`B_m` comes from :math:`B_m` or
:math:`a_{m-1}`, one out of it goes to :math:`B_m` or :math:`a_m`.

**Spine units.** Let :math:`U_m` be the unit (accelerator piece, or CPU node) holding
:math:`a_m`. Every other unit lies inside one block: a piece with nodes in two blocks, or
on both sides of :math:`a_m`, has :math:`a_m` on a path between two of its nodes, so holds
it (convexity, Definition 3.1). A unit inside :math:`B_{m}` is reached from
:math:`U_{m-1}` and reaches :math:`U_m` in the unit graph. So the latency (the longest
path of the acyclic unit graph, durations (7)) is at least

.. math::

    \sum_{\text{distinct } U_m} \mathrm{dur}(U_m) \;+\;
    \sum_{m:\ U_{m-1} \ne U_m} \mathrm{chain}(M_m),

where :math:`M_m` are the nodes of :math:`B_m` in neither :math:`U_{m-1}` nor :math:`U_m`
and :math:`\mathrm{chain}(M)` the longest chain of the units that hold them.

**Pieces.** A spine piece :math:`S = U_s = \dots = U_l` holds :math:`a_s..a_l`, the blocks
between them, an up-closed part :math:`Q` of :math:`B_s` (a descendant in :math:`B_s` of
a member lies between it and :math:`a_s`) and a down-closed part :math:`P` of
:math:`B_{l+1}`. Its in-sources lie in :math:`(B_s \setminus Q) \cup \{a_{s-1}\}`, its
out-sources in :math:`P \cup \{a_l\}`, so with :math:`c^{in}_u`, :math:`c^{out}_x` the
least host transfers of a node's output (as in the closure bound)

.. math::

    \mathrm{dur}(S) \ge \underbrace{p(Q) + \sum_{u \notin Q,\ u \to Q \cup \{a_s\}} c^{in}_u}_{E(Q)}
    + p(a_s..a_l \text{ and the blocks between})
    + \underbrace{p(P) + \sum_{x \in P \cup \{a_l\},\ x \to \text{outside } S} c^{out}_x}_{X(P)},

:math:`p` the least accelerator compute. A CPU spine unit lasts :math:`p_{cpu}(a_m)` and
takes no part of a block. **Middle.** :math:`\mathrm{chain}(M)` is at least, for every
path :math:`\pi` of a block, the path segmentation of :math:`\pi \cap M` (a contiguous
stretch of :math:`\pi`: :math:`P` meets it in a prefix, :math:`Q` in a suffix): each node
on the CPU (:math:`p_{cpu}`) or in a piece meeting :math:`\pi` in a stretch
:math:`v_i..v_j`, which pays at least :math:`c^{in}_{v_{i-1}} + p(v_i..v_j) +
c^{out}_{v_j}` (its path neighbours are outside it). Different weakly connected
components of a block share no node, so the chain is the max over components.

**The DP.** Over the cut nodes, in order, with states (spine pieces used, memory of the
open piece): at each block either the open piece takes the block and the next cut node,
or the block is split into :math:`(P, Q, M)` (every down-closed :math:`P` and up-closed
:math:`Q` of each component, combined over the components with the transfers of
:math:`a_{m-1}` paid once), closing one unit and opening the next (a piece or a CPU node).
**Middle pieces** (inside a block) have no memory limit and are counted: a component that
meets ``k`` of them has its chain with at most ``k`` (``KCAP`` or more count as ``KCAP``,
with any number). Where no piece holds nodes of two components they number at least the
sum of the components' ``k``; where one does (for some pair ``a, b`` of components, each
with a piece), at least the largest ``k``, and then both paths pass through that piece:
the chain is at least :math:`\mathrm{chain}_a + \mathrm{part}_b` and
:math:`\mathrm{chain}_b + \mathrm{part}_a`, :math:`\mathrm{part}` the least duration of a
piece on a stretch of that component's middle without the transfer of :math:`a_{m-1}`
(counted in the other's chain; the two parts' other terms are distinct). Each block takes
the least of the two cases over all pairs.
Relaxations (each keeps a lower bound): colocation is ignored; spine and middle pieces
together are at most ``q`` times the number of accelerators; a spine piece fits in the
largest accelerator memory :math:`M` with memory counted in units of :math:`M/R` rounded
down (a sum of roundings down never exceeds the rounded sum). A component with more than
``MAX_DOWNSETS`` down-closed sets (or 62 nodes), or a block whose choices multiply past
``MAX_PRODUCT`` rows (these constants and the blocks' choices:
:mod:`~dnnplace.formulations.latency_spine_blocks`), is relaxed to "its block costs nothing to cross and needs no
memory" (0 is below every crossing cost), so the bound stays valid, and its time bounded,
on any graph.

>>> import numpy as np
>>> from dnnplace.graphs.cluster import Cluster
>>> from dnnplace.graphs.graph import OpGraph
>>> from dnnplace.formulations.latency_closure_data import closure_data
>>> # a -> {b, c} -> d: one accelerator holds two nodes; cutting the fork costs both branches
>>> g = OpGraph(ids=list("abcd"), kinds=["acc", "cpu"], compute=[[1.0, 9.0]] * 4, memory=[2] * 4,
...             src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_cost=[3.0] * 4)
>>> spine_bound(closure_data(g, Cluster.tarnawski(2, 1, 4), 1))
16.0
"""

from __future__ import annotations

import numpy as np

from dnnplace.formulations.latency_closure_data import ClosureData
from dnnplace.formulations.latency_spine_blocks import _INF, _block, _relaxed
from dnnplace.graphs.reach import narrow_cut_mask

__all__ = ["spine_bound", "spine_dp", "cut_nodes"]

#: memory grid: a spine piece holds at most ``GRID`` units of ``M / GRID`` (rounded down)
GRID = 100


def cut_nodes(d: ClosureData) -> np.ndarray:
    """The cut nodes of the module docstring, in topological order."""
    g = d.g
    cut = np.flatnonzero(narrow_cut_mask(d.down & ~np.eye(g.n, dtype=bool), np.stack([g.src, g.dst], axis=1)))
    return cut[np.argsort(d.up.sum(axis=1)[cut], kind="stable")].astype(np.int64)


def spine_bound(d: ClosureData, grid: int = GRID) -> float:
    """The spine bound of the module docstring (``0.0`` where the graph has no nodes)."""
    value, _ = spine_dp(d, grid)
    return value if np.isfinite(value) else 0.0


def spine_dp(d: ClosureData, grid: int = GRID, split: bool = False) -> tuple[float, list]:
    """The DP of the module docstring: its value and the steps (one per block and the cut
    node after it: the DP tables before the step and the block's crossing tables). With
    ``split`` it is the DP of :func:`~dnnplace.formulations.latency_spine_split.spine_split`
    instead: memory rounded up, the middle on the CPU, no relaxed blocks (``inf`` if one is
    too large), whose value is the latency of a split (not a bound)."""
    g = d.g
    if g.n == 0 or d.cap <= 0:
        return 0.0, []
    R, unit = int(grid), d.cap * (1 + 1e-9) / int(grid)
    rnd = np.ceil if split else np.floor
    C = int(d.stretches)
    F = np.full((C + 1, R + 1), _INF)        # U_m a piece: spine pieces used, memory units of U_m
    G = np.full(C + 1, _INF)                 # U_m a CPU node
    G[0] = 0.0                               # a virtual CPU node of no time before everything
    ends = [-1] + cut_nodes(d).tolist() + [-1]
    steps = []
    for m in range(len(ends) - 1):
        prev, nxt = ends[m], ends[m + 1]
        inside = np.ones(g.n, dtype=bool)
        for a, rel in ((prev, d.down), (nxt, d.up)):
            if a >= 0:
                inside &= rel[a]
                inside[a] = False
        nodes = np.flatnonzero(inside)
        nodes = nodes[np.argsort(d.up[nodes].sum(axis=1), kind="stable")]
        b = _block(d, nodes, prev, nxt, unit, R, split)
        if b is None:
            if split:
                return _INF, []
            b = _relaxed(R, C)
        last = nxt < 0
        st = {"F": F, "G": G, "b": b, "nodes": nodes, "prev": prev, "nxt": nxt,
              "p_acc": 0.0 if last else float(d.p_acc[nxt]), "p_cpu": 0.0 if last else float(d.p_cpu[nxt]),
              "ma": 0 if last else int(rnd(d.mem[nxt] / unit))}
        steps.append(st)
        F, G = _step(st, C, R, last)
        st["after"] = (F, G)
    return float(G.min()), steps


def _step(st: dict, C: int, R: int, last: bool) -> tuple[np.ndarray, np.ndarray]:
    """One block and the cut node after it: the DP tables after the step (``k`` middle
    pieces of a crossing count towards the pieces used)."""
    F, G, b, p_acc, p_cpu, ma = st["F"], st["G"], st["b"], st["p_acc"], st["p_cpu"], st["ma"]
    F2, G2 = np.full_like(F, _INF), np.full_like(G, _INF)
    h = np.minimum.accumulate(F, axis=1)[:, ::-1]          # h[c, mp]: least F[c, mu] with mu <= R - mp
    st["h"] = h
    live = [k for k in range(C + 1) if np.isfinite(b["pp"][k]).any() or np.isfinite(b["pc"][k]).any()
            or np.isfinite(b["cp"][k]).any() or np.isfinite(b["cc"][k]).any()]
    piece_next = not last and np.isfinite(p_acc) and ma <= R
    if piece_next and b["m"] + ma <= R:                     # the open piece takes the block and a_m
        sh = b["m"] + ma
        F2[:, sh:] = np.minimum(F2[:, sh:], F[:, :R + 1 - sh] + b["p"] + p_acc)
    for c in range(C + 1):
        for k in live:
            if piece_next and c + k + 1 <= C:
                if np.isfinite(h[c]).any():
                    v = (h[c][:, None] + b["pp"][k]).min(axis=0)
                    F2[c + k + 1, ma:] = np.minimum(F2[c + k + 1, ma:], v[:R + 1 - ma] + p_acc)
                if np.isfinite(G[c]):
                    F2[c + k + 1, ma:] = np.minimum(F2[c + k + 1, ma:], G[c] + b["cp"][k, 0, :R + 1 - ma] + p_acc)
            if np.isfinite(p_cpu) and c + k <= C:
                G2[c + k] = min(G2[c + k], (h[c] + b["pc"][k, :, 0]).min() + p_cpu, G[c] + b["cc"][k, 0, 0] + p_cpu)
    return F2, G2
