"""Giant training graphs from captured blocks (a Transformer layer, an LSTM step, a NASNet
cell, a model's stem and head), wired with numpy: a 200k-operator graph in seconds instead
of hours of capture.

:func:`capture_block` traces one block's joint forward+backward graph with respect to its
parameters *and* its inputs, given a cotangent per output (``grad_inputs`` and
``cotangents`` of :func:`~.fx.trace`). Its ports are the input placeholders ``x_i``, the
cotangent placeholders ``g_j`` (-1 for an output without one), the output producers
``y_j`` and the input-gradient producers ``gx_i`` (-1 for an input without a gradient). A
block whose outputs have no cotangent is a model's head: its first output is the loss,
seeded by autograd as in a whole-model capture.

:func:`assemble` wires block instances (:class:`Call`) into one graph as autograd would
have traced them together. Input ``i`` of a call reads a source: output ``j`` of an
earlier call or a model input (one external node each). Forward: the source's producer
feeds the consumers of ``x_i``. Backward: the consumers of ``g_j`` in the producing call
read the cotangent of output ``j``, which is the gradient ``gx_i`` of its single consumer,
or, when ``k > 1`` consumers take gradients, the sum of their gradients made by ``k - 1``
``add`` nodes (autograd's gradient accumulation; they cost what the block's cost model
gives an ``add`` of the output's shape). An output that nothing reads gets one ``seed``
node as its cotangent when its block expects one. Edges between the same two nodes are
merged (bytes summed, capped at the producer's bytes, as in :func:`~.fx.trace`).

:func:`tile` repeats one block ``repeats`` times and wires tile ``t`` to tile ``t - 1``
by ``wiring[i]``, the source of block input ``i``:

* ``("out", j)``: output ``j`` of the previous tile (a layer stack: ``x <- y``; an LSTM
  step: ``h, c <- h, c``);
* ``("in", j)``: the value that fed input ``j`` of the previous tile (NASNet's cell
  reads the previous two cells' outputs: ``(x, x_prev) <- (y, x)``);
* ``None``: a fresh external input node per tile (the per-step token of an LSTM step).

Tile 0's chained inputs read external input nodes and the last tile's cotangents come
from seed nodes. Node ids are ``<prefix>/<block id>`` (``t<k>/...`` for tiles), layers
``<prefix>.<block layer>``; colocation groups are per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Block", "Call", "capture_block", "assemble", "tile", "default_wiring"]


@dataclass(frozen=True)
class Block:
    """A captured block as arrays: its :class:`OpGraph` (ports included) and port indices.

    ``acc[j]`` is the ``(K,)`` compute row of one gradient-accumulation ``add`` of output
    ``j``'s shape (None: accumulation costs nothing, e.g. a hand-made block).
    """

    graph: OpGraph
    x: tuple
    g: tuple
    y: tuple
    gx: tuple
    flops: float = 0.0
    acc: tuple | None = None
    param_acc: dict | None = None

    @cached_property
    def params(self) -> list[tuple[int, int, int]]:
        """``(param, apply, grad producer or -1)`` per parameter node."""
        g = self.graph
        roles = g.roles or []
        out = []
        for p in (v for v, r in enumerate(roles) if r == "param"):
            a = next(int(v) for v in g.successors(p) if roles[v] == "apply")
            gi = next((int(u) for u in g.predecessors(a) if roles[u] == "grad"), -1)
            out.append((p, a, gi))
        return out

    @cached_property
    def body(self) -> np.ndarray:
        """Indices of the nodes every tile repeats (all but the x/g placeholders)."""
        keep = np.ones(self.graph.n, dtype=bool)
        keep[[p for p in (*self.x, *self.g) if p >= 0]] = False
        return np.flatnonzero(keep)


@dataclass(frozen=True)
class Call:
    """One instance of ``block`` in an assembled graph. ``inputs[i]`` is the source of the
    block's input ``i``: ``(call index, output j)`` of an earlier call or a string naming a
    model input (calls naming the same string share its node). ``prefix`` names the
    instance: node ids ``<prefix>/<id>``, layers ``<prefix>.<layer>``. ``share``: the index
    of an earlier call whose parameters this one uses, matched by position (the steps of
    one LSTM layer): its param and apply nodes are not copied, its parameter gradients are
    accumulated into the owner's apply nodes."""

    block: Block
    inputs: tuple
    prefix: str = ""
    share: int | None = None


