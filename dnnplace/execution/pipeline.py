"""A contiguous max-load split of a forward model, run as a pipeline (``torch.distributed.pipelining``).

The max-load solvers (Tarnawski et al. Sec. 5) place the nodes of a *forward* graph
(``dnnplace capture ... --inference``: node ids are fx node names, ``param:NAME`` and
``input:inputK``) on devices for pipelined throughput. :func:`build_stages` turns such a
placement into stage modules and :func:`run_pipeline` trains them over micro-batches:

* **stages**: the devices that hold a node, ordered by the first node each holds in a
  topological order of the graph (the trace order, with every source -- parameter, input
  -- moved just before its first consumer); a contiguous split gives a path of stages.
  Every edge must go from stage ``i`` to a stage ``j >= i``; otherwise one
  :class:`InputError` names the edge (``not contiguous: node X on stage 1 feeds node Y on
  stage 0``).
* **stage modules**: the forward graph is traced with
  :func:`dnnplace.graphs.capture.fx.trace` (``training=False``, the same trace as the
  capture, so fx node names equal the graph's ids; :func:`run_pipeline` traces it at the
  micro-batch's shapes, which the graph bakes into views and factories) and cut into one ``torch.fx``
  ``GraphModule`` per stage. Views (and constants) are not values of their own: a stage
  replays the views it reads on the tensor it received (a tensor and its views cross
  once, as in :mod:`~dnnplace.execution.program`). Stage ``s`` takes every value made on
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
  started and stopped under a deadline by :func:`dnnplace.execution.launch.run_processes`), a
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
import operator
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from dnnplace.execution.launch import check_reference, eager_reference, run_processes, torch_optimizer
from dnnplace.execution.worker import ModelSpec, load
from dnnplace.graphs.capture.ops import steady_malloc
from dnnplace.graphs.errors import InputError

__all__ = ["Stages", "PipelineMeasured", "SCHEDULES", "build_stages", "stage_order", "loss_kind", "run_pipeline",
           "cmd_pipeline"]

SCHEDULES = ("gpipe", "1f1b")


@dataclass
class Stages:
    """The stage modules of a placement (see the module docstring)."""

    devices: list[str]                 # stage -> device name
    modules: list[Any]                 # stage -> torch.fx.GraphModule (forward of the stage)
    params: list[dict[str, str]]       # stage -> {module attribute: model parameter name}
    nodes: list[list[str]]             # stage -> graph node ids it holds
    recv: list[list[str]]              # stage -> fx values it receives (stage 0: the model inputs)
    recv_bytes: list[int]              # bytes received per micro-batch (the traced inputs' shapes)

    @property
    def n(self) -> int:
        return len(self.devices)

    def summary(self) -> list[dict]:
        return [{"stage": s, "device": self.devices[s], "nodes": len(self.nodes[s]),
                 "params": sorted(self.params[s].values()), "received": len(self.recv[s]) if s else 0,
                 "received_bytes": self.recv_bytes[s] if s else 0} for s in range(self.n)]


# ---------------------------------------------------------------------------- stages
def stage_order(ids: Sequence[str], src: Sequence[int], dst: Sequence[int], placement: Mapping[str, str],
                device_names: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """Devices that hold a node, in pipeline order, and the stage of every node.

    A device's rank is the position of the first node it holds in the graph's trace order
    (a topological order) where a source node is moved just before its first consumer, so
    a parameter or an input does not make its device a stage of its own at the front.
    Ties (devices holding only unconsumed sources) follow ``device_names``.

    Raises :class:`InputError` unless every edge goes from a stage to the same or a later one.
    """
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    has_pred = np.zeros(n, dtype=bool)
    has_pred[np.asarray(dst, dtype=np.int64)] = True
    first_use = np.full(n, np.inf)
    np.minimum.at(first_use, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.float64))
    move = ~has_pred & np.isfinite(first_use)
    pos[move] = first_use[move] - 0.5
    key: dict[str, float] = {}
    for v, name in enumerate(ids):
        d = placement[name]
        key[d] = min(key.get(d, np.inf), float(pos[v]))
    rank = {d: i for i, d in enumerate(device_names)}
    devices = sorted(key, key=lambda d: (key[d], rank.get(d, len(rank)), d))
    stage_of_dev = {d: s for s, d in enumerate(devices)}
    stage = np.array([stage_of_dev[placement[name]] for name in ids], dtype=np.int64)
    for u, v in sorted(zip(src, dst), key=lambda e: (e[1], e[0])):
        if stage[u] > stage[v]:
            raise InputError(f"not contiguous: node {ids[u]!r} on stage {stage[u]} ({devices[stage[u]]}) feeds "
                             f"node {ids[v]!r} on stage {stage[v]} ({devices[stage[v]]}); a pipeline needs every "
                             "edge to go to the same or a later stage (a contiguous max-load split)")
    return devices, stage


def _check_placement(placement: Mapping[str, str], ids: Sequence[str], device_names: Sequence[str]) -> None:
    known = set(ids)
    unknown = next((v for v in placement if v not in known), None)
    if unknown is not None:
        raise InputError(f"the result places node {unknown!r}, which the model's forward graph does not have "
                         "(--pipeline runs a plan made on a graph captured with --inference, from the same model "
                         "and input shapes; it traces the stages at the micro-batch size)")
    missing = next((v for v in ids if v not in placement), None)
    if missing is not None:
        raise InputError(f"the result does not place node {missing!r} of the model's forward graph")
    if device_names:
        names = set(device_names)
        bad = next((d for d in placement.values() if d not in names), None)
        if bad is not None:
            raise InputError(f"the result places nodes on device {bad!r}, which the cluster does not have")


def build_stages(net: Any, inputs: Sequence[Any], placement: Mapping[str, str],
                 device_names: Sequence[str] = ()) -> Stages:
    """Cut the forward graph of ``net`` into the stage modules of ``placement``.

    ``placement`` maps every node id of the forward graph (``trace(..., training=False)``,
    the graph ``dnnplace capture --inference`` writes) to a device name. The stage modules
    hold ``net``'s own parameters (shared, not copied). See the module docstring.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> x = torch.randn(6, 4)
    >>> first = {"param:0.weight", "param:0.bias", "input:input0", "addmm", "relu"}
    >>> from dnnplace.graphs.capture.fx import trace
    >>> ids = trace(net, (x,), training=False).ids
    >>> st = build_stages(net, (x,), {v: "a" if v in first else "b" for v in ids})
    >>> st.devices, [sorted(p.values()) for p in st.params], st.recv[1]
    (['a', 'b'], [['0.bias', '0.weight'], ['2.bias', '2.weight']], ['relu'])
    >>> torch.allclose(st.modules[1](*st.modules[0](x))[0], net(x))
    True
    """
    import torch
    import torch.fx as fx

    from dnnplace.execution.stage_fx import StageTracer, contiguous, grad_contiguous, restride
    from dnnplace.graphs.capture.fx import trace
    from dnnplace.graphs.capture.ops import is_view
    cap = trace(net, tuple(inputs), training=False)
    ids = list(cap.ids)
    _check_placement(placement, ids, device_names)
    devices, stage_of = stage_order(ids, cap.src.tolist(), cap.dst.tolist(), placement, device_names)
    n_st = len(devices)
    gm = cap.gm
    nodes = list(gm.graph.nodes)
    order = {nd: i for i, nd in enumerate(nodes)}
    phs = [nd for nd in nodes if nd.op == "placeholder"]
    kind = {nd: k for nd, k in zip(phs, cap.arg_kinds)}
    pname = {nd: (a[6:] if a.startswith("model.") else a) for nd, a in zip(phs, cap.arg_names)}
    params = dict(net.named_parameters())
    buffers = dict(net.named_buffers())

    # home stage of every value that crosses as itself (a root); None: replayed where read
    home: dict[Any, int | None] = {}
    roots: dict[Any, frozenset] = {}

    def roots_of(nd: Any) -> frozenset:
        if nd not in roots:
            roots[nd] = (frozenset({nd}) if home[nd] is not None else
                         frozenset().union(*(roots_of(a) for a in nd.all_input_nodes)))
        return roots[nd]

    for nd in nodes:
        if nd.op == "placeholder":
            home[nd] = 0 if kind[nd] == "input" else int(stage_of[cap.rep[nd.name]])
        elif nd.op == "call_function" and nd.target is operator.getitem:
            base = roots_of(nd.all_input_nodes[0])   # one tensor of a multi-output op: where it is made
            home[nd] = max((home[r] for r in base), default=None)
        elif nd.op == "call_function" and not is_view(nd) and cap.rep.get(nd.name, -1) >= 0:
            home[nd] = int(stage_of[cap.rep[nd.name]])
        else:
            home[nd] = None                           # views, constants, the output
    out_node = next(nd for nd in nodes if nd.op == "output")
    flat_out = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]

    # which stages read each root
    need: dict[Any, set[int]] = {}
    for nd in nodes:
        if nd.op == "call_function" and home[nd] is not None:
            for a in nd.all_input_nodes:
                for r in roots_of(a):
                    need.setdefault(r, set()).add(home[nd])
    for a in flat_out:
        if isinstance(a, fx.Node):
            for r in roots_of(a):
                need.setdefault(r, set()).add(n_st - 1)
    carry_in: list[list[Any]] = [[] for _ in range(n_st)]
    for r in sorted(need, key=order.__getitem__):
        h = home[r]
        if min(need[r]) < h:   # the edge check above makes this unreachable for graph edges
            raise InputError(f"not contiguous: value {r.name!r} made on stage {h} is read on stage {min(need[r])}")
        for s in range(h + 1, max(need[r]) + 1):
            carry_in[s].append(r)
    for s in range(1, n_st):
        if not carry_in[s]:
            raise InputError(f"stage {s} ({devices[s]}) reads nothing from stages 0..{s - 1}: the split is not a "
                             "pipeline (stage 0 on its own would not reach the loss)")

    modules, stage_params, stage_nodes, recv_names, recv_bytes = [], [], [], [], []
    inputs_ph = [nd for nd in phs if kind[nd] == "input"]
    for s in range(n_st):
        g = fx.Graph(tracer_cls=StageTracer)   # so a pickled stage module is rebuilt with its boundary ops
        root = torch.nn.Module()
        env: dict[Any, Any] = {}
        held: dict[str, str] = {}
        incoming = inputs_ph if s == 0 else carry_in[s]
        nbytes = 0
        for k, r in enumerate(incoming):
            p = g.placeholder(f"in{k}_{r.name}")
            p.meta = dict(r.meta)
            val = r.meta.get("val")
            if s > 0 and isinstance(val, torch.Tensor):
                nbytes += val.numel() * val.element_size()
                if val.is_floating_point() or val.is_complex():
                    p = g.call_function(grad_contiguous, (p,))
                if val.dim() and not val.is_contiguous():
                    p = g.call_function(restride, (p, tuple(val.stride())))
            env[r] = p

        def value(a: Any, g=g, env=env, root=root, held=held, s=s) -> Any:
            if a in env:
                return env[a]
            if a.op == "placeholder":
                if home[a] != s or kind[a] == "input":
                    raise RuntimeError(f"stage {s}: value {a.name!r} is neither held nor received")
                attr = f"p{len(root._parameters)}" if kind[a] == "param" else f"b{len(root._buffers)}"
                tensor = params.get(pname[a]) if kind[a] == "param" else buffers.get(pname[a])
                if tensor is None:
                    raise InputError(f"the model has no parameter or buffer {pname[a]!r} of the forward graph")
                if kind[a] == "param":
                    root.register_parameter(attr, tensor)
                    held[attr] = pname[a]
                else:
                    root.register_buffer(attr, tensor)
                env[a] = g.get_attr(attr)
            elif a.op == "get_attr":
                obj = getattr(gm, a.target)
                name = f"c_{a.target.replace('.', '_')}"
                setattr(root, name, obj)
                env[a] = g.get_attr(name)
            else:   # a replayed view, or a node of this stage reached through one
                if home[a] is not None and home[a] != s:
                    raise RuntimeError(f"stage {s}: value {a.name!r} of stage {home[a]} was not received")
                env[a] = g.node_copy(a, lambda b: value(b))
            return env[a]

        mine = [nd for nd in nodes if nd.op == "call_function" and home[nd] == s]
        for nd in mine:
            value(nd)
        if s == n_st - 1:
            outs = [value(a) if isinstance(a, fx.Node) else a for a in flat_out]
        else:
            outs = []
            for r in carry_in[s + 1]:
                # every sent tensor made contiguous at run time: the real strides can differ
                # from the trace's (a CPU convolution's output, say); a no-op when they agree
                v = value(r)
                val = r.meta.get("val")
                outs.append(g.call_function(contiguous, (v,)) if isinstance(val, torch.Tensor) else v)
        g.output(tuple(outs))
        g.lint()
        mod = fx.GraphModule(root, g, class_name=f"Stage{s}")
        modules.append(mod)
        stage_params.append(held)
        stage_nodes.append([v for i, v in enumerate(ids) if stage_of[i] == s])
        recv_names.append([r.name for r in incoming])
        recv_bytes.append(int(nbytes))
    return Stages(devices=devices, modules=modules, params=stage_params, nodes=stage_nodes, recv=recv_names,
                  recv_bytes=recv_bytes)


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
            if rank == 0:
                print(f"pipeline step {s + 1}/{job.warmup + job.steps}{' (warm-up)' if s < job.warmup else ''}: "
                      f"{(t_end - t0) * 1e3:.2f} ms (stage 0)", file=sys.stderr, flush=True)
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
class PipelineMeasured:
    """What :func:`run_pipeline` measured (times in ms)."""

    step_ms: list[float]
    batch: int
    microbatches: int
    schedule: str
    loss_kind: str
    matches_reference: bool
    max_abs_grad_diff: float
    loss: float
    reference_loss: float
    n_grads_checked: int
    n_losses_checked: int
    eager_step_ms: float
    stages: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        s = self.step_ms
        med = statistics.median(s)
        return {"measured_step_ms": med, "measured_per_sample_ms": med / self.batch, "measured_min_ms": min(s),
                "measured_max_ms": max(s), "measured_steps_ms": s, "batch": self.batch,
                "microbatches": self.microbatches, "schedule": self.schedule, "loss_kind": self.loss_kind,
                "eager_step_ms": self.eager_step_ms, "eager_per_sample_ms": self.eager_step_ms / self.batch,
                "matches_reference": self.matches_reference, "max_abs_grad_diff": self.max_abs_grad_diff,
                "loss": self.loss, "reference_loss": self.reference_loss, "grads_checked": self.n_grads_checked,
                "losses_checked": self.n_losses_checked, "stages": self.stages}


def run_pipeline(model: ModelSpec, placement: Mapping[str, str], device_names: Sequence[str] = (), *,
                 microbatches: int = 4, schedule: str = "gpipe", steps: int = 5, warmup: int = 2,
                 timeout_s: float = 300.0, threads: int = 1, atol: float = 1e-5,
                 rtol: float = 1e-4) -> PipelineMeasured:
    """Train the stages of ``placement`` (see the module docstring) and measure the step.

    ``placement`` maps every node id of the model's forward graph to a device name (of
    ``device_names`` when given). Gradients match when ``|ours - eager| <= atol + rtol *
    |eager|`` elementwise. Bad splits, schedules and micro-batch counts are refused with
    an :class:`InputError` before any process starts.
    """
    import torch.multiprocessing as mp

    if schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    if steps < 1 or warmup < 0:
        raise InputError(f"--steps must be >= 1 and the warm-up >= 0 (got {steps}, {warmup})")
    net, inputs, loss_fn = load(model)
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
def _maxload_objective(args: argparse.Namespace, placement: Mapping[str, str], inst: Any) -> tuple[Any, str, str]:
    """The plan's max-load objective: re-scored on the instance when there is one (the
    result's objective variant), else the result's own ``objective``."""
    from dnnplace.graphs.io import read_json
    doc = read_json(args.result)
    ev = doc.get("evaluation") if isinstance(doc, dict) and isinstance(doc.get("evaluation"), dict) else {}
    variant = ev.get("objective_variant") or "pipedream"
    if inst is not None and inst.cluster is not None:
        from dnnplace.graphs.evaluation.evaluate import maxload
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
                     warmup=args.warmup, timeout_s=args.timeout)
    out = {"model": args.model, "result": args.result, **m.to_dict(), "maxload_objective": obj,
           "maxload_unit": unit, "maxload_source": source}
    say = print
    say(f"pipeline: {len(m.stages)} stage(s) ({' -> '.join(s['device'] for s in m.stages)}), {schedule}, "
        f"{m.microbatches} micro-batches of a batch of {m.batch}")
    say(f"measured step: {out['measured_step_ms']:.3f} ms (median of {args.steps}; min {out['measured_min_ms']:.3f}, "
        f"max {out['measured_max_ms']:.3f}), {out['measured_per_sample_ms']:.4f} ms per sample")
    say(f"eager single-process step: {m.eager_step_ms:.3f} ms, {out['eager_per_sample_ms']:.4f} ms per sample")
    say(f"max-load objective: {'-' if obj is None else format(obj, '.6g') + ' ' + unit} ({source})")
    say(f"matches the eager step: {'yes' if m.matches_reference else 'NO'} (loss {m.loss:.6g} vs "
        f"{m.reference_loss:.6g}, {m.loss_kind}-type loss, {m.n_grads_checked} gradients, max |diff| "
        f"{m.max_abs_grad_diff:.3g}; the loss of all {m.n_losses_checked} steps, optimizer updates between)")
    if args.out:
        write_json(args.out, out, indent=None)
        say(f"wrote {args.out}")
    return 0 if m.matches_reference else 1
