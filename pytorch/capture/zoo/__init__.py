"""Model zoo: the DNN families the placement papers train, defined in PyTorch.

The papers place training graphs of Inception-V3, VGG-19, ResNet-200, AlexNet, LeNet,
BERT-large, GPT-2, a Transformer encoder-decoder, GNMT/NMT, RNNLM and NASNet (FastT
Sec. 6.2, Celeritas Sec. 6.1, Pesto Sec. 5.1, PARDNN Sec. 5). :data:`ZOO` lists one entry per
variant the papers name; :func:`build` makes the model, example inputs and a training loss
for :mod:`dnnplace.pytorch.capture` (the capture helper: ``torch.export`` / joint
forward+backward graphs into :class:`~dnnplace.graphs.OpGraph`); :func:`block` makes the
repeating unit of a tileable family (a Transformer layer, an LSTM step, a NASNet cell) so a
giant graph can be captured once per block and tiled.

Every model is defined in this package, with the architecture of its original paper
(cited in each module): torchvision and transformers do not install beside the CPU
torch 2.13 wheel this project uses, and a definition of our own keeps the graph
independent of their releases. Parameter counts are checked against the published ones in
``tests/test_zoo.py``. Three conventions make every model capturable as a training graph:

* every parameter receives a gradient (no pooling layer in BERT, no tied heads, no
  KV cache, auxiliary heads enter the loss);
* recurrent models are unrolled from ``nn.LSTMCell`` steps (``nn.LSTM`` exports as one
  opaque node);
* models are built on the ``meta`` device by default, so no weights are allocated and
  no GPU is needed; ``device="cpu"`` builds a real model.

The loss is ``loss_fn(output, *inputs) -> scalar``: cross-entropy against class 0 for
the image classifiers (labels do not change the graph or its costs), next-token
cross-entropy for the language models, masked-LM cross-entropy over every position for
BERT, next-token cross-entropy of the target sentence for the translation models.

Listing the zoo needs no torch: builders are named as ``"module:function"`` and imported
on first use; without torch, :func:`build` and :func:`block` raise the
:class:`InputError` of :func:`dnnplace.pytorch.capture.require_torch` naming the extra.

>>> ZOO["resnet-50"].family, ZOO["resnet-50"].defaults["batch"]
('resnet', 32)
>>> sorted({e.family for e in ZOO.values()})  # doctest: +NORMALIZE_WHITESPACE
['alexnet', 'bert', 'gnmt', 'gpt2', 'inception', 'lenet', 'nasnet', 'nmt', 'resnet', 'rnnlm',
 'transformer', 'vgg']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.ops import require_torch

__all__ = ["ZooEntry", "ZOO", "TILEABLE", "build", "block", "entry"]


@dataclass(frozen=True)
class ZooEntry:
    """One model variant of the zoo.

    Attributes
    ----------
    name : str
        Zoo name, e.g. ``"bert-large"``.
    family : str
        Architecture family (``"resnet"``, ``"bert"``, ``"nasnet"``, ...).
    summary : str
        One line: what the variant is.
    paper_ref : str
        Which placement paper uses it, and the architecture paper it follows.
    defaults : dict
        Keyword arguments of the builder (``batch``, ``seq``, widths, depths); any of them
        can be overridden in :func:`build`. ``layers`` (Transformer, LSTM models) and
        ``cells`` (NASNet) count the repeating units :func:`block` returns.
    build : str
        ``"module:function"`` of the builder, relative to this package; the function takes
        the ``defaults`` keys, creates its tensors on torch's current default device (set by
        :func:`build`) and returns ``(model, inputs, loss_fn)``.
    block : str or None
        ``"module:function"`` of the block builder of a tileable family, else None.
    """

    name: str
    family: str
    summary: str
    paper_ref: str
    defaults: dict[str, Any] = field(default_factory=dict)
    build: str = ""
    block: str | None = None


def _entries() -> dict[str, ZooEntry]:
    cnn, inc, att, rnn, nas = "convnets", "inception", "attention", "recurrent", "nasnet"
    rows: list[ZooEntry] = []

    def add(name, family, summary, paper_ref, module, fn, defaults, block=None):
        rows.append(ZooEntry(name, family, summary, paper_ref, defaults, f"{module}:{fn}",
                             f"{module}:{block}" if block else None))

    add("lenet-5", "lenet", "LeNet-5: 2 conv + 3 fully connected layers, 32x32 grey images, 10 classes",
        "FastT Table 1 (batch 256); LeCun et al. 1998", cnn, "lenet",
        {"batch": 256, "image": 32, "classes": 10, "width": 1.0})
    add("alexnet", "alexnet", "AlexNet: 5 conv (grouped as on two GPUs) + 3 fully connected layers, 227x227",
        "FastT Table 1 (batch 256); Krizhevsky et al. 2012", cnn, "alexnet",
        {"batch": 256, "image": 227, "classes": 1000, "width": 1.0})
    add("vgg-19", "vgg", "VGG-19 (configuration E): 16 conv 3x3 + 3 fully connected layers, 224x224",
        "FastT Table 1 (batch 64); Simonyan & Zisserman 2015", cnn, "vgg",
        {"batch": 64, "depth": 19, "image": 224, "classes": 1000, "width": 1.0})
    for depth, stages, batch in ((50, (3, 4, 6, 3), 32), (200, (3, 24, 36, 3), 32)):
        add(f"resnet-{depth}", "resnet", f"ResNet-{depth}: bottleneck blocks {list(stages)}, 224x224",
            "FastT Table 1 ResNet200 (batch 32); He et al. 2016", cnn, "resnet",
            {"batch": batch, "stages": stages, "image": 224, "classes": 1000, "width": 1.0})
    add("inception-v3", "inception", "Inception-V3 with its auxiliary classifier, 299x299",
        "FastT Table 1 (batch 64), Celeritas Table 2 (batch 512); Szegedy et al. 2016", inc, "inception_v3",
        {"batch": 64, "image": 299, "classes": 1000, "aux": True, "width": 1.0})

    bert = {"vocab": 30522, "positions": 512, "type_vocab": 2, "dropout": 0.1}
    for name, layers, hidden, heads in (("bert-base", 12, 768, 12), ("bert-large", 24, 1024, 16)):
        add(name, "bert", f"BERT encoder {layers}L/{heads}H/{hidden} with an untied masked-LM head, no pooler",
            "FastT Table 1 Bert-large (batch 16, sequence 64); Devlin et al. 2019", att, "bert",
            {"batch": 16, "seq": 64, "layers": layers, "hidden": hidden, "heads": heads, "ffn": 4 * hidden, **bert},
            "bert_block")
    for name, layers, hidden, heads in (("gpt2", 12, 768, 12), ("gpt2-medium", 24, 1024, 16),
                                        ("gpt2-large", 36, 1280, 20), ("gpt2-xl", 48, 1600, 25)):
        add(name, "gpt2", f"GPT-2 decoder {layers}L/{heads}H/{hidden} with an untied LM head, no KV cache",
            "giant graphs for scale tests; Radford et al. 2019", att, "gpt2",
            {"batch": 8, "seq": 1024, "layers": layers, "hidden": hidden, "heads": heads, "vocab": 50257,
             "positions": 1024, "dropout": 0.1}, "gpt2_block")
    for name, layers, heads, hidden, batch, ref in (
            ("transformer-base", 6, 8, 512, 32, "Vaswani et al. 2017 (base)"),
            ("transformer-big", 6, 16, 1024, 32, "Vaswani et al. 2017 (big)"),
            ("transformer-10l-8h-1024", 10, 8, 1024, 32, "Pesto Sec. 5.1 (batch 32)"),
            ("transformer-12l-8h-1024", 12, 8, 1024, 32, "Pesto Sec. 5.1 (batch 32)"),
            ("transformer-6l-16h-2048", 6, 16, 2048, 32, "Pesto Sec. 5.1 (batch 32)"),
            ("transformer-12l-16h-2048", 12, 16, 2048, 256, "Celeritas Sec. 6.1 (batch 256)")):
        add(name, "transformer",
            f"Transformer encoder-decoder, {layers}+{layers} layers, {heads} heads, d_model {hidden}",
            f"{ref}; architecture Vaswani et al. 2017", att, "transformer",
            {"batch": batch, "seq": 64, "layers": layers, "hidden": hidden, "heads": heads, "ffn": 4 * hidden,
             "vocab": 37000, "dropout": 0.1}, "transformer_block")

    for layers, hidden in ((2, 2048), (4, 2048), (16, 1024)):
        add(f"rnnlm-{layers}x{hidden}", "rnnlm", f"RNNLM: {layers} stacked LSTM layers x {hidden} units, unrolled",
            "Pesto Sec. 5.1 (batch 128), FastT Table 1; Zaremba et al. 2014, Jozefowicz et al. 2016",
            rnn, "rnnlm", {"batch": 128, "seq": 35, "layers": layers, "hidden": hidden, "vocab": 10000,
                           "dropout": 0.2}, "lstm_block")
    for layers, hidden, batch, ref in ((2, 1024, 128, "Pesto Sec. 5.1"), (4, 1024, 128, "Pesto Sec. 5.1"),
                                       (4, 2048, 512, "Celeritas Sec. 6.1")):
        add(f"nmt-{layers}x{hidden}", "nmt",
            f"NMT: {layers}-layer LSTM encoder and decoder x {hidden} units, Luong attention, unrolled",
            f"{ref} (batch {batch}); Luong et al. 2015", rnn, "nmt",
            {"batch": batch, "seq": 50, "layers": layers, "hidden": hidden, "vocab": 32000, "dropout": 0.2,
             "gnmt": False}, "lstm_block")
    for layers, ref in ((4, "FastT Table 1 GNMT 4 layers (batch 128)"), (8, "Wu et al. 2016 (full size)")):
        add(f"gnmt-{layers}", "gnmt",
            f"GNMT: {layers}-layer LSTM encoder (bidirectional bottom layer, residuals) and decoder x 1024, "
            "additive attention fed to every decoder layer",
            f"{ref}; Wu et al. 2016", rnn, "nmt",
            {"batch": 128, "seq": 50, "layers": layers, "hidden": 1024, "vocab": 32000, "dropout": 0.2,
             "gnmt": True}, "lstm_block")

    for cells, filters, image, stem, ref in ((4, 212, 331, 3, "Pesto Sec. 5.1 (batch 32)"),
                                             (6, 148, 331, 3, "Pesto Sec. 5.1 (batch 32)"),
                                             (6, 168, 331, 3, "Pesto Sec. 5.1; NASNet-A Large 6@4032"),
                                             (4, 44, 224, 1, "NASNet-A Mobile 4@1056")):
        add(f"nasnet-{cells}x{filters}", "nasnet",
            f"NASNet-A: 3 stacks of {cells} normal cells, {filters} filters, 2 stem + 2 reduction cells, "
            f"{image}x{image}",
            f"{ref}; Zoph et al. 2018", nas, "nasnet",
            {"batch": 32, "cells": cells, "filters": filters, "image": image, "stem_multiplier": stem,
             "classes": 1000}, "nasnet_block")
    return {e.name: e for e in rows}


ZOO: dict[str, ZooEntry] = _entries()
"""Every zoo variant by name."""

TILEABLE = tuple(sorted({e.family for e in ZOO.values() if e.block}))
"""Families whose repeating unit :func:`block` returns."""


def entry(name: str) -> ZooEntry:
    """The zoo entry ``name``; :class:`InputError` listing the zoo if there is none.

    >>> entry("gnmt-4").defaults["layers"]
    4
    >>> entry("resnet-51")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: unknown zoo model 'resnet-51'; the zoo: alexnet, bert-base, ...
    """
    try:
        return ZOO[name]
    except KeyError:
        raise InputError(f"unknown zoo model {name!r}; the zoo: {', '.join(sorted(ZOO))}") from None


def _resolve(ref: str) -> Callable[..., Any]:
    require_torch()
    module, fn = ref.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), fn)


def _params(e: ZooEntry, overrides: dict[str, Any], **given: Any) -> dict[str, Any]:
    """The builder's keyword arguments: defaults, then ``given`` (None = keep), then overrides."""
    params = dict(e.defaults)
    for key, value in [*given.items(), *overrides.items()]:
        if value is None and key in given:
            continue
        if key in given and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            # a batch of 0 traces an empty step with no FLOPs (--batch, --seq)
            raise InputError(f"zoo model {e.name!r}: --{key} {value!r}: must be a positive integer")
        if key not in params:
            raise InputError(f"zoo model {e.name!r} has no parameter {key!r}; "
                             f"it takes: {', '.join(sorted(params))}")
        params[key] = value
    return params


