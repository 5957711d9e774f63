"""The level-by-level DP on hierarchical clusters (Tarnawski et al. App. C.3) against the flat DP.

On the small Table 1 layer graphs: the 2x4 and 4x8 presets (network 4x slower than the host copy)
against the flat DP over the same number of accelerators, every value the evaluator's.

    .venv/bin/python -m benchmarks hierarchy
"""

from __future__ import annotations

import argparse
import time

from benchmarks.paths import REPO as ROOT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args) -> None:
    from dnnplace.evaluation.evaluate import maxload
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.hierarchy import hierarchical_cluster
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.hierarchy_dp import hierarchical_dp
    from dnnplace.heuristics.maxload_dp import maxload_dp

    wl = ROOT / "graphs" / "workloads" / "tarnawski" / "throughput-inputs" / "LayerGraphs"
    print(f"{'graph':10} {'preset':6} {'ideals':>6} {'flat DP':>9} {'hier. DP':>9} {'network':>8} {'s':>6}")
    for model in ("bert24", "resnet50"):
        base = load_instance(wl / f"{model}_inference.json")
        g, mem = base.graph, float(base.cluster.memory[0])
        acc = next(k for k in g.kinds if k != "cpu")
        for preset in ("2x4", "4x8"):
            cl = hierarchical_cluster(preset, memory=mem, kind=acc)
            flat = maxload_dp(Instance(g, Cluster.tarnawski(cl.size, 0, mem, acc_kind=acc))).value
            t = time.perf_counter()
            res = hierarchical_dp(Instance(g, cl))
            sec = time.perf_counter() - t
            ev = maxload(res.placement, contiguity="both")
            assert ev.feasible and abs(ev.objective - res.value) <= 1e-9 * max(1.0, res.value)
            print(f"{model:10} {preset:6} {res.ideals:>6} {flat:>9.3f} {res.value:>9.3f} "
                  f"{max(ev.details['network']):>8.3f} {sec:>6.1f}", flush=True)
