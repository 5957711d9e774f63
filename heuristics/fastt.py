"""FastT (Yi et al., Middleware'20): DPOS, OS-DPOS, and CPOP as the baseline of DPOS's rank.

DPOS (Alg. 1, Sec. 5.1) is HEFT's list scheduling with two changes (``docs/heuristics.md`` 1.2):
the upward rank uses *max* instead of mean nominal costs (A11), and the critical path is
pinned to "CP devices" first, as in CPOP. With ``w_i = max_d w(i,d)`` and
``c_ij = max_{a != b} comm(i,j,a,b)`` (:func:`~dnnplace.heuristics.nominal.nominal_costs`),

.. math::

    \\operatorname{rank}_u(i) = w_i + \\max_{j \\in succ(i)} (c_{ij} + \\operatorname{rank}_u(j)),
    \\qquad \\operatorname{rank}_u(exit) = w_{exit},

the bottom level of :func:`~dnnplace.graphs.levels.blevel`. On the graph with virtual
terminals (:func:`~dnnplace.graphs.terminals.with_terminals`):

1. the critical path starts at the entry and repeatedly takes the successor with the
   largest rank (ties: lowest topological position);
2. CP devices, by the *prefix rule* (our reading of the Sec. 5.1 text, A9): among the
   unused devices, each takes the longest prefix of the remaining CP that it supports and
   whose memory fits its capacity; the device with the smallest mean time over its prefix
   (then the longer prefix, then the lower index) takes it; repeat. CP ops no device can
   take become ordinary ops (counted in ``cp_unplaced``). The CP's memory is reserved up
   front (A8);
3. every op in order of decreasing rank (ties: topological position; the order is
   topological, asserted) goes to its CP device, else to the device of earliest finish
   ``EFT(o,d) = EST(o,d) + w(o,d)`` among those that run it and still hold its memory,
   ``EST(o,d) = earliest_slot(d, max_{m in pred(o)} FT(m) + comm(m,o,S(m),d), w(o,d))``:
   insertion into idle gaps (:class:`~dnnplace.heuristics.timeline.Timeline`); ties to the
   lowest device index (:func:`~dnnplace.heuristics.fastt_placer.place`). Paper says ``FT(o) = EST``
   (Alg. 1 l. 20); we do ``EST + w`` (A1).

The result is a placement, a per-device order (ops by start time) and the planner's own
makespan ``planner_estimate``. The planner ignores link congestion and charges every
cross-device edge its own transfer, so (without per-message costs, which the planner
estimates as :mod:`~dnnplace.heuristics.fastt_placer` says) ``planner_estimate`` equals the simulator
replaying the order strictly without congestion, one transfer per edge
(``simulate(policy="order", congestion=False, transfer_mode="per_edge")``; tested on 200+
random DAGs); the simulator's default sends a tensor once per consuming device, which
never makes that replay longer where edges of one output carry the same bytes. Zero-time
ops are never put inside a busy interval nor straddled by a later op, so that replay is
exact. The registered method reports the simulator's value under the requested congestion.

Memory (``on_oom``): an op only goes to a device whose remaining capacity holds it; when
none does, ``"best_effort"`` takes the device with the most free memory (the evaluator then
reports ``memory_infeasible`` unless the repair pass
:func:`~dnnplace.heuristics.memory.repair_static_memory` then moves whole units where they
fit; ``extra["memory_repairs"]`` counts the moves, and after a repair the start times and
``planner_estimate`` are the planner's, before the move: only the simulation of the
repaired placement in the planner's order counts) and ``"raise"`` raises an
:class:`~dnnplace.graphs.errors.InfeasibleError` naming the op
(:func:`~dnnplace.heuristics.memory.best_effort_device`, shared with Celeritas and PARDNN).
Colocation: the first member of a group placed pins the group (a CP member pins it to its
CP device); the group's whole memory is reserved then.

CPOP (Topcuoglu et al. 2002) differs in the rank and the CP device: priority
``rank_u + rank_d`` with *mean* nominal costs, the CP (nodes of the entry's priority, followed
by the largest-priority successor) entirely on the one device minimising its summed time
(that holds its memory; else the prefix rule), the others from a ready queue by priority.
It isolates what DPOS's max-rank and prefix rule contribute (``docs/heuristics.md`` 4).

OS-DPOS (Alg. 2), which splits critical-path ops and reruns DPOS, is in
:mod:`dnnplace.heuristics.os_dpos`.

Theorem 1 (``omega_DPOS <= 2 omega_opt + C_max``) is a claim measured by the tests, not an
invariant (its Case 1 assumes every op took its EFT device, which CP ops do not).

References
----------
.. [FastT] J. Yi et al. "Optimizing distributed training deployment in heterogeneous GPU
   clusters." CoNEXT/Middleware 2020, Algorithms 1-2, Tables 1-6.
.. [CPOP] H. Topcuoglu, S. Hariri, M.-Y. Wu. "Performance-effective and low-complexity task
   scheduling for heterogeneous computing." IEEE TPDS 13(3), 2002.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, tlevel
from dnnplace.graphs.placement import Placement, Schedule
from dnnplace.graphs.terminals import Terminals, with_terminals
from dnnplace.heuristics.fastt_placer import place
from dnnplace.heuristics.memory import ON_OOM, repair_static_memory
from dnnplace.heuristics.nominal import nominal_costs

__all__ = ["FastTSchedule", "dpos", "cpop"]

@dataclass(frozen=True, eq=False)
class FastTSchedule:
    """A DPOS/CPOP schedule of ``placement.graph``: the planner's start and finish times,
    ``planner_estimate`` (its makespan), the critical path it pinned (node indices) and
    its CP devices; ``extra`` counts CP ops left unpinned (``cp_unplaced``) and ops placed
    best-effort over memory (``oom_nodes``)."""

    placement: Placement
    start: np.ndarray
    finish: np.ndarray
    planner_estimate: float
    algorithm: str
    critical_path: np.ndarray
    cp_device: np.ndarray
    extra: dict = field(default_factory=dict)
    link_priorities: np.ndarray | None = None

    @property
    def graph(self) -> OpGraph:
        return self.placement.graph

    @property
    def priorities(self) -> np.ndarray:
        """Rank by start time (then finish, topological position): each device's order."""
        return Schedule(self.placement, self.start, self.finish).priorities()


