"""The named losses of ``--loss`` (:data:`LOSSES`: ``sum``, ``mse``, ``cross_entropy``), each
``loss_fn(output, *inputs) -> scalar`` over any model output (a tensor, or tuples, lists and
dicts of them), for models that do not bring their own (:mod:`dnnplace.pytorch.capture.models`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.ops import require_torch

__all__ = ["LOSSES", "sum_loss", "mse_loss", "cross_entropy_loss", "loss_by_name", "loss_name", "with_article"]


def _floating(output: Any) -> list:
    """Every floating point tensor of a model output (a tensor, or tuples, lists and dicts of them)."""
    torch = require_torch()
    if isinstance(output, torch.Tensor):
        return [output] if output.is_floating_point() else []
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _floating(item)]
    return []


def _total(name: str, terms: list) -> Any:
    if not terms:
        raise InputError(f"loss {name!r}: the model's output holds no floating point tensor")
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def sum_loss(output: Any, *inputs: Any) -> Any:
    """``sum``: the sum of the output (of every floating tensor's sum for a tuple, list or
    dict output): a scalar whose gradient reaches every parameter the output depends on."""
    return _total("sum", [t.sum() for t in _floating(output)])


def mse_loss(output: Any, *inputs: Any) -> Any:
    """``mse``: mean squared error of the output against zeros of its shape (summed over
    the floating tensors of a tuple, list or dict output)."""
    import torch.nn.functional as F
    return _total("mse", [F.mse_loss(t, t.new_zeros(t.shape)) for t in _floating(output)])


def cross_entropy_loss(output: Any, *inputs: Any) -> Any:
    """``cross_entropy``: a ``[N, C]`` output against class 0 for every row (labels do not
    change the graph or its costs); any other output is an :class:`InputError`."""
    torch = require_torch()
    if not isinstance(output, torch.Tensor):
        raise InputError(f"loss 'cross_entropy' needs one [N, C] output tensor, the model returns "
                         f"{with_article(output)}; use --loss sum or mse, or a factory returning (model, inputs, "
                         "loss_fn)")
    if output.dim() != 2 or not output.is_floating_point():
        raise InputError(f"loss 'cross_entropy' needs a 2-D floating [N, C] output, the model's is "
                         f"{list(output.shape)} {str(output.dtype).removeprefix('torch.')}; use --loss sum or mse")
    labels = torch.zeros(output.shape[0], dtype=torch.long, device=output.device)
    return torch.nn.functional.cross_entropy(output, labels)


LOSSES: dict[str, Callable[..., Any]] = {"sum": sum_loss, "mse": mse_loss, "cross_entropy": cross_entropy_loss}
"""The named losses of ``--loss``; each is ``loss_fn(output, *inputs) -> scalar``."""


def loss_by_name(name: str) -> Callable[..., Any]:
    """The loss of :data:`LOSSES` called ``name``; an :class:`InputError` naming the choices."""
    try:
        return LOSSES[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown loss {name!r}; use one of: {', '.join(LOSSES)}") from None


def loss_name(loss_fn: Any) -> str | None:
    """What a capture records of its loss (``graph.meta["capture"]["loss"]``): the name
    of a loss of :data:`LOSSES`, else the callable's qualified name (a zoo model's or a
    factory's own loss), ``None`` without a loss.

    >>> loss_name(LOSSES["mse"]), loss_name(with_article), loss_name(None)
    ('mse', 'with_article', None)
    """
    if loss_fn is None:
        return None
    named = next((k for k, f in LOSSES.items() if f is loss_fn), None)
    return named or str(getattr(loss_fn, "__qualname__", None) or type(loss_fn).__name__)


def with_article(obj: Any) -> str:
    """``"an int"``, ``"a str"``: the type of ``obj`` with its article."""
    name = type(obj).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
