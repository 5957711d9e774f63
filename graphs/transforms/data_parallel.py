"""The data-parallel training graph: FastT's start deployment and its DP baseline
(Yi et al. Sec. 5.2, "if the model fits on one device"; ``docs/heuristics.md`` 1.5).

:func:`data_parallel` replicates a training graph ``n`` times, TF-slim style (in-graph
replication, one shared copy of the weights):

- nodes whose role (``graph.roles``) is ``compute`` or ``grad`` get ``n`` copies
  ``id@r{k}`` at the per-replica batch ``B/n`` (``scaling="strong"``, the global batch is
  fixed) or ``B`` (``"weak"``), with costs from a
  :class:`~dnnplace.graphs.batch_model.BatchModel`;
- ``param`` and ``apply`` nodes keep one shared copy; a shared node ``u`` that feeds
  replicated nodes is read once per replica, as TensorFlow sends a tensor once per device:
  ``u -> u@r{k}/read`` (zero time, an ``Identity``, carrying the largest bytes ``u`` sends:
  its output tensor for the dynamic memory model, no static memory, as the weights are
  counted once, on ``u``) and ``u@r{k}/read -> v@r{k}`` for every edge ``(u, v)``, with the
  full bytes;
- an edge from a replicated node ``g`` into a shared node ``a`` (a gradient into its
  update) becomes ``g@r{k} -> a/addn{j}`` for every replica, then ``a/addn{j} -> a``, all
  with the full bytes: the gradient aggregation. The AddN node (compute: the batch
  model's kernel floor per replica input) is colocated with ``a`` and the parameters
  ``a`` updates;
- edges between replicated nodes stay inside their replica.

With ``n = 1`` the graph comes back unchanged. :func:`dp_baseline_devices` is FastT's DP
baseline: replica ``k`` on GPU ``k``, shared nodes and AddN on GPU 0 (run under the
``fifo`` policy, TensorFlow's executor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.batch_model import BatchModel
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["DataParallel", "data_parallel", "dp_baseline_devices", "accelerators"]


@dataclass(frozen=True, eq=False)
class DataParallel:
    """The replicated graph; ``replica[i]`` is node ``i``'s replica (``-1``: shared)."""

    graph: OpGraph
    replica: np.ndarray
    replicas: int


def accelerators(cluster: Cluster) -> np.ndarray:
    """The devices replicas go to: the GPUs, else every device."""
    gpus = cluster.devices_of_kind("gpu")
    return gpus if gpus.size else np.arange(cluster.size)


