r"""Between Pesto ILP values and schedules (:mod:`dnnplace.formulations.pesto_ip`):
:func:`warm_start_values` completes a feasible schedule (placement, start times, transfer
starts) into values for every variable, :func:`decode` reads the placement, start
times, per-device priorities and transfer starts of a solved model, and
:func:`decode_times` the solved schedule's node and transfer times, repaired against
solver round-off, from which :func:`dnnplace.evaluation.link_orders.orders_from_times` reads
the ILP's device orders and link orders (constraint (7)) at once; :func:`ilp_orders`
expands a (coarse) solved schedule to the original graph's placement and orders, with
:func:`coarse_edge_of` mapping original edges to coarse ones; :func:`replay_orders` re-times a
schedule's device and link orders with other durations (a model's own).

The completion: ``x`` one-hot from the placement (completions with the per-message costs
of (2')); ``y_{eab} = x_{ia} x_{jb}`` (5);
``s_{ik} = 1`` iff ``i`` and ``k`` share a device; ``o_{ik} = 1`` iff ``i`` comes first (by start,
completion, topological position), which satisfies (4)/(10); ``T_e`` the simulated transfer
start, or the source's completion where the edge does not cross (1); ``o_{ef}`` by transfer
start (7); :math:`C_{\max}` the last completion (3). Both functions are re-exported by
:mod:`dnnplace.formulations.pesto_ip`.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from dnnplace.evaluation.link_orders import orders_from_times
from dnnplace.formulations.pesto_precompute import PestoData, message_time
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement

__all__ = ["warm_start_values", "decode", "decode_times", "ilp_orders", "coarse_edge_of", "replay_orders"]


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
    fin = st + data.p[np.arange(g.n), dev] + message_time(g, data.cluster, dev, data.messages)  # (2')
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
    if hasattr(model, "msg"):
        mu = message_time(g, data.cluster, dev, data.messages)
        for i in model.msg_ops:
            vals[model.msg[i]] = float(mu[i])
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


def decode_times(model: pyo.ConcreteModel) -> tuple[Placement, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Placement and the schedule of the model's loaded solution, as times.

    Returns ``(placement, start, finish, xfer_start, xfer_finish)``: node times (n,) and,
    per edge (m,), the ILP's transfer start ``T_e`` and ``T_e + tau_e`` where the edge
    crosses devices in the decoded placement (``NaN`` elsewhere, and everywhere when the
    model has no congestion family: its transfers have no start of their own). The
    solver's values are repaired against round-off in one pass in topological order,
    exactly as the constraints read: ``T_e >= C_i`` (1), ``S_j >= T_e + tau_e`` or
    ``S_j >= C_i`` (1), ``C_i = S_i + p_i + mu_i`` (2'), with ``p``, ``mu`` and ``tau``
    recomputed from the placement, so that every edge's times are consistent to the last bit (which
    :func:`~dnnplace.evaluation.link_orders.orders_from_times` relies on).
    """
    pl, start, _, xs = decode(model)
    g, cl = pl.graph, pl.cluster
    dev = pl.device
    p = (cl.compute_matrix(g)[np.arange(g.n), dev] + message_time(g, cl, dev, model.pesto.messages)).tolist()
    cross = dev[g.src] != dev[g.dst]
    tt = np.where(cross, cl.transfer_time(dev[g.src], dev[g.dst], g.edge_bytes, g.edge_cost), 0.0).tolist()
    has_x = bool(xs)
    xs_l = [float(xs.get(e, np.nan)) for e in range(g.m)] if has_x else []
    cross_l = cross.tolist()
    S, C = start.tolist(), [0.0] * g.n
    T, F = [np.nan] * g.m, [np.nan] * g.m
    ptr, nbr, eid = g.in_ptr.tolist(), g.in_nbr.tolist(), g.in_eid.tolist()
    for v in g.topo_order.tolist():
        s = S[v] if S[v] > 0.0 else 0.0
        for k in range(ptr[v], ptr[v + 1]):
            u, e = nbr[k], eid[k]
            arrive = C[u]
            if cross_l[e]:
                if has_x:
                    t = xs_l[e]
                    t = arrive if not t >= arrive else t  # also replaces a missing value
                    T[e], F[e] = t, t + tt[e]
                    arrive = F[e]
                else:
                    arrive += tt[e]
            if arrive > s:
                s = arrive
        S[v] = s
        C[v] = s + p[v]
    return pl, np.asarray(S), np.asarray(C), np.asarray(T), np.asarray(F)


def coarse_edge_of(graph: OpGraph, labels: np.ndarray, coarse: OpGraph) -> np.ndarray:
    """The coarse edge each original edge belongs to (``-1`` inside one coarse node, or
    where the coarse graph has no edge between the two coarse nodes)."""
    k = coarse.n
    ckey = coarse.src * k + coarse.dst
    srt = np.argsort(ckey, kind="stable")
    a, b = labels[graph.src], labels[graph.dst]
    key = a * k + b
    if not ckey.size:
        return np.full(graph.m, -1, dtype=np.int64)
    ce = srt[np.minimum(np.searchsorted(ckey[srt], key), ckey.size - 1)]
    return np.where((a != b) & (ckey[ce] == key), ce, -1)