def capture_block(module, inputs: Sequence, *, cost="roofline:v100", optimizer: str = "adam",
                  name: str = "block", grad_inputs: bool | Sequence[bool] = True,
                  cotangents: Sequence[bool] | None = None, acc_cache: dict | None = None) -> Block:
    """Trace one block's joint forward+backward graph with input gradients, with costs.

    ``grad_inputs`` and ``cotangents`` are those of :func:`~.fx.trace`: which inputs get a
    gradient (default: every floating point one) and which outputs a cotangent (default
    all; none: a head whose first output is the loss). ``acc_cache`` keeps the costs of
    gradient-accumulation adds by shape and dtype across calls with the same cost model.
    """
    from dnnplace.graphs.capture.costs import cost_model
    from dnnplace.graphs.capture.fx import to_graph, trace
    cm = cost_model(cost)
    cap = trace(module, tuple(inputs), None, training=True, optimizer=optimizer, grad_inputs=grad_inputs,
                cotangents=cotangents)
    times = cm.times(cap, model=module, inputs=tuple(inputs), key=name)
    g = to_graph(cap, times, kind=cm.kind, name=name, cost_meta=cm.describe())
    p = cap.ports
    vals = [nd.meta.get("val") for nd, k in zip((nd for nd in cap.gm.graph.nodes if nd.op == "placeholder"),
                                                 cap.arg_kinds) if k == "grad_out"]
    rows = {} if acc_cache is None else acc_cache

    def row(val):
        sig = (tuple(val.shape), str(val.dtype))
        if sig not in rows:
            rows[sig] = _accumulation_row(val, cm, f"{name}/acc{len(rows)}")
        return rows[sig]

    it = iter(vals)
    acc = tuple(row(next(it)) if gj >= 0 else None for gj in p["g"])
    ph = [nd for nd in cap.gm.graph.nodes if nd.op == "placeholder"]
    param_acc = {cap.rep[nd.name]: row(nd.meta.get("val")) for nd, k in zip(ph, cap.arg_kinds) if k == "param"}
    return Block(g, tuple(p["x"]), tuple(p["g"]), tuple(p["y"]), tuple(p["gx"]), float(cap.meta.get("flops", 0.0)),
                 acc, param_acc)


def _accumulation_row(val, cm, key: str) -> np.ndarray:
    """Cost row of one ``add`` of two tensors like ``val`` under cost model ``cm``."""
    from dnnplace.graphs.capture.fx import trace
    from dnnplace.graphs.capture.ops import require_torch
    torch = require_torch()

    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    a = torch.empty(tuple(val.shape), dtype=val.dtype, device="meta")
    cap = trace(Add(), (a, a), training=False)
    t = cm.times(cap, key=key)
    return np.array([t[cap.op_types.index("add")]], dtype=np.float64)


def default_wiring(block: Block, family: str | None = None) -> tuple:
    """NASNet ``(x, x_prev) <- (y, x)``; as many inputs as outputs: ``x_i <- y_i``; one
    more input than outputs (an LSTM step ``(x, h, c) -> (h, c)``): ``x_0`` external,
    ``x_i <- y_{i-1}``."""
    nx, ny = len(block.x), len(block.y)
    if family == "nasnet" and nx == 2 and ny == 1:
        return (("out", 0), ("in", 0))
    if nx == ny:
        return tuple(("out", i) for i in range(nx))
    if nx == ny + 1:
        return (None, *(("out", i) for i in range(ny)))
    raise InputError(f"block with {nx} inputs and {ny} outputs: give the wiring explicitly")


def tile(block: Block, repeats: int, *, wiring: Sequence | None = None, family: str | None = None,
         name: str | None = None) -> OpGraph:
    """``repeats`` copies of ``block`` chained by ``wiring`` (see the module docstring).

    >>> import numpy as np
    >>> from dnnplace.graphs.graph import OpGraph
    >>> g = OpGraph(ids=["x", "g", "f", "b"], kinds=("gpu",), compute=np.ones((4, 1)), memory=np.zeros(4),
    ...             src=[0, 1, 0], dst=[2, 3, 3], backward=[False, False, False, True])
    >>> t = tile(Block(g, x=(0,), g=(1,), y=(2,), gx=(3,)), 3)
    >>> t.n, t.m  # 3 * 2 body nodes + input + seed; x feeds f and b (3 tiles x 2), g feeds b (3)
    (8, 9)
    """
    if repeats < 1:
        raise InputError(f"tile: repeats must be >= 1, got {repeats}")
    wiring = tuple(wiring) if wiring is not None else default_wiring(block, family)
    if len(wiring) != len(block.x):
        raise InputError(f"tile: wiring has {len(wiring)} entries for {len(block.x)} block inputs")
    calls: list[Call] = []
    for t in range(repeats):
        srcs = []
        for i, w in enumerate(wiring):
            if w is None or t == 0:
                srcs.append(f"input/t{t}/x{i}" if w is None or w[0] == "out" or t == 0 else None)
            elif w[0] == "out":
                srcs.append((t - 1, w[1]))
            else:
                srcs.append(calls[t - 1].inputs[w[1]])
        if t == 0:  # ("in", j) at tile 0: the external that feeds input j
            srcs = [s if not (w and w[0] == "in") else srcs[w[1]] for s, w in zip(srcs, wiring)]
        calls.append(Call(block, tuple(srcs), f"t{t}"))
    g = assemble(calls, name=name or f"{block.graph.name}-x{repeats}")
    g.meta["tiled"] = {"block": block.graph.name, "repeats": repeats, "body_nodes": int(block.body.size),
                       "external_nodes": g.n - repeats * int(block.body.size),
                       "wiring": [list(w) if w else None for w in wiring], "flops": block.flops * repeats}
    return g


