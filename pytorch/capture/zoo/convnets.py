"""Plain convolutional classifiers: LeNet-5, AlexNet, VGG, ResNet.

Architectures as published (our definitions, not torchvision's):

* **LeNet-5** (LeCun et al., "Gradient-based learning applied to document recognition",
  Proc. IEEE 1998, Sec. II.B): C1 6@5x5, S2, C3 16@5x5, S4, C5/F 120, F6 84, output 10,
  tanh. Paper says C3 connects to subsets of S2's maps, S2/S4 have trainable coefficients
  and the output layer is RBF; we use the dense C3, average pooling and a linear output
  (61,706 parameters instead of 60,000).
* **AlexNet** (Krizhevsky, Sutskever & Hinton, NeurIPS 2012, Sec. 3.5 and Fig. 2):
  96@11x11/4, 256@5x5, 384@3x3, 384@3x3, 256@3x3 with conv2/4/5 grouped in two (the two-GPU
  split), local response normalisation after conv1/2, overlapping 3x3/2 max pooling,
  FC 4096-4096-1000 with dropout 0.5; 227x227 inputs; 60,965,224 parameters.
* **VGG** (Simonyan & Zisserman, ICLR 2015, Table 1): configurations A/B/D/E (11/13/16/19
  weight layers) of 3x3 convolutions, 2x2 max pooling, FC 4096-4096-1000 with dropout;
  VGG-19 (E) has 143,667,240 parameters.
* **ResNet** (He et al., CVPR 2016, Table 1): 7x7/2 stem, 3x3/2 max pool, four stages of
  bottleneck blocks (1x1, 3x3, 1x1 with 4x expansion, batch norm, projection shortcuts
  where the shape changes), global average pooling, FC 1000. ResNet-50 is stages
  (3, 4, 6, 3), 25,557,032 parameters; ResNet-200 (He et al., ECCV 2016) is (3, 24, 36, 3),
  64,673,832 parameters. The stride-2 sits on the 3x3 convolution (as in most training
  code; the paper puts it on the first 1x1, same parameters and shapes).

``width`` scales every channel and hidden-unit count (small variants for tests); the
first fully connected layer's input size follows from ``image``.
"""

from __future__ import annotations

import torch
from torch import nn

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.zoo.losses import classification_loss

__all__ = ["lenet", "alexnet", "vgg", "resnet", "Bottleneck", "VGG_CONFIGS"]


def _ch(c: int, width: float, multiple: int = 1) -> int:
    """``c * width`` rounded to a positive multiple of ``multiple``."""
    return max(multiple, round(c * width / multiple) * multiple)


def _flat_size(make_features, channels: int, image: int) -> int:
    """Number of features the module ``make_features()`` makes from one ``channels x image x
    image`` input (a throwaway copy on the meta device: shapes only)."""
    with torch.device("meta"), torch.no_grad():
        return make_features()(torch.empty(1, channels, image, image)).numel()


class _Classifier(nn.Module):
    """``features`` then flatten then ``head``."""

    def __init__(self, features: nn.Module, head: nn.Module):
        super().__init__()
        self.features, self.head = features, head

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


def _images(batch: int, channels: int, image: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, channels, image, image),)


def lenet(*, batch: int, image: int, classes: int, width: float):
    """LeNet-5 (see the module docstring) on ``image x image`` grey images."""
    c1, c3, f5, f6 = (_ch(c, width) for c in (6, 16, 120, 84))

    def features():
        return nn.Sequential(nn.Conv2d(1, c1, 5), nn.Tanh(), nn.AvgPool2d(2),
                             nn.Conv2d(c1, c3, 5), nn.Tanh(), nn.AvgPool2d(2))

    head = nn.Sequential(nn.Linear(_flat_size(features, 1, image), f5), nn.Tanh(), nn.Linear(f5, f6), nn.Tanh(),
                         nn.Linear(f6, classes))
    return _Classifier(features(), head), _images(batch, 1, image), classification_loss


