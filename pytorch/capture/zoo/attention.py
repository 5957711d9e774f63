"""Attention models: the Transformer encoder-decoder, BERT and GPT-2, our definitions.

One multi-head attention (Vaswani et al., "Attention Is All You Need", NeurIPS 2017,
Sec. 3.2, Eq. 1): :math:`\\mathrm{softmax}(QK^T/\\sqrt{d_k})V` per head with separate
:math:`W^Q, W^K, W^V` projections and an output projection :math:`W^O`, dropout on the
attention probabilities, a causal mask in decoders. Three layer kinds are built from it:

* **post-LN encoder / decoder layers** of the Transformer (Sec. 3.1, 5.4): each
  sub-layer is ``LayerNorm(x + Dropout(Sublayer(x)))``; the decoder adds attention over
  the encoder's output; the feed-forward network is ``ReLU(x W_1 + b_1) W_2 + b_2``
  (Eq. 2) with ``d_ff = 4 d_model``. The model embeds source and target tokens, scales
  them by :math:`\\sqrt{d_{model}}`, adds sinusoidal position encodings (Sec. 3.5) and
  ends in a linear layer to the vocabulary (37,000 shared BPE tokens for WMT14 EN-DE,
  Sec. 5.1). Paper says the two embeddings and the pre-softmax layer share one matrix;
  we keep three (untied) so every parameter has its own gradient. Pesto's "10 layers,
  8 heads, 1024 hidden units" is read as N = 10 encoder and 10 decoder layers, h = 8,
  d_model = 1024, d_ff = 4096.
* **BERT** (Devlin et al., NAACL 2019, Sec. 3 and A.2): post-LN encoder layers with GELU,
  token + learned position + segment embeddings followed by LayerNorm, and the masked-LM
  head (dense + GELU + LayerNorm + linear to the 30,522-token vocabulary with its own
  bias). No pooler and no next-sentence head (they would need the pooler), and the
  decoder matrix is untied from the token embedding. BERT-large: 24 layers, 1024 hidden,
  16 heads; its encoder (embeddings and layers) has 334,092,288 parameters (335,141,888
  with the pooler, the published "340M"/"335M"), the untied head 32,336,698 more.
* **GPT-2** (Radford et al., 2019, Sec. 2.3; layout of GPT, Radford et al. 2018):
  pre-LN decoder layers ``x + Attn(LN(x))``, ``x + MLP(LN(x))`` with tanh-GELU, a final
  LayerNorm, learned positions (1024), vocabulary 50,257. GPT-2 small has 124,439,808
  parameters with its tied head; our untied head adds 38,597,376 (``hidden x vocab``,
  no bias). No key/value cache.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.zoo.losses import masked_lm_loss, next_token_loss, translation_loss

__all__ = ["MultiHeadAttention", "EncoderLayer", "DecoderLayer", "GPT2Block", "transformer", "bert", "gpt2",
           "transformer_block", "bert_block", "gpt2_block"]


def _check_heads(hidden: int, heads: int) -> None:
    if hidden % heads:
        raise InputError(f"hidden size {hidden} is not a multiple of heads {heads}")


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al. Eq. 1 and Sec. 3.2.2)."""

    def __init__(self, hidden: int, heads: int, dropout: float):
        super().__init__()
        _check_heads(hidden, heads)
        self.heads = heads
        self.q, self.k, self.v, self.out = (nn.Linear(hidden, hidden) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def _split(self, x):  # (B, T, H) -> (B, heads, T, H / heads)
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, memory=None, causal: bool = False):
        kv = x if memory is None else memory
        q, k, v = self._split(self.q(x)), self._split(self.k(kv)), self._split(self.v(kv))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            t = x.shape[1]
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        ctx = self.drop(scores.softmax(-1)) @ v
        return self.out(ctx.transpose(1, 2).flatten(2))


def _ffn(hidden: int, ffn: int, act: nn.Module) -> nn.Sequential:
    return nn.Sequential(nn.Linear(hidden, ffn), act, nn.Linear(ffn, hidden))


class EncoderLayer(nn.Module):
    """Post-LN encoder layer (Transformer Sec. 3.1; BERT with ``act=GELU``)."""

    def __init__(self, hidden: int, heads: int, ffn: int, dropout: float, act: nn.Module):
        super().__init__()
        self.attn = MultiHeadAttention(hidden, heads, dropout)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.ffn = _ffn(hidden, ffn, act)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = self.ln1(x + self.drop(self.attn(x)))
        return self.ln2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    """Post-LN decoder layer: causal self-attention, attention over ``memory``, FFN."""

    def __init__(self, hidden: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.self_attn = MultiHeadAttention(hidden, heads, dropout)
        self.cross_attn = MultiHeadAttention(hidden, heads, dropout)
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(hidden) for _ in range(3))
        self.ffn = _ffn(hidden, ffn, nn.ReLU())
        self.drop = nn.Dropout(dropout)

    def forward(self, y, memory):
        y = self.ln1(y + self.drop(self.self_attn(y, causal=True)))
        y = self.ln2(y + self.drop(self.cross_attn(y, memory)))
        return self.ln3(y + self.drop(self.ffn(y)))


class GPT2Block(nn.Module):
    """Pre-LN decoder layer of GPT-2 (no cross-attention)."""

    def __init__(self, hidden: int, heads: int, dropout: float):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = MultiHeadAttention(hidden, heads, dropout)
        self.mlp = _ffn(hidden, 4 * hidden, nn.GELU(approximate="tanh"))
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x), causal=True))
        return x + self.drop(self.mlp(self.ln2(x)))


