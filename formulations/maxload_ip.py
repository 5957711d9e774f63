r"""Max-load (pipelined throughput) integer program of Tarnawski et al., Fig. 6.

Build-only module: :func:`build_maxload_ip` returns a Pyomo ``ConcreteModel`` and never
solves; :func:`decode` turns a solved model into a :class:`~dnnplace.graphs.placement.Placement`
and :func:`warm_start_values` completes a placement into values for every variable.

Model (SPEC 2.2; devices ``d``: accelerators ``A`` pay communication, CPUs ``C`` do not)::

    x[g,d] in {0,1}        colocation group g on device d     (one x per group: the
                           colocation constraints x_u = x_v substituted, App. B)
    sum_d x[g,d] = 1                                         (15)  assign_once
    sum_g m_g x[g,d] <= M_d                 (d with finite M) (3)  memory_capacity
    CommIn[u,d]  >= x[v,d] - x[u,d]         (u,v) in E, d in A   (17/18) comm_in_link
    CommOut[u,d] >= x[u,d] - x[v,d]         (u,v) in E, d in A   (19)    comm_out_link
    FW_d = sum_{v fw} p_d(v) x[v,d] + sum_{u fw} c_u (CommIn[u,d] + CommOut[u,d])  (20)
    BW_d = same over backward nodes; a CPU has no comm terms                       (21)
    pipedream:  min L,  L >= FW_d + BW_d
    gpipe:      min Lf + Lb,  Lf >= FW_d,  Lb >= BW_d                          (App. A)
    overlap:    min L,  L >= comm_d,  L >= compute_d                           (App. C.1)

``c_u`` is paid once per node and direction. When ``u``'s out-edges carry different
costs, the evaluator charges the largest *crossing* one; the model stays exact with a
staircase: for the sorted distinct costs ``w_1 < ... < w_r`` of ``u``'s edges there is one
``CommIn[u,d,t]`` per level, forced by the edges of cost ``>= w_t`` and weighted
``w_t - w_{t-1}`` (one level, i.e. exactly Fig. 6, on the Tarnawski inputs).

Contiguity (Definition 3.1, constraint (16)) via Lemma 4.1, per device ``d`` and per
part ``P`` (whole graph, or forward and backward parts separately, SPEC 2.2)::

    z[v,d] >= x[v,d]                        v in P              (11) contiguity_cover
    z[v,d] <= z[u,d]                        (u,v) in E(P)       (12) contiguity_down
    z[v,d] <= x[v,d] - x[u,d] + 1           (u,v) in E(P)       (13) contiguity_leave

``z`` is continuous in [0, 1]: the proof of Lemma 4.1 never uses its integrality.

Structure exploited for size: one ``x`` per colocation group instead of per node (the
colocation equalities substituted), no comm variable for an edge inside a group or a
zero-cost level, no ``(13)`` row where ``u`` cannot run on ``d``. Optional
(``symmetry_breaking``, off by default: HiGHS detects the symmetry of identical
accelerators itself and the rows did not help in a first measurement): interchangeable
devices are used in the order of their earliest group.

References
----------
J. Tarnawski, A. Phanishayee, N. Devanur, D. Mahajan, F. Nina Paravecino. Efficient
Algorithms for Device Placement of DNN Graph Operators. NeurIPS 2020.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from dnnplace.graphs.contract import colocation_labels
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement

__all__ = ["MaxLoadOptions", "build_maxload_ip", "decode", "warm_start_values", "contiguity_parts",
           "comm_levels"]


@dataclass(frozen=True)
class MaxLoadOptions:
    """Which constraint families and objective the max-load IP gets.

    ``contiguity``: a mode of :data:`dnnplace.graphs.evaluate.CONTIGUITY_MODES` (``none`` = the
    non-contiguous IP); ``contiguity_on_cpus``: also constrain CPUs (SPEC 2.2 default);
    ``upper_bound``: optional known achievable max-load (adds ``objective <= ub``).
    """

    objective: str = "pipedream"
    contiguity: str = "both"
    contiguity_on_cpus: bool = True
    memory: bool = True
    colocation: bool = True
    symmetry_breaking: bool = False
    upper_bound: float | None = None

    def __post_init__(self) -> None:
        if self.objective not in MAXLOAD_OBJECTIVES:
            raise InputError(f"unknown max-load objective {self.objective!r}; use one of {MAXLOAD_OBJECTIVES}")
        if self.contiguity not in CONTIGUITY_MODES:
            raise InputError(f"unknown contiguity mode {self.contiguity!r}; use one of {CONTIGUITY_MODES}")


@dataclass
class _Data:
    """Numpy-side description of the model (kept on the model for decode/warm start)."""

    graph: OpGraph
    cluster: Any
    opts: Any
    label: np.ndarray                 # group of every node
    n_groups: int
    supported: np.ndarray             # (groups, D) bool
    pays: np.ndarray                  # (D,) device pays communication
    comm_in: list = field(default_factory=list)   # (u, d, t, delta, [v...])
    comm_out: list = field(default_factory=list)
    z_index: list = field(default_factory=list)   # (v, d)
    z_edges: list = field(default_factory=list)   # (u, v, d)


# ---------------------------------------------------------------------------- shared data
def host_costs(g: OpGraph, cl: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(m, D)`` cost of moving each edge's tensor host->device (in) and device->host
    (out), exactly as :mod:`dnnplace.graphs.evaluate` charges it (explicit cost, else the link
    model to/from the first CPU)."""
    cpus = cl.devices_of_kind("cpu")
    if cpus.size == 0:
        raise InputError("the Tarnawski IPs route every transfer through a host CPU; the cluster has none")
    h = int(cpus[0])
    b = g.edge_bytes[:, None]
    cost = g.edge_cost[:, None]
    cin = np.where(np.isnan(cost), cl.beta0[h, :][None, :] + cl.beta1[h, :][None, :] * b, cost)
    cout = np.where(np.isnan(cost), cl.beta0[:, h][None, :] + cl.beta1[:, h][None, :] * b, cost)
    return cin, cout


