"""Pesto benchmarks: coarsening speed and ILP time-to-gap.

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_pesto.py coarsen [--n 200000] [--target 200]
    .venv/bin/python benchmarks/bench_pesto.py ilp [--sizes 50 100 200] [--gpus 2 4] [--time-limit 60]
    .venv/bin/python benchmarks/bench_pesto.py tarnawski [--time-limit 30]

``coarsen``: a generated 200k-node layered DAG (``random-dag``, inference) coarsened to
200 nodes with Theorem 3.5 batch merging; prints rounds and seconds (target < 10 s).

``ilp``: the Pesto ILP on coarse versions (50/100/200 nodes) of an RNNLM-like LSTM grid
(4 layers x 20 steps, hidden 1024; 766 nodes) with 2 and 4 GPUs (NVLink), HiGHS on one
thread, with and without the list-scheduling warm start; prints model size, build time
and the time at which the solver's gap first reached 5% and 1% (from the HiGHS
incumbent/bound trace; "-" = not within the limit). Rows are appended as JSON to
``results/pesto/bench.jsonl``.

``tarnawski``: the same ILP on bundled Tarnawski operator graphs (their edges carry
tensor ``size`` in bytes): the explicit host-transfer ``cost`` of each edge is dropped
(``edge_cost = NaN``) so the GPU cluster's link model applies, and the ``acc`` kind is
renamed ``gpu`` to run on ``Cluster.single_host``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from dnnplace.formulations.driver import solve_model  # noqa: E402
from dnnplace.formulations.pesto import memory_ok, safe_horizon  # noqa: E402
from dnnplace.formulations.pesto_ip import PestoOptions, build_pesto_model, canonical_relabel, warm_start_values  # noqa: E402
from dnnplace.graphs.cluster import Cluster  # noqa: E402
from dnnplace.graphs.generators import generate  # noqa: E402
from dnnplace.graphs.placement import Placement  # noqa: E402
from dnnplace.graphs.simulate import simulate  # noqa: E402
from dnnplace.heuristics.coarsening import coarsen  # noqa: E402
from dnnplace.heuristics.list_scheduling import best_list_schedule  # noqa: E402
from dnnplace.registry import SolverOptions  # noqa: E402

OUT = REPO / "results" / "pesto" / "bench.jsonl"


def bench_coarsen(n: int, target: int) -> None:
    t0 = time.perf_counter()
    g = generate("random-dag", n=n, seed=0)
    t_gen = time.perf_counter() - t0
    cl = Cluster.single_host(2)
    t0 = time.perf_counter()
    c = coarsen(g, cl, target=target)
    dt = time.perf_counter() - t0
    print("| graph | nodes | edges | target | coarse nodes | rounds | seconds |")
    print("|---|---|---|---|---|---|---|")
    print(f"| random-dag (generated in {t_gen:.1f} s) | {g.n} | {g.m} | {target} | {c.graph.n} | "
          f"{len(c.meta['rounds'])} | {dt:.2f} |")
    _append({"bench": "coarsen", "n": g.n, "m": g.m, "target": target, "coarse_n": c.graph.n,
             "rounds": len(c.meta["rounds"]), "seconds": dt})


def _time_to(trace, gap: float) -> float | None:
    for t, inc, bnd in trace:
        if inc is not None and bnd is not None and abs(inc - bnd) <= gap * max(abs(inc), 1e-12):
            return t
    return None


def _ilp_row(cg, cl, time_limit: float, warm: bool, label: str) -> dict:
    ls, ms, _ = best_list_schedule(cg, cl)
    feasible = memory_ok(ls.placement)
    horizon = ms if feasible else safe_horizon(cg, cl)
    t0 = time.perf_counter()
    model = build_pesto_model(cg, cl, horizon=horizon, options=PestoOptions())
    build = time.perf_counter() - t0
    ws = None
    if warm and feasible:
        dev0 = canonical_relabel(cg, cl, ls.placement.device)
        sim = simulate(Placement(cg, cl, dev0), policy="order", priorities=ls.priorities)
        xs = {int(e): float(s) for e, s in zip(sim.xfer_edge, sim.xfer_start)}
        ws = warm_start_values(model, dev0, sim.start, xs)
    out = solve_model(model, SolverOptions(time_limit=time_limit, rel_gap=0.01, threads=1), warm_start=ws,
                      build_seconds=build)
    row = {"bench": "ilp", "graph": label, "nodes": cg.n, "edges": cg.m, "devices": cl.size, "warm": warm,
           "vars": out.n_vars, "constraints": out.n_cons, "binaries": out.n_binaries, "build_s": build,
           "handoff_s": out.handoff_seconds, "solve_s": out.solve_seconds, "status": out.status,
           "incumbent": out.incumbent, "bound": out.bound, "gap": out.gap, "heuristic": ms,
           "t5": _time_to(out.trace, 0.05), "t1": _time_to(out.trace, 0.01)}
    if out.status == "optimal" and row["t1"] is None:
        row["t1"] = out.solve_seconds
    if out.status == "optimal" and row["t5"] is None:
        row["t5"] = out.solve_seconds
    return row


def _print_rows(rows) -> None:
    f = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
    print("| graph | nodes | GPUs | warm | binaries | rows | build s | solve s | status | heuristic | incumbent | "
          "bound | gap | t(5%) s | t(1%) s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        inc = "-" if r["incumbent"] is None else f"{r['incumbent']:.3f}"
        bnd = "-" if r["bound"] is None else f"{r['bound']:.3f}"
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        print(f"| {r['graph']} | {r['nodes']} | {r['devices']} | {r['warm']} | {r['binaries']} | {r['constraints']} | "
              f"{r['build_s'] + r['handoff_s']:.1f} | {r['solve_s']:.1f} | {r['status']} | {r['heuristic']:.3f} | "
              f"{inc} | {bnd} | {gap} | {f(r['t5'])} | {f(r['t1'])} |", flush=True)


def bench_ilp(sizes, gpus, time_limit: float, warm_modes=(True, False)) -> None:
    g = generate("lstm", layers=4, steps=20, hidden=1024, kinds=["gpu"])
    rows = []
    for n_gpu in gpus:
        cl = Cluster.single_host(n_gpu, with_cpu=False)
        for size in sizes:
            cg = coarsen(g, cl, target=size).graph
            for warm in warm_modes:
                row = _ilp_row(cg, cl, time_limit, warm, f"{g.name}@{size}")
                rows.append(row)
                _append(row)
                _print_rows([row])
    print()
    _print_rows(rows)


def bench_tarnawski(time_limit: float) -> None:
    from dnnplace.graphs.io import load_instance
    rows = []
    for name in ("throughput-inputs/LayerGraphs/gnmt_inference.json",
                 "throughput-inputs/LayerGraphs/bert24_inference.json"):
        g = load_instance(REPO / "graphs" / "workloads" / "tarnawski" / name).graph
        g = g.with_(edge_cost=np.full(g.m, np.nan), kinds=tuple("gpu" if k == "acc" else k for k in g.kinds))
        cl = Cluster.single_host(2)
        cg = coarsen(g, cl, target=min(g.n, 60)).graph
        row = _ilp_row(cg, cl, time_limit, True, Path(name).stem)
        rows.append(row)
        _append(row)
    _print_rows(rows)


def _append(row: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as fh:
        fh.write(json.dumps(row, default=float) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("coarsen")
    a.add_argument("--n", type=int, default=200_000)
    a.add_argument("--target", type=int, default=200)
    b = sub.add_parser("ilp")
    b.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200])
    b.add_argument("--gpus", type=int, nargs="+", default=[2, 4])
    b.add_argument("--time-limit", type=float, default=60.0)
    b.add_argument("--warm-only", action="store_true", help="skip the runs without a warm start")
    c = sub.add_parser("tarnawski")
    c.add_argument("--time-limit", type=float, default=30.0)
    args = ap.parse_args(argv)
    if args.cmd == "coarsen":
        bench_coarsen(args.n, args.target)
    elif args.cmd == "ilp":
        bench_ilp(args.sizes, args.gpus, args.time_limit, (True,) if args.warm_only else (True, False))
    else:
        bench_tarnawski(args.time_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
