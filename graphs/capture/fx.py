"""Capture a PyTorch model as an operator graph (training: joint forward+backward).

Pipeline (issue 11):

1. The model's parameters, buffers and the example inputs become ``FakeTensor`` s on the
   CPU (shapes only), so a model built on the ``meta`` device is captured without
   weights and without a GPU.
2. ``torch.export.export`` of a wrapper that returns ``loss_fn(model(*inputs), *inputs)``
   (training) or the model's output (inference, ``model.eval()``). A model that does not
   export raises an :class:`InputError` naming the failing op and PyTorch's message.
3. The joint graph: ``make_fx`` traces the exported module through an ``fx.Interpreter``
   and then ``torch.autograd.grad`` of the loss with respect to every parameter (and,
   for blocks, every input) into one ATen graph. Paper/issue says
   ``aot_export_module(trace_joint=True)``; we do the same joint trace ourselves
   (``aot_export_module`` is ``make_fx`` of a joint function too), because its re-trace
   drops ``nn_module_stack``: tracing through the interpreter tags every forward ATen node
   with the module path of the exported node it came from.
4. Views (ops whose schema returns an alias, e.g. ``view``/``t``/``expand``/``detach``)
   and ``getitem`` are merged into their producers at zero cost, so nodes are operators
   that do work.

Per node the graph carries ``op_type`` (the ATen op, e.g. ``addmm``), ``layer`` (the
module path, ``loss`` for the loss function's ops; a gradient producer takes its
parameter's layer, another backward node the layer of the first forward node it reads,
else of its first backward predecessor), ``backward`` (not an ancestor of the loss), ``role``
(``param``: a parameter, ``grad``: produces a parameter's gradient, ``apply``: the
optimizer update we add per parameter, ``compute``: everything else),
``output_bytes`` (sum over its output tensors of ``min(numel * itemsize,
untyped_storage().nbytes())``: logical sizes of expanded views are wrong by orders of
magnitude), ``persistent_bytes`` (parameter bytes on ``param`` nodes, optimizer state on
``apply`` nodes: Adam 2x, momentum 1x, SGD 0x) and ``memory = persistent_bytes +
output_bytes`` (the static model of docs/semantics.md 1 counts every
activation). Each parameter, its
gradient producer and its apply node form a colocation group (groups sharing a gradient
producer, e.g. a convolution's weight and bias, are merged). Edge bytes are the bytes of
the tensor read (again by storage), summed over the distinct tensors a consumer reads
from one producer and capped at the producer's output bytes; ``batch_scaled`` is false
on edges out of ``param`` nodes and into ``apply`` nodes (docs/heuristics.md 0).

Costs come from a :class:`~dnnplace.graphs.capture.costs.CostModel` (default
``roofline:v100``); ``graph.meta["cost"]`` records which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.capture.ops import (
    OPTIMIZER_STATE,
    is_view,
    op_name,
    require_torch,
    root_value,
    storage_bytes,
    value_bytes,
)
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Captured", "trace", "to_graph"]

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


def _fakeify(model: Any, inputs: Sequence[Any]):
    """Swap the model's parameters/buffers for CPU fake tensors; returns (restore, fake inputs)."""
    torch = require_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    fm = FakeTensorMode(allow_non_fake_inputs=True)  # constants the model creates stay real

    def fake(t):
        with fm:
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")

    saved = []
    for mod in model.modules():
        for k, p in list(mod._parameters.items()):
            if p is not None:
                saved.append((mod._parameters, k, p))
                mod._parameters[k] = torch.nn.Parameter(fake(p), requires_grad=p.requires_grad)
        for k, b in list(mod._buffers.items()):
            if b is not None:
                saved.append((mod._buffers, k, b))
                mod._buffers[k] = fake(b)

    def restore():
        for d, k, v in saved:
            d[k] = v

    return restore, tuple(fake(x) if isinstance(x, torch.Tensor) else x for x in inputs)


