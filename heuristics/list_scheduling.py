"""List scheduling for the makespan problem (SPEC 2.1): HEFT, ETF and Baechi's m-TOPO,
m-ETF and m-SCT.

Every algorithm builds a schedule node by node on a model of the cluster that matches
the simulator's semantics: a device runs one node at a time; an edge whose ends lie on
devices ``a != b`` is a transfer of ``cluster.transfer_time`` on the directed link
``(a, b)``; with ``congestion=True`` a link carries one transfer at a time (transfers are
appended to the link in the order the scheduler commits them, never inserted into an
earlier gap). Static memory (Pesto's constraint (8)) is respected: a node only goes to a
device whose remaining capacity holds it; if no device has room, the device with the
most room that can run the node is used, and a repair pass at the end moves whole units
off overflowing devices where they fit (:mod:`dnnplace.heuristics.memory`); what overflow
is left, the evaluator flags (status ``memory_infeasible``).

The result is a :class:`ListSchedule`: a placement, the scheduler's own start times and
``priorities`` (rank by start time, ties by topological position). The registered
methods report the makespan of the simulator replaying that per-device order
(``simulate(policy="order")``), which is what the evaluator re-scores; the scheduler's
internal makespan is kept in ``extra``. Any of them warm-starts the Pesto ILP
(:mod:`dnnplace.formulations.pesto`).

Algorithms
----------
``heft``
    Topcuoglu et al.: nodes by decreasing upward rank (mean compute over the devices
    that can run the node + mean transfer time), each on the device giving the earliest
    finish time, with insertion into idle gaps (``insertion=True``).
``etf``
    Hwang et al.'s Earliest Task First: repeatedly the (ready node, device) pair with
    the earliest start time, ties by the larger bottom level; insertion optional. The
    pair comes from lazy priority queues (near-linear; same choices as a full scan).
``m-topo``
    Baechi's m-TOPO: nodes in topological order fill one device after the other, each
    up to an equal share of the total memory (or its capacity); order = topological.
``m-etf``
    Baechi's m-ETF: ETF without insertion where a device is only eligible while the
    node fits in its remaining memory.
``m-sct``
    Baechi's m-SCT (Small Communication Time, Hanen-Munier SCT): each node has a
    *favourite child*; a favourite child is placed on its parent's device when it fits
    (so the large transfer is avoided), other nodes as in m-ETF. Baechi picks favourite
    children from an LP relaxation; here the favourite child of ``u`` is the successor
    with the largest transfer time whose only largest-transfer parent is ``u`` (a
    documented simplification, no LP).

References
----------
.. [HEFT] H. Topcuoglu, S. Hariri, M.-Y. Wu. "Performance-effective and low-complexity task
   scheduling for heterogeneous computing." IEEE TPDS 13(3), 2002.
.. [ETF] J.-J. Hwang, Y.-C. Chow, F. D. Anger, C.-Y. Lee. "Scheduling precedence graphs in
   systems with interprocessor communication times." SIAM J. Comput. 18(2), 1989.
.. [Baechi] B. Jeon et al. "Baechi: fast device placement of machine learning graphs."
   SoCC 2020 (as described in Pesto Sec. 5.2 and Celeritas Sec. 2).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.memory import repair_static_memory
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.timeline import Timeline

__all__ = ["ListSchedule", "heft", "etf", "m_topo", "m_etf", "m_sct", "ALGORITHMS", "best_list_schedule",
           "simulated_makespan"]


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


class _State:
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


def _upward_rank(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """HEFT's upward rank: the bottom level with mean nominal costs."""
    w, c = nominal_costs(graph, cluster, "mean")
    return blevel(graph, kind=w, comm=c)


def heft(graph: OpGraph, cluster: Cluster, *, insertion: bool = True, congestion: bool = True,
         memory: bool = True) -> ListSchedule:
    """HEFT: upward-rank order, earliest-finish device, insertion into idle gaps.

    Examples
    --------
    Two independent unit nodes on two GPUs run in parallel:

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])
    >>> heft(g, Cluster.single_host(2, with_cpu=False)).makespan
    1.0
    """
    st = _State(graph, cluster, congestion, insertion)
    rank = _upward_rank(graph, cluster)
    order = np.lexsort((graph.topo_position, -rank))
    for v in order.tolist():
        best = None
        for d in st.candidates(v, memory):
            s, f, xf = st.evaluate(v, d)
            if best is None or f < best[1] - 1e-12:
                best = (s, f, d, xf)
        st.commit(v, best[2], best[0], best[3])
    return st.result("heft", memory, insertion=insertion)


