"""Foundation chain on a giant generated graph: load, validate, max-load, simulate.

Run from the repository root::

    .venv/bin/python -m benchmarks foundation [--nodes 200000] [--devices 8] [--seed 0]

Generates a random layered DAG (``dnnplace.graphs.generators.random_layered_dag``, ~1.5 edges per
node), writes it as native JSON, then times each step of the evaluation chain on a
random placement over a single host with ``--devices`` GPUs on NVLink (congestion on),
and every simulator policy with congestion on and off. Targets (set with this benchmark
on 2026-11-21; results/README.md, 'Foundation speed'): the whole chain load + validate +
maxload + simulate under 10 s, ``simulate`` alone under 5 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.machine import timed
from benchmarks.options import add_shared
from dnnplace.evaluation.evaluate import maxload, validate
from dnnplace.evaluation.simulate import POLICIES, simulate, validate_schedule
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance, save_instance
from dnnplace.graphs.placement import Placement


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, nodes=200_000, devices=8, seed=0)


def run(args) -> None:
    rows: list[tuple[str, float]] = []
    g = timed("generate", rows, random_layered_dag, args.nodes, seed=args.seed, kinds=("gpu",))
    cluster = Cluster.single_host(args.devices, with_cpu=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.json"
        timed("save native JSON", rows, save_instance, Instance(g, cluster), path)
        chain_start = len(rows)
        inst = timed("load (parse + build + topo sort)", rows, load_instance, path)
    g = inst.graph
    p = Placement(g, inst.cluster, np.random.default_rng(args.seed).integers(0, args.devices, g.n))
    timed("validate (memory, colocation, contiguity)", rows, validate, p, contiguity="all")
    timed("maxload (pipedream)", rows, maxload, p)
    res = timed("simulate (fifo, congestion)", rows, simulate, p, policy="fifo", congestion=True)
    chain = sum(t for _, t in rows[chain_start:])
    timed("validate_schedule", rows, validate_schedule, res.schedule, congestion=True, transfers=res)
    print(f"graph: {g.n} nodes, {g.m} edges, depth {int(g.level.max()) + 1}; {args.devices} GPUs; "
          f"{res.n_transfers} transfers; makespan {res.makespan:.1f} {g.unit}\n")
    print(f"| {'step':44s} | seconds |\n|{'-' * 46}|---------|")
    for label, t in rows:
        print(f"| {label:44s} | {t:7.2f} |")
    print(f"| {'chain: load+validate+maxload+simulate':44s} | {chain:7.2f} |")
    print("\n| policy        | congestion | seconds | makespan |\n|---------------|------------|---------|----------|")
    prio = res.schedule.priorities()
    for policy in POLICIES:
        for cong in (True, False):
            kw = {"priorities": prio} if policy in ("priority", "order") else {}
            t0 = time.perf_counter()
            r = simulate(p, policy=policy, congestion=cong, **kw)
            print(f"| {policy:13s} | {str(cong):10s} | {time.perf_counter() - t0:7.2f} | {r.makespan:8.1f} |")
