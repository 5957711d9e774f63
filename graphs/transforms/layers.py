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


def layer_labels(g: OpGraph, *, calls: bool = False) -> tuple[np.ndarray, str]:
    """Group operators into layers.

    Where the file gives ``layerId``: one group per id, except that a layer with
    operators of *another layer* on a path between two of its operators (per part for
    training graphs) is left ungrouped, since contracting it would swallow the layers
    between its pieces (BERT-12's ``layerId`` 13 holds both the embedding and the
    pooler/classifier); nodes without an id stay alone, as in the authors' driver (the
    DP's SCC contraction absorbs those lying inside a layer). With ``calls``, such a layer
    is split into its calls instead (:func:`_split_calls`: an RNN cell called at every time
    step, one group per call and part). Without ``layerId``: chains, i.e. an edge
    ``u -> v`` with ``u`` having one successor and ``v`` one predecessor is merged
    (Conv -> BatchNorm -> ReLU collapses into one layer). Returns labels and the rule.
    """
    if g.layers is not None and any(x is not None for x in g.layers):
        lay = np.array([-1 if x is None else hash(str(x)) for x in g.layers], dtype=np.int64)
        labels = np.arange(g.n, dtype=np.int64)
        parts = [~g.backward, g.backward] if g.is_training else [np.ones(g.n, bool)]
        dropped, names = [], []
        for key in np.unique(lay[lay != -1]):
            members = np.flatnonzero(lay == key)
            inner = [_between(g, np.intersect1d(members, np.flatnonzero(pt)), pt) for pt in parts
                     if np.intersect1d(members, np.flatnonzero(pt)).size]
            if not any((lay[b] != -1).any() for b in inner):
                labels[members] = members[0]
            else:
                dropped.append(key)
                names.append(str(g.layers[members[0]]))
        names.sort()
        if dropped and calls:
            pieces = _split_calls(g, lay, dropped, parts, labels)
            rule = f"layerId (non-contiguous layer(s) {names} split into {pieces} groups by call)"
        else:
            rule = "layerId" + (f" (non-contiguous layer(s) {names} left ungrouped)" if dropped else "")
        return np.unique(labels, return_inverse=True)[1].astype(np.int64), rule
    outdeg = np.bincount(g.src, minlength=g.n)
    indeg = np.bincount(g.dst, minlength=g.n)
    chain = (outdeg[g.src] == 1) & (indeg[g.dst] == 1) & (g.backward[g.src] == g.backward[g.dst])
    adj = coo_matrix((np.ones(int(chain.sum())), (g.src[chain], g.dst[chain])), shape=(g.n, g.n))
    return connected_components(adj, directed=False)[1].astype(np.int64), "chains"


def _split_calls(g: OpGraph, lay: np.ndarray, keys: list, parts: list[np.ndarray], labels: np.ndarray) -> int:
    """Split each non-contiguous layer of ``keys`` into contiguous groups, its calls, in
    ``labels`` (a group is labelled by its first member); returns the number of groups.

    Within a part, two operators of layer ``L`` go together iff the same operators of
    *other* layers are reachable from them (inside the part): their *foreign descendants*
    ``F(u)``. Such a group is contiguous: were ``w`` outside it on a path ``u -> w -> v``
    between members, then a ``w`` of another layer is in ``F(u) = F(v)``, so ``v -> w``
    as well, a cycle; and an operator ``x`` of ``L`` there has ``F(u) ⊇ F(x) ⊇ F(v) = F(u)``,
    so ``x`` is in the group. An RNN cell's operators of one time step reach the same later
    steps of the other layers, those of the next step fewer: one group per call (a layer's
    parameters reach what its first call reaches and join that call's group).

    Then each backward group joins the forward group of its layer it reads most values
    from (forward and backward of a call on one device, as a layer's), where the backward
    groups joining one forward group are contiguous together; otherwise they stay apart.
    """
    from dnnplace.graphs.reach import descendant_bits_within
    words = (g.n + 63) // 64

    def bits_of(mask: np.ndarray) -> np.ndarray:
        idx = np.flatnonzero(mask)
        row = np.zeros(words, dtype=np.uint64)
        np.bitwise_or.at(row, idx >> 6, np.left_shift(np.uint64(1), (idx & 63).astype(np.uint64)))
        return row

    pieces: dict[tuple[int, int], list[np.ndarray]] = {}
    for p, pt in enumerate(parts):
        desc = descendant_bits_within(g, pt)
        labelled = bits_of(pt & (lay != -1))
        for key in keys:
            members = np.flatnonzero((lay == key) & pt)
            if not members.size:
                continue
            sig = desc[members] & (labelled & ~bits_of(lay == key))
            inv = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
            groups = [members[inv == k] for k in range(int(inv.max()) + 1)]
            for grp in groups:
                labels[grp] = grp[0]
            pieces[key, p] = groups
    count = sum(len(v) for v in pieces.values())
    if len(parts) < 2:
        return count
    for key in keys:
        fwd, bwd = pieces.get((key, 0), []), pieces.get((key, 1), [])
        if not fwd or not bwd:
            continue
        which, whose = np.full(g.n, -1, dtype=np.int64), np.full(g.n, -1, dtype=np.int64)
        for i, grp in enumerate(fwd):
            which[grp] = i
        for j, grp in enumerate(bwd):
            whose[grp] = j
        read = (which[g.src] >= 0) & (whose[g.dst] >= 0)   # a forward group's value read by a backward group
        reads = np.zeros((len(bwd), len(fwd)), dtype=np.int64)
        np.add.at(reads, (whose[g.dst[read]], which[g.src[read]]), 1)
        joining: dict[int, list[np.ndarray]] = {}
        for j in np.flatnonzero(reads.any(axis=1)):
            joining.setdefault(int(reads[j].argmax()), []).append(bwd[j])
        for i, grps in joining.items():
            together = np.concatenate(grps)
            if not (lay[_between(g, together, parts[1])] != -1).any():
                labels[together] = labels[fwd[i][0]]
                count -= len(grps)
    return count


def contract_layers(inst: Instance, *, calls: bool = False) -> tuple[Instance, str]:
    """The layer graph of an operator graph: layers merged into colocation classes
    (so the DP contracts them, forward and backward parts separately, Appendix B);
    ``calls``: non-contiguous layers split into their calls (:func:`layer_labels`)."""
    g = inst.graph
    lab, rule = layer_labels(g, calls=calls)
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
