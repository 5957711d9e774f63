"""Clustering baselines of PARDNN's comparison (``docs/heuristics.md`` 4): Mayer et al.'s
critical-path heuristic, linear clustering with GLB mapping and EST-first order, and
DSC with GLB mapping.

All work on the ``K`` target devices of PARDNN (the GPUs,
:func:`~dnnplace.heuristics.pardnn_slicing.target_devices`) with its nominal costs
``w_bar`` (mean time on the targets) and ``c_bar`` (mean transfer time between two of
them); nodes no target runs go to the host and colocation groups follow their
largest-memory member afterwards, as for PARDNN. They ignore memory (the framework
reports static and dynamic overflow).

``cp_mayer`` (Mayer, Mayer & Laich 2017, "It's the critical path!", the CP of PARDNN
Fig. 3)
    The critical path (nominal costs) on one device; every other node, in topological
    order, on the device with the least compute assigned so far. O(V log K + E).
``glb`` (Radulescu & van Gemund 1998)
    Clusters in order of their earliest start (the smallest ``tl`` of their nodes) each
    onto the device with the least compute so far; communication is ignored, as GLB
    assumes the clustering removed the large delays. O(S log S + S K).
``lc_glb`` (Wang & Sinnen 2018; PARDNN's "LC" baseline)
    Kim's linear clustering (every cluster a recomputed critical path of the remaining
    graph, O(V (V + E)): *quadratic*, 12 h on PARDNN's 205k-node TRN), GLB, and the
    EST-first task order: nodes by earliest start ``tl`` on the clustered graph (edges
    inside a cluster at 0). ``deadline``: when it passes, the remaining nodes are cut
    into heaviest paths with levels computed once (PARDNN's secondaries), so a
    time-limited run still places every node.
``dsc_glb`` (Yang & Gerasoulis 1994, then GLB)
    Dominant Sequence Clustering on unbounded processors: free nodes (all predecessors
    examined) by decreasing priority ``tl + bl``; a node joins the cluster of the
    predecessor with the dominant incoming edge (largest ``tl(p) + w(p) + c(p, v)``),
    appended after that cluster's last node, when this lowers its ``tl``; otherwise it
    opens a cluster. ``bl`` is static (all edges at cost), ``tl`` follows the clustering.
    The DSRW look-ahead for partially free nodes is left out (documented
    simplification). O((V + E) log V).

References
----------
.. [CP] R. Mayer, C. Mayer, L. Laich. "The TensorFlow partitioning and scheduling problem:
   it's the critical path!" DIDL 2017.
.. [GLB] A. Radulescu, A. J. C. van Gemund. "GLB: a low-cost scheduling algorithm for
   distributed-memory architectures." HiPC 1998.
.. [WS] H. Wang, O. Sinnen. "List-scheduling versus cluster-scheduling." IEEE TPDS 29(8), 2018.
.. [DSC] T. Yang, A. Gerasoulis. "DSC: scheduling parallel tasks on an unbounded number of
   processors." IEEE TPDS 5(9), 1994.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, critical_path
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.memory import repair_colocation
from dnnplace.heuristics.pardnn import place_on_host
from dnnplace.heuristics.pardnn_slicing import clustered_levels, linear_clusters, target_costs, target_devices

__all__ = ["ClusterPlacement", "cp_mayer", "glb", "lc_glb", "dsc", "dsc_glb"]


@dataclass(frozen=True, eq=False)
class ClusterPlacement:
    """A placement, optionally a task order (``priorities``: lower runs first) and notes."""

    placement: Placement
    priorities: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _finish(graph: OpGraph, cluster: Cluster, device: np.ndarray, extra: dict) -> Placement:
    device, extra["host_nodes"] = place_on_host(graph, cluster, device)
    device, extra["colocation_repairs"] = repair_colocation(graph, device)
    device, _ = place_on_host(graph, cluster, device)
    return Placement(graph, cluster, device)


def cp_mayer(graph: OpGraph, cluster: Cluster) -> ClusterPlacement:
    """Mayer et al.'s CP heuristic (see the module docstring).

    >>> g = OpGraph.from_ids("abcd", [("a", "b"), ("b", "c")], kinds=["gpu"],
    ...                      compute=[[1.0], [1.0], [1.0], [2.0]], memory=[0] * 4)
    >>> cp_mayer(g, Cluster.single_host(2, with_cpu=False)).placement.device.tolist()
    [0, 0, 0, 1]
    """
    targets = target_devices(graph, cluster)
    w, c = target_costs(graph, cluster, targets)
    _, path = critical_path(graph, kind=w, comm=c)
    slot = np.full(graph.n, -1, dtype=np.int64)
    slot[path] = 0
    load = [0.0] * targets.size
    load[0] = float(w[path].sum())
    heap = [(ld, d) for d, ld in enumerate(load)]
    heapq.heapify(heap)
    wl = w.tolist()
    on_cp = slot >= 0
    for v in graph.topo_order[~on_cp[graph.topo_order]].tolist():
        ld, d = heapq.heappop(heap)
        slot[v] = d
        heapq.heappush(heap, (ld + wl[v], d))
    extra = {"critical_path_nodes": int(path.size)}
    return ClusterPlacement(_finish(graph, cluster, targets[slot], extra), extra=extra)


def glb(clusters: list[np.ndarray], w: np.ndarray, tl: np.ndarray, k: int, n: int) -> np.ndarray:
    """GLB: clusters by earliest start (ties: larger work, then index) onto the least
    loaded of ``k`` slots; the slot of every node.

    >>> glb([np.array([0]), np.array([1, 2]), np.array([3])], np.array([3.0, 1, 1, 1]),
    ...     np.array([0.0, 0, 1, 5]), 2, 4).tolist()
    [0, 1, 1, 1]
    """
    work = np.array([w[cl].sum() for cl in clusters])
    est = np.array([tl[cl].min() if cl.size else np.inf for cl in clusters])
    slot = np.zeros(n, dtype=np.int64)
    heap = [(0.0, d) for d in range(k)]
    for j in np.lexsort((np.arange(len(clusters)), -work, est)).tolist():
        ld, d = heapq.heappop(heap)
        slot[clusters[j]] = d
        heapq.heappush(heap, (ld + float(work[j]), d))
    return slot


def lc_glb(graph: OpGraph, cluster: Cluster, *, deadline: float | None = None) -> ClusterPlacement:
    """Linear clustering + GLB + EST-first order (see the module docstring)."""
    targets = target_devices(graph, cluster)
    w, c = target_costs(graph, cluster, targets)
    sl = linear_clusters(graph, w, c, deadline=deadline)
    tl, _ = clustered_levels(graph, w, c, sl.cluster_of)
    slot = glb(sl.clusters, w, tl, targets.size, graph.n)
    prio = np.empty(graph.n, dtype=np.int64)
    prio[np.lexsort((graph.topo_position, tl))] = np.arange(graph.n)
    extra = {"clusters": len(sl.clusters), "recomputed_paths": sl.k, "time_limited": len(sl.clusters) > sl.k}
    return ClusterPlacement(_finish(graph, cluster, targets[slot], extra), priorities=prio, extra=extra)


def dsc(graph: OpGraph, w: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dominant Sequence Clustering (see the module docstring): the cluster of every node
    and its ``tl`` in the clustered schedule.

    A fork ``a -> {b, c}``: ``b`` (heavy edge) joins ``a``'s cluster; ``c``, whose edge is
    cheap, would wait for ``b`` there (start 4 instead of 2) and opens its own.

    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["gpu"],
    ...                      compute=[[1.0], [3.0], [2.0]], memory=[0] * 3)
    >>> dsc(g, g.compute[:, 0], np.array([5.0, 1.0]))[0].tolist()
    [0, 0, 1]
    """
    n = graph.n
    bl = blevel(graph, kind=w, comm=c).tolist()
    wl, cl_ = w.tolist(), c.tolist()
    in_ptr, in_nbr, in_eid = graph.in_ptr.tolist(), graph.in_nbr.tolist(), graph.in_eid.tolist()
    out_ptr, out_nbr = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    pos = graph.topo_position.tolist()
    left = (graph.in_ptr[1:] - graph.in_ptr[:-1]).tolist()
    tl = [0.0] * n
    cid = [-1] * n
    ready: list[float] = []  # finish of the last node of each cluster
    heap = [(-bl[v], pos[v], v) for v in range(n) if left[v] == 0]
    heapq.heapify(heap)

    def arrivals(v: int) -> list[tuple[float, int]]:
        return [(tl[in_nbr[j]] + wl[in_nbr[j]] + cl_[in_eid[j]], in_nbr[j]) for j in range(in_ptr[v], in_ptr[v + 1])]

    while heap:
        _, _, v = heapq.heappop(heap)
        arrive = arrivals(v)
        own = max((a for a, _ in arrive), default=0.0)
        best = None
        if arrive:
            _, p = max(arrive, key=lambda x: (x[0], -pos[x[1]]))
            k = cid[p]
            t = ready[k]
            for a, q in arrive:
                t = max(t, tl[q] + wl[q] if cid[q] == k else a)
            if t < own:
                best = (t, k)
        if best is None:
            cid[v] = len(ready)
            tl[v] = own
            ready.append(own + wl[v])
        else:
            tl[v], cid[v] = best
            ready[best[1]] = best[0] + wl[v]
        for j in range(out_ptr[v], out_ptr[v + 1]):
            s = out_nbr[j]
            left[s] -= 1
            if left[s] == 0:  # free: priority tl + bl, tl as if in a cluster of its own
                heapq.heappush(heap, (-(max(a for a, _ in arrivals(s)) + bl[s]), pos[s], s))
    return np.asarray(cid, dtype=np.int64), np.asarray(tl)


def dsc_glb(graph: OpGraph, cluster: Cluster) -> ClusterPlacement:
    """DSC clusters mapped by GLB onto the targets (see the module docstring)."""
    targets = target_devices(graph, cluster)
    w, c = target_costs(graph, cluster, targets)
    cid, tl = dsc(graph, w, c)
    order = np.argsort(cid, kind="stable")
    bounds = np.flatnonzero(np.r_[True, cid[order][1:] != cid[order][:-1], True])
    clusters = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    slot = glb(clusters, w, tl, targets.size, graph.n)
    extra = {"clusters": len(clusters), "dsc_makespan_unbounded": float((tl + w).max()) if graph.n else 0.0}
    return ClusterPlacement(_finish(graph, cluster, targets[slot], extra), extra=extra)
