"""Capture benchmark: per zoo model, capture time, nodes and edges after merging views,
FLOPs, total bytes, CCR (Celeritas Eq. 1 on a 2-GPU NVLink-2 host) and the op-time shape
(Pesto Table 1 classes: < 10 us, 10-100 us, > 100 us, roofline V100); then the time to tile
one block of each tileable family to 200k operators.

    .venv/bin/python benchmarks/bench_capture.py [--models resnet-50,bert-large] [--quick]

``--quick`` captures small variants (fewer layers) so the table finishes in about a minute.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

SMALL = {"resnet-50": {}, "inception-v3": {"batch": 8}, "bert-large": {"layers": 2}, "gnmt-4": {"seq": 8},
         "rnnlm-2x2048": {"seq": 8}, "transformer-base": {"layers": 2}, "nasnet-4x44": {"batch": 8}}


def shape_row(g, cluster) -> dict:
    from dnnplace.graphs.stats import ccr
    t_us = g.compute[:, 0] * 1e3
    work = g.roles is None or np.array(g.roles) != "param"
    t = t_us[work]
    return {"nodes": g.n, "edges": g.m, "lt10": float((t < 10).mean()),
            "10to100": float(((t >= 10) & (t < 100)).mean()),
            "gt100": float((t >= 100).mean()), "bytes_GB": float(g.edge_bytes.sum() / 1e9),
            "ccr": float(ccr(g, comm=cluster)), "compute_ms": float(g.compute.sum())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(SMALL))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tile-to", type=int, default=200_000)
    args = ap.parse_args()
    from dnnplace.graphs import zoo
    from dnnplace.graphs.capture import capture
    from dnnplace.graphs.capture.tiling import capture_block, tile
    from dnnplace.graphs.presets import cluster_preset
    cl = cluster_preset("single-host-2-nvlink2")
    print(f"{'model':<22} {'capture s':>9} {'nodes':>7} {'edges':>7} {'GFLOP':>9} {'edge GB':>8} {'CCR':>7} "
          f"{'<10us':>6} {'10-100':>6} {'>100us':>6}")
    for name in args.models.split(","):
        kw = SMALL.get(name, {}) if args.quick else {}
        model, inputs, loss = zoo.build(name, **kw)
        t0 = time.perf_counter()
        g = capture(model, inputs, loss, name=name).graph
        dt = time.perf_counter() - t0
        r = shape_row(g, cl)
        print(f"{name:<22} {dt:>9.1f} {r['nodes']:>7} {r['edges']:>7} {g.meta['capture']['flops'] / 1e9:>9.1f} "
              f"{r['bytes_GB']:>8.2f} {r['ccr']:>7.3f} {r['lt10']:>6.0%} {r['10to100']:>6.0%} {r['gt100']:>6.0%}")
    print()
    print(f"{'block':<16} {'block nodes':>11} {'repeats':>8} {'tiled nodes':>11} {'edges':>8} {'tile s':>7}")
    for fam in ("bert-large", "gpt2", "transformer-base", "rnnlm-16x1024", "nasnet-6x168"):
        m, x = zoo.block(fam)
        b = capture_block(m, x, name=fam)
        reps = max(1, args.tile_to // len(b.body))
        t0 = time.perf_counter()
        g = tile(b, reps, family=zoo.entry(fam).family)
        dt = time.perf_counter() - t0
        print(f"{fam:<16} {len(b.body):>11} {reps:>8} {g.n:>11} {g.m:>8} {dt:>7.2f}")


if __name__ == "__main__":
    main()