def _fc_head(n_in: int, hidden: int, classes: int) -> nn.Sequential:
    """The FC-hidden-hidden-classes head with dropout 0.5 of AlexNet and VGG."""
    return nn.Sequential(nn.Dropout(0.5), nn.Linear(n_in, hidden), nn.ReLU(inplace=True),
                         nn.Dropout(0.5), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, classes))


def alexnet(*, batch: int, image: int, classes: int, width: float):
    """AlexNet with the two-GPU grouping of conv2/4/5 (see the module docstring)."""
    c1, c2, c3, c4, c5 = (_ch(c, width, 2) for c in (96, 256, 384, 384, 256))

    def lrn():  # Sec. 3.3: k = 2, n = 5, alpha = 1e-4, beta = 0.75
        return nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=2.0)

    def features():
        return nn.Sequential(
            nn.Conv2d(3, c1, 11, stride=4), nn.ReLU(inplace=True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c1, c2, 5, padding=2, groups=2), nn.ReLU(inplace=True), lrn(), nn.MaxPool2d(3, 2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c3, c4, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.Conv2d(c4, c5, 3, padding=1, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))

    head = _fc_head(_flat_size(features, 3, image), _ch(4096, width), classes)
    return _Classifier(features(), head), _images(batch, 3, image), classification_loss


VGG_CONFIGS: dict[int, tuple] = {
    11: (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    13: (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    16: (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    19: (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
}
"""VGG configurations A, B, D, E of Simonyan & Zisserman Table 1, by weight-layer count."""


def vgg(*, batch: int, depth: int, image: int, classes: int, width: float):
    """VGG-``depth`` without batch norm (see the module docstring)."""
    if depth not in VGG_CONFIGS:
        raise InputError(f"vgg depth {depth} is not one of {sorted(VGG_CONFIGS)}")

    def features():
        layers: list[nn.Module] = []
        channels = 3
        for c in VGG_CONFIGS[depth]:
            if c == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(channels, _ch(c, width), 3, padding=1), nn.ReLU(inplace=True)]
                channels = _ch(c, width)
        return nn.Sequential(*layers)

    head = _fc_head(_flat_size(features, 3, image), _ch(4096, width), classes)
    return _Classifier(features(), head), _images(batch, 3, image), classification_loss


class Bottleneck(nn.Module):
    """ResNet bottleneck: 1x1 (``mid``), 3x3 (``mid``, ``stride``), 1x1 (``4 * mid``), each
    with batch norm, plus the shortcut (a strided 1x1 projection where the shape changes)."""

    def __init__(self, n_in: int, mid: int, stride: int = 1):
        super().__init__()
        out = 4 * mid
        self.body = nn.Sequential(
            nn.Conv2d(n_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, out, 1, bias=False), nn.BatchNorm2d(out))
        self.shortcut = (nn.Sequential(nn.Conv2d(n_in, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))
                         if stride != 1 or n_in != out else nn.Identity())
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


def resnet(*, batch: int, stages: tuple[int, ...], image: int, classes: int, width: float):
    """ResNet with bottleneck blocks, ``stages[i]`` blocks in stage ``i`` (see the module
    docstring)."""
    stem = _ch(64, width)
    layers: list[nn.Module] = [nn.Conv2d(3, stem, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(stem),
                               nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, padding=1)]
    channels = stem
    for i, blocks in enumerate(stages):
        mid = _ch(64 * 2 ** i, width)
        for j in range(blocks):
            layers.append(Bottleneck(channels, mid, stride=2 if i > 0 and j == 0 else 1))
            channels = 4 * mid
    layers += [nn.AdaptiveAvgPool2d(1)]
    model = _Classifier(nn.Sequential(*layers), nn.Linear(channels, classes))
    return model, _images(batch, 3, image), classification_loss
