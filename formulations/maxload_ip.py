r"""Max-load (pipelined throughput) integer program of Tarnawski et al., Fig. 6.

Build-only module: :func:`build_maxload_ip` returns a Pyomo ``ConcreteModel`` and never
solves; :func:`decode` turns a solved model into a :class:`~dnnplace.graphs.placement.Placement`
and :func:`warm_start_values` completes a placement into values for every variable (both in
:mod:`dnnplace.formulations.maxload_solution`, importable from here too). The staircase
helpers live in :mod:`dnnplace.formulations.comm_costs`, the contiguity ones in
:mod:`dnnplace.formulations.contiguity`, the interchangeable-device classes in
:mod:`dnnplace.formulations.device_symmetry`.

Model (docs/semantics.md 2.2; devices ``d``: accelerators ``A`` pay communication, CPUs ``C`` do not)::

    x[g,d] in {0,1}        colocation group g on device d     (one x per group: the
                           colocation constraints x_u = x_v substituted, App. B)
    sum_d x[g,d] = 1                                         (15)  assign_once
    sum_g (m_g / M_d) x[g,d] <= 1           (d with finite M) (3)  memory_capacity (bytes
                           scaled by the capacity; a row its supported groups cannot fill is left out)
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
part ``P`` (whole graph, or forward and backward parts separately, docs/semantics.md 2.2)::

    z[v,d] >= x[v,d]                        v in P              (11) contiguity_cover
    z[v,d] <= z[u,d]                        (u,v) in E(P)       (12) contiguity_down
    z[v,d] <= x[v,d] - x[u,d] + 1           (u,v) in E(P)       (13) contiguity_leave

``z`` is continuous in [0, 1]: the proof of Lemma 4.1 never uses its integrality.

Pipeline order (the acyclic modes ``all`` / ``forward`` / ``both``, the default; see
:mod:`dnnplace.graphs.pipeline`). Convexity alone admits devices that wait on each other
in a cycle; the acyclic modes add a linear order of the constrained devices
(:func:`dnnplace.formulations.contiguity.add_unit_order`: ``order[a,b]`` binaries with the
linear-ordering rows) and, for every pipeline arc ``(u,v)`` (an edge, or a mirrored
orphan edge) and devices ``a != b``::

    x[u,a] + x[v,b] <= 1 + before(a,b)                               pipeline_order

Exactness. (=>) A split whose quotient over the pipeline arcs is acyclic has a
topological order of its devices; ``order`` set from it satisfies the linear-ordering
rows, and every arc that crosses devices goes from an earlier to a later device, so
every ``pipeline_order`` row holds. (<=) In an integer solution ``order`` is a strict
linear order (a tournament with no directed triangle); a crossing arc ``(u,v)`` with
``u`` on ``a`` and ``v`` on ``b`` makes the row read ``2 <= 1 + before(a,b)``, so every
arc of the quotient goes forward in that order and the quotient is acyclic. With the
convexity rows kept for the parts (backward convexity is not implied by the forward
order), the feasible splits are exactly those the evaluator accepts in the mode, which
are exactly the DP's splits (the quotient of a chain of ideals is acyclic, and the
first ``t`` devices of a topological order of an acyclic quotient form an ideal: Fact
5.2 applied stage by stage). Without ``symmetry_breaking``, interchangeable devices
(:func:`dnnplace.formulations.device_symmetry.identical_devices`) are fixed in index
order (relabelling them along any pipeline order keeps the loads), so only pairs of
devices of different classes (an accelerator and a CPU) keep a free ``order``, and
inside a class ``c_0 < c_1 < ...`` the pairwise rows give way to tighter prefix rows,
for every arc ``(u,v)`` and cut ``t``::

    sum_{i<t} x[v,c_i] <= sum_{i<t} x[u,c_i] + sum_{d not in c} x[u,d]   pipeline_order_prefix

(if ``v`` sits on one of the first ``t`` devices, ``u`` sits on one of them too or
outside the class; with ``u`` on ``c_a`` and ``v`` on ``c_b``, ``b < a``, the cut
``t = a`` is violated, and no arc that goes forward violates any cut).

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

from dnnplace.evaluation.evaluate import CONTIGUITY_MODES, MAXLOAD_OBJECTIVES
from dnnplace.formulations.comm_costs import comm_levels, host_costs
from dnnplace.formulations.contiguity import add_unit_order, before, contiguity_parts
from dnnplace.formulations.device_symmetry import group_order, identical_devices
from dnnplace.formulations.families import add_families
from dnnplace.formulations.maxload_solution import decode, warm_start_values
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.pipeline import is_acyclic_mode, pipeline_edges
from dnnplace.graphs.transforms.contract import colocation_labels

# decode and warm_start_values sit beside the builder (docs/architecture.md, "Adding a formulation")
__all__ = ["MaxLoadOptions", "build_maxload_ip", "decode", "warm_start_values"]


@dataclass(frozen=True)
class MaxLoadOptions:
    """Which constraint families and objective the max-load IP gets.

    ``contiguity``: a mode of :data:`dnnplace.evaluation.evaluate.CONTIGUITY_MODES` (``none`` = the
    non-contiguous IP; ``both``, the default, the DP's pipeline-realisable splits;
    ``convex-both`` the paper's Fig. 6 as printed); ``contiguity_on_cpus``: also constrain CPUs (the default of
    docs/semantics.md 2.2);
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
    order_units: list = field(default_factory=list)  # devices in the pipeline order
    order_classes: list = field(default_factory=list)  # interchangeable devices fixed in index order


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
    add_families(m, data, [(True, _add_assignment), (opts.memory, _add_memory), (True, _add_communication),
                           (True, _add_loads), (opts.contiguity != "none", _add_contiguity),
                           (opts.symmetry_breaking, _add_symmetry_breaking),
                           (is_acyclic_mode(opts.contiguity), _add_pipeline_order), (True, _add_objective)])
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

    @m.Constraint(m.mem_devices, doc="(3) static memory per device, as a share of its capacity")
    def memory_capacity(m, d):
        # bytes against a capacity of some 1e10 put coefficients of 1e8 and more beside the
        # loads' milliseconds (HiGHS warns of bad scaling); a row that cannot bind is left out
        if sum(pyo.value(m.mem_bytes[a]) for a in members[d]) <= float(cap[d]):
            return pyo.Constraint.Skip
        scale = float(cap[d]) if cap[d] > 0 else 1.0
        return sum(m.mem_bytes[a] / scale * m.x[a, d] for a in members[d]) <= float(cap[d]) / scale


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

    # each load is the sum of two parts (what, backward) of the device's terms
    loads = (("fw", "(20)-(21) forward load FW_d", ("compute", False), ("comm", False)),
             ("bw_load", "(20)-(21) backward load BW_d", ("compute", True), ("comm", True)),
             ("compute_load", "compute part of the load of d", ("compute", False), ("compute", True)),
             ("comm_load", "communication part of the load of d", ("comm", False), ("comm", True)))
    for name, doc, first, second in loads:
        m.add_component(name, pyo.Expression(m.devices, doc=doc,
                                             rule=lambda m, d, a=first, b=second: part(d, *a) + part(d, *b)))


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


