"""The lazy per-device priority queues behind ETF, m-ETF and m-SCT
(:mod:`dnnplace.heuristics.list_scheduling`): the (ready node, device) pair with the
earliest start in near-linear time, with exactly the choices of a full scan (tested
against one in ``tests/test_list_scheduling.py``)."""

from __future__ import annotations

import heapq

import numpy as np

from dnnplace.heuristics.schedule_state import ScheduleState

__all__ = ["EtfQueues", "finish_twins"]


def finish_twins(st: ScheduleState, bl: np.ndarray) -> set[int]:
    """Pairs ``v * D + d`` whose finish time ``T + p[v][d]`` may round to another node's
    with the same bottom level and a different duration on ``d`` (``T`` is at most the
    sum of all node and transfer times, so such durations differ by at most 4 ulp of it);
    only for these does :meth:`EtfQueues._best_s` search the tied entries."""
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


class EtfQueues:
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

    Eligibility follows :meth:`ScheduleState.candidates
    <dnnplace.heuristics.schedule_state.ScheduleState.candidates>` and, for m-SCT, the favourite parent's
    device; it only shrinks, except at a node's *phase* changes, each of which re-files the
    node with fresh keys under a new epoch (older entries are dropped when met):
    ``bound`` (its colocation group is placed: one device), ``sct`` (its favourite parent's
    device still fits: only that device), ``fit`` (the devices with room), ``full`` (no
    device has room: the one with the most room, which changes as memory fills; such
    nodes wait in per-(device set, device) queues of their own and only the queue of the
    current most-room device competes). Per-device heaps of the fitting nodes by memory
    need find the nodes a placement leaves without room.
    """

    def __init__(self, st: ScheduleState, bl: np.ndarray, memory: bool, favourite: np.ndarray | None):
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
        self.twins = finish_twins(st, bl)
        self.version = [0] * D  # bumped whenever a key on device d may change
        self.links = [0] * D  # bumped whenever a link into device d gets busier
        # main queues per device, "full" queues per (class, device); a queue = [E, S, cache]
        self.main = [[[], [], None] for _ in range(D)]
        self.full: dict[tuple[int, ...], list] = {}  # device set -> [most-room device, {d: queue}]
        self.need_heap = [[] for _ in range(D)]  # (-need, v, epoch) of nodes that fit d
        self.group_ready: dict[int, set] = {}

    # -- keys -----------------------------------------------------------------------------
    def _file(self, queue: list, v: int, d: int, ep: int, r: float | None = None, p: float | None = None) -> None:
        """Compute the pair's key and push it to the queue's E or S heap (with its
        data-ready time ``r``, valid while no link into ``d`` changes, and its duration
        ``p``, valid until the node is re-filed)."""
        st = self.st
        if r is None:
            r, xf = st.ready_time(v, d)
            p = st.duration(v, d, xf)
        s = st.timeline.earliest_slot(d, r, p)
        tail = st.timeline.finish(d)
        queue[2] = None
        if p > 0.0 and r <= tail and s == tail:
            heapq.heappush(queue[1], (self.nbl[v], p, self.tp[v], v, ep, r, self.links[d]))
        else:
            heapq.heappush(queue[0], (s, self.nbl[v], s + p, self.tp[v], v, ep, r, self.links[d], p))

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
            s0, nbl, _f, tp, v, ep, r, links, p = top = E[0]
            if not self._live(v, ep, d, main):
                heapq.heappop(E)
                continue
            r = self._ready(v, d, r, links)
            s = st.timeline.earliest_slot(d, r, p)
            if s == s0:
                return top[:4] + (d, v)
            heapq.heappop(E)
            self._file(queue, v, d, ep, r, p)
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
            self._file(queue, v, d, ep, r, p)
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
                        heapq.heappush(E, (tail, nbl, tail + p, tp, x, ep, r, links, p))
                    S.clear()
        if st.msg.on:
            self._refile_readers(v, xf)
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

    def _refile_readers(self, v: int, xf: list) -> None:
        """With message costs: the ready nodes that read a tensor ``v``'s placement just
        brought to a device now get it with that message (earlier data, no new message
        to take in), so their keys may drop; re-file them with fresh keys."""
        st = self.st
        g = st.g
        if st.msg.per_edge:
            return  # a message per edge: no other node reads it
        for *_x, key in xf:
            u, out, _d = key
            for k in range(int(g.out_ptr[u]), int(g.out_ptr[u + 1])):
                x = int(g.out_nbr[k])
                if x != v and not self.placed[x] and self.epoch[x] > 0 and st.msg.out[int(g.out_eid[k])] == out:
                    self.activate(x)

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
