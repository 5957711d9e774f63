"""The operator table of a traced ATen graph: :class:`Captured` and :func:`merge`.

:func:`merge` turns the joint fx graph of :func:`dnnplace.pytorch.capture.fx.trace` into
merged operator nodes: views and ``getitem`` join their producers, each consumer reads each
producer's distinct tensors over one edge, an optimizer apply node is added per parameter
(colocated with it and its gradient producer), and roles, layers, the backward flag, edge
outputs and the batch-scaled flag are derived (the fields are described in
:mod:`dnnplace.pytorch.capture.fx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.pytorch.capture.ops import OPTIMIZER_STATE, is_view, op_name, root_value, storage_bytes, value_bytes

__all__ = ["Captured", "merge"]


@dataclass
class Captured:
    """A traced ATen graph and the merged operator table derived from it.

    ``gm`` is the traced ``torch.fx.GraphModule`` (placeholders: parameters, buffers, then
    inputs, in :attr:`arg_kinds` order); ``rep`` maps every fx node name to the merged
    node index it belongs to (-1 for dropped nodes); the remaining fields are per merged
    node (``n``) or per merged edge (``m``) numpy arrays / lists.
    """

    gm: Any
    arg_kinds: list[str]                 # per placeholder: "param", "buffer", "input", "grad_out"
    arg_names: list[str]                 # parameter / buffer names, input positions
    ids: list[str]
    op_types: list[str]
    layers: list[str]
    roles: list[str]
    backward: np.ndarray
    output_bytes: np.ndarray
    persistent_bytes: np.ndarray
    colocation: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_bytes: np.ndarray
    batch_scaled: np.ndarray
    edge_output: np.ndarray   # per merged edge: which output of its source it carries
    rep: dict[str, int]
    apply_of: dict[int, int] = field(default_factory=dict)   # param node -> apply node
    loss: int = -1
    ports: dict[str, list[int]] = field(default_factory=dict)  # tiling: see tiling.py
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)


def merge(gm: Any, kinds: list[str], names: list[str], outs: Any, *, training: bool, optimizer: str,
          block: bool = False, wrt: Sequence[bool] = (), cotangents: Sequence[bool] | None = None) -> Captured:
    """Merge views into producers, add apply nodes, derive roles, flags and bytes."""
    nodes = [nd for nd in gm.graph.nodes if nd.op in ("placeholder", "call_function")]
    ph = [nd for nd in nodes if nd.op == "placeholder"]
    ph_kind = {nd.name: kinds[j] for j, nd in enumerate(ph)}
    t = _node_table(nodes, ph_kind, {nd.name: names[j] for j, nd in enumerate(ph)})
    rep = t.rep
    src, dst, eb, roots = _edges(nodes, rep, np.array(t.out_b, dtype=np.float64), t.pers)
    param_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "param"]
    input_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "input"]
    gout_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "grad_out"]

    def rep_of(x):
        return rep.get(x.name, -1) if hasattr(x, "name") else -1

    loss, ports = -1, {}
    apply_of: dict[int, int] = {}
    coloc = np.full(len(t.ids), -1, dtype=np.int64)
    if training:
        flat_outs, grads = outs
        grads = list(grads)
        n_params = kinds.count("param")
        pgrads, igrads = grads[:n_params], grads[n_params:]
        if not block or not any(cotangents or ()):
            loss = rep_of(flat_outs[0])
        ph_of_node = {rep[nd.name]: nd.name for nd in ph}
        apply_of, group_root = _add_apply_nodes(t, param_nodes, pgrads, ph_of_node, optimizer, src, dst, eb, roots)
        grouped = np.bincount(group_root, minlength=len(t.ids)) > 1
        codes = np.unique(group_root[grouped[group_root]])
        code_of = {int(r): j for j, r in enumerate(codes)}
        coloc = np.array([code_of.get(int(r), -1) for r in group_root], dtype=np.int64)
        if block:
            it_g, it_gx = iter(gout_nodes), iter(igrads)
            gx = [next(it_gx) if w else None for w in wrt]
            ports = {"x": input_nodes, "g": [next(it_g) if c else -1 for c in cotangents],
                     "y": [rep_of(o) for o in flat_outs], "gx": [rep_of(g) if g is not None else -1 for g in gx]}
    else:
        if block:
            ports = {"x": input_nodes, "g": [], "y": [rep_of(o) for o in outs], "gx": []}
    n = len(t.ids)
    src_a = np.array(src, dtype=np.int64)
    dst_a = np.array(dst, dtype=np.int64)
    edge_out = _edge_outputs(src, roots)
    roles_a = np.array(t.roles)
    batch_scaled = ~((roles_a[src_a] == "param") | (roles_a[dst_a] == "apply")) if len(src) else np.zeros(0, bool)
    # backward: not an ancestor of the loss, or for a block of its outputs (training)
    sinks = [loss] if loss >= 0 else [y for y in ports.get("y", []) if y >= 0]
    backward = _not_ancestors(n, src, dst, sinks) if training and sinks else np.zeros(n, dtype=bool)
    _backward_layers(t.layers, backward, src, dst)
    return Captured(gm=gm, arg_kinds=kinds, arg_names=names, ids=t.ids, op_types=t.op_types, layers=t.layers,
                    roles=t.roles, backward=backward, output_bytes=np.array(t.out_b, dtype=np.float64),
                    persistent_bytes=np.array(t.pers, dtype=np.float64), colocation=coloc, src=src_a, dst=dst_a,
                    edge_bytes=np.array(eb, dtype=np.float64), batch_scaled=np.asarray(batch_scaled, dtype=bool),
                    edge_output=edge_out, rep=rep, apply_of=apply_of, loss=loss, ports=ports)


@dataclass
class _Table:
    """The merged nodes being built: per node its id, op type, layer, role, output and
    persistent bytes; ``rep`` maps every fx node name to its merged node (-1: none)."""

    rep: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    op_types: list[str] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    out_b: list[float] = field(default_factory=list)
    pers: list[float] = field(default_factory=list)

    def add(self, ident: str, op_type: str, layer: str, role: str, out_b: float, pers: float) -> int:
        self.ids.append(ident)
        self.op_types.append(op_type)
        self.layers.append(layer)
        self.roles.append(role)
        self.out_b.append(out_b)
        self.pers.append(pers)
        return len(self.ids) - 1


def _node_table(nodes: list, ph_kind: dict[str, str], ph_name: dict[str, str]) -> _Table:
    """One merged node per placeholder and per non-view call (views and ``getitem`` join
    their producer)."""
    t = _Table()
    rep = t.rep
    for nd in nodes:
        if nd.op == "call_function" and is_view(nd):
            base = next(iter(nd.all_input_nodes), None)
            rep[nd.name] = rep.get(base.name, -1) if base is not None else -1
            continue
        rep[nd.name] = len(t.ids)
        if nd.op == "placeholder":
            kind = ph_kind[nd.name]
            ph_name[nd.name] = _strip(ph_name[nd.name])
            b = storage_bytes(nd.meta.get("val"))
            t.add(f"{kind}:{ph_name[nd.name]}", kind,
                  ph_name[nd.name].rsplit(".", 1)[0] if kind in ("param", "buffer") else "",
                  "param" if kind == "param" else "compute",
                  0 if kind in ("param", "buffer") else b, b if kind in ("param", "buffer") else 0)
        else:
            layer = nd.meta.get("dnnplace_layer")
            t.add(nd.name, op_name(nd), "" if layer is None else (_strip(layer) or "loss"), "compute",
                  value_bytes(nd.meta.get("val")), 0)
    return t


def _edges(nodes: list, rep: dict[str, int], out_b: np.ndarray,
           pers: list[float]) -> tuple[list[int], list[int], list[float], list[frozenset]]:
    """Edges: the distinct tensors each consumer reads, grouped by producer; per edge its
    bytes (capped at the producer's output) and the root tensors it carries."""
    ekey: dict[tuple[int, int], float] = {}
    eroots: dict[tuple[int, int], set[str]] = {}   # the root tensors an edge carries (its output)
    for nd in nodes:
        c = rep[nd.name]
        if nd.op != "call_function" or is_view(nd) or c < 0:
            continue
        seen = set()
        for u in nd.all_input_nodes:
            r = rep.get(u.name, -1)
            if r < 0 or r == c or u.name in seen:
                continue
            seen.add(u.name)
            ekey[(r, c)] = ekey.get((r, c), 0.0) + storage_bytes(u.meta.get("val"))
            eroots.setdefault((r, c), set()).add(root_value(u, rep).name)
    src = [k[0] for k in ekey]
    dst = [k[1] for k in ekey]
    eb = [min(v, max(out_b[k[0]], pers[k[0]])) for k, v in ekey.items()]
    return src, dst, eb, [frozenset(eroots[k]) for k in ekey]


def _add_apply_nodes(t: _Table, param_nodes: list[int], pgrads: list, ph_of_node: dict[int, str], optimizer: str,
                     src: list[int], dst: list[int], eb: list[float],
                     roots: list[frozenset]) -> tuple[dict[int, int], np.ndarray]:
    """An optimizer apply node per parameter, fed by the parameter and its gradient (edges
    appended to ``src``/``dst``/``eb``/``roots`` in place); the gradient's producer becomes
    a ``grad`` node in the parameter's layer. Returns the apply node of each parameter
    and, per node, the root of its colocation group (parameter, gradient producer and
    apply node; groups sharing a gradient producer merge)."""
    rep = t.rep
    state = OPTIMIZER_STATE[optimizer]
    parent = list(range(len(t.ids)))
    apply_of: dict[int, int] = {}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for p, g in zip(param_nodes, pgrads):
        pb = t.pers[p]
        a = t.add(f"apply:{t.ids[p].split(':', 1)[1]}", f"apply_{optimizer}", t.layers[p], "apply", 0, pb * state)
        parent.append(a)
        apply_of[p] = a
        src.append(p)
        dst.append(a)
        eb.append(pb)
        roots.append(frozenset([ph_of_node[p]]))
        parent[find(a)] = find(p)
        gi = rep.get(g.name, -1) if g is not None and hasattr(g, "name") else -1
        if gi >= 0:
            if t.roles[gi] == "compute":
                t.roles[gi] = "grad"
                t.layers[gi] = t.layers[p]
            src.append(gi)
            dst.append(a)
            eb.append(pb)
            roots.append(frozenset([root_value(g, rep).name]))
            parent[find(gi)] = find(p)
    return apply_of, np.array([find(i) for i in range(len(t.ids))])


def _edge_outputs(src: list[int], keys: Any) -> np.ndarray:
    """Edges that carry the same root tensors of a node carry the same output (one transfer
    per destination device, docs/semantics.md 2.1); outputs numbered per source in edge order."""
    out_ids: dict[tuple[int, Any], int] = {}
    per_src: dict[int, int] = {}
    edge_out = np.zeros(len(src), dtype=np.int64)
    for j, (u, key) in enumerate(zip(src, keys)):
        if (u, key) not in out_ids:
            out_ids[(u, key)] = per_src.get(u, 0)
            per_src[u] = out_ids[(u, key)] + 1
        edge_out[j] = out_ids[(u, key)]
    return edge_out


def _not_ancestors(n: int, src: list[int], dst: list[int], sinks: list[int]) -> np.ndarray:
    """Nodes that are not ``sinks`` nor an ancestor of one."""
    anc = np.zeros(n, dtype=bool)
    anc[sinks] = True
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(src, dst):
        preds[d].append(s)
    stack = list(sinks)
    while stack:
        v = stack.pop()
        for u in preds[v]:
            if not anc[u]:
                anc[u] = True
                stack.append(u)
    return ~anc


def _strip(path: str) -> str:
    """Module path inside the loss wrapper: ``model.layer1.0`` -> ``layer1.0``."""
    return path[6:] if path.startswith("model.") else ("" if path == "model" else path)


def _backward_layers(layers: list[str], backward: np.ndarray, src: list[int], dst: list[int]) -> None:
    """Backward nodes without a layer take the layer of the first forward node they read,
    else of their first backward predecessor (edges are in topological order of dst)."""
    fwd_pred: dict[int, int] = {}
    bwd_pred: dict[int, int] = {}
    for s, d in zip(src, dst):
        if backward[d]:
            (bwd_pred if backward[s] else fwd_pred).setdefault(d, s)
    for v in range(len(layers)):  # nodes are indexed in trace order, a topological order
        if backward[v] and not layers[v]:
            p = fwd_pred.get(v, bwd_pred.get(v, -1))
            if p >= 0:
                layers[v] = layers[p]
