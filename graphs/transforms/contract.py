"""Contraction: merge groups of nodes into one node, keeping the graph a DAG.

The one coarsening interface of the framework: a coarse graph plus ``labels`` (coarse
node of every original node). Used for colocation classes (Tarnawski Appendix B,
Sec. 7 greedy), batch coarsening (Pesto Sec. 3.3) and operator fusion (Celeritas 5.1).

Merged node: compute summed per kind (``NaN`` if any member cannot run on the kind, so
a merged node only runs where all its members can), memory / persistent / output bytes
summed, backward iff all members are backward. Parallel edges between two merged nodes
become one edge with summed bytes; its explicit cost is the sum over distinct source
nodes of their largest explicit cost (exact when one source feeds the pair, as in
Tarnawski's per-node transfer cost ``c_u``). A merged edge carries the set of tensors
(source node, ``output``) of its members; merged edges out of one node share an
``output`` exactly when they carry the same set, so the simulator's default (a tensor
sent once to each consuming device, docs/semantics.md 2.1) sends them once, and sends different
sets separately.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["quotient", "acyclic_labels", "colocation_labels", "expand"]


def colocation_labels(g: OpGraph) -> np.ndarray:
    """One label per colocation group, singletons for ungrouped nodes (``0..k-1``)."""
    key = np.where(g.colocation >= 0, g.colocation, g.colocation.max(initial=-1) + 1 + np.arange(g.n))
    return np.unique(key, return_inverse=True)[1].astype(np.int64)


def acyclic_labels(g: OpGraph, labels: np.ndarray) -> np.ndarray:
    """Coarsest labels refining nothing but merging the strongly connected components
    that contracting ``labels`` creates; numbered in a topological order of the result."""
    labels = np.asarray(labels, dtype=np.int64)
    k = int(labels.max()) + 1 if labels.size else 0
    a, b = labels[g.src], labels[g.dst]
    keep = a != b
    adj = coo_matrix((np.ones(int(keep.sum())), (a[keep], b[keep])), shape=(k, k)).tocsr()
    _, comp = connected_components(adj, directed=True, connection="strong")
    merged = comp[labels]
    # number the components topologically via the quotient graph's own order
    q = _quotient_edges(g, merged)
    order = _topo(int(merged.max()) + 1 if merged.size else 0, *q)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[merged]


def _quotient_edges(g: OpGraph, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = labels[g.src], labels[g.dst]
    keep = a != b
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0) if keep.any() else np.empty((0, 2), np.int64)
    return pairs[:, 0], pairs[:, 1]


def _topo(k: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    return OpGraph(ids=range(k), kinds=("x",), compute=np.zeros((k, 1)), memory=np.zeros(k),
                   src=src, dst=dst, name="quotient").topo_order


def quotient(g: OpGraph, labels: np.ndarray, *, name: str | None = None) -> OpGraph:
    """The contracted graph (see the module docstring); raises CycleError if the
    contraction is cyclic (use :func:`acyclic_labels` first)."""
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (g.n,):
        raise InputError(f"labels: expected {g.n} values")
    k = int(labels.max()) + 1 if labels.size else 0
    comp = np.zeros((k, len(g.kinds)))
    for j in range(len(g.kinds)):
        comp[:, j] = np.bincount(labels, weights=g.compute[:, j], minlength=k)  # NaN propagates
    summed = {f: np.bincount(labels, weights=getattr(g, f), minlength=k)
              for f in ("memory", "persistent_bytes", "output_bytes")}
    backward = np.bincount(labels, weights=(~g.backward).astype(float), minlength=k) == 0
    a, b = labels[g.src], labels[g.dst]
    keep = np.flatnonzero(a != b)
    pair = a[keep] * k + b[keep]
    uniq, inv = np.unique(pair, return_inverse=True)
    nbytes = np.bincount(inv, weights=g.edge_bytes[keep], minlength=uniq.size)
    cost_known = ~np.isnan(g.edge_cost[keep])
    # largest explicit cost per (pair, source node), then summed per pair
    sp = pair[cost_known] * g.n + g.src[keep][cost_known]
    su, sinv = np.unique(sp, return_inverse=True)
    smax = np.full(su.size, -np.inf)
    np.maximum.at(smax, sinv, g.edge_cost[keep][cost_known])
    cost = np.full(uniq.size, np.nan)
    if su.size:
        pos = np.searchsorted(uniq, su // g.n)
        cost[np.unique(pos)] = 0.0
        np.add.at(cost, pos, smax)
    coloc = np.full(k, -1, dtype=np.int64)
    return OpGraph(ids=range(k), kinds=g.kinds, compute=comp, src=uniq // k, dst=uniq % k, edge_bytes=nbytes,
                   edge_cost=cost, edge_output=_merged_outputs(g, keep, inv, uniq // k), backward=backward,
                   colocation=coloc, name=name or f"{g.name}-coarse", unit=g.unit, **summed)


def _merged_outputs(g: OpGraph, keep: np.ndarray, inv: np.ndarray, coarse_src: np.ndarray) -> np.ndarray:
    """``output`` of every merged edge: equal for merged edges of one source exactly
    when their members carry the same set of (source node, output) tensors."""
    n_edges = coarse_src.size
    if n_edges == 0:
        return np.zeros(0, dtype=np.int64)
    tensor = np.unique(np.stack([g.src[keep], g.edge_output[keep]], axis=1), axis=0, return_inverse=True)[1]
    tensor = np.asarray(tensor, dtype=np.int64).ravel()
    n_tensors = int(tensor.max()) + 1
    rows = np.unique(inv.astype(np.int64) * n_tensors + tensor)  # (merged edge, tensor), sorted
    edge_of, tensor_of = rows // n_tensors, rows % n_tensors
    count = np.bincount(edge_of, minlength=n_edges)
    key = np.empty(n_edges, dtype=np.int64)
    key[edge_of[count[edge_of] == 1]] = tensor_of[count[edge_of] == 1]  # one tensor: its own id
    sets: dict[tuple, int] = {}
    bounds = np.searchsorted(edge_of, np.arange(n_edges + 1))
    for e in np.flatnonzero(count > 1).tolist():  # several: one id per distinct set
        members = tuple(tensor_of[bounds[e]:bounds[e + 1]].tolist())
        key[e] = n_tensors + sets.setdefault(members, len(sets))
    width = n_tensors + len(sets)
    uk, kinv = np.unique(coarse_src * width + key, return_inverse=True)
    first = np.searchsorted(uk // width, uk // width)  # first key of each source, in sorted order
    return (np.arange(uk.size) - first)[np.asarray(kinv).ravel()].astype(np.int64)


def expand(labels: np.ndarray, coarse_values: np.ndarray) -> np.ndarray:
    """Map per-coarse-node values (e.g. a device per coarse node) back to every node."""
    return np.asarray(coarse_values)[np.asarray(labels, dtype=np.int64)]
