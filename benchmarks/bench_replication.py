"""Replicated stages (Tarnawski et al. App. C.2): the exact DP against PipeDream's replicated splits.

On the Table 1 layer graphs: the exact DP over ideals with the replication dimension
against PipeDream's replicated splits (its DP over the contracted chain of layers,
:mod:`dnnplace.heuristics.pipedream`), each without and with replication, every value the
independent evaluator's score.

The all-reduce costs ``sync`` per byte of a stage's weights (the nodes' ``size``);
the default 1e-7 ms/B is 10 GB/s. Clusters as in Table 1 (``maxFPGAs`` accelerators,
``maxCPUs`` CPUs); a stage may be replicated on up to all accelerators.

    .venv/bin/python -m benchmarks replication               # bert24, resnet50, gnmt
    .venv/bin/python -m benchmarks replication --all --sync 1e-8
"""

from __future__ import annotations

import argparse
import time

from benchmarks.paths import REPO as ROOT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sync", type=float, default=1e-7, help="all-reduce ms per byte of weights")
    parser.add_argument("--all", action="store_true", help="also InceptionV3 (about 10 min)")


def run(args) -> None:
    from dnnplace.evaluation.evaluate import maxload
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.maxload_dp import maxload_dp
    from dnnplace.heuristics.pipedream import pipedream_split

    models = ["bert24", "resnet50", "gnmt"] + (["inceptionv3"] if args.all else [])
    wl = ROOT / "graphs" / "workloads" / "tarnawski" / "throughput-inputs" / "LayerGraphs"
    print(f"{'graph':12} {'k':>2} {'DP':>9} {'DP repl.':>9} {'PipeDream':>9} {'PD repl.':>9} {'DP s':>6}  "
          f"replica groups (DP | PipeDream)", flush=True)
    for model in models:
        inst = load_instance(wl / f"{model}_inference.json")
        cl = inst.require_cluster()
        k = sum(kd != "cpu" for kd in cl.kinds)
        k = min(k, cl.meta.get("device_limit", {}).get(cl.kinds[0], k))
        t = time.perf_counter()
        dp = maxload_dp(inst).placement
        dpr = maxload_dp(inst, replicas=k, sync_per_byte=args.sync).placement
        sec = time.perf_counter() - t
        pd, _ = pipedream_split(inst)
        pdr, _ = pipedream_split(inst, replicas=k, sync_per_byte=args.sync)
        vals = [maxload(p, contiguity="both") for p in (dp, dpr, pd, pdr)]
        assert all(v.feasible for v in vals), [v.violations for v in vals]

        def groups(p):
            return [len(g) for g in p.replication.groups] if p.replication is not None else []
        print(f"{model:12} {k:>2} " + " ".join(f"{v.objective:>9.3f}" for v in vals) +
              f" {sec:>6.1f}  {groups(dpr)} | {groups(pdr)}", flush=True)
