"""Longest-path quantities of an operator graph: top and bottom levels, the critical path,
heights and level widths, with the node and edge costs they add up; vectorised level by
level over CSR. The lower bounds built on them are in :mod:`dnnplace.evaluation.bounds`.

Every function works on an :class:`~dnnplace.graphs.graph.OpGraph` in near-linear time: nodes are
processed one topological *level* at a time (all predecessors of a level lie in earlier
levels), with the in- or out-entries of a level gathered as one contiguous slice, so a
200k-node graph takes a fraction of a second. Deep, narrow graphs (few nodes per level)
fall back to a plain loop over the topological order, which is faster there. The
summary statistics built on these (CCR, parallelism, :func:`~dnnplace.graphs.stats.graph_stats`)
are in :mod:`dnnplace.graphs.stats`.

Costs
-----
node cost ``w_i``
    The compute time of node ``i`` on one device kind: ``kind=None`` takes the fastest
    kind the node supports (``nanmin`` over :attr:`OpGraph.compute`); ``kind="gpu"``
    takes that column and requires every node to support it; an array of length ``n``
    is used as given.
edge cost ``c_ij``
    ``comm=None``: the edge's explicit ``cost`` where it has one, else 0 (the Tarnawski
    inputs carry explicit costs; generated graphs carry bytes only); a number or an
    array of length ``m``: used as given (``comm=0`` gives computation-only paths);
    a :class:`~dnnplace.graphs.cluster.Cluster`: the mean transfer time over the cluster's
    ordered pairs of distinct devices (``beta0 + beta1 * bytes``, or
    ``cost_factor * cost`` for edges with an explicit cost), i.e. the cost of an edge
    whose ends land on two different devices chosen at random.

All times are in ``graph.unit``.

References
----------
.. [C] H. Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs", Eq. 2 (top level), Eq. 3 (bottom level).
.. [P] Pesto (Middleware 2021), Definition 3.4 (height).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.adjacency import csr_rows
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = [
    "blevel",
    "critical_path",
    "edge_weights",
    "heights",
    "level_widths",
    "node_weights",
    "tlevel",
]

# Below this many nodes per level on average, the per-level numpy calls cost more than
# a plain loop over the topological order.
_MIN_AVG_WIDTH = 8


# ---------------------------------------------------------------------------- costs
def node_weights(graph: OpGraph, kind: str | np.ndarray | None = None) -> np.ndarray:
    """Node costs ``w_i``: the fastest supported kind (``kind=None``), one kind's column,
    or a given array (see the module docstring)."""
    if kind is None:
        if graph.n == 0:
            return np.zeros(0)
        return np.nanmin(graph.compute, axis=1)  # every node supports >= 1 kind (OpGraph._check)
    if isinstance(kind, str):
        k = graph.kind_index(kind)
        if k < 0:
            raise InputError(f"graph {graph.name!r} has no compute column for kind {kind!r}; "
                             f"it has {list(graph.kinds)}")
        w = graph.compute[:, k]
        bad = np.isnan(w)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{graph._node(i)} cannot run on kind {kind!r} "
                             f"({int(bad.sum())} node(s) lack it); pass kind=None for the fastest supported kind")
        return w
    w = np.asarray(kind, dtype=np.float64).ravel()
    if w.shape[0] != graph.n:
        raise InputError(f"node weights: expected {graph.n} values, got {w.shape[0]}")
    return w


def edge_weights(graph: OpGraph, comm: Any = None) -> np.ndarray:
    """Edge costs ``c_ij``: explicit cost or 0 (``None``), a number, an array, or the mean
    inter-device transfer time on a :class:`Cluster` (see the module docstring)."""
    if comm is None:
        return np.nan_to_num(graph.edge_cost, nan=0.0)
    if isinstance(comm, Cluster):
        d = comm.size
        if d < 2:
            return np.zeros(graph.m)
        off = ~np.eye(d, dtype=bool)
        b0, b1, cf = comm.beta0[off].mean(), comm.beta1[off].mean(), comm.cost_factor[off].mean()
        model = b0 + b1 * graph.edge_bytes
        return np.where(np.isnan(graph.edge_cost), model, cf * np.nan_to_num(graph.edge_cost))
    c = np.asarray(comm, dtype=np.float64)
    if c.ndim == 0:
        return np.full(graph.m, float(c))
    c = c.ravel()
    if c.shape[0] != graph.m:
        raise InputError(f"edge costs: expected {graph.m} values, got {c.shape[0]}")
    return c


# ---------------------------------------------------------------------------- level sweeps
def _level_slices(graph: OpGraph, incoming: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nodes in topological (level) order with their in- (or out-) entries regrouped so
    that every level's entries form one contiguous slice.

    Returns ``(order, node_ptr, entry_ptr, nbr, eid)``: level ``d`` is
    ``order[node_ptr[d]:node_ptr[d+1]]`` and its entries ``nbr/eid[entry_ptr[d]:entry_ptr[d+1]]``,
    grouped by node in the same order.
    """
    order = graph.topo_order
    ptr, nbr, eid = (graph.in_ptr, graph.in_nbr, graph.in_eid) if incoming else \
        (graph.out_ptr, graph.out_nbr, graph.out_eid)
    pos = csr_rows(ptr, order)
    deg = ptr[order + 1] - ptr[order]
    depth = int(graph.level.max()) + 1 if graph.n else 0
    node_ptr = np.zeros(depth + 1, dtype=np.int64)
    np.cumsum(np.bincount(graph.level, minlength=depth), out=node_ptr[1:])
    deg_cum = np.concatenate(([0], np.cumsum(deg)))
    return order, node_ptr, deg_cum[node_ptr], nbr[pos], eid[pos]


