"""FastT's planners on large generated graphs: DPOS and CPOP at 200k operators, OS-DPOS at 10k.

Run from the repository root::

    .venv/bin/python -m benchmarks fastt [--nodes 200000] [--devices 8] [--os-nodes 10000]
        [--os-limit 600] [--seed 0]

Part 1 times DPOS and CPOP (:mod:`dnnplace.heuristics.fastt`) on a random layered DAG
(``random_layered_dag``, ~1.5 edges per node, GPU-only) on one host with ``--devices``
GPUs on NVLink, and the simulator's strict replay of the DPOS order. Target (docs/heuristics.md
5.6, speed targets): DPOS under 60 s at 200k operators and 8 GPUs.

Part 2 runs OS-DPOS on a ``--os-nodes`` training DAG whose forward nodes are ``Conv2D``
/ ``MatMul`` and backward nodes ``Conv2DBackpropInput`` / ``Conv2DBackpropFilter`` in
turn (so most ops have a split rule), at 2, 4 and 8 GPUs, and prints its time, time to
first improvement, DPOS trials and accepted splits beside the paper's Table 4 times for
the same GPU counts (theirs include online profiling and restarts: an upper bound on
the algorithm's own time).
"""

from __future__ import annotations

import argparse
import time

from benchmarks.options import add_shared
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.heuristics.fastt import cpop, dpos
from dnnplace.heuristics.os_dpos import os_dpos

# FastT Table 4: seconds to run Algorithm 2 (with profiling), at 2 / 4 / 8 GPUs
TABLE4 = {
    "Bert-large": (448.9, 470.3, 529.9), "Inception_v3": (28.7, 64.5, 124.8), "Vgg-19": (24.41, 62.74, 118.4),
    "Resnet200": (201.2, 481.9, 792.5), "Lenet": (3.54, 8.71, 11.28), "Alexnet": (4.23, 9.58, 18.46),
    "Transformer": (783.0, 1952.6, 5775.2), "GNMT": (122.31, 259.43, 522.85), "RNNLM": (48.95, 92.31, 174.22),
}


def _training_dag(n: int, seed: int):
    g = random_layered_dag(n, seed=seed, kinds=("gpu",), training=True, colocate_backward=False)
    fwd = ("Conv2D", "MatMul")
    bwd = ("Conv2DBackpropInput", "Conv2DBackpropFilter")
    types = tuple((bwd if g.backward[i] else fwd)[i % 2] for i in range(g.n))
    return g.with_(op_types=types)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, nodes=200_000, devices=8, seed=0)
    parser.add_argument("--os-nodes", type=int, default=10_000)
    parser.add_argument("--os-limit", type=float, default=600.0, help="OS-DPOS time budget per run (s)")


def run(args) -> None:
    g = random_layered_dag(args.nodes, seed=args.seed, kinds=("gpu",))
    cl = Cluster.single_host(args.devices, with_cpu=False)
    print(f"part 1: {g.n} operators, {g.m} edges, {cl.size} GPUs (NVLink)")
    print(f"{'step':<28}{'seconds':>10}{'makespan (ms)':>16}")
    for name, fn in (("dpos", dpos), ("cpop", cpop)):
        t0 = time.perf_counter()
        s = fn(g, cl)
        dt = time.perf_counter() - t0
        print(f"{name:<28}{dt:>10.2f}{s.planner_estimate:>16.3f}")
        if name == "dpos":
            t0 = time.perf_counter()
            ms = simulate(s.placement, policy="order", priorities=s.priorities, congestion=True).makespan
            print(f"{'simulate order (congestion)':<28}{time.perf_counter() - t0:>10.2f}{ms:>16.3f}")

    h = _training_dag(args.os_nodes, args.seed)
    print(f"\npart 2: OS-DPOS on a {h.n}-operator training DAG ({h.m} edges), budget {args.os_limit:g} s per run")
    print(f"{'GPUs':>4}{'seconds':>10}{'first impr. (s)':>17}{'trials':>8}{'splits':>8}{'DPOS ms':>10}"
          f"{'OS-DPOS ms':>12}   paper Table 4 (s, incl. profiling): min / max over models")
    for j, k in enumerate((2, 4, 8)):
        r = os_dpos(h, Cluster.single_host(k, with_cpu=False), time_limit=args.os_limit)
        first = "-" if r.time_to_first_improvement is None else f"{r.time_to_first_improvement:.2f}"
        col = [v[j] for v in TABLE4.values()]
        print(f"{k:>4}{r.seconds:>10.2f}{first:>17}{r.trials:>8}{len(r.splits):>8}{r.dpos_estimate:>10.3f}"
              f"{r.planner_estimate:>12.3f}   {min(col):g} / {max(col):g}"
              + ("  (budget reached)" if r.timed_out else ""))
