"""Tensor and ATen-node helpers shared by capture, costs and tiling (torch imported lazily)."""

from __future__ import annotations

import operator
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["OPTIMIZER_STATE", "require_torch", "storage_bytes", "value_bytes", "is_view", "op_name"]

OPTIMIZER_STATE = {"sgd": 0, "momentum": 1, "adam": 2}
"""Optimizer state per parameter, in multiples of the parameter's bytes."""



def require_torch():
    """The ``torch`` module, or an :class:`InputError` saying how to install the extra."""
    try:
        import torch
    except ImportError:
        raise InputError('capturing PyTorch models needs torch: pip install -e ".[torch]"') from None
    return torch


def storage_bytes(t: Any) -> int:
    """Bytes a tensor really occupies: ``min(numel * itemsize, storage bytes)``."""
    torch = require_torch()
    if not isinstance(t, torch.Tensor):
        return 0
    logical = t.numel() * t.element_size()
    try:
        return int(min(logical, t.untyped_storage().nbytes()))
    except (RuntimeError, NotImplementedError):
        return int(logical)


def value_bytes(val: Any) -> int:
    """Storage bytes of a node's value (a tensor or a tuple/list of them)."""
    if isinstance(val, (tuple, list)):
        return sum(value_bytes(v) for v in val)
    return storage_bytes(val)


def is_view(node: Any) -> bool:
    """True for ``getitem`` and ATen ops whose schema returns a non-mutating alias."""
    torch = require_torch()
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    tgt = node.target
    if not isinstance(tgt, torch._ops.OpOverload):
        return False
    rets = tgt._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


def op_name(node: Any) -> str:
    """Short op type: ``aten.addmm.default`` -> ``addmm``."""
    if node.op == "placeholder":
        return "input"
    tgt = node.target
    name = getattr(tgt, "__name__", str(tgt))
    packet = getattr(tgt, "overloadpacket", None)
    if packet is not None:
        name = packet.__name__
    return name.split(".")[0]