def _sweep(graph: OpGraph, w: np.ndarray, c: np.ndarray, forward: bool) -> np.ndarray:
    """``forward``: ``t(v) = max_{(p,v)} t(p) + w_p + c_pv`` (0 at sources).
    Backward: ``b(v) = w_v + max_{(v,s)} b(s) + c_vs`` (``w_v`` at sinks)."""
    n = graph.n
    out = np.zeros(n) if forward else w.astype(np.float64, copy=True)
    if n == 0 or graph.m == 0:
        return out
    depth = int(graph.level.max()) + 1
    if n < _MIN_AVG_WIDTH * depth:
        return _sweep_loop(graph, w, c, forward, out)
    order, node_ptr, entry_ptr, nbr, eid = _level_slices(graph, incoming=forward)
    ptr = graph.in_ptr if forward else graph.out_ptr
    levels = range(1, depth) if forward else range(depth - 2, -1, -1)
    for d in levels:
        a, b = entry_ptr[d], entry_ptr[d + 1]
        if a == b:
            continue
        nodes = order[node_ptr[d]:node_ptr[d + 1]]
        deg = ptr[nodes + 1] - ptr[nodes]
        has = deg > 0
        starts = np.concatenate(([0], np.cumsum(deg[has])[:-1]))
        nb, ed = nbr[a:b], eid[a:b]
        if forward:
            vals = out[nb] + w[nb] + c[ed]
            out[nodes[has]] = np.maximum.reduceat(vals, starts)
        else:
            vals = out[nb] + c[ed]
            out[nodes[has]] += np.maximum.reduceat(vals, starts)
    return out


def _sweep_loop(graph: OpGraph, w: np.ndarray, c: np.ndarray, forward: bool, out: np.ndarray) -> np.ndarray:
    """The same recurrences as :func:`_sweep`, one node at a time (deep, narrow graphs)."""
    order = graph.topo_order.tolist()
    wl, cl = w.tolist(), c.tolist()
    res = out.tolist()
    if forward:
        ptr, nbr, eid = graph.in_ptr.tolist(), graph.in_nbr.tolist(), graph.in_eid.tolist()
        for v in order:
            best = 0.0
            for j in range(ptr[v], ptr[v + 1]):
                p = nbr[j]
                t = res[p] + wl[p] + cl[eid[j]]
                best = max(best, t)
            res[v] = best
    else:
        ptr, nbr, eid = graph.out_ptr.tolist(), graph.out_nbr.tolist(), graph.out_eid.tolist()
        for v in reversed(order):
            best = 0.0
            for j in range(ptr[v], ptr[v + 1]):
                t = res[nbr[j]] + cl[eid[j]]
                best = max(best, t)
            res[v] = wl[v] + best
    return np.asarray(res, dtype=np.float64)


