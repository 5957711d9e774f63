"""NASNet-A (Zoph, Vasudevan, Shlens & Le, "Learning Transferable Architectures for
Scalable Image Recognition", CVPR 2018), our definition for ImageNet.

Two cells, each a DAG of five blocks; a block adds the results of two operations, each
applied to one of the cell's inputs ``h_i`` (the previous cell's output, "cur" below) and
``h_{i-1}`` (the one before, "prev") or to an earlier block (Fig. 4 of the paper):

Normal cell (stride 1; output: ``prev`` and the five blocks concatenated, ``6 F`` channels)::

    b0 = sep5x5(cur)  + sep3x3(prev)        b3 = avg3x3(prev) + avg3x3(prev)
    b1 = sep5x5(prev) + sep3x3(prev)        b4 = sep3x3(cur)  + cur
    b2 = avg3x3(cur)  + prev

Reduction cell (operations on the cell's inputs have stride 2; output: b1..b4, ``4 F``)::

    b0 = sep5x5(cur) + sep7x7(prev)         b3 = b1 + avg3x3(b0)
    b1 = max3x3(cur) + sep7x7(prev)         b4 = sep3x3(b0) + max3x3(cur)
    b2 = avg3x3(cur) + sep5x5(prev)

A ``sepKxK`` is applied twice: ReLU, depthwise KxK, pointwise 1x1, batch norm (Appendix A).
Each cell first maps ``cur`` to ``F`` channels (ReLU, 1x1 conv, batch norm) and ``prev`` to
the same shape: a factorised reduction (two stride-2 1x1 convolutions, one on a shifted
input, concatenated) when ``prev`` is spatially twice as large, a 1x1 convolution when
only its channels differ. A pooling or identity whose input has other channels or stride
gets a 1x1 convolution (Appendix A).

The ImageNet network ("N @ penultimate filters", Sec. 4 and Fig. 2): a 3x3/2 convolution
with ``32 x stem_multiplier`` filters, two reduction cells at ``F/4`` and ``F/2`` filters,
then three stacks of ``N`` normal cells at ``F``, ``2F`` and ``4F`` filters separated by
reduction cells, ReLU, global average pooling, dropout and a linear classifier. The cell
after a reduction takes the input of that reduction as its ``prev`` (skipping it).
Pesto's "6 cells with 168 filters" is NASNet-A Large, 6 @ 4032 on 331x331 images, whose
published size is 88.9M parameters; "4 @ 1056" (``F = 44``, stem multiplier 1,
224x224) is NASNet-A Mobile, 5.3M. Paper says the training uses ScheduledDropPath and an
auxiliary head; we leave both out (drop-path has no parameters and no placement-relevant
operators beyond a multiply).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.zoo.losses import classification_loss

__all__ = ["NormalCell", "ReductionCell", "NASNet", "nasnet", "nasnet_block"]


def _relu_conv_bn(n_in: int, n_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Conv2d(n_in, n_out, 1, stride=stride, bias=False), nn.BatchNorm2d(n_out))


class _SepConv(nn.Module):
    """``sepKxK``: (ReLU, depthwise KxK, pointwise 1x1, batch norm) twice; stride on the first."""

    def __init__(self, n_in: int, n_out: int, k: int, stride: int):
        super().__init__()
        layers: list[nn.Module] = []
        for a, s in ((n_in, stride), (n_out, 1)):
            layers += [nn.ReLU(), nn.Conv2d(a, a, k, stride=s, padding=k // 2, groups=a, bias=False),
                       nn.Conv2d(a, n_out, 1, bias=False), nn.BatchNorm2d(n_out)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class _Pool(nn.Module):
    """3x3 average (padding not counted) or max pooling; a 1x1 conv + BN if channels change."""

    def __init__(self, kind: str, n_in: int, n_out: int, stride: int):
        super().__init__()
        self.pool = (nn.AvgPool2d(3, stride, padding=1, count_include_pad=False) if kind == "avg"
                     else nn.MaxPool2d(3, stride, padding=1))
        self.project = (nn.Sequential(nn.Conv2d(n_in, n_out, 1, bias=False), nn.BatchNorm2d(n_out))
                        if n_in != n_out else nn.Identity())

    def forward(self, x):
        return self.project(self.pool(x))


def _identity(n_in: int, n_out: int, stride: int) -> nn.Module:
    return _relu_conv_bn(n_in, n_out, stride) if stride != 1 or n_in != n_out else nn.Identity()


class _FactorizedReduction(nn.Module):
    """``prev`` at twice the spatial size to ``F`` channels: ReLU, then two stride-2 1x1
    convolutions (the second on the input shifted by one pixel) concatenated, batch norm."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.a = nn.Conv2d(n_in, n_out // 2, 1, bias=False)
        self.b = nn.Conv2d(n_in, n_out - n_out // 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(n_out)

    def forward(self, x):
        x = torch.relu(x)
        shifted = F.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:]
        return self.bn(torch.cat([self.a(F.avg_pool2d(x, 1, 2)), self.b(F.avg_pool2d(shifted, 1, 2))], 1))


