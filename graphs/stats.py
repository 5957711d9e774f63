"""Graph statistics used by the placement papers, vectorised level by level over CSR.

Every function works on an :class:`~dnnplace.graphs.graph.OpGraph` in near-linear time: nodes are
processed one topological *level* at a time (all predecessors of a level lie in earlier
levels), with the in- or out-entries of a level gathered as one contiguous slice, so a
200k-node graph takes a fraction of a second. Deep, narrow graphs (few nodes per level)
fall back to a plain loop over the topological order, which is faster there.

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

Link model of the summary statistics
------------------------------------
:func:`ccr` and :func:`graph_stats` need a transfer time for *every* edge, also for
generated graphs whose edges carry bytes only (``comm=None`` above would count those as
free and give a CCR of 0). They use :func:`transfer_costs`: with ``comm`` given, that;
else with a ``cluster``, its mean link (as ``comm=cluster`` above); else each edge's
explicit ``cost`` where it has one and, for the others, the *reference link*
``REFERENCE_LINK`` (0.01 ms + bytes / 25 GB/s, the NVLink figures of
:meth:`dnnplace.graphs.cluster.Cluster.single_host`, converted to ``graph.unit``). The
statistics say which model they used (``ccr_link_model``).

References
----------
.. [C] Celeritas (Eq. 1 CCR, Eq. 2 top level, Eq. 3 bottom level), ``papers/celeritas.md``.
.. [P] Pesto, Definition 3.4 (height), ``papers/pesto-middleware21.md``.
.. [D] PARDNN, Table 5 (degree of parallelism, CCR), ``papers/pardnn-parco21.md``.
.. [S] O. Sinnen, *Task Scheduling for Parallel Systems*, Wiley 2007, Sec. 4.4 (CCR as
   mean communication over mean computation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph, csr_rows

__all__ = [
    "average_parallelism",
    "blevel",
    "ccr",
    "critical_path",
    "edge_weights",
    "graph_stats",
    "heights",
    "level_widths",
    "node_weights",
    "REFERENCE_LINK",
    "tlevel",
    "transfer_costs",
]

# The reference link of the summary statistics when no cluster is given: NVLink
# (start-up seconds, bytes per second), the figures of Cluster.single_host.
REFERENCE_LINK = (0.01e-3, 25e9)
_SECONDS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}

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


# ---------------------------------------------------------------------------- public statistics
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


def transfer_costs(graph: OpGraph, *, comm: Any = None,
                   cluster: Cluster | None = None) -> tuple[np.ndarray | None, str]:
    """Edge transfer times for the summary statistics and a description of the link
    model used (see "Link model of the summary statistics" in the module docstring).

    Returns ``(costs, model)``; ``costs`` is ``None`` when some edge carries bytes only
    and neither a cluster nor a reference link applies (a ``graph.unit`` other than
    s, ms, us, ns).

    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0],
    ...             src=[0], dst=[1], edge_bytes=[25e6])
    >>> costs, model = transfer_costs(g)
    >>> costs.round(6).tolist(), model
    ([1.01], 'reference NVLink 0.01 ms + bytes/25 GB/s')
    """
    if comm is not None:
        desc = f"cluster {comm.name!r} (mean link)" if isinstance(comm, Cluster) else "given edge costs"
        return edge_weights(graph, comm), desc
    if cluster is not None:
        return edge_weights(graph, cluster), f"cluster {cluster.name!r} (mean link)"
    explicit = ~np.isnan(graph.edge_cost)
    bytes_only = ~explicit & (graph.edge_bytes > 0)
    if not bytes_only.any():
        return edge_weights(graph, None), ("explicit edge costs" if explicit.any() else
                                           "none (no edge has a cost or bytes)")
    scale = _SECONDS.get(graph.unit)
    if scale is None:
        return None, f"unknown (bytes only, unit {graph.unit!r}: give a cluster)"
    lat, bw = REFERENCE_LINK
    c = np.where(explicit, np.nan_to_num(graph.edge_cost), lat * scale + graph.edge_bytes * (scale / bw))
    c[~explicit & ~bytes_only] = 0.0
    desc = (f"reference NVLink {lat * scale:g} {graph.unit} + bytes/{bw / 1e9:g} GB/s"
            + (", explicit costs where given" if explicit.any() else ""))
    return c, desc


def ccr(graph: OpGraph, *, kind: str | np.ndarray | None = None, comm: Any = None,
        cluster: Cluster | None = None) -> float | None:
    """Communication-to-computation ratio: mean transfer time of an edge over mean
    compute time of a node (Sinnen Sec. 4.4; PARDNN Table 5)::

        CCR = (1/|E| * sum_{(i,j) in E} c_ij) / (1/|V| * sum_{i in V} w_i)

    ``w_i`` as in :func:`node_weights`; ``c_ij`` from :func:`transfer_costs` (the
    given ``comm``, else the ``cluster``'s mean link, else explicit costs plus the
    reference link for byte-only edges), i.e. the time an edge would take if its ends
    sat on two different devices. Celeritas' Eq. 1 is the ratio of the *sums*, this
    value times ``|E| / |V|``. 0 for a graph without edges or nodes, ``inf`` when it
    has communication but no computation, ``None`` when the link model is unknown.

    >>> g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0], [2.0], [3.0]], memory=[0] * 3,
    ...             src=[0, 1], dst=[1, 2], edge_cost=[1.0, 3.0])
    >>> ccr(g)  # mean edge 2 over mean node 2
    1.0
    """
    c, _ = transfer_costs(graph, comm=comm, cluster=cluster)
    if c is None:
        return None
    w = node_weights(graph, kind)
    if graph.m == 0 or graph.n == 0:
        return 0.0
    num, den = float(c.mean()), float(w.mean())
    if den == 0.0:
        return math.inf if num > 0 else 0.0
    return num / den


def average_parallelism(graph: OpGraph, *, kind: str | np.ndarray | None = None) -> float:
    """Average degree of parallelism, DoP (PARDNN Table 5).

    PARDNN reports DoP without a formula; we use the task-scheduling definition of its
    reference [30] (Sinnen): total work over the computation-only critical path,
    ``DoP = sum_{v in V} w_v / max_{paths P} sum_{v in P} w_v``, i.e. the speed-up an
    unbounded number of devices with free communication could reach. 1 for a chain,
    ``n`` for ``n`` independent equal nodes; 0 for an empty or zero-cost graph.
    """
    w = node_weights(graph, kind)
    total = float(w.sum())
    if total == 0.0:
        return 0.0
    span = float(_sweep(graph, w, np.zeros(graph.m), forward=False).max())
    return total / span


def level_widths(graph: OpGraph) -> np.ndarray:
    """Number of nodes in each topological level (``graph.level``)."""
    if graph.n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.bincount(graph.level)


def graph_stats(graph: OpGraph, *, kind: str | np.ndarray | None = None, comm: Any = None,
                cluster: Cluster | None = None) -> dict:
    """A JSON-ready summary of a graph.

    Keys: ``name``, ``unit``, ``nodes``, ``edges``, ``kinds``, ``supported`` (nodes per
    kind), ``compute_total`` (per kind, over the nodes that support it),
    ``work`` (sum of node costs ``w``, :func:`node_weights`), ``memory_total``,
    ``persistent_bytes_total``, ``output_bytes_total``, ``edge_bytes_total``,
    ``explicit_edge_costs`` (edges with one), then

    ``ccr``
        :func:`ccr`: mean edge transfer time over mean node time (``None`` if unknown);
    ``ccr_link_model``
        the link model of ``ccr`` and ``critical_path_with_transfers``
        (:func:`transfer_costs`: ``comm``, else ``cluster`` (``"cluster 'x' (mean
        link)"``: ``beta0 + beta1 * bytes``, or ``cost_factor * cost`` for explicit
        costs, averaged over ordered pairs of distinct devices), else explicit costs
        plus the reference link (``"reference NVLink ..."``));
    ``avg_parallelism``
        DoP, ``work / critical_path_compute``;
    ``critical_path_compute``, ``critical_path_compute_nodes``
        the longest path counting node costs only (never more than ``work``) and its
        node count;
    ``critical_path_with_transfers``, ``critical_path_with_transfers_nodes``
        the longest path counting node costs *plus* every edge's transfer time under
        the same link model, as if each edge crossed devices (it can exceed ``work``:
        transfers are not work); ``None`` when the link model is unknown;

    and ``depth`` (number of levels), ``max_width`` (largest level), ``sources``,
    ``sinks``, ``training``, ``backward_nodes``, ``colocation_groups``.

    Examples
    --------
    A chain ``a -> b`` (2 + 3 ms) whose edge costs 4 ms:

    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[2.0], [3.0]], memory=[0, 0],
    ...             src=[0], dst=[1], edge_cost=[4.0])
    >>> s = graph_stats(g)
    >>> s["work"], s["critical_path_compute"], s["critical_path_with_transfers"], s["ccr"]
    (5.0, 5.0, 9.0, 1.6)
    """
    widths = level_widths(graph)
    w = node_weights(graph, kind)
    c, model = transfer_costs(graph, comm=comm, cluster=cluster)
    cp_len, cp_nodes = critical_path(graph, kind=w, comm=0.0)
    if c is not None:
        cpt_len, cpt_nodes = critical_path(graph, kind=w, comm=c)
    work = float(w.sum())
    supported = {k: int(np.count_nonzero(~np.isnan(graph.compute[:, j]))) for j, k in enumerate(graph.kinds)}
    indeg = graph.in_ptr[1:] - graph.in_ptr[:-1]
    outdeg = graph.out_ptr[1:] - graph.out_ptr[:-1]
    return {
        "name": graph.name,
        "unit": graph.unit,
        "nodes": graph.n,
        "edges": graph.m,
        "kinds": list(graph.kinds),
        "supported": supported,
        "compute_total": {k: float(np.nansum(graph.compute[:, j])) for j, k in enumerate(graph.kinds)},
        "work": work,
        "memory_total": float(graph.memory.sum()),
        "persistent_bytes_total": float(graph.persistent_bytes.sum()),
        "output_bytes_total": float(graph.output_bytes.sum()),
        "edge_bytes_total": float(graph.edge_bytes.sum()),
        "explicit_edge_costs": int(np.count_nonzero(~np.isnan(graph.edge_cost))),
        "ccr": ccr(graph, kind=w, comm=c) if c is not None else None,
        "ccr_link_model": model,
        "avg_parallelism": work / cp_len if cp_len > 0 else 0.0,
        "critical_path_compute": cp_len,
        "critical_path_compute_nodes": int(cp_nodes.size),
        "critical_path_with_transfers": cpt_len if c is not None else None,
        "critical_path_with_transfers_nodes": int(cpt_nodes.size) if c is not None else None,
        "depth": int(widths.size),
        "max_width": int(widths.max()) if widths.size else 0,
        "sources": int(np.count_nonzero(indeg == 0)),
        "sinks": int(np.count_nonzero(outdeg == 0)),
        "training": graph.is_training,
        "backward_nodes": int(graph.backward.sum()),
        "colocation_groups": int(np.unique(graph.colocation[graph.colocation >= 0]).size),
    }
