"""The simulator calibrated from execution traces: replay, then predict (docs/execution.md, Calibration).

Per model of the execution benchmark (``benchmarks/bench_execution.py``, ``measured:cpu``
costs, ``local-cpu-2``): the one-device plan, two random placements (seeded, each device in
the simulated FIFO order) and the plans of HEFT, DPOS, Celeritas and Pesto, all executed
interleaved (A, B, C, A, B, C, ...) by ``dnnplace execute``'s engine in rounds of ``--steps``
steps, until every plan's median has a 95 % interval within +-3 % or ``--max-steps`` steps ran
(:func:`~dnnplace.measured_rounds.measure_rounds`), the last round's median step's operator
and message timeline recorded, and each operator's median time over every round's steps. Then:

* **replay** -- every run's own placement and order simulated on its recorded step's operator
  times and the messages and links calibrated on all runs (``dnnplace calibrate``), against
  that step's time;
* **predict** -- calibrated on the one-device and random plans of every model, the
  simulator predicts the methods' plans from the profiled costs; and held out: calibrated
  on the other models' plans only;
* **executed** -- per model, the costs as the executor ran them (its one-device run's
  operator times) and the messages fitted on that model's one-device and random plans
  (``pytorch/execution/executed_costs.py``), predicting its methods' plans;
* per model, Kendall's tau between the predicted and the measured order of the plans and
  whether the predicted best is the measured best (or not separated from it by the 95 %
  intervals of the median step).

    .venv/bin/python -m benchmarks calibration [--models mlp,cnn,...] [--steps 15] [--max-steps 60] [--fresh]
        [--analyse-only]

Rows (with their timelines) go to ``OUT/runs.jsonl.gz`` as each model finishes (a rerun
resumes); ``OUT/README.md`` is the table, rewritten from all rows; ``OUT/cluster.json`` the
``local-cpu-2`` cluster calibrated on the training plans (``dnnplace tune --cluster``).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from benchmarks.bench_execution import METHODS, MODELS, model_graph, one_device_plan, plans_for
from benchmarks.options import add_shared
from benchmarks.paths import REPO as ROOT

TRAIN = ("one device", "random-1", "random-2")
FIGURES = ("send_overhead_ms", "recv_overhead_ms", "op_gap_ms", "op_scale")
CLUSTER = "local-cpu-2"
COLUMNS = ("replayed_ms", "predicted_ms", "held_out_ms", "executed_ms", "preset_ms")


def random_plan(inst, seed: int):
    """A seeded random placement over the cluster's devices (a colocation group on one
    device: a parameter's update runs where it lives), each in the simulated FIFO order."""
    from dnnplace.execute_command import predict
    from dnnplace.pytorch.execution.launch import Plan
    rng = np.random.default_rng(seed)
    names = inst.cluster.names
    g = inst.graph
    dev = rng.integers(0, len(names), g.n)
    if g.colocation is not None:
        group = rng.integers(0, len(names), int(g.colocation.max(initial=-1)) + 1)
        dev = np.where(g.colocation >= 0, group[np.maximum(g.colocation, 0)], dev)
    placement = {v: names[int(d)] for v, d in zip(g.ids, dev)}
    sim = predict(inst, placement, None)
    return f"random-{seed}", Plan(placement, dict(zip(inst.graph.ids, sim.schedule.start.tolist()))), sim, 0.0