def _etf_core(graph: OpGraph, cluster: Cluster, name: str, *, insertion: bool, congestion: bool,
              memory: bool, favourite: np.ndarray | None = None) -> ListSchedule:
    """ETF selection with lazy priority queues (see :class:`_EtfQueues`)."""
    st = _State(graph, cluster, congestion, insertion)
    w, c = nominal_costs(graph, cluster, "mean")
    q = _EtfQueues(st, blevel(graph, kind=w, comm=c), memory, favourite)
    indeg = np.bincount(graph.dst, minlength=graph.n).tolist()
    optr, onbr = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    for v in range(graph.n):
        if indeg[v] == 0:
            q.activate(v)
    for _ in range(graph.n):
        v = q.commit_best()
        for k in range(optr[v], optr[v + 1]):
            x = onbr[k]
            indeg[x] -= 1
            if indeg[x] == 0:
                q.activate(x)
    return st.result(name, memory, insertion=insertion)


def _finish_twins(st: _State, bl: np.ndarray) -> set[int]:
    """Pairs ``v * D + d`` whose finish time ``T + p[v][d]`` may round to another node's
    with the same bottom level and a different duration on ``d`` (``T`` is at most the
    sum of all node and transfer times, so such durations differ by at most 4 ulp of it);
    only for these does :meth:`_EtfQueues._best_s` search the tied entries."""
    g, D = st.g, st.D
    comp = np.asarray(st.p, dtype=float).reshape(g.n, D)
    b1 = float(np.max(st.cl.beta1)) if g.m else 0.0
    tt = np.where(np.isnan(g.edge_cost), float(np.max(st.cl.beta0)) + b1 * g.edge_bytes,
                  float(np.max(st.cl.cost_factor)) * g.edge_cost) if g.m else np.zeros(0)
    horizon = float(np.nansum(np.nanmax(comp, axis=1)) + tt.sum())
    delta = 4 * np.finfo(float).eps * 2 * max(horizon, 1.0)
    twins: set[int] = set()
    for d in range(D):
        ok = np.flatnonzero(~np.isnan(comp[:, d]))
        o = ok[np.lexsort((comp[ok, d], -bl[ok]))]
        p, b = comp[o, d], bl[o]
        near = (b[1:] == b[:-1]) & (p[1:] != p[:-1]) & (p[1:] - p[:-1] <= delta)
        for i in np.flatnonzero(near).tolist():
            twins.update((int(o[i]) * D + d, int(o[i + 1]) * D + d))
    return twins