def comm_levels(g: OpGraph, cost: np.ndarray, never_cross: np.ndarray, unit_device: list[int],
                keep_zero: bool = False) -> list[tuple[int, int, int, float, list[int]]]:
    """Staircase comm variables ``(u, unit, level, delta, heads)``: for node ``u`` and a
    unit (device or slot) on device ``unit_device[unit]``, level ``t`` is forced by the
    out-edges of ``u`` whose cost is ``>= w_t`` and weighs ``delta = w_t - w_{t-1}``.
    ``keep_zero`` keeps a zero-weight first level (the latency IP needs the indicator)."""
    out: list[tuple[int, int, int, float, list[int]]] = []
    ptr, eid = g.out_ptr, g.out_eid
    for u in range(g.n):
        es = eid[ptr[u]:ptr[u + 1]]
        es = es[~never_cross[es]]
        if es.size == 0:
            continue
        for unit, d in enumerate(unit_device):
            if d < 0:
                continue
            c = cost[es, d]
            prev = 0.0
            for t, w in enumerate(np.unique(c)):
                delta = float(w - prev)
                prev = float(w)
                if delta <= 0 and not (keep_zero and t == 0):
                    continue
                heads = sorted(set(g.dst[es[c >= w]].tolist()))
                out.append((u, unit, t, delta, heads))
    return out


def contiguity_parts(g: OpGraph, mode: str) -> list[np.ndarray]:
    """Node masks of the parts that must each be contiguous (as the evaluator's
    ``noncontiguous``): ``all`` the whole graph; ``forward`` / ``both`` the forward
    part (and the backward part) of a training graph, the whole graph otherwise."""
    if mode in (None, "none"):
        return []
    if mode == "all" or not g.is_training:
        return [np.ones(g.n, dtype=bool)]
    parts = [~g.backward]
    if mode == "both":
        parts.append(g.backward.copy())
    return parts


def reach_down(g: OpGraph, mask: np.ndarray, member: np.ndarray) -> np.ndarray:
    """For nodes in ``mask``: does ``v`` reach a ``member`` node (itself included) along
    edges inside ``mask``? The Lemma 4.1 witness ``z``."""
    z = member & mask
    inside = mask[g.src] & mask[g.dst]
    src, dst = g.src[inside], g.dst[inside]
    lvl = g.level[src]
    order = np.argsort(-lvl, kind="stable")  # deepest sources first
    src, dst, lvl = src[order], dst[order], lvl[order]
    cuts = np.flatnonzero(np.diff(lvl)) + 1
    z = z.copy()
    for s, t in zip(np.split(src, cuts), np.split(dst, cuts)):
        np.logical_or.at(z, s, z[t])
    return z