def build(name: str, *, batch: int | None = None, seq: int | None = None, device: str = "meta",
          dtype: str | None = None, **overrides: Any):
    """Build a zoo model, its example inputs and its training loss.

    Parameters
    ----------
    name : str
        A key of :data:`ZOO`.
    batch, seq : int, optional
        Batch size and sequence length (``seq`` only for sequence models); default from
        the entry.
    device : str
        ``"meta"`` (default: shapes only, no weights) or a real device such as ``"cpu"``.
    dtype : str, optional
        Floating point dtype of parameters and float inputs (``"float16"``, ``"bfloat16"``);
        float32 by default.
    **overrides
        Any other key of the entry's ``defaults`` (``layers``, ``hidden``, ``width``, ...):
        small variants for tests, or other sizes.

    Returns
    -------
    model : torch.nn.Module
        In training mode.
    inputs : tuple of torch.Tensor
        ``model(*inputs)`` runs the forward pass.
    loss_fn : callable
        ``loss_fn(model(*inputs), *inputs)`` is a scalar loss; its backward pass reaches
        every parameter.
    """
    e = entry(name)
    params = _params(e, overrides, batch=batch, seq=seq)
    torch = require_torch()
    with torch.device(device):  # parameters and inputs are created there: no copies
        model, inputs, loss_fn = _resolve(e.build)(**params)
    if dtype is not None:
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype) or not dt.is_floating_point:
            raise InputError(f"dtype {dtype!r} is not a floating point torch dtype")
        model = model.to(dt)
        inputs = tuple(x.to(dt) if x.is_floating_point() else x for x in inputs)
    return model.train(), inputs, loss_fn


