r"""Pesto's joint placement-and-scheduling ILP (Hafeez et al., Middleware 2021, Sec. 3.2.2),
generalised to any number of devices. Builds a Pyomo ``ConcreteModel``; never solves.
The options and the instance-side precomputation (reachability, heads and tails, pair
reduction) are in :mod:`dnnplace.formulations.pesto_precompute`, :func:`warm_start_values`
and :func:`decode` in :mod:`dnnplace.formulations.pesto_solution`, the identical-device
classes in :mod:`dnnplace.formulations.device_symmetry`; the options, :func:`decode` and
:func:`warm_start_values` are importable from here too, beside the builder.

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

Per-message costs (docs/semantics.md 2.1; only where ``cluster.has_message_costs``, else
none of this is built and the model is Pesto's): with Pesto's accounting, one message per
crossing edge, op :math:`i` on device :math:`d` also spends the sender's
:math:`\sigma_d` (``send_overhead``) per crossing out-edge and the receiver's
:math:`\rho_d` (``recv_overhead``) per crossing in-edge, so (2) becomes

.. math::  C_i = S_i + \sum_d p_{id} x_{id} + \mu_i, \qquad
           \mu_i = \sum_{e = (i, j)} w_e \sum_d \sigma_d\, x_{id} z_e
                  + \sum_{e = (h, i)} w_e \sum_d \rho_d\, x_{id} z_e.     \tag{2'}

The products are linear in the communication vertex of (5): :math:`x_{ia} z_e =
\sum_{b \ne a} y_{eab}` for :math:`e = (i, j)` and :math:`x_{jb} z_e = \sum_{a \ne b}
y_{eab}` (row and column sums of (5) with the diagonal removed; exact for one-hot
:math:`x`), so no product needs a column; where every device :math:`i` may use shares one
:math:`\sigma` (:math:`\rho`), the term is the plain :math:`\sigma\, w_e z_e`. Each
:math:`\mu_i` that can be non-zero is one continuous column
:math:`\mu_i \in [0, \bar\mu_i]` defined by that sum (one row), so the sum is stored
once, not in every row that reads :math:`C_i`. Edges whose
ends are forced together never cross and add nothing. :math:`w_e = 1` is Pesto's
accounting; a coarse edge stands for :math:`w_e` original ones
(:func:`~dnnplace.formulations.multilevel.exact.coarse_messages`). The load cut counts
each device's :math:`\mu` too. Heads, tails, windows and big-Ms below are derived from
compute and transfer times alone: message costs only lengthen a schedule, so they stay
valid (:math:`U` is a schedule's makespan *with* its message costs).

Precedence (1): :math:`S_j \ge C_i + \tau_e` without congestion; with congestion
:math:`T_e \ge C_i` and :math:`S_j \ge T_e + \tau_e`. Makespan (3):
:math:`C_{\max} \ge C_i` for sinks, and the valid cut :math:`C_{\max} \ge \sum_i p_{id} x_{id}`
(each device's load); :math:`C_{\max} \ge \max(\max_i (h_i + \underline p_i),
\sum_i \underline p_i / |D|)` as its variable bound
(:func:`~dnnplace.evaluation.bounds.makespan_lower_bound`; HiGHS may not finish the root
LP of a 200-node coarse model within minutes, and then reports only the variable bounds).

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
FCFS semantics of docs/semantics.md 2.1 with one transfer per edge (the simulator's
``transfer_mode="per_edge"``): its optimum and bound are lower bounds there. Under the
simulator's default, a tensor sent once to each device that consumes it, the ILP
over-counts the transfers of a tensor with several consumers on one device: its
schedules replay at no more than its objective (an upper bound), but its optimum and
bound are not lower bounds (:mod:`dnnplace.formulations.multilevel.pesto` reports them only under
``"per_edge"``). A decoded
solution is re-simulated with its device orders *and* its link orders
(:func:`~dnnplace.formulations.pesto_solution.decode_times`, the simulator's
``link_priorities``), which realises the ILP's schedule exactly (see
:mod:`dnnplace.formulations.multilevel.pesto`).

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

Transfer-aware windows (``comm_windows``; results/pesto/time-to-1pct.md): the heads and tails below are raised to
:func:`~dnnplace.formulations.pesto_precompute.strong_heads_tails`, which hold for every
schedule of every placement, so everything derived from them stays exact; they also give
the rows :math:`C_{\max} \ge C_i + q_i` for every op (not only the sinks' (3)).

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

import numpy as np
import pyomo.environ as pyo

from dnnplace.evaluation.bounds import makespan_lower_bound
from dnnplace.formulations.device_symmetry import identical_device_classes
from dnnplace.formulations.families import add_families
from dnnplace.formulations.pesto_precompute import PestoData, PestoOptions, prepare
from dnnplace.formulations.pesto_solution import decode, warm_start_values
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

# the options, decode and warm_start_values sit beside the builder (docs/architecture.md, "Adding a formulation")
__all__ = ["PestoOptions", "build_pesto_model", "warm_start_values", "decode"]


def build_pesto_model(graph: OpGraph, cluster: Cluster, *, horizon: float,
                      options: PestoOptions | None = None, messages: np.ndarray | None = None) -> pyo.ConcreteModel:
    """Build the Pesto ILP (see the module docstring).

    Parameters
    ----------
    graph, cluster
        The (possibly coarsened) operator graph and the devices.
    horizon : float
        Makespan ``U`` of a feasible schedule of this graph (e.g. a re-simulated list
        schedule): every big-M is derived from it.
    options : PestoOptions
    messages : array of float, optional
        Per edge, the messages it stands for when it crosses devices (:math:`w_e` of (2'),
        default 1: Pesto's accounting); read only when the cluster has message costs.

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
    data = prepare(graph, cluster, options, U, messages)
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
    m.cmax = pyo.Var(bounds=(min(makespan_lower_bound(graph, cluster), U), U), doc="C_max: makespan")
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
    m.xdur = pyo.Expression(m.cross_edges, rule=lambda _m, e: sum(
        _m.xfer_time[e, a, b] * _m.y[e, a, b] for a in dev_of[src[e]] for b in dev_of[dst[e]] if a != b),
        doc="tau_e: transfer duration (6)")
    m.crosses = pyo.Expression(m.cross_edges, rule=lambda _m, e: 1 - sum(
        _m.y[e, a, a] for a in dev_of[src[e]] if a in set(dev_of[dst[e]])), doc="z_e: ends on different devices (5)")
    if cl.has_message_costs:
        msg_terms, msg_max = _message_terms(m, data)
        m.msg_ops = pyo.Set(initialize=[i for i in range(n) if msg_terms[i]], doc="ops whose messages may cost time")
        m.msg = pyo.Var(m.msg_ops, bounds=lambda _m, i: (0.0, msg_max[i]),
                        doc="mu_i: device time of op i's messages (2')")
        m.msg_def = pyo.Constraint(m.msg_ops, rule=lambda _m, i: _m.msg[i] == sum(msg_terms[i]),
                                   doc="mu_i as the y (or z) terms of (2')")
        m.finish = pyo.Expression(m.ops, rule=lambda _m, i: _m.start[i] + sum(
            _m.compute_time[i, d] * _m.x[i, d] for d in dev_of[i]) + (_m.msg[i] if i in _m.msg_ops else 0),
            doc="C_i = S_i + p_i + mu_i (2')")
    else:
        m.finish = pyo.Expression(m.ops, rule=lambda _m, i: _m.start[i] + sum(
            _m.compute_time[i, d] * _m.x[i, d] for d in dev_of[i]), doc="C_i = S_i + p_i (2)")

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
    add_families(m, data, [(options.load_cuts, _add_load_cuts), (options.congestion, _add_congestion),
                           (options.memory, _add_memory), (options.colocation, _add_colocation),
                           (options.symmetry, _add_symmetry), (options.comm_windows, _add_tails)])

    m.objective = pyo.Objective(expr=m.cmax, sense=pyo.minimize, doc="minimise C_max")
    return m


def _message_terms(m: pyo.ConcreteModel, data: PestoData) -> tuple[list[list], list[float]]:
    r"""Per op, the terms of its :math:`\mu_i` in (2') (module docstring): per crossing edge
    its source's send overhead and its target's receive overhead, through ``y``, or
    through ``z_e`` where the end's allowed devices share one value; and the most
    :math:`\mu_i` can be (every such edge at its dearest)."""
    g, cl, dev_of, w = data.graph, data.cluster, data.allowed, data.messages
    terms: list[list] = [[] for _ in range(g.n)]
    most = [0.0] * g.n
    for e in data.cross_edges:
        if w[e] == 0:
            continue
        i, j = int(g.src[e]), int(g.dst[e])
        for end, cost, mine in ((i, cl.send_overhead, 0), (j, cl.recv_overhead, 1)):
            vals = {float(cost[d]) for d in dev_of[end]}
            if vals == {0.0}:
                continue
            most[end] += float(w[e]) * max(vals)
            if len(vals) == 1:
                terms[end].append(float(w[e]) * vals.pop() * m.crosses[e])
                continue
            terms[end] += [float(w[e] * cost[(a, b)[mine]]) * m.y[e, a, b] for a in dev_of[i] for b in dev_of[j]
                           if a != b and cost[(a, b)[mine]] > 0]
    return terms, most


def _device_messages(m: pyo.ConcreteModel, data: PestoData, d: int) -> list:
    r"""The message terms of device ``d``'s busy time: :math:`\sigma_d w_e x_{id} z_e` and
    :math:`\rho_d w_e x_{jd} z_e` of every crossing edge ``e = (i, j)``, through ``y``."""
    g, cl, dev_of, w = data.graph, data.cluster, data.allowed, data.messages
    out = []
    for e in data.cross_edges:
        i, j = int(g.src[e]), int(g.dst[e])
        if cl.send_overhead[d] > 0 and d in dev_of[i]:
            out += [float(w[e] * cl.send_overhead[d]) * m.y[e, d, b] for b in dev_of[j] if b != d]
        if cl.recv_overhead[d] > 0 and d in dev_of[j]:
            out += [float(w[e] * cl.recv_overhead[d]) * m.y[e, a, d] for a in dev_of[i] if a != d]
    return out


def _same(m: pyo.ConcreteModel, data: PestoData, i: int, k: int):
    """The same-device indicator of ``i`` and ``k`` (1 for ``i == k`` or a forced pair)."""
    if i == k:
        return 1
    key = (min(i, k), max(i, k))
    return m.same[key] if key in data.same_set else 1  # not a variable: forced together


def _add_load_cuts(m: pyo.ConcreteModel, data: PestoData) -> None:
    """Valid cut: the makespan is at least every device's busy time (with its messages' (2'))."""
    n = data.graph.n

    @m.Constraint(m.devices, doc="valid cut: C_max >= busy time of each device")
    def load_cut(_m, d):
        terms = [_m.compute_time[i, d] * _m.x[i, d] for i in range(n) if d in data.allowed[i]]
        if data.cluster.has_message_costs and terms:
            terms += _device_messages(_m, data, d)
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


def _add_tails(m: pyo.ConcreteModel, data: PestoData) -> None:
    r"""Every op leaves at least its tail after it: :math:`C_{\max} \ge C_i + q_i`."""
    tail = data.tail

    @m.Constraint(m.ops, doc="C_max >= C_i + tail_i (transfer-aware tails)")
    def tail_cut(_m, i):
        if tail[i] <= 0:
            return pyo.Constraint.Skip
        return _m.cmax >= _m.finish[i] + float(tail[i])


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