def data_parallel(graph: OpGraph, n: int, *, batch_model: BatchModel | None = None,
                  scaling: str = "strong") -> DataParallel:
    """``graph`` replicated ``n`` times (module docstring).

    Examples
    --------
    ``w (param) -> f -> g (grad) -> u (apply)`` on two replicas:

    >>> g = OpGraph.from_ids("wfgu", [("w", "f"), ("f", "g"), ("g", "u"), ("w", "u")], kinds=["gpu"],
    ...                      compute=[[0.0], [4.0], [2.0], [1.0]], memory=[8, 1, 1, 0],
    ...                      edge_bytes=[8, 4, 8, 8], roles=["param", "compute", "grad", "apply"])
    >>> dp = data_parallel(g, 2, batch_model=BatchModel(2, t0=0.0))
    >>> dp.graph.ids
    ('w', 'f@r0', 'g@r0', 'u', 'f@r1', 'g@r1', 'u/addn0', 'w@r0/read', 'w@r1/read')
    >>> dp.graph.compute.ravel().tolist()
    [0.0, 2.0, 1.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0]
    """
    if n < 1:
        raise InputError(f"data parallelism needs at least one replica, got {n}")
    if scaling not in ("strong", "weak"):
        raise InputError(f"scaling {scaling!r}: expected 'strong' or 'weak'")
    bm = batch_model or BatchModel(1, t0=0.0)
    if n == 1:
        return DataParallel(graph, np.zeros(graph.n, dtype=np.int64), 1)
    b = bm.batch / n if scaling == "strong" else bm.batch
    gb = bm.at(graph, b)
    roles = np.asarray(graph.roles if graph.roles is not None else ("compute",) * graph.n, dtype=object)
    shared = np.isin(roles, ("param", "apply"))
    rep = np.flatnonzero(~shared)
    # node layout: shared and replica-0 nodes in original order, then replicas 1..n-1, then AddN
    new_index = np.full((n, graph.n), -1, dtype=np.int64)
    new_index[0] = np.arange(graph.n)
    for k in range(1, n):
        new_index[k, rep] = graph.n + (k - 1) * rep.size + np.arange(rep.size)
    for k in range(1, n):
        new_index[k, shared] = np.flatnonzero(shared)
    base = graph.n + (n - 1) * rep.size
    s_sh, d_sh = shared[graph.src], shared[graph.dst]
    src, dst, eid = [], [], []
    inner = np.flatnonzero(~s_sh & ~d_sh)
    fan = np.flatnonzero(s_sh & ~d_sh)
    agg = np.flatnonzero(~s_sh & d_sh)
    # one read node per (shared producer, replica); its in-edge stands for the producer's largest fan edge
    readers, which = np.unique(graph.src[fan], return_inverse=True)
    big = np.zeros(readers.size, dtype=np.int64)
    by_size = np.lexsort((-graph.edge_bytes[fan], which))
    first = np.ones(fan.size, dtype=bool)
    first[1:] = which[by_size][1:] != which[by_size][:-1]
    big[which[by_size][first]] = fan[by_size][first]
    read0 = base + agg.size
    for k in range(n):
        src.append(new_index[k, graph.src[inner]])
        dst.append(new_index[k, graph.dst[inner]])
        eid.append(inner)
        src.append(read0 + k * readers.size + which)
        dst.append(new_index[k, graph.dst[fan]])
        eid.append(fan)
        src.append(readers)
        dst.append(read0 + k * readers.size + np.arange(readers.size))
        eid.append(big)
    e = np.flatnonzero(s_sh & d_sh)
    src.append(graph.src[e])
    dst.append(graph.dst[e])
    eid.append(e)
    addn = base + np.arange(agg.size)
    for k in range(n):
        src.append(new_index[k, graph.src[agg]])
        dst.append(addn)
        eid.append(agg)
    src.append(addn)
    dst.append(graph.dst[agg])
    eid.append(agg)
    src_a, dst_a, eid_a = np.concatenate(src), np.concatenate(dst), np.concatenate(eid)
    # edges from a shared producer or into the aggregation keep the full (unscaled) bytes
    full = s_sh[eid_a] | d_sh[eid_a] | (dst_a >= base) | (src_a >= base)
    nbytes = np.where(full, graph.edge_bytes[eid_a], gb.edge_bytes[eid_a])
    total = read0 + n * readers.size
    order = np.concatenate([np.arange(graph.n)] + [rep] * (n - 1) + [graph.dst[agg]] + [readers] * n)
    scaled_node = np.concatenate([~shared, np.ones((n - 1) * rep.size, dtype=bool),
                                  np.zeros(total - base, dtype=bool)])
    read_bytes = np.tile(graph.edge_bytes[big], n)

    def pick(full_arr, scaled_arr):
        return np.where(scaled_node.reshape((-1,) + (1,) * (full_arr.ndim - 1)), scaled_arr[order], full_arr[order])

    t0 = bm.floor(graph)
    compute = pick(graph.compute, gb.compute)
    compute[base:read0] = np.where(np.isnan(graph.compute[graph.dst[agg]]), np.nan, t0 * n)
    compute[read0:] = np.where(np.isnan(compute[read0:]), np.nan, 0.0)
    memory = pick(graph.memory, gb.memory)
    out_b = pick(graph.output_bytes, gb.output_bytes)
    memory[base:read0] = out_b[base:read0] = graph.edge_bytes[agg]
    memory[read0:], out_b[read0:] = 0.0, read_bytes
    pers = graph.persistent_bytes[order].copy()
    pers[base:] = 0.0
    replica = np.concatenate([np.where(shared, -1, 0)] + [np.full(rep.size, k) for k in range(1, n)]
                             + [np.full(agg.size, -1)] + [np.full(readers.size, k) for k in range(n)]).astype(np.int64)
    ids = list(graph.ids)
    for i in rep.tolist():
        ids[i] = f"{graph.ids[i]}@r0"
    for k in range(1, n):
        ids += [f"{graph.ids[i]}@r{k}" for i in rep.tolist()]
    ids += [f"{graph.ids[graph.dst[e]]}/addn{j}" for j, e in enumerate(agg.tolist())]
    ids += [f"{graph.ids[u]}@r{k}/read" for k in range(n) for u in readers.tolist()]
    # colocation: each apply node with its AddN nodes and its parameters; replicated groups per replica
    labels = list(graph.colocation_labels)
    coloc = graph.colocation[order].copy()
    coloc[read0:] = -1
    for k in range(n):
        sel = np.flatnonzero((replica == k) & (coloc >= 0))
        if k and sel.size:
            remap = {}
            for i in sel.tolist():
                c = int(coloc[i])
                if c not in remap:
                    remap[c] = len(labels)
                    labels.append(f"{labels[c]}@r{k}")
                coloc[i] = remap[c]
    apply_nodes = np.flatnonzero(roles == "apply")
    for a in apply_nodes.tolist():
        members = [a] + [int(base + j) for j in np.flatnonzero(graph.dst[agg] == a)]
        members += [int(p) for p in graph.predecessors(a).tolist() if roles[p] == "param"]
        if len(members) > 1:
            label = len(labels)
            labels.append(f"dp:{graph.ids[a]}")
            coloc[members] = label
    def opt(values, addn_value, read_value):
        if values is None:
            return None
        return (tuple(values[i] for i in order[:base].tolist()) + tuple([addn_value] * agg.size)
                + tuple([read_value] * (total - read0)))

    op_types = opt(graph.op_types, "AddN", "Identity")
    g = graph.with_(
        ids=tuple(ids), compute=compute, memory=memory, src=src_a, dst=dst_a, edge_bytes=nbytes,
        edge_cost=graph.edge_cost[eid_a], edge_batch_scaled=graph.edge_batch_scaled[eid_a] & ~full,
        edge_output=graph.edge_output[eid_a],
        persistent_bytes=pers, output_bytes=out_b, colocation=coloc, colocation_labels=tuple(labels),
        backward=np.concatenate([graph.backward[order[:base]], np.ones(agg.size, dtype=bool),
                                 np.zeros(total - read0, dtype=bool)]),
        names=opt(graph.names, None, None), op_types=op_types, layers=opt(graph.layers, None, None),
        roles=tuple(roles[order[:base]].tolist()) + ("grad",) * agg.size + ("compute",) * (total - read0),
        name=f"{graph.name}-dp{n}", meta={**graph.meta, "data_parallel": {"replicas": n, "scaling": scaling,
                                                                         "replica_batch": b},
                                          "transforms": _step(graph, {
                                              "kind": "data-parallel", "replicas": n, "scaling": scaling,
                                              "batch": bm.batch, "t0": bm.t0, "half_batch": bm.half_batch,
                                              "profiled": bool(bm.profiles)})})
    return DataParallel(g, replica, n)


def _step(graph: OpGraph, step: dict) -> tuple:
    """``graph``'s transform steps with ``step`` appended (``meta["transforms"]``, what
    :func:`dnnplace.graphs.transforms.replay` rebuilds a transformed graph from)."""
    return tuple(graph.meta.get("transforms", ())) + (step,)


def dp_baseline_devices(dp: DataParallel, cluster: Cluster) -> np.ndarray:
    """FastT's DP baseline: replica ``k`` on accelerator ``k``, shared nodes on the first."""
    acc = accelerators(cluster)
    if dp.replicas > acc.size:
        raise InputError(f"{dp.replicas} replicas but cluster {cluster.name!r} has {acc.size} accelerators")
    return np.where(dp.replica >= 0, acc[np.maximum(dp.replica, 0)], acc[0]).astype(np.int64)