# ---------------------------------------------------------------------------- critical-path devices
def _prefix_rule(cp: Sequence[int], comp: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> dict[int, int]:
    """CP op -> device by the prefix rule (module docstring, step 2); ``mem[i]`` is the
    memory the ``i``-th CP op adds (:func:`_cp_memory`)."""
    out: dict[int, int] = {}
    rest = np.asarray(cp, dtype=np.int64)
    rmem = np.asarray(mem, dtype=np.float64)
    used: set[int] = set()
    while rest.size:
        best = None
        for d in range(comp.shape[1]):
            if d in used:
                continue
            ok = ~np.isnan(comp[rest, d]) & (np.cumsum(rmem) <= cap[d] * (1 + 1e-12))
            k = int(np.argmin(ok)) if not ok.all() else rest.size
            if k == 0:
                continue
            key = (float(comp[rest[:k], d].mean()), -k, d)
            if best is None or key < best:
                best = key
        if best is None:
            break
        k, d = -best[1], best[2]
        for v in rest[:k].tolist():
            out[v] = d
        used.add(d)
        rest, rmem = rest[k:], rmem[k:]
    return out


def _single_device(cp: Sequence[int], comp: np.ndarray, mem: np.ndarray, cap: np.ndarray) -> dict[int, int]:
    """CPOP: the whole CP on the device of least summed time that runs and holds it."""
    cp = np.asarray(cp, dtype=np.int64)
    total = comp[cp].sum(axis=0)  # NaN where some CP op is unsupported
    fits = ~np.isnan(total) & (mem.sum() <= cap * (1 + 1e-12))
    if not fits.any():
        return _prefix_rule(cp, comp, mem, cap)
    d = int(np.flatnonzero(fits)[np.argmin(total[fits])])
    return {int(v): d for v in cp.tolist()}


def _cp_memory(g: OpGraph, cp: Sequence[int]) -> np.ndarray:
    """Memory each CP op adds when its CP device takes it: a colocated op brings its whole
    group the first time the group appears on the CP, nothing after."""
    co = g.colocation
    group_mem = np.bincount(co[co >= 0], weights=g.memory[co >= 0]) if (co >= 0).any() else np.zeros(0)
    seen: set[int] = set()
    out = np.empty(len(cp))
    for i, v in enumerate(cp):
        c = int(co[v])
        out[i] = g.memory[v] if c < 0 else (0.0 if c in seen else group_mem[c])
        seen.add(c)
    return out


def _follow(g: OpGraph, start: int, key: np.ndarray) -> list[int]:
    """From ``start``, repeatedly the successor of largest ``key`` (ties: topological position)."""
    path = [start]
    v = start
    pos = g.topo_position
    while g.out_ptr[v + 1] > g.out_ptr[v]:
        s = g.out_nbr[g.out_ptr[v]:g.out_ptr[v + 1]]
        best = key[s].max()
        cand = s[key[s] >= best]
        v = int(cand[np.argmin(pos[cand])])
        path.append(v)
    return path


def _finish(graph: OpGraph, cluster: Cluster, dev, start, fin, cp: list[int], cp_dev: dict[int, int], name: str,
            extra: dict) -> FastTSchedule:
    n = graph.n
    dev = dev[:n]
    extra["memory_repairs"] = 0
    links = extra.pop("link_order")
    used = np.bincount(dev, weights=graph.memory, minlength=cluster.size)
    if (used > cluster.memory * (1 + 1e-12)).any():  # best effort left overflow: move whole units where they fit
        dev, extra["memory_repairs"] = repair_static_memory(graph, cluster, dev)
    if links is not None and extra["memory_repairs"] == 0:
        links = links[:graph.m]  # the virtual terminals' edges come last
    else:
        links = None
    cp_orig = np.array([v for v in cp if v < n], dtype=np.int64)
    cpd = np.array([cp_dev.get(v, -1) for v in cp_orig.tolist()], dtype=np.int64)
    est = float(fin[:n].max()) if n else 0.0
    return FastTSchedule(Placement(graph, cluster, dev), start[:n], fin[:n], est, name, cp_orig, cpd,
                         {"cp_length": int(cp_orig.size), **extra}, links)


def _prepare(graph: OpGraph, cluster: Cluster, nominal: str, on_oom: str,
             transfer_mode: str = "per_destination") -> tuple[Terminals, np.ndarray, np.ndarray]:
    if transfer_mode not in ("per_destination", "per_edge"):
        raise InputError(f"transfer_mode {transfer_mode!r}: expected 'per_destination' or 'per_edge'")
    if on_oom not in ON_OOM:
        raise InputError(f"on_oom {on_oom!r}: expected one of {', '.join(ON_OOM)}")
    if graph.n == 0:
        raise InputError(f"graph {graph.name!r} has no nodes")
    w, c = nominal_costs(graph, cluster, nominal)  # names a node no device runs
    t = with_terminals(graph)
    if t.graph is not graph:
        k = t.graph.n - graph.n
        w = np.concatenate([w, np.zeros(k)])
        c = np.concatenate([c, np.zeros(t.graph.m - graph.m)])
    return t, w, c


def dpos(graph: OpGraph, cluster: Cluster, *, nominal: str = "max", on_oom: str = "best_effort",
         congestion: bool = False, transfer_mode: str = "per_destination") -> FastTSchedule:
    """FastT's DPOS (Alg. 1): critical path on its devices, insertion-EFT for the rest.

    Parameters
    ----------
    graph, cluster
        The instance; every node must run on some device.
    nominal : {"max", "mean", "min"}
        Nominal costs of the upward rank (FastT: ``max``, A11).
    on_oom : {"best_effort", "raise"}
        What to do with an op no device has memory left for (module docstring).
    congestion : bool
        Our extension (the paper's planner has none): model link congestion, transfers
        queueing in the order the planner commits them on their link, or on the
        source's egress and the destination's ingress port where the cluster shares
        ports (``cluster.ports == "shared"``: PCIe); the schedule then carries that link
        order (``link_priorities``), and replaying both orders with congestion in the
        same ``transfer_mode`` gives ``planner_estimate`` exactly (where the edges of one
        output carry the same bytes).
    transfer_mode : {"per_destination", "per_edge"}
        With ``congestion``: what the planner sends, as the simulator's option of that
        name: a tensor once per consuming device (default, what frameworks do and the
        simulator's default) or once per edge (the earlier planner). Without congestion
        both give the same times.

    Examples
    --------
    A chain on two identical GPUs stays on one GPU (the sum of its times):

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0], [2.0], [3.0]], memory=[0] * 3,
    ...             src=[0, 1], dst=[1, 2], edge_bytes=[1e6, 1e6])
    >>> s = dpos(g, Cluster.single_host(2, with_cpu=False))
    >>> s.planner_estimate, s.placement.device.tolist()
    (6.0, [0, 0, 0])
    """
    t, w, c = _prepare(graph, cluster, nominal, on_oom, transfer_mode)
    g = t.graph
    rank = blevel(g, kind=w, comm=c)
    order = np.lexsort((g.topo_position, -rank))
    pos = np.empty(g.n, dtype=np.int64)
    pos[order] = np.arange(g.n)
    assert g.m == 0 or bool(np.all(pos[g.src] < pos[g.dst])), "rank order is not topological"
    cp = _follow(g, t.entry, rank)
    real = [v for v in cp if v < t.n]
    comp = cluster.compute_matrix(g)
    cp_dev = _prefix_rule(real, comp, _cp_memory(g, real), cluster.memory)
    dev, start, fin, extra = place(t, cluster, order.tolist(), cp_dev, on_oom=on_oom, name="dpos",
                                    congestion=congestion, transfer_mode=transfer_mode)
    extra["cp_unplaced"] = len(real) - len(cp_dev)
    return _finish(graph, cluster, dev, start, fin, real, cp_dev, "dpos", extra)


def cpop(graph: OpGraph, cluster: Cluster, *, nominal: str = "mean", on_oom: str = "best_effort",
         congestion: bool = False, transfer_mode: str = "per_destination") -> FastTSchedule:
    """CPOP (Topcuoglu et al. 2002): priority ``rank_u + rank_d`` (mean nominal costs), the
    critical path on the one device of least summed time, the rest by insertion-EFT from
    a priority-ordered ready queue (module docstring).

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids=[0, 1, 2, 3], kinds=["gpu"], compute=[[1.0]] * 4, memory=[0] * 4, src=[], dst=[])
    >>> cpop(g, Cluster.single_host(2, with_cpu=False)).planner_estimate
    2.0
    """
    t, w, c = _prepare(graph, cluster, nominal, on_oom, transfer_mode)
    g = t.graph
    prio = blevel(g, kind=w, comm=c) + tlevel(g, kind=w, comm=c)
    cp = _follow(g, t.entry, prio)
    real = [v for v in cp if v < t.n]
    comp = cluster.compute_matrix(g)
    cp_dev = _single_device(real, comp, _cp_memory(g, real), cluster.memory) if real else {}
    # the ready queue by priority does not depend on the placement: one topological order
    indeg = np.bincount(g.dst, minlength=g.n).tolist()
    optr, onbr = g.out_ptr.tolist(), g.out_nbr.tolist()
    tp = g.topo_position.tolist()
    pl = (-prio).tolist()
    heap = [(pl[v], tp[v], v) for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, v = heapq.heappop(heap)
        order.append(v)
        for k in range(optr[v], optr[v + 1]):
            x = onbr[k]
            indeg[x] -= 1
            if indeg[x] == 0:
                heapq.heappush(heap, (pl[x], tp[x], x))
    dev, start, fin, extra = place(t, cluster, order, cp_dev, on_oom=on_oom, name="cpop", congestion=congestion,
                                    transfer_mode=transfer_mode)
    extra["cp_unplaced"] = len(real) - len(cp_dev)
    return _finish(graph, cluster, dev, start, fin, real, cp_dev, "cpop", extra)


# ---------------------------------------------------------------------------- OS-DPOS
