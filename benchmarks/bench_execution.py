"""The simulator held to what runs: predicted vs measured training steps on this host.

Per model (tests/exec_models.py, loaded as FILE.py:FACTORY), device count (``local-cpu-N``:
N worker processes, one thread each) and method: capture the training step with
``measured:cpu`` costs (each operator timed on one thread, as the executor runs it),
solve the makespan problem, predict the step with the simulator (each device in the
plan's order; a placement without a schedule in the simulated FIFO order, which the
executor then follows), run the plan with ``dnnplace execute``'s engine and compare.

    .venv/bin/python -m benchmarks execution [--models mlp,cnn,...] [--devices 1,2]
        [--methods heft,dpos,celeritas,pesto] [--steps 7] [--out results/execution] [--fresh]

With ``--cuda`` (a host with a CUDA GPU): the operators are timed on the GPU and on one CPU
thread (``measured:cuda+measured:cpu``), the cluster is that GPU (``gpu0``) and one CPU
process (``cpu0``) whose link is timed on the executor's own path (send/recv through host
memory, ``gloo+host``), device count 1 is the whole step on the GPU and 2 the GPU plus the
CPU process; rows go to ``results/execution/gpu`` by default.

Rows are appended to ``OUT/runs.jsonl`` as each model finishes (a rerun skips the models
already there unless ``--fresh``); ``OUT/predicted-vs-measured.md`` is rewritten from all
rows each time. Summaries: median and worst |error|, whether the simulator and the
measurement pick the same best method, the executor's overhead (one device vs an eager
``loss.backward()`` + optimizer step) and the two-device speed-up of the best plan.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from benchmarks.options import add_shared
from benchmarks.paths import REPO as ROOT
from benchmarks.rows import read_jsonl, write_jsonl
from dnnplace.graphs.errors import InputError

MODELS_FILE = ROOT / "tests" / "exec_models.py"
# benchmark sizes: big enough that operators, not the interpreter, take most of a step
MODELS = {
    "mlp": ("mlp", ("256x512",), {"features": 512, "width": 1024}),
    "cnn": ("cnn", ("32x3x32x32",), {"width": 32}),
    "lstm": ("lstm", ("64x8x64",), {"features": 64, "hidden": 256}),
    "transformer": ("transformer", ("16x32x64",), {"d_model": 64, "ffn": 256}),
    "inception": ("inception", ("16x32x16x16",), {"c": 32, "w": 48}),
    "towers": ("two_towers", ("256x1024",), {"width": 1024}),
}
METHODS = {"heft": {}, "dpos": {}, "celeritas": {}, "pesto": {"coarsen_to": 40}}


def plans_for(inst, methods: dict, time_limit: float):
    """``[(method, Plan, predicted SimResult, solve seconds)]`` on ``inst``
    (:func:`dnnplace.tune_candidates.method_plans`)."""
    from dnnplace.tune_candidates import method_plans
    return method_plans(inst, methods, time_limit)


def gpu_cluster():
    """The GPU ``gpu0`` and one CPU process ``cpu0``, linked as the executor sends between
    them: through host memory (:func:`~dnnplace.pytorch.capture.links.time_p2p_pairs` with
    ``gloo+host``, one CPU thread per process)."""
    from dnnplace.pytorch.capture.links import cluster_from_fits, time_p2p_pairs
    staged = time_p2p_pairs(2, backend="gloo+host", threads=1)[(0, 1)]
    print(f"gpu0-cpu0 through host memory: beta0 {staged.fit.beta0 * 1e6:.1f} us, "
          f"{1e-9 / staged.fit.beta1 if staged.fit.beta1 > 0 else float('inf'):.2f} GB/s", file=sys.stderr)
    return cluster_from_fits(1, staged, staged, gpu_memory=0.9 * _gpu_memory(), name="gpu0+cpu0")


def _gpu_memory() -> float:
    import torch
    return float(torch.cuda.get_device_properties(0).total_memory)


def run_model(name: str, devices: list[int], methods: dict, steps: int, warmup: int, time_limit: float,
              gpu=None) -> list[dict]:
    """Rows of one model; ``gpu``: the cluster of :func:`gpu_cluster` (``--cuda``)."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io.native import cluster_to_dict
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.pytorch.execution.launch import execute
    spec, graph = model_graph(name, cuda=gpu is not None)
    rows = []
    for n_dev in devices:
        cluster = gpu if gpu is not None else cluster_preset(f"local-cpu-{n_dev}", graph)
        inst = Instance(graph, cluster, f"bench:{name}")
        if gpu is not None and n_dev == 1:   # the whole step on the GPU
            plans = [one_device_plan(inst, "gpu0")]
        else:
            plans = plans_for(inst, methods if n_dev > 1 else {"heft": {}}, time_limit)
        measured = execute(spec, [p for _, p, _, _ in plans], list(cluster.names), steps=steps, warmup=warmup,
                           timeout_s=600, torch_devices={"gpu0": "cuda:0"} if gpu is not None else None)
        for (method, plan, sim, took), m in zip(plans, measured):
            d = m.to_dict()
            rows.append({"model": name, "devices": n_dev, "method": method if n_dev > 1 else "one device",
                         "nodes": graph.n, "predicted_ms": float(sim.makespan), "measured_ms": d["measured_step_ms"],
                         "measured_min_ms": d["measured_min_ms"], "measured_max_ms": d["measured_max_ms"],
                         "eager_ms": d["eager_step_ms"], "matches_reference": d["matches_reference"],
                         "transfers": d["transfers"], "transfer_bytes": d["transfer_bytes"],
                         "peak_rss_MB": {k: v / 2**20 for k, v in d["peak_rss_bytes"].items()},
                         "cost_sum_ms": float(graph.compute[:, graph.kind_index(cluster.kinds[0])].sum()),
                         "solve_s": took, "plan": {"placement": dict(plan.placement), "start": dict(plan.start)},
                         **({"cluster": cluster_to_dict(cluster),
                             "peak_cuda_MB": {k: v / 2**20 for k, v in d["peak_cuda_bytes"].items() if v}}
                            if gpu is not None else {})})
            r = rows[-1]
            print(f"{name:<12} {n_dev} {r['method']:<11} predicted {r['predicted_ms']:9.3f} measured "
                  f"{r['measured_ms']:9.3f} ms ({100 * (r['predicted_ms'] / r['measured_ms'] - 1):+6.1f} %)",
                  file=sys.stderr, flush=True)
    return rows


