"""The executor's overhead against an eager step, interleaved in one process, per model.

For each benchmark model (those of ``python -m benchmarks tune``, the unseen one included):
``--steps`` pairs of an eager training step (``loss.backward()`` and the ``torch.optim``
step) and the executor's one-device step of the same model, alternating in one process on
one thread (:func:`~dnnplace.pytorch.execution.overhead.interleaved_overhead`, docs/execution.md,
"The executor's overhead"); the overhead is the median of the pairs' ratios executor / eager
with its 95 % order-statistic interval. The goal: within 10 % (median ratio <= 1.10) on
every model.

Each model is measured in ``--processes`` fresh processes, one after another: on this VM
the ratio differs more between processes than the pairs within one process spread (the
same CNN measured 1.00 to 1.29 in six processes, each interval within +-6 %), so one
process's interval says little about the next. The table gives each model's median over
the processes of their median ratios, the range over the processes and the pooled pairs'
interval.

    .venv/bin/python -m benchmarks overhead --steps 40 --processes 5

Writes ``results/execution/overhead.md`` (about three minutes on the 2-vCPU VM).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_tune import specs
from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared
from benchmarks.paths import REPO

GOAL = 1.10

_CHILD = r"""
import json, sys
from dnnplace.pytorch.execution.overhead import interleaved_overhead
from dnnplace.pytorch.execution.worker import ModelSpec
spec, inputs, params, steps, warmup = json.loads(sys.argv[1])
o = interleaved_overhead(ModelSpec(spec=spec, inputs=tuple(inputs), loss="cross_entropy", params=params),
                         steps=steps, warmup=warmup)
print(json.dumps({"eager_ms": o.eager_ms, "executor_ms": o.executor_ms, "max_loss_diff": o.max_loss_diff}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, models=list(specs()), steps=40, out=REPO / "results" / "execution" / "overhead.md")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured pairs first (default 3)")
    parser.add_argument("--processes", type=int, default=5, help="fresh processes per model (default 5)")


def measure(spec: str, inputs: tuple, params: dict, steps: int, warmup: int):
    """One process's :class:`~dnnplace.pytorch.execution.overhead.Overhead` (a child process,
    so each repeat starts from a fresh interpreter and allocator)."""
    from dnnplace.pytorch.execution.overhead import Overhead
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([spec, list(inputs), params, steps, warmup])],
                          capture_output=True, text=True, check=True, cwd=REPO)
    return Overhead(**json.loads(done.stdout.strip().splitlines()[-1]))


def run(args) -> None:
    from dnnplace.measured_rounds import median_ci
    from dnnplace.pytorch.execution.overhead import Overhead
    load_at_start = machine_load()
    rows = []
    for name in args.models:
        spec, inputs, params = specs()[name]
        runs, pooled = [], Overhead([], [])
        for k in range(args.processes):
            o = measure(str(REPO / spec), inputs, params, args.steps, args.warmup)
            pooled.eager_ms += o.eager_ms
            pooled.executor_ms += o.executor_ms
            pooled.max_loss_diff = max(pooled.max_loss_diff, o.max_loss_diff)
            runs.append(r := {**o.summary(), "ratio_ci": median_ci(o.ratios)[1:]})
            print(f"{name:<15} process {k + 1}: eager {r['eager_ms']:8.3f} ms  executor {r['executor_ms']:8.3f} ms  "
                  f"ratio {r['ratio']:.3f} [{r['ratio_ci'][0]:.3f}, {r['ratio_ci'][1]:.3f}]", flush=True)
        ratios = [r["ratio"] for r in runs]
        rows.append({"model": name, "ratio": statistics.median(ratios), "ratios": ratios,
                     "pooled_ci": median_ci(pooled.ratios)[1:], "max_loss_diff": pooled.max_loss_diff,
                     "eager_ms": statistics.median(r["eager_ms"] for r in runs),
                     "executor_ms": statistics.median(r["executor_ms"] for r in runs)})
    met = [r for r in rows if r["ratio"] <= GOAL]
    lines = [f"# The executor's overhead against an eager step ({utc_now()})", "",
             f"`{args.command_line}` ({args.processes} processes per model, {args.steps} pairs each after "
             f"{args.warmup} unmeasured, one thread; load at start: {load_at_start}; at end: {machine_load()}).", "",
             "Each pair: an eager step (`loss.backward()` + `torch.optim` step of the model as built) and the "
             "executor's step of the whole graph on one device, alternating in one process (which goes first "
             "alternates too); ratio = executor / eager per pair. Per model: the median over the processes of "
             "each process's median ratio, their range, and the 95 % order-statistic interval of the pooled "
             "pairs' median (docs/execution.md, The executor's overhead). Step times: medians over the "
             "processes of each process's median. Loss diff: the largest |executor - eager| loss of "
             "one step over every pair (both sides take the same steps).", "",
             "| model | eager (ms) | executor (ms) | ratio (median of processes) | processes' range | "
             "pooled 95 % interval | loss diff | within 10 % |",
             "|---|---:|---:|---:|---|---|---:|---|"]
    for r in rows:
        lo, hi = r["pooled_ci"]
        lines.append(f"| {r['model']} | {r['eager_ms']:.3f} | {r['executor_ms']:.3f} | {r['ratio']:.3f} | "
                     f"{min(r['ratios']):.3f} - {max(r['ratios']):.3f} | [{lo:.3f}, {hi:.3f}] | "
                     f"{r['max_loss_diff']:.1e} | "
                     f"{'yes' if r['ratio'] <= GOAL else '**no**'} |")
    lines += ["", f"Within 10 % (the processes' median ratio) on {len(met)} of {len(rows)} models.", ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print(f"-> {out}")
