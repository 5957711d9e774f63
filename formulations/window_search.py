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

    def __init__(self, sim: SimResult, window: np.ndarray, late: np.ndarray, comp: np.ndarray):
        from ortools.sat.python import cp_model

        self.cp_model = cp_model
        sch = sim.schedule
        pl = sch.placement
        g, cl, dev = pl.graph, pl.cluster, pl.device
        self.window = window
        inside = np.zeros(g.n, dtype=bool)
        inside[window] = True
        m = self.m = cp_model.CpModel()
        u_, len_ = self.at, self.length
        t0, horizon = u_(sch.start[window].min()), u_(sch.makespan) + 1
        self.S, self.x = {}, {}
        C, spans = {}, [[] for _ in range(cl.size)]
        late_start, nxt = late - (sch.finish - sch.start), next_on_device(sch)
        edges = np.flatnonzero(inside[g.src] | inside[g.dst])
        bound = {v: sch.makespan for v in window.tolist()}
        for e in edges[~inside[g.dst[edges]]].tolist():
            bound[int(g.src[e])] = min(bound[int(g.src[e])], float(sch.start[g.dst[e]]))
        for v in window.tolist():
            where = [int(dev[v])] if g.colocation[v] >= 0 else np.flatnonzero(~np.isnan(comp[v])).tolist()
            S = self.S[v] = m.NewIntVar(t0, horizon, "")
            x = self.x[v] = {d: m.NewBoolVar("") for d in where}
            m.AddExactlyOne(x.values())
            C[v] = S + sum(len_(comp[v, d]) * lit for d, lit in x.items())
            m.Add(C[v] <= u_(bound[v]))
            m.AddHint(S, u_(sch.start[v]))
            for d, lit in x.items():
                m.AddHint(lit, int(d == dev[v]))
                if len_(comp[v, d]) > 0:
                    spans[d].append(m.NewOptionalFixedSizeIntervalVar(S, len_(comp[v, d]), lit, ""))
        lo, hi = sch.start[window].min(), max(bound.values())
        for u in np.flatnonzero(~inside & (sch.finish > lo) & (sch.start < hi)).tolist():
            a, p = u_(sch.start[u]), len_(sch.finish[u] - sch.start[u])
            if p > 0:
                spans[int(dev[u])].append(m.NewIntervalVar(a, p, a + p, ""))
        for d_spans in spans:
            if len(d_spans) > 1:
                m.AddNoOverlap(d_spans)
        z = m.NewIntVar(0, 2 * horizon, "")
        for e in edges.tolist():
            u, v = int(g.src[e]), int(g.dst[e])
            def t(a, b, e=e):
                return len_(float(cl.transfer_time(np.array([a]), np.array([b]), g.edge_bytes[e:e + 1],
                                                 g.edge_cost[e:e + 1])[0]))
            if inside[u] and inside[v]:
                m.Add(self.S[v] >= C[u])
                for a, la in self.x[u].items():
                    for b, lb in self.x[v].items():
                        if a != b:
                            m.Add(self.S[v] >= C[u] + t(a, b)).OnlyEnforceIf([la, lb])
            elif inside[v]:   # an input from a node before the window
                for b, lb in self.x[v].items():
                    m.Add(self.S[v] >= u_(sch.finish[u]) + t(int(dev[u]), b)).OnlyEnforceIf(lb)
            else:             # an output to a node after it, and the tail it starts
                for a, la in self.x[u].items():
                    m.Add(C[u] + t(a, int(dev[v])) <= u_(sch.start[v])).OnlyEnforceIf(la)
                    m.Add(z >= C[u] + t(a, int(dev[v])) + len_(sch.makespan - late_start[v])).OnlyEnforceIf(la)
        for v in window.tolist():
            m.Add(z >= C[v])
            y = int(nxt[v])
            if y >= 0 and not inside[y] and int(dev[v]) in self.x[v]:   # the next node on its device, if it stays
                m.Add(z >= C[v] + len_(sch.makespan - late_start[y])).OnlyEnforceIf(self.x[v][int(dev[v])])
        cap = np.asarray(cl.memory, dtype=np.float64)
        used = np.bincount(dev, weights=g.memory, minlength=cl.size)
        q = max(1.0, float(cap[np.isfinite(cap)].max(initial=0.0)) / 2**20)   # bytes per memory unit
        for d in range(cl.size):
            on = [v for v in window.tolist() if d in self.x[v] and g.memory[v] > 0]
            if on and np.isfinite(cap[d]):
                room = cap[d] - (used[d] - g.memory[window[dev[window] == d]].sum())
                m.Add(sum(math.ceil(g.memory[v] / q) * self.x[v][d] for v in on) <= math.floor(room / q))
        m.Minimize(z)

    @staticmethod
    def at(t: float) -> int:
        """A point in time in model units, rounded down."""
        return math.floor(float(t) * SCALE + 1e-6)

    @staticmethod
    def length(t: float) -> int:
        """A duration in model units, rounded down (so the incumbent, its times rounded
        down, satisfies every constraint: ``floor(a + b) >= floor(a) + floor(b)``)."""
        return max(0, math.floor(float(t) * SCALE - 1e-6))

    def solve(self, seconds: float) -> tuple[dict, dict] | None:
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
    while not info["skipped"] and failed < stall and time.perf_counter() < deadline:
        sch = sim.schedule
        rank = sch.priorities()
        order = np.argsort(rank)
        chain = critical_chain(sim)
        at = int(rank[chain[rng.integers(chain.size)]])
        first = min(max(0, at - size // 2), max(0, graph.n - size))
        window = order[first:first + size]
        t_solve = time.perf_counter()
        found = _Window(sim, window, latest_finish(sim), comp).solve(min(solve_seconds, deadline - t_solve))
        info["windows"] += 1
        failed += 1
        if found is None or not found[2]:
            size = max(MIN_SIZE, int(size * 0.8))          # the window was too big to prove
        elif time.perf_counter() - t_solve < solve_seconds / 4:
            size = min(largest, int(size * 1.1) + 1)      # proven quickly: try more at once
        if found is None:
            continue
        dev, when = sch.placement.device.copy(), np.floor(sch.start * SCALE + 1e-6)
        for v, d in found[0].items():
            dev[v], when[v] = d, found[1][v]
        pr = np.empty(graph.n, dtype=np.int64)
        pr[np.lexsort((rank, when))] = np.arange(graph.n)
        cand = replay(dev, pr)
        if cand.makespan < sim.makespan * (1 - 1e-9):
            sim, failed = cand, 0
            info["kept"] += 1
        if window.size == graph.n:
            break   # the whole graph: nothing is held, another window is the same problem
    info["seconds"], info["last_size"] = time.perf_counter() - t0, size
    return sim.schedule.placement.device, sim.schedule.priorities(), sim.makespan, info
