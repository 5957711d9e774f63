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
from dnnplace.heuristics.message_costs import Messages
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
    """Mutable scheduling state on plain Python lists (fast scalar access).

    With per-message costs (``cluster.has_message_costs``) inputs arrive and nodes take
    the time :mod:`~dnnplace.heuristics.message_costs` estimates: a new message of the
    tensor ``u`` sends to ``d`` is posted at ``FT(u) + send_overhead[dev u]`` and queues
    on its link as any transfer; a tensor already sent to ``d`` arrives with that
    message; the node runs ``w(v, d) + recv_overhead[d]`` per new message
    (:meth:`duration`). ``transfer_mode`` (default: the current one) says what a message
    is. Without message costs the state is the one it always was."""

    def __init__(self, graph: OpGraph, cluster: Cluster, congestion: bool, insertion: bool,
                 transfer_mode: str | None = None):
        self.g, self.cl = graph, cluster
        self.msg = Messages(graph, cluster, transfer_mode)
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
        the link's (with ``congestion``). A transfer is ``(a, d, start, end, message key)``;
        with message costs only new messages are transfers (class docstring)."""
        lo, hi = self.in_ptr[v], self.in_ptr[v + 1]
        ready = 0.0
        xfers = []
        if lo == hi:
            return ready, xfers
        fin, dev, nbr = self.fin, self.dev, self.in_nbr
        ins = range(lo, hi) if hi - lo == 1 else sorted(range(lo, hi), key=lambda k: fin[nbr[k]])
        local_free: dict[int, float] = {}
        if self.msg.on:
            return self._message_ready(ins, d, local_free)
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
                xfers.append((a, d, s, t, None))
            if t > ready:
                ready = t
        return ready, xfers

    def _message_ready(self, ins, d: int, local_free: dict) -> tuple[float, list]:
        """:meth:`ready_time` with message costs (:meth:`Messages.inputs
        <dnnplace.heuristics.message_costs.Messages.inputs>`)."""
        xfers: list = []

        def link(a: int, e: int, post: float) -> float:
            dur = self.tt(e, a, d)
            s = post
            if self.congestion:
                s = max(s, local_free.get(a, self.link_free[a][d]))
                local_free[a] = s + dur
            xfers.append((a, d, s, s + dur))
            return s + dur

        nbr, eid = self.in_nbr, self.in_eid
        ready, new = self.msg.inputs(((nbr[k], eid[k]) for k in ins), d, self.dev, self.fin, link)
        return ready, [x + (k,) for x, (k, _t) in zip(xfers, new)]

    def duration(self, v: int, d: int, xfers: list) -> float:
        """How long ``v`` occupies ``d`` given its transfers there (:meth:`ready_time`):
        its compute time, plus ``recv_overhead[d]`` per new message with message costs."""
        p = self.p[v][d]
        return p + self.msg.recv[d] * len(xfers) if self.msg.on and xfers else p

    def evaluate(self, v: int, d: int) -> tuple[float, float, list]:
        ready, xf = self.ready_time(v, d)
        p = self.duration(v, d, xf)
        s = self.timeline.earliest_slot(d, ready, p)
        return s, s + p, xf

    def commit(self, v: int, d: int, s: float, xfers: list) -> None:
        f = s + self.duration(v, d, xfers)
        self.dev[v], self.start[v], self.fin[v] = d, s, f
        self.timeline.reserve(d, s, f)
        grp = self.coloc[v]
        if grp < 0:
            self.used[d] += self.mem[v]
        elif grp not in self.group_dev:
            self.group_dev[grp] = d
            self.used[d] += self.need[v]
        for a, b, _s, t, key in xfers:
            if t > self.link_free[a][b]:
                self.link_free[a][b] = t
            if key is not None:
                self.msg.arrived[key] = t

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
