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

Every feasible piece is a cut of at most its duration, so the minimum cut is a lower
bound (``inf`` when :math:`X` reaches :math:`O` along :math:`\infty` arcs: no piece
exists). Capacities are scaled to integers (SciPy's max flow takes ``int32``) and rounded
down, so the value stays a lower bound.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

__all__ = ["piece_cut"]

_BIG = 2 ** 30


def piece_cut(d, inside: np.ndarray, outside: np.ndarray) -> float:
    """Least duration of a piece ``S`` with ``inside`` in ``S`` and ``outside`` not (module
    docstring); ``d`` is the bound's instance data (:mod:`dnnplace.formulations.latency_bound`)."""
    g = d.g
    n = g.n
    if (inside & outside).any():
        return float("inf")
    s, t = 3 * n, 3 * n + 1
    src, dst = g.src, g.dst
    desc = d.down[inside].any(axis=0) & ~inside
    anc = d.up[inside].any(axis=0) & ~inside
    free = ~inside
    has_out = np.bincount(src, minlength=n) > 0
    u_all = np.arange(n)
    # (tail, head, capacity in ms or None = infinite)
    inf_arcs = [
        (np.full(int(inside.sum()), s), np.flatnonzero(inside)),
        (np.flatnonzero(outside), np.full(int(outside.sum()), t)),
        (dst, n + src),                      # w -> a_u
        (2 * n + src, dst),                  # b_x -> y
    ]
    grouped = d.gid[free]
    if d.q == 1 and grouped.size:
        rep = np.full(d.n_groups, -1)
        rep[d.gid[::-1]] = u_all[::-1]       # the first member of each group
        v = u_all[rep[d.gid] != u_all]
        inf_arcs += [(v, rep[d.gid[v]]), (rep[d.gid[v]], v)]
    e = desc[src] & desc[dst]
    inf_arcs.append((dst[e], src[e]))
    e = anc[src] & anc[dst]
    inf_arcs.append((src[e], dst[e]))
    fin_t = free & ~outside
    finite = [
        (u_all[fin_t], np.full(int(fin_t.sum()), t), d.p_acc[fin_t]),
        (n + u_all[has_out], u_all[has_out], d.c_in[has_out]),     # a_u -> u
        (u_all[has_out], 2 * n + u_all[has_out], d.c_out[has_out]),  # x -> b_x
    ]
    tail = np.concatenate([a for a, _ in inf_arcs])
    head = np.concatenate([b for _, b in inf_arcs])
    shape = (3 * n + 2, 3 * n + 2)
    hard = csr_matrix((np.ones(tail.size, dtype=np.int32), (tail, head)), shape=shape)
    if t in breadth_first_order(hard, s, return_predecessors=False):
        return float("inf")
    ftail = np.concatenate([a for a, _, _ in finite])
    fhead = np.concatenate([b for _, b, _ in finite])
    fcap = np.concatenate([c for _, _, c in finite])
    total = float(fcap.sum())
    scale = (_BIG // 4) / total if total > 0 else 1.0
    caps = np.concatenate([np.full(tail.size, _BIG, dtype=np.int64), np.floor(fcap * scale).astype(np.int64)])
    graph = csr_matrix((caps, (np.concatenate([tail, ftail]), np.concatenate([head, fhead]))), shape=shape)
    graph.data = np.minimum(graph.data, _BIG).astype(np.int32)   # summed duplicates stay in range
    flow = maximum_flow(graph, s, t).flow_value
    return float(d.p_acc[inside].sum()) + flow / scale
