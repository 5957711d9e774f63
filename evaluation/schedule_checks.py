"""Independent re-check of a schedule against docs/semantics.md 2.1: :func:`validate_schedule`.

It accepts any schedule (simulated by :func:`dnnplace.evaluation.simulate.simulate`, or
decoded from a solver) and deliberately shares no code with the simulator: durations
and transfer times are recomputed here from the cluster's own models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Schedule

__all__ = ["validate_schedule"]


def _transfer_arrays(transfers: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(transfers, Mapping):
        try:
            e, s, f = transfers["edge"], transfers["start"], transfers["finish"]
        except KeyError as exc:
            raise InputError(f"transfers: missing key {exc.args[0]!r} (need 'edge', 'start', 'finish')") from None
    else:
        e, s, f = transfers.xfer_edge, transfers.xfer_start, transfers.xfer_finish
    e = np.asarray(e, dtype=np.int64).ravel()
    s = np.asarray(s, dtype=np.float64).ravel()
    f = np.asarray(f, dtype=np.float64).ravel()
    if not (e.shape == s.shape == f.shape):
        raise InputError("transfers: 'edge', 'start' and 'finish' differ in length")
    return e, s, f


def _overlaps(groups: np.ndarray, begin: np.ndarray, end: np.ndarray, tol: float) -> list[tuple[int, int]]:
    """Pairs (earlier, later) of items in the same group whose intervals overlap."""
    o = np.lexsort((end, begin, groups))
    out = []
    gs, bs, es = groups[o].tolist(), begin[o].tolist(), end[o].tolist()
    cur_g, cur_end, cur_item = None, -np.inf, -1
    for k in range(len(o)):
        if gs[k] != cur_g:
            cur_g, cur_end, cur_item = gs[k], es[k], int(o[k])
            continue
        if bs[k] < cur_end - tol:
            out.append((cur_item, int(o[k])))
        if es[k] > cur_end:
            cur_end, cur_item = es[k], int(o[k])
    return out


def _on(schedule: Schedule, i: int) -> str:
    """``node 'x' on gpu0``."""
    pl = schedule.placement
    return f"{pl.graph._node(i)} on {pl.cluster.names[pl.device[i]]}"


def _message_time(schedule: Schedule, ce: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per node, the device time of its messages (docs/semantics.md 2.1, per-message costs):
    the cross edges ``ce`` fall in messages ``group`` (one id per edge, >= 0); each message
    costs its source node the sender's ``send_overhead`` and the first of its destination
    nodes in topological position the receiver's ``recv_overhead``."""
    pl = schedule.placement
    g, cl, dev = pl.graph, pl.cluster, pl.device
    out = np.zeros(g.n)
    if not cl.has_message_costs or ce.size == 0:
        return out
    ids, group = np.unique(group, return_inverse=True)
    first = np.full(ids.shape[0], g.n, dtype=np.int64)
    np.minimum.at(first, group, g.topo_position[g.dst[ce]])
    source = np.zeros(ids.shape[0], dtype=np.int64)
    source[group] = g.src[ce]
    np.add.at(out, source, cl.send_overhead[dev[source]])
    receiver = g.topo_order[first]
    np.add.at(out, receiver, cl.recv_overhead[dev[receiver]])
    return out


def _node_violations(schedule: Schedule, start: np.ndarray, fin: np.ndarray, eps: float,
                     messages: np.ndarray) -> list[str]:
    """Unsupported device kinds, wrong durations (compute plus ``messages``), negative
    starts, overlaps on a device."""
    pl = schedule.placement
    g, cl, dev = pl.graph, pl.cluster, pl.device
    names = cl.names
    msgs: list[str] = []
    dur = cl.compute_matrix(g)[np.arange(g.n), dev] + messages
    for i in np.flatnonzero(np.isnan(dur)):
        msgs.append(f"{_on(schedule, i)}: device kind {cl.kinds[dev[i]]!r} is not supported by this node")
    ok = ~np.isnan(dur)
    for i in np.flatnonzero(ok & (np.abs(fin - start - np.nan_to_num(dur)) > eps)):
        msgs.append(f"{_on(schedule, i)}: runs {fin[i] - start[i]:g} (from {start[i]:g} to {fin[i]:g}) "
                    f"but takes {dur[i]:g}")
    for i in np.flatnonzero(start < -eps):
        msgs.append(f"{_on(schedule, i)}: starts at negative time {start[i]:g}")
    for a, b in _overlaps(dev, start, fin, eps):
        msgs.append(f"device {names[dev[a]]}: {g._node(a)} [{start[a]:g}, {fin[a]:g}) overlaps "
                    f"{g._node(b)} [{start[b]:g}, {fin[b]:g})")
    return msgs


