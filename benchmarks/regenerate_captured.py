"""Regenerate the bundled captured graphs (roofline V100 costs) and results/capture/table.md.

    .venv/bin/python benchmarks/regenerate_captured.py [--only NAME,...] [--table-only]

Needs the torch extra. Each graph is ``dnnplace capture NAME`` with the arguments below
(recurrent models at a shorter sequence to keep the bundle a few MB); the table compares
op-count shapes with Pesto Table 1 (ops < 10 us / 10-100 us / > 100 us on V100) and
nodes and CCR with Celeritas Table 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "graphs" / "workloads" / "captured"
BUNDLE = {  # name: build arguments
    "resnet-50": {"batch": 32},
    "inception-v3": {"batch": 64},
    "bert-large": {"batch": 16, "seq": 64},
    "gnmt-4": {"batch": 128, "seq": 10},
    "rnnlm-2x2048": {"batch": 128, "seq": 35},
    "transformer-base": {"batch": 32, "seq": 64},
    "nasnet-4x44": {"batch": 32},
}
PAPERS = {  # model: (paper, TF ops <10us, 10-100us, >100us) or (paper, nodes, CCR)
    "transformer-base": ("Pesto T1 Transformer-6", 14511, 4119, 763),
    "rnnlm-2x2048": ("Pesto T1 RNNLM-2", 3401, 973, 240),
    "nasnet-4x44": ("Pesto T1 NASNet-4", 14191, 1677, 1033),
    "gnmt-4": ("Pesto T1 NMT-2", 21243, 8114, 703),
}
CELERITAS = {"inception-v3": ("Inception_V3", 6332, 33.118), "gnmt-4": ("NMT", 25463, 18.630),
             "transformer-base": ("Transformer", 36352, 111.957)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--table-only", action="store_true", help="rewrite results/capture/table.md, capture nothing")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_capture import markdown, shape_row
    from dnnplace.graphs.io import load_instance, save_instance
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.pytorch.capture import capture, zoo
    cl = cluster_preset("single-host-2-nvlink2")
    names = [] if args.table_only else args.only.split(",") if args.only else list(BUNDLE)
    for name in names:
        out = HERE / f"{name}.json"
        t0 = time.perf_counter()
        model, inputs, loss = zoo.build(name, **BUNDLE[name])
        save_instance(capture(model, inputs, loss, name=name), out)
        print(f"{name}: {time.perf_counter() - t0:.1f} s -> {out.name} ({out.stat().st_size / 1e6:.2f} MB)")
    rows = ["| model (ours, args) | nodes | edges | ops <10us | 10-100us | >100us | CCR (2x V100 NVLink2) | "
            "paper | paper nodes or ops | paper shape / CCR |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in BUNDLE:
        path = HERE / f"{name}.json"
        if not path.exists():
            continue
        g = load_instance(path).graph
        r = shape_row(g, cl)
        ours = (f"| {name} {BUNDLE[name]} | {r['nodes']} | {r['edges']} | {r['lt10']:.0%} | {r['10to100']:.0%} | "
                f"{r['gt100']:.0%} | {r['ccr']:.2f} |")
        if name in PAPERS:
            p, a, b, c = PAPERS[name]
            tot = a + b + c
            rows.append(ours + f" {p} | {tot} ops | {a / tot:.0%} / {b / tot:.0%} / {c / tot:.0%} |")
        if name in CELERITAS:
            p, nodes, ccr = CELERITAS[name]
            rows.append(ours + f" Celeritas T2 {p} | {nodes} nodes | CCR {ccr} |")
        if name not in PAPERS and name not in CELERITAS:
            rows.append(ours + " - | - | - |")
    text = ("# Captured graphs vs the papers' TensorFlow graphs\n\n"
            "Ours: joint forward+backward ATen graphs (views merged, one Adam apply node per parameter), "
            "roofline V100 costs (FP32 15.7 TFLOPS, 900 GB/s, 5 us launch floor), CPU capture, no GPU run. "
            "Op-time shares count operators (parameters excluded). Papers: Pesto Table 1 (TF r1.15 ops on "
            "V100, measured), Celeritas Table 2 (TF graphs, their CCR). Regenerate with "
            "`benchmarks/regenerate_captured.py`.\n\n" + "\n".join(rows) + "\n")
    rows_file = ROOT / "results/capture/zoo.jsonl"
    if rows_file.exists():  # written by python -m benchmarks capture --models all --tiled --rows ...
        rows = [json.loads(x) for x in rows_file.read_text().splitlines() if x.strip()]
        text += ("\n## Every zoo model at its default size\n\n"
                 "`python -m benchmarks capture --models all --tiled --skip-tiling --rows results/capture/zoo.jsonl`: "
                 "roofline V100 costs, CCR on 2x V100 NVLink2; 'parts' = assembled from captured parts "
                 "(equal to a direct capture, tests/test_whole.py), 'capture' = one direct capture. Seconds on a "
                 "shared, loaded 2-core CPU machine (load average 10 falling to 5 during the run): rough.\n\n"
                 + markdown(rows) + "\n")
        extra = ROOT / "results/capture/tiling.md"
        if extra.exists():
            text += "\n" + extra.read_text()
    (ROOT / "results/capture").mkdir(parents=True, exist_ok=True)
    (ROOT / "results/capture/table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
