r"""Celeritas' optimal operation fusion (Alg. 1, Eqs. 4-6): cut a topological order into
memory-bounded segments of at most ``R`` nodes with the least total communication across
segments, and contract every segment into one node.

Let :math:`v_0, \dots, v_{n-1}` be the order (CPD-TOPO by default,
:mod:`dnnplace.heuristics.topo_orders`) and :math:`\bar c` the nominal edge costs
(:func:`~dnnplace.heuristics.nominal.nominal_costs`, ``mean`` over ordered GPU pairs,
decision C2). A segmentation is a list of breakpoints :math:`0 = b_0 < \dots < b_m = n`;
segment :math:`[b_k, b_{k+1})`. With 0-based positions (the paper's ``j`` is our ``j-1``):

- Eq. 4, the cost of closing segment :math:`[i, j)`: the edges leaving it forwards,
  :math:`\mathrm{cost}(i, j) = \sum_{i \le k < j} \sum_{(v_k, v_m) \in E,\, m \ge j} \bar c_{km}`.
  Every edge points forward, so the costs of a segmentation's segments add up to its
  total cut.
- Eq. 5 (*paper says* the lower bound ``y``, *we do* ``i``):
  :math:`\mathrm{cost}(i, j) = \mathrm{cost}(i, j-1) + \mathrm{out}(v_{j-1}) -
  \sum_{(v_s, v_{j-1}) \in E,\, i \le s < j-1} \bar c_{s, j-1}` with
  :math:`\mathrm{cost}(i, i) = 0`.
- Eq. 6, the DP: :math:`S(0) = 0`,
  :math:`S(j) = \min_{\max(0, j-R) \le i \le j-1} S(i) + \mathrm{cost}(i, j)` over the
  ``i`` whose segment holds at most ``M`` bytes (*paper says* ``[i, j]`` inclusive, *we
  do* ``[i, j)``, the segment itself, and a singleton is always allowed: decisions C3,
  C4) and can run on one device kind (affinity; not in the paper). Ties go to the
  smaller ``i`` (a longer last segment, fewer clusters). :math:`S(n)` is the least cut;
  backtracking the argmins from ``n`` gives the segments.

The kernel keeps ``cost(i, j-1)`` for the window and applies Eq. 5 to all of it when
``j`` advances, so it takes :math:`O(nR + E)` time (*paper says* :math:`O(E)`; scanning
the window is :math:`O(R)` per node, which the paper concedes makes a large ``R`` slow),
in numba. Windows that a memory or affinity break cut short stay cut for larger ``j``
(a longer segment holds more), so stale window entries are never read.

The coarse graph is :func:`~dnnplace.graphs.transforms.contract.quotient` of the segments: it sums
compute per kind and memory, and is acyclic because every edge goes to the same or a
later segment (Lemma 2, generalised to segments). Fusion lowers the *numerator* of CCR
(Eq. 1: the cut is all that is left of the edge costs) and leaves the denominator, the
summed compute, unchanged (*paper says* the opposite, Sec. 5.1.1, decision C11).
A coarse edge carries its members' summed bytes (one transfer per coarse edge, so the
link start-up ``beta0`` counts once, as for Pesto's coarsening), so the coarse CCR is at
most ``S(n) / sum w``.

References
----------
.. [C] H. Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs", Sec. 5.1, Alg. 1.
.. [K] B. W. Kernighan, "Optimal sequential partitions of graphs", J. ACM 18(1), 1971.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.transforms.contract import quotient
from dnnplace.graphs.transforms.replay import Transformed
from dnnplace.heuristics.jit import cached_njit
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.topo_orders import topo_order_by

__all__ = ["FusionDP", "fusion_dp", "fuse", "fuse_to"]


@cached_njit
def _dp_kernel(n, R, M, mem, kinds, out_cost, in_ptr, in_src, in_cost, table):  # pragma: no cover - numba
    """S, P over positions ``0..n`` (module docstring); ``table`` ((n+1, n+1) or (1, 1))
    receives every ``cost(i, j)`` the kernel evaluates when it is big enough."""
    S = np.full(n + 1, np.inf)
    P = np.zeros(n + 1, dtype=np.int64)
    S[0] = 0.0
    cost = np.zeros(n)       # cost[i] = cost(i, j) for the current j, i in the window
    inc = np.zeros(n)        # scratch: cost of edges v_s -> v_{j-1} by source position s
    record = table.shape[0] == n + 1
    reach = 0                # smallest i evaluated for the previous j: cost[i] is fresh from there on
    for j in range(1, n + 1):
        t = j - 1
        lo = max(0, j - R)
        for k in range(in_ptr[t], in_ptr[t + 1]):
            s = in_src[k]
            if s >= lo:
                inc[s] += in_cost[k]
        cost[t] = 0.0
        best = np.inf
        arg = t
        run_mem = 0.0
        run_kinds = -1
        run_in = 0.0     # sum of inc[s] for s in [i, j-1)
        last = t
        for i in range(t, lo - 1, -1):
            if i < t:
                run_in += inc[i]
            run_mem += mem[i]
            run_kinds &= kinds[i]
            if i < t and (run_mem > M or run_kinds == 0 or i < reach):
                break
            cost[i] = cost[i] + out_cost[t] - run_in  # Eq. 5
            last = i
            if record:
                table[i, j] = cost[i]
            cand = S[i] + cost[i]
            if cand <= best:
                best = cand
                arg = i
        S[j] = best
        P[j] = arg
        reach = last
        for k in range(in_ptr[t], in_ptr[t + 1]):
            inc[in_src[k]] = 0.0
    return S, P


@dataclass(frozen=True)
class FusionDP:
    """The DP's answer: ``cut = S(n)``, ``S``, ``P`` and the segment of every position."""

    cut: float
    S: np.ndarray
    P: np.ndarray
    segment: np.ndarray
    table: np.ndarray | None = None

    @property
    def breakpoints(self) -> np.ndarray:
        """``b_0 = 0 < ... < b_m = n``."""
        return np.concatenate(([0], np.flatnonzero(np.diff(self.segment)) + 1, [self.segment.size]))


