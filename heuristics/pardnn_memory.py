"""PARDNN Step 2: memory heuristics I and II
(Qararyah et al. 2021, Sec. 3.2, Eqs. 2-5).

The memory model and the tracker are :mod:`dnnplace.heuristics.pardnn_tracker`'s (Eq. 2,
:func:`~dnnplace.heuristics.pardnn_tracker.track`, and Table 2's memory potential).

Heuristic I (emulation-based; it guarantees ``M_cons <= cap_eff`` when it succeeds)
-----------------------------------------------------------------------------------
Emulate the TensorFlow scheduler (``simulate(policy="fifo", congestion=False)``), find
the first ``(t*, d)`` with ``M_cons(d, t*) > cap_eff(d)``, overflow ``O``; solve the 0-1
min-knapsack (Eq. 3) ``min sum c_j x_j`` s.t. ``sum a_j x_j >= O`` greedily over the
colocation units ``j`` on ``d`` with potential ``a_j > 0``, cost ``c_j`` = Eq. 4's
``move_cost`` (compute plus the comm of its edges to nodes on ``d``), from two heaps
(sorted orders: their keys do not change within an event): ``c/a`` and, for ``a > O``,
``c``; the top with the smaller ``c`` moves (the other stays)
to the target device with the most headroom ``cap_eff - peak`` that holds ``a`` and runs
every member; a unit no device can take is dropped for good. Moved units never move
again. Then re-emulate (one pass per overflow event, P7) until no overflow (success) or
the heaps run dry (failure: the best placement seen, by total overflow, is returned).
Each emulation is O(V + E); at most one per moved unit, O(V^2) in the worst case
(Table 1). One emulation serves all overflow events it shows (in time order, each move
taking the unit's copies off the device's levels as an estimate); the next emulation
checks, so success is still only declared on an emulated schedule without overflow.

Heuristic II (balancing; no guarantee)
--------------------------------------
(i) :func:`chunk_critical_path`, after slicing: when ``|P_1| / (|P_2| + 1) > 10`` or
``mem(P_1) > cap_eff``, cut ``P_1`` into ``K`` contiguous chunks of about equal memory;
``P_1`` keeps the first, the ``j``-th goes to the ``j``-th shortest other primary.
(ii) :func:`balance_residuals`, after mapping: the score
``r_pe = K/2 (res(pe)/res_total + nor(pe)/nor_total)`` (Eq. 5); while the lightest
partition has ``r < 1``, the largest residual unit of the heaviest partition that does
not overshoot moves to it; each unit moves at most once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels
from dnnplace.heuristics.pardnn_slicing import Slicing
from dnnplace.heuristics.pardnn_tracker import MemoryTrace, tensor_bytes, track

__all__ = ["MemoryOutcome", "memory_heuristic_i", "chunk_critical_path",
           "balance_residuals", "residual_scores", "MARGIN"]

MARGIN = 0.1  # Sec. 4: "we spare 10% of the device memory", the only tuned parameter


# ---------------------------------------------------------------------------- heuristic I
@dataclass
class MemoryOutcome:
    """What heuristic I did: ``success`` (no emulated overflow of ``cap_eff``), units
    and nodes moved, emulations run, the emulated peak per device of the returned
    placement, and whether it stopped at its time limit."""

    success: bool
    moved_units: int = 0
    moved_nodes: int = 0
    emulations: int = 0
    peak: np.ndarray | None = None
    timed_out: bool = False
    knapsack: list = field(default_factory=list)  # per overflow event: (O, sum of a chosen, sum of c chosen)


def _move_costs(graph: OpGraph, w: np.ndarray, c: np.ndarray, device: np.ndarray) -> np.ndarray:
    """Eq. 4 per node: ``comp(n)`` plus the comm of its edges to nodes on its device."""
    same = device[graph.src] == device[graph.dst]
    cost = w.astype(np.float64).copy()
    np.add.at(cost, graph.src[same], c[same])
    np.add.at(cost, graph.dst[same], c[same])
    return cost


class _Levels:
    """The per-device memory levels of one emulation, edited as units leave a device
    during one pass of heuristic I (an estimate until the next emulation checks it).
    Levels only decrease, so each device keeps a cursor before which nothing overflows."""

    _BLOCK = 2048

    def __init__(self, tr: MemoryTrace, D: int):
        t, d, level = tr._events
        self.pers = tr.persistent.copy()
        self.times, self.level, self.last = [], [], []
        for k in range(D):
            sel = d == k
            tk = t[sel]
            self.times.append(tk)
            self.level.append(level[sel].copy())
            self.last.append(np.searchsorted(tk, tk, "right") - 1)  # state after all events at a time
        self.cursor = [0] * D

    def _first(self, k: int, cap: float) -> int | None:
        tk, lev, last = self.times[k], self.level[k], self.last[k]
        i = self.cursor[k]
        while i < tk.size:
            state = lev[last[i:i + self._BLOCK]] + self.pers[k]
            over = np.flatnonzero(state > cap * (1 + 1e-12))
            if over.size:
                self.cursor[k] = i + int(over[0])
                return self.cursor[k]
            i += self._BLOCK
        self.cursor[k] = tk.size
        return None

    def first_over(self, cap: np.ndarray) -> tuple[float, int, float] | None:
        best = None
        for k in range(len(self.times)):
            i = self._first(k, float(cap[k]))
            if i is not None:
                cand = (float(self.times[k][i]), k, float(self.level[k][self.last[k][i]] + self.pers[k]))
            elif self.times[k].size == 0 and self.pers[k] > cap[k] * (1 + 1e-12):
                cand = (0.0, k, float(self.pers[k]))
            else:
                continue
            if best is None or cand[:2] < best[:2]:
                best = cand
        return best

    def remove(self, k: int, begin: float, end: float, nbytes: float) -> None:
        tk = self.times[k]
        self.level[k][np.searchsorted(tk, begin, "left"):np.searchsorted(tk, end, "left")] -= nbytes


def memory_heuristic_i(graph: OpGraph, cluster: Cluster, device: np.ndarray, cap_eff: np.ndarray, *,
                       w: np.ndarray, c: np.ndarray, targets: np.ndarray, congestion: bool = False,
                       deadline: float | None = None) -> tuple[np.ndarray, MemoryOutcome]:
    """Heuristic I (see the module docstring): ``(device, outcome)``; on failure the
    placement with the least total emulated overflow seen.

    One emulation serves a whole *pass*: its overflow events are handled in time order,
    each unit moved taking its tensor copies and residual bytes off the device's levels
    (an estimate), and the next emulation checks the result; success is only declared by
    an emulation without overflow, so the guarantee holds. Units moved in a pass are never
    moved again, so every pass moves at least one new unit or stops.
    """
    device = np.asarray(device, dtype=np.int64).copy()
    units = _Units(graph, cluster, targets)
    out = MemoryOutcome(success=False)
    best, best_over = device.copy(), np.inf
    while True:
        res = simulate(Placement(graph, cluster, device), policy="fifo", congestion=congestion)
        out.emulations += 1
        tr = track(res)
        over = float(np.maximum(tr.peak - cap_eff, 0.0).sum())
        if over < best_over:
            best, best_over, out.peak = device.copy(), over, tr.peak
        if tr.first_overflow(cap_eff) is None:
            out.success = True
            return device, out
        if deadline is not None and time.perf_counter() > deadline:
            out.timed_out = True
            return best, out
        if not _one_pass(graph, tr, device, cap_eff, w, c, units, out):  # an overflow no unit could cover
            return best, out


class _Units:
    """Colocation units (a group, or a single node): members, where each can run, which
    have been moved or dropped (``frozen``: never a candidate again)."""

    def __init__(self, graph: OpGraph, cluster: Cluster, targets: np.ndarray):
        self.labels = labels = colocation_labels(graph)
        self.k = k = int(labels.max()) + 1 if graph.n else 0
        self.members = np.argsort(labels, kind="stable")
        self.ptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.bincount(labels, minlength=k), out=self.ptr[1:])
        self.runs = np.ones((k, cluster.size), dtype=bool)
        np.logical_and.at(self.runs, labels, ~np.isnan(cluster.compute_matrix(graph)))
        self.is_target = np.zeros(cluster.size, dtype=bool)
        self.is_target[targets] = True
        self.frozen = np.zeros(k, dtype=bool)
        self.pers = np.bincount(labels, weights=graph.persistent_bytes, minlength=k)

    def of(self, u: int) -> np.ndarray:
        return self.members[self.ptr[u]:self.ptr[u + 1]]

    def whole_device(self, device: np.ndarray) -> np.ndarray:
        """The device of each unit, -1 where its members are split."""
        lo = np.full(self.k, np.iinfo(np.int64).max)
        hi = np.full(self.k, -1)
        np.minimum.at(lo, self.labels, device)
        np.maximum.at(hi, self.labels, device)
        return np.where(lo == hi, hi, -1)


def _csr_copies(tr: MemoryTrace, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the copies each node owns or holds (``ptr``, copy ids)."""
    idx = np.flatnonzero(tr.nbytes > 0)
    extra = idx[tr.holder[idx] != tr.owner[idx]]
    keys = np.concatenate([tr.owner[idx], tr.holder[extra]])
    ids = np.concatenate([idx, extra])
    o = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, ids[o]