# ---------------------------------------------------------------------------- levels and paths
def tlevel(graph: OpGraph, *, kind: str | np.ndarray | None = None, comm: Any = None) -> np.ndarray:
    """Top level of every node (Celeritas Eq. 2): the longest path from any source to
    ``v``, *excluding* ``v``'s own cost.

    ``tlevel(v) = 0`` if ``v`` has no predecessor, else
    ``max_{p in pred(v)} tlevel(p) + w_p + c_{p,v}``.

    Parameters
    ----------
    graph : OpGraph
    kind : str, array or None
        Node costs (see :func:`node_weights`); default the fastest supported kind.
    comm : None, number, array or Cluster
        Edge costs (see :func:`edge_weights`); default the explicit costs, else 0.

    Examples
    --------
    A chain ``a -> b`` with costs 2 and 3 and an edge cost of 1:

    >>> import numpy as np
    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[2.0], [3.0]], memory=[0, 0],
    ...             src=[0], dst=[1], edge_cost=[1.0])
    >>> tlevel(g).tolist(), blevel(g).tolist()
    ([0.0, 3.0], [6.0, 3.0])
    """
    return _sweep(graph, node_weights(graph, kind), edge_weights(graph, comm), forward=True)


def blevel(graph: OpGraph, *, kind: str | np.ndarray | None = None, comm: Any = None) -> np.ndarray:
    """Bottom level of every node (Celeritas Eq. 3): the longest path from ``v`` to any
    sink, *including* ``v``'s own cost.

    ``blevel(v) = w_v`` if ``v`` has no successor, else
    ``w_v + max_{s in succ(v)} blevel(s) + c_{v,s}``.
    ``tlevel(v) + blevel(v)`` is the longest path through ``v`` (Celeritas' ``cpath``).
    Parameters as in :func:`tlevel`.
    """
    return _sweep(graph, node_weights(graph, kind), edge_weights(graph, comm), forward=False)


def critical_path(graph: OpGraph, *, kind: str | np.ndarray | None = None,
                  comm: Any = None) -> tuple[float, np.ndarray]:
    """The critical path (Celeritas Sec. 5.1.2): a source-to-sink path of maximum total
    node plus edge cost, ``max_v tlevel(v) + blevel(v) = max_{source s} blevel(s)``.

    Returns ``(length, node indices along the path)``; ties are broken towards the
    lowest node index. An empty graph gives ``(0.0, [])``.
    """
    if graph.n == 0:
        return 0.0, np.empty(0, dtype=np.int64)
    w, c = node_weights(graph, kind), edge_weights(graph, comm)
    bl = _sweep(graph, w, c, forward=False)
    sources = np.flatnonzero(graph.in_ptr[1:] == graph.in_ptr[:-1])
    v = int(sources[np.argmax(bl[sources])])
    length = float(bl[v])
    path = [v]
    ptr, nbr, eid = graph.out_ptr, graph.out_nbr, graph.out_eid
    while ptr[v + 1] > ptr[v]:
        s, e = nbr[ptr[v]:ptr[v + 1]], eid[ptr[v]:ptr[v + 1]]
        vals = bl[s] + c[e]
        best = vals.max()
        cand = s[vals == best]
        v = int(cand.min())
        path.append(v)
    return length, np.asarray(path, dtype=np.int64)


def heights(graph: OpGraph) -> np.ndarray:
    """Height of every node (Pesto Definition 3.4): the longest distance, counted in
    *vertices*, from a root to ``v``; roots (no predecessors) have height 1.

    Equal to ``graph.level + 1`` (``level`` counts edges). Pesto merges a pair
    ``(u, v)`` without creating a cycle when, e.g., ``H(v) = H(u) + 1`` and ``u`` has
    out-degree 1 or ``v`` in-degree 1 (Theorem 3.5).
    """
    return graph.level + 1


def level_widths(graph: OpGraph) -> np.ndarray:
    """Number of nodes in each topological level (``graph.level``)."""
    if graph.n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.bincount(graph.level)
