"""Link orders: the order in which each directed link carries its transfers.

A makespan answer fixes, besides a device and an order per device (``priorities``, one
number per node), optionally the order of the transfers on every link:
``link_priorities``, one number per edge, in the same spirit. With link congestion
(docs/semantics.md 2.1) the simulator (:func:`dnnplace.evaluation.simulate.simulate`, ``policy="order"``)
then serves each directed link strictly in increasing value instead of first come
first served; edges whose ends share a device carry nothing and their value is ignored
(``NaN`` by convention). Without a link order, links are FCFS.

This module turns the times of a schedule into both orders at once
(:func:`orders_from_times`) and converts a link order to and from its JSON form in a
result record (:func:`link_priorities_to_json`, :func:`link_priorities_from_doc`):
``{"edge index": rank}`` over the edges that cross devices, where the edge index is the
edge's position in the graph's edge list (``graph.src``/``graph.dst``, the order of
the graph file's ``edges``) and the ranks are ``0, 1, ...`` over all crossing edges
(only their order within one link matters).

>>> import numpy as np
>>> from dnnplace.graphs import Cluster, OpGraph, Placement
>>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["gpu"],
...                      compute=[[1.0]] * 3, memory=[0, 0, 0])
>>> pl = Placement(g, Cluster.single_host(2, with_cpu=False), [0, 1, 1])
>>> link_priorities_to_json(pl, np.array([5.0, 2.0]))
{'0': 1, '1': 0}
>>> link_priorities_from_doc({"link_priorities": {"0": 1, "1": 0}}, g).tolist()
[1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement

__all__ = ["orders_from_times", "link_priorities_to_json", "link_priorities_from_doc"]


def orders_from_times(graph: OpGraph, start: np.ndarray, finish: np.ndarray, xfer_start: np.ndarray,
                      xfer_finish: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node ``priorities`` (n,) and ``link_priorities`` (m,) of a schedule, from one sort.

    Every node and every transfer (an edge with a finite ``xfer_start``) is a task; all
    tasks are sorted together by (start, finish, position in the augmented topological
    order: node ``v`` at ``2 * topo(v)``, the transfer of edge ``(u, v)`` at
    ``2 * topo(u) + 1``, then the destination's position and the edge id). Node ranks
    and transfer ranks are read off that one order, so the device orders and the link
    orders never contradict each other. For the times of a valid schedule (every edge
    ``u -> v``: ``xfer_start >= finish(u)`` and ``start(v) >= xfer_finish``, or
    ``start(v) >= finish(u)`` without a transfer) the sort is a linear extension of the
    augmented precedence, zero-length tasks included, so replaying both orders never
    deadlocks and, when the schedule keeps one task at a time per device and link, ends
    no later than the schedule. The same holds for a coarse schedule expanded to its
    members (members share their coarse node's times and keep topological order).

    Parameters
    ----------
    graph : OpGraph
    start, finish : array (n,)
        Node times.
    xfer_start, xfer_finish : array (m,)
        Transfer times per edge; ``NaN`` where the edge carries no transfer.

    Returns
    -------
    priorities : ndarray (n,) of int
        Rank of every node (0 first).
    link_priorities : ndarray (m,) of float
        Rank of every transfer (0 first), ``NaN`` for edges without one.

    Examples
    --------
    ``a`` feeds ``b`` through a transfer over [1, 2):

    >>> g = OpGraph.from_ids("ab", [("a", "b")], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0])
    >>> pr, lp = orders_from_times(g, np.array([0.0, 2.0]), np.array([1.0, 3.0]),
    ...                            np.array([1.0]), np.array([2.0]))
    >>> pr.tolist(), lp.tolist()
    ([0, 1], [0.0])
    """
    n, m = graph.n, graph.m
    tp = graph.topo_position
    xs = np.asarray(xfer_start, dtype=np.float64).ravel()
    xfin = np.asarray(xfer_finish, dtype=np.float64).ravel()
    if xs.shape[0] != m or xfin.shape[0] != m:
        raise InputError(f"transfer times: expected {m} values (one per edge)")
    xe = np.flatnonzero(np.isfinite(xs))
    t0 = np.concatenate([np.asarray(start, dtype=np.float64), xs[xe]])
    t1 = np.concatenate([np.asarray(finish, dtype=np.float64), xfin[xe]])
    aug = np.concatenate([2 * tp, 2 * tp[graph.src[xe]] + 1])
    k3 = np.concatenate([np.zeros(n, dtype=np.int64), tp[graph.dst[xe]]])
    k4 = np.concatenate([np.zeros(n, dtype=np.int64), xe])
    order = np.lexsort((k4, k3, aug, t1, t0))
    is_node = order < n
    pr = np.empty(n, dtype=np.int64)
    pr[order[is_node]] = np.arange(n)
    lp = np.full(m, np.nan)
    lp[xe[order[~is_node] - n]] = np.arange(xe.shape[0])
    return pr, lp


def link_priorities_to_json(placement: Placement, link_priorities: np.ndarray) -> dict[str, int]:
    """``{"edge index": rank}`` over the edges that cross devices in ``placement``.

    Ranks are ``0 .. X-1`` in the order the simulator serves them (value, then the
    source's topological position, then edge id), so the record replays exactly as the
    array did.
    """
    g, dev = placement.graph, placement.device
    lp = np.asarray(link_priorities, dtype=np.float64).ravel()
    ce = np.flatnonzero(dev[g.src] != dev[g.dst])
    rank = np.empty(ce.shape[0], dtype=np.int64)
    rank[np.lexsort((ce, g.topo_position[g.src[ce]], lp[ce]))] = np.arange(ce.shape[0])
    return {str(e): r for e, r in zip(ce.tolist(), rank.tolist(), strict=True)}


def link_priorities_from_doc(doc: Any, graph: OpGraph, source: str = "result") -> np.ndarray | None:
    """The ``link_priorities`` of a result JSON (``{"edge index": rank}``) as an ``(m,)``
    array (``NaN`` for edges it does not name); ``None`` when the document has none
    (no such key, ``null``, or not a result at all).

    Raises
    ------
    InputError
        A key that is not an edge index of ``graph`` or a rank that is not a number.
    """
    lp = doc.get("link_priorities") if isinstance(doc, Mapping) else None
    if lp is None:
        return None
    if not isinstance(lp, Mapping):
        raise InputError(f"{source}: 'link_priorities' must be a map {{edge index: rank}}")
    out = np.full(graph.m, np.nan)
    for key, val in lp.items():
        try:
            e = int(key)
        except (TypeError, ValueError):
            e = -1
        if not 0 <= e < graph.m or str(e) != str(key).strip():
            raise InputError(f"{source}: 'link_priorities' key {key!r} is not an edge index 0..{graph.m - 1}")
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not np.isfinite(val):
            raise InputError(f"{source}: 'link_priorities' rank of edge {e} ({graph._edge(e)}) is not a finite "
                             f"number: {val!r}")
        out[e] = float(val)
    return out