def _carriers(schedule: Schedule, ce: np.ndarray, xe: np.ndarray) -> np.ndarray:
    """Transfer carrying each cross edge ``ce``: its own, else one for (source, output,
    dest device); -1: none."""
    pl = schedule.placement
    g, dev, D = pl.graph, pl.device, pl.cluster.size
    src, dst = g.src, g.dst
    own = np.full(g.m, -1, dtype=np.int64)
    own[xe[::-1]] = np.arange(xe.shape[0])[::-1]
    # one integer per (source node, output, destination device), computed here rather
    # than shared with the simulator so that the check stays independent of it
    codes = np.unique(g.edge_output, return_inverse=True)[1].astype(np.int64) if g.m else g.edge_output
    n_out = int(codes.max(initial=0)) + 1

    def key(e: np.ndarray) -> np.ndarray:
        return (src[e] * n_out + codes[e]) * D + dev[dst[e]]

    xkey = key(xe)
    ko = np.argsort(xkey, kind="stable")
    carrier = own[ce]
    need = np.flatnonzero(carrier < 0)
    if need.size and xe.size:
        ks = xkey[ko]
        ekey = key(ce[need])
        pos = np.minimum(np.searchsorted(ks, ekey), ks.shape[0] - 1)
        carrier[need] = np.where(ks[pos] == ekey, ko[pos], -1)
    return carrier


def _transfer_violations(schedule: Schedule, start: np.ndarray, fin: np.ndarray, ce: np.ndarray,
                         tt: np.ndarray, xe: np.ndarray, xs: np.ndarray, xf: np.ndarray,
                         congestion: bool, eps: float) -> list[str]:
    """Transfers against the link model and their edges; link overlaps with ``congestion``."""
    pl = schedule.placement
    g, cl, dev, names = pl.graph, pl.cluster, pl.device, pl.cluster.names
    src, dst = g.src, g.dst
    msgs: list[str] = []
    xu, xv = src[xe], dst[xe]
    xa, xb = dev[xu], dev[xv]
    for x in np.flatnonzero(xa == xb):
        msgs.append(f"transfer #{x} ({g._edge(xe[x])}) joins nodes on the same device")
    xt = cl.transfer_time(xa, xb, g.edge_bytes[xe], g.edge_cost[xe])
    for x in np.flatnonzero(np.abs(xf - xs - xt) > eps):
        msgs.append(f"transfer #{x} ({g._edge(xe[x])}, {names[xa[x]]}->{names[xb[x]]}) lasts "
                    f"{xf[x] - xs[x]:g} but the link model gives {xt[x]:g}")
    for x in np.flatnonzero(xs < fin[xu] - eps):
        msgs.append(f"transfer #{x} ({g._edge(xe[x])}) starts at {xs[x]:g} before its source "
                    f"finishes at {fin[xu[x]]:g}")
    carrier = _carriers(schedule, ce, xe)
    for e in ce[carrier < 0]:
        msgs.append(f"{g._edge(e)}: crosses {names[dev[src[e]]]}->{names[dev[dst[e]]]} "
                    "but no transfer carries it")
    has = carrier >= 0
    e_c, x_c, t_c = ce[has], carrier[has], tt[has]
    early = start[dst[e_c]] < xf[x_c] - eps
    for e, x in zip(e_c[early], x_c[early], strict=True):
        v = dst[e]
        msgs.append(f"{g._edge(e)}: {_on(schedule, v)} starts at {start[v]:g} before its transfer "
                    f"finishes at {xf[x]:g}")
    short = (xf[x_c] - xs[x_c]) < t_c - eps
    for e, x, t in zip(e_c[short], x_c[short], t_c[short], strict=True):
        msgs.append(f"{g._edge(e)}: carried by transfer #{x} lasting {xf[x] - xs[x]:g} < its "
                    f"own transfer time {t:g}")
    if congestion and xe.size and cl.ports == "shared":  # one transfer at a time per port
        for side, dv in (("out", xa), ("in", xb)):
            for a, b in _overlaps(dv, xs, xf, eps):
                msgs.append(f"port {names[dv[a]]} ({side}): transfer {g._edge(xe[a])} "
                            f"[{xs[a]:g}, {xf[a]:g}) overlaps transfer {g._edge(xe[b])} "
                            f"[{xs[b]:g}, {xf[b]:g})")
    elif congestion and xe.size:
        for a, b in _overlaps(xa * cl.size + xb, xs, xf, eps):
            msgs.append(f"link {names[xa[a]]}->{names[xb[a]]}: transfer {g._edge(xe[a])} "
                        f"[{xs[a]:g}, {xf[a]:g}) overlaps transfer {g._edge(xe[b])} "
                        f"[{xs[b]:g}, {xf[b]:g})")
    return msgs


