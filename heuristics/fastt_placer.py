"""FastT's list placer (Yi et al. 2020, Algorithm 2): every op in the given order goes to
the device where it finishes first, into the earliest idle slot there (insertion); the
critical path's ops are pinned to their devices and their memory reserved first.

Transfers either start as soon as their source finishes, or (``congestion``) queue in
commit order on their link or on the source's egress and the destination's ingress port;
the order they were committed in is the plan's link order. Used by
:func:`dnnplace.heuristics.fastt.dpos` and :func:`dnnplace.heuristics.fastt.cpop`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.terminals import Terminals
from dnnplace.heuristics.memory import best_effort_device
from dnnplace.heuristics.message_costs import Messages
from dnnplace.heuristics.timeline import Timeline

__all__ = ["place"]

_TINY = 1e-300  # a zero-time op asks for a slot of this length: never inside a busy interval


def place(t: Terminals, cluster: Cluster, order: Iterable[int], cp_dev: dict[int, int], *, on_oom: str,
           name: str, congestion: bool = False,
           transfer_mode: str = "per_destination") -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Place and time every op of ``t.graph`` in ``order``; CP ops on their ``cp_dev``.
    With ``congestion``, transfers queue in the order they are committed, on their link or,
    where the cluster shares ports (``cluster.ports == "shared"``), on the source's egress
    and the destination's ingress port; with ``transfer_mode="per_destination"`` a tensor
    (source, output) already sent to a device is not sent again. ``extra["link_order"]``
    is that order (one value per edge, ``NaN`` for none; an edge served by an earlier
    transfer of its tensor carries that transfer's value).

    With per-message costs (docs/semantics.md 2.1) EFT counts them as
    :mod:`~dnnplace.heuristics.message_costs` estimates: a new message from device ``a``
    leaves at ``FT(u) + send_overhead[a]``, and ``o`` on ``d`` takes
    ``w(o, d) + recv_overhead[d]`` per new message it needs there, so
    ``EFT(o, d) = earliest_slot(d, ready(o, d), dur(o, d)) + dur(o, d)``; a tensor already
    sent to ``d`` (per destination) is no new message."""
    g = t.graph
    D = cluster.size
    msg = Messages(g, cluster, transfer_mode)
    comp = cluster.compute_matrix(g)
    p = comp.tolist()
    allowed = [[d for d in range(D) if not math.isnan(row[d])] for row in p]
    b0, b1, cf = cluster.beta0.tolist(), cluster.beta1.tolist(), cluster.cost_factor.tolist()
    ebytes, ecost = g.edge_bytes.tolist(), g.edge_cost.tolist()
    in_ptr, in_nbr, in_eid = g.in_ptr.tolist(), g.in_nbr.tolist(), g.in_eid.tolist()
    mem = g.memory.tolist()
    free = cluster.memory.tolist()
    coloc = g.colocation.tolist()
    need = _group_options(g, allowed)
    cp_dev, group_dev = _reserve_critical_path(g, cp_dev, need, free)
    reserved = set(cp_dev)
    dev = [-1] * g.n
    start = [0.0] * g.n
    fin = [0.0] * g.n
    tl = Timeline(D, insertion=True)
    points: list[list[float]] = [[] for _ in range(D)]  # start times of zero-time ops
    link_free = [[0.0] * D for _ in range(D)]
    ports = ([0.0] * D, [0.0] * D) if cluster.ports == "shared" else None  # egress, ingress free times
    eout = g.edge_output.tolist()
    sent: dict | None = {} if transfer_mode == "per_destination" else None  # (u, output, d) -> (end, seq)
    link_order = [math.nan] * g.m
    seq = 0
    oom = 0

    def slot(d: int, ready: float, dur: float) -> float:
        if dur <= 0.0:
            return tl.earliest_slot(d, ready, _TINY)
        pts = points[d]
        while True:
            s = tl.earliest_slot(d, ready, dur)
            j = bisect.bisect_right(pts, s)
            if j == len(pts) or pts[j] >= s + dur:
                return s
            ready = pts[j]  # never straddle a zero-time op: start at or after it

    for o in order:
        c = coloc[o]
        if o in cp_dev:
            devs = [cp_dev[o]]
        elif c >= 0 and c in group_dev:
            devs = [group_dev[c]]
        else:
            devs = [d for d in allowed[o] if need[o] <= free[d] + 1e-9 * max(1.0, need[o])]
            if not devs:
                devs = [best_effort_device(np.asarray(free), np.asarray(allowed[o]), on_oom=on_oom,
                                           what=f"{name}: {g._node(o)}", need=need[o])]
                oom += 1
        dur = p[o]
        if congestion:
            ready, xfers = _queued_ready(o, devs, t.n, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1, cf,
                                         link_free, ports, eout, sent, msg.send if msg.on else None)
            if msg.on:
                dur = list(dur)
                for d in devs:
                    dur[d] += msg.extra(d, [x for x in xfers[d] if x[0] >= 0])
        elif msg.on:
            ready, new = _message_ready(msg, o, devs, t.n, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1,
                                        cf)
            dur = list(dur)
            for d in devs:
                dur[d] += msg.extra(d, new[d])
        else:
            ready = dict.fromkeys(devs, 0.0)
            _free_links_ready(ready, o, devs, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1, cf)
        best_d, best_s, best_f = -1, 0.0, math.inf
        for d in devs:
            s = slot(d, ready[d], dur[d])
            f = s + dur[d]
            if f < best_f:
                best_d, best_s, best_f = d, s, f
        dev[o], start[o], fin[o] = best_d, best_s, best_f
        if congestion:
            seq = _commit_transfers(xfers[best_d], best_d, seq, link_order, link_free, ports, sent)
        elif msg.on:
            msg.commit(new[best_d])
        if best_f > best_s:
            tl.reserve(best_d, best_s, best_f)
        else:
            bisect.insort(points[best_d], best_s)
        if o not in reserved:
            if c < 0:
                free[best_d] -= mem[o]
            elif c not in group_dev:
                group_dev[c] = best_d
                free[best_d] -= need[o]
    return (np.asarray(dev, dtype=np.int64), np.asarray(start), np.asarray(fin),
            {"oom_nodes": oom, "link_order": np.asarray(link_order) if congestion else None})