# ---------------------------------------------------------------------------- builder
def build_maxload_ip(inst: Instance, opts: MaxLoadOptions | None = None) -> pyo.ConcreteModel:
    """Build Fig. 6 for an instance (see the module docstring); never solves."""
    opts = opts or MaxLoadOptions()
    g, cl = inst.graph, inst.require_cluster()
    comp = cl.compute_matrix(g)
    label = colocation_labels(g) if opts.colocation else np.arange(g.n, dtype=np.int64)
    k = int(label.max()) + 1 if g.n else 0
    bad = np.zeros((k, cl.size), dtype=bool)
    np.logical_or.at(bad, label, np.isnan(comp))
    data = _Data(g, cl, opts, label, k, ~bad, np.array([kd != "cpu" for kd in cl.kinds]))
    empty = np.flatnonzero(~data.supported.any(axis=1))
    if empty.size:
        members = np.flatnonzero(label == empty[0])
        raise InputError(f"node {g.ids[members[0]]!r} (colocation group of {members.size}) runs on no device "
                         "of the cluster")
    m = pyo.ConcreteModel(name=f"maxload_ip[{g.name}]")
    m._data = data
    _add_sets_params(m, data, comp)
    _add_assignment(m, data)
    if opts.memory:
        _add_memory(m, data)
    _add_communication(m, data)
    _add_loads(m, data)
    if opts.contiguity != "none":
        _add_contiguity(m, data)
    if opts.symmetry_breaking:
        _add_symmetry_breaking(m, data)
    _add_objective(m, data)
    return m


def _add_sets_params(m: pyo.ConcreteModel, data: _Data, comp: np.ndarray) -> None:
    g, cl = data.graph, data.cluster
    m.devices = pyo.Set(initialize=range(cl.size), doc="devices (accelerators pay communication)")
    m.groups = pyo.Set(initialize=range(data.n_groups), doc="colocation groups (singletons if ungrouped)")
    m.group_devices = pyo.Set(dimen=2, initialize=[(a, d) for a, d in zip(*np.nonzero(data.supported))],
                              doc="(group, device) pairs where every member runs")
    m.compute_ms = comp  # (n, D) processing times, NaN = unsupported
    grp_mem = np.bincount(data.label, weights=g.memory, minlength=data.n_groups)
    m.mem_bytes = pyo.Param(m.groups, initialize=dict(enumerate(grp_mem.tolist())), doc="group memory (bytes)")
    m.x = pyo.Var(m.group_devices, within=pyo.Binary, doc="x[g,d] = 1 iff group g is on device d")


def _x(m: pyo.ConcreteModel, v: int, d: int) -> Any:
    """``x[v,d]`` for a node (its group's variable), or 0 where it cannot run."""
    a = int(m._data.label[v])
    return m.x[a, d] if m._data.supported[a, d] else 0


def _add_assignment(m: pyo.ConcreteModel, data: _Data) -> None:
    by_group: dict[int, list[int]] = {}
    for a, d in m.group_devices:
        by_group.setdefault(a, []).append(d)

    @m.Constraint(m.groups, doc="(15) every group on exactly one device")
    def assign_once(m, a):
        return sum(m.x[a, d] for d in by_group[a]) == 1


def _add_memory(m: pyo.ConcreteModel, data: _Data) -> None:
    cap = data.cluster.memory
    finite = [d for d in range(data.cluster.size) if np.isfinite(cap[d])]
    m.mem_devices = pyo.Set(initialize=finite, doc="devices with a finite memory capacity")
    members = {d: [a for a in range(data.n_groups) if data.supported[a, d]] for d in finite}

    @m.Constraint(m.mem_devices, doc="(3) static memory per device")
    def memory_capacity(m, d):
        if not members[d]:
            return pyo.Constraint.Skip
        return sum(m.mem_bytes[a] * m.x[a, d] for a in members[d]) <= float(cap[d])