def one_device_plan(inst, device: str):
    """``(method, Plan, predicted SimResult, 0)`` of the whole step on ``device``, in the
    simulator's FIFO order (:func:`dnnplace.tune_candidates.one_device_plan`)."""
    from dnnplace.tune_candidates import one_device_plan as whole_step
    return whole_step(inst, device)


def model_graph(name: str, cuda: bool = False):
    """The model's captured training graph with ``measured:cpu`` costs (cached profile), or
    with ``cuda``: ``measured:cuda+measured:cpu`` (a GPU column and a CPU column)."""
    from dnnplace.pytorch.capture import capture
    from dnnplace.pytorch.execution.worker import ModelSpec, load
    factory, inputs, params = MODELS[name]
    spec = ModelSpec(spec=f"{MODELS_FILE}:{factory}", inputs=inputs, loss="cross_entropy", params=params)
    net, ins, loss_fn = load(spec)
    cost = "measured:cuda+measured:cpu" if cuda else "measured:cpu"
    return spec, capture(net, ins, loss_fn, cost=cost, name=name).graph


def repredict(rows: list[dict]) -> list[dict]:
    """The rows' predictions again with the current simulator and ``local-cpu-N`` preset
    (after a change of the link model or the per-operator overhead), from the stored plans
    and the cached operator profiles; the measurements stay."""
    from dnnplace.execute_command import predict
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io.native import cluster_from_dict
    from dnnplace.graphs.presets import cluster_preset
    graphs = {}
    for r in rows:
        cuda = "cluster" in r
        if (r["model"], cuda) not in graphs:
            graphs[r["model"], cuda] = model_graph(r["model"], cuda)[1]
        g = graphs[r["model"], cuda]
        cl = cluster_from_dict(r["cluster"]) if cuda else cluster_preset(f"local-cpu-{r['devices']}", g)
        inst = Instance(g, cl, f"bench:{r['model']}")
        r["predicted_ms"] = float(predict(inst, r["plan"]["placement"], r["plan"]["start"]).makespan)
    return rows


def summary(rows: list[dict]) -> list[str]:
    errs = [abs(r["predicted_ms"] / r["measured_ms"] - 1) for r in rows]
    lines = [f"- rows: {len(rows)}; median |error| {100 * statistics.median(errs):.1f} %, worst "
             f"{100 * max(errs):.1f} %; all matched the eager step: {all(r['matches_reference'] for r in rows)}"]
    one = [r for r in rows if r["devices"] == 1]
    if one:  # measured = sum of operator costs + nodes * overhead on one device (no transfers)
        per_op = [(r["measured_ms"] - r["cost_sum_ms"]) / r["nodes"] for r in one]
        lines.append(f"- per-operator overhead fitted on the one-device runs (median of "
                     f"{', '.join(f'{1e3 * x:.1f}' for x in per_op)} us): {1e3 * statistics.median(per_op):.1f} us")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["devices"] > 1:
            groups.setdefault((r["model"], r["devices"]), []).append(r)
    same = [min(g, key=lambda r: r["predicted_ms"])["method"] == min(g, key=lambda r: r["measured_ms"])["method"]
            for g in groups.values() if len(g) > 1]
    # ties: a measured difference under 3 % is noise on this host, not a different ranking
    near = [min(g, key=lambda r: r["predicted_ms"])["measured_ms"] <= 1.03 * min(r["measured_ms"] for r in g)
            for g in groups.values() if len(g) > 1]
    if same:
        lines.append(f"- same best method by prediction and by measurement: {sum(same)}/{len(same)}; the predicted "
                     f"best within 3 % of the measured best: {sum(near)}/{len(near)}")
    for r in rows:
        if r["devices"] == 1:
            lines.append(f"- {r['model']}: one device {r['measured_ms']:.2f} ms vs eager {r['eager_ms']:.2f} ms "
                         f"(executor overhead {100 * (r['measured_ms'] / r['eager_ms'] - 1):+.1f} %)")
            best2 = min((x for x in rows if x["model"] == r["model"] and x["devices"] == 2),
                        key=lambda x: x["measured_ms"], default=None)
            if best2:
                lines.append(f"  - best 2-device plan ({best2['method']}): {best2['measured_ms']:.2f} ms, speed-up "
                             f"{r['measured_ms'] / best2['measured_ms']:.2f}x")
    return lines


