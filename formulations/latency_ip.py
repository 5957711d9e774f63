r"""Latency integer program of Tarnawski et al., Figs. 3 (contiguous) and 4 (``q``
contiguous subgraphs per accelerator).

Build-only: :func:`build_latency_ip` returns a ``ConcreteModel``; :func:`decode` gives
the placement (and the slot of every node); :func:`warm_start_values` completes a
placement into values for every variable (slots = the evaluator's pieces); :func:`best_split`
picks the start split and the big-M. They live in :mod:`dnnplace.formulations.latency_solution`
and stay importable from here.

Slots ``j``: ``0`` is the pool of all CPU cores; accelerator ``i`` owns slots
``(i, 1) .. (i, q)`` processed in that order. ``H`` is the horizon (big-M, see below)::

    x[v,j] in {0,1};   sum_j x[v,j] = 1                              (1)  assign_once
    slot (i,s) contiguous (Lemma 4.1 z-variables per slot)           (2)  contiguity_*
    sum_s sum_v m_v x[v,(i,s)] <= M                                  (3*) memory_capacity
    CommIn[u,j]  >= x[v,j] - x[u,j],  CommOut[u,j] >= x[u,j] - x[v,j]  (4)-(5)
    Total >= Lat_v                                                        total_bound
    Start_j >= Lat_u - (1 - CommIn[u,j]) H                           (6)  start_after_input
    Finish_j = Start_j + sum_u c_u CommIn[u,j] + sum_v p_acc(v) x[v,j]
                       + sum_u c_u CommOut[u,j]                      (7)  finish_def
    Lat_v >= p_cpu(v) x[v,0] + Lat_u   (u,v) in E;  Lat_v >= p_cpu(v) x[v,0]  (8)-(9)
    Lat_v >= Finish_j - (1 - x[v,j]) H                               (10) latency_after_slot
    Start_(i,s) >= Finish_(i,s-1)                                    (14) slot_order
    colocation on devices: x[u,0] = x[v,0], sum_s x[u,(i,s)] = sum_s x[v,(i,s)]

Pipeline order (``acyclic``, on by default; needs ``contiguity``). The evaluator rejects
a split whose units (accelerator slots, CPU nodes) wait on each other in a cycle. The
timing rows already exclude every such cycle of positive total duration (along it
``Start`` and ``Finish`` would have to increase and come back), but not one of units
that take no time. The order rows make the model exact: a linear order of the slots
(:func:`dnnplace.formulations.contiguity.add_unit_order`; slots of one accelerator fixed
in their order, (14)), a witness ``r[v,j]`` (``v`` is reached from slot ``j`` along a
path whose inner nodes are CPU nodes) and::

    r[v,j] >= x[u,j],  r[v,j] >= r[u,j] + x[u,0] - 1          (u,v) in E   reach_after
    x[v,b] + r[v,a] <= 1 + before(a,b)                        a != b      slot_pipeline_order

Exactness: for an acyclic unit graph, a topological order of its slots and ``r`` = the
described reachability satisfy every row (a node of slot ``b`` reached from slot ``a``
through CPU nodes means the unit arc path ``a -> ... -> b``). Conversely, a cycle of
units passes through two or more slots (a cycle through one slot only leaves and
re-enters it, which (11)-(13) forbid; CPU nodes alone form no cycle), and each stretch
``a -> CPU nodes -> b`` between consecutive slots sets ``r[., a] = 1`` at a node of ``b``,
forcing ``before(a,b)``: a cycle in a linear order, impossible. Only cycles of
zero-duration units survive the timing rows ((6), (9), (10) give ``Start_b >=
Finish_a`` along every stretch, so the durations on a cycle sum to at most 0), and a
zero-duration slot holds only nodes of zero time on it; so the rows
``slot_pipeline_order`` are needed, and added, only for nodes ``v`` with
``p_acc(v) = 0`` on ``b``: the node by which a cycle enters a zero-duration slot is one.
A model without such nodes gets no order rows at all (the timing rows suffice).

Lower bound. ``Total`` starts at a combinatorial lower bound valid for every split with
at most ``q`` contiguous pieces per accelerator: the LP relaxation alone stays at the
critical path (HiGHS kept GNMT's bound there for 43 minutes). ``bound="closure"`` (the
default) is the closure segmentation bound
(:func:`~dnnplace.formulations.latency_bound.closure_segmentation_bound`: each stretch of a
path charged the closure a contiguous piece must hold, the transfers it is forced to pay
and, lazily, a minimum cut over the undecided neighbours, with a Lagrange price on
memory; on fork-join graphs at least the spine bound of
:mod:`dnnplace.formulations.latency_spine`; ``bound_seconds`` caps the refinement's time;
``lower_bound`` passes it in when the caller has computed it); it is the default because
it certifies far smaller gaps than the path bound (Table 4: ``results/tarnawski-latency-cert.md``).
``bound="path"`` is the path segmentation bound
(:func:`~dnnplace.evaluation.bounds.latency_lower_bound`: only the path's own nodes
and edges), which it extends.

Strengthening (valid inequalities that keep the optimum; off by default: on Table 4 they
raised no bound and cost incumbents, ``results/tarnawski-latency-cert.md``, "The
strengthening rows"):

- ``finish_bounds``: ``Total >= Finish_j`` for every slot. A non-empty slot finishes no
  later than its nodes' ``Lat_v`` (10); an empty slot can take ``Start = Finish`` equal
  to its predecessor's finish (or 0). The LP then sees each slot's whole duration (7)
  in the objective, not only through the big-M rows (10).
- ``symmetry_breaking``: interchangeable accelerators
  (:func:`dnnplace.formulations.device_symmetry.identical_devices`) start their first
  slots in index order, ``Start_(d,1) <= Start_(d',1)`` for consecutive ``d < d'`` of a
  class. Relabelling the accelerators of a class by the start of their first slot (an
  empty first slot starting at 0) maps any solution to one that satisfies the rows with
  the same latency; :func:`warm_start_values` does that relabelling.

The linearisation of (6) and (10) is Lemma 4.1's. **Big-M.** ``H`` is an achievable
latency ``UB`` (the evaluator's latency of a heuristic split, e.g. the warm start or
greedy, whose pieces fit in the slots; else the all-CPU critical path), and every
time variable is bounded by it: ``0 <= Lat_v, Start_j, Finish_j <= Total <= H``. This
cuts off no optimal split: the heuristic split itself is a solution of value ``UB``,
and for any split with latency ``<= UB`` the earliest-start schedule has every
``Lat_v <= Total <= UB``, every non-empty slot finishing no later than its nodes'
``Lat_v``, and every empty slot starting when its predecessor slot finishes. With all
times in ``[0, H]``, ``CommIn = 0`` makes (6) read ``Start_j >= Lat_u - H`` with a
non-positive right side, and ``x = 0`` does the same for (10): both vacuous, as the
lemma requires, with the smallest ``H`` that keeps an optimal solution.

Communication uses the same exact staircase as :mod:`dnnplace.formulations.maxload_ip`
(:mod:`dnnplace.formulations.comm_costs`); the first level (any crossing edge) is kept even
at zero cost as the indicator in (6).

Semantics versus the evaluator. With ``q = 1`` every accelerator holds one contiguous
set, which the evaluator scores as one piece, so the IP's optimum is the evaluator's
optimum over contiguous splits. With ``q >= 2`` the IP chooses how an accelerator's
nodes are cut into slots, while :func:`dnnplace.evaluation.evaluate.latency` always cuts a split
into the fewest pieces along the topological order; the IP is then a relaxation
(optimum ``<=`` the best evaluator latency of a split with ``<= q`` pieces per
accelerator), its bound stays valid, and the decoded split is re-scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo

from dnnplace.evaluation.bounds import latency_lower_bound
from dnnplace.formulations.comm_costs import comm_levels, host_costs
from dnnplace.formulations.contiguity import add_unit_order, before
from dnnplace.formulations.families import add_families
from dnnplace.formulations.latency_bound import closure_segmentation_bound
from dnnplace.formulations.latency_solution import (
    best_split,
    decode,
    decode_pieces,
    decode_slots,
    horizon,
    slot_pieces,
    symmetric_first_slots,
    warm_start_values,
)
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance

__all__ = ["LatencyOptions", "build_latency_ip", "decode", "decode_slots", "decode_pieces", "warm_start_values",
           "horizon", "best_split", "slot_pieces"]


@dataclass(frozen=True)
class LatencyOptions:
    """``subgraphs_per_device`` is ``q`` (1 = Fig. 3, contiguous); ``horizon`` the big-M
    ``H`` (an achievable latency; computed by :func:`horizon` when ``None``);
    ``finish_bounds`` and ``symmetry_breaking``: the valid strengthenings of the module
    docstring; ``bound``: ``"closure"`` or ``"path"``, the lower bound ``Total`` starts at
    (module docstring); ``bound_seconds``: the closure bound stops refining after about
    that long (``None``: until it converges); ``lower_bound``: that bound, already computed
    by the caller for the same instance and ``q`` (then not computed again)."""

    subgraphs_per_device: int = 1
    horizon: float | None = None
    memory: bool = True
    colocation: bool = True
    contiguity: bool = True
    acyclic: bool = True
    finish_bounds: bool = False
    symmetry_breaking: bool = False
    bound: str = "closure"
    bound_seconds: float | None = 60.0
    lower_bound: float | None = None

    def __post_init__(self) -> None:
        if self.bound not in ("closure", "path"):
            raise InputError(f"bound must be 'closure' or 'path', not {self.bound!r}")
        if int(self.subgraphs_per_device) < 1:
            raise InputError("subgraphs_per_device (q) must be at least 1")
        if self.acyclic and not self.contiguity:
            raise InputError("the latency IP's pipeline order (acyclic) needs contiguous slots (contiguity)")


@dataclass
class _Data:
    graph: OpGraph
    cluster: Any
    opts: LatencyOptions
    slots: list                    # slot j -> device index (slot 0: pool -> first CPU, or -1)
    slot_of: list                  # slot j -> (device, s)
    pool: int                      # device index decoded for pool nodes
    supported: np.ndarray          # (n, J) bool
    p_acc: np.ndarray              # (n, J) processing time in slot j (0 for the pool column)
    p_cpu: np.ndarray              # (n,) CPU time (inf where unsupported)
    H: float = 0.0
    comm_in: list = field(default_factory=list)
    comm_out: list = field(default_factory=list)


def build_latency_ip(inst: Instance, opts: LatencyOptions | None = None) -> pyo.ConcreteModel:
    """Build Fig. 3 (``q = 1``) or Fig. 4 (``q >= 2``) for an instance; never solves."""
    opts = opts or LatencyOptions()
    g, cl = inst.graph, inst.require_cluster()
    q = int(opts.subgraphs_per_device)
    comp = cl.compute_matrix(g)
    cpus = cl.devices_of_kind("cpu")
    accs = [d for d in range(cl.size) if cl.kinds[d] != "cpu"]
    pool = int(cpus[0]) if cpus.size else -1
    slots = [pool] + [d for d in accs for _ in range(q)]
    slot_of = [(pool, 0)] + [(d, s) for d in accs for s in range(q)]
    p_cpu = comp[:, pool] if pool >= 0 else np.full(g.n, np.nan)
    sup = np.zeros((g.n, len(slots)), dtype=bool)
    p_acc = np.zeros((g.n, len(slots)))
    sup[:, 0] = ~np.isnan(p_cpu) if pool >= 0 else False
    for j in range(1, len(slots)):
        sup[:, j] = ~np.isnan(comp[:, slots[j]])
        p_acc[:, j] = np.nan_to_num(comp[:, slots[j]])
    data = _Data(g, cl, opts, slots, slot_of, pool, sup, p_acc, np.nan_to_num(p_cpu, nan=np.inf))
    if not sup.any(axis=1).all():
        v = int(np.flatnonzero(~sup.any(axis=1))[0])
        raise InputError(f"node {g.ids[v]!r} runs on no device of the cluster")
    data.H = float(opts.horizon) if opts.horizon is not None else horizon(inst, q)[0]
    # a hair above the heuristic value so that the heuristic split itself stays feasible
    data.H = data.H * (1 + 1e-7) + 1e-7
    m = pyo.ConcreteModel(name=f"latency_ip[{g.name}]")
    m._data = data
    m.slots = pyo.Set(initialize=range(len(slots)), doc="0 = CPU pool, then q slots per accelerator")
    m.acc_slots = pyo.Set(initialize=range(1, len(slots)), doc="accelerator subgraph slots")
    m.ops = pyo.Set(initialize=range(g.n), doc="operators")
    m.placeable = pyo.Set(dimen=2, initialize=[(v, j) for v, j in zip(*np.nonzero(sup))],
                          doc="(node, slot) pairs where the node can run")
    m.horizon_ms = pyo.Param(initialize=data.H, doc="big-M H of Lemma 4.1: an achievable latency")
    m.x = pyo.Var(m.placeable, within=pyo.Binary, doc="x[v,j] = 1 iff node v is in slot j")
    head = _min_time_heads(g, comp)
    m.lat = pyo.Var(m.ops, bounds=lambda m, v: (min(float(head[v]), data.H), data.H),
                    doc="Latency_v: v's output is in RAM (>= the fastest-device critical path into v)")
    m.start = pyo.Var(m.acc_slots, bounds=(0, data.H), doc="SubgraphStart_j")
    m.finish = pyo.Var(m.acc_slots, bounds=(0, data.H), doc="SubgraphFinish_j")
    lower = opts.lower_bound if opts.lower_bound is not None else \
        closure_segmentation_bound(g, cl, q, seconds=opts.bound_seconds) if opts.bound == "closure" \
        else latency_lower_bound(g, cl, q)
    lower = min(float(lower), data.H)
    m.total = pyo.Var(bounds=(lower, data.H), doc="TotalLatency (>= the closure or path segmentation bound)")
    add_families(m, data, [(True, _add_assignment), (opts.memory, _add_memory), (opts.colocation, _add_colocation),
                           (opts.contiguity, _add_contiguity), (opts.acyclic, _add_pipeline_order),
                           (True, _add_communication), (True, _add_timing), (opts.finish_bounds, _add_finish_bounds),
                           (opts.symmetry_breaking, _add_symmetry_breaking)])
    m.objective = pyo.Objective(expr=m.total, sense=pyo.minimize, doc="min TotalLatency")
    return m


def _min_time_heads(g: OpGraph, comp: np.ndarray) -> np.ndarray:
    """Longest path ending at each node (itself included) with every node at its
    fastest device time. Valid lower bound on ``Latency_v``: the nodes of a path are
    processed one after another (within a contiguous slot in topological order, across
    units after the previous output is in RAM), so ``Latency_v`` is at least the sum."""
    t = np.nan_to_num(np.nanmin(np.where(np.isnan(comp), np.inf, comp), axis=1), posinf=0.0)
    head = t.copy()
    order = np.argsort(g.level[g.src], kind="stable")
    src, dst, lvl = g.src[order], g.dst[order], g.level[g.src][order]
    cuts = np.flatnonzero(np.diff(lvl)) + 1
    for s, d in zip(np.split(src, cuts), np.split(dst, cuts)):
        np.maximum.at(head, d, head[s] + t[d])
    return head


def _x(m: pyo.ConcreteModel, v: int, j: int) -> Any:
    return m.x[v, j] if m._data.supported[v, j] else 0


def _add_assignment(m: pyo.ConcreteModel, data: _Data) -> None:
    @m.Constraint(m.ops, doc="(1) every node in exactly one slot")
    def assign_once(m, v):
        return sum(m.x[v, j] for j in np.flatnonzero(data.supported[v]).tolist()) == 1


def _device_slots(data: _Data) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for j in range(1, len(data.slots)):
        out.setdefault(data.slots[j], []).append(j)
    return out


def _add_memory(m: pyo.ConcreteModel, data: _Data) -> None:
    mem = data.graph.memory
    by_dev = _device_slots(data)
    cap = data.cluster.memory
    devs = [d for d in by_dev if np.isfinite(cap[d])]

    @m.Constraint(devs, doc="(3*) memory of all slots of an accelerator")
    def memory_capacity(m, d):
        terms = [float(mem[v]) * m.x[v, j] for j in by_dev[d] for v in range(data.graph.n)
                 if data.supported[v, j] and mem[v] != 0]
        return sum(terms) <= float(cap[d]) if terms else pyo.Constraint.Skip


def _add_colocation(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    by_dev = {0: [0], **{d: js for d, js in _device_slots(data).items()}}
    pairs = []
    for c in np.unique(g.colocation[g.colocation >= 0]):
        members = np.flatnonzero(g.colocation == c)
        pairs += [(int(members[0]), int(v), d) for v in members[1:] for d in by_dev]

    @m.Constraint(pairs, doc="Sec. 4.1/4.2 colocation on devices (not slots)")
    def colocation(m, u, v, d):
        lhs = sum(_x(m, u, j) for j in by_dev[d])
        rhs = sum(_x(m, v, j) for j in by_dev[d])
        if isinstance(lhs, int) and isinstance(rhs, int):
            return pyo.Constraint.Feasible if lhs == rhs else pyo.Constraint.Infeasible
        return lhs == rhs


def _add_contiguity(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    slots = list(range(1, len(data.slots)))
    m.z = pyo.Var(m.ops, slots, bounds=(0, 1), doc="Lemma 4.1: z[v,j] = 1 if v reaches a node of slot j")
    cover = [(v, j) for j in slots for v in np.flatnonzero(data.supported[:, j]).tolist()]
    edges = list(zip(g.src.tolist(), g.dst.tolist()))
    down = [(u, v, j) for j in slots for u, v in edges]
    leave = [(u, v, j) for u, v, j in down if data.supported[u, j]]

    @m.Constraint(cover, doc="(11) z[v,j] >= x[v,j]")
    def contiguity_cover(m, v, j):
        return m.z[v, j] >= m.x[v, j]

    @m.Constraint(down, doc="(12) z[v,j] <= z[u,j]")
    def contiguity_down(m, u, v, j):
        return m.z[v, j] <= m.z[u, j]

    @m.Constraint(leave, doc="(13) z[v,j] <= x[v,j] - x[u,j] + 1")
    def contiguity_leave(m, u, v, j):
        return m.z[v, j] <= _x(m, v, j) - m.x[u, j] + 1


def _add_pipeline_order(m: pyo.ConcreteModel, data: _Data) -> None:
    """Slots in a linear order that every unit path respects (module docstring)."""
    g = data.graph
    slots = list(range(1, len(data.slots)))
    fixed = [(a, b) for a in slots for b in slots if a < b and data.slots[a] == data.slots[b]]
    fixed_set = set(fixed)
    rows = [(v, a, b) for b in slots for v in np.flatnonzero(data.supported[:, b] & (data.p_acc[:, b] == 0)).tolist()
            for a in slots if a != b and (a, b) not in fixed_set]
    if not rows:
        return  # every unit that holds a node takes time: the timing rows exclude cycles
    add_unit_order(m, slots, fixed)
    m.r = pyo.Var(m.ops, slots, bounds=(0, 1), doc="r[v,j] = 1 if v is reached from slot j through CPU nodes")
    edges = list(zip(g.src.tolist(), g.dst.tolist()))
    direct = [(u, v, j) for u, v in edges for j in slots if data.supported[u, j]]
    via = [(u, v, j) for u, v in edges for j in slots if data.supported[u, 0]]

    @m.Constraint(direct, doc="r[v,j] >= x[u,j]: v follows a node of slot j")
    def reach_direct(m, u, v, j):
        return m.r[v, j] >= m.x[u, j]

    @m.Constraint(via, doc="r[v,j] >= r[u,j] + x[u,0] - 1: through a CPU node")
    def reach_after(m, u, v, j):
        return m.r[v, j] >= m.r[u, j] + m.x[u, 0] - 1

    @m.Constraint(rows, doc="slot_pipeline_order: a node of b reached from slot a puts a before b")
    def slot_pipeline_order(m, v, a, b):
        return m.x[v, b] + m.r[v, a] <= 1 + before(m, a, b)


def _add_communication(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    cin, cout = host_costs(g, data.cluster)
    never = np.zeros(g.m, dtype=bool)
    units = [-1] + data.slots[1:]
    data.comm_in = comm_levels(g, cin, never, units, keep_zero=True)
    data.comm_out = comm_levels(g, cout, never, units, keep_zero=False)
    m.comm_in = pyo.Var([(u, j, t) for u, j, t, _, _ in data.comm_in], bounds=(0, 1),
                        doc="(4) u's output is read into slot j (cost level t)")
    m.comm_out = pyo.Var([(u, j, t) for u, j, t, _, _ in data.comm_out], bounds=(0, 1),
                         doc="(5) u's output is written out of slot j (cost level t)")
    in_links = [(u, j, t, v) for u, j, t, _, heads in data.comm_in for v in heads if data.supported[v, j]]
    out_links = [(u, j, t, v) for u, j, t, _, heads in data.comm_out for v in heads if data.supported[u, j]]

    @m.Constraint(in_links, doc="(4) CommIn[u,j] >= x[v,j] - x[u,j]")
    def comm_in_link(m, u, j, t, v):
        return m.comm_in[u, j, t] >= m.x[v, j] - _x(m, u, j)

    @m.Constraint(out_links, doc="(5) CommOut[u,j] >= x[u,j] - x[v,j]")
    def comm_out_link(m, u, j, t, v):
        return m.comm_out[u, j, t] >= m.x[u, j] - _x(m, v, j)


def _add_timing(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    H = m.horizon_ms
    first_level = [(u, j) for u, j, t, _, _ in data.comm_in if t == 0]
    dur: dict[int, list] = {j: [] for j in m.acc_slots}
    for recs, var in ((data.comm_in, m.comm_in), (data.comm_out, m.comm_out)):
        for u, j, t, delta, _ in recs:
            if delta:
                dur[j].append(delta * var[u, j, t])
    for v, j in m.placeable:
        if j > 0 and data.p_acc[v, j]:
            dur[j].append(float(data.p_acc[v, j]) * m.x[v, j])
    p_cpu = lambda v: float(data.p_cpu[v]) * m.x[v, 0] if data.supported[v, 0] else 0  # noqa: E731

    @m.Constraint(m.ops, doc="TotalLatency >= Latency_v")
    def total_bound(m, v):
        return m.total >= m.lat[v]

    @m.Constraint(first_level, doc="(6) Lemma 4.1: Start_j >= Lat_u - (1 - CommIn[u,j]) H")
    def start_after_input(m, u, j):
        return m.start[j] >= m.lat[u] - (1 - m.comm_in[u, j, 0]) * H

    @m.Constraint(m.acc_slots, doc="(7) Finish = Start + CommIn + compute + CommOut")
    def finish_def(m, j):
        return m.finish[j] == m.start[j] + sum(dur[j])

    @m.Constraint(m.ops, doc="(8) CPU nodes take their processing time")
    def cpu_own(m, v):
        e = p_cpu(v)
        return m.lat[v] >= e if not isinstance(e, int) else pyo.Constraint.Skip

    @m.Constraint(list(zip(g.src.tolist(), g.dst.tolist())), doc="(9) Lat_v >= p_cpu(v) x[v,0] + Lat_u")
    def cpu_after_pred(m, u, v):
        return m.lat[v] >= p_cpu(v) + m.lat[u]

    # (10) with the node's own big-M H - lb(Lat_v): when x = 0 the right side is at most
    # Finish_j - H + lb(Lat_v) <= lb(Lat_v) <= Lat_v because Finish_j <= H, so still vacuous
    @m.Constraint([(v, j) for v, j in m.placeable if j > 0],
                  doc="(10) Lemma 4.1: Lat_v >= Finish_j - (1 - x[v,j]) (H - lb(Lat_v))")
    def latency_after_slot(m, v, j):
        return m.lat[v] >= m.finish[j] - (1 - m.x[v, j]) * (H - m.lat[v].lb)

    order = [j for j in m.acc_slots if data.slot_of[j][1] > 0]

    @m.Constraint(order, doc="(14) slots of an accelerator run in order")
    def slot_order(m, j):
        return m.start[j] >= m.finish[j - 1]


def _add_finish_bounds(m: pyo.ConcreteModel, data: _Data) -> None:
    @m.Constraint(m.acc_slots, doc="Total >= Finish_j (valid: see the module docstring)")
    def total_after_slot(m, j):
        return m.total >= m.finish[j]


def _add_symmetry_breaking(m: pyo.ConcreteModel, data: _Data) -> None:
    pairs = [(a, b) for c in symmetric_first_slots(data) for a, b in zip(c, c[1:])]

    @m.Constraint(pairs, doc="identical accelerators start their first slots in index order")
    def start_order(m, a, b):
        return m.start[a] <= m.start[b]