def _export(module: Any, args: tuple) -> Any:
    torch = require_torch()
    try:
        return torch.export.export(module, args, strict=False)
    except Exception as exc:  # noqa: BLE001 - every export failure becomes one named error
        msg = str(exc).strip().splitlines()
        first = msg[0] if msg else type(exc).__name__
        op = next((ln.strip() for ln in msg if "aten." in ln or "torch." in ln), "")
        where = f" at {op}" if op and op != first else ""
        raise InputError(f"the model does not export{where}: {type(exc).__name__}: {first}") from exc


def _wrapper(model: Any, loss_fn: Callable | None):
    """``forward(*inputs) = loss_fn(model(*inputs), *inputs)`` (or the model's output)."""
    torch = require_torch()

    class LossWrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.model = m

        def forward(self, *inputs):
            out = self.model(*inputs)
            return loss_fn(out, *inputs) if loss_fn is not None else out

    return LossWrapper(model)


def _joint(epm: Any, fake_inputs: tuple, *, training: bool, wrt_inputs: Sequence[bool],
           cotangents: Sequence[bool] | None, block: bool = False):
    """Trace ``epm`` (an exported module) and, for training, the gradients into one graph.

    ``wrt_inputs[i]``: differentiate with respect to input ``i`` too (blocks);
    ``cotangents``: per output, whether it gets a ``grad_out`` placeholder (blocks; None:
    every output of a ``block``); none: the first output is the loss and autograd seeds it.

    Returns the GraphModule, the placeholder kinds and names, and the names of the
    output nodes: ``loss`` (or model outputs), ``grads`` per parameter (None if unused),
    then per input with ``wrt_inputs`` its gradient.
    """
    torch = require_torch()
    from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
    from torch.nn.utils.stateless import _reparametrize_module

    class Tagger(torch.fx.Interpreter):
        def run_node(self, n):
            mode = get_proxy_mode()
            graph = mode.tracer.graph if mode is not None else None
            last = graph._root.prev if graph is not None else None
            out = super().run_node(n)
            if graph is not None and n.op == "call_function":
                stack = n.meta.get("nn_module_stack")
                layer = list(stack.values())[-1][0] if stack else ""
                cur = graph._root.prev
                while cur is not last:
                    cur.meta["dnnplace_layer"] = layer
                    cur = cur.prev
            return out

    params = dict(epm.named_parameters())
    buffers = dict(epm.named_buffers())
    pnames, bnames = list(params), list(buffers)
    n_in = len(fake_inputs)

    def step(pvals, bvals, ins, gouts):
        state = {**dict(zip(pnames, pvals)), **dict(zip(bnames, bvals))}
        with _reparametrize_module(epm, state):
            outs = Tagger(epm).run(*ins)
        flat = [o for o in (outs if isinstance(outs, (tuple, list)) else (outs,))]
        if not training:
            return tuple(flat)
        wrt = list(pvals) + [x for x, w in zip(ins, wrt_inputs) if w]
        if any(cotangents or ()):
            grads = torch.autograd.grad([o for o, c in zip(flat, cotangents) if c], wrt, grad_outputs=list(gouts),
                                        allow_unused=True)
        else:
            grads = torch.autograd.grad(flat[0], wrt, allow_unused=True)
        return tuple(flat), tuple(grads)

    with torch.enable_grad() if training else torch.no_grad():
        pv = [p.detach().requires_grad_(training and p.requires_grad) for p in params.values()]
        bv = [b.detach() for b in buffers.values()]
        iv = [x.detach().requires_grad_(bool(w)) if isinstance(x, torch.Tensor) else x
              for x, w in zip(fake_inputs, wrt_inputs)]
        gv = []
        if block:
            # one cotangent per marked block output, of the output's shape (found by a fake run)
            with _reparametrize_module(epm, {**params, **buffers}):
                outs = epm(*fake_inputs)
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            cotangents = [True] * len(outs) if cotangents is None else list(cotangents)
            if len(cotangents) != len(outs):
                raise InputError(f"{len(cotangents)} cotangent flags for {len(outs)} block outputs")
            gv = [torch.empty_like(o) for o, c in zip(outs, cotangents) if c]
        gm = make_fx(step)(pv, bv, iv, gv)
    kinds = ["param"] * len(pnames) + ["buffer"] * len(bnames) + ["input"] * n_in + ["grad_out"] * len(gv)
    names = pnames + bnames + [f"input{i}" for i in range(n_in)] + [f"grad_out{j}" for j in range(len(gv))]
    flat = list(next(n for n in gm.graph.nodes if n.op == "output").args[0])
    if not training:
        return gm, kinds, names, flat, cotangents
    n_wrt = len(pnames) + sum(map(bool, wrt_inputs))  # outputs first, then one gradient per wrt
    return gm, kinds, names, (flat[:len(flat) - n_wrt], flat[len(flat) - n_wrt:]), cotangents


