"""Device dispatch policies of the simulator and the priority orders they follow.

The policies (``"fifo"``, ``"critical_path"``, ``"priority"``, ``"order"``) are
described in :mod:`dnnplace.evaluation.simulate`. This module checks a policy and its
``priorities`` (:func:`check_policy`), computes the bottom level that
``"critical_path"`` ranks by (:func:`bottom_level`), turns a policy into one total
dispatch order of the nodes (:func:`dispatch_order`) and, for the strict ``"order"``
policy, into per-device sequences (:func:`device_sequences`); a given link order
(``link_priorities``) is checked by :func:`check_link_priorities` and turned into
per-link sequences of transfer tasks by :func:`link_sequences`; :func:`raise_deadlock`
explains an order that stalls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.evaluation.sim_costs import (
    Transfers,
    build_transfers,
    current_transfer_mode,
    edge_transfer_times,
    placed_durations,
    tensor_keys,
)
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement

__all__ = ["POLICIES", "check_policy", "bottom_level", "dispatch_order", "device_sequences", "check_link_priorities",
           "link_sequences", "raise_deadlock"]

POLICIES = ("fifo", "critical_path", "priority", "order")


def bottom_level(placement: Placement) -> np.ndarray:
    """Longest path from each node to a sink on its placed devices.

    Counts every node's time on its device (with its message overheads under the
    current transfer mode) and the uncongested transfer time of every cross-device
    edge; ``max(bottom_level)`` is the critical-path lower bound on the
    makespan of the placement.

    Examples
    --------
    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> from dnnplace.evaluation.simulate import bottom_level
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0]], memory=[0, 0])
    >>> c = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices,
    ...                        default={"beta0": 0.5})
    >>> bottom_level(Placement(g, c, [0, 1])).tolist()
    [3.5, 2.0]
    """
    g = placement.graph
    tx = build_transfers(placement, current_transfer_mode() == "per_destination")
    dur = placed_durations(placement, tx).tolist()
    w = edge_transfer_times(placement)[g.out_eid].tolist()
    ptr, nbr = g.out_ptr.tolist(), g.out_nbr.tolist()
    bl = [0.0] * g.n
    for u in reversed(g.topo_order.tolist()):
        best = 0.0
        for k in range(ptr[u], ptr[u + 1]):
            val = w[k] + bl[nbr[k]]
            if val > best:
                best = val
        bl[u] = dur[u] + best
    return np.asarray(bl, dtype=np.float64)


def _check_priorities(priorities: Any, n: int, policy: str) -> np.ndarray:
    if priorities is None:
        raise InputError(f"policy {policy!r} needs a 'priorities' array (one number per node)")
    pr = np.asarray(priorities, dtype=np.float64).ravel()
    if pr.shape[0] != n:
        raise InputError(f"priorities: expected {n} values (one per node), got {pr.shape[0]}")
    if not np.all(np.isfinite(pr)):
        i = int(np.flatnonzero(~np.isfinite(pr))[0])
        raise InputError(f"priorities: value of node index {i} is not a finite number ({pr[i]})")
    return pr


def check_policy(policy: str, priorities: Any, n: int) -> np.ndarray | None:
    """The checked ``priorities`` of ``"priority"`` and ``"order"`` (``None`` for the others).

    Raises
    ------
    InputError
        Unknown policy; ``priorities`` missing or malformed where needed, or given to a
        policy that does not use them.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown simulation policy {policy!r}; use one of {list(POLICIES)}")
    if policy in ("priority", "order"):
        return _check_priorities(priorities, n, policy)
    if priorities is not None:
        raise InputError(f"policy {policy!r} does not use 'priorities'; "
                         "use policy='priority' or 'order' to apply them")
    return None