def _sinusoids(length: int, hidden: int) -> torch.Tensor:
    """Position encodings of Vaswani et al. Sec. 3.5: sin on even, cos on odd dimensions."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, hidden, 2, dtype=torch.float32) * (-math.log(10000.0) / hidden))
    pe = torch.zeros(length, hidden)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: hidden // 2])
    return pe


class Transformer(nn.Module):
    """Encoder-decoder Transformer; ``forward(source, target)`` returns target logits."""

    def __init__(self, *, layers: int, hidden: int, heads: int, ffn: int, vocab: int, dropout: float,
                 positions: int):
        super().__init__()
        self.scale = math.sqrt(hidden)
        self.src_embed, self.tgt_embed = nn.Embedding(vocab, hidden), nn.Embedding(vocab, hidden)
        self.register_buffer("pe", _sinusoids(positions, hidden), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(hidden, heads, ffn, dropout, nn.ReLU()) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderLayer(hidden, heads, ffn, dropout) for _ in range(layers))
        self.project = nn.Linear(hidden, vocab, bias=False)

    def _embed(self, table, tokens):
        return self.drop(table(tokens) * self.scale + self.pe[: tokens.shape[1]])

    def forward(self, source, target):
        x = self._embed(self.src_embed, source)
        for layer in self.encoder:
            x = layer(x)
        y = self._embed(self.tgt_embed, target)
        for layer in self.decoder:
            y = layer(y, x)
        return self.project(y)


class Bert(nn.Module):
    """BERT encoder with an untied masked-LM head; ``forward(tokens)`` returns logits."""

    def __init__(self, *, layers: int, hidden: int, heads: int, ffn: int, vocab: int, positions: int,
                 type_vocab: int, dropout: float):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.segments = nn.Embedding(type_vocab, hidden)
        self.embed_ln, self.drop = nn.LayerNorm(hidden), nn.Dropout(dropout)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn, dropout, nn.GELU()) for _ in range(layers))
        self.mlm = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden), nn.Linear(hidden, vocab))

    def forward(self, tokens):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device)
        segment = torch.zeros_like(tokens)  # one-sentence inputs: every token in segment A
        x = self.drop(self.embed_ln(self.tokens(tokens) + self.positions(pos) + self.segments(segment)))
        for layer in self.layers:
            x = layer(x)
        return self.mlm(x)


class GPT2(nn.Module):
    """GPT-2 with an untied LM head; ``forward(tokens)`` returns logits."""

    def __init__(self, *, layers: int, hidden: int, heads: int, vocab: int, positions: int, dropout: float):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(GPT2Block(hidden, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens):
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tokens(tokens) + self.positions(pos))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


def _tokens(batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq))


def _check_seq(seq: int, positions: int) -> None:
    if seq > positions:
        raise InputError(f"seq {seq} exceeds the model's {positions} positions")


def transformer(*, batch: int, seq: int, layers: int, hidden: int, heads: int, ffn: int, vocab: int,
                dropout: float):
    """Transformer encoder-decoder on ``(source, target)`` token batches of length ``seq``."""
    model = Transformer(layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab=vocab, dropout=dropout,
                        positions=max(seq, 512))
    return model, (_tokens(batch, seq, vocab), _tokens(batch, seq, vocab)), translation_loss


def bert(*, batch: int, seq: int, layers: int, hidden: int, heads: int, ffn: int, vocab: int, positions: int,
         type_vocab: int, dropout: float):
    """BERT with the masked-LM head on ``(tokens,)`` of length ``seq``."""
    _check_seq(seq, positions)
    model = Bert(layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab=vocab, positions=positions,
                 type_vocab=type_vocab, dropout=dropout)
    return model, (_tokens(batch, seq, vocab),), masked_lm_loss


def gpt2(*, batch: int, seq: int, layers: int, hidden: int, heads: int, vocab: int, positions: int,
         dropout: float):
    """GPT-2 language model on ``(tokens,)`` of length ``seq``."""
    _check_seq(seq, positions)
    model = GPT2(layers=layers, hidden=hidden, heads=heads, vocab=vocab, positions=positions, dropout=dropout)
    return model, (_tokens(batch, seq, vocab),), next_token_loss


def _activations(batch: int, seq: int, hidden: int) -> torch.Tensor:
    return torch.randn(batch, seq, hidden)


def transformer_block(*, batch: int, seq: int, hidden: int, heads: int, ffn: int, dropout: float,
                      part: str = "encoder", **_):
    """One encoder layer ``(x,)`` or, with ``part="decoder"``, one decoder layer ``(y, memory)``."""
    x = _activations(batch, seq, hidden)
    if part == "encoder":
        return EncoderLayer(hidden, heads, ffn, dropout, nn.ReLU()), (x,)
    if part == "decoder":
        return DecoderLayer(hidden, heads, ffn, dropout), (x, _activations(batch, seq, hidden))
    raise InputError(f"transformer block part {part!r} is not 'encoder' or 'decoder'")


def bert_block(*, batch: int, seq: int, hidden: int, heads: int, ffn: int, dropout: float, part: str = "layer",
               **_):
    """One BERT encoder layer on ``(x,)``, ``x`` of shape ``(batch, seq, hidden)``."""
    if part != "layer":
        raise InputError(f"bert block part {part!r} is not 'layer'")
    return EncoderLayer(hidden, heads, ffn, dropout, nn.GELU()), (_activations(batch, seq, hidden),)


def gpt2_block(*, batch: int, seq: int, hidden: int, heads: int, dropout: float, part: str = "layer", **_):
    """One GPT-2 decoder layer on ``(x,)``, ``x`` of shape ``(batch, seq, hidden)``."""
    if part != "layer":
        raise InputError(f"gpt2 block part {part!r} is not 'layer'")
    return GPT2Block(hidden, heads, dropout), (_activations(batch, seq, hidden),)
