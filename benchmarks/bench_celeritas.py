"""Celeritas speed and the "Adjusting is never worse than Order-Place" claim, measured.

``speed``: generated training graphs (``random-dag``, backward pass colocated with the
forward pass) of the paper's sizes (3.8k / 6.3k / 25k / 36k nodes) and 200k nodes on 4 and 8
GPUs over PCIe; columns: the CPD-TOPO order, the fusion DP, the whole fusion (order, DP,
quotient, CCR), the placement (Adjusting Placement on the coarse graph, mapping back,
colocation repair) and their sum, in seconds. Targets (``docs/heuristics.md`` 2.3, 5.6): fusion of
36k nodes with ``R = 200`` under 2 s; the whole method on 200k nodes and 8 GPUs under 60 s.

``claim``: on seeded random instances (graph size, GPUs, memory share, fusion window
drawn), the fifo simulation with congestion of Celeritas against Order-Place; prints
the share where Celeritas is better, equal and worse (Sec. 5.2 says "never worse" step
by step; this is the global picture).

    .venv/bin/python -m benchmarks celeritas speed
    .venv/bin/python -m benchmarks celeritas claim --instances 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.options import add_shared
from benchmarks.rows import write_jsonl
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.heuristics.celeritas import celeritas
from dnnplace.heuristics.fusion import fusion_dp
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.topo_orders import topo_order_by

SIZES = (3810, 6332, 25463, 36352, 200_000)


def _cluster(g, gpus: int) -> Cluster:
    # room for the whole graph on half the GPUs: memory binds, as in the paper's large-batch runs
    return Cluster.single_host(gpus, interconnect="pcie", with_cpu=False,
                               gpu_memory=float(g.memory.sum()) / max(1, gpus // 2))


def speed(args) -> None:
    tiny = random_layered_dag(50, seed=0, kinds=("gpu",), training=True)
    celeritas(tiny, _cluster(tiny, 2))  # compile the numba kernel outside the timings
    print("| nodes | edges | GPUs | order s | DP s | fusion s | placement s | total s | coarse nodes | "
          "CCR before | CCR after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for n in args.sizes:
        g = random_layered_dag(n, seed=1, kinds=("gpu",), training=True)
        for gpus in args.gpus:
            cl = _cluster(g, gpus)
            w, c = nominal_costs(g, cl, "mean")
            t0 = time.perf_counter()
            order = topo_order_by(g, "cpd-topo", w, c)
            t1 = time.perf_counter()
            fusion_dp(g, order, c, R=args.R, M=0.25 * float(cl.memory.min()))
            t2 = time.perf_counter()
            run = celeritas(g, cl, R=args.R)
            total = run.fusion_seconds + run.placement_seconds
            row = {"nodes": g.n, "edges": g.m, "gpus": gpus, "order_s": t1 - t0, "dp_s": t2 - t1,
                   "fusion_s": run.fusion_seconds, "placement_s": run.placement_seconds, "total_s": total,
                   "coarse_nodes": run.fusion.graph.n, "ccr_before": run.fusion.meta["ccr_before"],
                   "ccr_after": run.fusion.meta["ccr_after"]}
            rows.append(row)
            print(f"| {g.n} | {g.m} | {gpus} | {row['order_s']:.2f} | {row['dp_s']:.3f} | {row['fusion_s']:.2f} | "
                  f"{row['placement_s']:.2f} | {total:.2f} | {row['coarse_nodes']} | {row['ccr_before']:.3f} | "
                  f"{row['ccr_after']:.3f} |", flush=True)
    if args.out:
        write_jsonl(args.out, rows)


def claim(args) -> None:
    rng = np.random.default_rng(args.seed)
    better = equal = worse = 0
    ratios = []
    for k in range(args.instances):
        n = int(rng.integers(100, 1500))
        gpus = int(rng.choice([2, 4, 8]))
        share = float(rng.uniform(0.3, 1.5))  # memory of one GPU as a share of the graph's
        g = random_layered_dag(n, seed=int(rng.integers(1 << 30)), kinds=("gpu",), training=bool(k % 2))
        cl = Cluster.single_host(gpus, interconnect="pcie", with_cpu=False, gpu_memory=float(g.memory.sum()) * share)
        R = int(rng.choice([5, 20, 50, 200]))
        ms = []
        for adjust in (True, False):
            run = celeritas(g, cl, R=R, adjust=adjust)
            ms.append(simulate(run.placement, policy="fifo", congestion=True).makespan)
        a, o = ms
        tol = 1e-9 * max(1.0, o)
        better += a < o - tol
        worse += a > o + tol
        equal += abs(a - o) <= tol
        ratios.append(a / o)
    r = np.asarray(ratios)
    print(f"{args.instances} random instances (100-1500 nodes, 2/4/8 GPUs, GPU memory 0.3-1.5x the graph, "
          f"R in 5/20/50/200; fifo simulation with congestion):")
    print(f"Celeritas better than Order-Place on {better}, equal on {equal}, worse on {worse}; "
          f"makespan ratio Celeritas / Order-Place: median {np.median(r):.3f}, min {r.min():.3f}, max {r.max():.3f}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed", help="fusion and placement seconds on generated training graphs")
    add_shared(s, sizes=list(SIZES), gpus=[4, 8], out=None, help={"out": "also write the rows as JSON lines"})
    s.add_argument("--R", type=int, default=200)
    c = sub.add_parser("claim", help="Celeritas against Order-Place on seeded random instances")
    c.add_argument("--instances", type=int, default=200)
    add_shared(c, seed=0)


def run(args) -> None:
    speed(args) if args.cmd == "speed" else claim(args)