def ilp_orders(times: tuple, graph: OpGraph, labels: np.ndarray,
               coarse_graph: OpGraph) -> tuple[Placement, np.ndarray, np.ndarray | None, np.ndarray]:
    """The exact engine's answer on the original graph: ``(coarse placement,
    priorities, link_priorities or None, coarse start)``.

    ``times`` is the solved (coarse) schedule ``(placement, start, finish, xfer_start,
    xfer_finish)``: the MIP's repaired times
    (:func:`~dnnplace.formulations.pesto_solution.decode_times`) or CP-SAT's
    (:meth:`~dnnplace.formulations.pesto_cpsat.CpsatTimes.as_tuple`). They are expanded: a member
    takes its coarse node's start and finish, an original edge its coarse edge's
    transfer times; :func:`~dnnplace.evaluation.link_orders.orders_from_times` then ranks
    all tasks at once (members and the edges of one coarse edge in topological order).
    ``link_priorities`` is ``None`` when the model has no congestion family (its
    transfers have no order) or an edge that crosses devices has no coarse transfer.
    """
    cpl, cs, cf, cxs, cxf = times
    if coarse_graph is graph:
        s, f, xs, xf = cs, cf, cxs, cxf
    else:
        ce = coarse_edge_of(graph, labels, coarse_graph)
        s, f = cs[labels], cf[labels]
        if coarse_graph.m:
            xs = np.where(ce >= 0, cxs[np.maximum(ce, 0)], np.nan)
            xf = np.where(ce >= 0, cxf[np.maximum(ce, 0)], np.nan)
        else:  # every edge inside a coarse node: no transfer times to take
            xs = xf = np.full(graph.m, np.nan)
    pr, lp = orders_from_times(graph, s, f, xs, xf)
    dev = cpl.device[labels]
    crossing = dev[graph.src] != dev[graph.dst]
    if not crossing.any() or not np.all(np.isfinite(lp[crossing])):
        lp = None
    return cpl, pr, lp, cs


def replay_orders(g: OpGraph, dev: np.ndarray, st: np.ndarray, fin: np.ndarray, xs: dict, tt: np.ndarray,
                  dur: np.ndarray, xdur: np.ndarray, congestion: bool,
                  head: np.ndarray | None = None) -> tuple[list, dict]:
    """The earliest schedule, with durations ``dur`` (per node) and ``xdur`` (per edge,
    where it crosses devices), that keeps the device and link orders of the schedule
    ``(st, fin, xs)`` (node times, transfer starts of crossing edges; ``tt`` its per-edge
    transfer times): the orders are read at once by
    :func:`~dnnplace.evaluation.link_orders.orders_from_times` (they never contradict each
    other), every task then starts as early as those orders, precedence and its ``head``
    (node lower bounds, default 0) allow; links queue only with ``congestion``. Returns
    node starts and transfer starts (crossing edges), in ``dur``'s number type (the
    integer CP-SAT hint, or a model's horizon and start with its own message costs)."""
    n, src, dst = g.n, g.src, g.dst
    a, b = dev[src], dev[dst]
    cross = a != b
    xs_a = np.full(g.m, np.nan)
    xf_a = np.full(g.m, np.nan)
    if congestion:
        for e in np.flatnonzero(cross).tolist():
            xs_a[e] = xs.get(e, fin[src[e]])
            xf_a[e] = xs_a[e] + tt[e]
    pr, lp = orders_from_times(g, st, fin, xs_a, xf_a)
    dur_l = np.asarray(dur).tolist()
    xdur_l = np.asarray(xdur).tolist()
    arcs = []  # (task, task, lag): start(second) >= start(first) + lag
    xid = {}
    for e in range(g.m):
        i, j = int(src[e]), int(dst[e])
        t = xdur_l[e] if cross[e] else 0
        if cross[e] and congestion:
            xid[e] = len(dur_l)
            dur_l.append(t)
            arcs += [(i, xid[e], dur_l[i]), (xid[e], j, t)]
        else:
            arcs.append((i, j, dur_l[i] + t))
    for d in np.unique(dev).tolist():
        on = np.flatnonzero(dev == d)
        on = on[np.argsort(pr[on], kind="stable")].tolist()
        arcs += [(u, v, dur_l[u]) for u, v in zip(on, on[1:])]
    links: dict[tuple[int, int], list[int]] = {}
    for e in xid:
        links.setdefault((int(a[e]), int(b[e])), []).append(e)
    for es in links.values():
        es.sort(key=lambda e: lp[e])
        arcs += [(xid[e], xid[f], dur_l[xid[e]]) for e, f in zip(es, es[1:])]
    T = len(dur_l)
    out = [[] for _ in range(T)]
    indeg = [0] * T
    for u, v, lag in arcs:
        out[u].append((v, lag))
        indeg[v] += 1
    zero = dur_l[0] * 0 if dur_l else 0
    start = (np.asarray(head).tolist() if head is not None else [zero] * n) + [zero] * (T - n)
    ready = [t for t in range(T) if indeg[t] == 0]
    while ready:
        u = ready.pop()
        for v, lag in out[u]:
            start[v] = max(start[v], start[u] + lag)
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return start[:n], {e: start[k] for e, k in xid.items()}
