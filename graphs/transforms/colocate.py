"""Forward-backward colocation: TensorFlow's ``colocate_gradients_with_ops``.

TensorFlow builds the gradient of a forward op ``X`` under ``colocate_with(X)`` when
``tf.gradients`` / ``Optimizer.minimize`` is called with ``colocate_gradients_with_ops=True``
(what the TF-1 models of the FastT, Celeritas and PARDNN papers' era were trained with:
tensor2tensor, the NMT and slim trainers set it), so every op X's gradient function
creates joins X's colocation group and the placer puts it on X's device. A placer that
sees such a graph can never separate a backward op from the forward op it differentiates,
nor from the activations that op stashed for it.

Our graphs (captured ATen joint graphs, generators) do not record which forward op a
backward op differentiates; :func:`gradient_partners` infers it from the dataflow and the
layers (``graph.layers``, the module path the capture gives every node, backward nodes
included), in this order, for every backward node ``b`` of a non-``apply`` role:

1. the latest (in topological order) forward ``compute`` node of ``b``'s own layer that
   ``b`` reads: a gradient reads what its forward op saved (``threshold_backward`` reads
   the ReLU's output, a batch norm's backward its saved mean and inverse deviation, a
   dropout's backward its mask);
2. else, when ``b``'s layer has exactly one forward ``compute`` node, that node (a
   convolution's or a linear layer's backward reads the op's *input* and weight, not its
   output);
3. else the partner of ``b``'s first backward predecessor of the same layer (the ops one
   gradient function creates form a chain);
4. else none: ``b`` stays free (counted by :func:`colocate_gradients`).

Parameters, gradient producers and optimizer updates keep the groups they have (the
capture groups a parameter with its gradient producer and its update); a backward node
and its partner join one group, and groups that share a node merge.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["gradient_partners", "colocate_gradients"]


def gradient_partners(graph: OpGraph) -> np.ndarray:
    """For every node the forward node it differentiates (module docstring), ``-1`` for
    forward nodes, ``apply`` nodes and backward nodes no rule pairs.

    >>> g = OpGraph.from_ids(["x", "relu", "relu_bwd", "lin", "lin_bwd"],
    ...                      [("x", "relu"), ("relu", "lin"), ("lin", "lin_bwd"), ("x", "relu_bwd"),
    ...                       ("relu", "relu_bwd"), ("lin_bwd", "relu_bwd")],
    ...                      kinds=["gpu"], compute=[[1.0]] * 5, memory=[0] * 5,
    ...                      layers=["in", "act", "act", "fc", "fc"], backward=[0, 0, 1, 0, 1])
    >>> gradient_partners(g).tolist()  # relu_bwd reads relu (rule 1); fc has one forward node (rule 2)
    [-1, -1, 1, -1, 3]
    """
    if graph.layers is None or not graph.backward.any():
        raise InputError(f"graph {graph.name!r}: forward-backward colocation needs node layers and backward flags")
    n = graph.n
    layers = np.asarray([("" if x is None else str(x)) for x in graph.layers], dtype=object)
    roles = np.asarray(graph.roles if graph.roles is not None else ("compute",) * n, dtype=object)
    bwd = graph.backward.astype(bool)
    fwd_compute = ~bwd & (roles == "compute")
    pos = graph.topo_position
    single: dict[str, int] = {}
    count: dict[str, int] = {}
    for v in np.flatnonzero(fwd_compute).tolist():
        count[layers[v]] = count.get(layers[v], 0) + 1
        single[layers[v]] = v
    partner = np.full(n, -1, dtype=np.int64)
    in_ptr, in_nbr = graph.in_ptr, graph.in_nbr
    for b in np.argsort(pos, kind="stable").tolist():
        if not bwd[b] or roles[b] == "apply":
            continue
        lay = layers[b]
        preds = in_nbr[in_ptr[b]:in_ptr[b + 1]]
        same = preds[layers[preds] == lay] if preds.size else preds
        read = same[fwd_compute[same]]
        if read.size:
            partner[b] = int(read[np.argmax(pos[read])])
        elif count.get(lay) == 1:
            partner[b] = single[lay]
        else:
            back = same[bwd[same] & (partner[same] >= 0)]
            if back.size:
                partner[b] = int(partner[back[np.argmin(pos[back])]])
    return partner


def colocate_gradients(graph: OpGraph) -> OpGraph:
    """``graph`` with every backward node in one colocation group with the forward node it
    differentiates (:func:`gradient_partners`), the existing groups merged in.
    ``meta["colocate_gradients"]`` records the nodes paired and left free.

    >>> g = OpGraph.from_ids(["w", "fc", "fc_bwd", "fc/apply"], [("w", "fc"), ("fc", "fc_bwd"),
    ...                      ("fc_bwd", "fc/apply"), ("w", "fc/apply")], kinds=["gpu"], compute=[[1.0]] * 4,
    ...                      memory=[0] * 4, layers=["fc"] * 4, backward=[0, 0, 1, 1],
    ...                      roles=["param", "compute", "grad", "apply"], colocation=[0, -1, 0, 0],
    ...                      colocation_labels=["fc.w"])
    >>> h = colocate_gradients(g)
    >>> h.colocation.tolist(), h.meta["colocate_gradients"]
    ([0, 0, 0, 0], {'paired': 1, 'free': 0, 'groups': 1})
    """
    partner = gradient_partners(graph)
    n = graph.n
    parent = np.arange(n)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    co = graph.colocation
    first: dict[int, int] = {}
    for v, c in enumerate(co.tolist()):
        if c >= 0:
            if c in first:
                union(first[c], v)
            else:
                first[c] = v
    paired = np.flatnonzero(partner >= 0)
    for b in paired.tolist():
        union(b, int(partner[b]))
    root = np.array([find(v) for v in range(n)], dtype=np.int64)
    size = np.bincount(root, minlength=n)
    grouped = size[root] > 1
    codes, new = np.unique(root[grouped], return_inverse=True)
    coloc = np.full(n, -1, dtype=np.int64)
    coloc[grouped] = new
    old_labels = graph.colocation_labels
    labels = []
    for r in codes.tolist():  # a merged group keeps the label of its first old group, else its root's id
        c = int(co[r]) if co[r] >= 0 else -1
        labels.append(str(old_labels[c]) if c >= 0 else f"grad:{graph.ids[r]}")
    bwd = graph.backward.astype(bool)
    roles = np.asarray(graph.roles if graph.roles is not None else ("compute",) * n, dtype=object)
    free = int(np.count_nonzero(bwd & (roles != "apply") & (partner < 0)))
    info = {"paired": int(paired.size), "free": free, "groups": int(codes.size)}
    return graph.with_(colocation=coloc, colocation_labels=tuple(labels),
                       meta={**graph.meta, "colocate_gradients": info})
