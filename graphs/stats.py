"""Summary statistics of an operator graph used by the placement papers: the
communication-to-computation ratio, the average parallelism and :func:`graph_stats`.

They add up the node and edge costs of :mod:`dnnplace.graphs.levels` (``kind`` and
``comm`` as there) along its longest paths, in near-linear time. All times are in
``graph.unit``.

Link model of the summary statistics
------------------------------------
:func:`ccr` and :func:`graph_stats` need a transfer time for *every* edge, also for
generated graphs whose edges carry bytes only (``comm=None`` of
:func:`~dnnplace.graphs.levels.edge_weights` would count those as free and give a CCR
of 0). They use :func:`transfer_costs`: with ``comm`` given, that; else with a
``cluster``, its mean link (as ``comm=cluster`` of
:func:`~dnnplace.graphs.levels.edge_weights`); else each edge's
explicit ``cost`` where it has one and, for the others, the *reference link*
``REFERENCE_LINK`` (0.01 ms + bytes / 25 GB/s, the NVLink figures of
:meth:`dnnplace.graphs.cluster.Cluster.single_host`, converted to ``graph.unit``). The
statistics say which model they used (``ccr_link_model``).

References
----------
.. [C] H. Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs", Eq. 1 (CCR).
.. [D] F. Qararyah et al., "A computational-graph partitioning method for training
   memory-constrained DNNs", Parallel Computing 2021, Table 5 (degree of parallelism, CCR).
.. [S] O. Sinnen, *Task Scheduling for Parallel Systems*, Wiley 2007, Sec. 4.4 (CCR as
   mean communication over mean computation).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, critical_path, edge_weights, level_widths, node_weights

__all__ = [
    "average_parallelism",
    "ccr",
    "graph_stats",
    "REFERENCE_LINK",
    "transfer_costs",
]

# The reference link of the summary statistics when no cluster is given: NVLink
# (start-up seconds, bytes per second), the figures of Cluster.single_host.
REFERENCE_LINK = (0.01e-3, 25e9)
_SECONDS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


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

    ``w_i`` as in :func:`~dnnplace.graphs.levels.node_weights`; ``c_ij`` from
    :func:`transfer_costs` (the given ``comm``, else the ``cluster``'s mean link, else
    explicit costs plus the reference link for byte-only edges), i.e. the time an edge
    would take if its ends sat on two different devices. Celeritas' Eq. 1 is the ratio
    of the *sums*, this value times ``|E| / |V|``. 0 for a graph without edges or nodes,
    ``inf`` when it has communication but no computation, ``None`` when the link model
    is unknown.

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
    span = float(blevel(graph, kind=w, comm=0.0).max())
    return total / span


def graph_stats(graph: OpGraph, *, kind: str | np.ndarray | None = None, comm: Any = None,
                cluster: Cluster | None = None) -> dict:
    """A JSON-ready summary of a graph.

    Keys: ``name``, ``unit``, ``nodes``, ``edges``, ``kinds``, ``supported`` (nodes per
    kind), ``compute_total`` (per kind, over the nodes that support it),
    ``work`` (sum of node costs ``w``, :func:`~dnnplace.graphs.levels.node_weights`),
    ``memory_total``, ``persistent_bytes_total``, ``output_bytes_total``, ``edge_bytes_total``,
    ``explicit_edge_costs`` (edges with one), then

    ``ccr``
        :func:`ccr`: mean edge transfer time over mean node time (``None`` if unknown);
    ``ccr_sums``
        Celeritas' Eq. 1, the ratio of the *sums* ``sum_E c / sum_V w`` (``docs/heuristics.md``
        0): ``ccr * |E| / |V|``; ``None`` if unknown;
    ``ccr_link_model``
        the link model of ``ccr``, ``ccr_sums`` and ``critical_path_with_transfers``
        (:func:`transfer_costs`: ``comm``, else ``cluster`` (``"cluster 'x' (mean
        link)"``: ``beta0 + beta1 * bytes``, or ``cost_factor * cost`` for explicit
        costs, averaged over ordered pairs of distinct devices), else explicit costs
        plus the reference link (``"reference NVLink ..."``));
    ``avg_parallelism``
        the degree of parallelism DoP (PARDNN Table 5), ``work / critical_path_compute``;
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
    >>> s["work"], s["critical_path_compute"], s["critical_path_with_transfers"], s["ccr"], s["ccr_sums"]
    (5.0, 5.0, 9.0, 1.6, 0.8)
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
        "ccr_sums": (float(c.sum()) / work if work > 0 else (math.inf if c.sum() > 0 else 0.0))
        if c is not None else None,
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
