"""Capture a PyTorch model as an operator graph (training: joint forward+backward).

Pipeline:

1. The model's parameters, buffers and the example inputs become ``FakeTensor`` s on the
   CPU (shapes only), so a model built on the ``meta`` device is captured without
   weights and without a GPU.
2. ``torch.export.export`` of a wrapper that returns ``loss_fn(model(*inputs), *inputs)``
   (training) or the model's output (inference, ``model.eval()``). A model that does not
   export raises an :class:`InputError` naming the failing op and PyTorch's message.
3. The joint graph: ``make_fx`` traces the exported module through an ``fx.Interpreter``
   and then ``torch.autograd.grad`` of the loss with respect to every parameter (and,
   for blocks, every input) into one ATen graph. PyTorch's own route is
   ``aot_export_module(trace_joint=True)``; we do the same joint trace ourselves
   (``aot_export_module`` is ``make_fx`` of a joint function too), because its re-trace
   drops ``nn_module_stack``: tracing through the interpreter tags every forward ATen node
   with the module path of the exported node it came from.
4. Views (ops whose schema returns an alias, e.g. ``view``/``t``/``expand``/``detach``)
   and ``getitem`` are merged into their producers at zero cost, so nodes are operators
   that do work. The operator table (:class:`~dnnplace.pytorch.capture.op_table.Captured`)
   is :func:`~dnnplace.pytorch.capture.op_table.merge`'s.

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

Costs come from a :class:`~dnnplace.pytorch.capture.costs.CostModel` (default
``roofline:v100``); ``graph.meta["cost"]`` records which.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.pytorch.capture.named_losses import loss_name
from dnnplace.pytorch.capture.op_table import Captured, merge
from dnnplace.pytorch.capture.ops import OPTIMIZER_STATE, require_torch

__all__ = ["Captured", "trace", "to_graph"]


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


_QUIET_LOGGERS = ("torch._subclasses.fake_tensor", "torch.export", "torch._export")
"""Loggers that print a failing operator's traceback (``failed while attempting to run
meta for aten.mm``) before the exception that :func:`trace` turns into one line."""


@contextlib.contextmanager
def _quiet_torch_logs():
    """PyTorch's own tracebacks off while tracing: a model that does not trace is one
    :class:`InputError` line (``--verbose`` prints its traceback)."""
    import logging
    saved = [(lg, lg.level) for lg in map(logging.getLogger, _QUIET_LOGGERS)]
    for lg, _ in saved:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


_SAME_DTYPE_OPS = ("mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot", "convolution")
"""ATen ops whose tensors must share one dtype (no type promotion): the CPU and CUDA
kernels refuse mixed dtypes, their meta kernels (which the fake trace runs) do not."""


def _check_dtypes(gm: Any, inputs: Sequence[Any]) -> None:
    """Refuse a trace that a real run would fail on a dtype mismatch (an ``int64`` input
    fed to a float ``Linear``), naming the layer, its operator, the dtypes and the input."""
    torch = require_torch()
    for nd in gm.graph.nodes:
        op = getattr(getattr(nd.target, "_overloadpacket", None), "__name__", "")
        if nd.op != "call_function" or op not in _SAME_DTYPE_OPS:
            continue
        dtypes = [a.meta["val"].dtype for a in nd.args
                  if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)]
        if len(set(dtypes)) < 2:
            continue
        names = sorted({str(d).removeprefix("torch.") for d in dtypes})
        layer = (nd.meta.get("dnnplace_layer") or "").removeprefix("model.") or nd.name
        odd = [f"input {i} ({'x'.join(map(str, x.shape))}:{str(x.dtype).removeprefix('torch.')})"
               for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.dtype in dtypes
               and sum(d == x.dtype for d in dtypes) < len(dtypes)]
        hint = f"{', '.join(odd)} reaches it; give it the layer's dtype (--input SHAPE:DTYPE)" if odd else \
            "cast to one dtype in the model"
        raise InputError(f"layer {layer!r} computes aten.{op} on {' and '.join(names)} tensors, which PyTorch "
                         f"refuses (one dtype per matrix product or convolution): {hint}")


def _export(module: Any, args: tuple) -> Any:
    torch = require_torch()
    try:
        return torch.export.export(module, args, strict=False)
    except Exception as exc:  # noqa: BLE001 - every export failure becomes one named error
        msg = str(exc).strip().splitlines()
        first = msg[0] if msg else type(exc).__name__
        op = next((ln.strip() for ln in msg if "aten." in ln or "torch." in ln), "")
        where = f" at {op}" if op and op != first else ""
        shapes = ", ".join(f"{'x'.join(map(str, x.shape))}:{str(x.dtype).removeprefix('torch.')}"
                           for x in args if isinstance(x, torch.Tensor))
        raise InputError(f"the model does not export{where} with input(s) {shapes or 'none'}: "
                         f"{type(exc).__name__}: {first}") from exc


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
        ``ports`` (see :mod:`~dnnplace.pytorch.capture.tiling`).
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
        with _quiet_torch_logs():
            ep = _export(wrapper, fake_inputs)
            t_export = time.perf_counter() - t0
            try:
                gm, kinds, names, outs, cot = _joint(ep.module(), fake_inputs, training=training, wrt_inputs=wrt,
                                                     cotangents=cotangents, block=block)
            except Exception as exc:  # noqa: BLE001
                raise InputError(f"the model exported but its {'joint ' if training else ''}graph could not be "
                                 f"traced: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}") from exc
        _check_dtypes(gm, example_inputs)
    finally:
        restore()
        model.train(was_training)
    cap = merge(gm, kinds, names, outs, training=training, optimizer=optimizer, block=block, wrt=wrt,
                cotangents=cot)
    cap.meta.update({"torch": torch.__version__, "training": training, "optimizer": optimizer if training else None,
                     "export_s": round(t_export, 3), "trace_s": round(time.perf_counter() - t0, 3),
                     "fx_nodes": len(gm.graph.nodes),
                     "inputs": [[list(x.shape), str(x.dtype)] for x in example_inputs if isinstance(x, torch.Tensor)],
                     **({"loss_fn": loss_name(loss_fn)} if training and not block else {})})
    return cap


# ---------------------------------------------------------------------------- graph
def to_graph(cap: Captured, times_ms: np.ndarray, *, kind: str | tuple[str, ...] = "gpu", name: str = "captured",
             cost_meta: dict | None = None) -> OpGraph:
    """The :class:`OpGraph` of a captured table with per-node times (ms) on ``kind`` (or one
    column per kind of a tuple: ``times_ms`` then has shape ``[nodes, kinds]``)."""
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    times = np.asarray(times_ms, dtype=np.float64).reshape(cap.n, len(kinds))
    ids = cap.ids
    return OpGraph(ids=ids, kinds=kinds, compute=times, memory=cap.persistent_bytes + cap.output_bytes,
                   src=cap.src, dst=cap.dst, edge_bytes=cap.edge_bytes, edge_output=cap.edge_output,
                   persistent_bytes=cap.persistent_bytes, output_bytes=cap.output_bytes,
                   colocation=cap.colocation, backward=cap.backward, names=ids, op_types=cap.op_types,
                   layers=cap.layers, roles=cap.roles, edge_batch_scaled=cap.batch_scaled, name=name, unit="ms",
                   meta={"capture": {k: v for k, v in cap.meta.items()}, "cost": dict(cost_meta or {}),
                         **({"loss": ids[cap.loss]} if cap.loss >= 0 else {})})