def run_model(name: str, steps: int, max_steps: int, warmup: int, time_limit: float) -> list[dict]:
    """The rows of one model: every plan executed interleaved in rounds of ``steps`` steps
    until every plan's median is known within +-3 % (95 % interval) or ``max_steps`` steps
    ran (:func:`~dnnplace.measured_rounds.measure_rounds`), with the last round's timeline."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.measured_rounds import measure_rounds
    spec, graph = model_graph(name)
    inst = Instance(graph, cluster_preset(CLUSTER, graph), f"bench:{name}")
    plans = [one_device_plan(inst, "cpu0"), random_plan(inst, 1), random_plan(inst, 2),
             *plans_for(inst, METHODS, time_limit)]
    measured = measure_rounds(spec, [p for _, p, _, _ in plans], list(inst.cluster.names), [p[0] for p in plans],
                              steps=steps, max_steps=max_steps, warmup=warmup, timeout_s=600, desc=name)
    rows = []
    today = datetime.date.today().isoformat()
    for (method, plan, sim, _), samples, m, ok, op_ms in zip(plans, measured.samples, measured.last,
                                                             measured.matches, measured.op_median_ms):
        d = m.to_dict()
        rows.append({"model": name, "method": method, "date": today, "nodes": graph.n,
                     "preset_predicted_ms": float(sim.makespan),
                     "profile_ms": dict(zip(graph.ids, graph.compute[:, 0].tolist())),
                     "plan": {"placement": dict(plan.placement), "start": dict(plan.start)},
                     "measured_step_ms": statistics.median(samples), "measured_steps_ms": samples,
                     "matches_reference": ok, "rounds": measured.rounds, "steps_per_round": steps,
                     "max_steps": max_steps, "op_median_ms": op_ms,   # over every round's steps, as the median
                     **{k: d[k] for k in ("recorded_step_ms", "eager_step_ms", "transfers", "ops", "messages")}})
    return rows


def with_profile(graph, row: dict):
    """``graph`` with the operator costs the row was measured with (``profile_ms``), so a
    table renders from its records alone, whatever this host's profile cache holds."""
    if "profile_ms" not in row:
        return graph
    cost = np.array([row["profile_ms"][v] for v in graph.ids], dtype=np.float64)
    return graph.with_(compute=np.repeat(cost[:, None], graph.compute.shape[1], axis=1))


