"""Capture of the model zoo: time, graph size, FLOPs, CCR and op-time shape per model; tiling to 200k operators.

Per zoo model: capture time, nodes and edges after merging views, FLOPs, total bytes, CCR
(Celeritas Eq. 1 on a 2-GPU NVLink-2 host) and the op-time shape (Pesto Table 1 classes:
< 10 us, 10-100 us, > 100 us, roofline V100); then the time to tile one block of each
tileable family to 200k operators, and to assemble whole models of about 200k operators
from their parts.

    .venv/bin/python -m benchmarks capture [--models all|resnet-50,bert-large] [--quick] [--tiled]
        [--rows results/capture/zoo.jsonl] [--skip-tiling]

``--quick`` captures small variants (fewer layers) so the table finishes in about a minute.
``--tiled`` assembles the families with a whole-model program (bert, gpt2, rnnlm, nasnet)
from their parts (equal to a direct capture, ``tests/test_whole.py``) instead of
capturing them whole. ``--rows`` appends one JSON row per model as it finishes (a long
run can be stopped and its rows kept); ``--markdown`` renders such a file as a table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.options import add_shared
from benchmarks.rows import append_jsonl, read_jsonl

SMALL = {"resnet-50": {}, "inception-v3": {"batch": 8}, "bert-large": {"layers": 2}, "gnmt-4": {"seq": 8},
         "rnnlm-2x2048": {"seq": 8}, "transformer-base": {"layers": 2}, "nasnet-4x44": {"batch": 8}}
WHOLE_200K = {"bert-large": {"layers": 1800}, "gpt2": {"layers": 1800}, "rnnlm-16x1024": {"seq": 340},
              "nasnet-4x212": {"cells": 48}}
"""Whole models assembled at about 200k operators."""


def shape_row(g, cluster) -> dict:
    from dnnplace.graphs.stats import ccr
    t_us = g.compute[:, 0] * 1e3
    work = g.roles is None or np.array(g.roles) != "param"
    t = t_us[work]
    return {"nodes": g.n, "edges": g.m, "lt10": float((t < 10).mean()),
            "10to100": float(((t >= 10) & (t < 100)).mean()),
            "gt100": float((t >= 100).mean()), "bytes_GB": float(g.edge_bytes.sum() / 1e9),
            "ccr": float(ccr(g, comm=cluster)), "compute_ms": float(g.compute.sum())}


HEADER = (f"{'model':<26} {'how':<8} {'capture s':>9} {'nodes':>7} {'edges':>7} {'GFLOP':>10} {'edge GB':>8} "
          f"{'CCR':>7} {'<10us':>6} {'10-100':>6} {'>100us':>6}")


def line(r: dict) -> str:
    return (f"{r['model']:<26} {r['how']:<8} {r['seconds']:>9.1f} {r['nodes']:>7} {r['edges']:>7} "
            f"{r['gflop']:>10.1f} {r['bytes_GB']:>8.2f} {r['ccr']:>7.3f} {r['lt10']:>6.0%} {r['10to100']:>6.0%} "
            f"{r['gt100']:>6.0%}")


def markdown(rows: list[dict]) -> str:
    out = ["| model | built by | seconds | nodes | edges | GFLOP | edge GB | CCR | <10us | 10-100us | >100us |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['how']} | {r['seconds']:.1f} | {r['nodes']} | {r['edges']} | "
                   f"{r['gflop']:.1f} | {r['bytes_GB']:.2f} | {r['ccr']:.3f} | {r['lt10']:.0%} | "
                   f"{r['10to100']:.0%} | {r['gt100']:.0%} |")
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, models=list(SMALL), quick=False, rows=None,
               help={"models": "zoo names (commas or spaces), or 'all'",
                     "quick": "capture small variants (fewer layers)",
                     "rows": "append one JSON row per model to this file"})
    parser.add_argument("--tiled", action="store_true")
    parser.add_argument("--markdown", help="print the rows file as a Markdown table and exit")
    parser.add_argument("--skip-tiling", action="store_true")
    parser.add_argument("--tile-to", type=int, default=200_000)


def run(args) -> None:
    if args.markdown:
        print(markdown(read_jsonl(args.markdown)))
        return
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.pytorch.capture import capture, zoo
    from dnnplace.pytorch.capture.tiling import capture_block, tile
    from dnnplace.pytorch.capture.zoo.parts import PROGRAMS, whole_model
    cl = cluster_preset("single-host-2-nvlink2")
    names = sorted(zoo.ZOO) if args.models == ["all"] else args.models
    print(HEADER)
    for name in names:
        kw = SMALL.get(name, {}) if args.quick else {}
        t0 = time.perf_counter()
        if args.tiled and zoo.entry(name).family in PROGRAMS:
            g, how = whole_model(name, **kw), "parts"
            flops = g.meta["assembled"]["flops"]
        else:
            model, inputs, loss = zoo.build(name, **kw)
            g, how = capture(model, inputs, loss, name=name).graph, "capture"
            flops = g.meta["capture"]["flops"]
        r = {"model": name, "how": how, "seconds": time.perf_counter() - t0, "gflop": flops / 1e9,
             **shape_row(g, cl)}
        print(line(r), flush=True)
        if args.rows:
            append_jsonl(args.rows, r)
    if args.skip_tiling:
        return
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
    print()
    print(f"{'whole model':<30} {'nodes':>8} {'edges':>8} {'parts':>6} {'total s':>8} {'capture s':>9} "
          f"{'assemble s':>10}")
    for name, kw in WHOLE_200K.items():
        t0 = time.perf_counter()
        g = whole_model(name, **kw)
        a = g.meta["assembled"]
        print(f"{name + ' ' + str(kw):<30} {g.n:>8} {g.m:>8} {a['parts']:>6} {time.perf_counter() - t0:>8.1f} "
              f"{a['capture_s']:>9.1f} {a['assemble_s']:>10.2f}", flush=True)

