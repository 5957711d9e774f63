"""``dnnplace tune MODEL --cluster C --out tuned.json``: the plan that measures fastest.

The simulator ranks plans by a predicted step time that measured runs can contradict
(results/execution/README.md), so the choice is made on measurements
(docs/execution.md, "Measured selection"):

1. capture the model's training step (``--cost``, default ``measured:cpu``, as ``capture``);
   with ``--executed-costs``, run the one-device plan first and take its operator times as
   the costs (:mod:`dnnplace.pytorch.execution.executed_costs`, docs/execution.md, Executed
   costs);
2. solve the makespan problem with each of ``--methods`` through the registry, each under
   ``--time-limit`` seconds, on the operator graph and (``--granularity``, default both) on
   the layer graph, whose plans are refined by whole-layer moves, with the one-device plan
   so refined besides (:func:`dnnplace.tune_candidates.method_plans`, docs/execution.md,
   "Layer plans"); predict each plan with the simulator
   (:func:`dnnplace.execute_command.predict`);
3. keep ``--top`` distinct plans, the best predicted of each granularity in turn
   (:func:`dnnplace.tune_candidates.shortlist`), and the one-device plan (every node on the
   cluster's first device that can run them all, in the simulator's FIFO order);
4. run them interleaved (:func:`~dnnplace.pytorch.execution.launch.execute` with
   ``interleave=True``: after each plan's warm-up, one step of each plan in turn, so a drift
   of the host falls on all of them alike), ``--steps`` measured steps per plan and round,
   rounds repeated until every plan's median has a confidence interval (level ``LEVEL``) within
   +-``PRECISION`` of it, or ``--max-steps`` steps per plan;
5. choose (:func:`choose`): the plan with the lowest measured median, if its interval lies
   wholly below the one-device plan's; otherwise the one-device plan. The answer is then
   never measured slower than one device.

The interval is the distribution-free order-statistic confidence interval of the median, and
the rounds are :func:`~dnnplace.measured_rounds.measure_rounds` (:mod:`dnnplace.measured_rounds`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dnnplace import tune_candidates as candidates
from dnnplace.graphs.errors import InputError
from dnnplace.measured_rounds import LEVEL, PRECISION, measure_rounds, median_ci, ms_text
from dnnplace.tune_candidates import GRANULARITIES, ONE_DEVICE, one_device_plan

__all__ = ["cmd_tune", "add_parser", "choose", "DEFAULT_METHODS"]

DEFAULT_METHODS = "heft,dpos,celeritas,pesto"
METHOD_PARAMS = {"pesto": {"coarsen_to": 40}}
"""Options each method is solved with (Pesto's ILP on a coarsened graph, as
``benchmarks/bench_execution.py`` solves it)."""
def choose(rows: Sequence[dict], one: dict) -> dict:
    """The row to answer with: among ``rows`` (each with ``measured_step_ms``, ``ci`` =
    ``[lo, hi]`` and ``matches_reference``) that equal the eager step, the one with the
    lowest measured median, if its interval's upper end lies below the lower end of the
    one-device row's interval; otherwise ``one``.

    >>> one = {"method": "one device", "measured_step_ms": 10.0, "ci": [9.5, 10.5], "matches_reference": True}
    >>> fast = {"method": "heft", "measured_step_ms": 8.0, "ci": [7.5, 9.6], "matches_reference": True}
    >>> choose([fast], one)["method"]   # overlapping intervals: not shown to be faster
    'one device'
    >>> choose([{**fast, "ci": [7.5, 9.4]}], one)["method"]
    'heft'
    """
    ok = [r for r in rows if r["matches_reference"] and r is not one]
    if not ok:
        return one
    best = min(ok, key=lambda r: r["measured_step_ms"])
    if best["measured_step_ms"] < one["measured_step_ms"] and best["ci"][1] < one["ci"][0]:
        return best
    return one


def check_flags(args: argparse.Namespace) -> tuple[dict[str, dict], tuple[str, ...]]:
    """The flags, before anything is read or run (one :class:`InputError` each); the methods
    with their options, and the granularities."""
    from dnnplace.registry import all_methods
    for flag, value, low in (("--top", args.top, 1), ("--steps", args.steps, 1), ("--max-steps", args.max_steps, 1),
                             ("--warmup", args.warmup, 0), ("--batch", args.batch, 1), ("--seq", args.seq, 1)):
        if value is not None and value < low:
            raise InputError(f"{flag} {value}: must be an integer >= {low}")
    for flag, value in (("--time-limit", args.time_limit), ("--timeout", args.timeout)):
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{flag} {value:g}: must be a number of seconds > 0")
    if not (math.isfinite(args.lr) and args.lr >= 0):
        raise InputError(f"--lr {args.lr:g}: must be a finite learning rate >= 0")
    grains = [x.strip() for x in args.granularity.split(",") if x.strip()]
    if not grains or len(set(grains)) != len(grains) or not set(grains) <= set(GRANULARITIES):
        raise InputError(f"--granularity {args.granularity!r}: expected op, layer or op,layer")
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not names or len(set(names)) != len(names):
        raise InputError(f"--methods {args.methods!r}: expected method names, each once, joined by commas "
                         f"(default {DEFAULT_METHODS})")
    known = all_methods()
    makespan = sorted(n for n, m in known.items() if "makespan" in m.problems)
    for name in names:
        if name not in known:
            raise InputError(f"--methods: unknown method {name!r}; makespan methods: {', '.join(makespan)}")
        if name not in makespan:
            raise InputError(f"--methods: {name!r} does not solve the makespan problem; makespan methods: "
                             f"{', '.join(makespan)}")
    return {n: dict(METHOD_PARAMS.get(n, {})) for n in names}, tuple(grains)


def _row(method: str, plan: Any, sim: Any, samples: list[float], m: Any, matches: bool) -> dict:
    med, lo, hi = median_ci(samples)
    return {"method": method, "predicted_step_ms": float(sim.makespan), "measured_step_ms": med, "ci": [lo, hi],
            "steps": len(samples), "steps_ms": list(samples), "transfers": m.transfers,
            "transfer_bytes": m.transfer_bytes, "matches_reference": matches,
            "plan": {"placement": dict(plan.placement), "start": dict(plan.start)}}


def table(rows: Sequence[dict], chosen: dict) -> str:
    """The candidates as a markdown table (the chosen row marked)."""
    out = ["| method | predicted ms | measured ms (median) | 95 % CI ms | steps | transfers | matches eager | chosen |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['method']} | {r['predicted_step_ms']:.3f} | {r['measured_step_ms']:.3f} | "
                   f"{ms_text(r['ci'][0])}-{ms_text(r['ci'][1])} | {r['steps']} | {r['transfers']} | "
                   f"{'yes' if r['matches_reference'] else 'NO'} | {'**yes**' if r is chosen else ''} |")
    return "\n".join(out) + "\n"


def _dodge(xs: Sequence[float], width: float) -> list[float]:
    """Offsets that spread points whose x lie within ``width`` of each other (their
    interval bars would hide each other), ``width`` apart, centred on the group.

    >>> _dodge([1.0, 1.01, 5.0], 0.1)
    [-0.05, 0.05, 0.0]
    """
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    group: list[int] = []
    for i in order + [None]:
        if i is not None and group and xs[i] - xs[group[-1]] < width:
            group.append(i)
            continue
        for k, j in enumerate(group):
            out[j] = round((k - (len(group) - 1) / 2) * width, 12)
        group = [i] if i is not None else []
    return out


def plot(rows: Sequence[dict], chosen: dict, path: str, title: str) -> None:
    """Predicted (x) vs measured median (y) per candidate, the 95 % interval as a vertical
    bar, the diagonal where they agree; the chosen plan drawn as a star, the one-device
    plan as a square; candidates with nearly equal predictions are spread sideways."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnnplace.graphs.io import write_figure
    fig, ax = plt.subplots(figsize=(7.6, 5.2))
    ys = [r["measured_step_ms"] for r in rows] + [c for r in rows for c in r["ci"] if math.isfinite(c)]
    xs = [r["predicted_step_ms"] for r in rows]
    lo, hi = min(xs + ys), max(xs + ys)
    pad = 0.08 * (hi - lo or hi or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, ls="--", label="predicted = measured")
    colours = plt.get_cmap("tab10").colors
    for r, dx, colour in zip(rows, _dodge(xs, 0.02 * (hi - lo + 2 * pad)), colours):
        med = r["measured_step_ms"]
        a, b = (c if math.isfinite(c) else med for c in r["ci"])
        marker = "*" if r is chosen else ("s" if r["method"] == ONE_DEVICE else "o")
        ax.errorbar([r["predicted_step_ms"] + dx], [med], yerr=[[med - a], [b - med]], fmt=marker, color=colour,
                    capsize=4, ms=12 if r is chosen else 7,
                    label=f"{r['method']}{' (chosen)' if r is chosen else ''}: {med:.2f} ms"
                          f"{'' if math.isfinite(r['ci'][0]) else ' (no interval: under 6 steps)'}")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("predicted step (ms, simulator)")
    ax.set_ylabel("measured step (ms, median and 95 % CI)")
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_figure(fig, path, dpi=110)
    plt.close(fig)


