"""Layers of an operator graph, and the layer graph contracted from it (Tarnawski et al.,
Table 3: the DP on operator graphs vs on the layer graphs contracted from them)."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance

__all__ = ["layer_labels", "contract_layers"]


def _between(g: OpGraph, members: np.ndarray, part: np.ndarray) -> np.ndarray:
    """Nodes outside ``members`` on a path between two members, within the subgraph
    induced by ``part`` (empty iff ``members`` is contiguous, Definition 3.1)."""
    keep = part[g.src] & part[g.dst]
    n = g.n
    fwd = csr_matrix((np.ones(int(keep.sum())), (g.src[keep], g.dst[keep])), shape=(n + 1, n + 1)).tolil()
    # a virtual root n linked to every member: reachable sets in one BFS
    fwd[n, members] = 1
    fwd = fwd.tocsr()
    down = breadth_first_order(fwd, n, directed=True, return_predecessors=False)
    bwd = csr_matrix((np.ones(int(keep.sum())), (g.dst[keep], g.src[keep])), shape=(n + 1, n + 1)).tolil()
    bwd[n, members] = 1
    up = breadth_first_order(bwd.tocsr(), n, directed=True, return_predecessors=False)
    between = np.intersect1d(down[down < n], up[up < n])
    return np.setdiff1d(between, members)


def layer_labels(g: OpGraph) -> tuple[np.ndarray, str]:
    """Group operators into layers.

    Where the file gives ``layerId``: one group per id, except that a layer with
    operators of *another layer* on a path between two of its operators (per part for
    training graphs) is left ungrouped, since contracting it would swallow the layers
    between its pieces (BERT-12's ``layerId`` 13 holds both the embedding and the
    pooler/classifier); nodes without an id stay alone, as in the authors' driver (the
    DP's SCC contraction absorbs those lying inside a layer). Without ``layerId``: chains, i.e. an edge
    ``u -> v`` with ``u`` having one successor and ``v`` one predecessor is merged
    (Conv -> BatchNorm -> ReLU collapses into one layer). Returns labels and the rule.
    """
    if g.layers is not None and any(x is not None for x in g.layers):
        lay = np.array([-1 if x is None else hash(str(x)) for x in g.layers], dtype=np.int64)
        labels = np.arange(g.n, dtype=np.int64)
        dropped = []
        for key in np.unique(lay[lay != -1]):
            members = np.flatnonzero(lay == key)
            parts = [~g.backward, g.backward] if g.is_training else [np.ones(g.n, bool)]
            inner = [_between(g, np.intersect1d(members, np.flatnonzero(pt)), pt) for pt in parts
                     if np.intersect1d(members, np.flatnonzero(pt)).size]
            if not any((lay[b] != -1).any() for b in inner):
                labels[members] = members[0]
            else:
                dropped.append(g.layers[members[0]])
        rule = "layerId" + (f" (non-contiguous layer(s) {sorted(map(str, dropped))} left ungrouped)"
                            if dropped else "")
        return np.unique(labels, return_inverse=True)[1].astype(np.int64), rule
    outdeg = np.bincount(g.src, minlength=g.n)
    indeg = np.bincount(g.dst, minlength=g.n)
    chain = (outdeg[g.src] == 1) & (indeg[g.dst] == 1) & (g.backward[g.src] == g.backward[g.dst])
    adj = coo_matrix((np.ones(int(chain.sum())), (g.src[chain], g.dst[chain])), shape=(g.n, g.n))
    return connected_components(adj, directed=False)[1].astype(np.int64), "chains"


def contract_layers(inst: Instance) -> tuple[Instance, str]:
    """The layer graph of an operator graph: layers merged into colocation classes
    (so the DP contracts them, forward and backward parts separately, Appendix B)."""
    g = inst.graph
    lab, rule = layer_labels(g)
    # merge layers with the existing colocation classes
    base = np.where(g.colocation >= 0, g.colocation, -1)
    n = g.n
    rows, cols = [np.arange(n)], [lab + n]
    has = base >= 0
    rows.append(np.flatnonzero(has))
    cols.append(base[has] + n + int(lab.max()) + 1)
    r, c = np.concatenate(rows), np.concatenate(cols)
    size = n + int(lab.max()) + 1 + (int(base.max()) + 1 if has.any() else 0)
    comp = connected_components(coo_matrix((np.ones(r.size), (r, c)), shape=(size, size)), directed=False)[1][:n]
    comp = np.unique(comp, return_inverse=True)[1]
    g2 = g.with_(colocation=comp, colocation_labels=tuple(range(int(comp.max()) + 1)))
    return Instance(g2, inst.cluster, inst.source), rule
