"""Inception-V3 (Szegedy, Vanhoucke, Ioffe, Shlens & Wojna, "Rethinking the Inception
Architecture for Computer Vision", CVPR 2016), our definition.

Table 1 of the paper: a stem of five convolutions and two poolings on 299x299 inputs, three
35x35 Inception modules (Fig. 5: 1x1, 5x5 and double 3x3 branches, the 5x5 as in the
released model), a grid reduction (Fig. 10), four 17x17 modules with factorised 1x7 / 7x1
convolutions (Fig. 6, 128/160/160/192 channels in the 7x7 branches), a second grid
reduction, two 8x8 modules with expanded 1x3 / 3x1 filter banks (Fig. 7), global average
pooling, dropout and a 1000-way FC layer. Every convolution is bias-free and followed by
batch norm (eps 0.001) and ReLU (Sec. 8, "BN-auxiliary"). The auxiliary classifier
(Sec. 4) sits on the last 17x17 module: 5x5/3 average pooling, 1x1 conv to 128,
5x5 conv to 768, FC 1000.

Parameters: 23,834,568 without the auxiliary classifier, 27,161,264 with it (the widely
quoted "23.8M" and "27.2M"); ``aux=True`` (default) makes the training graph the paper
trains, with the auxiliary loss weighted by :data:`~dnnplace.pytorch.capture.zoo.losses.AUX_WEIGHT`.
``width`` scales every channel count (small variants for tests).
"""

from __future__ import annotations

import torch
from torch import nn

from dnnplace.pytorch.capture.zoo.losses import inception_loss

__all__ = ["inception_v3"]


class _Conv(nn.Module):
    """Bias-free convolution, batch norm (eps 0.001), ReLU."""

    def __init__(self, n_in: int, n_out: int, kernel, **kw):
        super().__init__()
        self.conv = nn.Conv2d(n_in, n_out, kernel, bias=False, **kw)
        self.bn = nn.BatchNorm2d(n_out, eps=0.001)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class _Branches(nn.Module):
    """Parallel branches whose outputs are concatenated on the channel axis."""

    def __init__(self, *branches: nn.Module):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        return torch.cat([b(x) for b in self.branches], 1)


def _seq(*mods):
    return nn.Sequential(*mods)


def _module_a(n_in, pool, w):  # Fig. 5, 35x35
    c = w
    return _Branches(_Conv(n_in, c(64), 1),
                     _seq(_Conv(n_in, c(48), 1), _Conv(c(48), c(64), 5, padding=2)),
                     _seq(_Conv(n_in, c(64), 1), _Conv(c(64), c(96), 3, padding=1), _Conv(c(96), c(96), 3, padding=1)),
                     _seq(nn.AvgPool2d(3, 1, padding=1), _Conv(n_in, c(pool), 1))), c(64) + c(64) + c(96) + c(pool)


def _reduction_a(n_in, w):  # Fig. 10, 35x35 -> 17x17
    c = w
    return _Branches(_Conv(n_in, c(384), 3, stride=2),
                     _seq(_Conv(n_in, c(64), 1), _Conv(c(64), c(96), 3, padding=1), _Conv(c(96), c(96), 3, stride=2)),
                     nn.MaxPool2d(3, 2)), c(384) + c(96) + n_in


def _module_c(n_in, c7, w):  # Fig. 6, 17x17, factorised 7x7
    c = w
    return _Branches(_Conv(n_in, c(192), 1),
                     _seq(_Conv(n_in, c(c7), 1), _Conv(c(c7), c(c7), (1, 7), padding=(0, 3)),
                          _Conv(c(c7), c(192), (7, 1), padding=(3, 0))),
                     _seq(_Conv(n_in, c(c7), 1), _Conv(c(c7), c(c7), (7, 1), padding=(3, 0)),
                          _Conv(c(c7), c(c7), (1, 7), padding=(0, 3)), _Conv(c(c7), c(c7), (7, 1), padding=(3, 0)),
                          _Conv(c(c7), c(192), (1, 7), padding=(0, 3))),
                     _seq(nn.AvgPool2d(3, 1, padding=1), _Conv(n_in, c(192), 1))), 4 * c(192)


