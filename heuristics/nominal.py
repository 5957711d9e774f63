"""Placement-free ("nominal") node and edge costs for priorities computed before placement.

List schedulers and the FastT / Celeritas / PARDNN heuristics rank nodes before they know
where anything runs, so they need one time per node and one per edge that does not
depend on a placement (``docs/heuristics.md`` 0):

.. math::

    \\bar w(v) = \\operatorname{agg}_{d \\in D(v)} w(v, d), \\qquad
    \\bar c(u, v) = \\operatorname{agg}_{a \\in D(u),\\, b \\in D(v),\\, a \\ne b} \\operatorname{comm}(u, v, a, b),

where ``D(v)`` are the devices whose kind can run ``v`` (affinity), ``w(v, d)`` is the
compute time of ``v`` on ``d`` and ``comm`` the transfer time of the edge on the directed
link ``a -> b`` (its explicit ``cost`` times the link's ``cost_factor``, else
``beta0 + beta1 * bytes``) plus the message's own cost ``send_overhead[a] + recv_overhead[b]``
(:meth:`~dnnplace.graphs.cluster.Cluster.message_time`, docs/semantics.md 2.1; 0 unless set).
``agg`` is ``max`` (FastT's rank, Yi et al. Sec. 5.1), ``mean``
(HEFT, Topcuoglu et al.; Celeritas and PARDNN on homogeneous clusters, where all three
coincide) or ``min``. ``c_bar = 0`` when no ordered pair of distinct devices can host the
two ends (they must share a device).

Both are O(D^2 (V + E)) numpy work; the top and bottom levels, critical path and CCR
built on them are in :mod:`dnnplace.graphs.levels` and :mod:`dnnplace.graphs.stats`
(pass the returned arrays as ``kind=`` and ``comm=``).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["AGGREGATES", "nominal_costs"]

AGGREGATES = ("max", "mean", "min")


def nominal_costs(graph: OpGraph, cluster: Cluster, how: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Placement-free node times ``w_bar`` (length ``n``) and edge times ``c_bar`` (length ``m``).

    Parameters
    ----------
    graph, cluster
        The instance; every node must be supported by some device of ``cluster``.
    how
        ``"max"``, ``"mean"`` or ``"min"`` over the devices (device pairs) that can host
        the node (both ends of the edge).

    Examples
    --------
    >>> from dnnplace.graphs.cluster import Cluster, Device
    >>> from dnnplace.graphs.graph import OpGraph
    >>> import numpy as np
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=("gpu", "cpu"),
    ...                      compute=np.array([[1.0, 4.0], [2.0, 8.0]]), memory=np.zeros(2),
    ...                      edge_bytes=np.array([10.0]))
    >>> cl = Cluster.from_links([Device("g0", "gpu"), Device("c0", "cpu")],
    ...                         default={"beta0": 1.0, "beta1": 0.5})
    >>> w, c = nominal_costs(g, cl, "max")
    >>> w.tolist(), c.tolist()
    ([4.0, 8.0], [6.0])
    >>> nominal_costs(g, cl, "mean")[0].tolist()
    [2.5, 5.0]
    """
    if how not in AGGREGATES:
        raise InputError(f"nominal cost aggregate {how!r}: expected one of {', '.join(AGGREGATES)}")
    comp = cluster.compute_matrix(graph)
    ok = ~np.isnan(comp)
    bad = np.flatnonzero(~ok.any(axis=1))
    if bad.size:
        raise InputError(f"{graph._node(int(bad[0]))}: no device of cluster {cluster.name!r} can run it")
    if how == "mean":
        w = np.nanmean(comp, axis=1)
    else:
        w = (np.nanmax if how == "max" else np.nanmin)(comp, axis=1)
    return w, _nominal_edges(graph, cluster, ok, how)


def _nominal_edges(graph: OpGraph, cluster: Cluster, ok: np.ndarray, how: str) -> np.ndarray:
    m, D = graph.m, cluster.size
    if m == 0 or D < 2:
        return np.zeros(m)
    src, dst = graph.src, graph.dst
    msg = cluster.has_message_costs
    acc = np.zeros(m) if how == "mean" else np.full(m, -np.inf if how == "max" else np.inf)
    count = np.zeros(m)
    for a in range(D):
        for b in range(D):
            if a == b:
                continue
            t = cluster.transfer_time(np.full(m, a), np.full(m, b), graph.edge_bytes, graph.edge_cost)
            if msg:
                t = t + float(cluster.message_time(np.array([a]), np.array([b]))[0])
            mask = ok[src, a] & ok[dst, b]
            if how == "mean":
                acc += np.where(mask, t, 0.0)
            elif how == "max":
                np.maximum(acc, np.where(mask, t, -np.inf), out=acc)
            else:
                np.minimum(acc, np.where(mask, t, np.inf), out=acc)
            count += mask
    if how == "mean":
        return np.divide(acc, count, out=np.zeros(m), where=count > 0)
    return np.where(count > 0, acc, 0.0)
