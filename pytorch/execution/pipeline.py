"""A contiguous max-load split of a forward model, run as a pipeline (``torch.distributed.pipelining``).

The max-load solvers (Tarnawski et al. Sec. 5) place the nodes of a *forward* graph
(``dnnplace capture ... --inference``: node ids are fx node names, ``param:NAME`` and
``input:inputK``) on devices for pipelined throughput.
:func:`~dnnplace.pytorch.execution.pipeline_stages.build_stages` turns such a
placement into stage modules and :func:`run_pipeline` trains them over micro-batches:

* **stages**: the devices that hold a node, ordered by the first node each holds in a
  topological order of the graph (the trace order, with every source -- parameter, input
  -- moved just before its first consumer); a contiguous split gives a path of stages.
  Every edge must go from stage ``i`` to a stage ``j >= i``; otherwise one
  :class:`InputError` names the edge (``not contiguous: node X on stage 1 feeds node Y on
  stage 0``).
* **stage modules**: the forward graph is traced with
  :func:`dnnplace.pytorch.capture.fx.trace` (``training=False``, the same trace as the
  capture, so fx node names equal the graph's ids; :func:`run_pipeline` traces it at the
  micro-batch's shapes, which the graph bakes into views and factories) and cut into one ``torch.fx``
  ``GraphModule`` per stage. Views (and constants) are not values of their own: a stage
  replays the views it reads on the tensor it received (a tensor and its views cross
  once, as in :mod:`~dnnplace.pytorch.execution.program`). Stage ``s`` takes every value made on
  an earlier stage that stage ``s`` or a later one reads (a value used two stages on is
  passed through the stage between), and stage 0 takes the model's inputs, wherever the
  plan puts the ``input:`` nodes (the batch enters the pipeline at its head).
* **parameters** live on the stage that holds their ``param:`` node, as the module's own
  ``nn.Parameter``. A parameter read by a later stage (the plan put the parameter and its
  reader on different devices, or two stages share it) is sent there like an activation,
  which is the plan's transfer; its gradient comes back through the pipeline's backward
  and accumulates in the holder's ``.grad``, so nothing is replicated and the gradient
  stays exact.
* **loss**: the model's loss ``loss_fn(output, *inputs)`` on the last stage, per
  micro-batch on that micro-batch's rows of the inputs. Gradients accumulate over the
  micro-batches (``scale_grads=False``), so the micro-batch losses must add up to the
  whole-batch loss: a *sum-type* loss (``sum``) is used as is, a *mean-type* loss
  (``mse``, ``cross_entropy``: a mean over the batch) is weighted by
  ``rows / batch`` = ``1 / M`` (``M`` must divide the batch: the stages are built for
  one micro-batch shape). Which of the two a loss is,
  is found once on the eager model (the micro-batch losses of its output either sum to
  the batch loss or average to it); a loss that is neither is refused.
* **the step**: the stage modules are built once, in the launching process, and each
  stage's process loads its own module (``torch.save``; it rebuilds the model only for the
  inputs and the loss); one process per stage (gloo, ``torch.set_num_threads(1)``,
  started and stopped under a deadline by :func:`dnnplace.pytorch.execution.launch.run_processes`), a
  ``PipelineStage`` and ``ScheduleGPipe`` or ``Schedule1F1B`` over ``M`` micro-batches,
  then the optimizer's update of each stage's parameters; ``warmup`` steps, then
  ``steps`` timed ones (barrier, then from the earliest start to the latest end over the
  processes). Step 0's every parameter gradient and every step's loss (so the optimizer
  updates too) are compared with eager single-process steps (``loss.backward()`` on the
  whole batch, then ``torch.optim``'s step).

The forward graph is the model in eval mode (that is what ``--inference`` captures:
dropout off, batch norm on its running statistics), so the stages train that forward
and the reference is an eager step of the model in eval mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.ops import steady_malloc
from dnnplace.pytorch.execution.launch import run_processes
from dnnplace.pytorch.execution.pipeline_stages import build_stages
from dnnplace.pytorch.execution.reference import (
    ReferenceCompared,
    captured_meta,
    check_captured,
    check_reference,
    eager_reference,
    torch_optimizer,
)
from dnnplace.pytorch.execution.worker import ModelSpec, load, no_process_locks, step_span_ms

__all__ = ["PipelineMeasured", "SCHEDULES", "loss_kind", "run_pipeline", "cmd_pipeline"]

SCHEDULES = ("gpipe", "1f1b")


# ---------------------------------------------------------------------------- loss
def _flat_outputs(output: Any) -> tuple[list, Any]:
    from torch.utils._pytree import tree_flatten
    return tree_flatten(output)


def _rows(inputs: Sequence[Any], lo: int, hi: int) -> tuple:
    import torch
    return tuple(x[lo:hi] if isinstance(x, torch.Tensor) and x.dim() else x for x in inputs)


def loss_kind(output: Any, inputs: Sequence[Any], loss_fn: Any, microbatches: int, *, rtol: float = 1e-5) -> str:
    """``"sum"`` if the micro-batch losses of ``output`` add up to the whole-batch loss,
    ``"mean"`` if their row-weighted mean is it; else an :class:`InputError`.

    >>> import torch
    >>> y = torch.arange(12.0).reshape(6, 2)
    >>> loss_kind(y, (y,), lambda o, *x: o.sum(), 3), loss_kind(y, (y,), lambda o, *x: (o ** 2).mean(), 4)
    ('sum', 'mean')
    """
    import torch
    from torch.utils._pytree import tree_unflatten
    flat, spec = _flat_outputs(output)
    batch = _batch(inputs)
    with torch.no_grad():
        whole = float(loss_fn(output, *inputs))
        parts, weights = [], []
        for lo, hi in _bounds(batch, microbatches):
            chunk = [t[lo:hi] if isinstance(t, torch.Tensor) and t.dim() else t for t in flat]
            parts.append(float(loss_fn(tree_unflatten(chunk, spec), *_rows(inputs, lo, hi))))
            weights.append((hi - lo) / batch)
    tol = 1e-6 + rtol * abs(whole)
    if abs(sum(parts) - whole) <= tol:
        return "sum"
    if abs(sum(w * p for w, p in zip(weights, parts)) - whole) <= tol:
        return "mean"
    raise InputError(f"the model's loss over {microbatches} micro-batches is neither a sum nor a batch mean of "
                     f"their losses (whole batch {whole:.6g}, micro-batch losses {[round(p, 6) for p in parts]}); "
                     "--pipeline needs a loss that adds up over the rows of the batch (e.g. --loss sum or mse)")


def _batch(inputs: Sequence[Any]) -> int:
    import torch
    sizes = {int(x.shape[0]) for x in inputs if isinstance(x, torch.Tensor) and x.dim()}
    if len(sizes) != 1:
        raise InputError(f"--pipeline splits the batch along dim 0 of every input; the inputs' first dims are "
                         f"{sorted(sizes) or 'none'}")
    return sizes.pop()


def _bounds(batch: int, m: int) -> list[tuple[int, int]]:
    """Row ranges of ``torch.tensor_split(range(batch), m)`` (the schedules' split)."""
    q, r = divmod(batch, m)
    out, lo = [], 0
    for i in range(m):
        hi = lo + q + (1 if i < r else 0)
        out.append((lo, hi))
        lo = hi
    return out


# ---------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class _Job:
    model: ModelSpec
    microbatches: int
    schedule: str
    kind: str                   # "sum" or "mean"
    steps: int
    warmup: int
    out_dir: str
    init_file: str
    timeout_s: float
    world: int
    threads: int = 1


def _run_stage(rank: int, job: _Job) -> None:
    """One stage's process (spawned with its ``rank``, the stage index)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    from torch.utils._pytree import tree_unflatten
    torch.set_num_threads(job.threads)
    steady_malloc()
    no_process_locks()
    dist.init_process_group("gloo", init_method=f"file://{job.init_file}", rank=rank, world_size=job.world,
                            timeout=timedelta(seconds=job.timeout_s))
    try:
        net, inputs, loss_fn = load(job.model)
        net.eval()
        saved = torch.load(os.path.join(job.out_dir, f"stage-{rank}.pt"), weights_only=False)
        mod, names = saved["module"], saved["params"]
        batch = _batch(inputs)
        last = rank == job.world - 1
        spec = None
        if last:
            with torch.no_grad():
                spec = _flat_outputs(net(*inputs))[1]

        def pipe_loss(out: Any, rows: Any) -> Any:
            lo, hi = int(rows[0]), int(rows[-1]) + 1
            y = tree_unflatten(list(out) if isinstance(out, (tuple, list)) else [out], spec)
            loss = loss_fn(y, *_rows(inputs, lo, hi))
            return loss * ((hi - lo) / batch) if job.kind == "mean" else loss

        stage = PipelineStage(mod, rank, job.world, torch.device("cpu"))
        cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[job.schedule]
        sched = cls(stage, job.microbatches, loss_fn=pipe_loss, scale_grads=False)
        opt = torch_optimizer(job.model.optimizer, list(mod.parameters()), job.model.lr)
        target = torch.arange(batch)
        records, grads, step_losses = [], {}, []
        for s in range(job.warmup + job.steps):
            if opt is not None:
                opt.zero_grad(set_to_none=True)
            losses_seen = []
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0 and last:
                sched.step(*inputs, target=target, losses=losses_seen)
            elif rank == 0:
                sched.step(*inputs)
            elif last:
                sched.step(target=target, losses=losses_seen)
            else:
                sched.step()
            if s == 0:
                grads = {names[k]: p.grad.detach().clone()
                         for k, p in mod.named_parameters() if p.grad is not None}
            if opt is not None:
                opt.step()
            t_end = time.perf_counter()
            if last:
                step_losses.append(float(sum(float(x.detach()) for x in losses_seen)))
            if s >= job.warmup:
                records.append([t0, t_end])
            span = step_span_ms(dist, t0, t_end)
            if rank == 0:
                print(f"pipeline step {s + 1}/{job.warmup + job.steps}{' (warm-up)' if s < job.warmup else ''}: "
                      f"{span:.2f} ms", file=sys.stderr, flush=True)
        dist.barrier()
        torch.save({"grads": grads, "losses": step_losses}, os.path.join(job.out_dir, f"outputs-{rank}.pt"))
        with open(os.path.join(job.out_dir, f"times-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "steps": records}, f)
    except Exception as exc:
        # the launcher reports the first process it sees fail, often a peer's "connection
        # closed"; the cause is here
        print(f"stage {rank} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------- measurement
@dataclass
class PipelineMeasured(ReferenceCompared):
    """What :func:`run_pipeline` measured (times in ms)."""

    step_ms: list[float]
    batch: int
    microbatches: int
    schedule: str
    loss_kind: str
    stages: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        s = self.step_ms
        med = statistics.median(s)
        return {"measured_step_ms": med, "measured_per_sample_ms": med / self.batch, "measured_min_ms": min(s),
                "measured_max_ms": max(s), "measured_steps_ms": s, "batch": self.batch,
                "microbatches": self.microbatches, "schedule": self.schedule, "loss_kind": self.loss_kind,
                "eager_step_ms": self.eager_step_ms, "eager_per_sample_ms": self.eager_step_ms / self.batch,
                **self.reference_dict(), "stages": self.stages}


def run_pipeline(model: ModelSpec, placement: Mapping[str, str], device_names: Sequence[str] = (), *,
                 microbatches: int = 4, schedule: str = "gpipe", steps: int = 5, warmup: int = 2,
                 timeout_s: float = 300.0, threads: int = 1, atol: float = 1e-5,
                 rtol: float = 1e-4, captured: Mapping | None = None) -> PipelineMeasured:
    """Train the stages of ``placement`` (see the module docstring) and measure the step.

    ``placement`` maps every node id of the model's forward graph to a device name (of
    ``device_names`` when given). Gradients match when ``|ours - eager| <= atol + rtol *
    |eager|`` elementwise. Bad splits, schedules and micro-batch counts are refused with
    an :class:`InputError` before any process starts, as is a model other than the one the
    forward graph was captured from (``captured``: its ``graph.meta["capture"]``).
    """
    import torch.multiprocessing as mp

    if schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    if steps < 1 or warmup < 0:
        raise InputError(f"--steps must be >= 1 and the warm-up >= 0 (got {steps}, {warmup})")
    net, inputs, loss_fn = load(model)
    check_captured(captured, model, inputs, loss_fn, training=False)
    net.eval()
    batch = _batch(inputs)
    if microbatches < 1 or batch % microbatches:
        raise InputError(f"--microbatches must divide the batch size {batch} (got {microbatches}): the pipeline's "
                         "stages are built for one micro-batch shape")
    # traced at the micro-batch's shapes (the graph bakes sizes into views and factories);
    # the node ids are those of the whole batch's graph
    stages = build_stages(net, _rows(inputs, 0, batch // microbatches), placement, device_names)
    if schedule == "1f1b" and microbatches < stages.n:
        raise InputError(f"1F1B needs at least as many micro-batches as stages ({stages.n}), got {microbatches}")
    import torch
    with torch.no_grad():
        out = net(*inputs)
    kind = loss_kind(out, inputs, loss_fn, microbatches)
    del net, out
    ref_losses, ref_grads, eager_ms = eager_reference(model, steps=warmup + steps, threads=threads, eval_mode=True)
    with tempfile.TemporaryDirectory(prefix="dnnplace-pipe-") as tmp:
        for s in range(stages.n):   # the parent's stage modules (the model as built), one file per process
            torch.save({"module": stages.modules[s], "params": stages.params[s]}, os.path.join(tmp, f"stage-{s}.pt"))
        job = _Job(model=model, microbatches=microbatches, schedule=schedule, kind=kind, steps=steps, warmup=warmup,
                   out_dir=tmp, init_file=os.path.join(tmp, "rendezvous"), timeout_s=timeout_s, world=stages.n,
                   threads=threads)
        print(f"pipelining {stages.n} stage(s) ({' -> '.join(stages.devices)}), {microbatches} micro-batches, "
              f"{schedule}", file=sys.stderr, flush=True)
        run_processes(mp, job, stages.n, timeout_s, fn=_run_stage)
        records, outs = [], []
        for r in range(stages.n):
            with open(os.path.join(tmp, f"times-{r}.json")) as f:
                records.append(json.load(f)["steps"])
            outs.append(torch.load(os.path.join(tmp, f"outputs-{r}.pt")))
    step_ms = [(max(rec[s][1] for rec in records) - min(rec[s][0] for rec in records)) * 1e3
               for s in range(steps)]
    losses = outs[-1]["losses"]   # every step's, warm-up included: the updates must agree too
    grads = {k: g for o in outs for k, g in o["grads"].items()}
    ok, diffs = check_reference(losses, ref_losses, grads, ref_grads, atol=atol, rtol=rtol)
    ok = ok and len(losses) == len(ref_losses)
    return PipelineMeasured(step_ms=step_ms, batch=batch, microbatches=microbatches, schedule=schedule,
                            loss_kind=kind, matches_reference=bool(ok), max_abs_grad_diff=max(diffs, default=0.0),
                            loss=losses[0] if losses else float("nan"), reference_loss=ref_losses[0],
                            n_grads_checked=len(diffs), n_losses_checked=min(len(losses), len(ref_losses)),
                            eager_step_ms=eager_ms, stages=stages.summary())


# ---------------------------------------------------------------------------- command
MAXLOAD_IS = ("the forward graph's bottleneck device load, not a prediction of the training step measured above "
              "(no backward pass, optimizer or pipeline schedule in it)")
"""What the max-load objective printed beside a pipeline's measurement is (and is not)."""


