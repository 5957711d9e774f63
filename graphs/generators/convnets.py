"""Convolutional training graphs with roofline costs: a plain convolution chain (family
``"conv-chain"``, Tensor Holography-like) and a pre-activation wide ResNet (family
``"wide-resnet"``).

``conv-chain``: an input, ``layers`` 3x3 convolutions at full resolution (the first
``in_channels -> channels``, the last ``channels -> out_channels``, the others
``channels -> channels``), each followed by a bias add and, except the last, a ReLU, then a
loss: the network of Tensor Holography (Shi et al., Nature 2021: 30 convolutions of 24
filters, RGB-D in, amplitude and phase out), which Celeritas Sec. 6.2.1 places.

``wide-resnet``: WRN-d-k of Zagoruyko and Komodakis (d = 6 N + 4): a 3x3 stem of 16
channels, three groups of ``units`` = N residual units at widths ``16k, 32k, 64k`` (the
second and third start with a stride-2 unit, whose shortcut is a 1x1 convolution), each
unit ``bn -> relu -> conv3x3 -> bn -> relu -> conv3x3`` plus its shortcut in an ``add``;
then ``bn -> relu -> pool -> fc -> loss``. WRN-610-14 (N = 101, k = 14) has the 1.91e9
parameters of PARDNN's WRN (Table 3: 610 layers, 101 units, widening 14).

Costs (as :mod:`dnnplace.graphs.generators.lstm`): a convolution or the fc takes
FLOPs / ``gpu_flops`` (``2 * batch * H_out * W_out * C_in * C_out * k * k``), every other
operator the bytes it touches / ``gpu_bandwidth``, each plus ``launch_ms``; all compute times
are then multiplied by ``compute_scale`` (1: the roofline; a smaller factor stands for a
faster device, which raises the communication-to-computation ratio) and a small lognormal
jitter (``jitter``, seeded); a kind other than ``gpu`` (``cpu``) takes 20 times as long.
Tensors are ``batch * C * H * W * dtype_bytes``.

Training graphs (``training=True``) mirror every forward operator with a gradient operator
(``backward_factor`` times its time; edges reversed, each gradient w.r.t. an input its own
``output``, docs/semantics.md 2.1), send a convolution's and a batch norm's input and a ReLU's
output to its gradient (the stashed activations), and give every weighted operator a
``param`` node (its weights, a zero-indegree source) and an ``apply`` node (the update, fed by
the parameter and the weight gradient; ``optimizer_slots`` copies of the weights more of
persistent memory: 2 for Adam, 1 for momentum SGD). Parameter, forward operator, gradient and
update share a colocation group (TensorFlow's ``colocate_gradients_with_ops``); ``roles`` says
which is which. ``layers`` holds each node's convolution layer (chain) or residual unit.

``n`` (optional, at least the operator count): TensorFlow's bookkeeping nodes up to ``n``
nodes in all: pairs ``Const -> Identity`` feeding the operators in turn (launch time, 16-byte
tensors, no colocation), so half of them are zero-indegree sources (Celeritas Sec. 5: about
1,300 of Tensor Holography's 3,810 nodes have indegree 0). Without ``n`` there are none.

>>> g = conv_chain(layers=3, channels=8, height=16, width=16, batch=2)
>>> g.meta["generator"]["convolutions"], g.n  # 10 forward operators, 10 gradients, 6 parameters, 6 updates
(3, 32)
>>> h = wide_resnet(units=1, widen=1, height=8, width=8, batch=1)
>>> h.meta["generator"]["convolutions"], h.meta["generator"]["params"] > 0
(9, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["conv_chain", "wide_resnet"]

_SAVES_INPUT = ("conv", "bn", "fc", "loss")  # their gradient reads the forward input
_SAVES_OUTPUT = ("relu",)                    # their gradient reads the forward output
_AUX_BYTES = 16.0


class _Net:
    """The forward operators of a network and their costs; :meth:`graph` adds the backward
    pass, the parameters, the updates and the bookkeeping nodes."""

    def __init__(self, batch: int, gpu_flops: float, gpu_bandwidth: float, launch_ms: float, dtype_bytes: int):
        self.batch, self.flops, self.bw, self.launch, self.B = batch, gpu_flops, gpu_bandwidth, launch_ms, dtype_bytes
        self.ids: list[str] = []
        self.ms: list[float] = []
        self.out: list[float] = []
        self.weights: list[float] = []  # weight bytes of a forward operator (its param node's)
        self.kind: list[str] = []
        self.layer: list[int] = []
        self.inputs: list[list[int]] = []
        self.convs = 0

    def tensor(self, c: int, h: int, w: int) -> float:
        return float(self.batch * c * h * w * self.B)

    def op(self, name: str, kind: str, ms: float, out_bytes: float, inputs: Sequence[int], layer: int,
           weight_bytes: float = 0.0) -> int:
        self.ids.append(name)
        self.ms.append(self.launch + ms)
        self.out.append(out_bytes)
        self.weights.append(weight_bytes)
        self.kind.append(kind)
        self.layer.append(layer)
        self.inputs.append(list(inputs))
        return len(self.ids) - 1

    def elementwise(self, name: str, kind: str, x: int, layer: int, reads: int = 1, weight_bytes: float = 0.0,
                    extra: Sequence[int] = ()) -> int:
        """An operator touching ``reads`` tensors of ``x``'s size and writing one."""
        b = self.out[x]
        return self.op(name, kind, (reads + 1) * b / self.bw * 1e3, b, [x, *extra], layer, weight_bytes)

    def conv(self, name: str, x: int, shape: tuple[int, int, int], c_out: int, layer: int, k: int = 3,
             stride: int = 1) -> tuple[int, tuple[int, int, int]]:
        c_in, h, w = shape
        ho, wo = -(-h // stride), -(-w // stride)
        flops = 2.0 * self.batch * ho * wo * c_in * c_out * k * k
        self.convs += 1
        v = self.op(name, "conv", flops / self.flops * 1e3, self.tensor(c_out, ho, wo), [x], layer,
                    float(c_in * c_out * k * k * self.B))
        return v, (c_out, ho, wo)

    def graph(self, *, n: int | None, training: bool, backward_factor: float, optimizer_slots: int,
              compute_scale: float, jitter: float, seed: int, kinds: Sequence[str], name: str,
              meta: dict) -> OpGraph:
        ids, ms, out, kind, layer = list(self.ids), list(self.ms), list(self.out), list(self.kind), list(self.layer)
        persistent = [0.0] * len(ids)
        role = ["compute"] * len(ids)
        backward = [False] * len(ids)
        group = list(range(len(ids)))
        src: list[int] = []
        dst: list[int] = []
        eb: list[float] = []
        eo: list[int] = []

        def node(nm: str, t: float, ob: float, kd: str, ly: int, rl: str, grp: int, bwd: bool,
                 pb: float = 0.0) -> int:
            ids.append(nm)
            ms.append(t)
            out.append(ob)
            kind.append(kd)
            layer.append(ly)
            role.append(rl)
            group.append(grp)
            backward.append(bwd)
            persistent.append(pb)
            return len(ids) - 1

        def edge(u: int, v: int, b: float, o: int = 0) -> None:
            src.append(u)
            dst.append(v)
            eb.append(b)
            eo.append(o)

        n_fwd = len(self.ids)
        for v in range(n_fwd):
            for u in self.inputs[v]:
                edge(u, v, out[u])
        param = {}
        for v in range(n_fwd):
            if self.weights[v] > 0:
                param[v] = node(f"{ids[v]}/weights", self.launch, 0.0, "param", layer[v], "param", v, False,
                                self.weights[v])
                edge(param[v], v, self.weights[v])
        if training:
            grad = {}
            for v in range(n_fwd - 1, -1, -1):
                grad[v] = node(f"grad/{ids[v]}", self.launch + (ms[v] - self.launch) * backward_factor, out[v],
                               "grad_" + kind[v], layer[v], "grad", v, True)
            for v in range(n_fwd):
                for i, u in enumerate(self.inputs[v]):
                    edge(grad[v], grad[u], out[u], i)  # the gradient w.r.t. input i
                    if kind[v] in _SAVES_INPUT:
                        edge(u, grad[v], out[u])
                if kind[v] in _SAVES_OUTPUT:
                    edge(v, grad[v], out[v])
            for v, p in param.items():
                wb = self.weights[v]
                upd = node(f"apply/{ids[v]}", self.launch + (2 + optimizer_slots) * wb / self.bw * 1e3, 0.0,
                           "apply", layer[v], "apply", v, True, optimizer_slots * wb)
                if kind[v] in ("conv", "fc"):
                    edge(p, grad[v], wb)  # the weights, for the gradient w.r.t. the input
                edge(p, upd, wb)
                edge(grad[v], upd, wb, len(self.inputs[v]))  # the weight gradient: its own output
        core = len(ids)
        if n is not None:
            if n < core:
                raise InputError(f"{meta['family']}: n={n} is below the operator count {core}")
            for j in range((n - core) // 2):
                v = j % core
                c = node(f"aux/{j}/const", self.launch, _AUX_BYTES, "const", layer[v], "compute", -1, backward[v])
                i = node(f"aux/{j}/identity", self.launch, _AUX_BYTES, "identity", layer[v], "compute", -1,
                         backward[v])
                edge(c, i, _AUX_BYTES)
                edge(i, v, _AUX_BYTES)
            if (n - core) % 2:
                c = node("aux/const", self.launch, _AUX_BYTES, "const", layer[0], "compute", -1, False)
                edge(c, 0, _AUX_BYTES)
        rng = np.random.default_rng(seed)
        base = np.asarray(ms) * compute_scale * np.exp(jitter * rng.standard_normal(len(ids)))
        compute = np.column_stack([base if k == "gpu" else base * 20.0 for k in kinds])
        out_b, pers_b = np.asarray(out), np.asarray(persistent)
        meta = {"generator": {**meta, "convolutions": self.convs, "params": int(sum(self.weights) / self.B),
                              "operators": core, "training": training, "compute_scale": compute_scale,
                              "seed": seed}}
        return OpGraph(ids=ids, kinds=tuple(kinds), compute=compute, memory=out_b + pers_b,
                       src=np.asarray(src, dtype=np.int64), dst=np.asarray(dst, dtype=np.int64),
                       edge_bytes=np.asarray(eb), edge_output=np.asarray(eo, dtype=np.int64),
                       persistent_bytes=pers_b, output_bytes=out_b, colocation=np.asarray(group, dtype=np.int64),
                       backward=np.asarray(backward), names=ids, op_types=kind, layers=layer, roles=role,
                       name=name, unit="ms", meta=meta)


def _check(family: str, **sizes: int) -> None:
    for key, value in sizes.items():
        if not isinstance(value, int | np.integer) or value < 1:
            raise InputError(f"{family}: {key} must be an integer >= 1, got {value!r}")


def conv_chain(n: int | None = None, *, layers: int = 30, channels: int = 24, in_channels: int = 4,
               out_channels: int = 6, height: int = 384, width: int = 384, batch: int = 32, kernel: int = 3,
               training: bool = True, optimizer_slots: int = 2, seed: int = 0, kinds: Sequence[str] = ("gpu",),
               gpu_flops: float = 12e12, gpu_bandwidth: float = 700e9, launch_ms: float = 0.01,
               backward_factor: float = 2.0, compute_scale: float = 1.0, dtype_bytes: int = 4,
               jitter: float = 0.05, name: str | None = None) -> OpGraph:
    """A plain convolution chain (module docstring); the defaults are Tensor Holography's
    network (30 layers of 24 filters, RGB-D 384 x 384 in) at Celeritas' batch 32 with Adam."""
    _check("conv-chain", layers=layers, channels=channels, in_channels=in_channels, out_channels=out_channels,
           height=height, width=width, batch=batch, kernel=kernel)
    net = _Net(batch, gpu_flops, gpu_bandwidth, launch_ms, dtype_bytes)
    shape = (in_channels, height, width)
    x = net.op("input", "input", 0.0, net.tensor(*shape), [], -1)
    for i in range(layers):
        c_out = out_channels if i == layers - 1 else channels
        x, shape = net.conv(f"conv{i}", x, shape, c_out, i, kernel)
        x = net.elementwise(f"bias{i}", "bias", x, i, weight_bytes=float(c_out * dtype_bytes))
        if i < layers - 1:
            x = net.elementwise(f"relu{i}", "relu", x, i)
    net.op("loss", "loss", 2 * net.out[x] / gpu_bandwidth * 1e3, float(dtype_bytes), [x], layers)
    meta = {"family": "conv-chain", "layers": layers, "channels": channels, "height": height, "width": width,
            "batch": batch}
    return net.graph(n=n, training=training, backward_factor=backward_factor, optimizer_slots=optimizer_slots,
                     compute_scale=compute_scale, jitter=jitter, seed=seed, kinds=kinds, meta=meta,
                     name=name or f"conv-chain-{layers}x{channels}" + ("-train" if training else ""))


def wide_resnet(n: int | None = None, *, units: int = 101, widen: int = 14, height: int = 32, width: int = 32,
                batch: int = 1, classes: int = 10, training: bool = True, optimizer_slots: int = 1, seed: int = 0,
                kinds: Sequence[str] = ("gpu",), gpu_flops: float = 12e12, gpu_bandwidth: float = 700e9,
                launch_ms: float = 0.01, backward_factor: float = 2.0, compute_scale: float = 1.0,
                dtype_bytes: int = 4, jitter: float = 0.05, name: str | None = None) -> OpGraph:
    """A pre-activation wide ResNet WRN-(6 units + 4)-widen (module docstring); the defaults are
    PARDNN's WRN-610-14 at batch 1 on 32 x 32 images."""
    _check("wide-resnet", units=units, widen=widen, height=height, width=width, batch=batch, classes=classes)
    net = _Net(batch, gpu_flops, gpu_bandwidth, launch_ms, dtype_bytes)
    shape = (3, height, width)
    x = net.op("input", "input", 0.0, net.tensor(*shape), [], -1)
    x, shape = net.conv("stem", x, shape, 16, 0)
    unit = 0
    for g, c in enumerate((16 * widen, 32 * widen, 64 * widen)):
        for u in range(units):
            unit += 1
            stride = 2 if g > 0 and u == 0 else 1
            p = f"g{g}u{u}/"
            a = net.elementwise(p + "bn1", "bn", x, unit, reads=2, weight_bytes=2.0 * shape[0] * dtype_bytes)
            a = net.elementwise(p + "relu1", "relu", a, unit)
            short = x
            if stride > 1 or shape[0] != c:
                short, _ = net.conv(p + "shortcut", a, shape, c, unit, k=1, stride=stride)
            h, s2 = net.conv(p + "conv1", a, shape, c, unit, stride=stride)
            h = net.elementwise(p + "bn2", "bn", h, unit, reads=2, weight_bytes=2.0 * c * dtype_bytes)
            h = net.elementwise(p + "relu2", "relu", h, unit)
            h, shape = net.conv(p + "conv2", h, s2, c, unit)
            x = net.elementwise(p + "add", "add", h, unit, reads=2, extra=[short])
    unit += 1
    x = net.elementwise("bn", "bn", x, unit, reads=2, weight_bytes=2.0 * shape[0] * dtype_bytes)
    x = net.elementwise("relu", "relu", x, unit)
    x = net.op("pool", "pool", 2 * net.out[x] / gpu_bandwidth * 1e3, net.tensor(shape[0], 1, 1), [x], unit)
    x = net.op("fc", "fc", 2.0 * batch * shape[0] * classes / gpu_flops * 1e3, net.tensor(classes, 1, 1), [x], unit,
               float(shape[0] * classes * dtype_bytes))
    net.op("loss", "loss", 2 * net.out[x] / gpu_bandwidth * 1e3, float(dtype_bytes), [x], unit)
    meta = {"family": "wide-resnet", "depth": 6 * units + 4, "units": units, "widen": widen, "height": height,
            "width": width, "batch": batch}
    return net.graph(n=n, training=training, backward_factor=backward_factor, optimizer_slots=optimizer_slots,
                     compute_scale=compute_scale, jitter=jitter, seed=seed, kinds=kinds, meta=meta,
                     name=name or f"wrn-{6 * units + 4}-{widen}" + ("-train" if training else ""))
