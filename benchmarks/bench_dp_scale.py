"""The exact max-load DP at scale: Inception/NASNet-like layer graphs with up to millions of ideals.

Generator ``cells`` (:mod:`dnnplace.graphs.generators.cells`).

Prints, per graph and pruning mode (``on``: the bound-pruned threshold runs of
:mod:`dnnplace.heuristics.dp_bounds`; ``off``: the DP before them, every source whose
entries are below DPL's value pushed once): nodes, ideals, seconds to enumerate the ideals,
seconds in the DP tables (threshold runs: how many; ``--segments``: the stages across the
cell boundaries by sorted queries, :mod:`dnnplace.heuristics.dp_segments`, or walked), the outcome (``optimal``, or
``time limit`` with DPL's / the table's best split as the incumbent and the bound proven by
the failed threshold runs or the exact prefix of the table), incumbent, lower bound, gap,
share of the sources of the last run pushed (every split is re-scored by the evaluator,
:func:`dnnplace.evaluation.evaluate.maxload`, and must agree), and the peak
resident memory of the process (it includes ~150-200 MB of Python, numpy and numba).
4 accelerators (memory a third of the graph's) and 1 CPU, as Tarnawski's Table 1 clusters.

    .venv/bin/python -m benchmarks dp-scale                 # time limit 300 s per graph, both modes
    .venv/bin/python -m benchmarks dp-scale --time-limit 60 --only 2.2M --prune on

Each graph runs in a fresh subprocess so that the peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.options import add_shared
from benchmarks.paths import REPO as ROOT

# (label, cells, branches, branch length)
GRAPHS = [("44k", 3, 4, 10), ("2.2M", 4, 5, 13), ("4.3M", 8, 5, 13)]

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators.cells import cell_network
from dnnplace.graphs.instance import Instance
from dnnplace.heuristics.maxload_dp import maxload_dp
cells, branches, length, limit = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
prune, segments = sys.argv[6] == "on", sys.argv[7] == "on"
warm = cell_network(seed=1, cells=1, branches=2, branch_len=(2, 2))
maxload_dp(Instance(warm, Cluster.tarnawski(2, 1, float(warm.memory.sum()))))  # JIT outside the timing
g = cell_network(seed=0, cells=cells, branches=branches, branch_len=(length, length))
inst = Instance(g, Cluster.tarnawski(4, 1, float(g.memory.sum()) / 3))
t = time.perf_counter()
res = maxload_dp(inst, time_limit=limit, max_ideals=10_000_000, prune=prune, segments=segments)
from dnnplace.evaluation.evaluate import maxload
ev = maxload(res.placement, contiguity="both") if res.placement is not None else None
print(json.dumps({"n": g.n, "ideals": res.ideals, "complete": res.complete, "value": res.value,
                  "rescored": ev.objective if ev is not None and ev.feasible else None,
                  "lb": res.lower_bound, "seconds": time.perf_counter() - t, "parts": res.seconds,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=300.0, only=None, help={"time_limit": "seconds per graph (enumeration included)",
                                                          "only": "labels of the graphs to run (44k, 2.2M, 4.3M)"})
    parser.add_argument("--prune", choices=("on", "off", "both"), default="both",
                        help="bound pruning of the exact DP (default: both, one row each)")
    parser.add_argument("--segments", choices=("on", "off", "both"), default="on",
                        help="cross-cut stages by sorted queries (heuristics/dp_segments.py; default on)")


def run(args) -> None:
    print(f"{'graph':>6} {'prune':>5} {'segs':>4} {'nodes':>6} {'ideals':>10} {'enum s':>7} {'DP s':>7} {'runs':>4} "
          f"{'outcome':>10} {'incumbent':>10} {'bound':>9} {'gap':>7} {'sources':>8} {'peak RSS MB':>11}")
    modes = [(p, q) for p in (("on", "off") if args.prune == "both" else (args.prune,))
             for q in (("on", "off") if args.segments == "both" else (args.segments,))]
    for label, cells, branches, length in GRAPHS:
        if args.only and label not in args.only:
            continue
        for mode, segs in modes:
            out = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), str(cells), str(branches), str(length),
                                  str(args.time_limit), mode, segs], capture_output=True, text=True, check=True)
            d = json.loads(out.stdout.strip().splitlines()[-1])
            if d["rescored"] is None or abs(d["rescored"] - d["value"]) > 1e-9 * max(1.0, d["value"]):
                raise RuntimeError(f"{label}: the evaluator scores the split {d['rescored']}, the DP {d['value']}")
            gap = (d["value"] - d["lb"]) / d["value"] if d["value"] else 0.0
            done = d["parts"].get("sources_done", d["ideals"])
            runs = int(d["parts"].get("thresholds", 1))
            print(f"{label:>6} {mode:>5} {segs:>4} {d['n']:>6} {d['ideals']:>10,} {d['parts']['prepare']:>7.1f} "
                  f"{d['parts']['dp']:>7.1f} {runs:>4} {'optimal' if d['complete'] else 'time limit':>10} "
                  f"{d['value']:>10.3f} {d['lb']:>9.3f} {100 * gap:>6.1f}% {100 * done / d['ideals']:>7.2f}% "
                  f"{d['rss_mb']:>11.0f}", flush=True)
