"""PARDNN and its clustering baselines: placement time against graph size.

``speed``: generated training graphs (``random-dag``, backward pass colocated with the
forward pass) of 10k-200k nodes on 2-8 GPUs. PARDNN runs in full (slicing, LFLAM
mapping, memory heuristic I) with a memory limit that binds: every GPU holds
``(busiest Step-1 emulated peak) / 0.9 * share``, so the busiest device overflows its
90 % target and heuristic I has to move nodes. Columns: Step 1 stages, heuristic I,
total, emulations, share of nodes moved; then Mayer et al.'s CP and DSC + GLB on the same
graph. Target (``HEURISTICS.md`` 5): the full method on 200k nodes and 8 GPUs under 60 s;
PARDNN reports 18 s (Word-RNN, 2 GPUs) to 2 min (TRN-2, 16 GPUs) on a laptop i7-7600U.

``lc``: linear clustering (+ GLB) is O(V (V + E)) (PARDNN Table 6; 12 h on the 205k-node
TRN in the paper); it is timed on small graphs, a ``a * V * (V + E)`` fit extrapolates
it, and the size it handles in 60 s is printed (the ``lc-glb`` method refuses graphs
above its ``max_nodes`` option without a time limit).

    .venv/bin/python benchmarks/bench_pardnn.py speed
    .venv/bin/python benchmarks/bench_pardnn.py speed --sizes 200000 --gpus 8
    .venv/bin/python benchmarks/bench_pardnn.py lc
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dnnplace.graphs.cluster import Cluster  # noqa: E402
from dnnplace.graphs.generators import random_layered_dag  # noqa: E402
from dnnplace.heuristics.clustering import cp_mayer, dsc_glb, lc_glb  # noqa: E402
from dnnplace.heuristics.pardnn import pardnn  # noqa: E402

SIZES = (10_000, 50_000, 100_000, 200_000)


def _load() -> str:
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except OSError:
        return "load unknown"


def speed(args) -> None:
    print(f"machine: {_load()}")
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
    print(f"machine after: {_load()}")
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


def lc(args) -> None:
    print(f"machine: {_load()}")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    s.add_argument("--gpus", type=int, nargs="*", default=[2, 8])
    s.add_argument("--share", type=float, default=0.99,
                   help="GPU memory as a share of the busiest Step-1 peak / 0.9 (below 1: memory binds)")
    s.add_argument("--time-limit", type=float, default=300.0)
    s.add_argument("--out", default=None, help="also write the rows as JSON lines")
    c = sub.add_parser("lc")
    c.add_argument("--lc-sizes", type=int, nargs="*", default=[1000, 2000, 4000, 8000])
    args = ap.parse_args()
    speed(args) if args.cmd == "speed" else lc(args)


if __name__ == "__main__":
    main()