def _queued_ready(o, devs, n_real, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1, cf, link_free,
                  ports=None, eout=None, sent=None, send=None):
    """Data-ready time of ``o`` on each candidate device when its inbound transfers queue
    behind the committed ones (one at a time, in the order of their sources' finish) on
    their link, or with ``ports`` (egress and ingress free times) on the source's egress
    and the destination's ingress port; with ``sent`` (per destination: ``(u, output, d)``
    -> ``(end, seq)`` of the committed transfers) a tensor already sent to ``d`` arrives
    with that transfer and an in-edge of ``o`` carrying a tensor another in-edge already
    brings joins it. Per device, the transfers ``(link source, edge, tensor key, end)``
    in commit order; a joining edge has link source ``-1``. With ``send`` (per-message
    costs: each device's ``send_overhead``) a new transfer from ``a`` is posted
    ``send[a]`` after its source finishes."""
    ready = dict.fromkeys(devs, 0.0)
    xfers: dict[int, list] = {d: [] for d in devs}
    ks = sorted(range(in_ptr[o], in_ptr[o + 1]), key=lambda k: fin[in_nbr[k]])
    for d in devs:
        local: dict = {}
        mine: dict = {}
        r = 0.0
        for k in ks:
            u = in_nbr[k]
            a, fu, e = dev[u], fin[u], in_eid[k]
            if a == d or u >= n_real or o >= n_real:  # same device, or a virtual terminal's free edge
                x = fu
            else:
                key = (u, eout[e], d) if sent is not None else None
                if key is not None and key in sent:
                    x = sent[key][0]
                    xfers[d].append((-1, e, key, x))
                elif key is not None and key in mine:
                    x = mine[key]
                    xfers[d].append((-1, e, key, x))
                else:
                    cost = ecost[e]
                    dur = b0[a][d] + b1[a][d] * ebytes[e] if cost != cost else cf[a][d] * cost
                    if send is not None:
                        fu += send[a]
                    if ports is None:
                        s0 = max(fu, local.get(a, link_free[a][d]))
                        local[a] = s0 + dur
                    else:
                        s0 = max(fu, local.get(("out", a), ports[0][a]), local.get(("in", d), ports[1][d]))
                        local[("out", a)] = local[("in", d)] = s0 + dur
                    x = s0 + dur
                    if key is not None:
                        mine[key] = x
                    xfers[d].append((a, e, key, x))
            if x > r:
                r = x
        ready[d] = r
    return ready, xfers


