"""What the dropped nodes of a kept subgraph still impose on the kept ones, for the
subgraph relaxation of :mod:`dnnplace.formulations.makespan_relaxation`: the longest
dropped paths between kept nodes and their cheapest transfers (:func:`path_lags`), the
ancestors and descendants of each kept node (:func:`reach_matrix`) and the energetic
heads and tails they give (:func:`energy_heads_tails`); :func:`machines`, the devices that
can run some node. The proofs are in that module's docstring."""

from __future__ import annotations

import heapq

import numpy as np

from dnnplace.evaluation.bounds import capable_devices
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph

__all__ = ["path_lags", "reach_matrix", "reach_from", "energy", "energy_heads_tails", "machines"]


def path_lags(graph: OpGraph, keep: np.ndarray, w: np.ndarray,
          tmin: np.ndarray) -> dict[tuple[int, int], tuple[float, float]]:
    """``(u, v) -> (l_uv, c_uv)`` for kept ``u, v`` joined by a path (of at least one edge)
    whose inner nodes are all dropped: ``l_uv`` the largest sum of ``w`` over those inner
    nodes, and ``c_uv`` the least ``tmin`` (an edge's cheapest transfer between two distinct
    devices) over the edges of one path reaching ``l_uv``."""
    kept = np.zeros(graph.n, dtype=bool)
    kept[keep] = True
    pos = graph.topo_position
    ptr, nbr, eid = graph.out_ptr, graph.out_nbr, graph.out_eid
    out: dict[tuple[int, int], tuple[float, float]] = {}
    for u in keep.tolist():
        dist: dict[int, tuple[float, float]] = {}  # x -> (dropped-path length before x, least transfer on it)
        for k in range(ptr[u], ptr[u + 1]):
            x, c = int(nbr[k]), float(tmin[eid[k]])
            old = dist.get(x)
            if old is None or old[1] < c:
                dist[x] = (0.0, c)
        heap = [(int(pos[x]), x) for x in dist]  # in topological order: every path into x is in before x
        heapq.heapify(heap)
        done: set[int] = set()
        while heap:
            _, x = heapq.heappop(heap)
            if x in done:
                continue
            done.add(x)
            if kept[x]:
                out[u, x] = dist[x]
                continue
            dx, cx = dist[x][0] + float(w[x]), dist[x][1]
            for k in range(ptr[x], ptr[x + 1]):
                y = int(nbr[k])
                cand = (dx, min(cx, float(tmin[eid[k]])))
                if y not in dist or cand > dist[y]:
                    dist[y] = cand
                if y not in done:
                    heapq.heappush(heap, (int(pos[y]), y))
    return out


def reach_matrix(graph: OpGraph, keep: np.ndarray, forward: bool) -> np.ndarray:
    """``(len(keep), n)`` booleans: the descendants (``forward``) or ancestors of each kept
    node, itself excluded."""
    ptr, nbr = (graph.out_ptr, graph.out_nbr) if forward else (graph.in_ptr, graph.in_nbr)
    out = np.zeros((keep.shape[0], graph.n), dtype=bool)
    for i, u in enumerate(keep.tolist()):
        out[i, reach_from(ptr, nbr, u, graph.n)] = True
    return out


def reach_from(ptr: np.ndarray, nbr: np.ndarray, u: int, n: int) -> np.ndarray:
    """The nodes reachable from ``u`` (``u`` excluded) along the CSR ``ptr``/``nbr``."""
    seen = np.zeros(n, dtype=bool)
    stack = nbr[ptr[u]:ptr[u + 1]].tolist()
    while stack:
        y = stack.pop()
        if not seen[y]:
            seen[y] = True
            stack.extend(nbr[ptr[y]:ptr[y + 1]].tolist())
    return np.flatnonzero(seen)


def energy(values: np.ndarray, work: np.ndarray, m: int) -> float:
    """:math:`\\max_k x_{(k)} + W_k / m` over the ``values`` sorted in decreasing order,
    :math:`W_k` the ``work`` of the first :math:`k` (0 when there are none)."""
    if values.size == 0:
        return 0.0
    order = np.argsort(-values, kind="stable")
    return float((values[order] + np.cumsum(work[order]) / m).max())


def energy_heads_tails(graph: OpGraph, cluster: Cluster, keep: np.ndarray, w: np.ndarray, r: np.ndarray,
                       q: np.ndarray, anc: np.ndarray | None = None,
                       desc: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Stronger heads and tails of the kept nodes: :math:`\\rho_v = \\max(r_v, \\max_k
    r_{(k)} + W_k/m)` over the ancestors of :math:`v` in decreasing head order (the
    ancestors of heads at least :math:`r_{(k)}` all run in :math:`[r_{(k)}, s_v]` on the
    :math:`m` devices that can run some node) and likewise :math:`\\tau_v` over the
    descendants and their tails (they all run in :math:`[e_v, T - q_{(k)}]`). ``anc`` and
    ``desc``: :func:`reach_matrix` of ``keep``, if already computed."""
    m = machines(graph, cluster)
    anc = reach_matrix(graph, keep, False) if anc is None else anc
    desc = reach_matrix(graph, keep, True) if desc is None else desc
    rho, tau = r[keep].astype(float).copy(), q[keep].astype(float).copy()
    for i in range(keep.shape[0]):
        a, d = anc[i], desc[i]
        rho[i] = max(rho[i], energy(r[a], w[a], m))
        tau[i] = max(tau[i], energy(q[d], w[d], m))
    return rho, tau


def machines(graph: OpGraph, cluster: Cluster) -> int:
    """The devices that can run some node of ``graph`` (at least 1)."""
    return max(1, capable_devices(graph, cluster))
