"""What a list scheduler builds (:mod:`dnnplace.heuristics.list_scheduling`): the mutable
:class:`ScheduleState` (device timelines, link free times, memory used, data-ready
times, on plain Python lists for fast scalar access) and its result, a
:class:`ListSchedule`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.memory import repair_static_memory
from dnnplace.heuristics.timeline import Timeline

__all__ = ["ListSchedule", "ScheduleState"]


@dataclass(frozen=True, eq=False)
class ListSchedule:
    """A list schedule: placement, the scheduler's start times and a replayable order."""

    placement: Placement
    start: np.ndarray
    finish: np.ndarray
    algorithm: str
    extra: dict = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        """The scheduler's own makespan (the simulator's replay may differ slightly)."""
        return float(self.finish.max()) if self.finish.size else 0.0

    @property
    def priorities(self) -> np.ndarray:
        """Rank of every node by start time, ties by topological position."""
        g = self.placement.graph
        rank = np.empty(g.n, dtype=np.int64)
        rank[np.lexsort((g.topo_position, self.start))] = np.arange(g.n)
        return rank


class ScheduleState:
    """Mutable scheduling state on plain Python lists (fast scalar access)."""

    def __init__(self, graph: OpGraph, cluster: Cluster, congestion: bool, insertion: bool):
        self.g, self.cl = graph, cluster
        self.n, self.D = graph.n, cluster.size
        comp = cluster.compute_matrix(graph)
        if np.any(np.all(np.isnan(comp), axis=1)):
            i = int(np.flatnonzero(np.all(np.isnan(comp), axis=1))[0])
            raise InputError(f"{graph._node(i)}: no device of cluster {cluster.name!r} can run it")
        self.p = comp.tolist()
        self.allowed = [[d for d in range(self.D) if not math.isnan(row[d])] for row in self.p]
        self.b0, self.b1, self.cf = cluster.beta0.tolist(), cluster.beta1.tolist(), cluster.cost_factor.tolist()
        self.ebytes, self.ecost = graph.edge_bytes.tolist(), graph.edge_cost.tolist()
        self.in_ptr, self.in_nbr, self.in_eid = graph.in_ptr.tolist(), graph.in_nbr.tolist(), graph.in_eid.tolist()
        self.mem = graph.memory.tolist()
        self.cap = cluster.memory.tolist()
        self.used = [0.0] * self.D
        self.dev = [-1] * self.n
        self.start = [0.0] * self.n
        self.fin = [0.0] * self.n
        self.timeline = Timeline(self.D, insertion=insertion)
        self.link_free = [[0.0] * self.D for _ in range(self.D)]
        self.congestion, self.insertion = congestion, insertion
        # colocation: the device of the first placed member binds the group
        self.coloc = graph.colocation.tolist()
        self.group_dev: dict[int, int] = {}
        # a group's whole memory is reserved when its first member is placed
        self.need = list(self.mem)
        co = graph.colocation
        if (co >= 0).any():
            gm = np.bincount(co[co >= 0], weights=graph.memory[co >= 0])
            for i, c in enumerate(self.coloc):
                if c >= 0:
                    self.need[i] = float(gm[c])
            common: dict[int, set] = {}
            for i, c in enumerate(self.coloc):
                if c >= 0:
                    common[c] = common.get(c, set(self.allowed[i])) & set(self.allowed[i])
            for i, c in enumerate(self.coloc):
                if c >= 0:
                    self.allowed[i] = sorted(common[c])
            if any(not a for a in self.allowed):
                raise InputError("a colocation group has no device that can run all its members")

    def tt(self, e: int, a: int, b: int) -> float:
        if a == b:
            return 0.0
        c = self.ecost[e]
        if c != c:  # NaN: link model
            return self.b0[a][b] + self.b1[a][b] * self.ebytes[e]
        return self.cf[a][b] * c

    def candidates(self, v: int, memory: bool = True) -> list[int]:
        """Devices that can run ``v``, respect its colocation group and (if possible) memory."""
        grp = self.coloc[v]
        if grp >= 0 and grp in self.group_dev:
            return [self.group_dev[grp]]
        devs = self.allowed[v]
        if memory:
            fit = [d for d in devs if self.used[d] + self.need[v] <= self.cap[d]]
            if fit:
                return fit
            return [max(devs, key=lambda d: self.cap[d] - self.used[d])]
        return devs

    def ready_time(self, v: int, d: int) -> tuple[float, list[tuple[int, int, float, float]]]:
        """Data-ready time of ``v`` on ``d`` and the transfers it needs (tentative): the
        in-edges in order of their producers' finish times, each transfer queued behind
        the link's (with ``congestion``)."""
        lo, hi = self.in_ptr[v], self.in_ptr[v + 1]
        ready = 0.0
        xfers = []
        if lo == hi:
            return ready, xfers
        fin, dev, nbr = self.fin, self.dev, self.in_nbr
        ins = range(lo, hi) if hi - lo == 1 else sorted(range(lo, hi), key=lambda k: fin[nbr[k]])
        local_free: dict[int, float] = {}
        for k in ins:
            u = nbr[k]
            a = dev[u]
            t = fin[u]
            if a != d:
                dur = self.tt(self.in_eid[k], a, d)
                s = t
                if self.congestion:
                    lf = local_free.get(a, self.link_free[a][d])
                    s = max(s, lf)
                    local_free[a] = s + dur
                t = s + dur
                xfers.append((a, d, s, t))
            if t > ready:
                ready = t
        return ready, xfers

    def evaluate(self, v: int, d: int) -> tuple[float, float, list]:
        ready, xf = self.ready_time(v, d)
        s = self.timeline.earliest_slot(d, ready, self.p[v][d])
        return s, s + self.p[v][d], xf

    def commit(self, v: int, d: int, s: float, xfers: list) -> None:
        f = s + self.p[v][d]
        self.dev[v], self.start[v], self.fin[v] = d, s, f
        self.timeline.reserve(d, s, f)
        grp = self.coloc[v]
        if grp < 0:
            self.used[d] += self.mem[v]
        elif grp not in self.group_dev:
            self.group_dev[grp] = d
            self.used[d] += self.need[v]
        for a, b, _s, t in xfers:
            if t > self.link_free[a][b]:
                self.link_free[a][b] = t

    def result(self, name: str, memory: bool = True, **extra: Any) -> ListSchedule:
        """The schedule; with ``memory``, units on overflowing devices are moved where they
        fit (:func:`~dnnplace.heuristics.memory.repair_static_memory`; the order, ranked by
        start time, stays a valid replay order). ``extra["memory_repairs"]`` counts the moves."""
        dev = np.asarray(self.dev, dtype=np.int64)
        if memory:
            dev, moves = repair_static_memory(self.g, self.cl, dev)
            extra["memory_repairs"] = moves
        return ListSchedule(Placement(self.g, self.cl, dev), np.asarray(self.start), np.asarray(self.fin), name,
                            dict(extra))
