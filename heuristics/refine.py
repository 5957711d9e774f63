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

With ``kicks > 0`` the descent is iterated (an iterated local search, the
large-neighbourhood step around an incumbent): a *kick* moves the units of a stretch of
the schedule's critical chain (:func:`critical_chain`: the nodes whose finish, through a
predecessor's output or the device's previous node, set the makespan) to one other
device, then descends over those units and their neighbours' (each a full simulation
again); the result is kept only if it beats the best so far, else every device is put
back. Each kick's descent makes at most :data:`KICK_ROUNDS` rounds. It stops after
``min(kicks, max(10, units / 8))`` kicks in a row that improve nothing, or at the time
limit. The chain is where a shorter makespan must come from: a move off it cannot end
the last node earlier unless it frees a device or a link the chain waits for, which the
neighbours' descent tries.
"""

from __future__ import annotations

import time

import numpy as np

from dnnplace.evaluation.simulate import SimResult, simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels

__all__ = ["KICK_ROUNDS", "critical_chain", "refine_placement"]

KICK_ROUNDS = 2
"""Rounds of moves after a kick: the descent around a kicked stretch stays local."""


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


def critical_chain(sim: SimResult) -> np.ndarray:
    """The nodes of a simulated schedule that set its makespan, first to last: from the
    node that finishes last, repeatedly the node that held it up -- the previous node of
    its device where that finished at its start and no input came later, else the
    predecessor that finished last (its output, sent or not, arrived last) -- until a node
    that started at 0. ``O((n + m) log(n + m))`` (the sorts)."""
    sch = sim.schedule
    g = sch.placement.graph
    if g.n == 0:
        return np.zeros(0, dtype=np.int64)
    start, finish = sch.start, sch.finish
    prev = np.full(g.n, -1, dtype=np.int64)
    for seq in sch.device_order():
        prev[seq[1:]] = seq[:-1]
    late = np.full(g.n, -1, dtype=np.int64)  # the predecessor of each node that finished last
    by = np.lexsort((finish[g.src], g.dst))
    last = by[np.r_[g.dst[by][1:] != g.dst[by][:-1], True]] if g.m else by
    late[g.dst[last]] = g.src[last]
    out = [int(np.argmax(finish))]
    u = out[0]
    while start[u] > 0 and len(out) <= g.n:
        p, q = int(prev[u]), int(late[u])
        if p >= 0 and finish[p] >= start[u] * (1 - 1e-12) and (q < 0 or finish[p] >= finish[q]):
            u = p
        elif q >= 0:
            u = q
        else:
            break
        out.append(u)
    return np.asarray(out[::-1], dtype=np.int64)


class _Moves:
    """Unit moves of one placement: the units, where each may go, the memory they use,
    and the simulated makespan of the current devices."""

    def __init__(self, graph: OpGraph, cluster: Cluster, device: np.ndarray, units: np.ndarray | None,
                 policy: str, congestion: bool):
        self.graph, self.cluster, self.policy, self.congestion = graph, cluster, policy, congestion
        self.device = np.asarray(device, dtype=np.int64).copy()
        self.labels = colocation_labels(graph) if units is None else _with_groups(np.asarray(units), graph.colocation)
        k = self.k = int(self.labels.max()) + 1 if self.labels.size else 0
        comp = cluster.compute_matrix(graph)
        self.allowed = np.ones((k, cluster.size), dtype=bool)
        np.logical_and.at(self.allowed, self.labels, ~np.isnan(comp))
        self.umem = np.bincount(self.labels, weights=graph.memory, minlength=k)
        self.work = np.bincount(self.labels, weights=np.nan_to_num(comp[np.arange(graph.n), self.device]),
                                minlength=k)
        self.by_unit = np.argsort(self.labels, kind="stable")
        self.ptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.labels, minlength=k), out=self.ptr[1:])
        self.cap = np.asarray(cluster.memory, dtype=np.float64)
        self.used = np.bincount(self.device, weights=graph.memory, minlength=cluster.size)
        self.evaluations = 0

    def simulate(self) -> SimResult:
        self.evaluations += 1
        return simulate(Placement(self.graph, self.cluster, self.device), policy=self.policy,
                        congestion=self.congestion)

    def nodes(self, u: int) -> np.ndarray:
        return self.by_unit[self.ptr[u]:self.ptr[u + 1]]

    def fits(self, u: int, d: int) -> bool:
        """Unit ``u`` may move to device ``d``: every member runs there and its memory fits."""
        return bool(self.allowed[u, d]) and self.used[d] + self.umem[u] <= self.cap[d] * (1 + 1e-12)

    def put(self, u: int, d: int) -> None:
        """Move every member of unit ``u`` to device ``d`` (a split unit joins there)."""
        nodes = self.nodes(u)
        np.subtract.at(self.used, self.device[nodes], self.graph.memory[nodes])
        self.used[d] += self.umem[u]
        self.device[nodes] = d

    def descend(self, order: list[int], best: float, info: dict, deadline: float, max_rounds: int) -> float:
        """First-improvement rounds over the units in ``order``, each against every other
        device, until a round improves nothing or the deadline; return the makespan."""
        for _ in range(max_rounds):
            info["rounds"] += 1
            improved = False
            for u in order:
                nodes = self.nodes(u)
                here = int(self.device[nodes[0]])
                if (self.device[nodes] != here).any():
                    continue  # a unit its start splits (e.g. a coarse node under a list schedule) stays put
                for d in range(self.cluster.size):
                    if d == here or not self.fits(u, d):
                        continue
                    self.put(u, d)
                    ms = self.simulate().makespan
                    if ms < best * (1 - 1e-9):
                        best, here = ms, d
                        improved = True
                        info["moves"] += 1
                    else:
                        self.put(u, here)
                    if time.perf_counter() > deadline:
                        info["time_limited"] = True
                        return best
            if not improved:
                break
        return best

    def kick(self, rng: np.random.Generator) -> list[int] | None:
        """Move the units of a random stretch of the critical chain to one other device
        they all fit on; return the units to descend over next (those and their graph
        neighbours'), or ``None`` where no device takes them."""
        g = self.graph
        chain = critical_chain(self.simulate())
        c, r = int(rng.integers(chain.size)), int(rng.integers(0, 6))
        stretch = chain[max(0, c - r):c + r + 1]
        moved = np.unique(self.labels[stretch]).tolist()
        targets = [d for d in rng.permutation(self.cluster.size).tolist()
                   if any(int(self.device[self.nodes(u)[0]]) != d for u in moved)]
        for d in targets:
            if all(self.fits(u, d) or int(self.device[self.nodes(u)[0]]) == d for u in moved):
                for u in moved:
                    self.put(u, d)
                members = np.concatenate([self.nodes(u) for u in moved])
                touching = np.isin(g.src, members) | np.isin(g.dst, members)
                near = np.unique(self.labels[np.concatenate([g.src[touching], g.dst[touching]])])
                return moved + np.setdiff1d(near, moved).tolist()
        return None


def refine_placement(graph: OpGraph, cluster: Cluster, device: np.ndarray, *, units: np.ndarray | None = None,
                     policy: str = "critical_path", congestion: bool = True, time_limit: float = 10.0,
                     max_rounds: int = 20, seed: int = 0, kicks: int = 0) -> tuple[np.ndarray, float, dict]:
    """Improve ``device`` by unit moves, then (``kicks > 0``) by kicks and descents; return
    the device array, its simulated makespan under ``policy`` and a summary (``rounds``,
    ``moves``, ``evaluations``, ``seconds``, ``start_makespan``, ``kicks``,
    ``kicks_kept``).

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
    deadline = t0 + time_limit
    mv = _Moves(graph, cluster, device, units, policy, congestion)
    best = mv.simulate().makespan
    info = {"start_makespan": best, "rounds": 0, "moves": 0, "kicks": 0, "kicks_kept": 0, "time_limited": False}
    rng = np.random.default_rng(seed)
    best = mv.descend(np.lexsort((rng.permutation(mv.k), -mv.work)).tolist(), best, info, deadline, max_rounds)
    failed, stall = 0, min(kicks, max(10, mv.k // 8))
    while failed < stall and graph.n and time.perf_counter() < deadline:
        kept, kept_used = mv.device.copy(), mv.used.copy()
        near = mv.kick(rng)
        info["kicks"] += 1
        if near is None:
            failed += 1
            continue
        ms = mv.descend(near, mv.simulate().makespan, info, deadline, KICK_ROUNDS)
        if ms < best * (1 - 1e-9):
            best, failed = ms, 0
            info["kicks_kept"] += 1
        else:
            mv.device[:], mv.used[:] = kept, kept_used
            failed += 1
    info["evaluations"] = mv.evaluations
    info["seconds"] = time.perf_counter() - t0
    return mv.device, best, info
