"""Necessary feasibility conditions of an instance, checked before any method runs.

:func:`check_instance` rejects, with a message naming the culprit, instances that no
placement can satisfy under the static memory model (SPEC 2.1): a node no device can
run, a node or colocation group too large for every device able to hold it, or a graph
larger in total than the cluster. Passing the check does not prove feasibility (bin
packing is NP-hard); it only rules out the obvious failures cheaply (``O(n + m)``).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InfeasibleError
from dnnplace.graphs.graph import OpGraph

__all__ = ["check_instance"]


def _fmt_bytes(x: float) -> str:
    return f"{x:,.0f} bytes"


def _kind_capacity(cluster: Cluster) -> dict[str, float]:
    """Largest device memory per kind."""
    cap: dict[str, float] = {}
    for d in cluster.devices:
        cap[d.kind] = max(cap.get(d.kind, 0.0), d.memory)
    return cap


def _total_capacity(cluster: Cluster) -> float:
    """Sum of device memories, counting at most ``meta['device_limit'][kind]`` devices of a
    kind (the largest ones) where the cluster sets a limit."""
    limit = cluster.meta.get("device_limit", {}) or {}
    total = 0.0
    for kind in dict.fromkeys(cluster.kinds):
        mem = np.sort(cluster.memory[cluster.devices_of_kind(kind)])[::-1]
        if kind in limit:
            mem = mem[:int(limit[kind])]
        total += float(mem.sum())
    return total


def check_instance(graph: OpGraph, cluster: Cluster) -> None:
    """Raise :class:`~dnnplace.graphs.errors.InfeasibleError` if no placement of ``graph`` on
    ``cluster`` can satisfy affinity, colocation and static memory; return ``None``
    otherwise.

    Checked, in this order:

    1. every node supports the kind of at least one device;
    2. every node's ``memory`` fits the largest device it can run on;
    3. every colocation group has a device kind all its members support, and its summed
       ``memory`` fits the largest device of such a kind;
    4. the total ``memory`` is at most the cluster's total capacity (devices beyond
       ``cluster.meta["device_limit"]`` not counted).

    Examples
    --------
    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[6e9, 6e9],
    ...             src=[0], dst=[1])
    >>> check_instance(g, Cluster.single_host(2, gpu_memory=8e9, with_cpu=False))
    >>> check_instance(g, Cluster.single_host(1, gpu_memory=8e9, with_cpu=False))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InfeasibleError: graph 'graph': total memory 12,000,000,000 bytes exceeds ... (50.0% over)
    """
    n = graph.n
    ckinds = list(dict.fromkeys(cluster.kinds))
    kcap = _kind_capacity(cluster)
    # (n, K') support of each cluster kind, and the capacity of each kind
    sup = np.column_stack([graph.supports(k) for k in ckinds]) if n else np.zeros((0, len(ckinds)), bool)
    cap = np.array([kcap[k] for k in ckinds])

    # 1. affinity
    none = ~sup.any(axis=1)
    if none.any():
        i = int(np.flatnonzero(none)[0])
        own = [k for j, k in enumerate(graph.kinds) if not np.isnan(graph.compute[i, j])]
        more = f" ({int(none.sum()) - 1} more node(s) likewise)" if none.sum() > 1 else ""
        raise InfeasibleError(f"{graph._node(i)} runs only on kinds {own}, but cluster {cluster.name!r} "
                              f"has kinds {ckinds}: no device can run it{more}")

    # 2. node memory vs the largest device it can run on
    node_cap = np.where(sup, cap[None, :], -np.inf).max(axis=1) if n else np.zeros(0)
    over = graph.memory > node_cap
    if over.any():
        i = int(np.flatnonzero(over)[0])
        own = [k for j, k in enumerate(ckinds) if sup[i, j]]
        raise InfeasibleError(f"{graph._node(i)} needs {_fmt_bytes(graph.memory[i])}, more than the largest "
                              f"device it can run on ({own}: {_fmt_bytes(node_cap[i])})")

    # 3. colocation groups: a common kind, and the summed memory on one device
    grouped = graph.colocation >= 0
    if grouped.any():
        codes = graph.colocation[grouped]
        g = int(codes.max()) + 1
        size = np.bincount(codes, minlength=g)
        mem = np.bincount(codes, weights=graph.memory[grouped], minlength=g)
        # members per group supporting each kind; a kind is common when all support it
        common = np.column_stack([np.bincount(codes, weights=sup[grouped, j], minlength=g) == size
                                  for j in range(len(ckinds))])
        present = size > 0

        def label(c: int) -> str:
            lab = graph.colocation_labels[c] if c < len(graph.colocation_labels) else c
            members = np.flatnonzero(graph.colocation == c)
            eg = ", ".join(repr(graph.ids[i]) for i in members[:3]) + (", ..." if members.size > 3 else "")
            return f"colocation group {lab!r} ({int(size[c])} nodes: {eg})"

        no_kind = present & ~common.any(axis=1)
        if no_kind.any():
            c = int(np.flatnonzero(no_kind)[0])
            members = np.flatnonzero(graph.colocation == c)
            kinds_of = {repr(graph.ids[i]): [k for j, k in enumerate(ckinds) if sup[i, j]] for i in members[:4]}
            raise InfeasibleError(f"{label(c)} has no device kind that all its members support "
                                  f"(cluster kinds {ckinds}; members support {kinds_of})")
        group_cap = np.where(common, cap[None, :], -np.inf).max(axis=1)
        too_big = present & (mem > group_cap)
        if too_big.any():
            c = int(np.flatnonzero(too_big)[0])
            raise InfeasibleError(f"{label(c)} needs {_fmt_bytes(mem[c])} on one device, more than the largest "
                                  f"device able to hold it ({_fmt_bytes(group_cap[c])})")

    # 4. total memory
    total, capacity = float(graph.memory.sum()), _total_capacity(cluster)
    if total > capacity:
        excess = total - capacity
        raise InfeasibleError(f"graph {graph.name!r}: total memory {_fmt_bytes(total)} exceeds cluster "
                              f"{cluster.name!r} total capacity {_fmt_bytes(capacity)} by {_fmt_bytes(excess)} "
                              f"({100.0 * excess / capacity if capacity > 0 else float('inf'):.1f}% over)")
