"""PipeDream's partitioner as a baseline (Narayanan et al. 2019; Tarnawski et al. Table 1).

PipeDream's optimizer splits a *chain* of layers by dynamic programming. To apply it to a
branching DAG, every branching region is contracted into one stage unit first:
biconnected components of the undirected forward graph are computed, and in each
component the tails of its edges (every node with an edge inside the component) are
merged, so that a fork-join region collapses onto a node followed by its join point.
Edges leaving zero-cost *broadcast* nodes (zero compute and either a source, e.g. an
attention mask feeding every layer, or a node with one input and a fan-out above 2,
e.g. GNMT's encoder output read by every decoder layer) are ignored there, as PipeDream ignores such inputs (the
authors' driver lists these nodes by hand for BERT-24 and GNMT; this is the rule that
selects them). The contracted graph is then
linearised and split by the DP over its prefixes (``dnnplace.heuristics.maxload_dp`` with
``linearized=True``), i.e. PipeDream's DP without replication, and backward nodes follow
their forward partners through colocation. The split is scored on the original graph by
the independent evaluator; it is contiguous per part.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.maxload_dp import maxload_dp

__all__ = ["pipedream_split", "branch_labels"]


def branch_labels(g: OpGraph) -> np.ndarray:
    """Stage-unit label per node: colocation classes merged with the tails of every
    biconnected component of the forward graph (see the module docstring).

    >>> # diamond 0->1, 0->2, 1->3, 2->3: the fork {0, 1, 2} becomes one unit
    >>> g = OpGraph(ids=range(4), kinds=("acc",), compute=np.ones((4, 1)), memory=np.zeros(4),
    ...             src=[0, 0, 1, 2], dst=[1, 2, 3, 3])
    >>> branch_labels(g).tolist()
    [0, 0, 0, 1]
    """
    n = g.n
    comp = np.nan_to_num(g.compute, nan=0.0).sum(axis=1)
    indeg = np.bincount(g.dst, minlength=n)
    outdeg = np.bincount(g.src, minlength=n)
    ignored = (comp == 0) & ((indeg == 0) | ((indeg == 1) & (outdeg > 2)))
    fw = ~g.backward[g.src] & ~g.backward[g.dst] & ~ignored[g.src]
    und = nx.Graph()
    und.add_nodes_from(range(n))
    tail = {}
    for e in np.flatnonzero(fw).tolist():
        u, v = int(g.src[e]), int(g.dst[e])
        und.add_edge(u, v)
        tail[(u, v)] = u
        tail[(v, u)] = u
    pa, pb = [], []
    for comp_edges in nx.biconnected_component_edges(und):
        tails = sorted({tail[e] for e in comp_edges})
        pa += tails[:-1]
        pb += tails[1:]
    # colocation classes too (forward and backward partners stay together)
    grouped = np.flatnonzero(g.colocation >= 0)
    if grouped.size:
        first = {}
        for v in grouped.tolist():
            c = int(g.colocation[v])
            if c in first:
                pa.append(first[c])
                pb.append(v)
            else:
                first[c] = v
    adj = coo_matrix((np.ones(len(pa)), (np.array(pa, dtype=np.int64), np.array(pb, dtype=np.int64))),
                     shape=(n, n))
    _, lab = connected_components(adj, directed=False)
    return np.unique(lab, return_inverse=True)[1].astype(np.int64)


def pipedream_split(inst: Instance, *, replicas: int = 1,
                    sync_per_byte: float | None = None) -> tuple[Placement, float]:
    """PipeDream-style split (see the module docstring) and its max-load; with
    ``replicas > 1`` PipeDream's replicated stages (its DP over the chain with the
    replication dimension, Tarnawski App. C.2), the replica groups on the placement."""
    g = inst.graph
    lab = branch_labels(g)
    coarse = Instance(g.with_(colocation=lab, colocation_labels=tuple(range(int(lab.max()) + 1))),
                      inst.cluster, inst.source)
    res = maxload_dp(coarse, linearized=True, replicas=replicas, sync_per_byte=sync_per_byte, order="dfs")
    if res.placement is None:
        raise RuntimeError("PipeDream partitioner found no feasible split")
    return Placement(g, inst.require_cluster(), res.placement.device, res.placement.replication), res.value