def _group_options(g: OpGraph, allowed: list[list[int]]) -> list[float]:
    """The memory each op needs where it goes (its colocation group's total), and, in
    place, the devices of each grouped op cut to those that run every member."""
    coloc = g.colocation.tolist()
    need = g.memory.tolist()
    if (g.colocation >= 0).any():
        co = g.colocation
        gm = np.bincount(co[co >= 0], weights=g.memory[co >= 0]).tolist()
        for i, c in enumerate(coloc):
            if c >= 0:
                need[i] = gm[c]
        common: dict[int, set] = {}
        for i, c in enumerate(coloc):
            if c >= 0:
                common[c] = common.get(c, set(allowed[i])) & set(allowed[i])
        for i, c in enumerate(coloc):
            if c >= 0:
                allowed[i] = sorted(common[c])
                if not allowed[i]:
                    raise InputError(f"{g._node(i)}: no device runs every member of its colocation group")
    return need


def _reserve_critical_path(g: OpGraph, cp_dev: dict[int, int], need: list[float],
                           free: list[float]) -> tuple[dict[int, int], dict[int, int]]:
    """Reserve the CP's memory (``free`` in place; a CP op's group is pinned to its CP
    device, the first CP member's in topological order); the CP devices and the groups'."""
    coloc = g.colocation.tolist()
    group_dev: dict[int, int] = {}
    cp_dev = dict(cp_dev)
    for v in sorted(cp_dev, key=lambda v: g.topo_position[v]):
        c = coloc[v]
        if c >= 0:
            if c in group_dev:
                cp_dev[v] = group_dev[c]
                continue
            group_dev[c] = cp_dev[v]
        free[cp_dev[v]] -= need[v]
    return cp_dev, group_dev


def _free_links_ready(ready, o, devs, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1, cf) -> None:
    """Data-ready time of ``o`` on each candidate device (``ready``, in place) when every
    transfer starts as soon as its source finishes (no congestion)."""
    for k in range(in_ptr[o], in_ptr[o + 1]):
        u = in_nbr[k]
        a, fu, e = dev[u], fin[u], in_eid[k]
        cost = ecost[e]
        if cost != cost:  # NaN: the link model
            by, r0, r1 = ebytes[e], b0[a], b1[a]
            for d in devs:
                x = fu if d == a else fu + (r0[d] + r1[d] * by)
                if x > ready[d]:
                    ready[d] = x
        else:
            rf = cf[a]
            for d in devs:
                x = fu if d == a else fu + rf[d] * cost
                if x > ready[d]:
                    ready[d] = x


def _message_ready(msg: Messages, o, devs, n_real, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1,
                   cf) -> tuple[dict, dict]:
    """Without congestion, with per-message costs: the data-ready time of ``o`` on each
    candidate device and the new messages it needs there
    (:meth:`~dnnplace.heuristics.message_costs.Messages.inputs`; a virtual terminal's
    edges are free)."""
    ready: dict = {}
    new: dict = {}
    ks = range(in_ptr[o], in_ptr[o + 1])
    free = 0.0
    real = []
    for k in ks:
        u = in_nbr[k]
        if u >= n_real or o >= n_real:
            free = max(free, fin[u])
        else:
            real.append((u, in_eid[k]))
    for d in devs:
        def link(a: int, e: int, post: float, d: int = d) -> float:
            cost = ecost[e]
            return post + (b0[a][d] + b1[a][d] * ebytes[e] if cost != cost else cf[a][d] * cost)

        r, new[d] = msg.inputs(real, d, dev, fin, link)
        ready[d] = max(r, free)
    return ready, new


def _commit_transfers(xfers: list, d: int, seq: int, link_order: list, link_free: list, ports, sent) -> int:
    """Commit the inbound transfers of an op placed on ``d`` (:func:`_queued_ready`'s list
    for ``d``): their links or ports are busy until they end, and each gets the next
    number of the link order; returns the next free number."""
    for a, e, key, end in xfers:
        if a < 0:  # carried by the transfer of the same tensor to this device
            link_order[e] = sent[key][1]
            continue
        if ports is not None:
            ports[0][a] = ports[1][d] = end
        else:
            link_free[a][d] = end
        link_order[e] = seq
        if sent is not None:
            sent[key] = (end, seq)
        seq += 1
    return seq
