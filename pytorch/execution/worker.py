"""The body of one device's OS process: rebuild the model, trace the step, run its program.

Every worker rebuilds the model from its :class:`ModelSpec` (the same seed gives the
same weights and inputs in every process) and traces the same joint forward+backward
step, so fx node names agree across processes without pickling a GraphModule; the
launcher checks that the graph node ids equal the ones the plan places. Then, per step:

1. ``barrier``; ``t0``; post one ``irecv`` per incoming transfer (unique tags);
2. for each graph node in the device's order: wait for the transfers it reads, run its
   fx nodes (views are replayed lazily where they are read), record start/end, ``isend``
   each of its values that another device consumes;
3. wait for the sends; ``t_end``.

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
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dnnplace.pytorch.capture.ops import apply_update, steady_malloc

__all__ = ["ModelSpec", "WorkerPlan", "run_worker", "load", "exact_cuda_math", "step_span_ms", "no_process_locks"]


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


class _Step:
    """One device's executable step over a traced graph."""

    def __init__(self, cap: Any, prog: Any, bound: dict[str, Any], rank_of_device: list[int], model: ModelSpec,
                 device: str = "cpu"):
        from dnnplace.pytorch.execution.program import grad_values, step_outputs
        self.cap, self.prog, self.bound, self.model = cap, prog, bound, model
        self.device = device
        self.cuda = device.startswith("cuda")
        self.consts: dict[str, Any] = {}
        self.nodes = {nd.name: nd for nd in cap.gm.graph.nodes}
        self.body: dict[int, list[Any]] = {}
        from dnnplace.pytorch.capture.ops import is_view
        for nd in cap.gm.graph.nodes:
            v = cap.rep.get(nd.name, -1)
            if v >= 0 and (nd.op == "placeholder" or (nd.op == "call_function" and not is_view(nd))):
                self.body.setdefault(v, []).append(nd)
        self.is_view = is_view
        self.grad_of_apply = {a: grad_values(cap).get(p) for p, a in cap.apply_of.items()}
        self.param_of_apply = {a: p for p, a in cap.apply_of.items()}
        self.ph_of = {cap.rep[nd.name]: nd.name for nd in cap.gm.graph.nodes if nd.op == "placeholder"}
        self.loss_node, self.grad_nodes = step_outputs(cap)
        self.rank_of_device = rank_of_device
        self.holds_loss = cap.rep.get(self.loss_node.name, -1) in set(prog.order)
        self.loss_value = float("nan")
        self.opt_state: dict[int, dict] = {}
        self.updates: list[tuple[Any, Any]] = []
        self.buffers = {nd.name for nd, k in zip((x for x in cap.gm.graph.nodes if x.op == "placeholder"),
                                                  cap.arg_kinds) if k == "buffer"}

    def get(self, env: dict, name: str) -> Any:
        if name in env:
            return env[name]
        nd = self.nodes[name]
        if nd.op == "get_attr":
            if name not in self.consts:   # a traced constant, moved to this device once
                c = getattr(self.cap.gm, nd.target)
                self.consts[name] = c.to(self.device) if self.cuda and hasattr(c, "to") else c
            val = self.consts[name]
        elif nd.op == "call_function" and (self.is_view(nd) or self.cap.rep.get(name, -1) < 0):
            val = self._call(env, nd)
        else:
            v = self.cap.rep.get(name, -1)
            raise RuntimeError(f"value {name!r} of operator {self.cap.ids[v] if v >= 0 else name!r} is not on "
                               f"device {self.prog.device}: a transfer is missing or the order is wrong")
        env[name] = val
        return val

    def _call(self, env: dict, nd: Any) -> Any:
        import torch
        args = torch.fx.node.map_arg(nd.args, lambda a: self.get(env, a.name))
        kwargs = torch.fx.node.map_arg(nd.kwargs, lambda a: self.get(env, a.name))
        if self.cuda and "device" in kwargs:   # factory operators were traced on the CPU
            kwargs = {**kwargs, "device": torch.device(self.device)}
        return nd.target(*args, **kwargs)

    def run_node(self, env: dict, v: int) -> None:
        if v in self.param_of_apply:
            g = self.grad_of_apply[v]
            if g is not None:
                # the update is a new tensor installed after the step: the graph has no edge
                # from a parameter's other readers to its update, so it may run before them
                ph = self.ph_of[self.param_of_apply[v]]
                new = apply_update(self.model.optimizer, self.bound[ph], self.get(env, g.name),
                                   self.opt_state.setdefault(v, {}), self.model.lr)
                self.updates.append((ph, new))
            return
        for nd in self.body.get(v, ()):
            if nd.op == "placeholder":
                env[nd.name] = self.bound[nd.name]
            else:
                env[nd.name] = self._call(env, nd)

    def run(self, dist: Any, record: bool) -> tuple[float, float, list, dict]:
        """One step: (t0, t_end, [(node, start, end)], outputs of step for the check)."""
        import torch
        env: dict[str, Any] = {}
        dist.barrier()
        t0 = time.perf_counter()
        works, bufs = {}, {}
        for t in self.prog.recvs:
            wire = torch.uint8 if t.dtype == torch.bool else t.dtype
            bufs[t.tag] = buf = torch.empty(t.shape, dtype=wire)
            if buf.numel():
                works[t.tag] = dist.irecv(buf, src=self.rank_of_device[t.src], tag=t.tag)
        by_tag = {t.tag: t for t in self.prog.recvs}
        got: set[int] = set()
        pending, times = [], []
        for v in self.prog.order:
            for tag in self.prog.waits.get(v, ()):
                if tag not in got:
                    w = works.get(tag)
                    if w is not None:
                        w.wait()
                    t = by_tag[tag]
                    buf = bufs[tag]
                    val = buf.to(torch.bool) if t.dtype == torch.bool else buf
                    if self.cuda:
                        val = val.to(self.device)
                    if t.stride:  # the views replayed on it may need the producer's layout
                        val = torch.empty_strided(t.shape, t.stride, dtype=t.dtype, device=val.device).copy_(val)
                    env[t.value] = val
                    got.add(tag)
            ts = time.perf_counter()
            self.run_node(env, v)
            if self.cuda:
                torch.cuda.synchronize(self.device)
            te = time.perf_counter()
            for t in self.prog.sends.get(v, ()):
                val = self.get(env, t.value)
                # buffers may be updated in place (running statistics) before the send completes
                if self.cuda:   # through host memory (a copy, so buffers updated later do not matter)
                    val = val.to("cpu").contiguous()
                else:
                    val = val.clone() if t.value in self.buffers else val.contiguous()
                if val.dtype == torch.bool:
                    val = val.to(torch.uint8)
                if val.numel():
                    pending.append((dist.isend(val, dst=self.rank_of_device[t.dst], tag=t.tag), val))
            times.append((v, ts, te))
        for w, _ in pending:
            w.wait()
        for ph, new in self.updates:
            self.bound[ph] = new
        self.updates.clear()
        t_end = time.perf_counter()
        if self.holds_loss:
            self.loss_value = float(self.get(env, self.loss_node.name))
        outs = self._outputs(env) if record else {}
        return t0, t_end, times, outs

    def _outputs(self, env: dict) -> dict:
        """The gradients this device holds."""
        out: dict[str, Any] = {"grads": {}}
        names = [n.removeprefix("model.") for n, k in zip(self.cap.arg_names, self.cap.arg_kinds) if k == "param"]
        mine = set(self.prog.order)
        for name, g in zip(names, self.grad_nodes):
            if g is not None and self.cap.rep.get(g.name, -1) in mine:
                out["grads"][name] = self.get(env, g.name).detach().cpu().clone()
        return out