def block(family_or_name: str, *, device: str = "meta", **overrides: Any):
    """The repeating unit of a tileable family, with example inputs.

    ``family_or_name`` is a zoo name (the block takes that variant's sizes) or a family of
    :data:`TILEABLE` (its first variant's sizes). Overrides are the entry's ``defaults``
    keys plus ``part`` where a family has several units:

    * ``bert``, ``gpt2``: one encoder / decoder layer, inputs ``(x,)`` of shape
      ``(batch, seq, hidden)``; ``layers`` of them make the model.
    * ``transformer``: ``part="encoder"`` (default) ``(x,)`` or ``part="decoder"``
      ``(y, memory)``; ``layers`` of each.
    * ``rnnlm``, ``nmt``, ``gnmt``: ``part="step"`` (default), one LSTM cell step
      ``(x, h, c) -> (h, c)`` at ``hidden`` units; ``part="layer"``, one layer unrolled
      over ``seq`` steps ``(x_seq, h, c) -> (y_seq, h, c)``.
    * ``nasnet``: ``part="normal"`` (default) or ``"reduction"``, one NASNet-A cell
      ``(x, x_prev) -> y`` at ``filters`` and the cell's input size.

    Returns
    -------
    module : torch.nn.Module
        In training mode; its output is a tensor or a tuple of tensors.
    inputs : tuple of torch.Tensor
    """
    if family_or_name in ZOO:
        e = ZOO[family_or_name]
    else:
        e = next((x for x in ZOO.values() if x.family == family_or_name), None)
        if e is None:
            raise InputError(f"unknown zoo model or family {family_or_name!r}; tileable families: "
                             f"{', '.join(TILEABLE)}; the zoo: {', '.join(sorted(ZOO))}")
    if e.block is None:
        raise InputError(f"zoo model {e.name!r} ({e.family}) has no repeating block; "
                         f"tileable families: {', '.join(TILEABLE)}")
    part = overrides.pop("part", None)
    params = _params(e, overrides)
    with require_torch().device(device):
        module, inputs = _resolve(e.block)(**params, **({"part": part} if part else {}))
    return module.train(), inputs
