"""The body of one device's OS process: rebuild the model, trace the step, run its program.

Every worker rebuilds the model from its :class:`ModelSpec` (the same seed gives the
same weights and inputs in every process) and traces the same joint forward+backward
step, so fx node names agree across processes without pickling a GraphModule; the
launcher checks that the graph node ids equal the ones the plan places. Then, per step:

1. ``barrier``; ``t0``; post one ``irecv`` per incoming message (a
   :class:`~dnnplace.pytorch.execution.program.Pack` of transfers, its id the tag);
2. for each graph node in the device's order: wait for the messages carrying the values it
   reads (a pack is unpacked whole at its first wait), run its fx nodes (views are
   replayed lazily where they are read), record start/end, ``isend`` the packs that go
   after it, and drop the values no later node or send reads;
3. wait for the sends; ``t_end``.

The interpreter is kept thin, since its cost per operator is the executor's overhead over
an eager step (docs/execution.md, "Timing"): each fx node's call is prepared once (its
fx-node arguments filled into a copy of a prepared argument list, the ATen overload called
directly), and values are dropped after their last read, so memory is reused within the
step as in an eager step.

Besides each node's start and end, a step records its messages (docs/execution.md,
"Message timeline"): on the sender, around making each value ready to send and its
``isend``; on the receiver, around ``wait()`` and when the value is in the environment.
Several plans share the processes, each with its own parameters and optimizer state: plan
after plan, or (``WorkerPlan.interleave``) every plan's warm-up, then one step of each plan
in turn, so that a slow drift of the host (another load, a clock change) falls on every
plan alike.

A device may be a CUDA GPU (``WorkerPlan.devices``): its process holds the model's
tensors there, runs its operators there (factory operators such as ``zeros`` and the
traced constants are moved to it) and synchronizes the GPU after every operator, so that
start and end times are the operator's own, as the simulator charges them. Transfers
go through host memory (gloo moves CPU tensors): a copy to the host, the send, and a
copy to the GPU on arrival, the path of GPUs without peer access.

Step 0's loss and gradients (those this device computes) are saved for the launcher's
comparison with an eager single-process step. Times are ``time.perf_counter()``
(CLOCK_MONOTONIC: one clock for every process of this host).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dnnplace.pytorch.capture.ops import steady_malloc
from dnnplace.pytorch.execution.device_step import DeviceStep

__all__ = ["ModelSpec", "WorkerPlan", "run_worker", "load", "exact_cuda_math", "step_span_ms", "no_process_locks",
           "bind_step"]


@dataclass(frozen=True)
class ModelSpec:
    """How to (re)build the model in any process: the arguments of
    :func:`dnnplace.pytorch.capture.models.load_model` plus the optimizer of the step."""

    spec: str
    inputs: tuple = ()
    loss: str | None = None
    batch: int | None = None
    seq: int | None = None
    params: dict = field(default_factory=dict)
    optimizer: str = "adam"
    lr: float = 1e-3
    seed: int = 0


@dataclass(frozen=True)
class WorkerPlan:
    """What every worker gets: the model, the graph node ids the plans were made for, the
    plans (``jobs``: the rank of every node and each rank's order; several plans share one
    set of processes, each starting from the model as built) and how many steps to run."""

    model: ModelSpec
    ids: tuple
    jobs: tuple            # per plan: (rank per graph node, per rank the node indices in running order)
    steps: int
    warmup: int
    out_dir: str
    init_file: str
    timeout_s: float
    threads: int = 1
    devices: tuple = ()    # per plan: the torch device of every rank ("cpu", "cuda:0", ...); empty: all "cpu"
    interleave: bool = False   # after every plan's warm-up, one step of each plan in turn (else plan after plan)
    live: bool = True          # rank 0 prints each step's time on stderr
    own_clocks: bool = False   # ranks may be on several hosts (torchrun): each step's times from its own start


def load(model: ModelSpec, *, device: str = "cpu"):
    """``(model, inputs, loss_fn)`` built under ``model.seed`` (identical in every process)."""
    import torch

    from dnnplace.pytorch.capture.models import load_model
    torch.manual_seed(model.seed)
    return load_model(model.spec, inputs=model.inputs, loss=model.loss, batch=model.batch, seq=model.seq,
                      device=device, params=dict(model.params) or None)


def trace_step(model: ModelSpec, net: Any, inputs: tuple, loss_fn: Any):
    """The captured joint step (:func:`dnnplace.pytorch.capture.fx.trace`)."""
    from dnnplace.pytorch.capture.fx import trace
    return trace(net, inputs, loss_fn, training=True, optimizer=model.optimizer)


def run_worker(rank: int, plan: WorkerPlan, world: int | None = None) -> list | None:
    """Entry point of one process: ``torch.multiprocessing`` spawns it with ``rank`` (the file
    rendezvous of ``plan.init_file``; what it measured goes to files in ``plan.out_dir``), or
    a process that ``torchrun`` started calls it with ``world`` (the ``env://`` rendezvous;
    what every rank measured is gathered to rank 0, which gets ``[(results, outputs)]`` per
    rank, the others ``None``)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(plan.threads)
    steady_malloc()
    no_process_locks()
    spawned = world is None
    world = max(len(orders) for _, orders in plan.jobs) if world is None else world
    dist.init_process_group("gloo", init_method=f"file://{plan.init_file}" if spawned else "env://", rank=rank,
                            world_size=world, timeout=timedelta(seconds=plan.timeout_s))
    try:
        net, inputs, loss_fn = load(plan.model)
        cap = trace_step(plan.model, net, inputs, loss_fn)
        if tuple(cap.ids) != tuple(plan.ids):
            raise RuntimeError("the traced step differs between processes")
        if not spawned:   # other hosts: their own model and result files, which must be the same
            seen: list = [None] * world
            dist.all_gather_object(seen, (tuple(cap.ids), plan.jobs))
            if any(x != seen[0] for x in seen):
                bad = next(r for r, x in enumerate(seen) if x != seen[0])
                raise RuntimeError(f"rank {bad} traced another step or read another plan than rank 0: every node "
                                   "needs the same model file, arguments and result file")
        initial = {k: v.clone() for k, v in bind_step(cap, net, inputs).items()}
        total = plan.warmup + plan.steps
        if plan.interleave:   # every plan's warm-up, then one step of each plan in turn
            jobs = [_Job(j, plan, cap, initial, rank, world) for j in range(len(plan.jobs))]
            for job in jobs:
                for s in range(plan.warmup):
                    job.step(dist, s, plan, rank)
            for s in range(plan.warmup, total):
                for job in jobs:
                    job.step(dist, s, plan, rank)
            results = [job.result() for job in jobs]
        else:   # plan after plan, one plan's state held at a time
            jobs, results = [], []
            for j in range(len(plan.jobs)):
                job = _Job(j, plan, cap, initial, rank, world)
                for s in range(total):
                    job.step(dist, s, plan, rank)
                results.append(job.result())
                job.runner = None
                jobs.append(job)
        outs = [{**job.out, "losses": job.losses} for job in jobs]
        if not spawned:
            got: list | None = [None] * world if rank == 0 else None
            dist.gather_object((results, outs), got, dst=0)
            return got
        torch.save(outs, os.path.join(plan.out_dir, f"outputs-{rank}.pt"))
        with open(os.path.join(plan.out_dir, f"times-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "jobs": results}, f)
        dist.barrier()   # every rank's files are written before any rank tears gloo down
        return None
    finally:
        dist.destroy_process_group()


class _Job:
    """One plan's state in this process: its program, its own copy of the parameters and
    optimizer state (so plans run in any interleaving each see their own steps), and what
    its steps recorded."""

    def __init__(self, j: int, plan: WorkerPlan, cap: Any, initial: dict, rank: int, world: int):
        import numpy as np
        import torch

        from dnnplace.pytorch.execution.program import build_programs
        ranks, orders = plan.jobs[j]
        self.j, self.n_jobs = j, len(plan.jobs)
        self.device = plan.devices[j][rank] if plan.devices and rank < len(plan.devices[j]) else "cpu"
        if self.device.startswith("cuda"):
            exact_cuda_math()
            torch.cuda.set_device(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        bound = {k: v.to(self.device, copy=True) for k, v in initial.items()}
        self.active = rank < len(orders)
        orders = list(orders) + [()] * (world - len(orders))   # ranks a plan leaves idle
        self.prog = build_programs(cap, np.asarray(ranks), orders)[rank]
        self.runner = DeviceStep(cap, self.prog, bound, list(range(world)), plan.model, self.device)
        self.records: list[dict] = []
        self.out: dict = {}
        self.losses: list[float] = []

    def step(self, dist: Any, s: int, plan: WorkerPlan, rank: int) -> None:
        """Step ``s`` of this plan (``s < plan.warmup``: a warm-up step, not recorded)."""
        import torch
        if self.runner.cuda:
            torch.cuda.set_device(self.device)
        t0, t_end, times, o = self.runner.run(dist, record=(s == 0))
        span = step_span_ms(dist, t0, t_end, self.active, own_clock=plan.own_clocks)
        if s == 0:
            self.out = o   # step 0's gradients: those of the model as built
        if self.runner.holds_loss:
            self.losses.append(self.runner.loss_value)
        if s >= plan.warmup:
            self.records.append({"t0": t0, "t_end": t_end, "ops": [[v, a, b] for v, a, b in times],
                                 "sent": self.runner.sent, "received": self.runner.received})
        if rank == 0 and plan.live:
            print(f"plan {self.j + 1}/{self.n_jobs} step {s + 1}/{plan.warmup + plan.steps}"
                  f"{' (warm-up)' if s < plan.warmup else ''}: {span:.2f} ms",
                  file=sys.stderr, flush=True)

    def result(self) -> dict:
        """What this plan's steps recorded; peak memory so far (interleaved plans share it)."""
        import torch
        return {"steps": self.records, "n_recv": len(self.prog.recvs), "device": self.device,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "peak_cuda_bytes": torch.cuda.max_memory_allocated(self.device) if self.runner.cuda else 0}


def step_span_ms(dist: Any, t0: float, t_end: float, active: bool = True, own_clock: bool = False) -> float:
    """A step's time, the one statistic the live lines, the summary and the JSON report
    (docs/execution.md, Timing): from the earliest start to the latest end over the
    processes the plan uses (``active``), so what the slowest of them saw. An all-reduce
    after the step (outside its timing) gives it to every rank. ``own_clock``: the ranks'
    clocks differ (several hosts), so each rank's end counts from its own start, which
    follows the step's barrier (``launch.align_clocks`` shifts the records alike)."""
    import torch
    if own_clock and active:
        t0, t_end = 0.0, t_end - t0
    t = torch.tensor([-t0, t_end] if active else [-float("inf")] * 2, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0] + t[1]) * 1e3


def no_process_locks() -> None:
    """Give tqdm (which ``torch.fx.Interpreter.run`` creates a bar of, disabled or not) a
    thread lock instead of its default cross-process one: a worker killed on Ctrl-C or a
    failure cannot release a POSIX semaphore, and multiprocessing's resource tracker then
    warns about a leaked semaphore at exit."""
    import threading
    try:
        from tqdm import tqdm
    except ImportError:
        return
    tqdm.set_lock(threading.RLock())


def exact_cuda_math() -> None:
    """No TensorFloat-32 in matrix products and convolutions (PyTorch lets cuDNN use it by
    default): a GPU step is then compared with the eager step at float32 accuracy."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def bind_step(cap: Any, net: Any, inputs: tuple) -> dict[str, Any]:
    """Placeholder name -> the tensor it stands for (an ``apply`` node's update replaces its
    parameter's entry after the step, so the next step reads the updated value)."""
    params = dict(net.named_parameters())
    buffers = dict(net.named_buffers())
    out = {}
    phs = [nd for nd in cap.gm.graph.nodes if nd.op == "placeholder"]
    for nd, kind, name in zip(phs, cap.arg_kinds, cap.arg_names):
        key = name[6:] if name.startswith("model.") else name
        if kind == "param":
            out[nd.name] = params[key].detach()
        elif kind == "buffer":
            out[nd.name] = buffers[key].detach().clone()
        else:
            out[nd.name] = inputs[int(name.removeprefix("input"))]
    return out

