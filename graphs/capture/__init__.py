"""Operator graphs from PyTorch models: capture, costs, tiling and fitted links.

* :mod:`~dnnplace.graphs.capture.fx` — :func:`capture` turns an ``nn.Module`` (built on
  the ``meta`` device: no weights, no GPU) into an :class:`~dnnplace.graphs.Instance`:
  ``torch.export``, then the joint forward+backward ATen graph of a loss wrapper
  (``aot_export_module(trace_joint=True)``) for training, or the forward graph for
  inference; views and ``getitem`` merged into their producers.
* :mod:`~dnnplace.graphs.capture.costs` — one :class:`CostModel` interface: ``measured``
  (per-node timing through an ``fx.Interpreter``), ``roofline(gpu)`` (FLOPs and bytes
  against V100/A100/H100 data-sheet peaks), ``calibrated`` (roofline times per-op-type
  efficiency fitted from one measured run); a JSON profile cache.
* :mod:`~dnnplace.graphs.capture.tiling` — capture one repeating block once and tile it
  with numpy into 10k-200k-operator training graphs.
* :mod:`~dnnplace.graphs.capture.links` — time device-to-device, host-device and
  ``torch.distributed`` transfers and fit ``beta0 + beta1 * bytes``.

``torch`` is an optional extra (``pip install -e ".[torch]"``): this package imports it
only inside the modules that need it; :func:`require_torch` says how to install it.
"""

from __future__ import annotations

from dnnplace.graphs.errors import InputError

__all__ = ["require_torch"]


def require_torch():
    """The ``torch`` module, or an :class:`InputError` saying how to install the extra."""
    try:
        import torch
    except ImportError:
        raise InputError('capturing PyTorch models needs torch: pip install -e ".[torch]"') from None
    return torch
