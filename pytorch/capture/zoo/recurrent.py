"""Recurrent models unrolled from ``nn.LSTMCell`` steps: RNNLM, NMT and GNMT, our definitions.

``nn.LSTM`` exports as a single opaque operator; a placement graph needs every step and
layer as its own operators (the "grid" that Pesto Sec. 5.3 exploits), so every sequence is
unrolled in Python: each cell step is
:math:`(i,f,g,o) = \\sigma,\\sigma,\\tanh,\\sigma(W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh})`,
:math:`c_t = f c_{t-1} + i g`, :math:`h_t = o \\tanh c_t` (Hochreiter & Schmidhuber 1997,
with forget gates). Initial states are zeros.

* **RNNLM** (Zaremba, Sutskever & Vinyals 2014, Sec. 4.1; Jozefowicz et al. 2016):
  word embedding of size ``hidden``, ``layers`` stacked LSTMs with dropout on the
  non-recurrent connections, a softmax over the vocabulary at every step (Penn Treebank:
  10,000 words, 35 unrolled steps as Zaremba's medium and large models). Pesto trains
  2x2048, 4x2048 and 16x1024 at batch 128.
* **NMT** (Luong, Pham & Manning, EMNLP 2015, Sec. 3 and 3.3): a ``layers``-deep LSTM
  encoder whose final states start the ``layers``-deep decoder; global attention with the
  *general* score :math:`h_t^T W_a \\bar h_s` on the top decoder layer, attentional vector
  :math:`\\tilde h_t = \\tanh(W_c [c_t; h_t])` fed back into the next step's input
  ("input feeding"), softmax over :math:`\\tilde h_t`. Pesto: 2 and 4 layers x 1024 at
  batch 128; Celeritas: 4 x 2048 at batch 512. Vocabulary 32,000 (a WMT16 BPE size);
  sentence length ``seq`` for source and target (the papers do not give one; 50 is ours).
* **GNMT** (Wu et al., "Google's Neural Machine Translation System", 2016, Sec. 3-4):
  the bottom encoder layer is bidirectional (outputs of both directions concatenated),
  residual connections from the third layer up in encoder and decoder, additive
  attention (Bahdanau et al. 2015) computed from the bottom decoder layer's output and
  fed, concatenated with each layer's input, to every upper decoder layer; the top layer
  feeds the softmax. Paper says the attention uses the bottom layer's output of the
  previous step; we use the current step's (the bottom layer runs first, as one step of
  its recurrence, so the dependency structure is the same one step shifted). FastT
  trains 4 layers (batch 128); the paper's system has 8.
"""

from __future__ import annotations

import torch
from torch import nn

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.zoo.losses import next_token_loss, translation_loss

__all__ = ["LSTMStep", "LSTMLayer", "RNNLM", "Seq2Seq", "rnnlm", "nmt", "lstm_block"]


def _zeros(x: torch.Tensor, hidden: int) -> torch.Tensor:
    return torch.zeros(x.shape[0], hidden, dtype=x.dtype, device=x.device)


class LSTMStep(nn.Module):
    """One LSTM cell step ``(x, h, c) -> (h, c)``: the repeating unit of the recurrent models."""

    def __init__(self, n_in: int, hidden: int):
        super().__init__()
        self.cell = nn.LSTMCell(n_in, hidden)

    def forward(self, x, h, c):
        return self.cell(x, (h, c))


class LSTMLayer(nn.Module):
    """One LSTM layer unrolled over the sequence: ``(xs, h, c) -> (ys, h, c)`` with ``xs`` of
    shape ``(batch, steps, n_in)``; ``reverse`` runs from the last step to the first
    (outputs stay in input order)."""

    def __init__(self, n_in: int, hidden: int, reverse: bool = False):
        super().__init__()
        self.cell, self.reverse = nn.LSTMCell(n_in, hidden), reverse

    def forward(self, xs, h, c):
        steps = xs.unbind(1)
        outs = [None] * len(steps)
        for t in (reversed(range(len(steps))) if self.reverse else range(len(steps))):
            h, c = self.cell(steps[t], (h, c))
            outs[t] = h
        return torch.stack(outs, 1), h, c


class RNNLM(nn.Module):
    """Stacked-LSTM language model; ``forward(tokens)`` returns ``(batch, seq, vocab)`` logits."""

    def __init__(self, *, layers: int, hidden: int, vocab: int, dropout: float):
        super().__init__()
        self.hidden = hidden
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LSTMLayer(hidden, hidden) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        self.softmax = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        x = self.drop(self.embed(tokens))
        for layer in self.layers:
            h0 = _zeros(x, self.hidden)
            x, _, _ = layer(x, h0, h0)
            x = self.drop(x)
        return self.softmax(x)


