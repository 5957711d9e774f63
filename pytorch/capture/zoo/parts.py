"""Whole-model training graphs of the zoo at any depth, assembled from captured parts.

A model is split into the parts its ``forward`` runs one after the other: a stem (the
embeddings, a stem convolution), its repeating units (a Transformer layer, an LSTM cell
step, a NASNet cell), the joins between them (an LSTM layer's ``stack``) and a head that
ends in the loss. Every distinct part (same structure, input shapes and gradient flags) is
captured once with :func:`~dnnplace.pytorch.capture.tiling.capture_block` and the parts are
wired with :func:`~dnnplace.pytorch.capture.tiling.assemble`, which adds autograd's
gradient accumulations and shares the LSTM steps' parameters. The result has the nodes,
edges, FLOPs and bytes of a direct capture of the same model (``tests/test_whole.py``
checks it exactly on small models), in seconds for 200k operators:

* ``bert``, ``gpt2`` (:func:`stack_program`): embeddings, ``layers`` encoder or decoder
  layers, the LM head and its loss;
* ``rnnlm`` (:func:`rnnlm_program`): the grid of ``layers x seq`` LSTM cell steps
  (GNMT-style graphs are such grids), one ``stack`` + dropout between layers;
* ``nasnet`` (:func:`nasnet_program`): the stem, the ``3 cells + 4`` cells wired as
  NASNet-A wires them (each cell reads the previous two outputs), the classifier head.

Which inputs need a gradient and which outputs receive one is found by a run of the
parts on the ``meta`` device (``requires_grad`` of every value), as autograd decides it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from dnnplace.graphs.errors import InputError

__all__ = ["Part", "Step", "whole_model", "stack_program", "rnnlm_program", "nasnet_program", "PROGRAMS"]


class Part(nn.Module):
    """A piece of a model's ``forward``: ``fn(self, *inputs)`` over the given members (the
    model's own submodules, so parameter names and layers stay the model's)."""

    def __init__(self, fn: Callable, **members):
        super().__init__()
        self.fn = fn
        for key, value in members.items():
            setattr(self, key, value)

    def forward(self, *inputs):
        return self.fn(self, *inputs)

    def extra_repr(self) -> str:
        return self.fn.__name__


@dataclass
class Step:
    """One call of a program: ``module(*inputs)``; an input is a model input's position
    (int) or ``(step index, output j)``; ``share`` as in :class:`~.tiling.Call`."""

    module: nn.Module
    inputs: tuple
    prefix: str
    share: int | None = None


# ---------------------------------------------------------------------------- programs
def _bert_embed(self, tokens):
    t = tokens.shape[1]
    pos = torch.arange(t, device=tokens.device)
    segment = torch.zeros_like(tokens)
    return self.drop(self.embed_ln(self.tokens(tokens) + self.positions(pos) + self.segments(segment)))


def _gpt2_embed(self, tokens):
    pos = torch.arange(tokens.shape[1], device=tokens.device)
    return self.drop(self.tokens(tokens) + self.positions(pos))


def _head(head: Callable, loss_fn: Callable) -> Callable:
    def head_loss(self, x, *inputs):
        return loss_fn(head(self, x), *inputs)
    return head_loss


def stack_program(model, inputs, loss_fn) -> list[Step]:
    """BERT (``model.mlm`` head) or GPT-2 (``ln_f`` + ``head``): embeddings, layers, head."""
    if hasattr(model, "mlm"):
        stem = Part(_bert_embed, tokens=model.tokens, positions=model.positions, segments=model.segments,
                    embed_ln=model.embed_ln, drop=model.drop)
        head = Part(_head(lambda self, x: self.mlm(x), loss_fn), mlm=model.mlm)
    else:
        stem = Part(_gpt2_embed, tokens=model.tokens, positions=model.positions, drop=model.drop)
        head = Part(_head(lambda self, x: self.head(self.ln_f(x)), loss_fn), ln_f=model.ln_f, head=model.head)
    steps = [Step(stem, (0,), "embeddings")]
    for i, layer in enumerate(model.layers):
        steps.append(Step(layer, ((len(steps) - 1, 0),), f"layers.{i}"))
    steps.append(Step(head, ((len(steps) - 1, 0), 0), "head"))
    return steps


def _rnn_stem(self, tokens):
    return self.drop(self.embed(tokens)).unbind(1)


def _first_step(self, x):
    z = torch.zeros(x.shape[0], self.hidden, dtype=x.dtype, device=x.device)
    return self.cell(x, (z, z))


def _step(self, x, h, c):
    return self.cell(x, (h, c))


def _join(self, *hs):
    return self.drop(torch.stack(hs, 1)).unbind(1)


def rnnlm_program(model, inputs, loss_fn) -> list[Step]:
    """RNNLM as the grid of its LSTM cell steps (see the module docstring)."""
    seq = inputs[0].shape[1]
    steps = [Step(Part(_rnn_stem, embed=model.embed, drop=model.drop), (0,), "embeddings")]
    xs = [(0, t) for t in range(seq)]
    for i, layer in enumerate(model.layers):
        hs, owner = [], len(steps)
        for t in range(seq):
            if t == 0:
                steps.append(Step(Part(_first_step, cell=layer.cell, hidden=model.hidden), (xs[t],),
                                  f"layers.{i}.t{t}"))
            else:
                prev = len(steps) - 1
                steps.append(Step(Part(_step, cell=layer.cell), (xs[t], (prev, 0), (prev, 1)), f"layers.{i}.t{t}",
                                  share=owner))
            hs.append((len(steps) - 1, 0))
        if i < len(model.layers) - 1:
            steps.append(Step(Part(_join, drop=model.drop), tuple(hs), f"layers.{i}.join"))
            xs = [(len(steps) - 1, t) for t in range(seq)]
    head = Part(_rnn_head(loss_fn), drop=model.drop, softmax=model.softmax)  # top layer's steps + tokens
    steps.append(Step(head, (*hs, 0), "head"))
    return steps


def _rnn_head(loss_fn):
    def rnn_head(self, *args):
        *hs, tokens = args
        return loss_fn(self.softmax(self.drop(torch.stack(hs, 1))), tokens)
    return rnn_head


def _cell_first(self, x):
    return self.cell(x, None)


def nasnet_program(model, inputs, loss_fn) -> list[Step]:
    """NASNet-A: stem, cells wired by ``model.wiring`` (output 0 is the stem's), head."""
    steps = [Step(model.stem, (0,), "stem")]
    for i, (cell, (cur, prev)) in enumerate(zip(model.cells, model.wiring)):
        if prev is None:
            steps.append(Step(Part(_cell_first, cell=cell), ((cur, 0),), f"cells.{i}"))
        else:
            steps.append(Step(cell, ((cur, 0), (prev, 0)), f"cells.{i}"))
    head = Part(_head(lambda self, x: self.head(x), loss_fn), head=model.head)
    steps.append(Step(head, ((len(steps) - 1, 0), 0), "head"))
    return steps


PROGRAMS = {"bert": stack_program, "gpt2": stack_program, "rnnlm": rnnlm_program, "nasnet": nasnet_program}
"""Families with a whole-model program."""


# ---------------------------------------------------------------------------- assembly
def _sig(x) -> tuple:
    return (tuple(x.shape), x.dtype, x.requires_grad) if isinstance(x, torch.Tensor) else (repr(x),)


def _flat(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def whole_model(name: str, *, cost="roofline:v100", optimizer: str = "adam", **overrides):
    """The training graph of zoo model ``name`` (any depth: ``layers``, ``cells``, ``seq``
    and the other ``defaults`` keys as overrides), assembled from its captured parts.

    Returns an :class:`~dnnplace.graphs.OpGraph`; ``meta["assembled"]`` says how many
    parts were captured and how long capture and assembly took.
    """
    from dnnplace.pytorch.capture.costs import cost_model
    from dnnplace.pytorch.capture.tiling import Call, assemble, capture_block
    from dnnplace.pytorch.capture.zoo import build, entry
    e = entry(name)
    if e.family not in PROGRAMS:
        raise InputError(f"zoo model {name!r} ({e.family}) has no whole-model program; families with one: "
                         f"{', '.join(sorted(PROGRAMS))}")
    t0 = time.perf_counter()
    model, inputs, loss_fn = build(name, **overrides)
    steps = PROGRAMS[e.family](model, inputs, loss_fn)
    # a meta run: every value's shape and whether autograd differentiates it (a part with
    # the structure and inputs of one already run gives outputs like that one's)
    vals: list[tuple] = []
    args: list[tuple] = []
    seen: dict[tuple, list] = {}
    with torch.enable_grad():
        for st in steps:
            a = tuple(inputs[s] if isinstance(s, int) else vals[s[0]][s[1]] for s in st.inputs)
            args.append(a)
            sig = (repr(st.module), tuple(_sig(x) for x in a))
            if sig not in seen:
                out = _flat(st.module(*a))
                seen[sig] = [_sig(o) for o in out]
                vals.append(out)
            else:
                vals.append(tuple(torch.empty(shape, dtype=dt, device="meta").requires_grad_(rg)
                                  for shape, dt, rg in seen[sig]))
    wants = [[isinstance(x, torch.Tensor) and x.requires_grad for x in a] for a in args]
    read: set[tuple[int, int]] = set()
    for st, w in zip(steps, wants):
        read.update(s for s, flag in zip(st.inputs, w) if flag and not isinstance(s, int))
    blocks: dict[tuple, object] = {}
    calls = []
    cm, acc_cache = cost_model(cost), {}
    t1 = time.perf_counter()
    for k, (st, a, w) in enumerate(zip(steps, args, wants)):
        cot = tuple((k, j) in read for j in range(len(vals[k])))
        detached = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in a)
        key = (repr(st.module), tuple((tuple(x.shape), str(x.dtype)) for x in detached), tuple(w), cot)
        if key not in blocks:
            blocks[key] = capture_block(st.module, detached, cost=cm, optimizer=optimizer,
                                        name=f"{name}:{st.prefix or k}", grad_inputs=list(w), cotangents=list(cot),
                                        acc_cache=acc_cache)
        src = tuple(f"input:input{s}" if isinstance(s, int) else s for s in st.inputs)
        calls.append(Call(blocks[key], src, st.prefix, st.share))
    t2 = time.perf_counter()
    g = assemble(calls, name=name)
    g.meta["assembled"].update({"model": name, "overrides": overrides, "parts": len(blocks),
                                "capture_s": round(t2 - t1, 3), "assemble_s": round(time.perf_counter() - t2, 3),
                                "build_s": round(t1 - t0, 3)})
    return g