def _reduction_b(n_in, w):  # 17x17 -> 8x8
    c = w
    return _Branches(_seq(_Conv(n_in, c(192), 1), _Conv(c(192), c(320), 3, stride=2)),
                     _seq(_Conv(n_in, c(192), 1), _Conv(c(192), c(192), (1, 7), padding=(0, 3)),
                          _Conv(c(192), c(192), (7, 1), padding=(3, 0)), _Conv(c(192), c(192), 3, stride=2)),
                     nn.MaxPool2d(3, 2)), c(320) + c(192) + n_in


class _Split(nn.Module):
    """A convolution followed by parallel 1x3 and 3x1 convolutions, concatenated (Fig. 7)."""

    def __init__(self, head: nn.Module, mid: int, n_out: int):
        super().__init__()
        self.head = head
        self.a = _Conv(mid, n_out, (1, 3), padding=(0, 1))
        self.b = _Conv(mid, n_out, (3, 1), padding=(1, 0))

    def forward(self, x):
        x = self.head(x)
        return torch.cat([self.a(x), self.b(x)], 1)


def _module_e(n_in, w):  # Fig. 7, 8x8, expanded filter banks
    c = w
    return _Branches(_Conv(n_in, c(320), 1),
                     _Split(_Conv(n_in, c(384), 1), c(384), c(384)),
                     _Split(_seq(_Conv(n_in, c(448), 1), _Conv(c(448), c(384), 3, padding=1)), c(384), c(384)),
                     _seq(nn.AvgPool2d(3, 1, padding=1), _Conv(n_in, c(192), 1))), c(320) + 4 * c(384) + c(192)


class _Aux(nn.Module):
    """Auxiliary classifier on the 17x17 grid (Sec. 4)."""

    def __init__(self, n_in: int, classes: int, w):
        super().__init__()
        self.body = _seq(nn.AvgPool2d(5, 3), _Conv(n_in, w(128), 1), _Conv(w(128), w(768), 5),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(w(768), classes)

    def forward(self, x):
        return self.fc(self.body(x))


class InceptionV3(nn.Module):
    """Inception-V3 of Table 1; returns ``(logits, aux_logits)`` when ``aux`` else logits."""

    def __init__(self, classes: int = 1000, aux: bool = True, width: float = 1.0):
        super().__init__()

        def w(ch: int) -> int:
            return max(1, round(ch * width))

        self.stem = _seq(_Conv(3, w(32), 3, stride=2), _Conv(w(32), w(32), 3), _Conv(w(32), w(64), 3, padding=1),
                         nn.MaxPool2d(3, 2), _Conv(w(64), w(80), 1), _Conv(w(80), w(192), 3), nn.MaxPool2d(3, 2))
        mods, n = [], w(192)
        for pool in (32, 64, 64):
            m, n = _module_a(n, pool, w)
            mods.append(m)
        m, n = _reduction_a(n, w)
        mods.append(m)
        for c7 in (128, 160, 160, 192):
            m, n = _module_c(n, c7, w)
            mods.append(m)
        self.grid17 = _seq(*mods)
        self.aux = _Aux(n, classes, w) if aux else None
        mods = []
        m, n = _reduction_b(n, w)
        mods.append(m)
        for _ in range(2):
            m, n = _module_e(n, w)
            mods.append(m)
        self.grid8 = _seq(*mods)
        self.head = _seq(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(n, classes))

    def forward(self, x):
        x = self.grid17(self.stem(x))
        logits = self.head(self.grid8(x))
        return (logits, self.aux(x)) if self.aux is not None else logits


def inception_v3(*, batch: int, image: int, classes: int, aux: bool, width: float):
    """Inception-V3 on ``image x image`` RGB inputs (see the module docstring)."""
    return InceptionV3(classes, aux, width), (torch.randn(batch, 3, image, image),), inception_loss
