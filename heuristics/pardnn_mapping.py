"""PARDNN Step 1, stage II: LFLAM mapping of the secondary clusters onto the primaries
(Qararyah et al. 2021, Alg. 2, Eq. 1, Sec. 3.1.2).

Levels ``tl``, ``bl`` are those of the sliced graph with edges inside a cluster at 0
(Alg. 2 line 1), fixed for the whole stage. For a secondary cluster ``sc`` (a path, first
node ``f``, last node ``l``):

* ``span(sc) = [max_{p in pred(f)} tl(p) + w(p), min_{s in succ(l)} tl(s))`` (Table 2:
  finish of the last parent of the first node to the start of the first child of the
  last node), ``0`` without a parent, ``max_v tl(v) + w(v)`` without a child;
* ``L_p`` the work ``sum w(n)`` of primary ``p``'s current nodes with ``tl(n)`` in the
  span (Eq. 1's first term; the paper's ``pc`` is a typo for ``pe``), ``W`` the same over
  all nodes, ``U = W - sum_p L_p`` the unmapped work in it (``sc`` included);
* ``comm(sc, p)`` the cost of the edges between ``sc`` and ``p``'s current nodes,
  ``comm(sc)`` of all edges leaving or entering ``sc``;
* criticality ``crit(sc) = tl(f) + sum_{n in sc} w(n) + bl(l) - w(l)``, the longest
  source-to-sink path through all of ``sc`` (the paper's "wlvl of its nodes" holds only
  on the cluster's own heaviest path).

*Locality-first lookahead* (Alg. 2 lines 5-7): secondaries by criticality (decreasing;
ties: larger weight, then the first node's topological position). ``sc`` goes to
``t = argmax_p comm(sc, p)`` when it is *totally* communicating with ``t``
(``comm(sc, t) = comm(sc)``) or, on graphs with ``CCR >= 10``, *maximally*
(``comm(sc, t) > comm(sc) / K``), and one of

(a) ``L_t + w(sc) <= W / K`` (the unmapped work in the span can level the others up),
(b) ``L_t + w(sc) <= max_p L_p`` (no new local maximum),
(c) ``comm(sc, t) > max(w(sc), L_t, U - w(sc))`` (communication dominates; resolution
    P6 reads "larger than its weight, the work of the primary and the unmapped work"
    as each individually, ``rule_c="sum"`` as their sum)

holds. Passes repeat while one maps a cluster, at most ``ceil(log2 |V|)`` times
(Alg. 2 line 7 never increments ``iteration``: P5).

*Level-aware balancing* (Alg. 2 lines 10-16, Eq. 1): every cluster left goes to

.. math::

    \\arg\\min_{p} \\Big( L_p + \\sum_{q \\ne p} comm(sc, q) \\Big)
    = \\arg\\min_p \\big( L_p - comm(sc, p) \\big)

(ties: the largest ``comm(sc, p)``, then the lowest ``p``, as the paper's "the one with
which it communicates the most").

The span sums are Fenwick (binary indexed) trees over the rank of ``tl`` [50], one per
primary, queried for all primaries at once (:class:`LevelSums`); ``W`` is a prefix sum.
Each node is added once, each cluster costs O(K log V) per query, so a pass is
O(E + S K log V) and the stage O(V log^2 V) as Table 1 says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.graph import OpGraph
from dnnplace.heuristics.pardnn_slicing import Slicing, clustered_levels

__all__ = ["LevelSums", "eq1_target", "lflam", "Mapped", "CCR_THRESHOLD"]

CCR_THRESHOLD = 10.0  # Sec. 3.1.2: "graphs with CCR >= 10 are highly communicating" (Sinnen)


class LevelSums:
    """``rows`` Fenwick trees over ``size`` level ranks: ``add(row, rank, value)`` and
    ``between(a, b)``, the sums over ranks ``a .. b-1`` of every row at once (plain lists:
    a node's update touches O(log V) entries of one row, a query O(K log V)).

    >>> fs = LevelSums(2, 5)
    >>> fs.add(0, 1, 2.0); fs.add(0, 3, 5.0); fs.add(1, 4, 1.0)
    >>> fs.between(1, 4).tolist(), fs.between(0, 5).tolist()
    ([7.0, 0.0], [7.0, 1.0])
    """

    def __init__(self, rows: int, size: int):
        self.size = size
        self.tree = [[0.0] * (size + 1) for _ in range(rows)]

    def add(self, row: int, rank: int, value: float) -> None:
        tree, i, size = self.tree[row], rank + 1, self.size
        while i <= size:
            tree[i] += value
            i += i & -i

    @staticmethod
    def _path(i: int) -> list[int]:
        path = []
        while i > 0:
            path.append(i)
            i -= i & -i
        return path

    def between(self, a: int, b: int) -> np.ndarray:
        if b <= a:
            return np.zeros(len(self.tree))
        pb, pa = self._path(b), self._path(a)
        return np.array([sum(map(t.__getitem__, pb)) - sum(map(t.__getitem__, pa)) for t in self.tree])


def eq1_target(load: np.ndarray, comm: np.ndarray) -> int:
    """Eq. 1's choice ``argmin_p (L_p - comm_p)``, ties to the largest ``comm_p``, then
    the lowest ``p``.

    >>> eq1_target(np.array([3.0, 2.0, 2.0]), np.array([0.0, 0.0, 0.5]))
    2
    >>> eq1_target(np.array([3.0, 2.0]), np.array([2.0, 1.0]))  # tie at 1: more comm wins
    0
    """
    return int(np.lexsort((np.arange(load.size), -comm, load - comm))[0])


@dataclass(frozen=True, eq=False)
class Mapped:
    """LFLAM's answer: the primary of every node and what the stages did."""

    primary_of: np.ndarray
    lookahead_mapped: int
    lookahead_passes: int
    balanced: int


def _external_edges(graph: OpGraph, c: np.ndarray, cluster_of: np.ndarray, n_clusters: int):
    """Per cluster, the other end and cost of every edge leaving or entering it (CSR lists)."""
    a, b = cluster_of[graph.src], cluster_of[graph.dst]
    cross = np.flatnonzero(a != b)
    keys = np.concatenate([a[cross], b[cross]])
    other = np.concatenate([graph.dst[cross], graph.src[cross]])
    cost = np.concatenate([c[cross], c[cross]])
    o = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_clusters + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_clusters), out=ptr[1:])
    return ptr.tolist(), other[o].tolist(), cost[o].tolist()


