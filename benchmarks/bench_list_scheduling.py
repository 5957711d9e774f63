"""List schedulers (HEFT, ETF, m-TOPO, m-ETF, m-SCT): scheduling time against graph size.

Graphs: generated training DAGs (``random-dag``, backward colocated with forward, GPU
only) and the bundled captured GNMT-4 training graph (``graphs/workloads/captured/
gnmt-4.json``, 3,910 nodes, roofline V100 costs) repeated as disjoint copies up to the
size (memory scaled by 1 / copies, so the total stays one model's 14.2 GB), on
``single-host`` clusters of 4 and 8 GPUs of 16 GB. Each cell is the wall time of one call
of the scheduler (``congestion=True``, the methods' defaults: HEFT and ETF with insertion);
the memory repair pass is included. Cells are ``wall s / CPU s`` (the process's CPU
time: on a shared machine the wall time also counts the other processes' turns).
Target (developers' guide): every scheduler under 60 s on 200k nodes and 8 GPUs.

    .venv/bin/python -m benchmarks list-scheduling
    .venv/bin/python -m benchmarks list-scheduling --sizes 200000 --gpus 8 --graphs random
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.machine import machine_load
from benchmarks.options import add_shared
from benchmarks.paths import REPO
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.io import load_instance
from dnnplace.heuristics.list_scheduling import ALGORITHMS

CAPTURED = REPO / "graphs" / "workloads" / "captured" / "gnmt-4.json"


def copies(g: OpGraph, n: int) -> OpGraph:
    """Disjoint copies of ``g`` up to ``n`` nodes (the last one cut to a prefix of its
    topological order), memory divided by the number of copies."""
    k = -(-n // g.n)
    keep = np.sort(g.topo_order[: n - (k - 1) * g.n])  # nodes of the last, partial copy
    nodes = [np.arange(g.n)] * (k - 1) + [keep]
    offsets = np.cumsum([0] + [len(x) for x in nodes])
    src, dst, eb, co = [], [], [], []
    ngroups = int(g.colocation.max()) + 1
    for t, x in enumerate(nodes):
        pos = np.full(g.n, -1)
        pos[x] = offsets[t] + np.arange(len(x))
        e = np.flatnonzero((pos[g.src] >= 0) & (pos[g.dst] >= 0))
        src.append(pos[g.src[e]])
        dst.append(pos[g.dst[e]])
        eb.append(g.edge_bytes[e])
        c = g.colocation[x]
        co.append(np.where(c >= 0, c + t * ngroups, -1))
    idx = np.concatenate(nodes)
    co = np.concatenate(co)
    return OpGraph(ids=range(int(offsets[-1])), kinds=g.kinds, compute=g.compute[idx], memory=g.memory[idx] / k,
                   src=np.concatenate(src), dst=np.concatenate(dst), edge_bytes=np.concatenate(eb) / k,
                   colocation=co, colocation_labels=tuple(f"c{i}" for i in range(k * ngroups)),
                   name=f"{g.name}-x{k}")


def graph(kind: str, n: int) -> OpGraph:
    if kind == "random":
        return random_layered_dag(n, seed=1, kinds=("gpu",), training=True)
    return copies(load_instance(CAPTURED).graph, n)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, sizes=[10_000, 50_000, 200_000], gpus=[4, 8])
    parser.add_argument("--graphs", nargs="+", default=["random", "gnmt"], choices=["random", "gnmt"])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))


def run(args) -> None:
    print(f"machine: {machine_load()}")
    print("| graph | nodes | edges | GPUs | " + " | ".join(f"{a} wall / CPU s" for a in args.algorithms) + " |")
    print("|---|---|---|---|" + "---|" * len(args.algorithms), flush=True)
    for kind in args.graphs:
        for n in args.sizes:
            g = graph(kind, n)
            for gpus in args.gpus:
                cl = Cluster.single_host(gpus, with_cpu=False)
                cells = []
                for a in args.algorithms:
                    t, c = time.perf_counter(), time.process_time()
                    ALGORITHMS[a](g, cl)
                    cells.append(f"{time.perf_counter() - t:.1f} / {time.process_time() - c:.1f}")
                print(f"| {g.name} | {g.n} | {g.m} | {gpus} | " + " | ".join(cells) + " |", flush=True)
