"""``dnnplace calibrate RUN.json [RUN.json ...] --out CLUSTER.json``: the cost model fitted to executed runs.

Each RUN.json is what ``dnnplace execute --out`` wrote: the plan, the measured step and its
timeline (operators and messages). The fit (:mod:`dnnplace.pytorch.execution.calibration`,
docs/execution.md, Calibration) gives every device its per-message costs, per-operator
overhead and speed and every link its latency and bandwidth, written as a cluster file that
``solve``, ``simulate``, ``evaluate`` and ``execute`` take with ``--cluster``. For each run
whose graph is at hand the command prints the replay (the run's own plan simulated on its
measured operator times and the calibrated messages and links) and the prediction (on the
graph's profiled costs and the calibrated cluster) against the measured step.

With ``--costs-out GRAPH.json`` (every run of one graph, one of them its one-device plan)
the graph is written with its **executed costs**, the one-device run's operator times, and
``--out`` is the cluster fitted to that graph's runs around them
(:mod:`dnnplace.pytorch.execution.executed_costs`, docs/execution.md, Executed costs): the
pair that ``solve`` and ``tune`` then optimise on.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["cmd_calibrate", "add_parser", "calibrate_runs"]


def _graph_of(run_doc: dict, args: argparse.Namespace, source: str) -> Any:
    """The instance a run was made on: ``--graph``, else the run's own ``graph`` path;
    the cluster ``--cluster``, else the run's (``None`` without a graph)."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import load_instance, read_cluster
    from dnnplace.graphs.io.native import cluster_from_dict
    path = args.graph or run_doc.get("graph")
    if not path:
        return None
    if not Path(path).is_file():
        raise InputError(f"{source}: its graph {path!r} is not a file: give --graph GRAPH.json")
    inst = load_instance(path)
    if args.cluster:
        return Instance(inst.graph, read_cluster(args.cluster, inst.graph), inst.source)
    if isinstance(run_doc.get("cluster"), dict):
        return Instance(inst.graph, cluster_from_dict(run_doc["cluster"]), inst.source)
    return inst


def calibrate_runs(paths: list[str], args: argparse.Namespace) -> tuple[Any, list[dict], Any]:
    """``(calibrated cluster, one row per run: measured, replayed and predicted step, the
    graph with executed costs or None)``; with ``args.costs_out`` the cluster is the one
    fitted to the executed costs and each row has its ``executed_ms``."""
    import numpy as np

    from dnnplace.graphs.io import read_json
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.pytorch.execution.calibration import (
        calibrated_cluster,
        fit,
        links_queue,
        read_run,
        replays,
        simulate_run,
    )
    runs, insts, costs = [], [], []
    for path in paths:
        doc = read_json(path)
        run = read_run(doc, path)
        inst = _graph_of(doc, args, path)
        runs.append(run)
        insts.append(inst)
        if inst is not None and inst.graph.unit != "ms":
            raise InputError(f"{path}: its graph's times are in {inst.graph.unit!r}; calibration needs a graph in ms "
                             "(as capture writes)")
        costs.append(None if inst is None else
                     dict(zip(map(str, inst.graph.ids), np.nanmin(inst.graph.compute, axis=1).tolist())))
    cal = fit(runs, costs)
    base = next((i.cluster for i in insts if i is not None and i.cluster is not None), None)
    if base is None:
        if not args.cluster:
            raise InputError("no run names its graph and cluster: give --cluster (e.g. local-cpu-2) and --graph")
        base = cluster_preset(args.cluster)
    rows = []
    for path, run, inst in zip(paths, runs, insts):
        rows.append({"run": path, "measured_ms": run.step_ms, "recorded_ms": run.replay_target_ms,
                     **({} if inst is None else replays(inst.graph, inst.cluster, cal, run))})
    queue = links_queue(rows)
    cluster = calibrated_cluster(base, cal, congestion=queue)
    for row, run, inst in zip(rows, runs, insts):
        row["replayed_ms"] = row.pop("replayed_ms" if queue else "replayed_ms_overlap", None)
        row.pop("replayed_ms_overlap", None)
        row["predicted_ms"] = None if inst is None else simulate_run(
            inst.graph, calibrated_cluster(inst.cluster, cal, congestion=queue), run, congestion=queue).makespan
    if not getattr(args, "costs_out", None):
        return cluster, rows, None
    import json

    from dnnplace.graphs.io.fingerprint import graph_fingerprint
    from dnnplace.pytorch.execution.executed_costs import fit_model
    if any(i is None for i in insts) or len({json.dumps(graph_fingerprint(i.graph), sort_keys=True)
                                             for i in insts}) > 1:
        raise InputError("--costs-out needs every run made on one graph (give --graph GRAPH.json)")
    graph, cluster, _ = fit_model(insts[0].graph, base, runs, congestion=queue)
    for row, run in zip(rows, runs):
        row["executed_ms"] = float(simulate_run(graph, cluster, run, congestion=queue).makespan)
    return cluster, rows, graph