def run_worker(rank: int, plan: WorkerPlan) -> None:
    """Entry point of one process (``torch.multiprocessing`` spawns it with ``rank``)."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from dnnplace.pytorch.execution.program import build_programs
    torch.set_num_threads(plan.threads)
    steady_malloc()
    no_process_locks()
    world = max(len(orders) for _, orders in plan.jobs)
    dist.init_process_group("gloo", init_method=f"file://{plan.init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=plan.timeout_s))
    try:
        net, inputs, loss_fn = load(plan.model)
        cap = trace_step(plan.model, net, inputs, loss_fn)
        if tuple(cap.ids) != tuple(plan.ids):
            raise RuntimeError("the traced step differs between processes")
        initial = {k: v.clone() for k, v in _bind(cap, net, inputs).items()}
        results, outs = [], []
        for j, (ranks, orders) in enumerate(plan.jobs):
            device = plan.devices[j][rank] if plan.devices and rank < len(plan.devices[j]) else "cpu"
            if device.startswith("cuda"):
                exact_cuda_math()
                torch.cuda.set_device(device)
                torch.cuda.reset_peak_memory_stats(device)
            bound = {k: v.to(device, copy=True) for k, v in initial.items()}
            active = rank < len(orders)
            orders = list(orders) + [()] * (world - len(orders))   # ranks a plan leaves idle
            progs = build_programs(cap, np.asarray(ranks), orders)
            step = _Step(cap, progs[rank], bound, list(range(world)), plan.model, device)
            records, out, losses = [], {}, []
            for s in range(plan.warmup + plan.steps):
                t0, t_end, times, o = step.run(dist, record=(s == 0))
                span = step_span_ms(dist, t0, t_end, active)
                if s == 0:
                    out = o   # step 0's gradients: those of the model as built
                if step.holds_loss:
                    losses.append(step.loss_value)
                if s >= plan.warmup:
                    records.append({"t0": t0, "t_end": t_end, "ops": [[v, a, b] for v, a, b in times]})
                if rank == 0:
                    print(f"plan {j + 1}/{len(plan.jobs)} step {s + 1}/{plan.warmup + plan.steps}"
                          f"{' (warm-up)' if s < plan.warmup else ''}: {span:.2f} ms",
                          file=sys.stderr, flush=True)
            outs.append({**out, "losses": losses})
            results.append({"steps": records, "n_recv": len(progs[rank].recvs), "device": device,
                            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                            "peak_cuda_bytes": torch.cuda.max_memory_allocated(device) if step.cuda else 0})
        dist.barrier()
        torch.save(outs, os.path.join(plan.out_dir, f"outputs-{rank}.pt"))
        with open(os.path.join(plan.out_dir, f"times-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "jobs": results}, f)
    finally:
        dist.destroy_process_group()


def step_span_ms(dist: Any, t0: float, t_end: float, active: bool = True) -> float:
    """A step's time, the one statistic the live lines, the summary and the JSON report
    (docs/execution.md, Timing): from the earliest start to the latest end over the
    processes the plan uses (``active``), so what the slowest of them saw. An all-reduce
    after the step (outside its timing) gives it to every rank."""
    import torch
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


def _bind(cap: Any, net: Any, inputs: tuple) -> dict[str, Any]:
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