class Seq2Seq(nn.Module):
    """LSTM encoder-decoder with attention, Luong's NMT or (``gnmt=True``) GNMT;
    ``forward(source, target)`` returns ``(batch, seq, vocab)`` logits of the teacher-forced
    decoder."""

    def __init__(self, *, layers: int, hidden: int, vocab: int, dropout: float, gnmt: bool):
        super().__init__()
        if gnmt and layers < 2:
            raise InputError(f"gnmt needs at least 2 layers (a bidirectional bottom layer and one more), got {layers}")
        self.hidden, self.gnmt = hidden, gnmt
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.drop = nn.Dropout(dropout)
        if gnmt:
            enc = [LSTMLayer(hidden, hidden), LSTMLayer(hidden, hidden, reverse=True), LSTMLayer(2 * hidden, hidden)]
            enc += [LSTMLayer(hidden, hidden) for _ in range(layers - 2)]
            # Bahdanau: score = v^T tanh(W_k enc + W_q h)
            self.att_keys, self.att_query = nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden)
            self.att_v = nn.Linear(hidden, 1, bias=False)
            dec = [nn.LSTMCell(2 * hidden, hidden) for _ in range(layers)]
        else:
            enc = [LSTMLayer(hidden, hidden) for _ in range(layers)]
            self.att_general = nn.Linear(hidden, hidden, bias=False)  # W_a
            self.att_combine = nn.Linear(2 * hidden, hidden, bias=False)  # W_c
            dec = [nn.LSTMCell(2 * hidden if i == 0 else hidden, hidden) for i in range(layers)]
        self.encoder, self.decoder = nn.ModuleList(enc), nn.ModuleList(dec)
        self.softmax = nn.Linear(hidden, vocab)

    def _encode(self, source):
        """Encoder outputs ``(batch, seq, hidden)`` and the final ``(h, c)`` of each layer."""
        x = self.drop(self.src_embed(source))
        z = _zeros(x, self.hidden)
        states, layers = [], list(self.encoder)
        if self.gnmt:
            fwd, h_f, c_f = layers[0](x, z, z)
            bwd, h_b, c_b = layers[1](x, z, z)
            x = self.drop(torch.cat([fwd, bwd], -1))
            states += [(h_f, c_f), (h_b, c_b)]
            layers = layers[2:]
        for i, layer in enumerate(layers):
            y, h, c = layer(x, z, z)
            states.append((h, c))
            # GNMT: residual connections from the third encoder layer (the bi-layer is first)
            x = self.drop(y + x if self.gnmt and i >= 1 else y)
        return x, states

    def _attend_luong(self, h, memory):
        scores = torch.bmm(memory, self.att_general(h).unsqueeze(2)).squeeze(2)  # h_t^T W_a h_s
        context = torch.bmm(scores.softmax(-1).unsqueeze(1), memory).squeeze(1)
        return torch.tanh(self.att_combine(torch.cat([context, h], -1)))

    def _attend_bahdanau(self, h, keys, memory):
        scores = self.att_v(torch.tanh(keys + self.att_query(h).unsqueeze(1))).squeeze(2)
        return torch.bmm(scores.softmax(-1).unsqueeze(1), memory).squeeze(1)

    def forward(self, source, target):
        memory, enc_states = self._encode(source)
        y_in = self.drop(self.tgt_embed(target))
        z = _zeros(y_in, self.hidden)
        if self.gnmt:
            states = [(z, z)] * len(self.decoder)
            keys = self.att_keys(memory)
            context = z
        else:  # Luong: the decoder starts from the encoder's final states
            states = enc_states
            feed = z
        outs = []
        for y in y_in.unbind(1):
            new = []
            if self.gnmt:
                h, c = self.decoder[0](torch.cat([y, context], -1), states[0])
                new.append((h, c))
                context = self._attend_bahdanau(h, keys, memory)
                x = h
                for i in range(1, len(self.decoder)):
                    h, c = self.decoder[i](torch.cat([self.drop(x), context], -1), states[i])
                    new.append((h, c))
                    x = h + x if i >= 2 else h  # residuals from the third decoder layer
                out = x
            else:
                x = torch.cat([y, feed], -1)
                for i, cell in enumerate(self.decoder):
                    h, c = cell(x, states[i])
                    new.append((h, c))
                    x = self.drop(h)
                feed = out = self._attend_luong(h, memory)
            states = new
            outs.append(out)
        return self.softmax(self.drop(torch.stack(outs, 1)))


def _tokens(batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq))


def rnnlm(*, batch: int, seq: int, layers: int, hidden: int, vocab: int, dropout: float):
    """RNNLM on ``(tokens,)`` of length ``seq`` (see the module docstring)."""
    return RNNLM(layers=layers, hidden=hidden, vocab=vocab, dropout=dropout), (_tokens(batch, seq, vocab),), \
        next_token_loss


def nmt(*, batch: int, seq: int, layers: int, hidden: int, vocab: int, dropout: float, gnmt: bool):
    """NMT or GNMT on ``(source, target)`` of length ``seq`` (see the module docstring)."""
    model = Seq2Seq(layers=layers, hidden=hidden, vocab=vocab, dropout=dropout, gnmt=gnmt)
    return model, (_tokens(batch, seq, vocab), _tokens(batch, seq, vocab)), translation_loss


def lstm_block(*, batch: int, seq: int, hidden: int, part: str = "step", **_):
    """One cell step ``(x, h, c)`` (``part="step"``) or one layer unrolled over ``seq`` steps
    ``(xs, h, c)`` (``part="layer"``), ``hidden`` units, input size ``hidden``."""
    h, c = torch.randn(batch, hidden), torch.randn(batch, hidden)
    if part == "step":
        return LSTMStep(hidden, hidden), (torch.randn(batch, hidden), h, c)
    if part == "layer":
        return LSTMLayer(hidden, hidden), (torch.randn(batch, seq, hidden), h, c)
    raise InputError(f"lstm block part {part!r} is not 'step' or 'layer'")
