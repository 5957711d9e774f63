"""The work of a captured graph: FLOPs and bytes moved per ATen node, and node times summed
onto the merged nodes.

:func:`node_work` counts every ATen node of a :class:`~dnnplace.pytorch.capture.op_table.Captured`
graph with PyTorch's own FLOP formulas (``torch.utils.flop_counter``) and its bytes by storage
(views: zero), and an optimizer apply node's bytes by its state tensors; the cost models of
:mod:`dnnplace.pytorch.capture.costs` turn the :class:`Work` into times, and
:func:`per_node_times` sums them onto the merged nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dnnplace.pytorch.capture.op_table import Captured
from dnnplace.pytorch.capture.ops import OPTIMIZER_STATE, is_view, op_name, require_torch, storage_bytes, value_bytes

__all__ = ["Work", "node_work", "per_node_times"]


@dataclass
class Work:
    """Per traced fx node (in graph order): its merged node, FLOPs, bytes moved, dtype."""

    names: list[str]
    node: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    dtype: list[str]
    op: list[str]
    apply_bytes: dict[int, float] = field(default_factory=dict)


def _flop_registry() -> dict:
    from torch.utils.flop_counter import FlopCounterMode
    return FlopCounterMode(display=False).flop_registry


def node_work(cap: Captured) -> Work:
    """FLOPs and bytes moved of every ATen node of a captured graph (views: zero)."""
    torch = require_torch()
    from torch.fx.node import map_arg
    reg = _flop_registry()
    names, node, flops, nbytes, dtypes, ops = [], [], [], [], [], []
    for nd in cap.gm.graph.nodes:
        if nd.op != "call_function" or cap.rep.get(nd.name, -1) < 0 or is_view(nd):
            continue
        val = nd.meta.get("val")
        args = map_arg(nd.args, lambda a: a.meta.get("val"))
        kwargs = map_arg(nd.kwargs, lambda a: a.meta.get("val"))
        f = 0.0
        packet = getattr(nd.target, "overloadpacket", None)
        if packet in reg:
            f = float(reg[packet](*args, **kwargs, out_val=val))
        seen, moved = set(), value_bytes(val)
        for a in nd.all_input_nodes:
            if a.name not in seen:
                seen.add(a.name)
                moved += storage_bytes(a.meta.get("val"))
        first = val[0] if isinstance(val, (tuple, list)) and val else val
        dt = str(first.dtype).replace("torch.", "") if isinstance(first, torch.Tensor) else "float32"
        names.append(nd.name)
        node.append(cap.rep[nd.name])
        flops.append(f)
        nbytes.append(moved)
        dtypes.append(dt)
        ops.append(op_name(nd))
    state = OPTIMIZER_STATE.get(cap.meta.get("optimizer") or "sgd", 0)
    apply_bytes = {a: (3 + 2 * state) * float(cap.persistent_bytes[p]) for p, a in cap.apply_of.items()}
    return Work(names, np.array(node, dtype=np.int64), np.array(flops), np.array(nbytes, dtype=np.float64),
                dtypes, ops, apply_bytes)


def per_node_times(cap: Captured, work: Work, fx_ms: np.ndarray, apply_ms: dict[int, float]) -> np.ndarray:
    """Merged-node times: the sum of each node's ATen times ``fx_ms`` (in :class:`Work` order)
    plus the apply times ``apply_ms``."""
    out = np.bincount(work.node, weights=fx_ms, minlength=cap.n).astype(np.float64) if len(work.node) \
        else np.zeros(cap.n)
    for a, t in apply_ms.items():
        out[a] += t
    return out