class _EtfQueues:
    """The (ready node, device) pair with the least key ``(start, -blevel, finish,
    topo position, device)`` in near-linear time, with exactly the choices of a full scan.

    A pair's start time only grows while the schedule is built (device timelines gain busy
    intervals, link free times grow, data-ready times are fixed once the predecessors are
    placed), so a stored key is a lower bound: a queue's top is recomputed and committed if
    unchanged, else pushed back with its new key. Two queues per device make that cheap
    when many ready nodes wait for the same busy device: ``E[d]`` holds pairs by their last
    computed key; ``S[d]`` holds *tail* pairs -- data ready by the end ``T_d`` of the
    device's last busy interval and no idle gap holds them -- by ``(-blevel, duration,
    topo position)``, their start being ``T_d`` whatever ``T_d`` becomes (so a busy device
    does not make them stale). A gap opens on a device (insertion) only when no eligible
    pair could start there before the committed node, so it can never hold a tail pair
    that is eligible now.

    Eligibility follows :meth:`_State.candidates` and, for m-SCT, the favourite parent's
    device; it only shrinks, except at a node's *phase* changes, each of which re-files the
    node with fresh keys under a new epoch (older entries are dropped when met):
    ``bound`` (its colocation group is placed: one device), ``sct`` (its favourite parent's
    device still fits: only that device), ``fit`` (the devices with room), ``full`` (no
    device has room: the one with the most room, which changes as memory fills; such
    nodes wait in per-(device set, device) queues of their own and only the queue of the
    current most-room device competes). Per-device heaps of the fitting nodes by memory
    need find the nodes a placement leaves without room.
    """

    def __init__(self, st: _State, bl: np.ndarray, memory: bool, favourite: np.ndarray | None):
        self.st, self.memory = st, memory
        n, D = st.n, st.D
        self.nbl = (-bl).tolist()
        self.tp = st.g.topo_position.tolist()
        self.fav_parent = [-1] * n
        if favourite is not None:
            for u, x in enumerate(favourite.tolist()):
                if x >= 0:
                    self.fav_parent[x] = u
        self.epoch = [0] * n
        self.phase = [""] * n
        self.fitcount = [0] * n
        self.placed = [False] * n
        self.twins = _finish_twins(st, bl)
        self.version = [0] * D  # bumped whenever a key on device d may change
        self.links = [0] * D  # bumped whenever a link into device d gets busier
        # main queues per device, "full" queues per (class, device); a queue = [E, S, cache]
        self.main = [[[], [], None] for _ in range(D)]
        self.full: dict[tuple[int, ...], list] = {}  # device set -> [most-room device, {d: queue}]
        self.need_heap = [[] for _ in range(D)]  # (-need, v, epoch) of nodes that fit d
        self.group_ready: dict[int, set] = {}

    # -- keys -----------------------------------------------------------------------------
    def _file(self, queue: list, v: int, d: int, ep: int, r: float | None = None) -> None:
        """Compute the pair's key and push it to the queue's E or S heap (with its
        data-ready time ``r``, valid while no link into ``d`` changes)."""
        st = self.st
        if r is None:
            r = st.ready_time(v, d)[0]
        p = st.p[v][d]
        s = st.timeline.earliest_slot(d, r, p)
        tail = st.timeline.finish(d)
        queue[2] = None
        if p > 0.0 and r <= tail and s == tail:
            heapq.heappush(queue[1], (self.nbl[v], p, self.tp[v], v, ep, r, self.links[d]))
        else:
            heapq.heappush(queue[0], (s, self.nbl[v], s + p, self.tp[v], v, ep, r, self.links[d]))

    def _ready(self, v: int, d: int, r: float, links: int) -> float:
        """The pair's data-ready time: ``r`` if no link into ``d`` changed since."""
        return r if links == self.links[d] else self.st.ready_time(v, d)[0]

    def _live(self, v: int, ep: int, d: int, main: bool) -> bool:
        if self.placed[v] or self.epoch[v] != ep:
            return False
        st = self.st
        return not (main and self.phase[v] == "fit" and st.used[d] + st.need[v] > st.cap[d])

    def _best_e(self, queue: list, d: int, main: bool) -> tuple | None:
        E = queue[0]
        st = self.st
        while E:
            s0, nbl, _f, tp, v, ep, r, links = top = E[0]
            if not self._live(v, ep, d, main):
                heapq.heappop(E)
                continue
            r = self._ready(v, d, r, links)
            s = st.timeline.earliest_slot(d, r, st.p[v][d])
            if s == s0:
                return top[:4] + (d, v)
            heapq.heappop(E)
            self._file(queue, v, d, ep, r)
        return None

    def _best_s(self, queue: list, d: int, main: bool) -> tuple | None:
        S = queue[1]
        st = self.st
        tail = st.timeline.finish(d)
        while S:
            nbl, p, tp, v, ep, r, links = S[0]
            if not self._live(v, ep, d, main):
                heapq.heappop(S)
                continue
            r = self._ready(v, d, r, links)
            if r <= tail and st.timeline.earliest_slot(d, r, p) == tail:
                break
            heapq.heappop(S)
            self._file(queue, v, d, ep, r)
        else:
            return None
        # S is ordered by duration, the key by tail + duration: where rounding makes two
        # finish times equal (only for twins), the smaller topological position decides
        f = tail + p
        if v * st.D + d not in self.twins:
            return (tail, nbl, f, tp, d, v)
        tied = []
        while S and S[0][0] == nbl and tail + S[0][1] == f:
            tied.append(heapq.heappop(S))
        best = None
        for e in tied:
            heapq.heappush(S, e)
            _, p2, tp2, v2, ep2, r2, links2 = e
            if (best is None or tp2 < best[3]) and self._live(v2, ep2, d, main):
                r2 = self._ready(v2, d, r2, links2)
                if r2 <= tail and st.timeline.earliest_slot(d, r2, p2) == tail:
                    best = (tail, nbl, f, tp2, d, v2)
        return best  # the top entry itself was checked above, so best is not None

    def _best(self, queue: list, d: int, main: bool) -> tuple | None:
        """Least current key of the queue's pairs (cached while nothing on ``d`` changed)."""
        cache = queue[2]
        E, S = queue[0], queue[1]
        top = (E[0] if E else None, S[0] if S else None)
        if cache is not None and cache[0] == self.version[d] and cache[1][0] is top[0] and cache[1][1] is top[1]:
            best = cache[2]
            if best is None or (not self.placed[best[5]] and self._phase_ok(best[5], cache[3])):
                return best
        while True:  # each may re-file pairs into the other heap
            e = self._best_e(queue, d, main)
            top_e = E[0] if E else None
            s = self._best_s(queue, d, main)
            if (E[0] if E else None) is top_e:
                break
        best = e if s is None or (e is not None and e < s) else s
        queue[2] = (self.version[d], (E[0] if E else None, S[0] if S else None), best,
                    self.epoch[best[5]] if best else 0)
        return best

    def _phase_ok(self, v: int, ep: int) -> bool:
        return self.epoch[v] == ep

    # -- phases ---------------------------------------------------------------------------
    def activate(self, v: int) -> None:
        """(Re-)file a node that became ready or changed phase, under a new epoch."""
        st = self.st
        self.epoch[v] += 1
        ep = self.epoch[v]
        grp = st.coloc[v]
        if grp >= 0:
            if grp in st.group_dev:
                self.phase[v] = "bound"
                d = st.group_dev[grp]
                self._file(self.main[d], v, d, ep)
                return
            self.group_ready.setdefault(grp, set()).add(v)
        devs = st.allowed[v]
        if not self.memory:
            self.phase[v] = "fit-free"
            for d in devs:
                self._file(self.main[d], v, d, ep)
            return
        need = st.need[v]
        fit = [d for d in devs if st.used[d] + need <= st.cap[d]]
        if not fit:
            self.phase[v] = "full"
            key = tuple(devs)
            if key not in self.full:
                self.full[key] = [self._most_room(devs), {d: [[], [], None] for d in devs}]
            queues = self.full[key][1]
            for d in devs:
                self._file(queues[d], v, d, ep)
            return
        self.fitcount[v] = len(fit)
        for d in fit:
            heapq.heappush(self.need_heap[d], (-need, v, ep))
        fp = self.fav_parent[v]
        if fp >= 0 and st.dev[fp] in fit:
            self.phase[v] = "sct"
            self._file(self.main[st.dev[fp]], v, st.dev[fp], ep)
        else:
            self.phase[v] = "fit"
            for d in fit:
                self._file(self.main[d], v, d, ep)

    def _most_room(self, devs: list[int]) -> int:
        st = self.st
        return max(devs, key=lambda d: st.cap[d] - st.used[d])

    # -- selection ------------------------------------------------------------------------
    def commit_best(self) -> int:
        """Commit the pair with the least key; return its node."""
        best = None
        for d in range(self.st.D):
            b = self._best(self.main[d], d, True)
            if b is not None and (best is None or b < best):
                best = b
        for dm, queues in self.full.values():
            b = self._best(queues[dm], dm, False)
            if b is not None and (best is None or b < best):
                best = b
        s, _, _, _, d, v = best
        st = self.st
        tail = st.timeline.finish(d)
        _, xf = st.ready_time(v, d)
        used = st.used[d]
        st.commit(v, d, s, xf)
        self.placed[v] = True
        self.version[d] += 1
        if xf and st.congestion:
            self.links[d] += 1
        if st.insertion and s > tail:  # a new idle gap [tail, s): "full" tail pairs may fit it
            for _dm, queues in self.full.values():
                if d in queues:
                    E, S = queues[d][0], queues[d][1]
                    for nbl, p, tp, x, ep, r, links in S:
                        heapq.heappush(E, (tail, nbl, tail + p, tp, x, ep, r, links))
                    S.clear()
        grp = st.coloc[v]
        if grp >= 0:
            for x in self.group_ready.pop(grp, ()):
                if x != v:
                    self.activate(x)
        if self.memory and st.used[d] != used:
            self._lost_room(d)
            for entry in self.full.values():
                entry[0] = self._most_room(list(entry[1]))
        return v

    def _lost_room(self, d: int) -> None:
        """Re-file the nodes whose phase changes now that ``d`` has less room."""
        st = self.st
        h = self.need_heap[d]
        while h and st.used[d] - h[0][0] > st.cap[d]:
            _, v, ep = heapq.heappop(h)
            if self.placed[v] or self.epoch[v] != ep:
                continue
            self.fitcount[v] -= 1
            fp = self.fav_parent[v]
            if self.fitcount[v] == 0 or (self.phase[v] == "sct" and st.dev[fp] == d):
                self.activate(v)


