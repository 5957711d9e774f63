r"""Pesto's joint placement-and-scheduling ILP (Hafeez et al., Middleware 2021, Sec. 3.2.2),
generalised to any number of devices. Builds a Pyomo ``ConcreteModel``; never solves.

Model
-----
Sets: ops :math:`V`, devices :math:`D`, allowed pairs :math:`A = \{(i, d): p_{id} < \infty\}`
(device affinity), edges :math:`E`, directed links :math:`L = \{(a, b): a \ne b\}`.

Variables: :math:`x_{id} \in \{0,1\}` (placement, one-hot), :math:`S_i \ge 0` (start),
:math:`C_i = S_i + \sum_d p_{id} x_{id}` (completion, constraint (2)), :math:`C_{\max}`.
For every edge :math:`e = (i, j)` that may cross devices, the *communication vertex* of
the augmented graph :math:`\tilde G`: :math:`y_{eab} \in [0, 1]` for
:math:`(a, b) \in A_i \times A_j` with

.. math::  \sum_b y_{eab} = x_{ia}, \qquad \sum_a y_{eab} = x_{jb}            \tag{5}

(for one-hot :math:`x` the only solution is :math:`y_{eab} = x_{ia} x_{jb}`, so :math:`y`
may be continuous: this is the many-device form of Pesto's XOR :math:`z_k = x_i \oplus x_j`,
with :math:`z_e = \sum_{a \ne b} y_{eab}`), duration
:math:`\tau_e = \sum_{a \ne b} t_{eab} y_{eab}` (constraint (6): :math:`\tau_e = 0` when
both ends share a device) and, with congestion, a transfer start :math:`T_e`.

Precedence (1): :math:`S_j \ge C_i + \tau_e` without congestion; with congestion
:math:`T_e \ge C_i` and :math:`S_j \ge T_e + \tau_e`. Makespan (3):
:math:`C_{\max} \ge C_i` for sinks, and the valid cut :math:`C_{\max} \ge \sum_i p_{id} x_{id}`
(each device's load).

Device non-overlap (4)/(10), for each pair :math:`\{i, k\}` *not ordered by precedence*
(neither reaches the other; a reachable pair is already ordered by (1), so this reduction
is exact) that can share a device: same-device indicator
:math:`s_{ik} \ge x_{id} + x_{kd} - 1` and order :math:`o_{ik} \in \{0, 1\}`:

.. math::  S_k \ge C_i - M_{ik} (2 - o_{ik} - s_{ik}), \qquad
           S_i \ge C_k - M_{ki} (1 + o_{ik} - s_{ik}).

Congestion (7), for each pair of transfers :math:`e = (i, j)`, :math:`f = (k, l)` not ordered
by precedence (:math:`j \rightsquigarrow k` or :math:`l \rightsquigarrow i` orders them
exactly) that can use the same directed link: they share a link iff
:math:`s_{ik} = s_{jl} = z_e = 1`, so with :math:`q_{ef} = 3 - s_{ik} - s_{jl} - z_e \ge 0`

.. math::  T_f \ge T_e + \tau_e - M_{ef} (1 - o_{ef} + q_{ef}), \qquad
           T_e \ge T_f + \tau_f - M_{fe} (o_{ef} + q_{ef}).

(:math:`s_{ii} = 1`.) Links are free to order their transfers in any way (Pesto's (7));
the simulator's FCFS queue is one particular order, so this ILP is a *relaxation* of the
FCFS semantics of SPEC 2.1: its optimum and bound are lower bounds there, and a decoded
solution is re-simulated (see :mod:`dnnplace.formulations.pesto`).

Time windows: every schedule of makespan :math:`\le U` runs op :math:`i` inside
:math:`[h_i, U - q_i]` and transfer :math:`(i, j)` inside
:math:`[h_i + \underline p_i, U - q_j - \underline p_j]`; pairs whose windows do not overlap
are ordered already and get no order variable (exact for the same reason as
reachability).

Memory (8): :math:`\sum_i m_i x_{id} \le M_d`. Colocation: :math:`x_{id} = x_{rd}` for the
group's first member :math:`r`. Symmetry breaking (identical devices, i.e. a class of
devices that any permutation maps onto itself, links included): with the class's devices
:math:`d_1, \ldots, d_r` and the ops that can run on them in topological order
:math:`v_1, v_2, \ldots`, :math:`x_{v_k d_j} \le \sum_{l < k} x_{v_l d_{j-1}}` — device
:math:`d_j` is used only after :math:`d_{j-1}` was (relabel any solution by first use:
exact).

Big-M (every value derived, none "large"): :math:`U` is the makespan of a feasible
heuristic schedule (list scheduling, re-simulated: any such schedule satisfies every
constraint above, so the optimum is :math:`\le U`) and :math:`C_{\max} \le U`. With
:math:`h_i` the longest path of minimum compute times into :math:`i` (head) and
:math:`q_i` out of it (tail, excluding :math:`i`), every schedule of makespan
:math:`\le U` has :math:`h_i \le S_i` and :math:`C_i \le U - q_i`. Hence
:math:`M_{ik} = \max(0, U - q_i - h_k) \ge C_i - S_k`, and for transfers
:math:`T_e + \tau_e \le S_j \le U - q_j - \underline p_j` and
:math:`T_f \ge C_k \ge h_k + \underline p_k`, so
:math:`M_{ef} = \max(0, U - q_j - \underline p_j - h_k - \underline p_k)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement

__all__ = ["PestoOptions", "PestoData", "build_pesto_model", "warm_start_values", "decode",
           "reachability", "identical_device_classes", "canonical_relabel"]


@dataclass(frozen=True)
class PestoOptions:
    """Switchable constraint families of the Pesto ILP."""

    congestion: bool = True
    memory: bool = True
    colocation: bool = True
    symmetry: bool = True
    load_cuts: bool = True


@dataclass(eq=False)
class PestoData:
    """Everything the builder derived from the instance (kept on ``model.pesto``)."""

    graph: OpGraph
    cluster: Cluster
    options: PestoOptions
    horizon: float
    p: np.ndarray            # (n, D) compute times, NaN = not allowed
    allowed: list            # per node: allowed device list
    head: np.ndarray
    tail: np.ndarray
    pmin: np.ndarray
    reach: np.ndarray        # (n, n) bool, u reaches v (u != v)
    cross_edges: list        # edges that may cross devices
    node_pairs: list         # (i, k) pairs with an order variable
    same_pairs: list         # (i, k) pairs with a same-device variable
    xfer_pairs: list         # (e, f) pairs with a link order variable
    group_leader: np.ndarray  # colocation leader per node (itself if none)
    same_set: frozenset = frozenset()


def reachability(graph: OpGraph) -> np.ndarray:
    """``R[u, v]``: there is a path ``u -> ... -> v`` (``u != v``); bit-packed rows.

    ``O(n * m / 8)`` with numpy ``bitwise_or`` on packed rows; fine for coarse graphs of
    a few thousand nodes.
    """
    n = graph.n
    words = (n + 7) // 8
    bits = np.zeros((n, words), dtype=np.uint8)
    ptr, nbr = graph.out_ptr, graph.out_nbr
    onehot = np.packbits(np.eye(n, dtype=bool), axis=1) if n <= 4096 else None
    for u in graph.topo_order[::-1].tolist():
        succ = nbr[ptr[u]:ptr[u + 1]]
        if succ.size:
            row = np.bitwise_or.reduce(bits[succ], axis=0)
            if onehot is not None:
                row |= np.bitwise_or.reduce(onehot[succ], axis=0)
            else:
                for s in succ.tolist():
                    row[s >> 3] |= np.uint8(0x80 >> (s & 7))
            bits[u] = row
    return np.unpackbits(bits, axis=1, count=n).astype(bool)


def identical_device_classes(cluster: Cluster) -> list[list[int]]:
    """Classes of interchangeable devices: same kind, memory and speed, and swapping any
    two of them leaves every link array unchanged (so any permutation within a class is
    an automorphism of the cluster)."""
    D = cluster.size
    key: dict[tuple, list[int]] = {}
    for d, dev in enumerate(cluster.devices):
        key.setdefault((dev.kind, dev.memory, dev.speed), []).append(d)
    out = []
    for members in key.values():
        if len(members) < 2:
            continue
        cls = [members[0]]
        for d in members[1:]:
            perm = np.arange(D)
            perm[[members[0], d]] = perm[[d, members[0]]]
            if all(np.array_equal(arr, arr[np.ix_(perm, perm)]) for arr in
                   (cluster.beta0, cluster.beta1, cluster.cost_factor)):
                cls.append(d)
        if len(cls) > 1:
            out.append(cls)
    return out


def canonical_relabel(graph: OpGraph, cluster: Cluster, device: np.ndarray) -> np.ndarray:
    """Relabel devices inside each identical class by first use in topological order,
    so that a placement satisfies the symmetry-breaking constraints (same schedule)."""
    dev = np.asarray(device, dtype=np.int64).copy()
    for cls in identical_device_classes(cluster):
        mapping: dict[int, int] = {}
        in_cls = set(cls)
        for v in graph.topo_order.tolist():
            d = int(dev[v])
            if d in in_cls and d not in mapping:
                mapping[d] = cls[len(mapping)]
        for d in cls:
            if d not in mapping:
                mapping[d] = [c for c in cls if c not in mapping.values()][0]
        lut = np.arange(cluster.size)
        for a, b in mapping.items():
            lut[a] = b
        dev = lut[dev]
    return dev


def _heads_tails(graph: OpGraph, pmin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    head = np.zeros(graph.n)
    tail = np.zeros(graph.n)
    src, dst = graph.src.tolist(), graph.dst.tolist()
    hp, tp_ = head.tolist(), tail.tolist()
    pm = pmin.tolist()
    ip, inb = graph.in_ptr.tolist(), graph.in_nbr.tolist()
    op, onb = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    order = graph.topo_order.tolist()
    for v in order:
        best = 0.0
        for k in range(ip[v], ip[v + 1]):
            u = inb[k]
            best = max(best, hp[u] + pm[u])
        hp[v] = best
    for u in reversed(order):
        best = 0.0
        for k in range(op[u], op[u + 1]):
            w = onb[k]
            best = max(best, tp_[w] + pm[w])
        tp_[u] = best
    del src, dst
    return np.asarray(hp), np.asarray(tp_)


def _prepare(graph: OpGraph, cluster: Cluster, options: PestoOptions, horizon: float) -> PestoData:
    n = graph.n
    p = cluster.compute_matrix(graph)
    allowed = [np.flatnonzero(~np.isnan(p[i])).tolist() for i in range(n)]
    if options.memory:
        big = graph.memory[:, None] > cluster.memory[None, :]
        allowed = [[d for d in allowed[i] if not big[i, d]] for i in range(n)]
    leader = np.arange(n)
    if options.colocation and n:
        co = graph.colocation
        for grp in np.unique(co[co >= 0]).tolist():
            mem = np.flatnonzero(co == grp)
            leader[mem] = mem[0]
            common = set(allowed[mem[0]])
            for i in mem[1:].tolist():
                common &= set(allowed[i])
            for i in mem.tolist():
                allowed[i] = sorted(common)
    empty = [i for i in range(n) if not allowed[i]]
    if empty:
        raise InputError(f"{graph._node(empty[0])}: no device can run it (affinity, memory or colocation)")
    pmin = np.array([np.nanmin(p[i, allowed[i]]) for i in range(n)]) if n else np.zeros(0)
    head, tail = _heads_tails(graph, pmin)
    reach = reachability(graph)
    asets = [set(a) for a in allowed]

    def forced_same(i: int, k: int) -> bool:
        if leader[i] == leader[k]:
            return True
        return len(asets[i]) == 1 and asets[i] == asets[k]

    cross = [e for e in range(graph.m) if not forced_same(int(graph.src[e]), int(graph.dst[e]))]
    # time windows valid for every schedule of makespan <= U: op i occupies
    # [head_i, U - tail_i]; transfer (i, j) occupies [head_i + pmin_i, U - tail_j - pmin_j]
    n_lo, n_hi = head, horizon - tail
    # node pairs: incomparable, able to share a device, windows overlap
    unordered = ~(reach | reach.T)
    iu, ku = np.nonzero(np.triu(unordered, k=1))
    node_pairs = [(int(i), int(k)) for i, k in zip(iu.tolist(), ku.tolist())
                  if asets[i] & asets[k] and n_lo[i] < n_hi[k] and n_lo[k] < n_hi[i]]
    same = {pair for pair in node_pairs if not forced_same(*pair)}
    xfer_pairs = []
    if options.congestion:
        src, dst = graph.src, graph.dst
        x_lo = {e: head[src[e]] + pmin[src[e]] for e in cross}
        x_hi = {e: horizon - tail[dst[e]] - pmin[dst[e]] for e in cross}
        for a_idx in range(len(cross)):
            e = cross[a_idx]
            i, j = int(src[e]), int(dst[e])
            for f in cross[a_idx + 1:]:
                k, l_ = int(src[f]), int(dst[f])
                if j == k or l_ == i or reach[j, k] or reach[l_, i]:
                    continue  # ordered by precedence
                if x_hi[e] <= x_lo[f] or x_hi[f] <= x_lo[e]:
                    continue  # ordered by their time windows
                common_src = asets[i] & asets[k]
                common_dst = asets[j] & asets[l_]
                if not common_src or not common_dst:
                    continue
                if len(common_src) == 1 and common_src == common_dst:
                    continue  # no link both can use
                xfer_pairs.append((e, f))
                for u, w in ((i, k), (j, l_)):
                    if u != w and not forced_same(u, w):
                        same.add((min(u, w), max(u, w)))
    return PestoData(graph, cluster, options, float(horizon), p, allowed, head, tail, pmin, reach, cross,
                     node_pairs, sorted(same), xfer_pairs, leader, frozenset(same))


def build_pesto_model(graph: OpGraph, cluster: Cluster, *, horizon: float,
                      options: PestoOptions | None = None) -> pyo.ConcreteModel:
    """Build the Pesto ILP (see the module docstring).

    Parameters
    ----------
    graph, cluster
        The (possibly coarsened) operator graph and the devices.
    horizon : float
        Makespan ``U`` of a feasible schedule of this graph (e.g. a re-simulated list
        schedule): every big-M is derived from it.
    options : PestoOptions

    Returns
    -------
    ConcreteModel
        With ``model.pesto`` (:class:`PestoData`) for :func:`decode` and
        :func:`warm_start_values`.
    """
    options = options or PestoOptions()
    if not (horizon > 0 and math.isfinite(horizon)):
        raise InputError(f"horizon must be a positive finite makespan, got {horizon}")
    U = float(horizon) * (1 + 1e-9) + 1e-9  # float slack: the heuristic schedule stays feasible
    data = _prepare(graph, cluster, options, U)
    g, cl = graph, cluster
    n, D = g.n, cl.size
    src, dst = g.src.tolist(), g.dst.tolist()
    m = pyo.ConcreteModel(name=f"pesto-{g.name}")
    m.pesto = data

    # ---------------------------------------------------------------- sets
    m.ops = pyo.Set(initialize=range(n), doc="operations (nodes of the graph)")
    m.devices = pyo.Set(initialize=range(D), doc="devices of the cluster")
    m.allowed = pyo.Set(dimen=2, initialize=[(i, d) for i in range(n) for d in data.allowed[i]],
                        doc="(op, device) pairs the op may use: affinity, memory, colocation")
    m.cross_edges = pyo.Set(initialize=data.cross_edges, doc="edges whose ends may be on different devices")
    m.edge_pairs = pyo.Set(dimen=3, initialize=[(e, a, b) for e in data.cross_edges
                                                for a in data.allowed[src[e]] for b in data.allowed[dst[e]]],
                           doc="(edge, source device, target device) combinations")
    m.node_pairs = pyo.Set(dimen=2, initialize=data.node_pairs, doc="op pairs not ordered by precedence")
    m.same_pairs = pyo.Set(dimen=2, initialize=data.same_pairs, doc="op pairs with a same-device indicator")
    m.xfer_pairs = pyo.Set(dimen=2, initialize=data.xfer_pairs, doc="transfer pairs that may share a link")

    # ---------------------------------------------------------------- params
    p = data.p
    m.compute_time = pyo.Param(m.allowed, initialize=lambda _m, i, d: float(p[i, d]),
                               doc="processing time of op i on device d (graph.unit)")
    ebytes, ecost = g.edge_bytes, g.edge_cost

    def _tt(_m, e, a, b):
        if a == b:
            return 0.0
        return float(cl.transfer_time(np.array([a]), np.array([b]), ebytes[[e]], ecost[[e]])[0])
    m.xfer_time = pyo.Param(m.edge_pairs, initialize=_tt, doc="transfer time of edge e on link (a, b)")

    # ---------------------------------------------------------------- variables
    m.x = pyo.Var(m.allowed, domain=pyo.Binary, doc="x[i,d] = 1 iff op i runs on device d")
    s_lo, s_hi = data.head, U - data.tail - data.pmin
    m.start = pyo.Var(m.ops, bounds=lambda _m, i: (float(s_lo[i]), float(max(s_lo[i], s_hi[i]))),
                      doc="S_i: start time of op i")
    m.cmax = pyo.Var(bounds=(float((data.head + data.pmin).max()) if n else 0.0, U), doc="C_max: makespan")
    m.y = pyo.Var(m.edge_pairs, bounds=(0, 1), doc="y[e,a,b] = x[src(e),a] * x[dst(e),b] (communication vertex)")
    m.same = pyo.Var(m.same_pairs, bounds=(0, 1), doc="s[i,k] >= 1 if ops i and k share a device")
    m.order = pyo.Var(m.node_pairs, domain=pyo.Binary, doc="o[i,k] = 1: i before k if on one device")
    if options.congestion:
        t_lo = {e: float(data.head[src[e]] + data.pmin[src[e]]) for e in data.cross_edges}
        t_hi = {e: float(max(t_lo[e], U - data.tail[dst[e]] - data.pmin[dst[e]])) for e in data.cross_edges}
        m.xstart = pyo.Var(m.cross_edges, bounds=lambda _m, e: (t_lo[e], t_hi[e]),
                           doc="T_e: start of edge e's transfer on its link")
        m.xorder = pyo.Var(m.xfer_pairs, domain=pyo.Binary, doc="o[e,f] = 1: transfer e before f if on one link")

    # ---------------------------------------------------------------- expressions
    dev_of = {i: data.allowed[i] for i in range(n)}
    m.finish = pyo.Expression(m.ops, rule=lambda _m, i: _m.start[i] + sum(
        _m.compute_time[i, d] * _m.x[i, d] for d in dev_of[i]), doc="C_i = S_i + p_i (2)")
    m.xdur = pyo.Expression(m.cross_edges, rule=lambda _m, e: sum(
        _m.xfer_time[e, a, b] * _m.y[e, a, b] for a in dev_of[src[e]] for b in dev_of[dst[e]] if a != b),
        doc="tau_e: transfer duration (6)")
    m.crosses = pyo.Expression(m.cross_edges, rule=lambda _m, e: 1 - sum(
        _m.y[e, a, a] for a in dev_of[src[e]] if a in set(dev_of[dst[e]])), doc="z_e: ends on different devices (5)")

    # ---------------------------------------------------------------- constraints
    @m.Constraint(m.ops, doc="each op on exactly one allowed device")
    def assign_once(_m, i):
        return sum(_m.x[i, d] for d in dev_of[i]) == 1

    @m.Constraint(m.edge_pairs, doc="y row sums = source placement (5)")
    def flow_out(_m, e, a, b):
        if b != dev_of[dst[e]][0]:
            return pyo.Constraint.Skip
        return sum(_m.y[e, a, bb] for bb in dev_of[dst[e]]) == _m.x[src[e], a]

    @m.Constraint(m.edge_pairs, doc="y column sums = target placement (5)")
    def flow_in(_m, e, a, b):
        if a != dev_of[src[e]][0]:
            return pyo.Constraint.Skip
        return sum(_m.y[e, aa, b] for aa in dev_of[src[e]]) == _m.x[dst[e], b]

    cross_set = set(data.cross_edges)

    @m.Constraint(range(g.m), doc="precedence through the transfer (1)")
    def precedence(_m, e):
        i, j = src[e], dst[e]
        if e not in cross_set:
            return _m.start[j] >= _m.finish[i]
        if options.congestion:
            return _m.start[j] >= _m.xstart[e] + _m.xdur[e]
        return _m.start[j] >= _m.finish[i] + _m.xdur[e]

    sinks = np.flatnonzero(np.diff(g.out_ptr) == 0).tolist()

    @m.Constraint(sinks, doc="C_max >= C_i for every sink (3)")
    def makespan(_m, i):
        return _m.cmax >= _m.finish[i]

    def same_expr(_m, i, k):
        return _same(_m, data, i, k)

    @m.Constraint(m.same_pairs, m.devices, doc="s[i,k] >= x[i,d] + x[k,d] - 1")
    def same_device(_m, i, k, d):
        if d not in dev_of[i] or d not in dev_of[k]:
            return pyo.Constraint.Skip
        return _m.same[i, k] >= _m.x[i, d] + _m.x[k, d] - 1

    head, tail = data.head, data.tail

    def big_m(i, k):  # C_i - S_k <= (U - tail_i) - head_k on every schedule of makespan <= U
        return float(max(0.0, U - tail[i] - head[k]))

    @m.Constraint(m.node_pairs, doc="non-overlap on a device, i before k (4)/(10)")
    def no_overlap_ik(_m, i, k):
        return _m.start[k] >= _m.finish[i] - big_m(i, k) * (2 - _m.order[i, k] - same_expr(_m, i, k))

    @m.Constraint(m.node_pairs, doc="non-overlap on a device, k before i (4)/(10)")
    def no_overlap_ki(_m, i, k):
        return _m.start[i] >= _m.finish[k] - big_m(k, i) * (1 + _m.order[i, k] - same_expr(_m, i, k))

    # ---------------------------------------------------------------- switchable families
    if options.load_cuts:
        _add_load_cuts(m, data)
    if options.congestion:
        _add_congestion(m, data)
    if options.memory:
        _add_memory(m, data)
    if options.colocation:
        _add_colocation(m, data)
    if options.symmetry:
        _add_symmetry(m, data)

    m.objective = pyo.Objective(expr=m.cmax, sense=pyo.minimize, doc="minimise C_max")
    return m


def _same(m: pyo.ConcreteModel, data: PestoData, i: int, k: int):
    """The same-device indicator of ``i`` and ``k`` (1 for ``i == k`` or a forced pair)."""
    if i == k:
        return 1
    key = (min(i, k), max(i, k))
    return m.same[key] if key in data.same_set else 1  # not a variable: forced together


def _add_load_cuts(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Valid cut: the makespan is at least every device's busy time."""
    n = data.graph.n

    @m.Constraint(m.devices, doc="valid cut: C_max >= busy time of each device")
    def load_cut(_m, d):
        terms = [_m.compute_time[i, d] * _m.x[i, d] for i in range(n) if d in data.allowed[i]]
        if not terms:
            return pyo.Constraint.Skip
        return _m.cmax >= sum(terms)