class _Cell(nn.Module):
    """Cell base: ``cur`` to ``F`` channels; ``prev`` adjusted (``prev_mode``: ``"reduce"``
    spatially twice as large, ``"project"`` other channels, ``"same"`` as is, ``"none"`` no
    prev input: the raw ``cur`` is used, as for the first stem cell)."""

    def __init__(self, n_cur: int, n_prev: int, filters: int, prev_mode: str):
        super().__init__()
        self.cur = _relu_conv_bn(n_cur, filters)
        self.prev_mode = prev_mode
        self.prev = {"reduce": lambda: _FactorizedReduction(n_prev, filters),
                     "project": lambda: _relu_conv_bn(n_prev, filters),
                     "same": nn.Identity, "none": nn.Identity}[prev_mode]()
        # channels of the (adjusted) prev input the blocks see
        self.n_prev = n_cur if prev_mode == "none" else filters if prev_mode in ("reduce", "project") else n_prev

    def inputs(self, cur, prev):
        return self.cur(cur), self.prev(cur if self.prev_mode == "none" else prev)


class NormalCell(_Cell):
    """NASNet-A normal cell (module docstring); ``forward(cur, prev)``, ``6 F`` channels out."""

    def __init__(self, n_cur: int, n_prev: int, filters: int, prev_mode: str):
        super().__init__(n_cur, n_prev, filters, prev_mode)
        f, p = filters, self.n_prev
        if p != f:
            raise InputError(f"normal cell: prev input has {p} channels after adjustment, not {f}")
        self.b0 = nn.ModuleList([_SepConv(f, f, 5, 1), _SepConv(p, f, 3, 1)])
        self.b1 = nn.ModuleList([_SepConv(p, f, 5, 1), _SepConv(p, f, 3, 1)])
        self.b2 = _Pool("avg", f, f, 1)
        self.b3 = nn.ModuleList([_Pool("avg", p, f, 1), _Pool("avg", p, f, 1)])
        self.b4 = _SepConv(f, f, 3, 1)

    def forward(self, cur, prev):
        cur, prev = self.inputs(cur, prev)
        b0 = self.b0[0](cur) + self.b0[1](prev)
        b1 = self.b1[0](prev) + self.b1[1](prev)
        b2 = self.b2(cur) + prev
        b3 = self.b3[0](prev) + self.b3[1](prev)
        b4 = self.b4(cur) + cur
        return torch.cat([prev, b0, b1, b2, b3, b4], 1)


