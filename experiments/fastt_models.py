"""The model graphs of FastT's experiments (:mod:`dnnplace.experiments.fastt`).

:func:`family_graph`: the bundled captured PyTorch training graphs with roofline V100 costs
(``graphs/workloads/captured``), scaled to other batch sizes by a
:class:`~dnnplace.graphs.batch_model.BatchModel`; LeNet, AlexNet and VGG-19 are not captured and
are *generated* by :func:`model_graph`: layer lists of the published architectures turned into
training graphs with parameter / gradient / update roles, each op timed by a roofline of a V100
(``PEAK_FLOPS`` at ``PEAK_BW``, plus a ``FLOOR_MS`` kernel floor).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs import OpGraph
from dnnplace.graphs.errors import InputError

__all__ = ["model_graph", "family_graph", "FAMILIES", "GENERATED", "PEAK_FLOPS", "PEAK_BW", "FLOOR_MS"]

PEAK_FLOPS = 14e12   # V100 fp32 (FLOP/s)
PEAK_BW = 900e9      # HBM2 (bytes/s)
FLOOR_MS = 5e-3      # kernel launch (ms)


def _conv(name, cin, cout, hw, k=3, stride=1):
    return ("conv", name, cin, cout, hw, k, stride)


def _vgg19():
    layers, c, hw = [], 3, 224
    for blk, (n, cout) in enumerate(((2, 64), (2, 128), (4, 256), (4, 512), (4, 512)), start=1):
        for i in range(1, n + 1):
            layers.append(_conv(f"conv{blk}_{i}", c, cout, hw))
            layers.append(("relu", f"relu{blk}_{i}", cout, hw))
            c = cout
        layers.append(("pool", f"pool{blk}", c, hw))
        hw //= 2
    return layers + [("fc", "fc6", c * hw * hw, 4096), ("relu", "relu6", 4096, 1), ("fc", "fc7", 4096, 4096),
                     ("relu", "relu7", 4096, 1), ("fc", "fc8", 4096, 1000)]


def _alexnet():
    return [_conv("conv1", 3, 64, 55, 11), ("relu", "relu1", 64, 55), ("pool", "pool1", 64, 55),
            _conv("conv2", 64, 192, 27, 5), ("relu", "relu2", 192, 27), ("pool", "pool2", 192, 27),
            _conv("conv3", 192, 384, 13), _conv("conv4", 384, 256, 13), _conv("conv5", 256, 256, 13),
            ("pool", "pool5", 256, 13), ("fc", "fc6", 256 * 36, 4096), ("fc", "fc7", 4096, 4096),
            ("fc", "fc8", 4096, 1000)]


def _lenet():
    return [_conv("conv1", 1, 6, 28, 5), ("pool", "pool1", 6, 28), _conv("conv2", 6, 16, 10, 5),
            ("pool", "pool2", 16, 10), ("fc", "fc1", 400, 120), ("fc", "fc2", 120, 84), ("fc", "fc3", 84, 10)]


def _bert_large(seq: int = 64):
    layers = []
    for i in range(24):  # hidden 1024, FFN 4096; tokens = batch * seq enter as the fc batch
        layers += [("fc", f"l{i}_qkv", 1024, 3072), ("attn", f"l{i}_attn", 1024, seq),
                   ("fc", f"l{i}_proj", 1024, 1024), ("fc", f"l{i}_ffn1", 1024, 4096),
                   ("fc", f"l{i}_ffn2", 4096, 1024)]
    return layers


FAMILIES = {"lenet": (_lenet, 1), "alexnet": (_alexnet, 1), "vgg19": (_vgg19, 1), "bert-large": (_bert_large, 64)}
GENERATED = ("lenet", "alexnet", "vgg19")  # no captured graph bundled: always generated


def _op(layer, batch: int, tokens: int) -> tuple[str, float, float, float, float]:
    """(op type, forward FLOPs, weight bytes, output bytes, bytes touched)."""
    kind = layer[0]
    if kind == "conv":
        _, _, cin, cout, hw, k, _ = layer
        out = batch * hw * hw * cout * 4.0
        w = cin * cout * k * k * 4.0
        return "Conv2D", 2.0 * batch * hw * hw * cin * cout * k * k, w, out, out + w + batch * hw * hw * cin * 4.0
    if kind == "fc":
        _, _, cin, cout = layer
        rows = batch * tokens
        touched = (rows * (cin + cout) + cin * cout) * 4.0
        return "MatMul", 2.0 * rows * cin * cout, cin * cout * 4.0, rows * cout * 4.0, touched
    if kind == "attn":
        _, _, hidden, seq = layer
        out = batch * seq * hidden * 4.0
        return "BatchMatMul", 4.0 * batch * seq * seq * hidden, 0.0, out, 3 * out
    _, _, c, hw = layer
    out = batch * hw * hw * c * 4.0 * (tokens if kind == "relu" and hw == 1 else 1)
    return ("Relu" if kind == "relu" else "MaxPool"), 0.0, 0.0, out, 2 * out


def _ms(flops: float, nbytes: float) -> float:
    return FLOOR_MS + 1e3 * max(flops / PEAK_FLOPS, nbytes / PEAK_BW)


def model_graph(family: str, batch: int, times: dict[str, float] | None = None) -> OpGraph:
    """A generated training graph of ``family`` at ``batch`` (module docstring); ``times``
    overrides the roofline time (ms) of named ops.

    Per layer ``x`` with weights: ``x/w`` (param) -> ``x`` (forward) ; backward ``x_bp``
    (input gradient, the forward time) and ``x_bpf`` (weight gradient, grad role, the
    forward time) ; ``x/apply`` (update, 3 weight passes of memory traffic). Layers
    without weights get one backward op. Static memory: weights x 4 (weights, gradient,
    two optimizer slots) on the parameter; every forward output is stashed for the
    backward; backward outputs are transient (0).

    >>> g = model_graph("lenet", 8)
    >>> g.n, sorted(set(g.roles))
    (30, ['apply', 'compute', 'grad', 'param'])
    """
    build, tokens = FAMILIES[family]
    ids, comp, mem, pers, roles, types, bwd = [], [], [], [], [], [], []
    edges: list[tuple[str, str, float]] = []

    def node(i, t, m, role, op, back, p=0.0):
        ids.append(i)
        comp.append(t)
        mem.append(m)
        pers.append(p)
        roles.append(role)
        types.append(op)
        bwd.append(back)

    layers = build()
    prev, prev_out, fwd = None, batch * tokens * 4.0, []
    for layer in layers:
        name = layer[1]
        op, flops, w, out, touched = _op(layer, batch, tokens)
        node(name, _ms(flops, touched), out, "compute", op, False)
        if w:
            node(f"{name}/w", 0.0, 4 * w, "param", "Variable", False, 4 * w)
            edges.append((f"{name}/w", name, w))
        if prev is not None:
            edges.append((prev, name, prev_out))
        fwd.append((name, op, flops, w, out, touched, prev, prev_out))
        prev, prev_out = name, out
    node("loss", FLOOR_MS, 0.0, "compute", "Loss", True)
    edges.append((prev, "loss", prev_out))
    grad_in, grad_bytes = "loss", prev_out
    for name, op, flops, w, out, touched, p, p_out in reversed(fwd):
        bp = f"{name}_bp"
        bp_type = {"Conv2D": "Conv2DBackpropInput", "MatMul": "MatMulGradInput"}.get(op, f"{op}Grad")
        node(bp, _ms(flops, touched), 0.0, "compute", bp_type, True)  # gradients are transient
        edges += [(grad_in, bp, grad_bytes), (name, bp, out)]
        if w:
            bpf = f"{name}_bpf"
            node(bpf, _ms(flops, touched), 0.0, "grad", {"Conv2D": "Conv2DBackpropFilter"}.get(op, "MatMulGradWeight"),
                 True)
            edges += [(grad_in, bpf, grad_bytes)] + ([(p, bpf, p_out)] if p is not None else [])
            node(f"{name}/apply", _ms(0.0, 3 * w), 0.0, "apply", "ApplyMomentum", True)
            edges += [(bpf, f"{name}/apply", w), (f"{name}/w", f"{name}/apply", w)]
        grad_in, grad_bytes = bp, p_out
    for name, t in (times or {}).items():
        comp[ids.index(name)] = float(t)
    return OpGraph.from_ids(ids, [(a, b) for a, b, _ in edges], kinds=["gpu"], compute=np.array(comp)[:, None],
                            memory=mem, persistent_bytes=pers, edge_bytes=[b for _, _, b in edges], roles=roles,
                            op_types=types, names=ids, backward=bwd, name=f"{family}-b{batch}",
                            meta={"batch": batch, "generator": "fastt roofline V100"})


def family_graph(family: str, batch: int | None = None, *, half_batch: float = 0.0) -> tuple[OpGraph, str]:
    """The graph of ``family`` at global ``batch`` and where it comes from: a bundled captured
    graph (``graphs/workloads/captured``, roofline V100 costs) scaled from its captured batch
    by a :class:`~dnnplace.graphs.batch_model.BatchModel` with ``half_batch``, or, for the
    families not captured (LeNet, AlexNet, VGG-19), :func:`model_graph`."""
    from dnnplace.data import workloads_dir
    from dnnplace.graphs.batch_model import BatchModel
    from dnnplace.graphs.io import load_instance

    path = workloads_dir() / "captured" / f"{family}.json"
    if family in FAMILIES and (family in GENERATED or not path.is_file()):
        return model_graph(family, int(batch if batch is not None else 32)), "generated (roofline V100)"
    if not path.is_file():
        raise InputError(f"no captured graph {path.name} and no generator for family {family!r}")
    g = load_instance(path).graph
    b0 = int(g.meta["capture"]["inputs"][0][0][0])
    g = g.with_(meta={**g.meta, "batch": b0})
    if batch is not None and int(batch) != b0:
        g = BatchModel(b0, half_batch=half_batch).at(g, int(batch))
    scaled = f", scaled to {int(batch)}" if batch is not None and int(batch) != b0 else ""
    return g, f"captured (roofline V100) at batch {b0}{scaled}"