def _layout(b: Block, lite: bool) -> tuple[np.ndarray, np.ndarray]:
    """Body nodes of a call (``lite``: without param and apply nodes) and the map block
    node -> position in that body (-1 if not copied)."""
    body = b.body
    if lite:
        shared = [v for pa in b.params for v in pa[:2]]
        body = body[~np.isin(body, shared)]
    loc = np.full(b.graph.n, -1, dtype=np.int64)
    loc[body] = np.arange(body.size)
    return body, loc


def _join(prefix: str, sep: str, value: str) -> str:
    return f"{prefix}{sep}{value}" if prefix and value else (value or prefix)


def assemble(calls: Sequence[Call], *, name: str = "assembled") -> OpGraph:
    """One graph of block instances wired as autograd would trace them (module docstring).

    Calls of the same :class:`Block` object are copied together with numpy, so a graph of
    many instances of few blocks (a 96-layer stack, a 16 x 1024 LSTM grid) takes seconds.
    ``meta["assembled"]`` records the calls' FLOP sum and the added nodes.
    """
    calls = list(calls)
    if not calls:
        raise InputError("assemble: no calls")
    kinds = calls[0].block.graph.kinds
    for k, c in enumerate(calls):
        if c.block.graph.kinds != kinds:
            raise InputError(f"assemble: block {c.block.graph.name!r} has kinds {c.block.graph.kinds}, not {kinds}")
        if c.share is not None and not (0 <= c.share < k and calls[c.share].share is None and
                                        len(calls[c.share].block.params) == len(c.block.params)):
            raise InputError(f"assemble: call {k} ({c.prefix!r}) shares parameters with call {c.share}, which is "
                             "not an earlier owner call of the same block")
    owners = {c.share for c in calls if c.share is not None}
    layouts = {}
    for c in calls:
        key = (id(c.block), c.share is not None)
        if key not in layouts:
            layouts[key] = _layout(c.block, key[1])
    lay = [layouts[(id(c.block), c.share is not None)] for c in calls]
    offset = np.zeros(len(calls) + 1, dtype=np.int64)
    for k in range(len(calls)):
        offset[k + 1] = offset[k] + lay[k][0].size
    n_body = int(offset[-1])
    extra: list[tuple] = []  # (id, compute row or None, output bytes, backward, op type, layer)
    ext_of: dict[str, int] = {}
    acc_edges: list[tuple[int, int, float]] = []
    fixes: list[tuple[int, str, int]] = []  # (node, role, colocation of node or -1)

    def new_node(label, row, out_bytes, backward, op, layer) -> int:
        extra.append((label, row, out_bytes, backward, op, layer))
        return n_body + len(extra) - 1

    pidx = {id(c.block): {v: (i, w) for i, pa in enumerate(c.block.params) for w, v in enumerate(pa[:2])}
            for c in calls if c.share is not None}

    def glob(k: int, v: int) -> int:
        i = lay[k][1][v]
        if i >= 0:
            return int(offset[k] + i)
        o = calls[k].share
        idx, which = pidx[id(calls[k].block)][v]
        return glob(o, calls[o].block.params[idx][which])

    def accumulate(grads: list[int], row, nbytes: float, label: str, layer: str) -> int:
        src = grads[0]
        for other in grads[1:]:  # autograd's accumulation: k - 1 adds for k gradients
            a = new_node(f"{label}_{len(extra)}", row, nbytes, True, "add", layer)
            acc_edges.extend([(src, a, nbytes), (other, a, nbytes)])
            src = a
        return src

    # forward: the global producer feeding every (call, input)
    readers: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (call, output j) -> [(call, input i)]
    fsrc: list[list[int]] = []
    for k, c in enumerate(calls):
        if len(c.inputs) != len(c.block.x):
            raise InputError(f"assemble: call {k} ({c.prefix!r}) gives {len(c.inputs)} inputs to a block with "
                             f"{len(c.block.x)}")
        row = []
        for i, s in enumerate(c.inputs):
            if isinstance(s, str):
                if s not in ext_of:
                    ext_of[s] = new_node(s, None, float(c.block.graph.output_bytes[c.block.x[i]]), False, "input", "")
                row.append(ext_of[s])
                continue
            k0, j = s
            if not (0 <= k0 < k and 0 <= j < len(calls[k0].block.y)):
                raise InputError(f"assemble: call {k} ({c.prefix!r}) input {i} reads {s}, not an output of an "
                                 "earlier call")
            row.append(glob(k0, calls[k0].block.y[j]))
            readers.setdefault((k0, j), []).append((k, i))
        fsrc.append(row)
    # backward: the cotangent of every (call, output j) that has a g port
    gsrc: dict[tuple[int, int], int] = {}
    for k, c in enumerate(calls):
        b = c.block
        for j, gp in enumerate(b.g):
            if gp < 0:
                continue
            rd = readers.get((k, j), [])
            grads = [glob(k2, calls[k2].block.gx[i]) for k2, i in rd if calls[k2].block.gx[i] >= 0]
            nbytes = float(b.graph.output_bytes[gp])
            if not grads:
                if rd:
                    raise InputError(f"assemble: output {j} of call {k} ({c.prefix!r}) expects a cotangent but none "
                                     "of its readers takes a gradient; capture the block without it")
                grads = [new_node(_join("seed", "/", _join(c.prefix, "/", f"g{j}")), None, nbytes, True, "input", "")]
            row = b.acc[j] if b.acc is not None and b.acc[j] is not None else np.zeros(len(kinds))
            layer = _join(c.prefix, ".", b.graph.layers[b.y[j]] if b.graph.layers else "")
            gsrc[(k, j)] = accumulate(grads, row, nbytes, _join(c.prefix, "/", f"accumulate{j}"), layer)
    # shared parameters: every sharing call's gradient accumulated into the owner's apply
    for k0 in sorted(owners):
        c0 = calls[k0]
        b = c0.block
        group = [k0] + [k for k, c in enumerate(calls) if c.share == k0]
        for idx, (p, a, gi) in enumerate(b.params):
            if gi < 0:
                continue
            grads = [glob(k, calls[k].block.params[idx][2]) for k in group if calls[k].block.params[idx][2] >= 0]
            pb = float(b.graph.persistent_bytes[p])
            row = b.param_acc.get(p) if b.param_acc else None
            row = row if row is not None else np.zeros(len(kinds))
            final = accumulate(grads, row, pb, _join(c0.prefix, "/", f"accumulate:{b.graph.ids[p]}"),
                               _join(c0.prefix, ".", b.graph.layers[p] if b.graph.layers else ""))
            acc_edges.append((final, glob(k0, a), pb))
            fixes.extend((v, "compute", -1) for v in grads)
            fixes.append((final, "grad", glob(k0, p)))
    # edges: inside every call, then from sources to port consumers
    src_l, dst_l, eb_l = [], [], []
    groups: dict[tuple, list[int]] = {}
    for k, c in enumerate(calls):
        groups.setdefault((id(c.block), c.share is not None, k in owners), []).append(k)
    for (_, lite, owner), ks_list in groups.items():
        ks = np.array(ks_list, dtype=np.int64)
        b = calls[ks_list[0]].block
        g, loc = b.graph, lay[ks_list[0]][1]
        params = [pa[0] for pa in b.params]
        applies = np.array([pa[1] for pa in b.params], dtype=np.int64)
        ports = np.array([p for p in (*b.x, *b.g) if p >= 0] + (params if lite else []), dtype=np.int64)
        roles = np.array(g.roles) if g.roles else np.full(g.n, "compute")
        drop = np.isin(g.dst, applies) & ((roles[g.src] == "grad") if owner else lite)
        inner = ~(np.isin(g.src, ports) | np.isin(g.dst, ports) | drop)
        off = offset[ks][:, None]
        src_l.append((loc[g.src[inner]][None, :] + off).ravel())
        dst_l.append((loc[g.dst[inner]][None, :] + off).ravel())
        eb_l.append(np.tile(g.edge_bytes[inner], ks.size))
        wired = [(b.x[i], np.array([fsrc[k][i] for k in ks], dtype=np.int64)) for i in range(len(b.x))]
        wired += [(gp, np.array([gsrc[(int(k), j)] for k in ks], dtype=np.int64)) for j, gp in enumerate(b.g)
                  if gp >= 0]
        if lite:
            wired += [(p, np.array([glob(int(k), p) for k in ks], dtype=np.int64)) for p in params]
        for port, sources in wired:
            e = g.out_eid[g.out_ptr[port]:g.out_ptr[port + 1]]
            e = e[(loc[g.dst[e]] >= 0) & ~drop[e]]
            src_l.append(np.repeat(sources, e.size))
            dst_l.append((loc[g.dst[e]][None, :] + off).ravel())
            eb_l.append(np.tile(g.edge_bytes[e], ks.size))
    if acc_edges:
        src_l.append(np.array([a for a, _, _ in acc_edges], dtype=np.int64))
        dst_l.append(np.array([d for _, d, _ in acc_edges], dtype=np.int64))
        eb_l.append(np.array([x for _, _, x in acc_edges], dtype=np.float64))

    # nodes: call bodies in call order, then the added nodes
    def per_call(get):
        return [get(c.block)[lay[k][0]] for k, c in enumerate(calls)]

    n_extra = len(extra)
    k_n = len(kinds)
    out_b = np.concatenate(per_call(lambda b: b.graph.output_bytes) + [np.array([e[2] for e in extra])])
    pers = np.concatenate(per_call(lambda b: b.graph.persistent_bytes) + [np.zeros(n_extra)])
    comp = np.vstack(per_call(lambda b: b.graph.compute)
                     + [np.array([e[1] if e[1] is not None else np.zeros(k_n) for e in extra]).reshape(n_extra, k_n)])
    mem = np.concatenate(per_call(lambda b: b.graph.memory) + [np.array([e[2] for e in extra])])
    bwd = np.concatenate(per_call(lambda b: b.graph.backward) + [np.array([e[3] for e in extra], dtype=bool)])
    coloc_parts, ngrp = [], 0
    for k, c in enumerate(calls):
        col = c.block.graph.colocation[lay[k][0]]
        coloc_parts.append(np.where(col >= 0, col + ngrp, -1))
        ngrp += int(col.max()) + 1 if col.size and col.max() >= 0 else 0
    coloc = np.concatenate(coloc_parts + [np.full(n_extra, -1, dtype=np.int64)])

    def strings(attr, fmt, default):
        out = []
        for k, c in enumerate(calls):
            vals = getattr(c.block.graph, attr)
            out += [fmt(c.prefix, vals[v] if vals else default) for v in lay[k][0]]
        return out

    ids = strings("ids", lambda p, v: _join(p, "/", str(v)), "") + [e[0] for e in extra]
    layers = strings("layers", lambda p, v: _join(p, ".", v), "") + [e[5] for e in extra]
    op_types = strings("op_types", lambda p, v: v, "op") + [e[4] for e in extra]
    roles = strings("roles", lambda p, v: v, "compute") + ["compute"] * n_extra
    for v, role, like in fixes:
        roles[v] = role
        coloc[v] = coloc[like] if like >= 0 else -1
    used, coloc_c = np.unique(coloc[coloc >= 0], return_inverse=True)
    coloc[coloc >= 0] = coloc_c
    src, dst, eb = np.concatenate(src_l), np.concatenate(dst_l), np.concatenate(eb_l)
    n = n_body + n_extra
    # merge parallel edges as the capture does: bytes summed, capped at the producer's bytes
    key, inv = np.unique(src * n + dst, return_inverse=True)
    src, dst = key // n, key % n
    eb = np.minimum(np.bincount(inv, weights=eb, minlength=key.size), np.maximum(out_b[src], pers[src]))
    roles_a = np.array(roles)
    batch_scaled = ~((roles_a[src] == "param") | (roles_a[dst] == "apply"))
    first = calls[0].block.graph
    return OpGraph(ids=ids, kinds=kinds, compute=comp, memory=mem, src=src, dst=dst, edge_bytes=eb,
                   edge_batch_scaled=batch_scaled, persistent_bytes=pers, output_bytes=out_b, colocation=coloc,
                   colocation_labels=tuple(range(used.size)), backward=bwd, names=ids, op_types=op_types,
                   layers=layers, roles=roles, name=name, unit=first.unit,
                   meta={"assembled": {"calls": len(calls), "blocks": len({id(c.block) for c in calls}),
                                       "flops": float(sum(c.block.flops for c in calls)),
                                       "added_nodes": n_extra,
                                       "accumulations": sum(e[4] == "add" for e in extra)},
                         "cost": first.meta.get("cost", {})})
