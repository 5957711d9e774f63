"""Operator-level LSTM grid (RNNLM-style): ``layers x steps`` cells, forward and backward.

Each cell ``(l, t)`` has four operators, with the recurrences of a stacked LSTM:

``matmul[l,t]``  ``[x, h_{t-1}] @ W_l`` (``2 * batch * (in + hidden) * 4 * hidden`` FLOPs);
                 inputs: ``hidden[l-1,t]`` (or ``embed[t]``) and ``hidden[l,t-1]``;
``gates[l,t]``   sigmoid/tanh of the four gate blocks (elementwise, ``4 * batch * hidden``);
``cell[l,t]``    ``c_t = f * c_{t-1} + i * g``; inputs: ``gates[l,t]``, ``cell[l,t-1]``;
``hidden[l,t]``  ``h_t = o * tanh(c_t)``; inputs: ``cell[l,t]``, ``gates[l,t]``.

Per step an ``embed[t]`` lookup feeds layer 0 and a ``project[t]`` (``h @ W_out``, vocab
logits) plus ``loss[t]`` sit on top; ``loss_sum`` joins the losses. Training graphs
(``training=True``) mirror every forward operator with a gradient operator (edges
reversed, plus an edge from each forward operator to its gradient: the saved
activation) and add one ``update[lyr]`` per layer that sums the weight gradients of all
steps (a wide fan-in, as in real RNN training graphs). A gradient operator's out-edges
carry different tensors (the gradient with respect to each forward input, and a
matmul's weight gradient), each its own ``output``, sent separately (docs/semantics.md 2.1); a
forward operator's out-edges carry its one output.

Costs: compute time = FLOPs / ``gpu_flops`` for matrix products and bytes touched /
``gpu_bandwidth`` for elementwise operators, plus a ``launch_ms`` kernel overhead;
backward operators take ``backward_factor`` times their forward partner; the ``cpu``
kind (if listed) is ``cpu_slowdown`` times slower. Tensor bytes follow from ``batch``,
``hidden``, ``embed`` and ``vocab`` (``dtype_bytes`` each): ``h``/``c`` are
``batch * hidden``, gate pre-activations ``4 * batch * hidden``, logits ``batch * vocab``.
Static memory of a node = its output tensor plus its share of the layer's weights
(weights spread evenly over the layer's ``matmul`` operators, an approximation: a device
holding any step of a layer is charged that fraction of the weights). ``layers`` holds
each node's layer (``-1`` below the first LSTM layer, ``L`` above the last), which is
what an expert layer-wise split uses (Pesto Sec. 5.2).

Default size: every step's activations stay allocated (stashed for the backward pass),
so memory grows with ``steps``; when ``batch`` is not given and batch 128 would exceed
``memory_budget`` (8 GB by default, as for the random DAGs), the largest batch that
keeps within it is used (``meta["generator"]["memory_budget"]`` then records the
budget). An explicit ``batch`` is always used as given.

The family is registered as ``"lstm"`` in :data:`dnnplace.graphs.generators.GENERATORS`; other
model families (Transformer, NMT, NASNet, Inception) can be added as sibling modules in
the same style.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators.random_dag import DEFAULT_MEMORY_BUDGET
from dnnplace.graphs.graph import OpGraph

__all__ = ["lstm_grid"]

_DEFAULT_BATCH = 128


def _memory_model(layers: int, steps: int, hidden: int, embed: int, vocab: int, training: bool,
                  B: float) -> tuple[float, float]:
    """Total static memory of :func:`lstm_grid` as ``per_batch * batch + fixed`` (bytes):
    activations grow with the batch (once more for the gradients when training), the
    weights and ``loss_sum`` do not."""
    copies = 2 if training else 1
    per_step = embed + layers * 10 * hidden + vocab + 1  # embed, 2 x 4h + 2 x h per layer, logits, loss
    weights = vocab * embed + sum(((embed if lyr == 0 else hidden) + hidden) * 4 * hidden for lyr in range(layers)) \
        + hidden * vocab
    return copies * steps * per_step * B, copies * B + weights * B


def lstm_grid(n: int | None = None, *, layers: int = 2, steps: int | None = None, hidden: int = 2048,
              batch: int | None = None, embed: int | None = None, vocab: int = 10000, training: bool = True,
              seed: int = 0, kinds: Sequence[str] = ("gpu", "cpu"), gpu_flops: float = 12e12,
              gpu_bandwidth: float = 700e9, launch_ms: float = 0.01, backward_factor: float = 2.0,
              cpu_slowdown: float = 20.0, dtype_bytes: int = 4, jitter: float = 0.05,
              memory_budget: float | None = DEFAULT_MEMORY_BUDGET, name: str | None = None) -> OpGraph:
    """An RNNLM-like operator graph (see the module docstring).

    Parameters
    ----------
    n : int, optional
        Approximate node count; sets ``steps`` when ``steps`` is not given.
    layers, steps, hidden, batch, embed, vocab
        Model shape (``embed`` defaults to ``hidden``; ``steps`` to 20). ``batch``
        defaults to 128, or to the largest smaller batch whose graph keeps its total
        memory within ``memory_budget`` (every step's activations are stashed, so a
        long unrolled graph outgrows any GPU otherwise: 200k nodes at batch 128 need
        about 490 GB). An explicit ``batch`` is used as given.
    memory_budget : float or None
        Total memory (bytes) the default batch must keep to, default 8 GB (as
        :func:`~dnnplace.graphs.generators.random_dag.random_layered_dag`); ``None``:
        always 128.
    training : bool
        Add the backward pass and per-layer weight updates.
    seed : int
        Seeds a small multiplicative jitter (``jitter``) on compute times.
    kinds : sequence of str
        Device kinds with a compute column (``"gpu"`` first; ``"cpu"`` slower).

    Examples
    --------
    >>> g = lstm_grid(layers=2, steps=3, hidden=64, batch=8, vocab=100, training=False)
    >>> g.n, int(g.level.max()) > 3
    (34, True)
    """
    if layers < 1:
        raise InputError(f"lstm: layers must be >= 1, got {layers}")
    per_step = 4 * layers + 3
    if steps is None:
        if n is not None:
            steps = max(1, round((n / (2 if training else 1) - 1) / per_step))
        else:
            steps = 20
    if steps < 1:
        raise InputError(f"lstm: steps must be >= 1, got {steps}")
    embed = hidden if embed is None else embed
    B = float(dtype_bytes)
    if memory_budget is not None and not memory_budget > 0:
        raise InputError(f"lstm: memory_budget must be a positive number of bytes or None, got {memory_budget!r}")
    budget_batch = False
    if batch is None:
        batch = _DEFAULT_BATCH
        per_batch, fixed = _memory_model(layers, steps, hidden, embed, vocab, training, B)
        if memory_budget is not None and fixed + per_batch * batch > memory_budget:
            batch = int(max(1, min(_DEFAULT_BATCH, (memory_budget - fixed) // per_batch)))
            budget_batch = True
    rng = np.random.default_rng(seed)
    ids: list[str] = []
    gpu_ms: list[float] = []
    out_bytes: list[float] = []
    weight_bytes: list[float] = []
    layer_of: list[int] = []
    op_type: list[str] = []
    src: list[int] = []
    dst: list[int] = []
    ebytes: list[float] = []
    eout: list[int] = []  # output of the source each edge carries (docs/semantics.md 2.1)

    def node(name: str, ms: float, outb: float, layer: int, kind: str, wb: float = 0.0) -> int:
        ids.append(name)
        gpu_ms.append(launch_ms + ms)
        out_bytes.append(outb)
        weight_bytes.append(wb)
        layer_of.append(layer)
        op_type.append(kind)
        return len(ids) - 1

    def edge(u: int, v: int) -> None:
        src.append(u)
        dst.append(v)
        ebytes.append(out_bytes[u])
        eout.append(0)

    mm_ms = lambda fl: fl / gpu_flops * 1e3  # noqa: E731
    ew_ms = lambda by: by / gpu_bandwidth * 1e3  # noqa: E731
    hb = batch * hidden * B
    gb = 4 * hb
    w_layer = [((embed if lyr == 0 else hidden) + hidden) * 4 * hidden * B for lyr in range(layers)]
    H = {}
    C = {}
    G = {}
    M = {}
    E = {}
    P = {}
    LOSS = {}
    for t in range(steps):
        E[t] = node(f"embed[{t}]", ew_ms(batch * embed * B), batch * embed * B, -1, "embed",
                    vocab * embed * B / steps)
        for lyr in range(layers):
            fin = (embed if lyr == 0 else hidden) + hidden
            M[lyr, t] = node(f"matmul[{lyr},{t}]", mm_ms(2 * batch * fin * 4 * hidden), gb, lyr, "matmul",
                             w_layer[lyr] / steps)
            edge(E[t] if lyr == 0 else H[lyr - 1, t], M[lyr, t])
            if t > 0:
                edge(H[lyr, t - 1], M[lyr, t])
            G[lyr, t] = node(f"gates[{lyr},{t}]", ew_ms(2 * gb), gb, lyr, "gates")
            edge(M[lyr, t], G[lyr, t])
            C[lyr, t] = node(f"cell[{lyr},{t}]", ew_ms(4 * hb), hb, lyr, "cell")
            edge(G[lyr, t], C[lyr, t])
            if t > 0:
                edge(C[lyr, t - 1], C[lyr, t])
            H[lyr, t] = node(f"hidden[{lyr},{t}]", ew_ms(3 * hb), hb, lyr, "hidden")
            edge(C[lyr, t], H[lyr, t])
            edge(G[lyr, t], H[lyr, t])
        P[t] = node(f"project[{t}]", mm_ms(2 * batch * hidden * vocab), batch * vocab * B, layers, "project",
                    hidden * vocab * B / steps)
        edge(H[layers - 1, t], P[t])
        LOSS[t] = node(f"loss[{t}]", ew_ms(3 * batch * vocab * B), batch * B, layers, "loss")
        edge(P[t], LOSS[t])
    total = node("loss_sum", ew_ms(steps * batch * B), B, layers, "loss")
    for t in range(steps):
        edge(LOSS[t], total)
    n_fwd = len(ids)
    backward = [False] * n_fwd
    if training:
        fwd_edges = list(zip(src, dst))
        grad = {}
        for v in range(n_fwd - 1, -1, -1):  # reverse topological order of creation
            grad[v] = node(f"grad_{ids[v]}", (gpu_ms[v] - launch_ms) * backward_factor, out_bytes[v],
                           layer_of[v], "grad_" + op_type[v])
            backward.append(True)
        n_in = [0] * n_fwd
        for u, v in fwd_edges:
            edge(grad[v], grad[u])
            eout[-1] = n_in[v]  # the gradient with respect to each input is its own tensor
            n_in[v] += 1
        for v in range(n_fwd):
            if op_type[v] in ("matmul", "gates", "cell", "project"):
                edge(v, grad[v])  # saved activation
        for lyr in range(layers):
            upd = node(f"update[{lyr}]", ew_ms(3 * w_layer[lyr]), 0.0, lyr, "update")
            backward.append(True)
            for t in range(steps):
                src.append(grad[M[lyr, t]])
                dst.append(upd)
                ebytes.append(w_layer[lyr] / steps)
                eout.append(n_in[M[lyr, t]])  # the weight gradient: the matmul gradient's last output
    n_all = len(ids)
    base = np.asarray(gpu_ms) * np.exp(jitter * rng.standard_normal(n_all))
    cols = []
    for k in kinds:
        cols.append(base if k == "gpu" else base * cpu_slowdown)
    compute = np.column_stack(cols)
    out_b = np.asarray(out_bytes)
    w_b = np.asarray(weight_bytes)
    meta = {"generator": {"family": "lstm", "layers": layers, "steps": steps, "hidden": hidden, "batch": batch,
                          "vocab": vocab, "training": training, "seed": seed}}
    if budget_batch:  # recorded only when the budget chose the batch (small graphs stay byte-identical)
        meta["generator"]["memory_budget"] = memory_budget
    return OpGraph(ids=ids, kinds=tuple(kinds), compute=compute, memory=out_b + w_b,
                   src=np.asarray(src, dtype=np.int64), dst=np.asarray(dst, dtype=np.int64),
                   edge_bytes=np.asarray(ebytes), edge_output=np.asarray(eout, dtype=np.int64),
                   persistent_bytes=w_b, output_bytes=out_b,
                   backward=np.asarray(backward), names=ids, op_types=op_type, layers=layer_of,
                   name=name or f"lstm-{layers}x{steps}-h{hidden}" + ("-train" if training else ""),
                   unit="ms", meta=meta)
