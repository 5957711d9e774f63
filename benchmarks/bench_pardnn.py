"""PARDNN and its clustering baselines: placement time against graph size.

``speed``: generated training graphs (``random-dag``, backward pass colocated with the
forward pass) of 10k-200k nodes on 2-8 GPUs. PARDNN runs in full (slicing, LFLAM
mapping, memory heuristic I) with a memory limit that binds: every GPU holds
``(busiest Step-1 emulated peak) / 0.9 * share``, so the busiest device overflows its
90 % target and heuristic I has to move nodes. Columns: Step 1 stages, heuristic I,
total, emulations, share of nodes moved; then Mayer et al.'s CP and DSC + GLB on the same
graph. Target (``docs/heuristics.md`` 5.6): the full method on 200k nodes and 8 GPUs under 60 s;
PARDNN reports 18 s (Word-RNN, 2 GPUs) to 2 min (TRN-2, 16 GPUs) on a laptop i7-7600U.

``lc``: linear clustering (+ GLB) is O(V (V + E)) (PARDNN Table 6; 12 h on the 205k-node
TRN in the paper); it is timed on small graphs, a ``a * V * (V + E)`` fit extrapolates
it, and the size it handles in 60 s is printed (the ``lc-glb`` method refuses graphs
above its ``max_nodes`` option without a time limit).

    .venv/bin/python -m benchmarks pardnn speed
    .venv/bin/python -m benchmarks pardnn speed --sizes 200000 --gpus 8
    .venv/bin/python -m benchmarks pardnn lc
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.machine import machine_load
from benchmarks.options import add_shared
from benchmarks.rows import write_jsonl
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.heuristics.clustering import cp_mayer, dsc_glb, lc_glb
from dnnplace.heuristics.pardnn import pardnn

SIZES = (10_000, 50_000, 100_000, 200_000)


def speed(args) -> None:
    print(f"machine: {machine_load()}")
    print("| nodes | edges | GPUs | slicing s | mapping s | memory I s | PARDNN total s | emulations | moved % | "
          "fits 90 % | CP s | DSC+GLB s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for n in args.sizes:
        g = random_layered_dag(n, seed=1, kinds=("gpu",), training=True)
        for gpus in args.gpus:
            free = pardnn(g, Cluster.single_host(gpus, with_cpu=False), memory="none")
            peak = max(free.extra["emulated_peak"].values())
            cl = Cluster.single_host(gpus, with_cpu=False, gpu_memory=peak / 0.9 * args.share)
            t0 = time.perf_counter()
            r = pardnn(g, cl, memory="I", time_limit=args.time_limit)
            total = time.perf_counter() - t0
            t1 = time.perf_counter()
            cp_mayer(g, cl)
            t_cp = time.perf_counter() - t1
            t1 = time.perf_counter()
            dsc_glb(g, cl)
            t_dsc = time.perf_counter() - t1
            x = r.extra
            row = {"nodes": g.n, "edges": g.m, "gpus": gpus, "slicing_s": x["slicing_seconds"],
                   "mapping_s": x["mapping_seconds"], "memory_s": x["memory_seconds"], "total_s": total,
                   "emulations": x["emulations"], "moved_share": x["moved_share"],
                   "success": x["memory_i_success"], "cp_s": t_cp, "dsc_glb_s": t_dsc}
            rows.append(row)
            print(f"| {g.n} | {g.m} | {gpus} | {row['slicing_s']:.1f} | {row['mapping_s']:.1f} | "
                  f"{row['memory_s']:.1f} | {total:.1f} | {row['emulations']} | {100 * row['moved_share']:.2f} | "
                  f"{'yes' if row['success'] else 'no'} | {t_cp:.1f} | {t_dsc:.1f} |", flush=True)
    print(f"machine after: {machine_load()}")
    if args.out:
        write_jsonl(args.out, rows)


def lc(args) -> None:
    print(f"machine: {machine_load()}")
    print("| nodes | edges | LC+GLB s | clusters |")
    print("|---|---|---|---|", flush=True)
    xs, ys = [], []
    cl = Cluster.single_host(8, with_cpu=False)
    for n in args.lc_sizes:
        g = random_layered_dag(n, seed=1, kinds=("gpu",), training=True)
        t0 = time.perf_counter()
        r = lc_glb(g, cl)
        dt = time.perf_counter() - t0
        xs.append(g.n * (g.n + g.m))
        ys.append(dt)
        print(f"| {g.n} | {g.m} | {dt:.2f} | {r.extra['clusters']} |", flush=True)
    a = float(np.dot(xs, ys) / np.dot(xs, xs))  # least squares through the origin
    big = random_layered_dag(200_000, seed=1, kinds=("gpu",), training=True)
    est = a * big.n * (big.n + big.m)
    ratio = big.m / big.n
    limit = int((60.0 / a / (1 + ratio)) ** 0.5)
    print(f"fit: LC+GLB seconds = {a:.3g} * V * (V + E); 200k nodes ({big.m} edges): about {est / 3600:.1f} h "
          f"(PARDNN reports about 12 h for LC on the 205k-node TRN); 60 s is reached near {limit} nodes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed", help="PARDNN, CP and DSC + GLB seconds on generated training graphs")
    add_shared(s, sizes=list(SIZES), gpus=[2, 8], time_limit=300.0, out=None,
               help={"out": "also write the rows as JSON lines"})
    s.add_argument("--share", type=float, default=0.99,
                   help="GPU memory as a share of the busiest Step-1 peak / 0.9 (below 1: memory binds)")
    c = sub.add_parser("lc", help="linear clustering + GLB on small graphs, extrapolated")
    c.add_argument("--lc-sizes", type=int, nargs="*", default=[1000, 2000, 4000, 8000])


def run(args) -> None:
    speed(args) if args.cmd == "speed" else lc(args)