def _tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a of two rankings of the same items (ties count neither way)."""
    n, s = len(a), 0
    for i in range(n):
        for j in range(i + 1, n):
            s += int(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]))
    return s / (n * (n - 1) / 2) if n > 1 else 1.0


def _plan_key(plan: dict) -> tuple:
    """A placement up to renaming the devices (``local-cpu-2``'s two are alike): each node's
    device numbered by first appearance over the sorted node ids."""
    seen: dict = {}
    return tuple(seen.setdefault(plan["placement"][v], len(seen)) for v in sorted(plan["placement"]))


def _tau_separated(rows: list[dict], key: str) -> float:
    """Kendall's tau over the pairs of ``rows`` whose measured 95 % intervals are disjoint
    (a ranking counts only the differences the measurement separates; 1 when none is)."""
    agree = disagree = 0
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["ci"][1] < b["ci"][0] or b["ci"][1] < a["ci"][0]:
                s = np.sign(a[key] - b[key]) * np.sign(a["measured_ms"] - b["measured_ms"])
                agree, disagree = agree + (s > 0), disagree + (s < 0)
    return float(agree - disagree) / (agree + disagree) if agree + disagree else 1.0


def analyse(rows: list[dict]) -> tuple[list[dict], dict]:
    """Per row its replayed and predicted steps (calibrated on all training plans and on
    the other models' only); per model tau and the best plan; the summary figures."""
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.measured_rounds import median_ci
    from dnnplace.pytorch.execution.calibration import (
        calibrated_cluster,
        fit,
        links_queue,
        read_run,
        replays,
        simulate_run,
    )
    from dnnplace.pytorch.execution.executed_costs import fit_model
    graphs = {m: with_profile(model_graph(m)[1], next(r for r in rows if r["model"] == m))
              for m in sorted({r["model"] for r in rows})}
    runs = [read_run(r, f"{r['model']}/{r['method']}") for r in rows]
    costs = [dict(zip(graphs[r["model"]].ids, graphs[r["model"]].compute[:, 0].tolist())) for r in rows]

    def fitted(keep):
        idx = [i for i, r in enumerate(rows) if keep(r)]
        return fit([runs[i] for i in idx], [costs[i] for i in idx])

    every, train = fitted(lambda r: True), fitted(lambda r: r["method"] in TRAIN)
    held = {m: fitted(lambda r, m=m: r["method"] in TRAIN and r["model"] != m) for m in graphs}
    replayed = [{"measured_ms": r["measured_step_ms"], "recorded_ms": run.replay_target_ms,
                 **replays(graphs[r["model"]], cluster_preset(CLUSTER, graphs[r["model"]]), every, run)}
                for r, run in zip(rows, runs)]
    queue = links_queue([x for x, r in zip(replayed, rows) if r["method"] in TRAIN])   # chosen on the training plans
    own = {m: fit([run for r, run in zip(rows, runs) if r["model"] == m]) for m in graphs}
    key = "replayed_ms" if queue else "replayed_ms_overlap"
    own_signed = [replays(graphs[r["model"]], cluster_preset(CLUSTER, graphs[r["model"]]), own[r["model"]], run)[key]
                  / run.replay_target_ms - 1 for r, run in zip(rows, runs)]
    own_err = [abs(e) for e in own_signed]
    executed = {m: fit_model(g, cluster_preset(CLUSTER, g),
                             [run for r, run in zip(rows, runs) if r["model"] == m and r["method"] in TRAIN],
                             congestion=queue)[:2] for m, g in graphs.items()}
    out = []
    for r, run, rep in zip(rows, runs, replayed):
        g = graphs[r["model"]]
        base = cluster_preset(CLUSTER, g)
        ge, ce = executed[r["model"]]
        predicted = {k: float(simulate_run(g, calibrated_cluster(base, cal), run, congestion=queue).makespan)
                     for k, cal in (("train", train), ("held", held[r["model"]]))}
        med, lo, hi = median_ci(r["measured_steps_ms"])
        out.append({"model": r["model"], "method": r["method"], "transfers": r["transfers"], "measured_ms": med,
                    "recorded_ms": run.replay_target_ms,
                    "ci": (lo, hi), "steps": len(r["measured_steps_ms"]), "preset_ms": r["preset_predicted_ms"],
                    "replayed_ms": rep["replayed_ms" if queue else "replayed_ms_overlap"],
                    "replayed_queue_ms": rep["replayed_ms"],
                    "predicted_ms": predicted["train"], "held_out_ms": predicted["held"],
                    "executed_ms": float(simulate_run(ge, ce, run, congestion=queue).makespan),
                    "one_device": len(set(r["plan"]["placement"].values())) == 1, "plan": _plan_key(r["plan"]),
                    "matches_reference": r["matches_reference"]})
    err = {k: [abs(x[k] / x["recorded_ms" if k == "replayed_ms" else "measured_ms"] - 1) for x in out
               if x["method"] not in TRAIN or k == "replayed_ms"]
           for k in ("replayed_ms", "predicted_ms", "held_out_ms", "executed_ms", "preset_ms")}
    per_model = {}
    for m in graphs:
        mine = [x for x in out if x["model"] == m and not x["method"].startswith("random")]
        best_m = min(mine, key=lambda x: x["measured_ms"])
        per_model[m] = {"tau_preset": _tau([x["preset_ms"] for x in mine], [x["measured_ms"] for x in mine]),
                        "best_measured": best_m["method"]}
        for key, suffix in (("predicted_ms", ""), ("executed_ms", "_executed")):
            best_p = min(mine, key=lambda x: x[key])
            per_model[m] |= {"tau" + suffix: _tau([x[key] for x in mine], [x["measured_ms"] for x in mine]),
                             "tau_separated" + suffix: _tau_separated(mine, key),
                             "best_predicted" + suffix: best_p["method"],
                             "same_best" + suffix: best_p["plan"] == best_m["plan"],
                             "not_separated" + suffix: not best_p["ci"][0] > best_m["ci"][1]}
    again = [abs(x["executed_ms"] / x["measured_ms"] - 1) for x in out if x["one_device"] and x["method"] not in TRAIN]
    summary = {"median": {k: statistics.median(v) for k, v in err.items() if v},
               "worst": {k: max(v) for k, v in err.items() if v}, "per_model": per_model,
               "one_device_again": again,
               "calibration": train.to_dict(), "every": every.to_dict(), "congestion": queue,
               "cluster": calibrated_cluster(cluster_preset(CLUSTER), train, congestion=queue),
               "replay_per_model": {"median": statistics.median(own_err), "worst": max(own_err)},
               "wake_ups": wake_ups(rows, runs, own, own_signed),
               "replay_queue": {"median": statistics.median(abs(x["replayed_queue_ms"] / x["recorded_ms"] - 1)
                                                            for x in out),
                                "worst": max(abs(x["replayed_queue_ms"] / x["recorded_ms"] - 1) for x in out)}}
    return out, summary


def wake_ups(rows: list[dict], runs: list, fits: dict, errors: list[float], late_ms: float = 1.0) -> dict:
    """How long a blocked receiver waits after its message departed beyond the bytes' time on
    the link (``link_samples``, less ``beta1 * bytes`` of its model's fit ``fits[model]``):
    quantiles over every run, and for each run whose replay on its own model's fit is off by
    more than 10 %, its error, step and the waits over ``late_ms``."""
    from dnnplace.pytorch.execution.calibration import link_samples
    per_run = [[ms - fits[r["model"]].links[(a, b)][1] * nbytes for a, b, nbytes, ms in link_samples(run)]
               for r, run in zip(rows, runs)]
    every = np.array([ms for x in per_run for ms in x])
    q = dict(zip(("median", "p90", "p99", "max"), np.quantile(every, [0.5, 0.9, 0.99, 1.0]).tolist()))
    worst = [{"model": r["model"], "method": r["method"], "error": e, "step_ms": run.replay_target_ms,
              "late": sorted((ms for ms in x if ms > late_ms), reverse=True)}
             for r, run, x, e in zip(rows, runs, per_run, errors) if abs(e) > 0.10]
    return {"samples": int(every.size), "late_ms": late_ms, "late_share": float((every > late_ms).mean()), **q,
            "worst": sorted(worst, key=lambda w: -abs(w["error"]))}


def markdown(out: list[dict], s: dict, meta: dict) -> str:
    pct = lambda a, b: f"{100 * (a / b - 1):+.1f} %"  # noqa: E731
    lines = ["# The simulator calibrated from execution traces (two CPU worker processes on this host)", "",
             f"## {meta['date']}", "",
             f"Measured by `{meta['measure']}` (on the date above; the operators "
             "profiled afresh with an empty `DNNPLACE_PROFILE_CACHE`); this table rendered by "
             f"`{meta['command']}`. Machine: {meta['machine']}. Every plan of a model executed "
             f"interleaved{meta['rounds']}; measured: the median step with its 95 % interval (order statistics). "
             "Replayed: the run's own plan on the operator times of its recorded step (the median step of the "
             "last round, whose messages are recorded) and the messages and links calibrated on all runs, "
             "against that step's time (recorded). "
             "Predicted: profiled costs, calibrated on the one-device and random plans of every model; held out: "
             "calibrated on the other models' plans only. Executed: the model's operators at the times its "
             "one-device run measured, messages fitted on its one-device and random plans "
             "(docs/execution.md, Executed costs). Preset: the uncalibrated `local-cpu-2` prediction.", "",
             "| model | plan | transfers | steps | measured ms (95 % CI) | recorded | replayed | predicted "
             "| held out | executed | preset |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for x in out:
        m = x["measured_ms"]
        cells = " | ".join(f"{x[k]:.2f} ({pct(x[k], x['recorded_ms'] if k == 'replayed_ms' else m)})"
                           for k in COLUMNS)
        lines.append(f"| {x['model']} | {x['method']} | {x['transfers']} | {x['steps']} | {m:.2f} "
                     f"({x['ci'][0]:.2f}-{x['ci'][1]:.2f}) | {x['recorded_ms']:.2f} | {cells} |")
    med, worst = s["median"], s["worst"]
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    lines += ["", "## Summary", "",
              "| figure | replay (all plans) | predicted (methods' plans) | held-out models "
              "| executed (methods' plans) | preset |", "|---|---:|---:|---:|---:|---:|",
              "| median \\|error\\| | " + " | ".join(f"{100 * med[k]:.1f} %" for k in COLUMNS) + " |",
              "| worst \\|error\\| | " + " | ".join(f"{100 * worst[k]:.1f} %" for k in COLUMNS) + " |",
              "", "Per model, over the one-device plan and the methods' plans: Kendall's tau of the predicted "
                  "against the measured order, over all pairs and over the pairs whose measured intervals are "
                  "disjoint (separated); the predicted best against the measured best, and whether the measured "
                  "intervals of the two overlap.", "",
              "| model | tau (calibrated) | tau (executed) | tau separated (calibrated / executed) | tau (preset) | "
              "best measured | best predicted (calibrated / executed) | same best | within the intervals |",
              "|---|---:|---:|---:|---:|---|---|---|---|"]
    for m, p in s["per_model"].items():
        lines.append(f"| {m} | {p['tau']:+.2f} | {p['tau_executed']:+.2f} | {p['tau_separated']:+.2f} / "
                     f"{p['tau_separated_executed']:+.2f} | {p['tau_preset']:+.2f} | {p['best_measured']} | "
                     f"{p['best_predicted']} / {p['best_predicted_executed']} | {yes(p['same_best'])} / "
                     f"{yes(p['same_best_executed'])} | {yes(p['not_separated'])} / "
                     f"{yes(p['not_separated_executed'])} |")
    lines += ["", f"Links: {'one transfer at a time (queues)' if s['congestion'] else 'transfers overlap'}, the "
                  "better replay of the training plans; with the other model the replays' median |error| is "
                  f"{100 * s['replay_queue']['median']:.1f} %, worst {100 * s['replay_queue']['worst']:.1f} % "
                  "(with queues)." if not s["congestion"] else ""]
    own = s["replay_per_model"]
    lines += ["", f"Replayed with the messages and links fitted on each model's own runs (not pooled over the "
                  f"models): median |error| {100 * own['median']:.1f} %, worst {100 * own['worst']:.1f} %."]
    w = s["wake_ups"]
    lines += ["", f"Blocked receives ({w['samples']} messages whose receiver waited for them): beyond the time "
                  "its bytes take on the link (each model's own fit), the wait ended "
                  f"{w['median']:.3f} ms after the message departed at the median, {w['p90']:.2f} ms at the 90th "
                  f"percentile, {w['p99']:.2f} ms at the 99th, {w['max']:.2f} ms at most; "
                  f"{100 * w['late_share']:.1f} % took over {w['late_ms']:g} ms. The replays off by more than 10 % "
                  "on their own model's fit, with their waits over that:", "",
                  "| model | plan | replay error | recorded step ms | waits over the limit (ms) |",
                  "|---|---|---:|---:|---|"]
    lines += [f"| {x['model']} | {x['method']} | {100 * x['error']:+.1f} % | {x['step_ms']:.2f} | "
              f"{', '.join(f'{t:.2f}' for t in x['late']) or '-'} |" for x in w["worst"]]
    n = len(s["per_model"])
    for label, suffix in (("calibrated", ""), ("executed", "_executed")):
        taus = [p["tau" + suffix] for p in s["per_model"].values()]
        sep = [p["tau_separated" + suffix] for p in s["per_model"].values()]
        same = sum(p["same_best" + suffix] for p in s["per_model"].values())
        near = sum(p["not_separated" + suffix] for p in s["per_model"].values())
        lines += ["", f"{label.capitalize()}: median tau {statistics.median(taus):+.2f} over {n} models "
                      f"({statistics.median(sep):+.2f} over separated pairs); the same best plan on {same}/{n} "
                      f"models ({near}/{n} within the measured intervals)."]
    again = s["one_device_again"]
    if again:
        lines += ["", f"One-device plans measured again (a method's plan that put every node on one device, "
                      f"{len(again)} runs, not fitted on): executed costs predict them within "
                      f"{100 * max(again):.1f} % (median {100 * statistics.median(again):.1f} %)."]
    lines += ["",
              "Calibrated figures (one-device and random plans): "
              f"`{json.dumps({k: s['calibration'][k] for k in FIGURES}, sort_keys=True)}`",
              ""]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, models=list(MODELS), steps=15, time_limit=20.0,
               out=ROOT / "results" / "execution" / "calibration", fresh=False,
               help={"out": "folder of runs.jsonl.gz and README.md",
                     "fresh": "start over instead of resuming from OUT/runs.jsonl.gz"})
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=60,
                        help="per plan: rounds of --steps steps run until every median's 95 %% interval is within "
                             "+-3 %% or this many steps (default 60)")
    parser.add_argument("--analyse-only", action="store_true", help="no execution: the table from the stored rows")


def run(args) -> None:
    import platform
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.jsonl.gz"
    rows = []
    if path.exists() and not args.fresh:
        with gzip.open(path, "rt") as fh:
            rows = [json.loads(x) for x in fh if x.strip()]
    meta = {"command": args.command_line, "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    if not args.analyse_only:
        done = {r["model"] for r in rows}
        for name in args.models:
            if name in done:
                continue
            new = run_model(name, args.steps, args.max_steps, args.warmup, args.time_limit)
            rows += new
            with gzip.open(path, "wt") as fh:   # small enough to rewrite whole
                fh.write("".join(json.dumps(r) + "\n" for r in rows))
            print(f"{name}: {len(new)} plans measured", file=sys.stderr, flush=True)
    meta["date"] = " to ".join(sorted({r.get("date", "undated") for r in rows}))
    per_round = sorted({(r.get("steps_per_round", len(r["measured_steps_ms"])), r.get("max_steps")) for r in rows},
                       key=str)
    steps, cap = per_round[0]
    meta["measure"] = f"python -m benchmarks calibration --steps {steps}" + (f" --max-steps {cap}" if cap else "")
    meta["rounds"] = (f", in rounds of {steps} steps until every median's 95 % interval was within +-3 % or "
                      f"{cap} steps" if cap else "")
    table, summary = analyse(rows)
    (out / "README.md").write_text(markdown(table, summary, meta))
    from dnnplace.graphs.io import write_json
    from dnnplace.graphs.io.native import cluster_to_dict
    write_json(out / "cluster.json", cluster_to_dict(summary["cluster"]))   # for `dnnplace tune --cluster`
    print(markdown(table, summary, meta))
