"""What the latency IP certifies on the 8 Table 4 workloads, with the old and the new lower bound.

The latency IP (Tarnawski et al. Figs. 3-4, :mod:`dnnplace.formulations.latency_ip`) in
two variants, side by side in one run:

- ``paper``: as printed (convexity rows only, no strengthening), ``Total`` starting at the
  path segmentation bound (:func:`dnnplace.evaluation.bounds.latency_lower_bound`):
  the previous figures;
- ``closure``: the default model (pipeline order where zero-time slots need it), ``Total``
  starting at the closure segmentation bound
  (:func:`dnnplace.formulations.latency_bound.closure_segmentation_bound`).

Both variants start from the same split and big-M ``H`` per row: ``--start heuristics`` the
best of greedy / the max-load DP / all-CPU, ``--start ls`` (default) the best of that,
the split read off the closure bound
(:func:`dnnplace.formulations.latency_bound.closure_segmentation`: its paths' splits and the
spine split), ``latency-ls`` (:func:`dnnplace.heuristics.latency_search.latency_search`,
seed 0) from its usual starts (at most ``--start-seconds``) and from that split. The whole
row honours ``--time-limit`` per variant (shares below): the bound, the starts, the build
and HiGHS (1 thread) together; the ``closure`` variant takes the bound computed for the
start instead of computing it again. Prints, per row: the closure bound with its split,
latency-ls and which split starts, with their seconds; per variant: rows and columns of
the model, build seconds (the bound included where computed), solve seconds, total
seconds of the variant (start, build, solve), incumbent, the evaluator's latency of the
decoded split, bound, certified gap.

    .venv/bin/python -m benchmarks latency-cert --time-limit 60
    .venv/bin/python -m benchmarks latency-cert --time-limit 600 --only resnet50 inceptionv3
"""

from __future__ import annotations

import argparse
import time

from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO as ROOT

ROWS = ["OperatorGraphs/bert_l-3", "OperatorGraphs/bert_l-6", "OperatorGraphs/bert_l-12",
        "OperatorGraphs/resnet50", "LayerGraphs/bert24", "LayerGraphs/resnet50", "LayerGraphs/inceptionv3",
        "LayerGraphs/gnmt"]
VARIANTS = {"paper": dict(acyclic=False, bound="path"), "closure": dict(bound="closure")}
#: shares of ``--time-limit`` per row: the closure bound's refinement (its split and the
#: spine bound and split come on top), then of what is left latency-ls from its usual
#: starts and from the bound's split (at most ``POLISH_SECONDS``); the IP gets the rest
BOUND_SHARE, LS_SHARE, POLISH_SHARE, POLISH_SECONDS = 0.1, 0.5, 0.15, 10.0
#: handing the model to HiGHS and reading the solution back takes about this many times the
#: build (measured on operator ResNet-50 and BERT-12: 8-14 s beside HiGHS' own time)
HANDOVER = 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=60.0, only=None, help={"only": "substrings of the row names"})
    parser.add_argument("--start", choices=["ls", "heuristics"], default="ls",
                        help="start split and big-M: latency-ls, or the best of greedy / DP / all-CPU (default: ls)")
    parser.add_argument("--start-seconds", type=float, default=30.0, help="latency-ls time (default: 30)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="which variants to run (default: all)")


def run(args) -> None:
    from dnnplace.evaluation.evaluate import latency
    from dnnplace.formulations.latency_bound import closure_segmentation
    from dnnplace.formulations.latency_ip import LatencyOptions, best_split, build_latency_ip, decode, warm_start_values
    from dnnplace.formulations.solvers.driver import solve_model
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.latency_search import latency_search

    wl = ROOT / "graphs" / "workloads" / "tarnawski" / "latency-inputs"
    T = float(args.time_limit)
    print(f"{'row':24} {'variant':7} {'start':>8} {'rows':>6} {'cols':>6} {'build s':>7} {'solve s':>7} "
          f"{'total s':>7} {'incumbent':>9} {'evaluator':>9} {'bound':>9} {'gap':>7}", flush=True)
    for row in ROWS:
        if not selected(row, args.only):
            continue
        inst = load_instance(wl / f"{row}_inference.json")
        t_row = time.perf_counter()
        lower = None
        if args.start == "ls":
            bound, split = closure_segmentation(inst.graph, inst.cluster, 1, split=True, seconds=BOUND_SHARE * T)
            lower = bound
            t_bound = time.perf_counter() - t_row
            left = T - t_bound
            ls, _, _ = latency_search(inst, time_limit=max(0.0, min(args.start_seconds, LS_SHARE * left)), seed=0)
            cands = [ls]
            if split is not None:
                polished, _, _ = latency_search(inst, time_limit=max(0.0, min(POLISH_SECONDS, POLISH_SHARE * left)),
                                                seed=0, start=split)
                cands += [polished, split]
            t_ls = time.perf_counter() - t_row - t_bound
            h, _, start = best_split(inst, 1, cands)
            which = {id(ls): "latency-ls", id(split): "bound split"}.get(id(start), "polished" if split is not None
                                                                          and start is cands[1] else "heuristics")
            print(f"# {row}: closure bound {bound:.2f} and its split "
                  f"{latency(split).objective if split is not None else float('nan'):.2f} ({t_bound:.1f} s); "
                  f"latency-ls {latency(ls).objective:.2f}"
                  + (f", from the bound split {latency(cands[1]).objective:.2f}" if split is not None else "")
                  + f" ({t_ls:.1f} s); start: {which}", flush=True)
        else:
            h, _, start = best_split(inst, 1, [])
        pre = time.perf_counter() - t_row
        for name in args.variants:
            t = time.perf_counter()
            given = dict(lower_bound=lower) if name == "closure" and lower is not None else {}
            m = build_latency_ip(inst, LatencyOptions(horizon=h, bound_seconds=BOUND_SHARE * T, **VARIANTS[name],
                                                      **given))
            build = time.perf_counter() - t
            ws = warm_start_values(m, start)
            spent = pre + time.perf_counter() - t
            out = solve_model(m, SolverOptions("highs", time_limit=max(1.0, T - spent - HANDOVER * build), threads=1),
                              warm_start=ws, build_seconds=build)
            total = time.perf_counter() - t + pre
            ev = latency(decode(m)).objective
            gap = (out.incumbent - out.bound) / out.incumbent if out.incumbent and out.bound is not None else None
            print(f"{row.replace('Graphs', ''):24} {name:7} {h:>8.2f} {out.n_cons:>6} {out.n_vars:>6} {build:>7.1f} "
                  f"{out.solve_seconds:>7.1f} {total:>7.1f} {out.incumbent:>9.2f} {ev:>9.2f} {out.bound:>9.2f} "
                  f"{'' if gap is None else f'{100 * gap:6.2f}%':>7}", flush=True)
