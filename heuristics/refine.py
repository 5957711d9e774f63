"""Refinement on the original graph: local moves of whole units between devices,
re-scored by the simulator (the last stage of Pesto's coarsen-solve-refine pipeline,
in the spirit of a multilevel partitioner's refinement).

A *unit* is a set of nodes that moves together: a colocation group, or a coarse node of
a coarsening (``units=`` labels), so a coarse answer refines at its own granularity
first; given units that cut a colocation group are joined through it (a unit is a
connected component of "same given unit or same colocation group"), so a move never
splits a group. A move puts one unit on another device that can run all its members and has the
static memory for it (docs/semantics.md 2.1; Pesto (8)); it is kept when the simulated makespan
(``policy``, link congestion as asked) drops by more than a relative ``1e-9``. Units are
tried by decreasing compute time, each against every other device, in rounds until a
round improves nothing or the time is up: first improvement, deterministic for a given
input (``seed`` only shuffles units of equal compute). Every candidate is a full
simulation, ``O(n + m)`` each; meant for graphs of up to some thousands of nodes or a
bounded ``time_limit``.
"""

from __future__ import annotations

import time

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels

__all__ = ["refine_placement"]


def _with_groups(units: np.ndarray, colocation: np.ndarray) -> np.ndarray:
    """Labels ``0..k-1`` of the connected components of "same unit or same colocation
    group" (groups cut by ``units`` join the units they touch)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    u = np.unique(units, return_inverse=True)[1]
    k = int(u.max()) + 1 if u.size else 0
    grouped = colocation >= 0
    n_grp = int(colocation.max()) + 1 if grouped.any() else 0
    adj = coo_matrix((np.ones(int(grouped.sum())), (u[grouped], k + colocation[grouped])), shape=(k + n_grp,) * 2)
    comp = connected_components(adj, directed=False)[1][u]
    return np.unique(comp, return_inverse=True)[1].astype(np.int64)


def refine_placement(graph: OpGraph, cluster: Cluster, device: np.ndarray, *, units: np.ndarray | None = None,
                     policy: str = "critical_path", congestion: bool = True, time_limit: float = 10.0,
                     max_rounds: int = 20, seed: int = 0) -> tuple[np.ndarray, float, dict]:
    """Improve ``device`` by unit moves; return the device array, its simulated makespan
    under ``policy`` and a summary (``rounds``, ``moves``, ``evaluations``, ``seconds``,
    ``start_makespan``).

    Examples
    --------
    Two independent unit-time nodes on one of two GPUs: moving one halves the makespan.

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])
    >>> dev, ms, info = refine_placement(g, Cluster.single_host(2, with_cpu=False), np.array([0, 0]))
    >>> ms, info["start_makespan"], info["moves"]
    (1.0, 2.0, 1)
    """
    t0 = time.perf_counter()
    device = np.asarray(device, dtype=np.int64).copy()
    labels = colocation_labels(graph) if units is None else _with_groups(np.asarray(units), graph.colocation)
    k = int(labels.max()) + 1 if labels.size else 0
    comp = cluster.compute_matrix(graph)
    allowed = np.ones((k, cluster.size), dtype=bool)
    np.logical_and.at(allowed, labels, ~np.isnan(comp))
    umem = np.bincount(labels, weights=graph.memory, minlength=k)
    work = np.bincount(labels, weights=np.nan_to_num(comp[np.arange(graph.n), device]), minlength=k)
    by_unit = np.argsort(labels, kind="stable")
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=ptr[1:])
    cap = np.asarray(cluster.memory, dtype=np.float64)

    def score(dev: np.ndarray) -> float:
        return simulate(Placement(graph, cluster, dev), policy=policy, congestion=congestion).makespan

    best = score(device)
    info = {"start_makespan": best, "rounds": 0, "moves": 0, "evaluations": 1}
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.permutation(k), -work))
    used = np.bincount(device, weights=graph.memory, minlength=cluster.size)
    done = False
    for _ in range(max_rounds):
        info["rounds"] += 1
        improved = False
        for u in order.tolist():
            nodes = by_unit[ptr[u]:ptr[u + 1]]
            here = int(device[nodes[0]])
            if (device[nodes] != here).any():
                continue  # a unit its start splits (e.g. a coarse node under a list schedule) stays put
            for d in range(cluster.size):
                if d == here or not allowed[u, d] or used[d] + umem[u] > cap[d] * (1 + 1e-12):
                    continue
                device[nodes] = d
                ms = score(device)
                info["evaluations"] += 1
                if ms < best * (1 - 1e-9):
                    used[here] -= umem[u]
                    used[d] += umem[u]
                    best, here = ms, d
                    improved = True
                    info["moves"] += 1
                else:
                    device[nodes] = here
                if time.perf_counter() - t0 > time_limit:
                    done = True
                    break
            if done:
                break
        if done or not improved:
            break
    info["seconds"] = time.perf_counter() - t0
    info["time_limited"] = done
    return device, best, info