def fusion_dp(graph: OpGraph, order: np.ndarray, c: np.ndarray, *, R: int, M: float = math.inf,
              kinds_ok: np.ndarray | None = None, costs_table: bool = False) -> FusionDP:
    """Eq. 6 over the topological ``order`` with edge costs ``c`` (module docstring).

    Parameters
    ----------
    graph : OpGraph
    order : array (n,)
        A topological order of ``graph``.
    c : array (m,)
        Edge costs (nominal).
    R : int
        Window: at most ``R`` nodes per segment (>= 1).
    M : float
        Memory bound of a segment of two or more nodes (``graph.memory``).
    kinds_ok : array (n, K) of bool, optional
        Where each node can run; a segment must share one column (default: the graph's
        compute columns).
    costs_table : bool
        Also return every ``cost(i, j)`` evaluated (Eq. 5), as ``table[i, j]`` (small
        graphs; for tests against Eq. 4).

    Examples
    --------
    A chain ``a -> b -> c`` with edge costs 1 and 5 and a window of 2: the cheap edge is cut.

    >>> g = OpGraph.from_ids(list("abc"), [("a", "b"), ("b", "c")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 3, memory=[0] * 3)
    >>> r = fusion_dp(g, np.arange(3), np.array([1.0, 5.0]), R=2)
    >>> r.cut, r.segment.tolist()
    (1.0, [0, 1, 1])
    """
    n = graph.n
    if R < 1:
        raise InputError(f"fusion window R must be >= 1, got {R}")
    order = np.asarray(order, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    ps, pd = pos[graph.src], pos[graph.dst]
    if np.any(ps >= pd):
        e = int(np.flatnonzero(ps >= pd)[0])
        raise InputError(f"fusion: the order is not topological ({graph._edge(e)} points backwards)")
    c = np.asarray(c, dtype=np.float64)
    out_cost = np.bincount(ps, weights=c, minlength=n)
    # in-edges by target position
    by_t = np.argsort(pd, kind="stable")
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(pd, minlength=n), out=in_ptr[1:])
    ok = ~np.isnan(graph.compute) if kinds_ok is None else np.asarray(kinds_ok, dtype=bool)
    if ok.shape[1] > 62:
        raise InputError("fusion: at most 62 device kinds")
    bits = (ok.astype(np.int64) << np.arange(ok.shape[1], dtype=np.int64)).sum(axis=1)
    table = np.full((n + 1, n + 1), np.nan) if costs_table else np.zeros((1, 1))
    S, P = _dp_kernel(n, int(R), float(M), graph.memory[order].astype(np.float64), bits[order], out_cost,
                      in_ptr, ps[by_t], c[by_t], table)
    starts = []
    j = n
    while j > 0:
        j = int(P[j])
        starts.append(j)
    seg = np.zeros(n, dtype=np.int64)
    seg[np.asarray(starts[::-1][1:], dtype=np.int64)] = 1
    return FusionDP(float(S[n]), S, P, np.cumsum(seg), table if costs_table else None)


