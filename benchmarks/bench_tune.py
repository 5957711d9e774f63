"""Measured selection on this host: ``dnnplace tune`` with the calibrated ``local-cpu-2`` cluster.

On every execution-benchmark model and on a model the calibration never saw.

Each model: the methods' plans solved on ``results/execution/calibration/cluster.json`` (per-
message costs, overlapping links), the three best predicted and the one-device plan executed
interleaved until every median's 95 % interval is within +-3 % (or 30 steps), the measured
best chosen only where its interval lies below the one-device plan's (docs/execution.md,
Measured selection).

    .venv/bin/python -m benchmarks tune [--models towers,...] [--cluster FILE] [--executed-costs]

With ``--executed-costs`` each model's one-device plan runs first and the methods solve on
its operator times (docs/execution.md, Executed costs); every run solves the operator and
the layer graph (``tune``'s default ``--granularity op,layer``, "Layer plans").

Writes ``OUT/<model>.json`` (``dnnplace tune --out``), ``OUT/<model>.png`` and
``OUT/README.md`` (one row per model: chosen method, measured and one-device medians with
intervals, speed-up, predicted step).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_execution import MODELS, MODELS_FILE
from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared
from benchmarks.paths import REPO as ROOT

UNSEEN = {"three-branches": ("benchmarks/unseen_models.py:three_branches", ("256x768",), {})}


def specs() -> dict[str, tuple[str, tuple, dict]]:
    """Model name -> (spec, inputs, factory parameters): the benchmark's and the unseen ones."""
    models = MODELS_FILE.relative_to(ROOT)   # the commands and records name files from the checkout
    out = {name: (f"{models}:{factory}", inputs, params) for name, (factory, inputs, params) in MODELS.items()}
    return {**out, **UNSEEN}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, models=list(specs()), time_limit=20.0, out=ROOT / "results" / "execution" / "tune",
               help={"out": "folder of one tuned JSON and plot per model and README.md"})
    parser.add_argument("--cluster", default="results/execution/calibration/cluster.json",
                        help="the calibrated cluster, relative to the checkout (default: %(default)s)")
    parser.add_argument("--executed-costs", action="store_true",
                        help="tune --executed-costs: solve on the one-device run's operator times")


def run(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    load_at_start = machine_load()
    for name in args.models:
        spec, inputs, params = specs()[name]
        path = out / f"{name}.json"
        cmd = [sys.executable, "-m", "dnnplace", "tune", spec, *(f"--input={x}" for x in inputs),
               *(f"--param={k}={v}" for k, v in params.items()), "--loss", "cross_entropy", "--cluster",
               args.cluster, "--time-limit", str(args.time_limit), *(["--executed-costs"] * args.executed_costs),
               "--out", str(path.resolve()),
               "--plot", str((out / f"{name}.png").resolve())]
        print(f"{name}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        doc = json.loads(path.read_text())
        rows.append((name, doc))
    costs = ("the one-device run's operator times (`--executed-costs`)" if args.executed_costs
             else "profiled (`measured:cpu`)")
    lines = ["# Measured selection (`dnnplace tune`) on this host", "",
             f"Command: `{args.command_line}`; cluster `{args.cluster}` (calibrated, "
             f"results/execution/calibration/README.md); costs {costs}; {utc_now()}, {load_at_start} at the start. "
             "Medians with their 95 % "
             "intervals; `three-branches` was never part of the calibration; `(layers)`: a plan of the layer graph "
             "(docs/execution.md, Layer plans).", "",
             "| model | chosen | measured ms (CI) | one device ms (CI) | speed-up | predicted ms | candidates |",
             "|---|---|---|---|---:|---:|---|"]
    for name, d in rows:
        cands = ", ".join(f"{c['method']} {c['measured_step_ms']:.1f}" for c in d["candidates"])
        ci = {k: f"{d[k + '_step_ms']:.2f} ({d[k + '_ci_ms'][0]:.2f}-{d[k + '_ci_ms'][1]:.2f})"
              for k in ("measured", "one_device")}
        lines.append(f"| {name} | {d['chosen_method']} | {ci['measured']} | {ci['one_device']} | {d['speedup']:.2f}x | "
                     f"{d['predicted_step_ms']:.2f} | {cands} |")
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
