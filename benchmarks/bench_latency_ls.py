"""Table 4 latencies of ``latency-ls`` (iterated local search) against the paper.

Runs the workloads one at a time through :func:`dnnplace.registry.solve` (so every value
is re-scored by the evaluator), prints a markdown table with the start value, the best
value after ``--at`` seconds of search and at the end, and the paper's greedy, max-load
DP and IP latencies; writes each best split to ``--warm-dir`` for IP warm starts, as
``{graph}_latency-ls.json`` (``{dir}-{graph}_latency-ls.json`` for the two graphs
named ``resnet50_inference``).

    .venv/bin/python benchmarks/bench_latency_ls.py --time-limit 120 --at 30
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dnnplace.graphs.io import load_instance, write_json  # noqa: E402
from dnnplace.registry import SolveRequest, SolverOptions, solve  # noqa: E402

WORKLOADS = ["OperatorGraphs/bert_l-3_inference", "OperatorGraphs/bert_l-6_inference",
             "OperatorGraphs/bert_l-12_inference", "OperatorGraphs/resnet50_inference",
             "LayerGraphs/bert24_inference", "LayerGraphs/resnet50_inference",
             "LayerGraphs/inceptionv3_inference", "LayerGraphs/gnmt_inference"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--at", type=float, default=30.0, help="also report the best value after this many seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", default=None, help="start method (default: best of greedy, dp, all-CPU)")
    ap.add_argument("--only", nargs="*", default=None, help="substrings of workloads to run")
    ap.add_argument("--warm-dir", default=str(REPO / "results" / "formulations" / "warm"))
    ap.add_argument("--jsonl", default=str(REPO / "results" / "formulations" / "latency-ls-table4.jsonl"))
    args = ap.parse_args()
    ref = json.loads((REPO / "experiments" / "reference" / "tarnawski-neurips20.json").read_text())
    paper = {r["input"]: r["latency"] for r in ref["table4_latency"]}
    root = REPO / "graphs" / "workloads" / "tarnawski" / "latency-inputs"
    print(f"| input | start | start value | LS @{args.at:g}s | LS @{args.time_limit:g}s | paper greedy | paper DP | "
          "paper IP | LS vs IP % | start s | iterations |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for w in WORKLOADS:
        if args.only and not any(s in w for s in args.only):
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
        with open(args.jsonl, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"| {w} | {ex['start']} | {ex['start_value']:.2f} | {at:.2f} | {res.objective:.2f} | {p['greedy']} | "
              f"{p['maxload_dp']} | {p['ip']} | {100 * (res.objective / p['ip'] - 1):+.2f} | "
              f"{ex['start_seconds']:.1f} | {ex['iterations']} |", flush=True)


if __name__ == "__main__":
    main()