def etf(graph: OpGraph, cluster: Cluster, *, insertion: bool = True, congestion: bool = True,
        memory: bool = True) -> ListSchedule:
    """ETF: the ready (node, device) pair with the earliest start first (ties: larger
    bottom level, earlier finish, topological position, lower device index). The pair is
    found by lazy per-device queues (:class:`_EtfQueues`), about ``O(n D log n)`` start-time
    evaluations instead of a full scan's ``O(n * ready * D)``, with the same choices."""
    return _etf_core(graph, cluster, "etf", insertion=insertion, congestion=congestion, memory=memory)


def m_etf(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-ETF: ETF without insertion, devices eligible only while the node fits."""
    return _etf_core(graph, cluster, "m-etf", insertion=False, congestion=congestion, memory=True)


def m_sct(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-SCT: m-ETF where a favourite child follows its parent's device (see the
    module docstring for how favourite children are chosen)."""
    _, c = nominal_costs(graph, cluster, "mean")
    fav = np.full(graph.n, -1, dtype=np.int64)
    if graph.m:
        # favourite child of u: out-edge with the largest transfer time, if that child
        # does not already favour another parent (first come in edge-weight order)
        order = np.argsort(-c, kind="stable")
        taken = np.zeros(graph.n, dtype=bool)
        for e in order.tolist():
            u, v = int(graph.src[e]), int(graph.dst[e])
            if fav[u] < 0 and not taken[v] and c[e] > 0:
                fav[u] = v
                taken[v] = True
    return _etf_core(graph, cluster, "m-sct", insertion=False, congestion=congestion, memory=True, favourite=fav)


def m_topo(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-TOPO: fill devices in topological order up to an equal memory share."""
    st = _State(graph, cluster, congestion, False)
    usable = [d for d in range(cluster.size)]
    total = float(graph.memory.sum())
    share = [min(cluster.memory[d], total / max(len(usable), 1) * 1.0 + 1e-9) for d in range(cluster.size)]
    if total == 0:  # no memory information: split the compute equally instead
        w = np.nanmin(cluster.compute_matrix(graph), axis=1)
        weights, share = w.tolist(), [float(w.sum()) / cluster.size + 1e-12] * cluster.size
    else:
        weights = graph.memory.tolist()
    cur, acc = 0, 0.0
    for v in graph.topo_order.tolist():
        cands = st.candidates(v, True)
        d = cur if cur in cands else None
        if d is not None and acc + weights[v] > share[cur] and cur + 1 < cluster.size:
            nxt = [x for x in cands if x > cur]
            if nxt:
                cur, acc = nxt[0], 0.0
                d = cur
        if d is None:
            d = cands[0]
        s, f, xf = st.evaluate(v, d)
        st.commit(v, d, s, xf)
        if d == cur:
            acc += weights[v]
    return st.result("m-topo")


ALGORITHMS = {
    "heft": heft,
    "etf": etf,
    "m-topo": m_topo,
    "m-etf": m_etf,
    "m-sct": m_sct,
}


def simulated_makespan(ls: ListSchedule, *, congestion: bool = True) -> float:
    """Makespan of the simulator replaying ``ls``'s per-device order."""
    from dnnplace.graphs.simulate import simulate
    return simulate(ls.placement, policy="order", priorities=ls.priorities, congestion=congestion).makespan


def best_list_schedule(graph: OpGraph, cluster: Cluster, *, congestion: bool = True,
                       algorithms: tuple[str, ...] | None = None, max_etf_nodes: int = 3000
                       ) -> tuple[ListSchedule, float, dict[str, float]]:
    """Run several list schedulers; return the best by simulated makespan, that
    makespan and every algorithm's simulated makespan."""
    algorithms = algorithms or tuple(ALGORITHMS)
    scores: dict[str, float] = {}
    best = None
    for name in algorithms:
        if name in ("etf", "m-etf", "m-sct") and graph.n > max_etf_nodes:
            continue
        ls = ALGORITHMS[name](graph, cluster, congestion=congestion)
        ms = simulated_makespan(ls, congestion=congestion)
        scores[name] = ms
        if best is None or ms < best[1] - 1e-12:
            best = (ls, ms)
    return best[0], best[1], scores
