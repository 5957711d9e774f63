"""The executor's own cost: its one-device step against an eager step, interleaved in one
process (docs/execution.md, "The executor's overhead").

Two runs of the same model measured minutes apart on a shared VM can differ by more than
the overhead being measured (docs/execution.md, The executor's overhead), so
:func:`interleaved_overhead` takes both in one process, one thread,
one allocator: the eager step (``loss.backward()`` and the ``torch.optim`` step of the
model as built, as :func:`~dnnplace.pytorch.execution.reference.eager_reference` runs it) and
the executor's step of the whole graph on one device (:class:`DeviceStep` over the
one-device program of :func:`~dnnplace.pytorch.execution.program.build_programs`, in trace
order, on a one-process gloo group, as a worker runs it) alternate step by step, which of
the two goes first alternating too. Each pair gives a ratio executor / eager; the overhead
is the median of the ratios (their interval is the benchmark's, results/execution/overhead.md),
so a drift of the host falls on both sides of every pair.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass

from dnnplace.pytorch.execution.worker import ModelSpec, load, trace_step

__all__ = ["Overhead", "interleaved_overhead"]


@dataclass
class Overhead:
    """Paired step times (ms) of :func:`interleaved_overhead`."""

    eager_ms: list[float]
    executor_ms: list[float]
    max_loss_diff: float = 0.0    # largest |executor loss - eager loss| over the steps: the same work

    @property
    def ratios(self) -> list[float]:
        return [b / a for a, b in zip(self.eager_ms, self.executor_ms)]

    def summary(self) -> dict:
        """The medians of the step times and of the ratios executor / eager."""
        return {"eager_ms": statistics.median(self.eager_ms), "executor_ms": statistics.median(self.executor_ms),
                "ratio": statistics.median(self.ratios), "pairs": len(self.eager_ms),
                "max_loss_diff": self.max_loss_diff}


def interleaved_overhead(model: ModelSpec, *, steps: int = 30, warmup: int = 3, threads: int = 1) -> Overhead:
    """``steps`` measured pairs (after ``warmup`` unmeasured ones) of an eager step and the
    executor's one-device step, alternating in this process on ``threads`` threads (module
    docstring). Each side has its own copy of the model's parameters and optimizer state, so
    both take the same steps: their losses agree at every step (``max_loss_diff``), which
    makes the times comparable."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from dnnplace.pytorch.capture.ops import steady_malloc
    from dnnplace.pytorch.execution.device_step import DeviceStep
    from dnnplace.pytorch.execution.program import build_programs
    from dnnplace.pytorch.execution.reference import torch_optimizer
    from dnnplace.pytorch.execution.worker import bind_step
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be >= 1 and warmup >= 0 (got {steps}, {warmup})")
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    steady_malloc()   # as in the workers
    net, inputs, loss_fn = load(model)
    opt = torch_optimizer(model.optimizer, list(net.parameters()), model.lr)
    other, other_inputs, other_loss = load(model)
    cap = trace_step(model, other, other_inputs, other_loss)
    prog = build_programs(cap, np.zeros(len(cap.ids), dtype=int), [list(range(len(cap.ids)))])[0]
    bound = {k: v.clone() for k, v in bind_step(cap, other, other_inputs).items()}
    runner = DeviceStep(cap, prog, bound, [0], model)

    losses: list[list[float]] = [[], []]

    def eager() -> float:
        t0 = time.perf_counter()
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(*inputs), *inputs)
        loss.backward()
        if opt is not None:
            opt.step()
        t = (time.perf_counter() - t0) * 1e3
        losses[0].append(float(loss.detach()))
        return t

    def executor() -> float:
        t0 = time.perf_counter()
        runner.run(dist, record=False)
        t = (time.perf_counter() - t0) * 1e3
        losses[1].append(runner.loss_value)
        return t

    with tempfile.TemporaryDirectory(prefix="dnnplace-overhead-") as tmp:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(tmp, 'rendezvous')}", rank=0,
                                world_size=1)
        try:
            out = Overhead([], [])
            for s in range(warmup + steps):
                if s % 2:
                    b, a = executor(), eager()
                else:
                    a, b = eager(), executor()
                if s >= warmup:
                    out.eager_ms.append(a)
                    out.executor_ms.append(b)
            out.max_loss_diff = max(abs(x - y) for x, y in zip(*losses))
            return out
        finally:
            dist.destroy_process_group()
            torch.set_num_threads(old)
