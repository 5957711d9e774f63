"""Device dispatch policies of the simulator and the priority orders they follow.

The policies (``"fifo"``, ``"critical_path"``, ``"priority"``, ``"order"``) are
described in :mod:`dnnplace.graphs.simulate`. This module checks a policy and its
``priorities`` (:func:`check_policy`), computes the bottom level that
``"critical_path"`` ranks by (:func:`bottom_level`), turns a policy into one total
dispatch order of the nodes (:func:`dispatch_order`) and, for the strict ``"order"``
policy, into per-device sequences (:func:`device_sequences`) and explains a deadlock
(:func:`raise_deadlock`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.sim_costs import edge_transfer_times, node_durations

__all__ = ["POLICIES", "check_policy", "bottom_level", "dispatch_order", "device_sequences", "raise_deadlock"]

POLICIES = ("fifo", "critical_path", "priority", "order")


def bottom_level(placement: Placement) -> np.ndarray:
    """Longest path from each node to a sink on its placed devices.

    Counts every node's time on its device and the uncongested transfer time of every
    cross-device edge; ``max(bottom_level)`` is the critical-path lower bound on the
    makespan of the placement.

    Examples
    --------
    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> from dnnplace.graphs.simulate import bottom_level
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0]], memory=[0, 0])
    >>> c = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices,
    ...                        default={"beta0": 0.5})
    >>> bottom_level(Placement(g, c, [0, 1])).tolist()
    [3.5, 2.0]
    """
    g = placement.graph
    dur = node_durations(placement).tolist()
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
    by ready time, see :mod:`dnnplace.graphs.sim_events`).
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


def raise_deadlock(placement: Placement, seq: list[list[int]], nxt: list[int]) -> None:
    """Name a device whose next node in the given order can never start, and why.

    ``seq[d]`` is device ``d``'s sequence and ``nxt[d]`` the position it got stuck at.
    """
    g, names = placement.graph, placement.cluster.names
    dev = placement.device.tolist()
    never = set()  # nodes that never ran: at or after their device's pointer
    for d, sq in enumerate(seq):
        never.update(sq[nxt[d]:])
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
        raise InputError(
            f"policy 'order' deadlocks: device {names[d]!r} must run {g._node(v)} next "
            f"(position {nxt[d]} of its order) but it never becomes ready{why}; "
            "the given order contradicts precedence")
    raise AssertionError("simulation stopped early without a blocked device")  # pragma: no cover