def _one_pass(graph: OpGraph, tr: MemoryTrace, device: np.ndarray, cap_eff: np.ndarray, w: np.ndarray,
              c: np.ndarray, units: _Units, out: MemoryOutcome) -> bool:
    """Handle the overflow events of one emulation in time order (moves applied to
    ``device`` and ``units.frozen``). An event that cannot be covered ends the pass: True
    (re-emulate) when this pass moved units before it, whose estimated headroom may be
    stale (the units it dropped become candidates again), False when it is the pass's first.
    """
    D = cap_eff.size
    lv = _Levels(tr, D)
    labels = units.labels
    u_cost = np.bincount(labels, weights=_move_costs(graph, w, c, device), minlength=units.k)
    udev = units.whole_device(device)
    headroom = cap_eff - tr.peak
    gone = np.zeros(tr.nbytes.size, dtype=bool)  # copies taken off their device in this pass
    c_ptr, c_ids = _csr_copies(tr, graph.n)
    on_dev = [np.flatnonzero((tr.dev == k) & (tr.nbytes > 0)) for k in range(D)]
    residual = [np.flatnonzero((udev == k) & (units.pers > 0)) for k in range(D)]
    pass_start = out.moved_units
    while True:
        event_start = out.moved_units
        ev = lv.first_over(cap_eff)
        if ev is None:
            return True
        t_star, d, level = ev
        need = level - cap_eff[d]
        cp = on_dev[d]
        live = cp[(tr.begin[cp] <= t_star) & (tr.end[cp] > t_star) & ~gone[cp]]
        both = tr.holder[live] != tr.owner[live]
        cu = np.concatenate([labels[tr.owner[live]], labels[tr.holder[live[both]]], residual[d]])
        ca = np.concatenate([tr.nbytes[live], tr.nbytes[live[both]], units.pers[residual[d]]])
        cand, inv = np.unique(cu, return_inverse=True)
        a = np.bincount(inv, weights=ca, minlength=cand.size)
        keep = (a > 0) & ~units.frozen[cand] & (udev[cand] == d)
        cand, a = cand[keep], a[keep]
        cost = u_cost[cand]
        by_ratio = cand[np.lexsort((cost, cost / a))].tolist()
        big = a > need
        by_cost = cand[big][np.argsort(cost[big], kind="stable")].tolist()
        a_of = dict(zip(cand.tolist(), a.tolist()))
        dropped = []
        i1 = i2 = 0
        got_a = got_c = 0.0
        while need > 0:
            while i1 < len(by_ratio) and units.frozen[by_ratio[i1]]:
                i1 += 1
            while i2 < len(by_cost) and units.frozen[by_cost[i2]]:
                i2 += 1
            if i1 == len(by_ratio) and i2 == len(by_cost):
                break
            if i1 == len(by_ratio) or (i2 < len(by_cost) and u_cost[by_cost[i2]] < u_cost[by_ratio[i1]]):
                u = by_cost[i2]
            else:
                u = by_ratio[i1]
            units.frozen[u] = True  # moved now, or dropped for good when no device takes it
            au = a_of[u]
            ok = units.is_target & units.runs[u] & (headroom >= au)
            ok[d] = False
            if not ok.any():
                dropped.append(u)
                continue
            tgt = int(np.flatnonzero(ok)[np.argmax(headroom[ok])])
            mem = units.of(u)
            device[mem] = tgt
            udev[u] = tgt
            headroom[tgt] -= au
            need -= au
            got_a += au
            got_c += float(u_cost[u])
            out.moved_units += 1
            out.moved_nodes += int(mem.size)
            for v in mem.tolist():  # its copies and residual bytes leave d (estimate)
                for i in c_ids[c_ptr[v]:c_ptr[v + 1]].tolist():
                    if tr.dev[i] == d and not gone[i]:
                        gone[i] = True
                        lv.remove(d, float(tr.begin[i]), float(tr.end[i]), float(tr.nbytes[i]))
            lv.pers[d] -= float(units.pers[u])
        out.knapsack.append((float(level - cap_eff[d]), got_a, got_c))
        if need > 0:  # the heaps ran dry
            if event_start == pass_start:
                return False
            units.frozen[dropped] = False
            return True


