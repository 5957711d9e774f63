"""Operator splitting: FastT's ``SplitOperation`` (Yi et al. Alg. 2, lines 16-30) with a
rule table by op type (``docs/heuristics.md`` 1.4).

Splitting op ``v`` (compute ``t`` per kind) along a dimension into ``n`` parts replaces it by

- ``n`` sub-ops ``v/part{k}``: compute ``t/n + kappa`` on every kind ``v`` supports
  (``kappa``: a per-kernel overhead, default the :class:`~dnnplace.graphs.batch_model.BatchModel`
  floor of 5 µs), memory ``mem/n``; they inherit backward flag, layer, op type and role;
- for every input edge ``(p, v)`` of ``b`` bytes that the dimension *splits*: an aux split
  node ``v/split{j}`` with ``p -> split`` (``b``) and ``split -> part_k`` (``b/n``); an input
  the dimension *replicates* (the weights of a batch split, the activations of a channel
  split) is wired ``p -> part_k`` with ``b`` bytes (the paper's split node for it would
  copy, at no cost: ``docs/heuristics.md`` A7);
- when ``v`` has successors, one aux combine node ``v/concat`` (``A6``: one shared node,
  not one per successor): ``part_k -> concat`` with ``out/n`` bytes for a concat combine
  or ``out`` for a sum (gradient accumulation), ``out`` the largest out-edge of ``v``;
  then ``concat -> s`` with the original bytes of every out-edge ``(v, s)``.

Aux nodes run on the kinds ``v`` runs on, in ``aux_cost_per_byte * bytes`` (default 0:
a split is a view); the split node holds no memory, the combine node ``out``.

Which inputs count as weights: edges from a node whose role is ``param`` (``graph.roles``).

Rule table (:data:`SPLIT_RULES`, overridable with ``rules={op_type: [dim, ...]}``;
``"*"`` applies to every op type; the PyTorch ATen names of captured graphs,
``convolution``, ``mm``, ``addmm``, ``linear``, ``bmm``, are listed beside TensorFlow's).
An op whose role is ``grad`` (it produces a weight gradient, e.g. the ``mm`` of a linear
layer's backward) splits its batch as ``batch-sum``: the parts are partial sums.
``convolution_backward`` (input and weight gradient in one ATen op) has no rule:

its two outputs would combine differently.

=========================================  ==============  ==============  ========
op type                                    dimension       act. / weight   combine
=========================================  ==============  ==============  ========
Conv2D, MatMul, Linear, Conv (forward)     ``batch``       split / repl.   concat
Conv2D, MatMul, Linear, Conv (forward)     ``channel``     repl. / split   concat
bmm (attention)                            ``batch``       split / split   concat
Conv2DBackpropInput, MatMulGradInput       ``batch``       split / repl.   concat
Conv2DBackpropFilter, MatMulGradWeight     ``batch-sum``   split / split   sum
=========================================  ==============  ==============  ========

Never split: colocated ops, ops that only one device kind of the cluster runs is the
caller's test (OS-DPOS), ops with no rule, virtual terminals, and the parts and aux nodes
of an earlier split.

How a split graph relates to the original (:func:`check_split`): ``graph.meta["origin"]``
names, for every node, the original node it stands for (a part or aux node: the op it
was split from); contracting the split graph by ``origin`` gives back exactly the
original edge set, every unsplit node keeps its fields, and the parts of a split op sum
to ``t + n * kappa``. A method that answers on a split graph reports it
(``MethodOutput.graph``); the evaluator and simulator then score the split graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["SplitDim", "DIMENSIONS", "SPLIT_RULES", "SplitRules", "split_operation", "check_split", "origin_of"]


@dataclass(frozen=True)
class SplitDim:
    """How one dimension splits an op: its activation and weight inputs are each
    ``"split"`` or ``"replicate"``; the parts combine by ``"concat"`` or ``"sum"``."""

    name: str
    activation: str
    weight: str
    combine: str


DIMENSIONS: dict[str, SplitDim] = {
    "batch": SplitDim("batch", "split", "replicate", "concat"),
    "channel": SplitDim("channel", "replicate", "split", "concat"),
    "batch-sum": SplitDim("batch-sum", "split", "split", "sum"),
}

_FWD = ("batch", "channel")
SPLIT_RULES: dict[str, tuple[str, ...]] = {
    **{t: _FWD for t in ("Conv2D", "MatMul", "Linear", "Conv", "convolution", "mm", "addmm", "linear")},
    "bmm": ("batch",),
    **{t: ("batch",) for t in ("Conv2DBackpropInput", "MatMulGradInput")},
    **{t: ("batch-sum",) for t in ("Conv2DBackpropFilter", "MatMulGradWeight")},
}


class SplitRules:
    """The dimensions each op type may be split along; checks every named dimension.

    >>> SplitRules({"Conv2D": ["batch"]}).dims("Conv2D")
    ('batch',)
    >>> SplitRules({"Conv2D": ["height"]})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: split rule for op type 'Conv2D': unknown dimension 'height'; known: ...
    """

    def __init__(self, rules: Mapping[str, Iterable[str]] | None = None):
        table = dict(SPLIT_RULES if rules is None else rules)
        out: dict[str, tuple[str, ...]] = {}
        for op_type, dims in table.items():
            dims = (dims,) if isinstance(dims, str) else tuple(dims)
            for d in dims:
                if d not in DIMENSIONS:
                    raise InputError(f"split rule for op type {op_type!r}: unknown dimension {d!r}; "
                                     f"known: {', '.join(sorted(DIMENSIONS))}")
            out[str(op_type)] = dims
        self.table = out

    def dims(self, op_type: str | None, role: str | None = None) -> tuple[str, ...]:
        """The dimensions of ``op_type`` (``()``: never split); a ``grad`` op's batch split
        is ``batch-sum``."""
        dims = self.table[op_type] if op_type is not None and op_type in self.table else self.table.get("*", ())
        if role == "grad":
            dims = tuple(dict.fromkeys("batch-sum" if d == "batch" else d for d in dims))
        return dims

    def of(self, graph: OpGraph, v: int) -> tuple[str, ...]:
        """The dimensions node ``v`` of ``graph`` may be split along."""
        return self.dims(graph.op_types[v] if graph.op_types is not None else None,
                         graph.roles[v] if graph.roles is not None else None)


def origin_of(graph: OpGraph) -> tuple:
    """The original node id each node stands for (itself on an unsplit graph)."""
    return tuple(graph.meta.get("origin", graph.ids))


def split_operation(graph: OpGraph, v: int, dim: str, n: int, *, kappa: float = 0.0,
                    aux_cost_per_byte: float = 0.0) -> OpGraph:
    """``graph`` with node index ``v`` split along ``dim`` into ``n`` parts (module docstring).

    Examples
    --------
    ``a -> b -> c`` with ``b`` (4 ms) split in two along the batch:

    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("b", "c")], kinds=["gpu"], compute=[[1.0], [4.0], [1.0]],
    ...                      memory=[0, 2, 0], edge_bytes=[8.0, 6.0])
    >>> s = split_operation(g, 1, "batch", 2, kappa=0.1)
    >>> s.ids
    ('a', 'c', 'b/part0', 'b/part1', 'b/split0', 'b/concat')
    >>> s.compute.ravel().tolist()
    [1.0, 1.0, 2.1, 2.1, 0.0, 0.0]
    >>> origin_of(s)
    ('a', 'c', 'b', 'b', 'b', 'b')
    """
    if dim not in DIMENSIONS:
        raise InputError(f"unknown split dimension {dim!r}; known: {', '.join(sorted(DIMENSIONS))}")
    if n < 2:
        raise InputError(f"split of {graph._node(v)} into {n} parts: need at least 2")
    spec = DIMENSIONS[dim]
    roles = graph.roles
    origin = origin_of(graph)
    in_rows = range(graph.in_ptr[v], graph.in_ptr[v + 1])
    out_rows = range(graph.out_ptr[v], graph.out_ptr[v + 1])
    in_e = graph.in_eid[list(in_rows)].tolist() if len(in_rows) else []
    out_e = graph.out_eid[list(out_rows)].tolist() if len(out_rows) else []
    keep = np.ones(graph.n, dtype=bool)
    keep[v] = False
    old_to_new = np.full(graph.n, -1, dtype=np.int64)
    old_to_new[keep] = np.arange(graph.n - 1)
    base = graph.n - 1
    parts = list(range(base, base + n))
    is_weight = [roles is not None and roles[int(graph.src[e])] == "param" for e in in_e]
    split_in = [e for e, w in zip(in_e, is_weight) if (spec.weight if w else spec.activation) == "split"]
    repl_in = [e for e, w in zip(in_e, is_weight) if (spec.weight if w else spec.activation) != "split"]
    splits = list(range(base + n, base + n + len(split_in)))
    con = base + n + len(split_in) if out_e else None
    k_new = n + len(split_in) + (1 if out_e else 0)

    # edges: every edge not touching v, then the new ones
    e_keep = (graph.src != v) & (graph.dst != v)
    src = [old_to_new[graph.src[e_keep]]]
    dst = [old_to_new[graph.dst[e_keep]]]
    nbytes = [graph.edge_bytes[e_keep]]
    cost = [graph.edge_cost[e_keep]]
    scaled = [graph.edge_batch_scaled[e_keep]]
    add_s, add_d, add_b, add_c, add_f = [], [], [], [], []

    def edge(a, b, by, c, f):
        add_s.append(a)
        add_d.append(b)
        add_b.append(by)
        add_c.append(c)
        add_f.append(f)

    eb, ec, ef = graph.edge_bytes, graph.edge_cost, graph.edge_batch_scaled
    for e, sp in zip(split_in, splits):
        p = int(old_to_new[graph.src[e]])
        edge(p, sp, eb[e], ec[e], ef[e])
        for part in parts:
            edge(sp, part, eb[e] / n, ec[e] / n, ef[e])
    for e in repl_in:
        p = int(old_to_new[graph.src[e]])
        for part in parts:
            edge(p, part, eb[e], ec[e], ef[e])
    out = float(max((eb[e] for e in out_e), default=0.0))
    out_cost = float(np.nanmax([ec[e] for e in out_e])) if out_e and not np.all(np.isnan(ec[out_e])) else np.nan
    if con is not None:
        share = 1.0 / n if spec.combine == "concat" else 1.0
        for part in parts:
            edge(part, con, out * share, out_cost * share, True)
        for e in out_e:
            edge(con, int(old_to_new[graph.dst[e]]), eb[e], ec[e], ef[e])
    src.append(np.array(add_s, dtype=np.int64))
    dst.append(np.array(add_d, dtype=np.int64))
    nbytes.append(np.array(add_b, dtype=np.float64))
    cost.append(np.array(add_c, dtype=np.float64))
    scaled.append(np.array(add_f, dtype=bool))

    # nodes
    t = graph.compute[v]
    aux_in = [eb[e] for e in split_in]
    comp_new = np.vstack([np.tile(t / n + kappa, (n, 1))]
                         + [np.where(np.isnan(t), np.nan, b * aux_cost_per_byte)[None, :] for b in aux_in]
                         + ([np.where(np.isnan(t), np.nan, out * aux_cost_per_byte)[None, :]] if con is not None
                            else []))
    vid = graph.ids[v]
    new_ids = ([f"{vid}/part{k}" for k in range(n)] + [f"{vid}/split{j}" for j in range(len(split_in))]
               + ([f"{vid}/concat"] if con is not None else []))
    mem_new = [graph.memory[v] / n] * n + [0.0] * len(split_in) + ([out] if con is not None else [])
    pers_new = [graph.persistent_bytes[v] / n] * n + [0.0] * (k_new - n)
    outb_new = [graph.output_bytes[v] / n] * n + [0.0] * len(split_in) + ([graph.output_bytes[v]] if con is not None
                                                                           else [])

    def cat(arr, extra):
        return np.concatenate([arr[keep], np.asarray(extra, dtype=arr.dtype)])

    def opt(values, extra):
        return None if values is None else tuple(x for x, k in zip(values, keep) if k) + tuple(extra)

    kinds_new = ["part"] * n + ["split"] * len(split_in) + (["concat"] if con is not None else [])
    meta = dict(graph.meta)
    meta["origin"] = opt(origin, [origin[v]] * k_new)
    meta["split_role"] = opt(graph.meta.get("split_role", ("op",) * graph.n), kinds_new)
    meta["split_log"] = tuple(graph.meta.get("split_log", ())) + ((str(origin[v]), dim, n, float(kappa)),)
    # the step that rebuilds this graph from the one before (dnnplace.graphs.transforms.replay)
    meta["transforms"] = tuple(graph.meta.get("transforms", ())) + (
        {"kind": "split", "op": graph.ids[v], "dim": dim, "parts": int(n), "kappa": float(kappa),
         "aux_cost_per_byte": float(aux_cost_per_byte)},)
    return graph.with_(
        ids=opt(graph.ids, new_ids), compute=np.vstack([graph.compute[keep], comp_new]),
        memory=cat(graph.memory, mem_new), src=np.concatenate(src), dst=np.concatenate(dst),
        edge_bytes=np.concatenate(nbytes), edge_cost=np.concatenate(cost), edge_batch_scaled=np.concatenate(scaled),
        persistent_bytes=cat(graph.persistent_bytes, pers_new), output_bytes=cat(graph.output_bytes, outb_new),
        colocation=cat(graph.colocation, [-1] * k_new), backward=cat(graph.backward, [graph.backward[v]] * k_new),
        names=opt(graph.names, new_ids if graph.names is not None else []),
        op_types=opt(graph.op_types, [graph.op_types[v] if graph.op_types else None] * n
                     + ["Split"] * len(split_in) + (["Concat" if spec.combine == "concat" else "AddN"]
                                                    if con is not None else [])),
        layers=opt(graph.layers, [graph.layers[v] if graph.layers else None] * k_new),
        roles=opt(graph.roles, [graph.roles[v] if graph.roles else "compute"] * n + ["compute"] * (k_new - n)),
        meta=meta)


def check_split(original: OpGraph, split: OpGraph) -> list[str]:
    """Violations of the split-graph contract against ``original`` (module docstring);
    empty when ``split`` is a faithful split of ``original``."""
    problems: list[str] = []
    origin = origin_of(split)
    index = original.index
    try:
        lab = np.array([index[str(o)] for o in origin], dtype=np.int64)
    except KeyError as exc:
        return [f"origin {exc.args[0]!r} is not a node of the original graph"]
    if np.unique(lab).size != original.n:
        problems.append(f"{original.n - np.unique(lab).size} original node(s) have no node in the split graph")
    a, b = lab[split.src], lab[split.dst]
    cross = a != b
    got = set(zip(a[cross].tolist(), b[cross].tolist()))
    want = set(zip(original.src.tolist(), original.dst.tolist()))
    if got != want:
        problems.append(f"contracted edges differ: {len(got - want)} extra, {len(want - got)} missing")
    roles = split.meta.get("split_role", ("op",) * split.n)
    plain = np.array([r == "op" for r in roles])
    for i in np.flatnonzero(plain).tolist():
        o = lab[i]
        if not (np.array_equal(np.isnan(split.compute[i]), np.isnan(original.compute[o]))
                and np.allclose(np.nan_to_num(split.compute[i]), np.nan_to_num(original.compute[o]))
                and np.isclose(split.memory[i], original.memory[o])):
            problems.append(f"unsplit {original._node(int(o))} changed its compute or memory")
    for op_id, _dim, n, kappa in split.meta.get("split_log", ()):
        o = index[str(op_id)]
        parts = np.flatnonzero((lab == o) & np.array([r == "part" for r in roles]))
        total = np.nansum(split.compute[parts], axis=0)
        want_t = np.nan_to_num(original.compute[o]) + n * kappa * ~np.isnan(original.compute[o])
        if parts.size != n or not np.allclose(total, want_t):
            problems.append(f"parts of {original._node(o)}: {parts.size} parts summing to {total.tolist()}, "
                            f"expected {n} summing to {want_t.tolist()}")
    return problems


def splittable_ops(graph: OpGraph, rules: SplitRules, candidates: Sequence[int]) -> list[int]:
    """The candidates that have a rule, are no part or aux node of an earlier split and
    belong to no colocation group."""
    roles = graph.meta.get("split_role")
    return [v for v in candidates
            if (roles is None or roles[v] == "op") and graph.colocation[v] < 0 and rules.of(graph, v)]
