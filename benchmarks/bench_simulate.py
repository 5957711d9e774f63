"""Time :func:`graphs.simulate.simulate` on a large random layered DAG.

Run from the repository root::

    .venv/bin/python benchmarks/bench_simulate.py [--nodes 200000] [--devices 8] [--seed 0]

Prints one row per (policy, congestion): wall seconds of the simulation alone (graph
and placement are built once, outside the timing), the makespan and the number of
transfers. The target (SPEC 2.1 tooling) is < 5 s for 200k nodes / ~300k edges on 8
devices with congestion.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphs.cluster import Cluster  # noqa: E402
from graphs.graph import OpGraph  # noqa: E402
from graphs.placement import Placement  # noqa: E402
from graphs.simulate import simulate  # noqa: E402

__all__ = ["layered_dag", "main"]


def layered_dag(n: int, *, edges_per_node: float = 1.5, width: int = 200, seed: int = 0) -> OpGraph:
    """Random layered DAG: ``n`` nodes in layers of ``width``; each non-source node gets
    ``~edges_per_node`` in-edges from the previous 1-3 layers (at least one)."""
    rng = np.random.default_rng(seed)
    layer = np.arange(n) // width
    targets = np.flatnonzero(layer > 0)
    k = rng.poisson(edges_per_node - 1.0, size=targets.size) + 1
    dst = np.repeat(targets, k)
    back = rng.integers(1, 4, size=dst.size)
    src_layer = np.maximum(layer[dst] - back, 0)
    src = src_layer * width + rng.integers(0, width, size=dst.size)
    src = np.minimum(src, dst - 1)
    pairs = np.unique(np.stack([src, dst], axis=1), axis=0)
    compute = rng.lognormal(mean=-2.0, sigma=1.0, size=(n, 1))  # ms
    out_bytes = rng.lognormal(mean=12.0, sigma=1.5, size=n)
    return OpGraph(ids=range(n), kinds=("gpu",), compute=compute, memory=out_bytes,
                   src=pairs[:, 0], dst=pairs[:, 1], edge_bytes=out_bytes[pairs[:, 0]],
                   output_bytes=out_bytes, name=f"layered-{n}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    g = layered_dag(args.nodes, seed=args.seed)
    cl = Cluster.single_host(args.devices, with_cpu=False)
    rng = np.random.default_rng(args.seed + 1)
    pl = Placement(g, cl, rng.integers(0, cl.size, size=g.n))
    _ = (g.topo_order, g.out_ptr, g.in_ptr)  # build cached structures outside the timing
    print(f"graph: {g.n} nodes, {g.m} edges, {cl.size} devices ({cl.name}); "
          f"built in {time.perf_counter() - t0:.2f} s")
    prio = g.topo_position  # a topological order never deadlocks under 'order'
    print(f"{'policy':<14} {'congestion':<10} {'seconds':>8} {'makespan ms':>12} {'transfers':>10}")
    for policy in ("fifo", "critical_path", "priority", "order"):
        for cong in (True, False):
            kw = {"priorities": prio} if policy in ("priority", "order") else {}
            t = time.perf_counter()
            r = simulate(pl, policy=policy, congestion=cong, **kw)
            dt = time.perf_counter() - t
            print(f"{policy:<14} {str(cong):<10} {dt:8.2f} {r.makespan:12.2f} {r.n_transfers:10d}")


if __name__ == "__main__":
    main()
