"""Table 4 latencies of ``latency-ls`` (iterated local search) against the paper.

Runs the workloads one at a time through :func:`dnnplace.registry.solve` (so every value
is re-scored by the evaluator), prints a markdown table with the start value, the best
value after ``--at`` seconds of search and at the end, and the paper's greedy, max-load
DP and IP latencies; writes each best split to ``--warm-dir`` for IP warm starts, as
``{graph}_latency-ls.json`` (``{dir}-{graph}_latency-ls.json`` for the two graphs
named ``resnet50_inference``).

    .venv/bin/python -m benchmarks latency-ls --time-limit 120 --at 30
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO
from benchmarks.rows import append_jsonl
from dnnplace.graphs.io import load_instance, write_json
from dnnplace.registry import SolveRequest, SolverOptions, solve

WORKLOADS = ["OperatorGraphs/bert_l-3_inference", "OperatorGraphs/bert_l-6_inference",
             "OperatorGraphs/bert_l-12_inference", "OperatorGraphs/resnet50_inference",
             "LayerGraphs/bert24_inference", "LayerGraphs/resnet50_inference",
             "LayerGraphs/inceptionv3_inference", "LayerGraphs/gnmt_inference"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=120.0, seed=0, only=None, help={"only": "substrings of workloads to run"})
    parser.add_argument("--at", type=float, default=30.0, help="also report the best value after this many seconds")
    parser.add_argument("--start", default=None, help="start method (default: best of greedy, dp, all-CPU)")
    parser.add_argument("--warm-dir", default=str(REPO / "results" / "formulations" / "warm"))
    parser.add_argument("--jsonl", default=str(REPO / "results" / "formulations" / "latency-ls-table4.jsonl"))


def run(args) -> None:
    ref = json.loads((REPO / "experiments" / "reference" / "tarnawski-neurips20.json").read_text())
    paper = {r["input"]: r["latency"] for r in ref["table4_latency"]}
    root = REPO / "graphs" / "workloads" / "tarnawski" / "latency-inputs"
    print(f"| input | start | start value | LS @{args.at:g}s | LS @{args.time_limit:g}s | paper greedy | paper DP | "
          "paper IP | LS vs IP % | start s | iterations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for w in WORKLOADS:
        if not selected(w, args.only):
            continue
        inst = load_instance(root / f"{w}.json")
        req = SolveRequest("latency", seed=args.seed, warm_start=args.start,
                           solver=SolverOptions(time_limit=args.time_limit))
        t0 = time.perf_counter()
        res = solve(inst, "latency-ls", req)
        wall = time.perf_counter() - t0
        ex = res.extra
        at = min((v for t, v, _ in res.trace if t - ex["start_seconds"] <= args.at), default=ex["start_value"])
        p = paper[f"latency-inputs/{w}.json"]
        name = Path(w).name
        if sum(Path(x).name == name for x in WORKLOADS) > 1:  # resnet50: operator and layer graph
            name = w.replace("/", "-")
        write_json(Path(args.warm_dir) / f"{name}_latency-ls.json", res.placement)
        row = {"input": w, "start": ex["start"], "starts": ex["starts"], "start_value": ex["start_value"],
               "at": args.at, "value_at": at, "time_limit": args.time_limit, "value": res.objective,
               "paper": p, "start_seconds": ex["start_seconds"], "iterations": ex["iterations"],
               "evaluations": ex["evaluations"], "wall_seconds": wall, "seed": args.seed,
               "feasible": res.evaluation["feasible"], "trace": res.trace}
        append_jsonl(args.jsonl, row)
        print(f"| {w} | {ex['start']} | {ex['start_value']:.2f} | {at:.2f} | {res.objective:.2f} | {p['greedy']} | "
              f"{p['maxload_dp']} | {p['ip']} | {100 * (res.objective / p['ip'] - 1):+.2f} | "
              f"{ex['start_seconds']:.1f} | {ex['iterations']} |", flush=True)
