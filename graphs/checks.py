"""Necessary feasibility conditions of an instance, checked before any method runs.

:func:`check_instance` rejects, with a message naming the culprit, instances that no
placement can satisfy under the static memory model (docs/semantics.md 2.1): a node no device can
run, a node or colocation group too large for every device able to hold it, a graph
larger in total than the cluster, or nodes that fit one by one but not together on the
devices of the kinds they can run on. Passing the check does not prove feasibility (bin
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


def _capacity_per_kind(cluster: Cluster, kinds: list[str]) -> np.ndarray:
    """Summed device memory per kind, counting at most ``meta['device_limit'][kind]``
    devices of a kind (the largest ones) where the cluster sets a limit."""
    limit = cluster.meta.get("device_limit", {}) or {}
    out = np.zeros(len(kinds))
    for j, kind in enumerate(kinds):
        mem = np.sort(cluster.memory[cluster.devices_of_kind(kind)])[::-1]
        if kind in limit:
            mem = mem[:int(limit[kind])]
        out[j] = float(mem.sum())
    return out


def _total_capacity(cluster: Cluster) -> float:
    """Sum of device memories, counting at most ``meta['device_limit'][kind]`` devices of a
    kind (the largest ones) where the cluster sets a limit."""
    return float(_capacity_per_kind(cluster, list(dict.fromkeys(cluster.kinds))).sum())


# more cluster kinds than this: only single kinds and all kinds are checked in step 5
_MAX_SUBSET_KINDS = 12


def _subset_demand(items_mask: np.ndarray, items_mem: np.ndarray, k: int) -> np.ndarray:
    """``demand[S]`` for every bitmask ``S`` of ``k`` kinds: the memory of the items whose
    supported kinds all lie in ``S`` (a sum over subsets, the zeta transform)."""
    demand = np.bincount(items_mask, weights=items_mem, minlength=1 << k).astype(np.float64)
    for j in range(k):
        bit = 1 << j
        idx = np.flatnonzero(np.arange(1 << k) & bit)
        demand[idx] += demand[idx ^ bit]
    return demand


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
       ``cluster.meta["device_limit"]`` not counted);
    5. for every set ``S`` of device kinds, the nodes (and colocation groups, counted
       whole) that can run only on kinds in ``S`` fit the summed capacity of the
       devices of ``S`` -- e.g. GPU-only nodes must fit the GPUs together, however much
       memory the CPU has. Each check is necessary (a relaxation that lets an item's
       memory spread over devices), so a feasible instance is never rejected.

    Examples
    --------
    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[6e9, 6e9],
    ...             src=[0], dst=[1])
    >>> check_instance(g, Cluster.single_host(2, gpu_memory=8e9, with_cpu=False))
    >>> check_instance(g, Cluster.single_host(1, gpu_memory=8e9, with_cpu=False))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InfeasibleError: graph 'graph': total memory 12,000,000,000 bytes exceeds ... (50.0% over)

    The host CPU's unbounded memory does not help nodes that cannot run on it:

    >>> check_instance(g, Cluster.single_host(1, gpu_memory=8e9))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InfeasibleError: graph 'graph': the nodes that can run only on kind(s) ['gpu'] ...
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

    # 5. per set of kinds: what can run only on those kinds must fit their devices together
    _check_kind_sets(graph, cluster, ckinds, sup)


def _check_kind_sets(graph: OpGraph, cluster: Cluster, ckinds: list[str], sup: np.ndarray) -> None:
    """Step 5 of :func:`check_instance`: for every set ``S`` of device kinds, the memory of
    the *items* (ungrouped nodes and whole colocation groups, which go to one device of a
    kind all members support) that can run only on kinds in ``S`` is at most the summed
    capacity of the (allowed) devices of ``S``. Necessary, since every item must sit
    on a device of a kind it supports; with ``S`` = all kinds it is step 4."""
    k = len(ckinds)
    if graph.n == 0 or k < 2:
        return
    bits = (sup.astype(np.int64) << np.arange(k, dtype=np.int64)).sum(axis=1)  # supported kinds per node
    grouped = graph.colocation >= 0
    masks, mems = [bits[~grouped]], [graph.memory[~grouped]]
    if grouped.any():
        codes = graph.colocation[grouped]
        g = int(codes.max()) + 1
        common = np.full(g, (1 << k) - 1, dtype=np.int64)
        np.bitwise_and.at(common, codes, bits[grouped])
        present = np.bincount(codes, minlength=g) > 0
        masks.append(common[present])
        mems.append(np.bincount(codes, weights=graph.memory[grouped], minlength=g)[present])
    mask, mem = np.concatenate(masks), np.concatenate(mems)
    cap_kind = _capacity_per_kind(cluster, ckinds)
    if k <= _MAX_SUBSET_KINDS:
        subsets = np.arange(1, (1 << k) - 1)  # all kinds at once is step 4
        demand = _subset_demand(mask, mem, k)[subsets]
    else:  # too many kinds to enumerate: single kinds only
        subsets = 1 << np.arange(k)
        demand = np.array([mem[mask == s].sum() for s in subsets])
    member = (subsets[:, None] >> np.arange(k)[None, :]) & 1
    capacity = np.where(member.astype(bool), cap_kind[None, :], 0.0).sum(axis=1)  # no inf * 0
    over = demand > capacity * (1 + 1e-12)
    if not over.any():
        return
    # report the smallest violated set of kinds (fewest kinds, then largest excess)
    size = member.sum(axis=1)
    cand = np.flatnonzero(over)
    j = int(cand[np.lexsort((-(demand[cand] - capacity[cand]), size[cand]))[0]])
    kinds = [ckinds[i] for i in range(k) if member[j, i]]
    inside = (mask & ~int(subsets[j])) == 0
    count = int(np.count_nonzero(inside & (mem > 0))) or int(np.count_nonzero(inside))
    devices = sum(int(min(cluster.devices_of_kind(x).size,
                          (cluster.meta.get("device_limit", {}) or {}).get(x, 10 ** 9))) for x in kinds)
    excess = demand[j] - capacity[j]
    raise InfeasibleError(
        f"graph {graph.name!r}: the nodes that can run only on kind(s) {kinds} ({count} node(s) or colocation "
        f"group(s)) need {_fmt_bytes(demand[j])} in total, more than the {devices} device(s) of "
        f"{'that kind' if len(kinds) == 1 else 'those kinds'} in cluster {cluster.name!r} hold "
        f"({_fmt_bytes(capacity[j])}) by {_fmt_bytes(excess)} "
        f"({100.0 * excess / capacity[j] if capacity[j] > 0 else float('inf'):.1f}% over)")
