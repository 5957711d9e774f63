"""Run a placed and ordered training step with one OS process per device, and check it.

:func:`execute` traces the model's joint forward+backward step in this process, maps the
plan (node id -> device name, optional start times) onto it, spawns one process per
device that holds a node (``torch.multiprocessing``, gloo over a file rendezvous in a
temporary folder), waits for them under a deadline (a stuck step is killed and reported,
never a hang), and compares step 0's loss and every gradient with an eager
single-process ``loss.backward()`` of the same model and inputs.

Devices are processes on this host. By default every one computes on the CPU whatever
its kind in the plan (the measurement then says what this host does with that plan);
``torch_devices`` maps plan devices to CUDA GPUs of this host (``{"gpu0": "cuda:0"}``),
one GPU per device, whose processes compute there and send through host memory
(:mod:`~dnnplace.pytorch.execution.worker`). The eager reference then runs on the first GPU, and
gradients are compared at ``CUDA_TOLERANCE`` (another summation order than the CPU's).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.execution.reference import (
    CUDA_TOLERANCE,
    ReferenceCompared,
    check_captured,
    check_reference,
    eager_reference,
)
from dnnplace.pytorch.execution.worker import ModelSpec, WorkerPlan, load, run_worker, trace_step

__all__ = ["ExecutionError", "Measured", "Plan", "execute", "device_orders", "run_processes", "cuda_devices",
           "check_gpu_ops", "message_rows", "torchrun_env", "TORCHRUN_VARS"]


_RANDOM_OPS = ("dropout", "bernoulli", "rand", "normal", "uniform", "multinomial")
"""Substrings of ATen ops that draw random numbers."""


class ExecutionError(RuntimeError):
    """A worker failed or the step did not finish before the deadline."""


@dataclass
class Measured(ReferenceCompared):
    """What :func:`execute` measured (times in ms)."""

    step_ms: list[float]
    ops: list[dict]                 # median step: {node, device, start_ms, end_ms}
    devices: list[str]
    peak_rss_bytes: dict[str, int]
    torch_devices: dict[str, str]
    peak_cuda_bytes: dict[str, int]
    transfers: int                  # tensors sent per step, one per (root value, destination device)
    transfer_bytes: int
    messages: list[dict] = field(default_factory=list)   # median step: one per received tensor (message_rows)
    n_messages: int = 0             # messages per step: packs of tensors with bytes (program.Pack)
    op_durations_ms: dict[str, list[float]] = field(default_factory=dict, repr=False)   # node id -> every step's

    @property
    def op_median_ms(self) -> dict[str, float]:
        """Node id -> its median duration over the measured steps."""
        return {v: statistics.median(d) for v, d in self.op_durations_ms.items()}

    def to_dict(self) -> dict:
        s = self.step_ms
        return {"measured_step_ms": statistics.median(s), "measured_min_ms": min(s), "measured_max_ms": max(s),
                "measured_steps_ms": s, "eager_step_ms": self.eager_step_ms,
                "recorded_step_ms": sorted(s)[len(s) // 2],   # the step whose ops and messages are recorded
                **self.reference_dict(), "devices": self.devices, "peak_rss_bytes": self.peak_rss_bytes,
                "torch_devices": self.torch_devices, "peak_cuda_bytes": self.peak_cuda_bytes,
                "transfers": self.transfers, "transfer_bytes": self.transfer_bytes,
                "message_count": self.n_messages, "ops": self.ops,
                "messages": self.messages, "op_median_ms": self.op_median_ms}


def device_orders(ids: Sequence[str], device: np.ndarray, n_dev: int,
                  start: Mapping[str, float] | None) -> list[list[int]]:
    """Each device's nodes by increasing start time (ties: trace order, a topological
    order); without start times, trace order."""
    key = (lambda v: (float(start[ids[v]]), v)) if start else (lambda v: v)
    if start:
        missing = [v for v in ids if v not in start]
        if missing:
            raise InputError(f"the result has no start time for node {missing[0]!r}")
    orders: list[list[int]] = [[] for _ in range(n_dev)]
    for v in sorted(range(len(ids)), key=key):
        orders[int(device[v])].append(v)
    return orders


@dataclass(frozen=True)
class Plan:
    """A placement (node id -> device name) and optional start times (each device's order)."""

    placement: Mapping[str, str]
    start: Mapping[str, float] | None = None


def execute(model: ModelSpec, plans: Sequence[Plan], device_names: Sequence[str], *, steps: int = 5,
            warmup: int = 2, timeout_s: float = 300.0, threads: int = 1, atol: float = 1e-5,
            rtol: float = 1e-4, torch_devices: Mapping[str, str] | None = None,
            captured: Mapping | None = None, interleave: bool = False, live: bool = True,
            torchrun: bool = False) -> list[Measured]:
    """Run each plan (see the module docstring) and measure it; one :class:`Measured` per plan.

    Every plan maps each graph node id of the traced step to a name in ``device_names``;
    its ``start`` times give each device's order. The plans share one set of processes
    (as many as the largest plan uses), each plan starting from the model as built.
    Gradients match when ``|ours - eager| <= atol + rtol * |eager|`` elementwise (at least
    :data:`CUDA_TOLERANCE` when a device is a GPU). ``torch_devices``: device name -> the
    torch device it computes on (default ``"cpu"``; see the module docstring).
    ``captured``: the plan's ``graph.meta["capture"]``, checked by :func:`check_captured`.
    ``interleave``: after every plan's warm-up, the measured steps go round-robin over the
    plans (one step of each in turn) instead of plan after plan; each plan keeps its own
    parameters and optimizer state, so each still equals the eager steps. ``live``: the
    per-step lines on stderr (``plan 1/2 step 3/7: 4.96 ms``) and the line that starts them.
    ``torchrun``: this process is one of the processes ``torchrun`` started (:func:`torchrun_env`),
    rank ``r`` running the plan's ``r``-th used device, gloo over the ``env://`` rendezvous;
    rank 0 alone runs the eager reference and returns the measurements, the others ``[]``.
    """
    import torch
    import torch.multiprocessing as mp

    from dnnplace.pytorch.execution.program import build_programs
    if steps < 1 or warmup < 0:
        raise InputError(f"--steps must be >= 1 and the warm-up >= 0 (got {steps}, {warmup})")
    if not plans:
        return []
    net, inputs, loss_fn = load(model)
    check_captured(captured, model, inputs, loss_fn)
    cap = trace_step(model, net, inputs, loss_fn)
    del net
    ids = list(cap.ids)
    for nd in cap.gm.graph.nodes:
        if nd.op == "call_function" and any(w in str(nd.target) for w in _RANDOM_OPS):
            print(f"warning: operator {str(nd.target)!r} (fx node {nd.name!r}) draws random numbers: the step "
                  "cannot equal the eager step (switch dropout off to check it)", file=sys.stderr)
    index = {d: i for i, d in enumerate(device_names)}
    jobs, used_of, progs_of = [], [], []
    for plan in plans:
        rank, used = _ranks(plan.placement, ids, index)
        orders = device_orders(ids, rank, len(used), plan.start)
        progs_of.append(build_programs(cap, rank, orders))  # bad orders / crossings refused here, once
        jobs.append((tuple(rank.tolist()), tuple(tuple(o) for o in orders)))
        used_of.append(used)
    on = cuda_devices(device_names, torch_devices or {})
    gpus = sorted({on[d] for u in used_of for d in u if on[d] != "cpu"})
    if gpus:   # before anything runs
        for (ranks, _), used in zip(jobs, used_of):
            check_gpu_ops(cap, [on[used[r]] for r in ranks], device_names, used, ranks)
    if gpus:
        atol, rtol = max(atol, CUDA_TOLERANCE[0]), max(rtol, CUDA_TOLERANCE[1])
    world = max(len(u) for u in used_of)
    launched = torchrun_env() if torchrun else None
    if launched is not None and launched[1] != world:
        raise InputError(f"torchrun started {launched[1]} processes (WORLD_SIZE), the plan uses {world} devices: "
                         "start one process per device")
    ref_losses, ref_grads, eager_ms = [], {}, float("nan")
    if launched is None or launched[0] == 0:   # under torchrun, rank 0 alone checks
        ref_losses, ref_grads, eager_ms = eager_reference(model, steps=warmup + steps, threads=threads,
                                                          device=gpus[0] if gpus else "cpu")
    if launched is not None:
        wp = WorkerPlan(model=model, ids=tuple(ids), jobs=tuple(jobs), steps=steps, warmup=warmup, out_dir="",
                        init_file="", timeout_s=timeout_s, threads=threads, own_clocks=True,
                        devices=tuple(tuple(on[d] for d in u) for u in used_of), interleave=interleave, live=live)
        try:
            gathered = run_worker(launched[0], wp, world=world)
        except RuntimeError as exc:
            raise ExecutionError(f"rank {launched[0]}: {exc}") from None
        if gathered is None:   # not rank 0
            return []
        records = align_clocks([g[0] for g in gathered])
        outs = [g[1] for g in gathered]
        return [_measured(j, ids, device_names, used_of[j], progs_of[j], [rec[j] for rec in records],
                          [o[j] for o in outs], ref_losses, ref_grads, eager_ms, steps, atol, rtol)
                for j in range(len(plans))]
    with tempfile.TemporaryDirectory(prefix="dnnplace-exec-") as tmp:
        wp = WorkerPlan(model=model, ids=tuple(ids), jobs=tuple(jobs), steps=steps, warmup=warmup, out_dir=tmp,
                        init_file=os.path.join(tmp, "rendezvous"), timeout_s=timeout_s, threads=threads,
                        devices=tuple(tuple(on[d] for d in u) for u in used_of), interleave=interleave, live=live)
        if live:
            print(f"executing {len(plans)} plan(s){' interleaved' if interleave and len(plans) > 1 else ''} on "
                  f"{world} process(es), {max(sum(len(p.recvs) for p in pr) for pr in progs_of)} transfers in "
                  f"{max(sum(1 for p in pr for pk in p.packs_in if pk.nbytes) for pr in progs_of)} messages per "
                  "step at most", file=sys.stderr, flush=True)
        run_processes(mp, wp, world, timeout_s * len(plans), written=lambda: _written(tmp, world))
        records = []
        for r in range(world):
            with open(os.path.join(tmp, f"times-{r}.json")) as f:
                records.append(json.load(f)["jobs"])
        outs = [torch.load(os.path.join(tmp, f"outputs-{r}.pt")) for r in range(world)]
    return [_measured(j, ids, device_names, used_of[j], progs_of[j], [rec[j] for rec in records],
                      [o[j] for o in outs], ref_losses, ref_grads, eager_ms, steps, atol, rtol)
            for j in range(len(plans))]


TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
"""What ``torchrun`` sets in every process it starts, the ``env://`` rendezvous reads."""


def torchrun_env(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(rank, world size)`` of a process ``torchrun`` started; :class:`InputError` naming
    what is missing or malformed otherwise."""
    env = os.environ if environ is None else environ
    missing = [k for k in TORCHRUN_VARS if not env.get(k)]
    if missing:
        raise InputError(f"--torchrun: {', '.join(missing)} not set: start the command with torchrun "
                         "(docs/execution.md, 'Past one host')")
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    except ValueError:
        raise InputError(f"--torchrun: RANK {env['RANK']!r} and WORLD_SIZE {env['WORLD_SIZE']!r} must be "
                         "integers") from None
    if not 0 <= rank < world:
        raise InputError(f"--torchrun: RANK {rank} is not below WORLD_SIZE {world}")
    return rank, world


def align_clocks(records: list) -> list:
    """Every rank's recorded times shifted, per plan and step, so that its step starts when
    rank 0's does: ranks on other hosts have other monotonic clocks, and every step starts
    with a barrier (so the shift is exact to the barrier's skew). ``records[r][j]``: rank
    ``r``'s record of plan ``j`` (``worker._Job.result``)."""
    for rec in records:
        for j, job in enumerate(rec):
            for s, st in enumerate(job["steps"]):
                off = records[0][j]["steps"][s]["t0"] - st["t0"]
                st["t0"] += off
                st["t_end"] += off
                st["ops"] = [[v, a + off, b + off] for v, a, b in st["ops"]]
                st["sent"] = [[k, a + off, b + off] for k, a, b in st.get("sent", ())]
                st["received"] = [[k, v, a + off, b + off, c + off] for k, v, a, b, c in st.get("received", ())]
    return records


def cuda_devices(device_names: Sequence[str], torch_devices: Mapping[str, str]) -> list[str]:
    """The torch device of every plan device (``"cpu"`` unless ``torch_devices`` names a GPU),
    checked: known device names, GPUs this host has, one GPU per device."""
    import torch
    unknown = next((d for d in torch_devices if d not in device_names), None)
    if unknown is not None:
        raise InputError(f"a GPU is asked for device {unknown!r}, which the cluster does not have "
                         f"(devices: {', '.join(device_names)})")
    out = [str(torch_devices.get(d, "cpu")) for d in device_names]
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    seen: dict[str, str] = {}
    for name, dev in zip(device_names, out):
        if dev == "cpu":
            continue
        if not dev.startswith("cuda:") or not dev[5:].isdigit():
            raise InputError(f"device {name!r}: torch device {dev!r} is neither 'cpu' nor 'cuda:N'")
        if int(dev[5:]) >= have:
            raise InputError(f"device {name!r} is to run on {dev}, but this host has {have} CUDA GPU(s)")
        if dev in seen:
            raise InputError(f"devices {seen[dev]!r} and {name!r} would share {dev}: each device needs its own GPU")
        seen[dev] = name
    return out


def check_gpu_ops(cap: Any, torch_device: list[str], device_names: Sequence[str], used: list[int],
                   ranks: Sequence[int]) -> None:
    """Refuse a plan that puts a CPU-only operator of the trace on a GPU, naming both."""
    from dnnplace.pytorch.capture.ops import cpu_only_op
    for nd in cap.gm.graph.nodes:
        v = cap.rep.get(nd.name, -1)
        if v >= 0 and torch_device[v] != "cpu" and cpu_only_op(nd):
            raise InputError(f"node {cap.ids[v]!r} runs {cpu_only_op(nd)}, a CPU-only operator of the step traced "
                             f"on the CPU, but the plan puts it on {device_names[used[ranks[v]]]} "
                             f"({torch_device[v]}): place it on a CPU device")


def _ranks(placement: Mapping[str, str], ids: list[str], index: dict[str, int]) -> tuple[np.ndarray, list[int]]:
    """Rank of every node (devices that hold a node, in cluster order) and those devices."""
    known = set(ids)
    unknown = next((v for v in placement if v not in known), None)
    if unknown is not None:
        raise InputError(f"the result places node {unknown!r}, which the traced step does not have "
                         "(was the graph captured from another model, input shape or optimizer?)")
    missing = next((v for v in ids if v not in placement), None)
    if missing is not None:
        raise InputError(f"the result does not place node {missing!r} of the traced step")
    bad = next((d for d in placement.values() if d not in index), None)
    if bad is not None:
        raise InputError(f"the result places nodes on device {bad!r}, which the cluster does not have")
    dev = [index[placement[v]] for v in ids]
    used = sorted(set(dev))
    rank_of = {d: r for r, d in enumerate(used)}
    return np.array([rank_of[d] for d in dev], dtype=np.int64), used


def _measured(j: int, ids: list[str], device_names: Sequence[str], used: list[int], progs: list, records: list,
              outs: list, ref_losses: list[float], ref_grads: dict, eager_ms: float, steps: int, atol: float,
              rtol: float) -> Measured:
    """Times and the reference check of plan ``j`` from every rank's records."""
    records = records[:len(used)]
    step_ms = [(max(rec["steps"][s]["t_end"] for rec in records) - min(rec["steps"][s]["t0"] for rec in records))
               * 1e3 for s in range(steps)]
    med = int(np.argsort(step_ms)[len(step_ms) // 2])
    t0 = min(rec["steps"][med]["t0"] for rec in records)
    ops = [{"node": ids[v], "device": device_names[used[r]], "start_ms": (a - t0) * 1e3, "end_ms": (b - t0) * 1e3}
           for r, rec in enumerate(records) for v, a, b in rec["steps"][med]["ops"]]
    durations: dict[int, list[float]] = {}
    for rec in records:
        for step in rec["steps"]:
            for v, a, b in step["ops"]:
                durations.setdefault(v, []).append((b - a) * 1e3)
    losses = next((o["losses"] for o in outs if o.get("losses")), [])
    loss, ref_loss = (losses[0] if losses else float("nan")), ref_losses[0]
    grads = {k: g for o in outs for k, g in o["grads"].items()}
    ok, diffs = check_reference(losses, ref_losses, grads, ref_grads, atol=atol, rtol=rtol)
    return Measured(step_ms=step_ms, ops=ops, matches_reference=bool(ok), max_abs_grad_diff=max(diffs, default=0.0),
                    loss=loss, reference_loss=ref_loss, n_grads_checked=len(diffs),
                    n_losses_checked=min(len(losses), len(ref_losses)), eager_step_ms=eager_ms,
                    devices=[device_names[d] for d in used],
                    peak_rss_bytes={device_names[used[r]]: rec["peak_rss_bytes"] for r, rec in enumerate(records)},
                    torch_devices={device_names[used[r]]: rec.get("device", "cpu") for r, rec in enumerate(records)},
                    peak_cuda_bytes={device_names[used[r]]: rec.get("peak_cuda_bytes", 0)
                                     for r, rec in enumerate(records)},
                    transfers=sum(len(p.recvs) for p in progs),
                    transfer_bytes=sum(t.nbytes for p in progs for t in p.recvs),
                    n_messages=sum(1 for p in progs for pk in p.packs_in if pk.nbytes),
                    messages=message_rows(progs, [rec["steps"][med] for rec in records], t0, ids,
                                          [device_names[d] for d in used]),
                    op_durations_ms={ids[v]: d for v, d in sorted(durations.items())})


def message_rows(progs: Sequence[Any], steps: Sequence[Mapping], t0: float, ids: Sequence[str],
                 names: Sequence[str]) -> list[dict]:
    """One step's messages, one row per received tensor (docs/execution.md, "Message
    timeline"), from every rank's record of that step (``steps[r]``: its ``sent``
    ``[pack, start, end]`` and ``received`` ``[tag, consumer, wait start, wait end, ready]``,
    ``perf_counter`` seconds): tag, the message (``pack``) that carried it, source and
    destination device, bytes, the fx value, the consuming graph node, and the times in ms
    since ``t0`` (the pack's: its tensors travel together). Zero-element tensors have no row."""
    by_tag = {t.tag: t for p in progs for t in p.recvs}
    pack_of = {t.tag: pk.id for p in progs for pk in p.packs_in for t in pk.transfers}
    sent = {pack: (a, b) for st in steps for pack, a, b in st.get("sent", ())}
    rows = []
    for st in steps:
        for tag, v, w0, w1, ready in st.get("received", ()):
            t = by_tag[tag]
            a, b = sent[pack_of[tag]]
            rows.append({"tag": tag, "pack": pack_of[tag], "src": names[t.src], "dst": names[t.dst],
                         "bytes": t.nbytes, "value": t.value,
                         "consumer": ids[v], "send_start_ms": (a - t0) * 1e3, "send_end_ms": (b - t0) * 1e3,
                         "wait_start_ms": (w0 - t0) * 1e3, "wait_end_ms": (w1 - t0) * 1e3,
                         "ready_ms": (ready - t0) * 1e3})
    return sorted(rows, key=lambda r: r["tag"])


def worker_error(text: str) -> str:
    """The exception line of a worker's traceback (its message can run over several lines,
    so not simply the last line).

    >>> worker_error(chr(10).join(["Traceback:", "  File x", "TypeError: no mutation.", "", "    node.args = a"]))
    'TypeError: no mutation. ...'
    """
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    found = max((i for i, ln in enumerate(lines) if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b", ln)),
                default=None)
    if found is None:
        return lines[-1] if lines else text
    return lines[found] + (" ..." if found < len(lines) - 1 else "")


def _written(tmp: str, world: int) -> bool:
    """Whether every rank's measurements are in ``tmp``, whole (each file reads back)."""
    import torch
    try:
        for r in range(world):
            with open(os.path.join(tmp, f"times-{r}.json")) as f:
                json.load(f)
            torch.load(os.path.join(tmp, f"outputs-{r}.pt"))
    except Exception:   # noqa: BLE001 (missing, torn or unreadable: not written)
        return False
    return True


def run_processes(mp: Any, plan: Any, world: int, timeout_s: float, fn: Any = run_worker,
                  written: Any = None) -> None:
    """Start ``world`` processes of ``fn(rank, plan)`` and wait for all of them; kill every one on a failure, on the
    deadline, or on Ctrl-C. A worker killed by a signal after every rank wrote its measurements (``written()``;
    the ranks write before their last barrier) loses nothing: gloo's teardown of a finished run can abort a
    process ("terminate called without an active exception"), and the run is kept with a warning."""
    ctx = mp.start_processes(fn, args=(plan,), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=0.5):
            if time.monotonic() > deadline:
                raise ExecutionError(f"the step did not finish within {timeout_s:g} s (a deadlock or a slow "
                                     "device); every worker was stopped")
    except mp.ProcessRaisedException as exc:
        raise ExecutionError(f"a worker failed: {worker_error(str(exc))}") from None
    except mp.ProcessExitedException as exc:
        if exc.exit_code < 0 and written is not None and written():
            print(f"dnnplace: warning: {exc} after every worker wrote its measurements (gloo's teardown); the run is "
                  "complete", file=sys.stderr, flush=True)
            return
        raise ExecutionError(f"a worker exited: {exc}") from None
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
        for p in ctx.processes:
            p.join(timeout=5)