def validate_schedule(schedule: Schedule, *, congestion: bool = True, transfers: Any = None,
                      tol: float = 1e-9, limit: int = 50) -> list[str]:
    """Check a schedule against docs/semantics.md 2.1, independently of how it was produced.

    Checks: start/finish are finite, ``start >= 0`` and ``finish = start + duration`` on
    a device that supports the node (the duration counts the node's per-message costs:
    of the given ``transfers``, or without them one message per (source node, output,
    destination device)); no two nodes overlap on a device; every edge's
    precedence including its transfer time. With ``transfers`` (a
    :class:`~dnnplace.evaluation.sim_result.SimResult` or a mapping with arrays ``edge``,
    ``start``, ``finish``), every cross-device edge must be carried by a transfer of
    ``(source node, output, destination device)`` -- the edge's own, or a deduplicated one that
    lasts at least as long -- that starts after the source finishes, lasts its
    link-model time and ends before the destination starts; with ``congestion=True``
    transfers on one directed link must not overlap (with the cluster's
    ``ports == "shared"``: no two transfers out of one device, nor into one device).
    Without ``transfers`` each cross edge needs ``start(v) >= finish(u) + time(u, v)``
    (link occupancy cannot be checked then).

    Parameters
    ----------
    schedule : Schedule
    congestion : bool
        Check link non-overlap (only meaningful with ``transfers``).
    transfers : SimResult or mapping, optional
    tol : float
        Relative tolerance (scaled by ``max(1, makespan)``).
    limit : int
        Report at most this many violations (plus a count of the rest).

    Returns
    -------
    list of str
        Human-readable violations; empty when the schedule is valid.
    """
    pl = schedule.placement
    g, cl = pl.graph, pl.cluster
    names = cl.names
    dev = pl.device
    n = g.n
    start = np.asarray(schedule.start, dtype=np.float64).ravel()
    fin = np.asarray(schedule.finish, dtype=np.float64).ravel()
    if start.shape[0] != n or fin.shape[0] != n:
        return [f"schedule has {start.shape[0]} start / {fin.shape[0]} finish times for {n} nodes"]
    if not (np.all(np.isfinite(start)) and np.all(np.isfinite(fin))):
        i = int(np.flatnonzero(~(np.isfinite(start) & np.isfinite(fin)))[0])
        return [f"{g._node(i)}: start/finish not finite ({start[i]}, {fin[i]})"]
    span = float(fin.max()) if n else 0.0
    eps = tol * max(1.0, abs(span))
    src, dst = g.src, g.dst
    same = dev[src] == dev[dst]
    ce = np.flatnonzero(~same)
    xe = xs = xf = None
    if transfers is not None:
        xe, xs, xf = _transfer_arrays(transfers)
        if xe.size and (xe.min() < 0 or xe.max() >= g.m):
            return ["transfers: edge id out of range"]
        carrier = _carriers(schedule, ce, xe)
        group = np.where(carrier >= 0, carrier, xe.shape[0] + np.arange(ce.shape[0]))
    else:   # one message per (source node, output, destination device), the default transfer mode
        outs = np.unique(g.edge_output, return_inverse=True)[1].astype(np.int64) if g.m else g.edge_output
        group = (src[ce] * (int(outs.max(initial=0)) + 1) + outs[ce]) * cl.size + dev[dst[ce]]
    msgs = _node_violations(schedule, start, fin, eps, _message_time(schedule, ce, group))

    for e in np.flatnonzero(same & (start[dst] < fin[src] - eps)):
        u, v = src[e], dst[e]
        msgs.append(f"{g._edge(e)}: {_on(schedule, v)} starts at {start[v]:g} before its predecessor "
                    f"finishes at {fin[u]:g}")
    tt = cl.transfer_time(dev[src[ce]], dev[dst[ce]], g.edge_bytes[ce], g.edge_cost[ce])
    if transfers is None:
        late = start[dst[ce]] < fin[src[ce]] + tt - eps
        for e, t in zip(ce[late], tt[late], strict=True):
            u, v = src[e], dst[e]
            msgs.append(f"{g._edge(e)}: {_on(schedule, v)} starts at {start[v]:g} before the transfer "
                        f"from {names[dev[u]]} can arrive ({fin[u]:g} + {t:g})")
    else:
        msgs += _transfer_violations(schedule, start, fin, ce, tt, xe, xs, xf, congestion, eps)
    if len(msgs) > limit:
        msgs = msgs[:limit] + [f"... and {len(msgs) - limit} more violation(s)"]
    return msgs
