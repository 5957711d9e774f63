"""Benchmark of the exact max-load DP (heuristics/maxload_dp.py) on the 16 Table 1 workloads.

Prints: workload, ideals, ideal pairs visited by the pruned superset walks (and all
ideal pairs ``I' <= I`` for scale, where counted), seconds (DPL bound + exact DP, after
JIT warm-up), peak resident memory of the process, and the reference C++ time: the
authors' DP as run on this machine class (2026-11-21; ``this box`` in results/bench-dp.txt),
else the paper's Table 1 figure.

    .venv/bin/python -m benchmarks dp            # all 16 (about 10 min on 2 cores)
    .venv/bin/python -m benchmarks dp --quick    # without the two InceptionV3 rows
    .venv/bin/python -m benchmarks dp --only gnmt

Each workload runs in a fresh subprocess so that the peak RSS is its own (it includes
~150-200 MB of Python, numpy and numba).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO as ROOT

REF = ROOT / "experiments" / "reference" / "tarnawski-neurips20.json"

# the authors' C++ DP on this 2-core machine class (measured 2026-11-21), seconds
CPP_HERE = {
    ("op", "inference", "bert_l-3"): 0.7, ("op", "inference", "bert_l-6"): 2.4,
    ("op", "inference", "bert_l-12"): 10.4, ("op", "inference", "resnet50"): 0.1,
    ("op", "training", "bert_l-3"): 3.6, ("op", "training", "bert_l-6"): 14.1,
    ("op", "training", "bert_l-12"): 23.9, ("op", "training", "resnet50"): 0.3,
    ("layer", "inference", "gnmt"): 11.8, ("layer", "training", "gnmt"): 33.0,
    ("layer", "inference", "inceptionv3"): 26.7 * 60,
}

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from dnnplace.graphs.io import load_instance
from dnnplace.heuristics.maxload_dp import maxload_dp
inst = load_instance(sys.argv[2])
warm = load_instance(sys.argv[3])
maxload_dp(warm)  # JIT compile / load the cache outside the timing
t = time.perf_counter()
res = maxload_dp(inst)
sec = time.perf_counter() - t
print(json.dumps({"value": res.value, "ideals": res.ideals, "pairs": res.pairs_visited, "seconds": sec,
                  "parts": res.seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, quick=False, only=None, help={"quick": "skip the InceptionV3 rows",
                                                     "only": "substrings of the workload names to run"})


def run(args) -> None:
    rows = json.loads(REF.read_text())["table1_throughput"]
    wl = ROOT / "graphs" / "workloads" / "tarnawski"
    warm = wl / "throughput-inputs" / "LayerGraphs" / "bert24_training.json"
    print(f"{'workload':32} {'ideals':>7} {'pairs visited':>14} {'DP s':>8} {'peak RSS MB':>11} "
          f"{'C++ s':>8} {'C++ from':>10} {'TPS':>8} {'paper':>8}")
    for r in rows:
        name = f"{r['granularity']} {r['mode']} {r['model']}"
        if not selected(name, args.only):
            continue
        if args.quick and r["model"] == "inceptionv3":
            continue
        out = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), str(wl / r["input"]), str(warm)],
                             capture_output=True, text=True, check=True)
        d = json.loads(out.stdout.strip().splitlines()[-1])
        key = (r["granularity"], r["mode"], r["model"])
        if key in CPP_HERE:
            cpp, src = f"{CPP_HERE[key]:.1f}", "this box"
        else:
            cpp, src = r["runtime"]["dp_cpp"], "paper"
        print(f"{name:32} {d['ideals']:>7} {d['pairs']:>14,} {d['seconds']:>8.2f} {d['rss_mb']:>11.0f} "
              f"{cpp:>8} {src:>10} {d['value']:>8.2f} {r['tps']['dp']:>8.2f}", flush=True)
