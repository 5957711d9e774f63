"""PARDNN Step 1, stage I: graph slicing into linear clusters (Qararyah et al. 2021, Alg. 1).

The graph is cut into *paths* (linear clusters): first ``K`` *primary* clusters, each the
critical path of what is left of the graph, with the weighted levels recomputed on the
remaining subgraph before each (Alg. 1, lines 5-7); then *secondary* clusters, heaviest
paths found with levels computed once (lines 8-9, resolution P2 of ``docs/heuristics.md`` 3.6):

.. math::

    tl(v) = \\max_{p \\in pred(v)} tl(p) + \\bar w(p) + \\bar c(p, v), \\qquad
    bl(v) = \\bar w(v) + \\max_{s \\in succ(v)} \\bar c(v, s) + bl(s), \\qquad
    wlvl(v) = tl(v) + bl(v),

with nominal costs ``w_bar``, ``c_bar`` (``docs/heuristics.md`` 0) and, for the secondaries,
``c_bar = 0`` on edges inside a primary. A heaviest path starts at the unvisited node of
largest ``wlvl`` (ties: smaller ``tl``, then topological position) and follows, to a
dead end, the unvisited child ``s`` of largest ``c_bar(v, s) + bl(s)`` (ties: larger
``bl``, then topological position). Paper says (P1): the child of largest ``wlvl``; we
do: the heaviest continuation, which is the largest-``wlvl`` child *on a tight edge*
(``tl(v) + w(v) + c(v, s) = tl(s)``). The largest ``wlvl`` alone can step from a
critical path onto a non-tight edge whose child lies on another critical path, and the
primary would not be a critical path (a brute-force test found such a graph). Every
cluster is a path of ``G``; singletons are allowed; ``K`` larger than the number of
paths leaves the last primaries empty. O(K (V + E)) for PARDNN; with ``k=None`` every
path is a recomputed critical path, which is Kim's *linear clustering* (LC) in
O(V (V + E)) (:func:`linear_clusters`).

The authors' code differs in three ways; otherwise we keep the paper's version: it walks
by ``bl`` (close to our rule, without the edge cost); its secondaries stop when the
best child is already visited (we take the best *unvisited* child); its intra-cluster
edges weigh 1 (integer
microseconds) instead of 0.

Levels are compared after rounding to 12 significant digits, so that the nodes of one
critical path, whose ``tl + bl`` differ only by floating-point rounding, tie exactly.

References
----------
.. [PARDNN] F. Qararyah, M. Wahib, D. Dikbayir, M. E. Belviranli, D. Unat. "A
   computational-graph partitioning method for training memory-constrained DNNs."
   Parallel Computing 2021, Sec. 3.1.1, Alg. 1, Table 2.
.. [LC] S. J. Kim. "A general approach to multiprocessor scheduling." PhD thesis,
   University of Texas at Austin, 1988.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, edge_weights, tlevel
from dnnplace.heuristics.message_costs import mean_message_time

__all__ = ["Slicing", "slice_graph", "linear_clusters", "clustered_levels", "target_devices", "target_costs"]


@dataclass(frozen=True, eq=False)
class Slicing:
    """Linear clusters of a graph: ``clusters[j]`` lists node indices along a path;
    the first ``k`` are the primaries (possibly empty), the rest secondaries;
    ``cluster_of[v]`` is the cluster of node ``v``."""

    clusters: list[np.ndarray]
    k: int
    cluster_of: np.ndarray

    @property
    def primaries(self) -> list[np.ndarray]:
        return self.clusters[:self.k]

    @property
    def secondaries(self) -> list[np.ndarray]:
        return self.clusters[self.k:]


# ---------------------------------------------------------------------------- costs
def target_devices(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """The ``K`` devices PARDNN partitions onto: those of the non-CPU kind that runs the
    most nodes (the GPUs of one host); all devices when the cluster has only CPUs."""
    kinds = [k for k in dict.fromkeys(cluster.kinds) if k != "cpu"]
    if not kinds:
        return np.arange(cluster.size)
    best = max(kinds, key=lambda k: (int(graph.supports(k).sum()), -cluster.kinds.index(k)))
    return cluster.devices_of_kind(best)


def target_costs(graph: OpGraph, cluster: Cluster, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nominal node and edge times on the target devices (``nominal=mean``, PARDNN's
    homogeneous GPUs): ``w_bar`` the mean time over the targets (over all devices for a
    node no target runs; it goes to the host), ``c_bar`` the mean transfer time over
    ordered pairs of distinct targets (0 with one target), plus the mean message cost
    ``send_overhead[a] + recv_overhead[b]`` over those pairs where the cluster has
    per-message costs (docs/semantics.md 2.1,
    :func:`~dnnplace.heuristics.message_costs.mean_message_time`)."""
    comp = cluster.compute_matrix(graph)
    on_t = comp[:, targets]
    ok = ~np.isnan(on_t)
    cnt = ok.sum(axis=1)
    w = np.where(cnt > 0, np.where(ok, on_t, 0.0).sum(axis=1) / np.maximum(cnt, 1), np.nanmean(comp, axis=1))
    sub = Cluster(tuple(cluster.devices[i] for i in targets), cluster.beta0[np.ix_(targets, targets)],
                  cluster.beta1[np.ix_(targets, targets)], cluster.cost_factor[np.ix_(targets, targets)],
                  name=cluster.name)
    c = edge_weights(graph, sub)
    if cluster.has_message_costs and graph.m:
        c = c + mean_message_time(cluster, targets)
    return w, c