def _maxload_objective(args: argparse.Namespace, placement: Mapping[str, str], inst: Any) -> tuple[Any, str, str]:
    """The plan's max-load objective: re-scored on the instance when there is one (the
    result's objective variant), else the result's own ``objective``."""
    from dnnplace.graphs.io import read_json
    doc = read_json(args.result)
    ev = doc.get("evaluation") if isinstance(doc, dict) and isinstance(doc.get("evaluation"), dict) else {}
    variant = ev.get("objective_variant") or "pipedream"
    if inst is not None and inst.cluster is not None:
        from dnnplace.evaluation.evaluate import maxload
        from dnnplace.graphs.placement import Placement
        e = maxload(Placement.from_mapping(inst.graph, inst.cluster, placement), objective=variant)
        return e.objective, inst.graph.unit, f"max-load evaluator ({variant})"
    obj = doc.get("objective") if isinstance(doc, dict) and doc.get("problem") == "maxload" else None
    unit = doc.get("unit", "") if isinstance(doc, dict) else ""
    return obj, unit, "the result's objective" if obj is not None else "none (no graph with costs and cluster)"


def cmd_pipeline(args: argparse.Namespace, spec: ModelSpec, placement: Mapping[str, str], names: Sequence[str],
                 inst: Any) -> int:
    """``dnnplace execute MODEL RESULT.json --pipeline``: run, print, write ``--out``."""
    from dnnplace.graphs.io import write_json
    schedule = getattr(args, "schedule", None) or "gpipe"
    obj, unit, source = _maxload_objective(args, placement, inst)
    m = run_pipeline(spec, placement, names, microbatches=args.microbatches, schedule=schedule, steps=args.steps,
                     warmup=args.warmup, timeout_s=args.timeout, captured=captured_meta(inst))
    out = {"model": args.model, "result": args.result, **m.to_dict(), "maxload_objective": obj,
           "maxload_unit": unit, "maxload_source": source, "maxload_is": MAXLOAD_IS}
    say = print
    say(f"pipeline: {len(m.stages)} stage(s) ({' -> '.join(s['device'] for s in m.stages)}), {schedule}, "
        f"{m.microbatches} micro-batches of a batch of {m.batch}")
    say(f"measured step: {out['measured_step_ms']:.3f} ms (median of {args.steps}; min {out['measured_min_ms']:.3f}, "
        f"max {out['measured_max_ms']:.3f}), {out['measured_per_sample_ms']:.4f} ms per sample")
    say(f"eager single-process step: {m.eager_step_ms:.3f} ms, {out['eager_per_sample_ms']:.4f} ms per sample")
    say(f"max-load objective: {'-' if obj is None else format(obj, '.6g') + ' ' + unit} ({source}): "
        f"{MAXLOAD_IS}")
    say(f"matches the eager step: {'yes' if m.matches_reference else 'NO'} (loss {m.loss:.6g} vs "
        f"{m.reference_loss:.6g}, {m.loss_kind}-type loss, {m.n_grads_checked} gradients, max |diff| "
        f"{m.max_abs_grad_diff:.3g}; the loss of all {m.n_losses_checked} steps, optimizer updates between)")
    if args.out:
        write_json(args.out, out, indent=None)
        say(f"wrote {args.out}")
    return 0 if m.matches_reference else 1