# ---------------------------------------------------------------------------- heuristic II
def _node_memory(graph: OpGraph) -> np.ndarray:
    return graph.persistent_bytes + tensor_bytes(graph)


def chunk_critical_path(slicing: Slicing, graph: OpGraph, cap_eff: float) -> tuple[Slicing, bool]:
    """Heuristic II (i): cut a dominant first primary into ``K`` chunks of about equal
    memory, handed to the shortest primaries (see the module docstring). Returns the
    new slicing and whether it cut."""
    prim = slicing.primaries
    K = slicing.k
    if K < 2 or prim[0].size < 2:
        return slicing, False
    mem = _node_memory(graph)
    p1 = prim[0]
    if not (p1.size / (prim[1].size + 1) > 10 or float(mem[p1].sum()) > cap_eff):
        return slicing, False
    cum = np.cumsum(mem[p1])
    total = cum[-1]
    chunk = np.minimum((K * (cum - mem[p1] / 2) / total).astype(np.int64), K - 1) if total > 0 else \
        np.minimum(np.arange(p1.size) * K // p1.size, K - 1)
    shortest = sorted(range(1, K), key=lambda j: (prim[j].size, j))
    new = [p1[chunk == 0]] + [None] * (K - 1)
    for j, p in enumerate(shortest, start=1):
        new[p] = np.concatenate([prim[p], p1[chunk == j]])
    clusters = new + slicing.secondaries
    cluster_of = slicing.cluster_of.copy()
    for j, p in enumerate(new):
        cluster_of[p] = j
    return Slicing(clusters, K, cluster_of), True


def residual_scores(graph: OpGraph, device: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Eq. 5's ``r_pe = K/2 (res(pe)/res_total + nor(pe)/nor_total)`` for the devices ``parts``."""
    K = parts.size
    res = np.array([graph.persistent_bytes[device == p].sum() for p in parts])
    nor_b = tensor_bytes(graph)
    nor = np.array([nor_b[device == p].sum() for p in parts])
    r = np.zeros(K)
    if res.sum() > 0:
        r += res / res.sum()
    if nor.sum() > 0:
        r += nor / nor.sum()
    return K / 2 * r


def balance_residuals(graph: OpGraph, cluster: Cluster, device: np.ndarray,
                      parts: np.ndarray) -> tuple[np.ndarray, int]:
    """Heuristic II (ii): move residual units from the heaviest to the lightest partition
    until every ``r_pe`` is 1 or no move helps; ``(device, units moved)``.

    Examples
    --------
    The paper's example: partition 0 holds 70 % of the normal and 60 % of the residual
    memory (six 10 % variables), partition 1 the rest; three variables move and both
    scores become 1 (70 %/30 % and 30 %/70 %).

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids=range(12), kinds=["gpu"], compute=[[1.0]] * 12, memory=[0] * 12, src=[], dst=[],
    ...             output_bytes=[70, 30] + [0] * 10, persistent_bytes=[0, 0] + [10] * 10)
    >>> dev = np.array([0, 1] + [0] * 6 + [1] * 4)
    >>> new, moved = balance_residuals(g, Cluster.single_host(2, with_cpu=False), dev, np.array([0, 1]))
    >>> moved, residual_scores(g, new, np.array([0, 1])).round(6).tolist()
    (3, [1.0, 1.0])
    """
    device = np.asarray(device, dtype=np.int64).copy()
    K = parts.size
    res_total = float(graph.persistent_bytes.sum())
    if K < 2 or res_total <= 0:
        return device, 0
    labels = colocation_labels(graph)
    n_units = int(labels.max()) + 1
    u_res = np.bincount(labels, weights=graph.persistent_bytes, minlength=n_units)
    nor_b = tensor_bytes(graph)
    u_nor = np.bincount(labels, weights=nor_b, minlength=n_units)
    nor_total = float(nor_b.sum())
    runs = ~np.isnan(cluster.compute_matrix(graph))
    unit_runs = np.ones((n_units, cluster.size), dtype=bool)
    np.logical_and.at(unit_runs, labels, runs)
    udev = np.full(n_units, -1, dtype=np.int64)
    udev[labels] = device
    whole = np.bincount(labels, minlength=n_units) == np.bincount(labels[device == udev[labels]],
                                                                   minlength=n_units)
    share = K / 2 * (u_res / res_total + (u_nor / nor_total if nor_total > 0 else 0.0))
    r = residual_scores(graph, device, parts)
    moved = np.zeros(n_units, dtype=bool)
    exhausted = np.zeros(K, dtype=bool)
    moves, eps = 0, 1e-9
    while True:
        i = int(np.argmin(r))
        cand = np.flatnonzero(~exhausted & (r > 1 + eps) & (r > r[i] + eps))
        if r[i] >= 1 - eps or cand.size == 0:
            return device, moves
        h = int(cand[np.argmax(r[cand])])
        pool = np.flatnonzero((udev == parts[h]) & whole & ~moved & (u_res > 0) & unit_runs[:, parts[i]])
        pool = pool[r[i] + share[pool] < r[h] - share[pool] + eps]  # no overshoot past the donor
        if pool.size == 0:
            exhausted[h] = True
            continue
        u = int(pool[np.argmax(u_res[pool])])
        device[labels == u] = parts[i]
        udev[u] = parts[i]
        moved[u] = True
        r[h] -= share[u]
        r[i] += share[u]
        moves += 1