def cmd_tune(args: argparse.Namespace) -> int:
    """Capture, solve, predict, measure the candidates interleaved, choose (module docstring)."""
    from dnnplace.command_args import cluster_file
    from dnnplace.outpaths import check_outputs
    methods, grains = check_flags(args)
    model_file = args.model.rpartition(":")[0]
    check_outputs([("--out", args.out), ("--table", args.table), ("--plot", args.plot)],
                  [("model", model_file if model_file.endswith(".py") else None),
                   ("--cluster", cluster_file(args.cluster))])
    from dnnplace.graphs.io import read_cluster
    read_cluster(args.cluster, None)   # an unknown preset or a bad file: before the capture
    from dnnplace.pytorch.capture.models import is_user_spec
    if not is_user_spec(args.model):
        from dnnplace.pytorch.capture import zoo
        zoo.entry(args.model)    # an unknown name lists the zoo
    from dnnplace.pytorch.capture.ops import require_torch
    require_torch()

    from dnnplace.capture_commands import capture_one, model_params
    from dnnplace.execute_command import model_spec
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import graph_fingerprint, write_json
    from dnnplace.pytorch.capture.costs import cost_models
    from dnnplace.pytorch.execution.reference import captured_meta
    captured, _ = capture_one(args, args.batch, model_params(args.param), cost_models(args.cost))
    inst = Instance(captured.graph, read_cluster(args.cluster, captured.graph), captured.source)
    ids = list(inst.graph.ids)
    one = one_device_plan(inst)
    spec = model_spec(args)
    if args.executed_costs:
        inst = candidates.executed_instance(spec, inst, one, args)
        one = one_device_plan(inst)
    found = sorted(candidates.method_plans(inst, methods, args.time_limit, grains), key=lambda c: float(c[2].makespan))
    print("predicted: " + ", ".join(f"{c[0]} {float(c[2].makespan):.3f} ms" for c in [*found, one]), file=sys.stderr)
    cands = candidates.shortlist(ids, found, one, args.top, dict(zip(inst.cluster.names, inst.cluster.kinds)))
    print(f"measuring {len(cands)} plans ({', '.join(c[0] for c in cands)}) interleaved, {args.steps} steps each per "
          f"round, until every median's 95 % interval is within +-{100 * PRECISION:g} % or {args.max_steps} steps",
          file=sys.stderr, flush=True)
    measured = measure_rounds(spec, [c[1] for c in cands], list(inst.cluster.names), [c[0] for c in cands],
                              steps=args.steps, max_steps=args.max_steps, warmup=args.warmup, timeout_s=args.timeout,
                              captured=captured_meta(captured), desc="tune")
    samples, last, matches, rounds = measured.samples, measured.last, measured.matches, measured.rounds
    rows = [_row(c[0], c[1], c[2], s, m, ok) for c, s, m, ok in zip(cands, samples, last, matches)]
    for r in rows:
        if not r["matches_reference"]:
            print(f"{r['method']}: the executed step does not equal the eager step; not chosen", file=sys.stderr)
    chosen = choose(rows[:-1], rows[-1])
    base = rows[-1]
    out = {"model": args.model, "cluster": args.cluster, "chosen_method": chosen["method"],
           "measured_step_ms": chosen["measured_step_ms"], "measured_ci_ms": chosen["ci"],
           "one_device_step_ms": base["measured_step_ms"], "one_device_ci_ms": base["ci"],
           "predicted_step_ms": chosen["predicted_step_ms"],
           "speedup": base["measured_step_ms"] / chosen["measured_step_ms"],
           "rule": "the lowest measured median whose 95 % interval lies below the one-device plan's, else the "
                   "one-device plan",
           "ci": f"{100 * LEVEL:g} % order-statistic interval of the median (binomial)",
           "rounds": rounds, "eager_step_ms": last[-1].eager_step_ms, "candidates": rows,
           "placement": chosen["plan"]["placement"], "start": chosen["plan"]["start"],
           "costs": "executed" if args.executed_costs else args.cost,
           "graph_fingerprint": graph_fingerprint(captured.graph)}
    text = table(rows, chosen)
    if args.table:
        from dnnplace.tables import write_text
        write_text(args.table, text)
    else:
        print(text, end="")
    if args.plot:
        model = Path(args.model.rpartition(":")[0]).name + ":" + args.model.rpartition(":")[2] if ":" in args.model \
            else args.model
        plot(rows, chosen, args.plot, f"{model} on {Path(args.cluster).name}: predicted vs measured")
    write_json(args.out, out)
    print(f"chosen: {chosen['method']}, {chosen['measured_step_ms']:.3f} ms (one device "
          f"{base['measured_step_ms']:.3f} ms, speed-up {out['speedup']:.2f}x) -> {args.out}")
    return 0 if chosen["matches_reference"] else 1