def fuse(graph: OpGraph, cluster: Cluster, *, R: int = 200, M_frac: float = 0.25, M: float | None = None,
         order: str = "cpd-topo", nominal: str = "mean") -> Transformed:
    """Celeritas' operation fusion (Alg. 1) as a coarsening: the order, the DP, the quotient.

    Parameters
    ----------
    graph, cluster
        The instance (the cluster gives nominal costs, affinity and memory).
    R : int
        Window (the paper's ``R = 200``).
    M_frac : float
        Segment memory bound as a share of the smallest device capacity (*paper says*
        "M = 0.25*", truncated; *we do* ``0.25 * min cap``, decision C1). Ignored when
        ``M`` is given; an infinite capacity gives no bound.
    order : str
        ``cpd-topo`` (the paper), ``dfs-topo`` or ``m-topo``.
    nominal : str
        Aggregate of the nominal costs (``mean``, decision C2).

    Returns
    -------
    Transformed
        Named ``celeritas-fusion``; ``labels[v]`` is the segment of ``v`` (segments are
        numbered along the order, a topological order of the coarse graph); ``meta``
        holds ``cut`` (= S(n)), ``R``, ``M``, ``order`` and the CCR before and after.

    Examples
    --------
    >>> from dnnplace.graphs.cluster import Cluster
    >>> g = OpGraph.from_ids(list("abcd"), [("a", "b"), ("b", "c"), ("c", "d")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 4, memory=[1] * 4, edge_bytes=[8.0, 1.0, 8.0])
    >>> t = fuse(g, Cluster.single_host(2, with_cpu=False), R=2)
    >>> t.labels.tolist(), t.graph.n
    ([0, 0, 1, 1], 2)
    """
    w, c = nominal_costs(graph, cluster, nominal)
    ok_dev = ~np.isnan(cluster.compute_matrix(graph))
    if M is None:
        cap = float(np.min(cluster.memory)) if cluster.size else math.inf
        M = M_frac * cap if math.isfinite(cap) else math.inf
    seq = topo_order_by(graph, order, w, c)
    dp = fusion_dp(graph, seq, c, R=R, M=M, kinds_ok=ok_dev)
    labels = np.empty(graph.n, dtype=np.int64)
    labels[seq] = dp.segment
    coarse = quotient(graph, labels, name=f"{graph.name}-fused")
    coarse = coarse.with_(colocation=_group_of(graph, labels, coarse.n))
    total_w = float(w.sum())
    wc, cc = nominal_costs(coarse, cluster, nominal)
    meta = {"cut": dp.cut, "R": int(R), "M": float(M), "order": order, "nodes_before": graph.n,
            "nodes_after": coarse.n, "ccr_before": float(c.sum()) / total_w if total_w > 0 else math.inf,
            "ccr_after": float(cc.sum()) / float(wc.sum()) if wc.sum() > 0 else math.inf}
    return Transformed(coarse, labels, "celeritas-fusion", meta)


def _group_of(graph: OpGraph, labels: np.ndarray, k: int) -> np.ndarray:
    """Coarse colocation codes: coarse nodes that hold members of one group share a code
    (connected components over shared groups), so a placement that honours the coarse
    codes honours every original group (what a solver of the coarse graph needs). The
    Celeritas placer itself pins through the original groups (:mod:`dnnplace.heuristics.celeritas`)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    grouped = np.flatnonzero(graph.colocation >= 0)
    out = np.full(k, -1, dtype=np.int64)
    if grouped.size == 0:
        return out
    g = graph.colocation[grouped]
    n_grp = int(g.max()) + 1
    adj = coo_matrix((np.ones(grouped.size), (labels[grouped], k + g)), shape=(k + n_grp, k + n_grp))
    _, comp = connected_components(adj, directed=False)
    has = np.zeros(k, dtype=bool)
    has[labels[grouped]] = True
    codes = np.unique(comp[:k][has], return_inverse=True)[1]
    out[has] = codes
    return out


def fuse_to(graph: OpGraph, cluster: Cluster | None = None, *, target: int) -> Transformed:
    """Fusion in front of another solver (Pesto's ILP): window ``R = ceil(n / target)``,
    so at least ``target`` segments; the memory bound is the default ``0.25 * min cap``."""
    if cluster is None:
        raise InputError("celeritas-fusion needs the cluster (nominal costs)")
    if target < 1:
        raise InputError(f"fusion: target must be >= 1, got {target}")
    return fuse(graph, cluster, R=max(1, math.ceil(graph.n / target)))