def _add_congestion(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Pesto (7): transfers released at their source's completion, one at a time per
    directed link (pairs in ``m.xfer_pairs``; big-M derived in the module docstring)."""
    src, dst = data.graph.src.tolist(), data.graph.dst.tolist()
    U, head, tail, pmin = data.horizon, data.head, data.tail, data.pmin

    @m.Constraint(m.cross_edges, doc="a transfer starts after its source completes (1)")
    def xfer_release(_m, e):
        return _m.xstart[e] >= _m.finish[src[e]]

    def big_mx(e, f):  # T_e + tau_e <= U - tail_j - pmin_j ; T_f >= head_k + pmin_k
        j, k = dst[e], src[f]
        return float(max(0.0, U - tail[j] - pmin[j] - head[k] - pmin[k]))

    def q(_m, e, f):  # 0 iff e and f use the same directed link
        return 3 - _same(_m, data, src[e], src[f]) - _same(_m, data, dst[e], dst[f]) - _m.crosses[e]

    @m.Constraint(m.xfer_pairs, doc="congestion: e before f on a shared link (7)")
    def link_ef(_m, e, f):
        return _m.xstart[f] >= _m.xstart[e] + _m.xdur[e] - big_mx(e, f) * (1 - _m.xorder[e, f] + q(_m, e, f))

    @m.Constraint(m.xfer_pairs, doc="congestion: f before e on a shared link (7)")
    def link_fe(_m, e, f):
        return _m.xstart[e] >= _m.xstart[f] + _m.xdur[f] - big_mx(f, e) * (_m.xorder[e, f] + q(_m, e, f))


def _add_memory(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Pesto (8): static memory per device (skipped where everything allowed fits)."""
    g, caps = data.graph, data.cluster.memory

    @m.Constraint(m.devices, doc="static memory per device (8)")
    def memory_capacity(_m, d):
        ops = [i for i in range(g.n) if d in data.allowed[i]]
        if not math.isfinite(caps[d]) or float(g.memory[ops].sum()) <= caps[d]:
            return pyo.Constraint.Skip
        return sum(float(g.memory[i]) * _m.x[i, d] for i in ops) <= float(caps[d])


def _add_colocation(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Colocation: every group member on its group's first member's device."""
    rows = [(i, d) for i in range(data.graph.n) if data.group_leader[i] != i for d in data.allowed[i]]

    @m.Constraint(rows, doc="colocation: same device as the group's first member")
    def colocate(_m, i, d):
        return _m.x[i, d] == _m.x[int(data.group_leader[i]), d]


def _add_symmetry(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Identical devices are used in order of first use (module docstring)."""
    g, dev_of = data.graph, data.allowed
    rows = []
    for cls in identical_device_classes(data.cluster):
        members = [v for v in g.topo_order.tolist() if cls[0] in dev_of[v]]
        for kk, v in enumerate(members):
            for jj in range(1, len(cls)):
                rows.append((v, cls[jj], tuple(members[:kk]), cls[jj - 1]))

    @m.Constraint(range(len(rows)), doc="symmetry: device d_j used only after d_{j-1}")
    def symmetry(_m, r):
        v, d, earlier, prev = rows[r]
        if d not in dev_of[v]:
            return pyo.Constraint.Skip
        return _m.x[v, d] <= sum(_m.x[u, prev] for u in earlier if prev in dev_of[u])


def warm_start_values(model: pyo.ConcreteModel, device: np.ndarray, start: np.ndarray,
                      xfer_start: dict[int, float] | None = None) -> ComponentMap:
    """A complete start (every variable) from a feasible schedule of the model's graph.

    ``device`` must satisfy the symmetry-breaking rows (use :func:`canonical_relabel`);
    ``xfer_start`` maps edge id -> transfer start for crossing edges (simulator output);
    non-crossing edges get their source's completion.
    """
    data: PestoData = model.pesto
    g = data.graph
    dev = np.asarray(device, dtype=np.int64)
    st = np.asarray(start, dtype=np.float64)
    fin = st + data.p[np.arange(g.n), dev]
    vals = ComponentMap()
    for (i, d) in model.allowed:
        vals[model.x[i, d]] = 1.0 if dev[i] == d else 0.0
    for i in range(g.n):
        vals[model.start[i]] = float(st[i])
    for (e, a, b) in model.edge_pairs:
        vals[model.y[e, a, b]] = 1.0 if (dev[g.src[e]] == a and dev[g.dst[e]] == b) else 0.0
    for (i, k) in model.same_pairs:
        vals[model.same[i, k]] = 1.0 if dev[i] == dev[k] else 0.0
    tp = g.topo_position
    for (i, k) in model.node_pairs:
        vals[model.order[i, k]] = 1.0 if (st[i], fin[i], tp[i]) <= (st[k], fin[k], tp[k]) else 0.0
    if hasattr(model, "xstart"):
        xs = {}
        for e in model.cross_edges:
            if dev[g.src[e]] != dev[g.dst[e]] and xfer_start is not None and e in xfer_start:
                xs[e] = float(xfer_start[e])
            else:
                xs[e] = float(fin[g.src[e]])
            vals[model.xstart[e]] = xs[e]
        for (e, f) in model.xfer_pairs:
            vals[model.xorder[e, f]] = 1.0 if (xs[e], e) <= (xs[f], f) else 0.0
    vals[model.cmax] = float(fin.max()) if g.n else 0.0
    return vals


def decode(model: pyo.ConcreteModel) -> tuple[Placement, np.ndarray, np.ndarray, dict[int, float]]:
    """Placement, start times, priorities (per-device order by start, ties by topological
    position) and transfer starts of the model's loaded solution."""
    data: PestoData = model.pesto
    g, cl = data.graph, data.cluster
    dev = np.zeros(g.n, dtype=np.int64)
    best = np.full(g.n, -1.0)
    for (i, d) in model.allowed:
        val = pyo.value(model.x[i, d])
        if val > best[i]:
            best[i], dev[i] = val, d
    from dnnplace.heuristics.coarsening import monotone_keys

    start = np.array([pyo.value(model.start[i]) for i in range(g.n)])
    rank = np.empty(g.n, dtype=np.int64)
    rank[np.lexsort((g.topo_position, monotone_keys(g, start)))] = np.arange(g.n)
    xs = {}
    if hasattr(model, "xstart"):
        xs = {e: float(pyo.value(model.xstart[e])) for e in model.cross_edges}
    return Placement(g, cl, dev), start, rank, xs