def _add_communication(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    cin, cout = host_costs(g, data.cluster)
    never = data.label[g.src] == data.label[g.dst]
    acc = [d if data.pays[d] else -1 for d in range(data.cluster.size)]
    data.comm_in = [r for r in comm_levels(g, cin, never, acc)]
    data.comm_out = [r for r in comm_levels(g, cout, never, acc)]
    m.comm_in_index = pyo.Set(dimen=3, initialize=[(u, d, t) for u, d, t, _, _ in data.comm_in],
                              doc="(node u, accelerator d, cost level t) of CommIn")
    m.comm_out_index = pyo.Set(dimen=3, initialize=[(u, d, t) for u, d, t, _, _ in data.comm_out],
                               doc="(node u, accelerator d, cost level t) of CommOut")
    m.comm_in = pyo.Var(m.comm_in_index, bounds=(0, 1), doc="u's output is read into d (level t)")
    m.comm_out = pyo.Var(m.comm_out_index, bounds=(0, 1), doc="u's output is written out of d (level t)")
    in_links = [(u, d, t, v) for u, d, t, _, heads in data.comm_in for v in heads
                if data.supported[data.label[v], d]]
    out_links = [(u, d, t, v) for u, d, t, _, heads in data.comm_out for v in heads]

    @m.Constraint(in_links, doc="(17)-(18) CommIn[u,d] >= x[v,d] - x[u,d]")
    def comm_in_link(m, u, d, t, v):
        return m.comm_in[u, d, t] >= _x(m, v, d) - _x(m, u, d)

    @m.Constraint(out_links, doc="(19) CommOut[u,d] >= x[u,d] - x[v,d]")
    def comm_out_link(m, u, d, t, v):
        return m.comm_out[u, d, t] >= _x(m, u, d) - _x(m, v, d)


def _add_loads(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    comp = m.compute_ms
    bw = g.backward
    terms: dict[tuple[int, str, bool], list] = {}
    for v in range(g.n):
        a = int(data.label[v])
        for d in range(data.cluster.size):
            if data.supported[a, d] and comp[v, d] != 0:
                terms.setdefault((d, "compute", bool(bw[v])), []).append(float(comp[v, d]) * m.x[a, d])
    for recs, var in ((data.comm_in, m.comm_in), (data.comm_out, m.comm_out)):
        for u, d, t, delta, _ in recs:
            terms.setdefault((d, "comm", bool(bw[u])), []).append(delta * var[u, d, t])

    def part(d: int, what: str, backward: bool) -> Any:
        return sum(terms.get((d, what, backward), []))

    @m.Expression(m.devices, doc="(20)-(21) forward load FW_d")
    def fw(m, d):
        return part(d, "compute", False) + part(d, "comm", False)

    @m.Expression(m.devices, doc="(20)-(21) backward load BW_d")
    def bw_load(m, d):
        return part(d, "compute", True) + part(d, "comm", True)

    @m.Expression(m.devices, doc="compute part of the load of d")
    def compute_load(m, d):
        return part(d, "compute", False) + part(d, "compute", True)

    @m.Expression(m.devices, doc="communication part of the load of d")
    def comm_load(m, d):
        return part(d, "comm", False) + part(d, "comm", True)


def _add_contiguity(m: pyo.ConcreteModel, data: _Data) -> None:
    g = data.graph
    devs = [d for d in range(data.cluster.size) if data.pays[d] or data.opts.contiguity_on_cpus]
    z_index, z_edges, cover = [], [], []
    for mask in contiguity_parts(g, data.opts.contiguity):
        nodes = np.flatnonzero(mask)
        inside = np.flatnonzero(mask[g.src] & mask[g.dst])
        for d in devs:
            z_index += [(int(v), d) for v in nodes]
            cover += [(int(v), d) for v in nodes if data.supported[data.label[v], d]]
            z_edges += [(int(g.src[e]), int(g.dst[e]), d) for e in inside]
    data.z_index, data.z_edges = z_index, z_edges
    m.z_index = pyo.Set(dimen=2, initialize=z_index, doc="(node, device) pairs under contiguity")
    m.z = pyo.Var(m.z_index, bounds=(0, 1), doc="Lemma 4.1: z[v,d] = 1 if v reaches a node of d")
    leave = [(u, v, d) for u, v, d in z_edges
             if data.label[u] != data.label[v] and data.supported[data.label[u], d]]

    @m.Constraint(cover, doc="(11) z[v,d] >= x[v,d]")
    def contiguity_cover(m, v, d):
        return m.z[v, d] >= _x(m, v, d)

    @m.Constraint(z_edges, doc="(12) z non-increasing along edges: z[v,d] <= z[u,d]")
    def contiguity_down(m, u, v, d):
        return m.z[v, d] <= m.z[u, d]

    @m.Constraint(leave, doc="(13) after leaving d, never return: z[v,d] <= x[v,d] - x[u,d] + 1")
    def contiguity_leave(m, u, v, d):
        return m.z[v, d] <= _x(m, v, d) - _x(m, u, d) + 1


def identical_devices(cl: Any) -> list[list[int]]:
    """Classes (size >= 2) of interchangeable devices: same kind, memory, speed and
    the same link figures to and from every other device."""
    classes: dict[tuple, list[int]] = {}
    for d in range(cl.size):
        others = [e for e in range(cl.size) if e != d]
        key = (cl.kinds[d], float(cl.memory[d]), float(cl.speed[d]),
               tuple(sorted(zip(cl.beta0[d, others], cl.beta0[others, d], cl.beta1[d, others],
                                cl.beta1[others, d], cl.cost_factor[d, others], cl.cost_factor[others, d]))))
        classes.setdefault(key, []).append(d)
    return [c for c in classes.values() if len(c) >= 2]


def group_order(data: _Data) -> np.ndarray:
    """Groups ranked by the topological position of their first member."""
    first = np.full(data.n_groups, np.iinfo(np.int64).max)
    np.minimum.at(first, data.label, data.graph.topo_position)
    return np.argsort(first, kind="stable")


def _add_symmetry_breaking(m: pyo.ConcreteModel, data: _Data) -> None:
    """Interchangeable devices are used in order of their earliest group: with groups
    ranked ``a_0, a_1, ...`` topologically, device ``d_c`` (the next device of a class
    after ``d_p``) may hold ``a_r`` only if ``d_p`` holds some ``a_s, s < r``.
    Valid: relabelling the devices of a class by their first group maps any solution
    to one that satisfies it, with the same loads. ``prefix[r,d] = sum_{s<=r} x[a_s,d]``
    keeps it sparse (two rows per group and device)."""
    classes = [c for c in identical_devices(data.cluster)
               if all((data.supported[:, c[0]] == data.supported[:, d]).all() for d in c)]
    data.sym_classes = classes
    if not classes:
        return
    order = [int(a) for a in group_order(data)]
    devs = sorted({d for c in classes for d in c[:-1]})
    pairs = [(c[i], c[i + 1]) for c in classes for i in range(len(c) - 1)]
    ranks = [r for r, a in enumerate(order)]
    m.prefix = pyo.Var(ranks, devs, bounds=(0, None), doc="prefix[r,d]: how many of the first r+1 groups are on d")

    def xa(r: int, d: int) -> Any:
        a = order[r]
        return m.x[a, d] if data.supported[a, d] else 0

    @m.Constraint(ranks, devs, doc="prefix[r,d] = prefix[r-1,d] + x[a_r,d]")
    def prefix_def(m, r, d):
        return m.prefix[r, d] == (m.prefix[r - 1, d] if r else 0) + xa(r, d)

    @m.Constraint(ranks, pairs, doc="device d_c holds a_r only if d_p holds an earlier group")
    def symmetry_order(m, r, dp, dc):
        lhs = xa(r, dc)
        if isinstance(lhs, int):
            return pyo.Constraint.Skip
        return lhs <= (m.prefix[r - 1, dp] if r else 0)


def canonical(data: _Data, p: Placement) -> Placement:
    """``p`` with the devices of every interchangeable class relabelled in order of
    their earliest group (what the symmetry-breaking rows demand); same loads."""
    classes = getattr(data, "sym_classes", [])
    if not classes:
        return p
    dev = p.device.copy()
    grp_dev = np.full(data.n_groups, -1, dtype=np.int64)
    grp_dev[data.label] = dev
    order = group_order(data)
    rank = np.empty(data.n_groups, dtype=np.int64)
    rank[order] = np.arange(data.n_groups)
    new = dev.copy()
    for c in classes:
        firsts = []
        for d in c:
            on = np.flatnonzero(grp_dev == d)
            firsts.append((rank[on].min() if on.size else np.iinfo(np.int64).max, d))
        for target, (_, d) in zip(c, sorted(firsts)):
            new[dev == d] = target
    return Placement(p.graph, p.cluster, new)


def _add_objective(m: pyo.ConcreteModel, data: _Data) -> None:
    obj, ub = data.opts.objective, data.opts.upper_bound
    if obj == "gpipe":
        m.max_fw = pyo.Var(bounds=(0, None), doc="max_d FW_d")
        m.max_bw = pyo.Var(bounds=(0, None), doc="max_d BW_d")

        @m.Constraint(m.devices, doc="max_fw >= FW_d")
        def fw_bound(m, d):
            return m.max_fw >= m.fw[d]

        @m.Constraint(m.devices, doc="max_bw >= BW_d")
        def bw_bound(m, d):
            return m.max_bw >= m.bw_load[d]

        m.max_load = pyo.Expression(expr=m.max_fw + m.max_bw, doc="GPipe objective (App. A)")
    else:
        m.max_load = pyo.Var(bounds=(0, ub), doc="MaxLoad")
        if obj == "pipedream":
            @m.Constraint(m.devices, doc="MaxLoad >= FW_d + BW_d (PipeDream)")
            def load_bound(m, d):
                return m.max_load >= m.fw[d] + m.bw_load[d]
        else:
            @m.Constraint(m.devices, doc="MaxLoad >= compute_d (App. C.1)")
            def compute_bound(m, d):
                return m.max_load >= m.compute_load[d]

            @m.Constraint(m.devices, doc="MaxLoad >= comm_d (App. C.1)")
            def comm_bound(m, d):
                return m.max_load >= m.comm_load[d]
    if obj == "gpipe" and ub is not None:
        m.upper_bound = pyo.Constraint(expr=m.max_load <= ub, doc="known achievable max-load")
    m.objective = pyo.Objective(expr=m.max_load, sense=pyo.minimize, doc="minimise the max-load")


# ---------------------------------------------------------------------------- decode / start
def decode(m: pyo.ConcreteModel) -> Placement:
    """The placement of a solved model (each group on its device with the largest x)."""
    data: _Data = m._data
    score = np.full((data.n_groups, data.cluster.size), -1.0)
    for (a, d), var in m.x.items():
        score[a, d] = var.value if var.value is not None else -1.0
    return Placement(data.graph, data.cluster, score.argmax(axis=1)[data.label])


def warm_start_values(m: pyo.ConcreteModel, p: Placement) -> dict[Any, float]:
    """Values for every variable of ``m`` that encode placement ``p`` consistently
    (x, tight CommIn/CommOut, the Lemma 4.1 witness z, the objective variables).

    Raises ``InputError`` when ``p`` splits a colocation group or uses an unsupported
    device (no feasible completion exists)."""
    data: _Data = m._data
    g = data.graph
    p = canonical(data, p)
    dev = p.device
    grp_dev = np.full(data.n_groups, -1, dtype=np.int64)
    grp_dev[data.label] = dev
    if (grp_dev[data.label] != dev).any():
        raise InputError("warm start splits a colocation group")
    if not data.supported[np.arange(data.n_groups), grp_dev].all():
        raise InputError("warm start puts a node on a device it does not support")
    vals = ComponentMap()
    for (a, d), var in m.x.items():
        vals[var] = 1.0 if grp_dev[a] == d else 0.0
    on = lambda v, d: dev[v] == d  # noqa: E731
    for u, d, t, _, heads in data.comm_in:
        vals[m.comm_in[u, d, t]] = float(any(on(v, d) for v in heads) and not on(u, d))
    for u, d, t, _, heads in data.comm_out:
        vals[m.comm_out[u, d, t]] = float(on(u, d) and any(not on(v, d) for v in heads))
    if data.z_index:
        for mask in contiguity_parts(g, data.opts.contiguity):
            for d in {d for _, d in data.z_index}:
                z = reach_down(g, mask, dev == d)
                for v in np.flatnonzero(mask):
                    vals[m.z[int(v), d]] = float(z[v])
    fw = np.array([_eval(m.fw[d], vals) for d in m.devices])
    bw = np.array([_eval(m.bw_load[d], vals) for d in m.devices])
    if data.opts.objective == "gpipe":
        vals[m.max_fw], vals[m.max_bw] = float(fw.max()), float(bw.max())
    elif data.opts.objective == "pipedream":
        vals[m.max_load] = float((fw + bw).max())
    else:
        comp = np.array([_eval(m.compute_load[d], vals) for d in m.devices])
        comm = np.array([_eval(m.comm_load[d], vals) for d in m.devices])
        vals[m.max_load] = float(np.maximum(comp, comm).max())
    if hasattr(m, "prefix"):
        counts = {d: np.cumsum(grp_dev[group_order(data)] == d) for d in {d for _, d in m.prefix}}
        for (r, d), var in m.prefix.items():
            vals[var] = float(counts[d][r])
    return vals


def _eval(expr: Any, vals: dict[Any, float]) -> float:
    """Value of a linear expression under ``vals`` (variables not in it count 0)."""
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(expr, compute_values=True)
    return float(repn.constant) + sum(float(c) * vals.get(v, 0.0) for c, v in zip(repn.linear_coefs,
                                                                                    repn.linear_vars))