def add_parser(sub: Any) -> None:
    """The ``tune`` subcommand, added by :func:`dnnplace.cli.build_parser`."""
    from dnnplace.execute_command import add_model_flags
    p = sub.add_parser("tune", help="solve with several methods, measure the best predicted plans and one device "
                                    "interleaved, keep the one measured fastest",
                       description="Capture the training step, solve the makespan problem with each method, keep "
                                   "the --top best predicted plans and the one-device plan, run them interleaved "
                                   "until each median's 95 % interval is within +-3 % (or --max-steps), and choose "
                                   "the fastest plan whose interval lies below the one-device plan's, else one "
                                   "device (docs/execution.md, Measured selection). The output is also a result "
                                   "for `dnnplace execute MODEL tuned.json --cluster C`.")
    p.add_argument("model", help="zoo name, FILE.py:FACTORY or package.module:FACTORY (as for capture)")
    add_model_flags(p)
    p.add_argument("--cost", default="measured:cpu",
                   help="operator costs as for capture (default measured:cpu: each operator timed on one thread, "
                        "as the executor runs it)")
    p.add_argument("--executed-costs", action="store_true",
                   help="run the one-device plan first (--steps steps) and solve on its operator times as the "
                        "executor ran them (docs/execution.md, Executed costs)")
    p.add_argument("--cluster", required=True, help="cluster preset or file (e.g. local-cpu-2)")
    p.add_argument("--methods", default=DEFAULT_METHODS, help="makespan methods, comma-separated "
                                                              "(default %(default)s)")
    p.add_argument("--granularity", default="op,layer",
                   help="graphs each method solves: op (the operator graph), layer (every layer one colocation "
                        "class: cuts only between layers) or op,layer (default: both, each plan a candidate)")
    p.add_argument("--top", type=int, default=4,
                   help="plans measured besides one device (default 4: operator and layer plans in turn, each the "
                        "best predicted of its kind left)")
    p.add_argument("--time-limit", type=float, default=20.0, metavar="S", help="seconds per method (default 20)")
    p.add_argument("--steps", type=int, default=10, help="measured steps per plan and round (default 10)")
    p.add_argument("--max-steps", type=int, default=30, help="measured steps per plan at most (default 30)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up steps per plan and round (default 1)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a stuck round is stopped, per plan")
    p.add_argument("--table", metavar="FILE.md", help="write the markdown table there instead of stdout")
    p.add_argument("--plot", metavar="PNG", help="predicted vs measured per candidate, with intervals")
    p.add_argument("--out", required=True, metavar="TUNED.json")
    p.set_defaults(func=cmd_tune, tiled=False, inference=False)