def dispatch_order(placement: Placement, policy: str, priorities: np.ndarray | None) -> np.ndarray:
    """All nodes by dispatch rank, most urgent first; ties by topological position.

    ``"critical_path"``: largest bottom level first; ``"priority"`` and ``"order"``:
    lowest priority first; ``"fifo"``: topological order (the fifo queue itself orders
    by ready time, see :mod:`dnnplace.evaluation.sim_events`).
    """
    g = placement.graph
    if policy == "critical_path":
        return np.lexsort((g.topo_position, -bottom_level(placement)))
    if policy in ("priority", "order"):
        return np.lexsort((g.topo_position, priorities))
    return g.topo_order


def device_sequences(placement: Placement, by_rank: np.ndarray) -> list[list[int]]:
    """Per-device node sequences of the strict ``"order"`` policy, in ``by_rank`` order."""
    dev = placement.device
    return [by_rank[dev[by_rank] == d].tolist() for d in range(placement.cluster.size)]


def check_link_priorities(placement: Placement, policy: str, link_priorities: Any) -> np.ndarray | None:
    """The checked ``link_priorities`` (``(m,)`` floats), or ``None`` when not given.

    Every edge whose ends are on different devices needs a finite value; the values of
    the other edges are ignored (they may be ``NaN``).

    Raises
    ------
    InputError
        Given with a policy other than ``"order"``; not one number per edge; a crossing
        edge without a finite value.
    """
    if link_priorities is None:
        return None
    if policy != "order":
        raise InputError(f"policy {policy!r} does not use 'link_priorities'; a link order is replayed "
                         "together with a device order: use policy='order'")
    g = placement.graph
    try:
        lp = np.asarray(link_priorities, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InputError("link_priorities: expected one number per edge") from None
    if lp.shape[0] != g.m:
        raise InputError(f"link_priorities: expected {g.m} values (one per edge), got {lp.shape[0]}")
    dev = placement.device
    bad = (dev[g.src] != dev[g.dst]) & ~np.isfinite(lp)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        names = placement.cluster.names
        raise InputError(f"link_priorities: {g._edge(e)} crosses {names[dev[g.src[e]]]}->{names[dev[g.dst[e]]]} "
                         f"but its value is {lp[e]}; every edge that crosses devices needs a finite rank "
                         f"({int(bad.sum())} such edge(s))")
    return lp


def link_sequences(placement: Placement, tx: Transfers, link_priorities: np.ndarray,
                   dedup: bool) -> list[list[int]]:
    """Per resource (a directed link ``a * D + b``, or with shared ports the egress port
    ``a`` and the ingress port ``D + b``:
    :func:`~dnnplace.evaluation.sim_events.transfer_resources`), its transfer tasks (indices
    into ``tx``) in the order it serves them: increasing ``link_priorities`` of the
    task's edge, ties by the source's topological position, then edge id (the FCFS tie
    rule). A
    deduplicated task (``dedup``: one per (source node, output, destination device))
    stands for several edges and takes the lowest value among them."""
    g, D = placement.graph, placement.cluster.size
    if dedup:
        dev = placement.device
        ce = np.flatnonzero(dev[g.src] != dev[g.dst])
        keys, inv = np.unique(tensor_keys(placement, ce), return_inverse=True)
        low = np.full(keys.shape[0], np.inf)
        np.minimum.at(low, inv, link_priorities[ce])
        val = low[np.searchsorted(keys, tensor_keys(placement, tx.edge))]
    else:
        val = link_priorities[tx.edge]
    if placement.cluster.ports == "shared":
        res = np.concatenate([tx.src_dev, D + tx.dst_dev]).astype(np.int64)
        task = np.concatenate([np.arange(tx.edge.shape[0])] * 2)
        n_res = 2 * D
    else:
        res = (tx.src_dev * D + tx.dst_dev).astype(np.int64)
        task = np.arange(tx.edge.shape[0])
        n_res = D * D
    order = np.lexsort((tx.edge[task], g.topo_position[tx.src_node[task]], val[task], res))
    bounds = np.searchsorted(res[order], np.arange(n_res + 1)).tolist()
    ol = task[order].tolist()
    return [ol[bounds[k]:bounds[k + 1]] for k in range(n_res)]


def _link_stall(placement: Placement, v: int, links: tuple) -> str:
    """Why ``v`` never becomes ready although its predecessors ran: a transfer into it
    waits on its link (or port) behind one whose source never runs."""
    g, names, D = placement.graph, placement.cluster.names, placement.cluster.size
    shared = placement.cluster.ports == "shared"
    tx, lseq, lnxt = links
    dev = placement.device.tolist()
    ptr, nodes = tx.dst_ptr.tolist(), tx.dst_nodes.tolist()
    pos: dict[int, list] = {}
    for r, sq in enumerate(lseq):
        for k, x in enumerate(sq):
            pos.setdefault(x, []).append((r, k))

    def where(r: int) -> str:
        if not shared:
            return f"link {names[r // D]}->{names[r % D]}"
        return f"port {names[r]} (out)" if r < D else f"port {names[r - D]} (in)"

    for x in range(tx.edge.shape[0]):
        if v not in nodes[ptr[x]:ptr[x + 1]]:
            continue
        for r, k in pos[x]:
            if k < lnxt[r]:
                continue  # carried, or passed on this resource
            y = lseq[r][lnxt[r]]
            if y == x:
                continue  # first in line here: it waits on its other resource
            # with shared ports y may itself wait in line on its other port: follow the
            # chain to the transfer whose source never runs
            seen = {x}
            while y not in seen:
                seen.add(y)
                nxt_y = next((lseq[r2][lnxt[r2]] for r2, _ in pos[y] if lseq[r2][lnxt[r2]] != y), None)
                if nxt_y is None:
                    break
                y = nxt_y
            w = int(tx.src_node[y])
            return (f"; it needs the transfer of {g._edge(int(tx.edge[x]))} on {where(r)} "
                    f"(position {k} of that {'link' if not shared else 'port'}'s order), which waits for "
                    f"{g._edge(int(tx.edge[y]))}, whose source {g._node(w)} never runs "
                    f"(it is stuck on {names[dev[w]]!r})")
    return ""


def raise_deadlock(placement: Placement, seq: list[list[int]], nxt: list[int], links: tuple | None = None) -> None:
    """Name a device whose next node in the given order can never start, and why.

    ``seq[d]`` is device ``d``'s sequence and ``nxt[d]`` the position it got stuck at;
    ``links`` (a given link order) is ``(tx, lseq, lnxt)``: the transfer tasks, each
    link's sequence and the position it got stuck at. A device held up by a link's
    order is named first (that is where a device order alone would not stall).
    """
    g, names = placement.graph, placement.cluster.names
    dev = placement.device.tolist()
    never = set()  # nodes that never ran: at or after their device's pointer
    for d, sq in enumerate(seq):
        never.update(sq[nxt[d]:])
    what = "the given device and link orders contradict" if links is not None else "the given order contradicts"
    first = None
    for d, sq in enumerate(seq):
        if nxt[d] == len(sq):
            continue
        v = sq[nxt[d]]
        why = ""
        for u in g.predecessors(v).tolist():
            if u in never:
                where = ("it comes later in the same device's order" if dev[u] == d
                         else f"it is stuck on {names[dev[u]]!r}")
                why = f"; it needs {g._node(u)} first, but {where}"
                break
        if not why and links is not None:
            why = _link_stall(placement, v, links)
        msg = (f"policy 'order' deadlocks: device {names[d]!r} must run {g._node(v)} next "
               f"(position {nxt[d]} of its order) but it never becomes ready{why}; {what} precedence")
        if links is None or "on link" in why or "on port" in why:
            raise InputError(msg)
        first = first or msg
    if first is not None:
        raise InputError(first)
    raise AssertionError("simulation stopped early without a blocked device")  # pragma: no cover