def _pct(a: float | None, b: float) -> str:
    return "-" if a is None else f"{100.0 * (a - b) / b:+.1f}%"


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit, print the figures and the per-run check, write the cluster file."""
    from dnnplace.command_args import check_out, cluster_file
    from dnnplace.graphs.io import write_json
    from dnnplace.graphs.io.native import cluster_to_dict
    check_out([("--out", args.out), ("--costs-out", args.costs_out)],
              [*(("run", p) for p in args.runs), ("--graph", args.graph), ("--cluster", cluster_file(args.cluster))])
    cluster, rows, graph = calibrate_runs(args.runs, args)
    cal = cluster.meta["calibration"]
    print(f"calibrated from {cal['samples']['runs']} run(s): {cal['samples']['operators']} operators, "
          f"{cal['samples']['messages']} messages ({cal['samples']['blocked']} with a blocked receiver); links: "
          f"{'one transfer at a time' if cluster.default_congestion else 'transfers overlap'} (the replays' "
          "better fit; the cluster's default congestion)")
    print("| device | send ms/msg | recv ms/msg | op overhead ms | speed |")
    print("|---|---:|---:|---:|---:|")
    for d in cluster.devices:
        print(f"| {d.name} | {d.send_overhead:.4f} | {d.recv_overhead:.4f} | {d.op_overhead:.4f} | {d.speed:.3f} |")
    for link in cal["links"]:
        print(f"link {link['src']}->{link['dst']}: {link['beta0_ms']:.4f} ms + {link['beta1_ms_per_byte'] * 1e6:.4f} "
              "ms/MB")
    if graph is not None:
        ex = cluster.meta["executed_costs"]
        print(f"executed costs: {graph.n} operators from {ex['one_device_run']} ({ex['one_device_ms']:.2f} ms); "
              f"per-operator overhead {ex['op_overhead_ms']:.4f} ms; per-message top-up {ex['send_top_up_ms']:.4f} ms "
              f"over {ex['spread_runs']} run(s) on more than one device")
    keys = ["replayed_ms", "predicted_ms", *(["executed_ms"] if graph is not None else [])]
    print("| run | measured ms (median) | recorded step ms | replayed ms | error (vs recorded) | predicted ms | error |"
          + (" executed ms | error |" if graph is not None else ""))
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if graph is not None else ""))
    for r in rows:
        shown = [f"{'-' if r[k] is None else f'{r[k]:.2f}'} | "
                 f"{_pct(r[k], r['recorded_ms' if k == 'replayed_ms' else 'measured_ms'])}" for k in keys]
        print(f"| {r['run']} | {r['measured_ms']:.2f} | {r['recorded_ms']:.2f} | {' | '.join(shown)} |")
    errs = [abs(r["replayed_ms"] - r["recorded_ms"]) / r["recorded_ms"] for r in rows if r["replayed_ms"] is not None]
    if errs:
        print(f"replay |error|: median {100 * statistics.median(errs):.1f}%, worst {100 * max(errs):.1f}%")
    doc = cluster_to_dict(cluster)
    doc["meta"]["calibration"]["runs"] = rows
    if graph is not None:
        from dnnplace.graphs.instance import Instance
        from dnnplace.graphs.io import save_instance
        save_instance(Instance(graph, cluster, args.costs_out), args.costs_out)
        print(f"wrote {args.costs_out}")
    write_json(args.out, doc)
    print(f"wrote {args.out}")
    return 0


def add_parser(sub: Any) -> None:
    """The ``calibrate`` subcommand, added by :func:`dnnplace.cli.build_parser`."""
    p = sub.add_parser("calibrate", help="fit per-message costs, links and per-operator overhead from executed runs",
                       description="Reads runs written by `dnnplace execute --out` (their operator and message "
                                   "timelines) and writes a cluster file with the fitted figures "
                                   "(docs/execution.md, Calibration).")
    p.add_argument("runs", nargs="+", metavar="RUN.json", help="executed runs (dnnplace execute --out)")
    p.add_argument("--out", required=True, metavar="CLUSTER.json", help="the calibrated cluster file to write")
    p.add_argument("--graph", help="the graph every run was made on (default: each run's own 'graph')")
    p.add_argument("--cluster", help="the cluster to calibrate (default: each run's own)")
    p.add_argument("--costs-out", metavar="GRAPH.json",
                   help="write the graph with its executed costs (the one-device run's operator times; every run "
                        "of one graph) and fit --out around them (docs/execution.md, Executed costs)")
    p.set_defaults(func=cmd_calibrate)
