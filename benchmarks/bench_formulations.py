"""Build and solve timings of the Tarnawski IPs, and the Table 1 / Table 4 reproductions.

Usage (from the repository root)::

    .venv/bin/python -m benchmarks formulations build [--graph PATH]
    .venv/bin/python -m benchmarks formulations table1 --time-limit 120 [--inputs a.json b.json]
    .venv/bin/python -m benchmarks formulations table4 --time-limit 120 [--inputs ...]
    .venv/bin/python -m benchmarks formulations report [--min-limit 1200]

``build`` prints Pyomo build time, HiGHS hand-off time and model size of both models
for the largest workload (BERT-12 training op graph, 2012 nodes, 7 devices by default).
``table1`` solves the contiguous max-load IP with HiGHS (1% gap, as the paper's Gurobi
runs) with and without a greedy warm start and prints paper value, ours, gap and the
time at which the incumbent first reached the paper's value (from the solver trace).
``table4`` solves the latency IP (``q = 1``) with a greedy warm start and prints the
certified gap. Every row is also appended as JSON to ``--out`` (default
``results/formulations/runs.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.options import add_shared
from benchmarks.paths import REPO
from benchmarks.rows import append_jsonl, fmt, read_jsonl
from dnnplace.formulations import latency_ip, maxload_ip
from dnnplace.formulations.solvers.driver import model_size
from dnnplace.graphs.io import load_instance
from dnnplace.registry import SolveRequest, SolverOptions, solve

WORKLOADS = REPO / "graphs" / "workloads" / "tarnawski"
REFERENCE = REPO / "experiments" / "reference" / "tarnawski-neurips20.json"
LARGEST = WORKLOADS / "throughput-inputs" / "OperatorGraphs" / "bert_L-12_training.json"
TABLE1_DEFAULT = [f"throughput-inputs/LayerGraphs/{n}.json" for n in
                  ("bert24_inference", "gnmt_inference", "resnet50_inference", "inceptionv3_inference",
                   "bert24_training", "gnmt_training", "resnet50_training", "inceptionv3_training")] + \
                 [f"throughput-inputs/OperatorGraphs/{n}.json" for n in
                  ("bert_l-3_inference", "bert_l-6_inference", "resnet50_inference", "bert_l-3_training")]
TABLE4_DEFAULT = ["latency-inputs/LayerGraphs/gnmt_inference.json", "latency-inputs/LayerGraphs/bert24_inference.json",
                  "latency-inputs/OperatorGraphs/bert_l-3_inference.json",
                  "latency-inputs/LayerGraphs/resnet50_inference.json"]


def bench_build(path: Path) -> None:
    inst = load_instance(path)
    print(f"{path.name}: {inst.graph.n} nodes, {inst.graph.m} edges, {inst.cluster.size} devices")
    print(f"{'model':34s} {'build s':>8s} {'handoff s':>9s} {'vars':>8s} {'binaries':>8s} {'cons':>8s}")
    import highspy  # noqa: F401 - hand-off timing below
    from pyomo.contrib.solver.common.factory import SolverFactory

    cases = [("maxload contiguous (both)", lambda: maxload_ip.build_maxload_ip(
                 inst, maxload_ip.MaxLoadOptions(contiguity="both"))),
             ("maxload non-contiguous", lambda: maxload_ip.build_maxload_ip(
                 inst, maxload_ip.MaxLoadOptions(contiguity="none"))),
             ("latency q=1", lambda: latency_ip.build_latency_ip(inst, latency_ip.LatencyOptions(1))),
             ("latency q=2", lambda: latency_ip.build_latency_ip(inst, latency_ip.LatencyOptions(2)))]
    for name, build in cases:
        t0 = time.perf_counter()
        m = build()
        tb = time.perf_counter() - t0
        t0 = time.perf_counter()
        SolverFactory("highs").set_instance(m)
        th = time.perf_counter() - t0
        nv, nc, nb = model_size(m)
        print(f"{name:34s} {tb:8.2f} {th:9.2f} {nv:8d} {nb:8d} {nc:8d}")


def _reference() -> dict:
    return json.loads(REFERENCE.read_text())


def _time_to(trace: list, target: float) -> float | None:
    for t, inc, _ in trace:
        if inc is not None and inc <= target * (1 + 5e-4):
            return t
    return None


def bench_table1(inputs: list[str], time_limit: float, out: Path, warm: list[str], contiguity: str = "both") -> None:
    ref = {r["input"]: r for r in _reference()["table1_throughput"]}
    column = "ip_contiguous" if contiguity != "none" else "ip_noncontiguous"
    print(f"{'input':48s} {'warm':6s} {'paper':>8s} {'ours':>8s} {'bound':>8s} {'gap%':>6s} "
          f"{'t_paper s':>9s} {'solve s':>8s} {'build s':>7s} status")
    for rel in inputs:
        inst = load_instance(WORKLOADS / rel)
        paper = ref[rel]["tps"][column]
        for ws in warm:
            req = SolveRequest("maxload", contiguity=contiguity, warm_start=None if ws == "none" else ws,
                               solver=SolverOptions("highs", time_limit=time_limit, rel_gap=0.01, threads=1))
            r = solve(inst, "ip", req)
            tp = _time_to(r.trace, paper)
            row = {"table": 1, "input": rel, "contiguity": contiguity, "warm_start": ws, "paper": paper,
                   "ours": r.objective,
                   "bound": r.bound, "gap": r.gap, "time_to_paper": tp, "solve_seconds": r.solve_seconds,
                   "build_seconds": r.build_seconds, "status": r.status, "termination": r.termination,
                   "time_limit": time_limit, "nodes": r.extra.get("nodes"), "warm_note": r.extra.get("warm_start"),
                   "start_value": r.extra.get("warm_start_objective")}
            _print_row(rel, ws, paper, r, tp)
            append_jsonl(out, row)


def _warm_label(warm: str) -> str:
    """``dp`` for a method name; ``latency-ls`` for ``.../{graph}_latency-ls.json``."""
    return Path(warm).stem.rsplit("_", 1)[-1] if warm.endswith(".json") else warm


def bench_table4(inputs: list[str], time_limit: float, out: Path, q: int, warm: str = "greedy") -> None:
    ref = {r["input"]: r for r in _reference()["table4_latency"]}
    print(f"{'input':48s} {'warm':6s} {'paper':>8s} {'ours':>8s} {'bound':>8s} {'gap%':>6s} "
          f"{'t_paper s':>9s} {'solve s':>8s} {'build s':>7s} status")
    for rel in inputs:
        inst = load_instance(WORKLOADS / rel)
        paper = ref[rel]["latency"]["ip"]
        req = SolveRequest("latency", warm_start=warm.format(graph=inst.graph.name), params={"subgraphs_per_device": q},
                           solver=SolverOptions("highs", time_limit=time_limit, rel_gap=0.01, threads=1))
        r = solve(inst, "ip", req)
        tp = _time_to(r.trace, paper)
        _print_row(rel, _warm_label(warm), paper, r, tp)
        row = {"table": 4, "input": rel, "q": q, "warm_start": _warm_label(warm), "paper": paper, "ours": r.objective,
               "bound": r.bound, "gap": r.gap, "time_to_paper": tp, "solve_seconds": r.solve_seconds,
               "build_seconds": r.build_seconds, "status": r.status, "termination": r.termination,
               "time_limit": time_limit, "start_value": r.extra.get("warm_start_objective"),
               "paper_certified_gap": ref[rel].get("ip_certified_gap"), "warm_note": r.extra.get("warm_start")}
        append_jsonl(out, row)


def _print_row(rel, ws, paper, r, tp) -> None:
    f = fmt
    print(f"{rel:48s} {ws:6s} {paper:8.2f} {f(r.objective):>8s} {f(r.bound):>8s} "
          f"{f(None if r.gap is None else 100 * r.gap, 1):>6s} {f(tp, 1):>9s} {f(r.solve_seconds, 1):>8s} "
          f"{f(r.build_seconds):>7s} {r.status}", flush=True)


def report(runs: Path, min_limit: float = 0.0) -> str:
    """Markdown tables (Table 1 and Table 4 rows) from the stored runs whose time limit
    is at least ``min_limit`` seconds (``1200`` selects the paper-budget runs)."""
    rows = [r for r in read_jsonl(runs) if r["time_limit"] >= min_limit]
    f = fmt
    out = []
    for table, cont, title in ((1, "both", "Table 1, IP contiguous (max-load / TPS, ms)"),
                               (1, "none", "Table 1, IP non-contiguous (max-load / TPS, ms)"),
                               (4, None, "Table 4, IP latency, q = 1 (ms)")):
        sel = [r for r in rows if r["table"] == table and r.get("contiguity", "both" if table == 1 else None) == cont]
        if not sel:
            continue
        out += [f"### {title}", "",
                "| input | warm start | start | paper | ours | diff % | bound | certified gap % | time to paper (s) "
                "| solve (s) | limit (s) | status |", "|" + "---|" * 12]
        for r in sel:
            diff = None if r["ours"] is None else 100 * (r["ours"] - r["paper"]) / r["paper"]
            out.append(f"| {r['input']} | {r['warm_start']} | {f(r.get('start_value'))} | {r['paper']:.2f} | "
                       f"{f(r['ours'])} | {f(diff)} | "
                       f"{f(r['bound'])} | {f(None if r['gap'] is None else 100 * r['gap'], 1)} | "
                       f"{f(r['time_to_paper'], 1)} | {f(r['solve_seconds'], 1)} | {r['time_limit']:.0f} | "
                       f"{r['status']} |")
        out.append("")
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=("build", "table1", "table4", "report"))
    parser.add_argument("--graph", default=str(LARGEST))
    parser.add_argument("--inputs", nargs="*")
    add_shared(parser, time_limit=120.0, out=REPO / "results" / "formulations" / "runs.jsonl",
               help={"out": "the JSON lines every row is appended to (report: read from)"})
    parser.add_argument("--warm", nargs="*", default=["greedy", "none"],
                        help="method names, 'none', or (table4) a placement file; '{graph}' in it is the graph's name")
    parser.add_argument("--q", type=int, default=1)
    parser.add_argument("--contiguity", default="both", help="table1: both (IP contiguous) or none (non-contiguous)")
    parser.add_argument("--min-limit", type=float, default=0.0,
                        help="report: only runs with at least this time limit")


def run(a) -> None:
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.what == "build":
        bench_build(Path(a.graph))
    elif a.what == "table1":
        bench_table1(a.inputs or TABLE1_DEFAULT, a.time_limit, out, a.warm, a.contiguity)
    elif a.what == "report":
        print(report(out, a.min_limit))
    else:
        bench_table4(a.inputs or TABLE4_DEFAULT, a.time_limit, out, a.q, (a.warm or ["greedy"])[0])
