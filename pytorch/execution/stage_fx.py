"""The operations a pipeline stage module adds at its boundaries, and the tracer that keeps them.

:mod:`~dnnplace.pytorch.execution.pipeline_stages` builds each stage's ``torch.fx`` graph from the
model's ATen forward graph plus three boundary operations (below). A stage module
reaches its process through ``torch.save``; ``torch.fx`` rebuilds a pickled
``GraphModule`` by re-tracing its code with the graph's tracer class, so the graphs are
made with :class:`StageTracer`, which keeps the three as calls (a plain trace would
inline them, and the gradient hook of :func:`grad_contiguous` would be lost).

The classes exist where torch is installed (the package imports without it).
"""

from __future__ import annotations

from typing import Any

try:
    import torch
except ImportError:   # listing and importing the package works without torch; running a pipeline needs it
    torch = None

if torch is not None:
    class _GradContiguous(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g.contiguous()


def grad_contiguous(t: Any) -> Any:
    """``t``, whose gradient is made contiguous on its way back. A stage sends the
    gradient of each tensor it received to the previous stage, which receives it into a
    buffer laid out like that gradient (a slice of a concatenation's gradient, say); gloo
    sends and receives contiguous tensors only."""
    return _GradContiguous.apply(t)


def contiguous(t: Any) -> Any:
    """A stage output as sent (gloo sends contiguous tensors; the real strides can differ
    from the trace's, e.g. a CPU convolution's output); a no-op when it already is."""
    return t.contiguous()


def restride(t: Any, stride: tuple) -> Any:
    """A received tensor in its producer's layout (the views replayed on it may need it)."""
    return torch.empty_strided(t.shape, stride, dtype=t.dtype).copy_(t)


if torch is not None:
    class StageTracer(torch.fx.Tracer):
        """The tracer of the stage graphs: the boundary operations stay calls when a pickled
        stage module is rebuilt."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("autowrap_functions", (grad_contiguous, contiguous, restride))
            super().__init__(*args, **kwargs)
