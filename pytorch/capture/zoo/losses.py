"""Training losses of the zoo models: ``loss_fn(output, *inputs) -> scalar``.

Each is cross-entropy :math:`-\\frac{1}{N}\\sum_i \\log \\mathrm{softmax}(z_i)_{y_i}` over
the ``N`` predictions of a batch; they differ in what is predicted.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["classification_loss", "inception_loss", "next_token_loss", "masked_lm_loss", "translation_loss"]

AUX_WEIGHT = 0.3
"""Weight of an auxiliary classifier's loss. GoogLeNet (Szegedy et al. 2015, Sec. 5) uses
0.3; the Inception-V3 paper does not state one, we use the same."""


def classification_loss(logits: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of ``(batch, classes)`` logits against class 0 (the label values do not
    change the graph or its costs, and a constant label needs no input)."""
    labels = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    return F.cross_entropy(logits, labels)


def inception_loss(output, *inputs: torch.Tensor) -> torch.Tensor:
    """Main plus :data:`AUX_WEIGHT` times auxiliary classification loss; ``output`` is
    ``(main, aux)`` when the auxiliary classifier is on, else the main logits."""
    if isinstance(output, tuple):
        main, aux = output
        return classification_loss(main) + AUX_WEIGHT * classification_loss(aux)
    return classification_loss(output)


def next_token_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Language-model loss: position ``t`` predicts token ``t+1`` (``logits`` is
    ``(batch, seq, vocab)``, ``tokens`` ``(batch, seq)``)."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def masked_lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """BERT's masked-LM loss taken over every position (the paper predicts the 15 % masked
    ones; predicting all keeps the graph static, with the same operators)."""
    return F.cross_entropy(logits.flatten(0, 1), tokens.flatten())


def translation_loss(logits: torch.Tensor, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Teacher-forced translation loss: the decoder's output at ``t`` predicts target token
    ``t+1``."""
    return next_token_loss(logits, target)