# ---------------------------------------------------------------------------- levels
def _key(x: np.ndarray) -> np.ndarray:
    """Levels rounded to 12 significant digits of the largest one (exact ties on a path)."""
    scale = float(np.abs(x).max(initial=0.0))
    if scale == 0.0:
        return np.zeros_like(x)
    return np.round(x / scale, 12)


def _induced(graph: OpGraph, keep: np.ndarray) -> tuple[OpGraph, np.ndarray, np.ndarray]:
    """The subgraph induced by ``keep``: the graph, its nodes' indices in ``graph`` and
    its edges' ids in ``graph``."""
    idx = np.flatnonzero(keep)
    new = np.full(graph.n, -1, dtype=np.int64)
    new[idx] = np.arange(idx.size)
    eids = np.flatnonzero(keep[graph.src] & keep[graph.dst])
    sub = OpGraph(ids=range(idx.size), kinds=("w",), compute=np.zeros((idx.size, 1)), memory=np.zeros(idx.size),
                  src=new[graph.src[eids]], dst=new[graph.dst[eids]], name="remaining")
    return sub, idx, eids


def clustered_levels(graph: OpGraph, w: np.ndarray, c: np.ndarray,
                     cluster_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``tl`` and ``bl`` with the edges inside a cluster costing 0 (Alg. 2 line 1)."""
    cz = np.where(cluster_of[graph.src] == cluster_of[graph.dst], 0.0, c)
    return tlevel(graph, kind=w, comm=cz), blevel(graph, kind=w, comm=cz)


def _walk(start: int, out_ptr: list, out_nbr: list, free: list, via: list, bl: list, pos: list) -> list[int]:
    """Follow the free child ``s`` of largest ``via = c(v, s) + bl(s)`` (ties: larger bl,
    smaller position) to a dead end."""
    path = [start]
    free[start] = False
    v = start
    while True:
        best, bk = -1, None
        for j in range(out_ptr[v], out_ptr[v + 1]):
            s = out_nbr[j]
            if not free[s]:
                continue
            k = (via[j], bl[s], -pos[s])
            if bk is None or k > bk:
                best, bk = s, k
        if best < 0:
            return path
        path.append(best)
        free[best] = False
        v = best


def _critical_path(graph: OpGraph, w: np.ndarray, c: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """A heaviest path of the subgraph induced by ``keep``, levels recomputed on it."""
    sub, idx, eids = _induced(graph, keep)
    tl = tlevel(sub, kind=w[idx], comm=c[eids])
    bl = blevel(sub, kind=w[idx], comm=c[eids])
    key = _key(tl + bl)
    pos = graph.topo_position[idx]
    start = int(np.lexsort((pos, tl, -key))[0])
    via = _key(c[eids][sub.out_eid] + bl[sub.out_nbr]) if sub.m else np.zeros(0)
    path = _walk(start, sub.out_ptr.tolist(), sub.out_nbr.tolist(), [True] * sub.n, via.tolist(), bl.tolist(),
                 pos.tolist())
    return idx[np.asarray(path, dtype=np.int64)]


def slice_graph(graph: OpGraph, w: np.ndarray, c: np.ndarray, k: int | None, *,
                deadline: float | None = None) -> Slicing:
    """Alg. 1: ``k`` primary clusters (critical paths of the remaining graph), then
    secondary clusters (heaviest paths with the levels computed once, intra-primary
    edges at 0). ``k=None``: every cluster is a recomputed critical path (LC).

    Parameters
    ----------
    graph : OpGraph
    w, c : ndarray
        Nominal node (n,) and edge (m,) times.
    k : int or None
        Number of primaries (devices).
    deadline : float, optional
        ``time.perf_counter()`` value after which no further primary is recomputed: the
        nodes left become secondaries (LC's incumbent when its time runs out).

    Examples
    --------
    A diamond ``a -> {b, c} -> d`` where ``b`` is heavier: primary 1 is ``a b d``,
    primary 2 is ``c``.

    >>> g = OpGraph.from_ids("abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
    ...                      kinds=["gpu"], compute=[[1.0], [3.0], [2.0], [1.0]], memory=[0] * 4)
    >>> s = slice_graph(g, g.compute[:, 0], np.full(4, 0.5), 2)
    >>> [[g.ids[i] for i in p] for p in s.clusters]
    [['a', 'b', 'd'], ['c']]
    """
    n = graph.n
    if k is not None and k < 1:
        raise InputError(f"slicing needs at least one primary cluster, got k={k}")
    visited = np.zeros(n, dtype=bool)
    clusters: list[np.ndarray] = []
    limit = n if k is None else k
    while len(clusters) < limit and not visited.all():
        if deadline is not None and clusters and time.perf_counter() > deadline:
            break
        path = _critical_path(graph, w, c, ~visited)
        visited[path] = True
        clusters.append(path)
    empty = np.empty(0, dtype=np.int64)
    n_prim = len(clusters) if k is None else k
    clusters += [empty] * (n_prim - len(clusters))
    cluster_of = np.full(n, -1, dtype=np.int64)
    for j, p in enumerate(clusters):
        cluster_of[p] = j
    if not visited.all():  # secondaries: one level computation, intra-primary edges at 0
        cz = np.where(cluster_of[graph.src] == cluster_of[graph.dst], 0.0, c)
        tl, bl = tlevel(graph, kind=w, comm=cz), blevel(graph, kind=w, comm=cz)
        key = _key(tl + bl)
        order = np.lexsort((graph.topo_position, tl, -key)).tolist()
        free = (~visited).tolist()
        via = _key(cz[graph.out_eid] + bl[graph.out_nbr]) if graph.m else np.zeros(0)
        args = (graph.out_ptr.tolist(), graph.out_nbr.tolist(), free, via.tolist(), bl.tolist(),
                graph.topo_position.tolist())
        for v in order:
            if free[v]:
                path = np.asarray(_walk(v, *args), dtype=np.int64)
                cluster_of[path] = len(clusters)
                clusters.append(path)
    return Slicing(clusters, n_prim, cluster_of)


def linear_clusters(graph: OpGraph, w: np.ndarray, c: np.ndarray, *, deadline: float | None = None) -> Slicing:
    """Kim's linear clustering: repeatedly the critical path of the remaining graph, until
    none is left (O(V (V + E)); PARDNN Sec. 5.3.1 and Table 6). The recomputed paths are
    the "primaries" (``k`` = their number); when ``deadline`` passes first, the nodes left
    are sliced as secondaries (levels computed once)."""
    return slice_graph(graph, w, c, None, deadline=deadline)
