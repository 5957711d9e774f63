"""What the latency IP certifies on the 8 Table 4 workloads, with the old and the new lower bound.

The latency IP (Tarnawski et al. Figs. 3-4, :mod:`dnnplace.formulations.latency_ip`) in
two variants, side by side in one run:

- ``paper``: as printed (convexity rows only, no strengthening), ``Total`` starting at the
  path segmentation bound (:func:`dnnplace.graphs.evaluation.bounds.latency_lower_bound`):
  the previous figures;
- ``closure``: the default model (pipeline order where zero-time slots need it), ``Total``
  starting at the closure segmentation bound
  (:func:`dnnplace.formulations.latency_bound.closure_segmentation_bound`).

Both variants start from the same split and big-M ``H`` per row: ``--start heuristics`` the
best of greedy / the max-load DP / all-CPU, ``--start ls`` (default) the best of that,
``latency-ls`` (:func:`dnnplace.heuristics.latency_search.latency_search`,
``--start-seconds``, seed 0) and the split read off the closure bound
(:func:`dnnplace.formulations.latency_bound.closure_segmentation`), and get the same HiGHS
time limit (1 thread). Prints, per row: the seconds of latency-ls and of the closure bound
with its split, and which split starts; per variant: rows and columns of the model, build
seconds (the bound included), solve seconds, incumbent, the evaluator's latency of the
decoded split, bound, certified gap.

    .venv/bin/python -m benchmarks latency-cert --time-limit 60
    .venv/bin/python -m benchmarks latency-cert --time-limit 600 --only resnet50 inceptionv3
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import REPO as ROOT
from benchmarks.common import add_shared, selected

ROWS = ["OperatorGraphs/bert_l-3", "OperatorGraphs/bert_l-6", "OperatorGraphs/bert_l-12",
        "OperatorGraphs/resnet50", "LayerGraphs/bert24", "LayerGraphs/resnet50", "LayerGraphs/inceptionv3",
        "LayerGraphs/gnmt"]
VARIANTS = {"paper": dict(acyclic=False, bound="path"), "closure": dict(bound="closure")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=60.0, only=None, help={"only": "substrings of the row names"})
    parser.add_argument("--start", choices=["ls", "heuristics"], default="ls",
                        help="start split and big-M: latency-ls, or the best of greedy / DP / all-CPU (default: ls)")
    parser.add_argument("--start-seconds", type=float, default=30.0, help="latency-ls time (default: 30)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="which variants to run (default: all)")


def run(args) -> None:
    from dnnplace.formulations.latency_bound import closure_segmentation
    from dnnplace.formulations.latency_ip import LatencyOptions, best_split, build_latency_ip, decode, warm_start_values
    from dnnplace.formulations.solvers.driver import solve_model
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.evaluation.evaluate import latency
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.latency_search import latency_search

    wl = ROOT / "graphs" / "workloads" / "tarnawski" / "latency-inputs"
    print(f"{'row':24} {'variant':7} {'start':>8} {'rows':>6} {'cols':>6} {'build s':>7} {'solve s':>7} "
          f"{'incumbent':>9} {'evaluator':>9} {'bound':>9} {'gap':>7}", flush=True)
    for row in ROWS:
        if not selected(row, args.only):
            continue
        inst = load_instance(wl / f"{row}_inference.json")
        if args.start == "ls":
            t = time.perf_counter()
            ls, _, _ = latency_search(inst, time_limit=args.start_seconds, seed=0)
            t_ls = time.perf_counter() - t
            bound, split = closure_segmentation(inst.graph, inst.cluster, 1, split=True)
            t_bound = time.perf_counter() - t - t_ls
            cands = [ls] + ([split] if split is not None else [])
            h, _, start = best_split(inst, 1, cands)
            which = "bound split" if split is not None and start is split else \
                "latency-ls" if start is ls else "heuristics"
            print(f"# {row}: latency-ls {latency(ls).objective:.2f} ({t_ls:.0f} s); closure bound {bound:.2f} and "
                  f"its split {latency(split).objective if split is not None else float('nan'):.2f} ({t_bound:.1f} s); "
                  f"start: {which}", flush=True)
        else:
            h, _, start = best_split(inst, 1, [])
        for name in args.variants:
            t = time.perf_counter()
            m = build_latency_ip(inst, LatencyOptions(horizon=h, **VARIANTS[name]))
            build = time.perf_counter() - t
            out = solve_model(m, SolverOptions("highs", time_limit=args.time_limit, threads=1),
                              warm_start=warm_start_values(m, start), build_seconds=build)
            ev = latency(decode(m)).objective
            gap = (out.incumbent - out.bound) / out.incumbent if out.incumbent and out.bound is not None else None
            print(f"{row.replace('Graphs', ''):24} {name:7} {h:>8.2f} {out.n_cons:>6} {out.n_vars:>6} {build:>7.1f} "
                  f"{out.solve_seconds:>7.1f} {out.incumbent:>9.2f} {ev:>9.2f} {out.bound:>9.2f} "
                  f"{'' if gap is None else f'{100 * gap:6.2f}%':>7}", flush=True)
