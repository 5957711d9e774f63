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

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.pytorch.capture.assembly import Block, Call, assemble

__all__ = ["Block", "Call", "capture_block", "assemble", "tile", "default_wiring"]


def capture_block(module, inputs: Sequence, *, cost="roofline:v100", optimizer: str = "adam",
                  name: str = "block", grad_inputs: bool | Sequence[bool] = True,
                  cotangents: Sequence[bool] | None = None, acc_cache: dict | None = None) -> Block:
    """Trace one block's joint forward+backward graph with input gradients, with costs.

    ``grad_inputs`` and ``cotangents`` are those of :func:`~.fx.trace`: which inputs get a
    gradient (default: every floating point one) and which outputs a cotangent (default
    all; none: a head whose first output is the loss). ``acc_cache`` keeps the costs of
    gradient-accumulation adds by shape and dtype across calls with the same cost model.
    """
    from dnnplace.pytorch.capture.costs import cost_model
    from dnnplace.pytorch.capture.fx import to_graph, trace
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
    from dnnplace.pytorch.capture.fx import trace
    from dnnplace.pytorch.capture.ops import require_torch
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
