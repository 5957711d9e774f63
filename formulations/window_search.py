r"""Large-neighbourhood search with the exact engine around an incumbent schedule: a
*window* of the schedule is solved again by CP-SAT with everything outside it held, and
the result is kept only where the simulator replays it faster.

The incumbent is a placement and a total order of its nodes (``priorities``), replayed
strictly (``policy="order"``, links first come first served). A window is ``size``
consecutive nodes :math:`W` of that order (by start, ties by the dispatch sequence)
around a random node of the schedule's critical chain
(:func:`~dnnplace.heuristics.refine.critical_chain`). Outside :math:`W` every node keeps
its device, start :math:`s_u` and finish :math:`f_u`. For :math:`v \in W` the model
chooses a device :math:`x_{vd}` among those that can run it (a member of a colocation
group keeps its device) and a start :math:`S_v`, :math:`C_v = S_v + \sum_d p_{vd} x_{vd}`:

- one node at a time per device: the optional intervals :math:`[S_v, C_v)` on :math:`d`
  and the fixed intervals :math:`[s_u, f_u)` of the outside nodes there, in one
  ``NoOverlap`` (Pesto (4)/(10));
- precedence with the transfer time of the devices chosen (Pesto (1), (6), links without
  queues as in its congestion-free ablation): :math:`S_v \ge C_u + t_e(a, b)` if
  :math:`x_{ua} \wedge x_{vb}` inside :math:`W`; :math:`S_v \ge f_u + t_e(\mathrm{dev}(u), b)`
  if :math:`x_{vb}` for an input from before; :math:`C_u + t_e(a, \mathrm{dev}(w)) \le s_w`
  if :math:`x_{ua}` for an output to a node after (so nothing there has to move);
- :math:`C_v \le M`, the incumbent's makespan;
- static memory per device (Pesto (8)), in units of at least a byte and at most a
  :math:`2^{-20}` share of the largest capacity, rounded up for nodes and down for room;
- minimise :math:`z`, the makespan the window implies through the incumbent's tails:
  :math:`z \ge C_v`, :math:`z \ge C_v + t_e(a, \mathrm{dev}(w)) + M - \ell_w` if
  :math:`x_{va}` for an output to :math:`w` after the window, and
  :math:`z \ge C_v + M - \ell_y` while :math:`v` stays on its device, :math:`y` the next
  node there in the incumbent when that is after the window; :math:`\ell` is the latest
  start that keeps the incumbent's makespan :math:`M` (:func:`latest_finish`). Device
  successors inside the window are left out: the window reorders them.

Times are integers of :data:`SCALE` per ``graph.unit``, points and durations rounded
down, so the incumbent is a solution of its own window (CP-SAT's hint). The candidate (the window's
devices, every node ranked by its new start, ties by the incumbent's order) respects
every precedence (each constraint above keeps a node's rank after its inputs'), so its
strict replay cannot deadlock; the simulator replays it with the links as asked (queues,
per-message costs, the transfer mode) and it is kept only if its makespan drops by more
than a relative ``1e-9``. The model is a neighbourhood, never the judge: its transfer
times without queues and without per-message costs only choose what to try.

The window's size adapts to what CP-SAT proves: a window not solved to optimality within
``solve_seconds`` makes the next one a fifth smaller (at least :data:`MIN_SIZE` nodes), one
proven in a quarter of that a tenth larger (at most twice ``size``). The search stops
after ``min(stall, 4 * ceil(n / size))`` windows in a row that improve nothing, after the
first window where that is the whole graph, or at the time limit (each CP-SAT call gets at
most ``solve_seconds`` and the time left). Windows are drawn with ``seed`` and CP-SAT runs
on one worker, so a run repeats up to where time cuts it (a limit, a window's size). Needs
OR-Tools (``dnnplace[cpsat]``); without it the incumbent is
returned unchanged (``info["skipped"]``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from dnnplace.evaluation.simulate import SimResult, simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement, Schedule
from dnnplace.heuristics.refine import critical_chain

__all__ = ["SCALE", "latest_finish", "window_search"]

SCALE = 1e4
"""Integer time units per ``graph.unit`` in the window model (0.1 us for milliseconds)."""

MIN_SIZE = 20
"""The fewest nodes a window shrinks to."""


def latest_finish(sim: SimResult) -> np.ndarray:
    r"""Per node, the latest finish :math:`L_v` that keeps the makespan :math:`M` of a
    simulated schedule when every device keeps its order and transfers take their
    uncongested time: :math:`L_v = \min(M, L_{w'} - p_{w'}, \min_{e=(v,w)} L_w - p_w - t_e)`
    with :math:`w'` the next node on :math:`v`'s device; ``O(n + m)``, in reverse
    order of start. A node with :math:`L_v` = its finish is on a longest path."""
    sch = sim.schedule
    pl = sch.placement
    g = pl.graph
    t = pl.cluster.transfer_time(pl.device[g.src], pl.device[g.dst], g.edge_bytes, g.edge_cost)
    nxt = next_on_device(sch)
    dur, M = sch.finish - sch.start, sch.makespan
    late, late_start = np.full(g.n, M), np.empty(g.n)
    for v in np.argsort(sch.priorities())[::-1].tolist():
        lf = M if nxt[v] < 0 else min(M, late_start[nxt[v]])
        es = g.out_eid[g.out_ptr[v]:g.out_ptr[v + 1]]
        if es.size:
            lf = min(lf, float(np.min(late_start[g.dst[es]] - t[es])))
        late[v], late_start[v] = lf, lf - dur[v]
    return late


def next_on_device(sch: Schedule) -> np.ndarray:
    """Per node, the node its device runs next in the schedule ``sch`` (``-1``: its last)."""
    nxt = np.full(sch.placement.graph.n, -1, dtype=np.int64)
    for seq in sch.device_order():
        nxt[seq[:-1]] = seq[1:]
    return nxt


class _Window:
    """The CP-SAT model of one window of a schedule (module docstring)."""

    def __init__(self, sim: SimResult, window: np.ndarray, late: np.ndarray, nxt: np.ndarray, comp: np.ndarray):
        from ortools.sat.python import cp_model

        self.cp_model, self.sch, self.comp, self.nxt = cp_model, sim.schedule, comp, nxt
        g, cl = self.g, self.cl = self.sch.placement.graph, self.sch.placement.cluster
        self.inside = np.zeros(g.n, dtype=bool)
        self.inside[window] = True
        self.m = cp_model.CpModel()
        self.z = self.m.NewIntVar(0, 2 * self.at(self.sch.makespan) + 2, "")
        self.late_start = late - (self.sch.finish - self.sch.start)
        edges = np.flatnonzero(self.inside[g.src] | self.inside[g.dst])
        # every touched edge's transfer time between every pair of devices, in model units
        d = np.arange(cl.size)
        t = cl.transfer_time(d[None, :, None], d[None, None, :], g.edge_bytes[edges, None, None],
                             g.edge_cost[edges, None, None])
        self.tt = dict(zip(edges.tolist(), np.maximum(0, np.floor(t * SCALE - 1e-6)).astype(np.int64)))
        self._nodes(window, edges)
        self._held(window)
        self._edges(edges)
        self._tails(window)
        self._memory(window)
        self.m.Minimize(self.z)

    def _nodes(self, window: np.ndarray, edges: np.ndarray) -> None:
        """Device literals, starts and ends of the window's nodes, each no later than the
        makespan and the start of any node after the window it feeds; the incumbent as hint."""
        sch, g, m, at, length = self.sch, self.g, self.m, self.at, self.length
        dev = sch.placement.device
        latest = {v: sch.makespan for v in window.tolist()}
        for e in edges[~self.inside[g.dst[edges]]].tolist():
            latest[int(g.src[e])] = min(latest[int(g.src[e])], float(sch.start[g.dst[e]]))
        self.S, self.x, self.C = {}, {}, {}
        self.spans = [[] for _ in range(self.cl.size)]
        first, horizon = at(sch.start[window].min()), at(sch.makespan) + 1
        for v in window.tolist():
            where = [int(dev[v])] if g.colocation[v] >= 0 else np.flatnonzero(~np.isnan(self.comp[v])).tolist()
            S = self.S[v] = m.NewIntVar(first, horizon, "")
            x = self.x[v] = {d: m.NewBoolVar("") for d in where}
            m.AddExactlyOne(x.values())
            self.C[v] = S + sum(length(self.comp[v, d]) * lit for d, lit in x.items())
            m.Add(self.C[v] <= at(latest[v]))
            m.AddHint(S, at(sch.start[v]))
            for d, lit in x.items():
                m.AddHint(lit, int(d == dev[v]))
                if length(self.comp[v, d]) > 0:
                    self.spans[d].append(m.NewOptionalFixedSizeIntervalVar(S, length(self.comp[v, d]), lit, ""))
        self.until = max(latest.values())

    def _held(self, window: np.ndarray) -> None:
        """The intervals of the nodes outside the window that overlap its span, fixed, in
        each device's ``NoOverlap`` with the window's optional intervals."""
        sch = self.sch
        lo = sch.start[window].min()
        for u in np.flatnonzero(~self.inside & (sch.finish > lo) & (sch.start < self.until)).tolist():
            a, p = self.at(sch.start[u]), self.length(sch.finish[u] - sch.start[u])
            if p > 0:
                self.spans[int(sch.placement.device[u])].append(self.m.NewIntervalVar(a, p, a + p, ""))
        for spans in self.spans:
            if len(spans) > 1:
                self.m.AddNoOverlap(spans)

    def _transfer(self, e: int, a: int, b: int) -> int:
        return int(self.tt[e][a, b])

    def _edges(self, edges: np.ndarray) -> None:
        """Precedence with the transfer of the devices chosen, inside the window, from a node
        before it and to a node after it (whose tail then bounds the objective)."""
        sch, g, m, S, C, x = self.sch, self.g, self.m, self.S, self.C, self.x
        dev = sch.placement.device
        for e in edges.tolist():
            u, v = int(g.src[e]), int(g.dst[e])
            if self.inside[u] and self.inside[v]:
                m.Add(S[v] >= C[u])
                for a, la in x[u].items():
                    for b, lb in x[v].items():
                        if a != b:
                            m.Add(S[v] >= C[u] + self._transfer(e, a, b)).OnlyEnforceIf([la, lb])
            elif self.inside[v]:
                for b, lb in x[v].items():
                    m.Add(S[v] >= self.at(sch.finish[u]) + self._transfer(e, int(dev[u]), b)).OnlyEnforceIf(lb)
            else:
                tail = self.length(sch.makespan - self.late_start[v])
                for a, la in x[u].items():
                    t = self._transfer(e, a, int(dev[v]))
                    m.Add(C[u] + t <= self.at(sch.start[v])).OnlyEnforceIf(la)
                    m.Add(self.z >= C[u] + t + tail).OnlyEnforceIf(la)

    def _tails(self, window: np.ndarray) -> None:
        """``z`` at least every end, and an end plus the tail of the next node on the device
        where the node stays and that node is after the window."""
        dev, nxt = self.sch.placement.device, self.nxt
        for v in window.tolist():
            self.m.Add(self.z >= self.C[v])
            y, here = int(nxt[v]), int(dev[v])
            if y >= 0 and not self.inside[y] and here in self.x[v]:
                tail = self.length(self.sch.makespan - self.late_start[y])
                self.m.Add(self.z >= self.C[v] + tail).OnlyEnforceIf(self.x[v][here])

    def _memory(self, window: np.ndarray) -> None:
        """Static memory per device (Pesto (8)) in units of at least a byte, nodes rounded up
        and the room the held nodes leave rounded down."""
        g, dev = self.g, self.sch.placement.device
        cap = np.asarray(self.cl.memory, dtype=np.float64)
        used = np.bincount(dev, weights=g.memory, minlength=self.cl.size)
        q = max(1.0, float(cap[np.isfinite(cap)].max(initial=0.0)) / 2**20)
        for d in range(self.cl.size):
            on = [v for v in window.tolist() if d in self.x[v] and g.memory[v] > 0]
            if on and np.isfinite(cap[d]):
                room = cap[d] - (used[d] - g.memory[window[dev[window] == d]].sum())
                self.m.Add(sum(math.ceil(g.memory[v] / q) * self.x[v][d] for v in on) <= math.floor(room / q))

    @staticmethod
    def at(t: float) -> int:
        """A point in time in model units, rounded down."""
        return math.floor(float(t) * SCALE + 1e-6)

    @staticmethod
    def length(t: float) -> int:
        """A duration in model units, rounded down (so the incumbent, its times rounded
        down, satisfies every constraint: ``floor(a + b) >= floor(a) + floor(b)``)."""
        return max(0, math.floor(float(t) * SCALE - 1e-6))

    def solve(self, seconds: float) -> tuple[dict, dict, bool] | None:
        """New ``(devices, starts, proven)`` of the window's nodes (``proven``: CP-SAT's
        optimum of the window), or ``None`` without a solution."""
        cp = self.cp_model
        solver = cp.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.01, seconds)
        solver.parameters.num_workers = 1
        status = solver.Solve(self.m)
        if status not in (cp.OPTIMAL, cp.FEASIBLE):
            return None
        devices = {v: next(d for d, lit in x.items() if solver.Value(lit)) for v, x in self.x.items()}
        return devices, {v: solver.Value(S) for v, S in self.S.items()}, status == cp.OPTIMAL


def window_search(graph: OpGraph, cluster: Cluster, device: np.ndarray, priorities: np.ndarray, *,
                  time_limit: float = 10.0, size: int = 100, solve_seconds: float = 2.0, stall: int = 300,
                  congestion: bool = True, seed: int = 0) -> tuple[np.ndarray, np.ndarray, float, dict]:
    """Improve the schedule ``(device, priorities)`` (strict order, FCFS links) window by
    window (module docstring); return devices, priorities, the replayed makespan and a
    summary (``start_makespan``, ``windows``, ``kept``, ``seconds``, ``skipped``,
    ``last_size``).

    Examples
    --------
    Two unit-time nodes that share one of two GPUs: the window moves one to the other.

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])
    >>> dev, pr, ms, info = window_search(g, Cluster.single_host(2, with_cpu=False), np.array([0, 0]),
    ...                                   np.array([0, 1]), stall=5)
    >>> ms, info["start_makespan"], info["kept"]
    (1.0, 2.0, 1)
    """
    from dnnplace.formulations.pesto_cpsat import available

    t0 = time.perf_counter()
    deadline = t0 + time_limit

    def replay(dev, pr):
        return simulate(Placement(graph, cluster, dev), policy="order", priorities=pr, congestion=congestion)

    sim = replay(np.asarray(device, dtype=np.int64), np.asarray(priorities))
    info = {"start_makespan": sim.makespan, "windows": 0, "kept": 0, "skipped": not available() or graph.n == 0}
    rng = np.random.default_rng(seed)
    comp = cluster.compute_matrix(graph)
    failed, stall, largest = 0, min(stall, 4 * -(-graph.n // size)), 2 * size
    changed = True
    while not info["skipped"] and failed < stall and time.perf_counter() < deadline:
        sch = sim.schedule
        if changed:   # what every window of this incumbent reads
            rank, chain, late, nxt = sch.priorities(), critical_chain(sim), latest_finish(sim), next_on_device(sch)
            order, changed = np.argsort(rank), False
        at = int(rank[chain[rng.integers(chain.size)]])
        first = min(max(0, at - size // 2), max(0, graph.n - size))
        window = order[first:first + size]
        t_solve = time.perf_counter()
        found = _Window(sim, window, late, nxt, comp).solve(min(solve_seconds, deadline - t_solve))
        info["windows"] += 1
        failed += 1
        if found is None or not found[2]:
            size = max(MIN_SIZE, int(size * 0.8))          # the window was too big to prove
        elif time.perf_counter() - t_solve < solve_seconds / 4:
            size = min(largest, int(size * 1.1) + 1)      # proven quickly: try more at once
        if found is None:
            continue
        dev, when = sch.placement.device.copy(), np.floor(sch.start * SCALE + 1e-6)   # _Window.at of every start
        for v, d in found[0].items():
            dev[v], when[v] = d, found[1][v]
        pr = np.empty(graph.n, dtype=np.int64)
        pr[np.lexsort((rank, when))] = np.arange(graph.n)
        cand = replay(dev, pr)
        if cand.makespan < sim.makespan * (1 - 1e-9):
            sim, failed, changed = cand, 0, True
            info["kept"] += 1
        if window.size == graph.n:
            break   # the whole graph: nothing is held, another window is the same problem
    info["seconds"], info["last_size"] = time.perf_counter() - t0, size
    return sim.schedule.placement.device, sim.schedule.priorities(), sim.makespan, info
