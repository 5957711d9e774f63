"""What the latency IP certifies on the 8 Table 4 workloads, as printed and strengthened.

The latency IP (Tarnawski et al. Figs. 3-4, :mod:`dnnplace.formulations.latency_ip`)
as printed (``paper``: convexity rows only, no
strengthening) and with the strengthenings (``strong``: ``Total >= Finish_j``, start
order of identical accelerators, the pipeline order where zero-time slots need it).

Both variants start from the same split (the best of greedy / the max-load DP / all-CPU,
which also sets the big-M ``H``) and get the same HiGHS time limit (1 thread). Prints,
per row and variant: rows and columns of the model, incumbent, bound, certified gap.

    .venv/bin/python -m benchmarks latency-cert --time-limit 60
    .venv/bin/python -m benchmarks latency-cert --time-limit 3600 --only gnmt   # the paper's hour
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import REPO as ROOT
from benchmarks.common import add_shared, selected

ROWS = ["OperatorGraphs/bert_l-3", "OperatorGraphs/bert_l-6", "OperatorGraphs/bert_l-12",
        "OperatorGraphs/resnet50", "LayerGraphs/bert24", "LayerGraphs/resnet50", "LayerGraphs/inceptionv3",
        "LayerGraphs/gnmt"]
VARIANTS = {"paper": dict(acyclic=False), "strong": dict(finish_bounds=True, symmetry_breaking=True)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=60.0, only=None, help={"only": "substrings of the row names"})


def run(args) -> None:
    from dnnplace.formulations.latency_ip import LatencyOptions, best_split, build_latency_ip, warm_start_values
    from dnnplace.formulations.solvers.driver import solve_model
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.io import load_instance

    wl = ROOT / "graphs" / "workloads" / "tarnawski" / "latency-inputs"
    print(f"{'row':28} {'variant':7} {'rows':>7} {'cols':>7} {'build s':>7} {'incumbent':>10} {'bound':>10} "
          f"{'gap':>7}", flush=True)
    for row in ROWS:
        if not selected(row, args.only):
            continue
        inst = load_instance(wl / f"{row}_inference.json")
        h, _, start = best_split(inst, 1, [])
        for name, kw in VARIANTS.items():
            t = time.perf_counter()
            m = build_latency_ip(inst, LatencyOptions(horizon=h, **kw))
            build = time.perf_counter() - t
            out = solve_model(m, SolverOptions("highs", time_limit=args.time_limit, threads=1),
                              warm_start=warm_start_values(m, start), build_seconds=build)
            gap = (out.incumbent - out.bound) / out.incumbent if out.incumbent and out.bound is not None else None
            print(f"{row:28} {name:7} {out.n_cons:>7} {out.n_vars:>7} {build:>7.1f} {out.incumbent:>10.2f} "
                  f"{out.bound:>10.2f} {'' if gap is None else f'{100 * gap:6.1f}%':>7}", flush=True)