# ---------------------------------------------------------------------------- tracing
def trace(model: Any, example_inputs: Sequence[Any], loss_fn: Callable | None = None, *,
          training: bool = True, optimizer: str = "adam", grad_inputs: bool | Sequence[bool] = False,
          cotangents: Sequence[bool] | None = None) -> Captured:
    """Trace ``model`` into a :class:`Captured` table (no costs yet).

    Parameters
    ----------
    model : torch.nn.Module
        On the ``meta`` device or a real one; its tensors are swapped for fake tensors
        during the trace and restored afterwards.
    example_inputs : sequence of tensors
    loss_fn : callable, optional
        ``loss_fn(model(*inputs), *inputs) -> scalar`` (the zoo's convention); without
        it, training uses the model's first output as the loss.
    training : bool
        Joint forward+backward graph with optimizer apply nodes; else the forward graph.
    optimizer : str
        Key of :data:`OPTIMIZER_STATE`: the state bytes on each apply node.
    grad_inputs : bool or sequence of bool
        Blocks for tiling: differentiate with respect to the parameters and the inputs
        (``True``: every floating point input; a sequence: the inputs marked), giving
        ``ports`` (see :mod:`~dnnplace.graphs.capture.tiling`).
    cotangents : sequence of bool, optional
        Blocks: which outputs receive a cotangent (a ``grad_out`` input); default all.
        With none, the block's first output is a scalar loss seeded by autograd (a
        model's head).
    """
    torch = require_torch()
    if optimizer not in OPTIMIZER_STATE:
        raise InputError(f"unknown optimizer {optimizer!r}; use one of {sorted(OPTIMIZER_STATE)}")
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"capture needs a torch.nn.Module, got {type(model).__name__}")
    example_inputs = tuple(example_inputs)
    was_training = model.training
    model.train(training)
    restore, fake_inputs = _fakeify(model, example_inputs)
    t0 = time.perf_counter()
    block = grad_inputs is not False
    if grad_inputs is True:
        wrt = [isinstance(x, torch.Tensor) and x.is_floating_point() for x in example_inputs]
    elif block:
        wrt = [bool(w) for w in grad_inputs]
        if len(wrt) != len(example_inputs):
            raise InputError(f"grad_inputs has {len(wrt)} flags for {len(example_inputs)} inputs")
    else:
        wrt = [False] * len(example_inputs)
    try:
        wrapper = _wrapper(model, loss_fn if training and not block else None)
        ep = _export(wrapper, fake_inputs)
        t_export = time.perf_counter() - t0
        try:
            gm, kinds, names, outs, cot = _joint(ep.module(), fake_inputs, training=training, wrt_inputs=wrt,
                                                 cotangents=cotangents, block=block)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"the model exported but its {'joint ' if training else ''}graph could not be "
                             f"traced: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}") from exc
    finally:
        restore()
        model.train(was_training)
    cap = _merge(gm, kinds, names, outs, training=training, optimizer=optimizer, block=block, wrt=wrt,
                 cotangents=cot)
    cap.meta.update({"torch": torch.__version__, "training": training, "optimizer": optimizer if training else None,
                     "export_s": round(t_export, 3), "trace_s": round(time.perf_counter() - t0, 3),
                     "fx_nodes": len(gm.graph.nodes),
                     "inputs": [[list(x.shape), str(x.dtype)] for x in example_inputs if isinstance(x, torch.Tensor)]})
    return cap


