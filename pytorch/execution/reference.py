"""The eager single-process reference a measured run is checked against (docs/execution.md,
"The check"): :func:`eager_reference` runs ``loss.backward()`` and the ``torch.optim`` step of
the model as built, :func:`check_reference` compares every step's loss and step 0's gradients
with a run's, :func:`check_captured` refuses to run another step than the plan's graph was
captured from (inputs, loss), and :class:`ReferenceCompared` is the comparison's part of a
measurement.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.execution.worker import ModelSpec, load

__all__ = ["CUDA_TOLERANCE", "ReferenceCompared", "torch_optimizer", "eager_reference", "captured_meta",
           "check_captured", "check_reference"]


CUDA_TOLERANCE = (1e-4, 1e-3)
"""``(atol, rtol)`` of the gradient check of a plan that computes on a GPU: CUDA kernels sum
in other orders than the CPU's and than each other (a mixed plan's CPU operators)."""


@dataclass(kw_only=True)
class ReferenceCompared:
    """How measured steps compared with eager single-process steps of the same model and
    inputs (part of :class:`Measured` and of the pipeline's
    :class:`~dnnplace.pytorch.execution.pipeline.PipelineMeasured`; times in ms)."""

    matches_reference: bool         # every step's loss and step 0's gradients equal the eager steps'
    max_abs_grad_diff: float
    loss: float
    reference_loss: float
    n_grads_checked: int
    n_losses_checked: int
    eager_step_ms: float

    def reference_dict(self) -> dict:
        """The comparison's entries of a measurement's record (``eager_step_ms`` aside: each
        record puts it beside its own timings)."""
        return {"matches_reference": self.matches_reference, "max_abs_grad_diff": self.max_abs_grad_diff,
                "loss": self.loss, "reference_loss": self.reference_loss, "grads_checked": self.n_grads_checked,
                "losses_checked": self.n_losses_checked}


def torch_optimizer(kind: str, params: list, lr: float) -> Any:
    """The ``torch.optim`` optimizer that :func:`~dnnplace.pytorch.capture.ops.apply_update`
    equals (``None`` without parameters)."""
    import torch
    if not params:
        return None
    return {"sgd": lambda: torch.optim.SGD(params, lr=lr),
            "momentum": lambda: torch.optim.SGD(params, lr=lr, momentum=0.9),
            "adam": lambda: torch.optim.Adam(params, lr=lr)}[kind]()


def eager_reference(model: ModelSpec, *, steps: int = 6, threads: int = 1, eval_mode: bool = False,
                    device: str = "cpu") -> tuple[list[float], dict, float]:
    """Eager training steps on ``threads`` threads from the model as built:
    ``loss_fn(model(*inputs), *inputs).backward()`` plus the ``torch.optim`` step, ``steps``
    times (at least 2). Returns every step's loss, step 0's gradients by parameter name and
    the median step time (ms) after the first. ``eval_mode``: the model in eval mode
    (the pipeline runs the forward graph that ``--inference`` captures). ``device``: where
    the model computes (gradients come back on the CPU; a GPU is synchronized per step)."""
    import torch

    from dnnplace.pytorch.capture.ops import steady_malloc
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    steady_malloc()   # as in the workers
    try:
        net, inputs, loss_fn = load(model)
        cuda = device.startswith("cuda")
        if cuda:
            from dnnplace.pytorch.execution.worker import exact_cuda_math
            exact_cuda_math()
            net = net.to(device)
            inputs = tuple(x.to(device) for x in inputs)
        if eval_mode:
            net.eval()
        opt = torch_optimizer(model.optimizer, list(net.parameters()), model.lr)
        times, losses, grads = [], [], {}
        for i in range(max(steps, 2)):
            t0 = time.perf_counter()
            if opt is not None:
                opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(*inputs), *inputs)
            loss.backward()
            if i == 0:
                grads = {k: p.grad.detach().cpu().clone() for k, p in net.named_parameters() if p.grad is not None}
            if opt is not None:
                opt.step()
            if cuda:
                torch.cuda.synchronize(device)
            times.append((time.perf_counter() - t0) * 1e3)
            losses.append(float(loss.detach()))
        return losses[:max(steps, 1)], grads, statistics.median(times[1:])
    finally:
        torch.set_num_threads(old)


def captured_meta(inst: Any) -> Mapping | None:
    """What :func:`check_captured` compares: the capture record of an instance's graph
    (``None`` without an instance, or for a graph tiled from a captured block, whose
    record is the block's)."""
    meta = inst.graph.meta if inst is not None else {}
    return None if meta.get("tiled") else meta.get("capture")


def check_captured(captured: Mapping | None, model: ModelSpec, inputs: Sequence[Any], loss_fn: Any, *,
                   training: bool = True) -> None:
    """Refuse to run another step than the plan's: the example inputs (shapes, dtypes) and,
    for a training step, the loss that the plan's graph was captured with
    (``graph.meta["capture"]``; graphs captured before the loss was recorded skip that
    check) against the model as given. A batch of 32 run on a plan captured at 64 has the
    same node ids, so nothing else would notice."""
    import torch

    from dnnplace.pytorch.capture.models import is_user_spec
    from dnnplace.pytorch.capture.named_losses import LOSSES, loss_name
    if not captured:
        return

    def shown(shapes: Sequence) -> str:
        return ", ".join(f"{'x'.join(map(str, s))}:{str(d).removeprefix('torch.')}" for s, d in shapes)
    want = captured.get("inputs")
    have = [[list(x.shape), str(x.dtype)] for x in inputs if isinstance(x, torch.Tensor)]
    if want is not None and [[list(s), str(d)] for s, d in want] != have:
        flags = " ".join(f"--input {'x'.join(map(str, s))}:{str(d).removeprefix('torch.')}" for s, d in want)
        batches = [{s[0] for s, _ in shapes if s} for shapes in (want, have)]
        batch = ""
        if all(len(b) == 1 for b in batches) and batches[0] != batches[1]:
            batch = f" (batch {min(batches[0])}, not {min(batches[1])})"
            if not model.inputs and not is_user_spec(model.spec):
                flags = f"--batch {min(batches[0])}"
        raise InputError(f"the plan's graph was captured with input(s) {shown(want)}, this run's are {shown(have)}"
                         f"{batch}: its times and transfer sizes are another step's; pass {flags} (or capture and "
                         "solve again at the new shape)")
    recorded = captured.get("loss_fn")
    if training and captured.get("training") and recorded and recorded != loss_name(loss_fn):
        ours = f"{loss_name(loss_fn)!r}{' (no --loss given)' if model.loss is None else ''}"
        if recorded in LOSSES:
            raise InputError(f"the plan was captured with loss {recorded!r}, this run's is {ours}: pass "
                             f"--loss {recorded}")
        raise InputError(f"the plan was captured with the model's own loss {recorded!r}, this run's is {ours}: "
                         "leave out --loss")


def check_reference(losses: Sequence[float], ref_losses: Sequence[float], grads: Mapping[str, Any],
                    ref_grads: Mapping[str, Any], *, atol: float, rtol: float) -> tuple[bool, list[float]]:
    """Whether a run equals the eager steps: every step's loss (the optimizer updates are
    checked too, not only step 0) and every gradient of step 0, elementwise within
    ``atol + rtol * |eager|``; no gradient missing or extra. Also the max |diff| per gradient."""
    import torch
    ok = bool(losses) and all(bool(np.isfinite(a)) and abs(a - b) <= atol + rtol * abs(b)
                              for a, b in zip(losses, ref_losses))
    ok = ok and not set(grads) - set(ref_grads)
    diffs = []
    for name, ref in ref_grads.items():
        ours = grads.get(name)
        if ours is None or ours.shape != ref.shape:
            ok = False
            diffs.append(float("inf"))
            continue
        diffs.append(float((ours - ref).abs().max()) if ref.numel() else 0.0)
        ok = ok and bool(torch.allclose(ours, ref, atol=atol, rtol=rtol))
    return bool(ok), diffs