def _add_pipeline_order(m: pyo.ConcreteModel, data: _Data) -> None:
    """Pipeline order of the acyclic modes (module docstring, ``pipeline_order``)."""
    g = data.graph
    devs = [d for d in range(data.cluster.size) if data.pays[d] or data.opts.contiguity_on_cpus]
    classes = [] if data.opts.symmetry_breaking else \
        [[d for d in c if d in devs] for c in identical_devices(data.cluster)
         if all((data.supported[:, c[0]] == data.supported[:, d]).all() for d in c)]
    data.order_units, data.order_classes = devs, [c for c in classes if len(c) >= 2]
    fixed = [(a, b) for c in data.order_classes for i, a in enumerate(c) for b in c[i + 1:]]
    add_unit_order(m, devs, fixed)
    src, dst, _ = pipeline_edges(g, data.opts.contiguity)
    lu, lv = data.label[src], data.label[dst]
    arcs = np.unique(np.stack([lu, lv], axis=1)[lu != lv], axis=0) if src.size else np.empty((0, 2), np.int64)
    same = {(a, b) for c in data.order_classes for a in c for b in c}
    rows = [(int(a), int(b), da, db) for a, b in arcs.tolist() for da in devs for db in devs
            if da != db and (da, db) not in same and data.supported[a, da] and data.supported[b, db]]
    # inside a class fixed in index order: prefix rows (one per arc and cut t), tighter
    # than the pairwise rows they replace
    prefix = [(int(a), int(b), ci, t) for a, b in arcs.tolist() for ci, c in enumerate(data.order_classes)
              for t in range(1, len(c))]

    @m.Constraint(rows, doc="pipeline_order: an arc from group a on da to group b on db puts da before db")
    def pipeline_order(m, a, b, da, db):
        return m.x[a, da] + m.x[b, db] <= 1 + before(m, da, db)

    def xs(grp: int, ds: Any) -> Any:
        return sum(m.x[grp, d] for d in ds if data.supported[grp, d])

    @m.Constraint(prefix, doc="pipeline_order_prefix: b on the first t devices of a class => a on them too, "
                              "or on a device outside the class")
    def pipeline_order_prefix(m, a, b, ci, t):
        c = data.order_classes[ci]
        lhs = xs(b, c[:t])
        if isinstance(lhs, int):
            return pyo.Constraint.Skip
        outside = [d for d in range(data.cluster.size) if d not in c]
        return lhs <= xs(a, c[:t]) + xs(a, outside)


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