def lflam(graph: OpGraph, w: np.ndarray, c: np.ndarray, slicing: Slicing, *, ccr: float | None = None,
          ccr_threshold: float = CCR_THRESHOLD, rule_c: str = "each", lookahead: bool = True) -> Mapped:
    """Map every secondary cluster onto a primary (see the module docstring).

    Parameters
    ----------
    graph : OpGraph
    w, c : ndarray
        Nominal node and edge times.
    slicing : Slicing
        The clusters; the primaries may be any node sets (heuristic II's chunks), the
        secondaries are paths.
    ccr : float, optional
        Communication-to-computation ratio ``sum c / sum w`` (PARDNN's code); computed
        when not given.
    ccr_threshold : float
        Maximally-communicating clusters are considered from this CCR on.
    rule_c : {"each", "sum"}
        Condition (c) against each term or their sum (P6).
    lookahead : bool
        Run the locality-first lookahead (else level-aware balancing only).

    Examples
    --------
    Two equal disjoint chains ``a -> b`` and ``c -> d`` with K=2: one per primary.

    >>> from dnnplace.heuristics.pardnn_slicing import slice_graph
    >>> g = OpGraph.from_ids("abcd", [("a", "b"), ("c", "d")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 4, memory=[0] * 4)
    >>> w, c = g.compute[:, 0], np.ones(2)
    >>> lflam(g, w, c, slice_graph(g, w, c, 2)).primary_of.tolist()
    [0, 0, 1, 1]
    """
    if rule_c not in ("each", "sum"):
        raise ValueError(f"rule_c must be 'each' or 'sum', got {rule_c!r}")
    K, n = slicing.k, graph.n
    cl_of = slicing.cluster_of
    tl, bl = clustered_levels(graph, w, c, cl_of)
    levels = np.unique(tl)
    rank = np.searchsorted(levels, tl)
    W_cum = np.concatenate(([0.0], np.cumsum(np.bincount(rank, weights=w, minlength=levels.size))))
    sums = LevelSums(K, levels.size)
    owner = np.full(n, -1, dtype=np.int64)
    for p, nodes in enumerate(slicing.primaries):
        owner[nodes] = p
        for r, x in zip(rank[nodes].tolist(), w[nodes].tolist()):
            sums.add(p, r, x)
    if ccr is None:
        ccr = float(c.sum() / w.sum()) if w.sum() > 0 else 0.0
    secs = slicing.secondaries
    n_cl = len(slicing.clusters)
    ptr, other, cost = _external_edges(graph, c, cl_of, n_cl)
    sink = float((tl + w).max()) if n else 0.0
    # span, weight and criticality of each secondary
    finish = tl + w
    first = np.array([s[0] for s in secs], dtype=np.int64)
    last = np.array([s[-1] for s in secs], dtype=np.int64)
    weight = np.array([float(w[s].sum()) for s in secs])
    lo = np.zeros(len(secs))
    hi = np.full(len(secs), sink)
    if secs:
        e_in = np.flatnonzero(np.isin(graph.dst, first))
        pos_first = np.full(n, -1, dtype=np.int64)
        pos_first[first] = np.arange(len(secs))
        np.maximum.at(lo, pos_first[graph.dst[e_in]], finish[graph.src[e_in]])
        e_out = np.flatnonzero(np.isin(graph.src, last))
        pos_last = np.full(n, -1, dtype=np.int64)
        pos_last[last] = np.arange(len(secs))
        np.minimum.at(hi, pos_last[graph.src[e_out]], tl[graph.dst[e_out]])
    ra = np.searchsorted(levels, lo, "left").tolist()
    rb = np.searchsorted(levels, hi, "left").tolist()
    crit = tl[first] + weight + bl[last] - w[last] if secs else np.zeros(0)
    order = np.lexsort((graph.topo_position[first], -weight, -crit)).tolist() if secs else []
    mapped = [False] * len(secs)
    own = owner.tolist()
    rank_l, w_l = rank.tolist(), w.tolist()

    def comm_of(j: int) -> tuple[list[float], float]:
        cp, total = [0.0] * K, 0.0
        for x in range(ptr[K + j], ptr[K + j + 1]):
            total += cost[x]
            p = own[other[x]]
            if p >= 0:
                cp[p] += cost[x]
        return cp, total

    sec_nodes = [x.tolist() for x in secs]

    def merge(j: int, t: int) -> None:
        mapped[j] = True
        for v in sec_nodes[j]:
            own[v] = t
            sums.add(t, rank_l[v], w_l[v])

    high_ccr = ccr >= ccr_threshold
    n_look, passes = 0, 0
    max_passes = max(1, math.ceil(math.log2(max(n, 2)))) if lookahead else 0
    while passes < max_passes:
        passes += 1
        done = 0
        for j in order:
            if mapped[j]:
                continue
            cp, total = comm_of(j)
            t = max(range(K), key=cp.__getitem__)
            ct = cp[t]
            if ct <= 0.0:
                continue
            totally = ct >= total * (1.0 - 1e-12)
            if not (totally or (high_ccr and ct > total / K)):
                continue
            L = sums.between(ra[j], rb[j])
            span_work = W_cum[rb[j]] - W_cum[ra[j]] if rb[j] > ra[j] else 0.0
            lt, ws = float(L[t]), weight[j]
            unmapped = span_work - float(L.sum())
            cond_c = ct > (max(ws, lt, unmapped - ws) if rule_c == "each" else ws + lt + unmapped - ws)
            if lt + ws <= span_work / K or lt + ws <= float(L.max()) or cond_c:
                merge(j, t)
                done += 1
        n_look += done
        if done == 0:
            break
    balanced = 0
    for j in order:
        if mapped[j]:
            continue
        cp, _ = comm_of(j)
        merge(j, eq1_target(sums.between(ra[j], rb[j]), np.asarray(cp)))
        balanced += 1
    return Mapped(np.asarray(own, dtype=np.int64), n_look, passes, balanced)
