"""Tensor and ATen-node helpers shared by capture, costs and tiling (torch imported lazily)."""

from __future__ import annotations

import operator
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["OPTIMIZER_STATE", "require_torch", "storage_bytes", "value_bytes", "is_view", "op_name", "apply_update",
           "root_value", "steady_malloc", "cpu_only_op"]

OPTIMIZER_STATE = {"sgd": 0, "momentum": 1, "adam": 2}
"""Optimizer state per parameter, in multiples of the parameter's bytes."""



def require_torch():
    """The ``torch`` module, or an :class:`InputError` saying how to install the extra."""
    try:
        import torch
    except ImportError:
        raise InputError("capturing PyTorch models needs torch: pip install 'dnnplace[torch]' (in a checkout: "
                         "pip install -e '.[torch]')") from None
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


def cpu_only_op(node: Any) -> str | None:
    """The ATen name of ``node``'s operator when it is a CPU-only variant (``*_for_cpu``, as
    the scaled-dot-product attention that a trace on the CPU picks), else ``None``: such a
    traced step cannot run that operator on a GPU."""
    name = str(getattr(node, "target", ""))
    return name if node.op == "call_function" and "_for_cpu" in name else None


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


def apply_update(kind: str, p: Any, g: Any, state: dict, lr: float) -> Any:
    """The updated parameter after one optimizer step from gradient ``g`` (``torch.optim``'s
    SGD, SGD with momentum 0.9, or Adam with betas (0.9, 0.999) and eps 1e-8), as a new
    tensor: ``p`` itself is left unchanged, so its other readers in the same step still
    see the old value (the captured step has no edge ordering them before the update).
    ``state`` holds the optimizer state across calls."""
    torch = require_torch()
    with torch.no_grad():
        if kind == "sgd":
            return p - lr * g
        if kind == "momentum":
            buf = state.get("buf")
            state["buf"] = buf = g.clone() if buf is None else buf.mul_(0.9).add_(g)
            return p - lr * buf
        b1, b2, eps = 0.9, 0.999, 1e-8
        t = state["t"] = state.get("t", 0) + 1
        if "m" not in state:   # zeros once, not a fresh tensor per call
            state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
        m = state["m"].mul_(b1).add_(g, alpha=1 - b1)
        v = state["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (v / (1 - b2 ** t)).sqrt_().add_(eps)
        return torch.addcdiv(p, m, denom, value=-lr / (1 - b1 ** t))


def root_value(nd: Any, rep: dict[str, int]) -> Any:
    """The tensor that fx node ``nd``'s value is a view of, within its graph node (``rep``:
    fx node name -> graph node): walk up single-input views whose input belongs to the
    same graph node (``getitem`` stops the walk: its input is a tuple, not a tensor).
    What crosses devices is such a root: a tensor and its views are one transfer."""
    torch = require_torch()
    while (nd.op == "call_function" and nd.target is not operator.getitem and is_view(nd)
           and len(nd.all_input_nodes) == 1):
        base = nd.all_input_nodes[0]
        if rep.get(base.name, -2) != rep.get(nd.name, -1) or not isinstance(base.meta.get("val"), torch.Tensor):
            break
        nd = base
    return nd


def steady_malloc() -> bool:
    """Keep freed memory in this process (glibc ``mallopt``: no ``mmap`` for large blocks,
    no trimming), so that a tensor allocated again in every step or timing repeat reuses
    pages instead of faulting fresh zeroed ones in: the executor's workers and the
    ``measured`` cost model both call it, so operators are timed as they run. Returns
    whether it applied (glibc only)."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 1 << 62))
    except (OSError, AttributeError):
        return False
