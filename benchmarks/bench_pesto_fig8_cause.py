"""Why our Pesto Fig. 8 (hardware sensitivity) runs opposite to the paper's trend, measured.

The verdict (not reproduced) is in results/pesto/README.md; this reads the records of
``dnnplace reproduce pesto-hardware-captured``.

The paper: Pesto's reduction over the layer-wise Expert grows with compute speed and with
slower links (higher communication-to-compute ratio), because the Expert is oblivious to
the link speed. For each instance of ``results/pesto/hardware-captured/`` this prints the
whole graph on one GPU, the Expert (``layer-split``) and Pesto, each with its per-GPU busy
time, the transfers it sends and its busiest link (its recorded placement simulated under
fifo with congestion; the objective column is the record's).

    .venv/bin/python -m benchmarks pesto-fig8-cause [--dir results/pesto/hardware-captured]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.paths import REPO
from benchmarks.rows import read_jsonl


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=str(REPO / "results" / "pesto" / "hardware-captured"))


def run(args) -> None:
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.io import load_instance, placement_from_doc
    from dnnplace.graphs.placement import Placement

    folder = Path(args.dir)
    recs = read_jsonl(folder / "runs.jsonl")
    def show(name: str, label: str, p: Placement, objective: float) -> None:
        g, cl = p.graph, p.cluster
        s = simulate(p, policy="fifo", congestion=True)
        busy = np.bincount(p.device, weights=cl.compute_matrix(g)[np.arange(g.n), p.device], minlength=cl.size)
        print(f"{name} | {label} | {objective:.1f} | {np.round(busy, 1).tolist()} | {s.n_transfers} | "
              f"{float(s.link_busy.max()):.1f}")

    print("instance | method | objective (ms) | busy per GPU (ms) | transfers | busiest link (ms)")
    for path in sorted((folder / "instances").glob("*.json")):
        inst = load_instance(path)
        name = path.stem.rsplit("-", 1)[0]
        one = Placement(inst.graph, inst.cluster, np.zeros(inst.graph.n, dtype=np.int64))
        show(name, "one GPU (fifo)", one, simulate(one, policy="fifo", congestion=True).makespan)
        for r in recs:
            if path.stem in r["instance"] and r["method"] in ("layer-split", "pesto") and r.get("placement"):
                show(name, r["method"], placement_from_doc(r["placement"], inst), r["evaluation"]["objective"])
