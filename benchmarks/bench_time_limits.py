"""Time limits as a whole process: each method as ``dnnplace solve --time-limit L``, start to exit.

Every makespan method on a 20k-node random DAG (4 NVLink GPUs) and the max-load ``ip`` /
``dp`` on Tarnawski graphs, each run as ``dnnplace solve ... --time-limit L`` in a fresh
subprocess, timed from the process's start to its exit (imports, graph loading,
coarsening, model build, hand-off, solve, refinement, evaluation and writing the result
all included). The goal: every method within 10 % of its limit (docs/bad-input.md, "Time limits").
The max-load ``dp`` and ``latency-ls`` also run on the largest captured graphs (``CAPTURED``, on
``single-host-4-nvlink``), whose DP graphs are too wide to enumerate.

    .venv/bin/python -m benchmarks time-limits [--limit 10] [--methods heft,pesto,...]
        [--nodes 20000] [--rows results/time-limits/rows.jsonl] [--markdown]

Each run is killed at ``3 x limit + 60`` s (``killed`` in the table). ``--rows`` appends
one JSON row per run as it ends; ``--markdown`` renders such a file as the table (with
``--rows``, after the runs). Timings are wall seconds on whatever machine runs it: on a
shared machine they are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.options import add_shared
from benchmarks.rows import append_jsonl, read_jsonl

MAKESPAN = ("single", "greedy", "expert", "layer-split", "heft", "etf", "m-topo", "m-etf", "m-sct", "pesto",
            "celeritas", "order-place", "metis", "dpos", "os-dpos", "dp-baseline", "cpop", "pardnn", "cp-mayer",
            "lc-glb", "dsc-glb")
"""Every method of ``dnnplace methods`` that solves makespan."""
VARIANTS = {"pesto coarsen_to=200": ("pesto", ["--param", "coarsen_to=200"]),
            "pesto engine=cpsat": ("pesto", ["--param", "engine=cpsat"]),
            "pesto engine=cpsat coarsen_to=200": ("pesto", ["--param", "engine=cpsat", "--param", "coarsen_to=200"])}
"""Pesto's other configurations measured (the default coarsens automatically)."""
TARNAWSKI = ("tarnawski/throughput-inputs/OperatorGraphs/bert_L-12_training.json",
             "tarnawski/throughput-inputs/OperatorGraphs/resnet50_training.json")
"""The largest bundled Tarnawski graphs for the max-load ``ip`` and ``dp``."""
CAPTURED = ("captured/nasnet-4x44", "captured/gnmt-4")
"""The largest captured graphs for the max-load ``dp`` and ``latency-ls`` (4,334 and 3,910 nodes)."""


def solve_row(graph: str, method: str, extra: list[str], limit: float, problem: str, label: str,
              workdir: Path) -> dict:
    """One whole-process run: wall seconds and what the result says."""
    out = workdir / f"{label.replace(' ', '_').replace('=', '-').replace('/', '_')}.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "dnnplace", "-q", "solve", graph, "--problem", problem, "--method", method,
           "--time-limit", str(limit), "--out", str(out), *extra]
    cap = 3 * limit + 60
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, stdin=subprocess.DEVNULL)
        wall, rc, err = time.perf_counter() - t0, proc.returncode, proc.stderr.strip().splitlines()
    except subprocess.TimeoutExpired:
        wall, rc, err = time.perf_counter() - t0, None, [f"killed at {cap:.0f} s"]
    row = {"method": label, "problem": problem, "graph": Path(graph).name, "limit": limit, "wall": round(wall, 2),
           "overrun_pct": round(100 * (wall - limit) / limit, 1), "rc": rc}
    if out.exists():
        res = json.loads(out.read_text())
        row.update(status=res.get("status"), termination=res.get("termination"), objective=res.get("objective"),
                   method_wall=res.get("wall_seconds"))
    else:
        row.update(status="killed" if rc is None else "no result", message=(err[-1] if err else "")[:120])
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| method | problem | graph | time limit (s) | wall (s, whole process) | overrun | status | termination "
            "| objective |\n|---|---|---|---:|---:|---:|---|---|---:|\n")
    body = []
    for r in rows:
        obj = r.get("objective")
        body.append(f"| {r['method']} | {r['problem']} | {r['graph']} | {r['limit']:g} | {r['wall']:.1f} | "
                    f"{r['overrun_pct']:+.1f} % | {r.get('status')} | {r.get('termination') or '-'} | "
                    f"{'-' if obj is None else f'{obj:.6g}'} |")
    return head + "\n".join(body) + "\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=float, default=10.0, help="the time limit of every run (s)")
    parser.add_argument("--methods", default="all", help="comma-separated labels (makespan methods, 'pesto "
                        "coarsen_to=200', 'pesto engine=cpsat', ip, dp, latency-ls) or all")
    add_shared(parser, nodes=20000, rows=None, help={"rows": "append one JSON row per run to this file"})
    parser.add_argument("--markdown", action="store_true", help="print the table of --rows (after any runs)")
    parser.add_argument("--no-run", action="store_true", help="with --markdown: only render --rows")


def run(args) -> None:
    rows: list[dict] = []
    if not args.no_run:
        labels = [*MAKESPAN, *VARIANTS, "ip", "dp", "latency-ls"] if args.methods == "all" else args.methods.split(",")
        with tempfile.TemporaryDirectory(prefix="bench-time-limits-") as tmp:
            work = Path(tmp)
            graph = work / f"random-dag-{args.nodes}.json"
            subprocess.run([sys.executable, "-m", "dnnplace", "-q", "generate", "random-dag", "--nodes",
                            str(args.nodes), "--seed", "0", "--cluster", "single-host-4-nvlink", "--out",
                            str(graph)], check=True, capture_output=True)
            for label in labels:
                if label in ("ip", "dp"):
                    runs = [(g, label, [], "maxload") for g in TARNAWSKI]  # the file's own devices
                    if label == "dp":
                        runs += [(g, label, ["--cluster", "single-host-4-nvlink"], "maxload") for g in CAPTURED]
                elif label == "latency-ls":
                    runs = [(g, label, ["--cluster", "single-host-4-nvlink"], "latency") for g in CAPTURED]
                else:
                    method, extra = VARIANTS.get(label, (label, []))
                    runs = [(str(graph), method, extra, "makespan")]
                for g, method, extra, problem in runs:
                    row = solve_row(g, method, extra, args.limit, problem, label, work)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if args.rows:
                        append_jsonl(args.rows, row)
    if args.markdown:
        if args.rows and args.rows.exists():
            rows = read_jsonl(args.rows)
        print(f"\nmachine: {os.cpu_count()} CPUs; wall = the whole `dnnplace solve` process\n")
        print(markdown(rows))