def markdown(rows: list[dict], meta: dict) -> str:
    if any("cluster" in r for r in rows):
        head = ["# Predicted vs measured training steps (a GPU and a CPU worker process on this host)", "",
                f"Command: `{meta['command']}`. Machine: {meta['machine']}. Each row: the simulator's step "
                "(measured:cuda+measured:cpu operator costs; the gpu0-cpu0 link timed through host memory as "
                "the executor sends) and the median of the measured steps (min-max in brackets); devices 1: the "
                "whole step on the GPU, 2: the GPU and one CPU process (one thread). The GPU is synchronized "
                "after every operator (each operator's own time, as the simulator charges it).", ""]
    else:
        head = ["# Predicted vs measured training steps (CPU worker processes on this host)", "",
                f"Command: `{meta['command']}`. Machine: {meta['machine']}. Each row: the simulator's step "
                "(measured:cpu operator costs, local-cpu-N links) and the median of the measured steps "
                "(min-max in brackets), one process per device, one thread each.", ""]
    out = head + ["| model | nodes | devices | method | predicted ms | measured ms | error | transfers | peak RSS MB |",
                  "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rss = "/".join(f"{v:.0f}" for v in r["peak_rss_MB"].values())
        out.append(f"| {r['model']} | {r['nodes']} | {r['devices']} | {r['method']} | {r['predicted_ms']:.2f} | "
                   f"{r['measured_ms']:.2f} ({r['measured_min_ms']:.2f}-{r['measured_max_ms']:.2f}) | "
                   f"{100 * (r['predicted_ms'] / r['measured_ms'] - 1):+.1f} % | {r['transfers']} | {rss} |")
    return "\n".join(out + ["", "## Summary", "", *summary(rows), ""])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, models=list(MODELS), steps=7, time_limit=20.0, out=ROOT / "results" / "execution", fresh=False,
               help={"out": "folder of runs.jsonl and predicted-vs-measured.md",
                     "fresh": "start over (delete OUT/runs.jsonl) instead of skipping the models already there"})
    parser.add_argument("--devices", default="1,2", help="device counts, comma-separated (default: %(default)s)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--cuda", action="store_true",
                        help="a CUDA GPU and a CPU process (see the docstring); OUT defaults to results/execution/gpu")
    parser.add_argument("--repredict", action="store_true",
                        help="no execution: recompute the stored rows' predictions (current simulator and preset)")


def run(args) -> None:
    import platform
    out = Path(args.out)
    if args.cuda and out == ROOT / "results" / "execution":
        out = out / "gpu"
    out.mkdir(parents=True, exist_ok=True)
    runs = out / "runs.jsonl"
    rows = read_jsonl(runs) if runs.exists() and not args.fresh else []
    if args.fresh and runs.exists():
        runs.unlink()
    meta = {"command": args.command_line, "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    gpu = None
    if args.cuda and not args.repredict:
        import torch
        meta["machine"] += f", {torch.cuda.get_device_name(0)}"
        gpu = gpu_cluster()
    if args.repredict:
        rows = repredict(rows)
        write_jsonl(runs, rows)
        (out / "predicted-vs-measured.md").write_text(markdown(rows, meta))
        print("\n".join(summary(rows)))
        return
    done = {r["model"] for r in rows}
    methods = {m: METHODS[m] for m in args.methods.split(",")}
    devices = [int(d) for d in args.devices.split(",")]
    for name in args.models:
        if name in done:
            continue
        try:
            new = run_model(name, devices, methods, args.steps, args.warmup, args.time_limit, gpu)
        except InputError as exc:   # e.g. a CPU-only operator of the trace on the GPU
            print(f"{name}: not run: {exc}", file=sys.stderr, flush=True)
            continue
        with runs.open("a") as f:
            for r in new:
                f.write(json.dumps(r) + "\n")
        rows += new
        (out / "predicted-vs-measured.md").write_text(markdown(rows, meta))
    print("\n".join(summary(rows)))
