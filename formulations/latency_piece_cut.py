r"""The least duration of an accelerator piece that must hold a node set, by a minimum cut:
the refinement of the stretch costs of :mod:`dnnplace.formulations.latency_bound`.

Given a set :math:`X` that the piece :math:`S` must hold (a stretch's closure) and a set
:math:`O` it must avoid (forbidden, unrunnable or too large to join), the duration (7) of
:math:`S` is

.. math::

    \sum_{v \in S} p_{acc}(v) + \sum_{u \notin S,\ \mathrm{succ}(u) \cap S \ne \emptyset} c^{in}_u
    + \sum_{x \in S,\ \mathrm{succ}(x) \not\subseteq S} c^{out}_x ,

with :math:`c^{in}_u`, :math:`c^{out}_x` the least host transfers of the node's output
(lower bounds on the evaluator's charge). Dropping the memory limit and keeping only
implied parts of convexity, its least value over :math:`X \subseteq S \subseteq V
\setminus O` is a minimum :math:`s`-:math:`t` cut (source side = :math:`S`):

- :math:`v \to t` of capacity :math:`p_{acc}(v)` (:math:`\infty` for :math:`v \in O`),
  :math:`s \to x` of capacity :math:`\infty` for :math:`x \in X`;
- CommIn of a source :math:`u`: an auxiliary :math:`a_u` with :math:`w \to a_u`
  (:math:`\infty`) for each successor :math:`w` and :math:`a_u \to u` of capacity
  :math:`c^{in}_u`: a successor in :math:`S` with :math:`u` outside cuts it once;
- CommOut of :math:`x`: an auxiliary :math:`b_x` with :math:`x \to b_x` of capacity
  :math:`c^{out}_x` and :math:`b_x \to y` (:math:`\infty`) for each successor :math:`y`;
- colocation (``q = 1``): :math:`\infty` both ways inside a group (one device, one piece);
- convexity implied by :math:`X`: a descendant :math:`y` of :math:`X` in :math:`S` takes
  its predecessors that are descendants of :math:`X` (they lie between :math:`X` and
  :math:`y`), :math:`y \to w` (:math:`\infty`); symmetrically for ancestors.

Memory (Lagrangian): for a price :math:`\lambda \ge 0` every node in :math:`S` also costs
:math:`\lambda m_v` and the value is lowered by :math:`\lambda M`; a piece that fits
(:math:`m(S) \le M`) then costs at most its duration, so the minimum cut is still a
lower bound, for every :math:`\lambda`; :func:`dnnplace.formulations.latency_bound`
searches the price that makes the cut's piece fit.

Every feasible piece is a cut of at most its duration, so the minimum cut is a lower
bound (also on a network restricted to the nodes near :math:`X`: dropping arcs never
raises a minimum cut) (``inf`` when :math:`X` reaches :math:`O` along :math:`\infty` arcs: no piece
exists). Capacities are scaled to integers (SciPy's max flow takes ``int32``) and rounded
down, so the value stays a lower bound.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

__all__ = ["piece_cut"]

_BIG = 2 ** 30


def piece_cut(d, inside: np.ndarray, outside: np.ndarray, hops: int = 8, side: bool = False, price: float = 0.0):
    """Least duration of a piece ``S`` with ``inside`` in ``S`` and ``outside`` not (module
    docstring); ``d`` is the bound's instance data (:mod:`dnnplace.formulations.latency_bound`).
    The network keeps the nodes within ``hops`` edges of ``inside`` (dropping arcs only
    lowers a minimum cut, so the value stays a bound). ``side=True``: also the nodes on the
    source side of a minimum cut (a piece that attains the value when it is contiguous,
    fits and pays no transfer the network dropped; ``None`` when there is none).
    ``price``: the Lagrange multiplier of the memory limit (module docstring)."""
    g = d.g
    if (inside & outside).any():
        return (float("inf"), None) if side else float("inf")
    sub = inside.copy()
    for _ in range(hops):
        grow = sub.copy()
        grow[g.dst[sub[g.src]]] = True
        grow[g.src[sub[g.dst]]] = True
        sub = grow
    nodes = np.flatnonzero(sub)
    k = nodes.size
    loc = np.full(g.n, -1)
    loc[nodes] = np.arange(k)
    e = sub[g.src] & sub[g.dst]
    src, dst = loc[g.src[e]], loc[g.dst[e]]
    ins, out = inside[nodes], outside[nodes]
    s, t = 3 * k, 3 * k + 1
    desc = d.down[inside][:, nodes].any(axis=0) & ~ins
    anc = d.up[inside][:, nodes].any(axis=0) & ~ins
    idx = np.arange(k)
    inf_arcs = [(np.full(int(ins.sum()), s), idx[ins]), (idx[out], np.full(int(out.sum()), t)),
                (dst, k + src),                       # w -> a_u
                (2 * k + src, dst),                   # b_x -> y
                (dst[desc[src] & desc[dst]], src[desc[src] & desc[dst]]),
                (src[anc[src] & anc[dst]], dst[anc[src] & anc[dst]])]
    if d.q == 1:
        gid = d.gid[nodes]
        rep = np.full(d.n_groups, -1)
        rep[gid[::-1]] = idx[::-1]                    # the first member of each group in the network
        v = idx[rep[gid] != idx]
        inf_arcs += [(v, rep[gid[v]]), (rep[gid[v]], v)]
    tail = np.concatenate([a for a, _ in inf_arcs])
    head = np.concatenate([b for _, b in inf_arcs])
    shape = (3 * k + 2, 3 * k + 2)
    hard = csr_matrix((np.ones(tail.size, dtype=np.int32), (tail, head)), shape=shape)
    if t in breadth_first_order(hard, s, return_predecessors=False):
        return (float("inf"), None) if side else float("inf")
    has_out = np.bincount(src, minlength=k) > 0
    free = ~ins & ~out
    ftail = np.concatenate([idx[free], k + idx[has_out], idx[has_out]])
    fhead = np.concatenate([np.full(int(free.sum()), t), idx[has_out], 2 * k + idx[has_out]])
    unary = d.p_acc[nodes][free] + price * d.mem[nodes][free]
    fcap = np.concatenate([unary, d.c_in[nodes][has_out], d.c_out[nodes][has_out]])
    total = float(fcap.sum())
    base = float(d.p_acc[inside].sum()) + price * (float(d.mem[inside].sum()) - d.cap)
    if total <= 0:
        return (base, inside.copy()) if side else base
    scale = (_BIG // 4) / total
    caps = np.concatenate([np.full(tail.size, _BIG, dtype=np.int64), np.floor(fcap * scale).astype(np.int64)])
    graph = csr_matrix((caps, (np.concatenate([tail, ftail]), np.concatenate([head, fhead]))), shape=shape)
    graph.data = np.minimum(graph.data, _BIG).astype(np.int32)   # summed duplicates stay in range
    flow = maximum_flow(graph, s, t)
    value = base + flow.flow_value / scale
    if not side:
        return value
    residual = (graph - flow.flow).tocsr()
    residual.data = np.maximum(residual.data, 0)
    residual.eliminate_zeros()
    reached = breadth_first_order(residual, s, return_predecessors=False)
    members = np.zeros(g.n, dtype=bool)
    members[nodes[reached[reached < k]]] = True
    return value, members