class ReductionCell(_Cell):
    """NASNet-A reduction cell (module docstring); ``forward(cur, prev)``, ``4 F`` channels
    at half the spatial size."""

    def __init__(self, n_cur: int, n_prev: int, filters: int, prev_mode: str):
        super().__init__(n_cur, n_prev, filters, prev_mode)
        f, p = filters, self.n_prev
        self.b0 = nn.ModuleList([_SepConv(f, f, 5, 2), _SepConv(p, f, 7, 2)])
        self.b1 = nn.ModuleList([_Pool("max", f, f, 2), _SepConv(p, f, 7, 2)])
        self.b2 = nn.ModuleList([_Pool("avg", f, f, 2), _SepConv(p, f, 5, 2)])
        self.b3 = _Pool("avg", f, f, 1)
        self.b4 = nn.ModuleList([_SepConv(f, f, 3, 1), _Pool("max", f, f, 2)])

    def forward(self, cur, prev):
        cur, prev = self.inputs(cur, prev)
        b0 = self.b0[0](cur) + self.b0[1](prev)
        b1 = self.b1[0](cur) + self.b1[1](prev)
        b2 = self.b2[0](cur) + self.b2[1](prev)
        b3 = b1 + self.b3(b0)
        b4 = self.b4[0](b0) + self.b4[1](cur)
        return torch.cat([b1, b2, b3, b4], 1)


def _half(size: int) -> int:
    """Spatial size after a stride-2 cell (padding ``k // 2``)."""
    return (size + 1) // 2


class NASNet(nn.Module):
    """NASNet-A for ImageNet, ``cells`` normal cells per stack (module docstring)."""

    def __init__(self, *, cells: int, filters: int, stem_multiplier: int, classes: int):
        super().__init__()
        stem = 32 * stem_multiplier
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, stride=2, bias=False), nn.BatchNorm2d(stem))
        # (channels, spatial level) of each output so far: level counts halvings
        outs = [(stem, 0)]
        layers: list[tuple[nn.Module, int, int]] = []  # (cell, index of cur, index of prev)

        def add(kind, f, prev_index):
            (n_cur, lc), (n_prev, lp) = outs[-1], outs[0 if prev_index is None else prev_index]
            mode = "none" if prev_index is None else "reduce" if lp < lc else "project" if n_prev != f else "same"
            cell = (ReductionCell if kind == "r" else NormalCell)(n_cur, n_prev, f, mode)
            layers.append((cell, len(outs) - 1, prev_index))
            outs.append((4 * f, lc + 1) if kind == "r" else (6 * f, lc))

        add("r", filters // 4, None)
        add("r", filters // 2, 0)
        for stack in range(3):
            f = filters * 2 ** stack
            if stack:
                add("r", f, len(outs) - 2)
            for i in range(cells):
                # after a body reduction, prev skips it: the reduction's own prev input
                prev = layers[-1][2] if stack and i == 0 else len(outs) - 2
                add("n", f, prev)
        self.cells = nn.ModuleList(c for c, _, _ in layers)
        self.wiring = [(cur, prev) for _, cur, prev in layers]
        self.head = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.5),
                                  nn.Linear(outs[-1][0], classes))

    def forward(self, x):
        outs = [self.stem(x)]
        for cell, (cur, prev) in zip(self.cells, self.wiring):
            outs.append(cell(outs[cur], outs[prev] if prev is not None else None))
        return self.head(outs[-1])


def nasnet(*, batch: int, cells: int, filters: int, image: int, stem_multiplier: int, classes: int):
    """NASNet-A on ``image x image`` RGB inputs (see the module docstring)."""
    model = NASNet(cells=cells, filters=filters, stem_multiplier=stem_multiplier, classes=classes)
    return model, (torch.randn(batch, 3, image, image),), classification_loss


def nasnet_block(*, batch: int, filters: int, image: int, part: str = "normal", **_):
    """One cell of the first stack, as in the middle of the network: ``part="normal"`` maps
    ``(cur, prev)``, both ``6F`` channels, to ``6F``; ``part="reduction"`` (the first body
    reduction, ``2F`` filters) maps them to ``8F`` channels at half the size. The spatial
    size is the first stack's: ``image`` after the stem convolution and two stem cells."""
    size = _half(_half((image - 3) // 2 + 1))
    x, prev = torch.randn(batch, 6 * filters, size, size), torch.randn(batch, 6 * filters, size, size)
    if part == "normal":
        return NormalCell(6 * filters, 6 * filters, filters, "project"), (x, prev)
    if part == "reduction":
        return ReductionCell(6 * filters, 6 * filters, 2 * filters, "project"), (x, prev)
    raise InputError(f"nasnet block part {part!r} is not 'normal' or 'reduction'")