def _merge(gm: Any, kinds: list[str], names: list[str], outs: Any, *, training: bool, optimizer: str,
           block: bool = False, wrt: Sequence[bool] = (), cotangents: Sequence[bool] | None = None) -> Captured:
    """Merge views into producers, add apply nodes, derive roles, flags and bytes."""
    nodes = [nd for nd in gm.graph.nodes if nd.op in ("placeholder", "call_function")]
    ph = [nd for nd in nodes if nd.op == "placeholder"]
    ph_kind = {nd.name: kinds[j] for j, nd in enumerate(ph)}
    ph_name = {nd.name: names[j] for j, nd in enumerate(ph)}
    rep: dict[str, int] = {}
    ids, op_types, layers, roles, out_b, pers = [], [], [], [], [], []
    for nd in nodes:
        if nd.op == "call_function" and is_view(nd):
            base = next(iter(nd.all_input_nodes), None)
            rep[nd.name] = rep.get(base.name, -1) if base is not None else -1
            continue
        i = len(ids)
        rep[nd.name] = i
        if nd.op == "placeholder":
            kind = ph_kind[nd.name]
            ph_name[nd.name] = _strip(ph_name[nd.name])
            ids.append(f"{kind}:{ph_name[nd.name]}")
            op_types.append(kind)
            layers.append(ph_name[nd.name].rsplit(".", 1)[0] if kind in ("param", "buffer") else "")
            roles.append("param" if kind == "param" else "compute")
            b = storage_bytes(nd.meta.get("val"))
            out_b.append(0 if kind in ("param", "buffer") else b)
            pers.append(b if kind in ("param", "buffer") else 0)
        else:
            ids.append(nd.name)
            op_types.append(op_name(nd))
            layer = nd.meta.get("dnnplace_layer")
            layers.append("" if layer is None else (_strip(layer) or "loss"))
            roles.append("compute")
            out_b.append(value_bytes(nd.meta.get("val")))
            pers.append(0)
    n = len(ids)
    out_b_arr = np.array(out_b, dtype=np.float64)
    # edges: distinct tensors read by each consumer, grouped by producer
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
    eb = [min(v, max(out_b_arr[k[0]], pers[k[0]])) for k, v in ekey.items()]
    roots = [frozenset(eroots[k]) for k in ekey]

    # outputs: loss, parameter gradients, input gradients
    n_params = kinds.count("param")
    param_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "param"]
    ph_of_node = {rep[nd.name]: nd.name for nd in ph}
    input_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "input"]
    gout_nodes = [rep[nd.name] for nd in ph if ph_kind[nd.name] == "grad_out"]

    def rep_of(x):
        return rep.get(x.name, -1) if hasattr(x, "name") else -1

    loss, ports = -1, {}
    apply_of: dict[int, int] = {}
    coloc = np.full(n, -1, dtype=np.int64)
    if training:
        flat_outs, grads = outs
        grads = list(grads)
        pgrads, igrads = grads[:n_params], grads[n_params:]
        if not block or not any(cotangents or ()):
            loss = rep_of(flat_outs[0])
        state = OPTIMIZER_STATE[optimizer]
        parent = list(range(n))

        def find(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for p, g in zip(param_nodes, pgrads):
            a = len(ids)
            pb = pers[p]
            ids.append(f"apply:{ids[p].split(':', 1)[1]}")
            op_types.append(f"apply_{optimizer}")
            layers.append(layers[p])
            roles.append("apply")
            out_b.append(0)
            pers.append(pb * state)
            parent.append(a)
            apply_of[p] = a
            src.append(p)
            dst.append(a)
            eb.append(pb)
            roots.append(frozenset([ph_of_node[p]]))
            parent[find(a)] = find(p)
            gi = rep_of(g) if g is not None else -1
            if gi >= 0:
                if roles[gi] == "compute":
                    roles[gi] = "grad"
                    layers[gi] = layers[p]
                src.append(gi)
                dst.append(a)
                eb.append(pb)
                roots.append(frozenset([root_value(g, rep).name]))
                parent[find(gi)] = find(p)
        n = len(ids)
        roots = np.array([find(i) for i in range(n)])
        grouped = np.bincount(roots, minlength=n) > 1
        codes = np.unique(roots[grouped[roots]])
        code_of = {int(r): j for j, r in enumerate(codes)}
        coloc = np.array([code_of.get(int(r), -1) for r in roots], dtype=np.int64)
        if block:
            it_g, it_gx = iter(gout_nodes), iter(igrads)
            gx = [next(it_gx) if w else None for w in wrt]
            ports = {"x": input_nodes, "g": [next(it_g) if c else -1 for c in cotangents],
                     "y": [rep_of(o) for o in flat_outs], "gx": [rep_of(g) if g is not None else -1 for g in gx]}
    else:
        if block:
            ports = {"x": input_nodes, "g": [], "y": [rep_of(o) for o in outs], "gx": []}
    src_a = np.array(src, dtype=np.int64)
    dst_a = np.array(dst, dtype=np.int64)
    # edges that carry the same root tensors of a node carry the same output (one transfer
    # per destination device, docs/semantics.md 2.1); outputs numbered per source in edge order
    out_ids: dict[tuple[int, frozenset], int] = {}
    per_src: dict[int, int] = {}
    edge_out = np.zeros(len(src), dtype=np.int64)
    for j, (u, key) in enumerate(zip(src, roots)):
        if (u, key) not in out_ids:
            out_ids[(u, key)] = per_src.get(u, 0)
            per_src[u] = out_ids[(u, key)] + 1
        edge_out[j] = out_ids[(u, key)]
    roles_a = np.array(roles)
    batch_scaled = ~((roles_a[src_a] == "param") | (roles_a[dst_a] == "apply")) if len(src) else np.zeros(0, bool)
    # backward: not an ancestor of the loss, or for a block of its outputs (training)
    roots = [loss] if loss >= 0 else [y for y in ports.get("y", []) if y >= 0]
    if training and roots:
        anc = np.zeros(n, dtype=bool)
        anc[roots] = True
        preds: list[list[int]] = [[] for _ in range(n)]
        for s, d in zip(src, dst):
            preds[d].append(s)
        stack = list(roots)
        while stack:
            v = stack.pop()
            for u in preds[v]:
                if not anc[u]:
                    anc[u] = True
                    stack.append(u)
        backward = ~anc
    else:
        backward = np.zeros(n, dtype=bool)
    _backward_layers(layers, backward, src, dst)
    return Captured(gm=gm, arg_kinds=kinds, arg_names=names, ids=ids, op_types=op_types, layers=layers,
                    roles=roles, backward=backward, output_bytes=np.array(out_b, dtype=np.float64),
                    persistent_bytes=np.array(pers, dtype=np.float64), colocation=coloc, src=src_a, dst=dst_a,
                    edge_bytes=np.array(eb, dtype=np.float64), batch_scaled=np.asarray(batch_scaled, dtype=bool),
                    edge_output=edge_out, rep=rep, apply_of=apply_of, loss=loss, ports=ports)


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


# ---------------------------------------------------------------------------- graph
def to_graph(cap: Captured, times_ms: np.ndarray, *, kind: str = "gpu", name: str = "captured",
             cost_meta: dict | None = None) -> OpGraph:
    """The :class:`OpGraph` of a captured table with per-node times (ms) on ``kind``."""
    times = np.asarray(times_ms, dtype=np.float64).reshape(cap.n, 1)
    ids = cap.ids
    return OpGraph(ids=ids, kinds=(kind,), compute=times, memory=cap.persistent_bytes + cap.output_bytes,
                   src=cap.src, dst=cap.dst, edge_bytes=cap.edge_bytes, edge_output=cap.edge_output,
                   persistent_bytes=cap.persistent_bytes, output_bytes=cap.output_bytes,
                   colocation=cap.colocation, backward=cap.backward, names=ids, op_types=cap.op_types,
                   layers=cap.layers, roles=cap.roles, edge_batch_scaled=cap.batch_scaled, name=name, unit="ms",
                   meta={"capture": {k: v for k, v in cap.meta.items()}, "cost": dict(cost_meta or {}),
                         **({"loss": ids[cap.loss]} if cap.loss >= 0 else {})})