def _add_objective(m: pyo.ConcreteModel, data: _Data) -> None:
    obj, ub = data.opts.objective, data.opts.upper_bound
    if obj == "gpipe":
        m.max_fw = pyo.Var(bounds=(0, None), doc="max_d FW_d")
        m.max_bw = pyo.Var(bounds=(0, None), doc="max_d BW_d")
        _add_load_bounds(m, [("fw_bound", "max_fw >= FW_d", m.max_fw, m.fw),
                             ("bw_bound", "max_bw >= BW_d", m.max_bw, m.bw_load)])
        m.max_load = pyo.Expression(expr=m.max_fw + m.max_bw, doc="GPipe objective (App. A)")
    else:
        m.max_load = pyo.Var(bounds=(0, ub), doc="MaxLoad")
        if obj == "pipedream":
            @m.Constraint(m.devices, doc="MaxLoad >= FW_d + BW_d (PipeDream)")
            def load_bound(m, d):
                return m.max_load >= m.fw[d] + m.bw_load[d]
        else:
            _add_load_bounds(m, [("compute_bound", "MaxLoad >= compute_d (App. C.1)", m.max_load, m.compute_load),
                                 ("comm_bound", "MaxLoad >= comm_d (App. C.1)", m.max_load, m.comm_load)])
    if obj == "gpipe" and ub is not None:
        m.upper_bound = pyo.Constraint(expr=m.max_load <= ub, doc="known achievable max-load")
    m.objective = pyo.Objective(expr=m.max_load, sense=pyo.minimize, doc="minimise the max-load")


def _add_load_bounds(m: pyo.ConcreteModel, rows: list[tuple[str, str, Any, Any]]) -> None:
    """One constraint family per row ``(name, doc, bound, load)``: ``bound >= load[d]`` on
    every device (the epigraph of ``max_d load[d]``)."""
    for name, doc, bound, load in rows:
        m.add_component(name, pyo.Constraint(m.devices, doc=doc,
                                             rule=lambda m, d, bound=bound, load=load: bound >= load[d]))
