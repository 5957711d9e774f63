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
        self.sent: list[list] = []       # the last step's messages (see run)
        self.received: list[list] = []
        self.buffers = {nd.name for nd, k in zip((x for x in cap.gm.graph.nodes if x.op == "placeholder"),
                                                  cap.arg_kinds) if k == "buffer"}
        self.calls: dict[str, Any] = {}
        # per graph node, its body as (fx name, env -> value), None for a placeholder (bound)
        self.steps_of = {v: [(nd.name, None if nd.op == "placeholder" else self._call_of(nd)) for nd in body]
                         for v, body in self.body.items()}
        # views (and nodes without a graph node) run where and when they are read
        self.lazy = {nd.name: self._call_of(nd) for nd in cap.gm.graph.nodes
                     if nd.op == "call_function" and (is_view(nd) or cap.rep.get(nd.name, -1) < 0)}
        self.free_after = self._last_reads()
        self.pack_of = {t.tag: p for p in prog.packs_in for t in p.transfers}
        self.nbytes_of = {t.tag: t.nbytes for t in prog.recvs}

    def _last_reads(self) -> dict[int, list[str]]:
        """Per graph node of this device's order, the values no later node or send reads
        (dropped from the environment after it, so memory is reused within the step as in an
        eager step). A value read through a view not yet replayed counts as read there too;
        the loss and the gradients (read after the step) are kept."""
        def reads(name: str, acc: set[str]) -> None:
            if name not in acc:
                acc.add(name)
                if name in self.lazy:
                    for w in self.nodes[name].all_input_nodes:
                        reads(w.name, acc)

        last: dict[str, int] = {}
        for i, v in enumerate(self.prog.order):
            acc: set[str] = set()
            if v in self.param_of_apply and self.grad_of_apply[v] is not None:
                reads(self.grad_of_apply[v].name, acc)
            for nd in self.body.get(v, ()):
                acc.add(nd.name)
                for w in nd.all_input_nodes:
                    reads(w.name, acc)
            for p in self.prog.packs_out.get(v, ()):
                for t in p.transfers:
                    reads(t.value, acc)
            for name in acc:
                last[name] = i
        keep: set[str] = set()
        for nd in (self.loss_node, *self.grad_nodes):
            if nd is not None:
                reads(nd.name, keep)
        out: dict[int, list[str]] = {}
        for name, i in last.items():
            if name not in keep:
                out.setdefault(self.prog.order[i], []).append(name)
        return out

    def _call_of(self, nd: Any) -> Any:
        call = self.calls.get(nd.name)
        if call is None:
            call = self.calls[nd.name] = self._compile(nd)
        return call

    def get(self, env: dict, name: str) -> Any:
        """The value of fx node ``name``: computed, received, a view replayed on first read,
        or a traced constant."""
        if name in env:
            return env[name]
        call = self.lazy.get(name)
        if call is not None:
            val = env[name] = call(env)
            return val
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
        return self._call_of(nd)(env)

    def _compile(self, nd: Any) -> Any:
        """``env -> value`` of fx node ``nd``: its operator on its arguments read from the
        environment (``get``: views replayed where they are read). Arguments that are fx nodes
        at the top level are filled into a copy of a prepared list, the interpreter's cost per
        operator (``map_arg`` walks every argument); others go through ``map_arg``."""
        import torch
        fx_node = torch.fx.Node
        target, get = nd.target, self.get
        if isinstance(target, torch._ops.OpOverload):
            target = target._op   # what OpOverload.__call__ calls, one Python frame less per operator
        kwargs = dict(nd.kwargs)
        if self.cuda and "device" in kwargs:   # factory operators were traced on the CPU
            kwargs["device"] = torch.device(self.device)

        def nested(a: Any) -> bool:   # an fx node inside a list, tuple, dict or slice
            found: list = []
            torch.fx.node.map_arg(a, found.append)
            return bool(found) and not isinstance(a, fx_node)

        template = list(nd.args)
        slots = [(i, a.name) for i, a in enumerate(template) if isinstance(a, fx_node)]
        lists = [(i, list(a), [(j, x.name) for j, x in enumerate(a) if isinstance(x, fx_node)])
                 for i, a in enumerate(template) if nested(a) and isinstance(a, (list, tuple))
                 and not any(nested(x) for x in a)]   # e.g. cat's list of tensors
        if (sum(nested(a) for a in template) > len(lists)
                or any(isinstance(a, fx_node) or nested(a) for a in kwargs.values())):
            args0, kwargs0 = nd.args, kwargs

            def call(env: dict) -> Any:
                args = torch.fx.node.map_arg(args0, lambda a: get(env, a.name))
                kw = torch.fx.node.map_arg(kwargs0, lambda a: get(env, a.name))
                return target(*args, **kw)
            return call

        def call_flat(env: dict) -> Any:
            args = template.copy()
            for i, name in slots:
                args[i] = env[name] if name in env else get(env, name)
            for i, elems, names in lists:
                xs = elems.copy()
                for j, name in names:
                    xs[j] = env[name] if name in env else get(env, name)
                args[i] = xs
            return target(*args, **kwargs)
        return call_flat

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
        bound = self.bound
        for name, call in self.steps_of[v]:
            env[name] = bound[name] if call is None else call(env)

    def _receive(self, env: dict, p: Any, posted: Any) -> tuple | None:
        """Wait for pack ``p`` (``posted``: its ``(work, buffer)``, ``None`` when it has no
        bytes) and put its tensors into ``env``; ``(wait start, wait end, ready)`` or ``None``."""
        import torch
        clock = time.perf_counter
        if posted is not None:
            w0 = clock()
            posted[0].wait()
            w1 = clock()
            buf = posted[1]
        ts = p.transfers
        if posted is None:
            vals = [torch.empty(t.shape, dtype=t.dtype) for t in ts]
        elif len(ts) == 1:
            vals = [buf]
        else:   # the tensors' bytes, concatenated in order
            vals, off = [], 0
            for t in ts:
                vals.append(buf[off:off + t.nbytes].view(_wire(torch, t.dtype)).view(t.shape))
                off += t.nbytes
        for t, val in zip(ts, vals):
            if t.dtype == torch.bool:
                val = val.view(torch.bool)   # sent as uint8 (gloo has no bool)
            if self.cuda:
                val = val.to(self.device)
            if t.stride:  # the views replayed on it may need the producer's layout
                val = torch.empty_strided(t.shape, t.stride, dtype=t.dtype, device=val.device).copy_(val)
            env[t.value] = val
        return None if posted is None else (w0, w1, clock())

    def _send(self, dist: Any, env: dict, p: Any, pending: list, sent: list) -> None:
        """Send pack ``p``: one tensor as it is (contiguous), several as their bytes concatenated."""
        import torch
        s0 = time.perf_counter()
        vals = []
        for t in p.transfers:
            val = self.get(env, t.value)
            if self.cuda:   # through host memory (a copy, so buffers updated later do not matter)
                val = val.to("cpu").contiguous()
            elif len(p.transfers) == 1 and t.value in self.buffers:
                val = val.clone()   # buffers may be updated in place (running statistics) before the send completes
            else:
                val = val.contiguous()
            vals.append(val.view(torch.uint8) if val.dtype == torch.bool else val)
        if len(vals) == 1:
            wire = vals[0]
        else:   # a copy: later in-place updates of buffers do not matter
            wire = torch.cat([x.reshape(-1).view(torch.uint8) for x in vals])
        if wire.numel():
            pending.append((dist.isend(wire, dst=self.rank_of_device[p.dst], tag=p.id), wire))
            sent.append([p.id, s0, time.perf_counter()])

    def run(self, dist: Any, record: bool) -> tuple[float, float, list, dict]:
        """One step: (t0, t_end, [(node, start, end)], outputs of step for the check).

        The messages of the step are left in ``self.sent`` (``[pack, start, end]``: before the
        pack's values are made ready to send, after ``isend`` returned) and ``self.received``
        (``[tag, consumer node, wait start, wait end, ready]`` per tensor, the times of its
        pack: around ``wait()`` and after the pack's values are in the environment),
        zero-element tensors (no message) left out."""
        import torch
        env: dict[str, Any] = {}
        dist.barrier()
        clock = time.perf_counter
        t0 = clock()
        posted = {}
        for p in self.prog.packs_in:
            if p.nbytes:
                ts = p.transfers
                buf = (torch.empty(ts[0].shape, dtype=_wire(torch, ts[0].dtype)) if len(ts) == 1
                       else torch.empty(p.nbytes, dtype=torch.uint8))
                posted[p.id] = (dist.irecv(buf, src=self.rank_of_device[p.src], tag=p.id), buf)
        pack_of, nbytes = self.pack_of, self.nbytes_of
        opened: dict[int, Any] = {}
        got: set[int] = set()
        pending: list = []
        times = []
        self.sent, self.received = sent, received = [], []
        waits, packs_out, run_node = self.prog.waits, self.prog.packs_out, self.run_node
        cuda, free_after = self.cuda, self.free_after
        for v in self.prog.order:
            tags = waits.get(v)
            if tags:
                for tag in tags:
                    if tag in got:
                        continue
                    p = pack_of[tag]
                    if p.id not in opened:
                        opened[p.id] = self._receive(env, p, posted.get(p.id))
                    got.add(tag)
                    when = opened[p.id]
                    if when is not None and nbytes[tag]:
                        received.append([tag, v, *when])
            ts = clock()
            run_node(env, v)
            if cuda:
                torch.cuda.synchronize(self.device)
            te = clock()
            for p in packs_out.get(v, ()):
                self._send(dist, env, p, pending, sent)
            for name in free_after.get(v, ()):
                env.pop(name, None)
            times.append((v, ts, te))
        for w, _ in pending:
            w.wait()
        for ph, new in self.updates:
            self.bound[ph] = new
        self.updates.clear()
        t_end = clock()
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
        initial = {k: v.clone() for k, v in _bind(cap, net, inputs).items()}
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
        dist.barrier()
        torch.save(outs, os.path.join(plan.out_dir, f"outputs-{rank}.pt"))
        with open(os.path.join(plan.out_dir, f"times-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "jobs": results}, f)
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
        self.runner = _Step(cap, self.prog, bound, list(range(world)), plan.model, self.device)
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


def _wire(torch: Any, dtype: Any) -> Any:
    """The dtype a tensor travels as: ``uint8`` for booleans (gloo has no bool)."""
    return torch.uint8 if dtype == torch.bool else dtype


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

