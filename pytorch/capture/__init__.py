"""Operator graphs from PyTorch models: capture, costs, tiling and fitted links.

* :mod:`~dnnplace.pytorch.capture.fx` — :func:`capture` turns an ``nn.Module`` (built on
  the ``meta`` device: no weights, no GPU) into an :class:`~dnnplace.graphs.Instance`:
  ``torch.export``, then the joint forward+backward ATen graph of a loss wrapper
  (``aot_export_module(trace_joint=True)``) for training, or the forward graph for
  inference; views and ``getitem`` merged into their producers (the operator table of
  :mod:`~dnnplace.pytorch.capture.op_table`).
* :mod:`~dnnplace.pytorch.capture.models` — :func:`~.models.load_model`, the one resolver of a
  model spec (zoo name, ``FILE.py:FACTORY``, ``package.module:FACTORY``, with ``--input``
  shapes and a ``--loss``) to ``(model, inputs, loss_fn)``, for capture and execution.
* :mod:`~dnnplace.pytorch.capture.costs` — one :class:`CostModel` interface: ``measured``
  (per-node timing through an ``fx.Interpreter``), ``roofline(gpu)`` (FLOPs and bytes
  against V100/A100/H100 data-sheet peaks), ``calibrated`` (roofline times per-op-type
  efficiency fitted from one measured run); a JSON profile cache.
* :mod:`~dnnplace.pytorch.capture.tiling` — capture one repeating block once and tile it
  with numpy, or :func:`~.assembly.assemble` captured parts (stem, blocks, head) into the
  training graph a direct capture would give (:func:`dnnplace.pytorch.capture.zoo.parts.whole_model`):
  10k-200k-operator graphs in seconds.
* :mod:`~dnnplace.pytorch.capture.links` — time device-to-device, host-device and
  ``torch.distributed`` transfers and fit ``beta0 + beta1 * bytes``.
* :mod:`~dnnplace.pytorch.capture.topology` — a cluster from the local GPUs' NVLink/PCIe
  topology read through NVML (optional ``nvidia-ml-py``).

``torch`` is an optional extra (``pip install -e ".[torch]"``): this package imports it
only inside the modules that need it; :func:`require_torch` says how to install it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dnnplace.graphs.instance import Instance
from dnnplace.pytorch.capture.ops import require_torch

__all__ = ["capture", "require_torch"]


def capture(model: Any, example_inputs: Sequence[Any], loss_fn: Callable | None = None, *,
            training: bool = True, cost: Any = "roofline:v100", name: str = "captured",
            optimizer: str = "adam", cluster: Any = None, origin: dict | None = None) -> Instance:
    """Capture ``model`` as an :class:`Instance` with costs (see the module docstring).

    ``cost`` is a :class:`~dnnplace.pytorch.capture.costs.CostModel` or its spec
    (``"roofline:v100"``, ``"roofline:a100"``, ``"measured"``, ``"calibrated:v100"``), or
    several specs joined by ``+``, one compute column each (``"measured:cuda+measured:cpu"``:
    a GPU column and a CPU column for a cluster of both kinds; the kinds must differ).
    ``cluster`` (optional) is attached to the instance. ``origin`` (optional, from
    :func:`~dnnplace.pytorch.capture.costs.model_origin`) joins the measured profiles' cache key.

    Examples
    --------
    >>> import torch
    >>> with torch.device("meta"):
    ...     net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ...     x = torch.randn(32, 8)
    >>> inst = capture(net, (x,), lambda out, x: out.square().mean())
    >>> g = inst.graph
    >>> sorted(set(g.roles)), int(g.backward.sum()) > 0, g.meta["cost"]["model"]
    (['apply', 'compute', 'grad', 'param'], True, 'roofline:v100')
    """
    import numpy as np

    from dnnplace.pytorch.capture.costs import cost_models
    from dnnplace.pytorch.capture.fx import to_graph, trace
    cms = cost_models(cost)
    cap = trace(model, example_inputs, loss_fn, training=training, optimizer=optimizer)
    if origin is not None:
        cap.meta["origin"] = origin
    times = np.column_stack([cm.times(cap, model=model, inputs=tuple(example_inputs), key=name) for cm in cms])
    meta = cms[0].describe()
    if len(cms) > 1:
        meta["columns"] = {cm.kind: cm.describe() for cm in cms}
    return Instance(to_graph(cap, times, kind=tuple(cm.kind for cm in cms), name=name, cost_meta=meta), cluster,
                    f"capture:{name}")
