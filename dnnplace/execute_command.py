"""``dnnplace execute MODEL RESULT.json``: run a plan, measure it, compare with the simulator."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError

__all__ = ["cmd_execute", "add_parser", "add_model_flags", "predict", "model_spec", "gpu_map", "check_flags",
           "check_torchrun", "torchrun_rank"]


def model_spec(args: argparse.Namespace):
    """The :class:`~dnnplace.pytorch.execution.worker.ModelSpec` of the command line (as ``capture``)."""
    from dnnplace.capture_commands import model_params
    from dnnplace.pytorch.execution.worker import ModelSpec
    params = model_params(args.param)
    return ModelSpec(spec=args.model, inputs=tuple(args.input), loss=args.loss, batch=args.batch, seq=args.seq,
                     params=params, optimizer=args.optimizer, lr=args.lr)


def predict(inst: Any, placement: dict, order: dict | None) -> Any:
    """The simulator's step on the plan, on the instance's graph costs and cluster: each
    device in the plan's order (``{node: value}``, lowest first: a result's priorities
    or start times, :func:`~dnnplace.graphs.io.result_order`), or, for a placement
    without one, TensorFlow's FIFO ready queue (whose order the executor then follows)."""
    import numpy as np

    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.placement import Placement
    pl = Placement.from_mapping(inst.graph, inst.cluster, placement)
    links = inst.cluster.default_congestion
    if not order:
        return simulate(pl, policy="fifo", congestion=links)
    return simulate(pl, policy="order", priorities=np.array([float(order[v]) for v in inst.graph.ids]),
                    congestion=links)


def gpu_map(names: list[str], kinds: list[str]) -> dict[str, str]:
    """``--cuda``: the cluster's devices of a kind other than ``cpu``, in cluster order, on
    ``cuda:0``, ``cuda:1``, ... (the launcher refuses more devices than GPUs)."""
    accel = [d for d, k in zip(names, kinds) if k != "cpu"]
    if not accel:
        raise InputError(f"--cuda: the cluster has no GPU devices (devices: {', '.join(names)})")
    return {d: f"cuda:{i}" for i, d in enumerate(accel)}


def check_flags(args: argparse.Namespace) -> None:
    """The flags' values, before anything is read or run (one :class:`InputError` each):
    counts, the deadline, the learning rate, flags that do not go together."""
    import math
    for flag, value, low in (("--steps", args.steps, 1), ("--warmup", args.warmup, 0), ("--batch", args.batch, 1),
                             ("--seq", args.seq, 1), ("--microbatches", args.microbatches, 1)):
        if value is not None and value < low:
            raise InputError(f"{flag} {value}: must be an integer >= {low}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise InputError(f"--timeout {args.timeout:g}: must be a number of seconds > 0")
    if not (math.isfinite(args.lr) and args.lr >= 0):
        raise InputError(f"--lr {args.lr:g}: must be a finite learning rate >= 0")
    if args.pipeline and args.gantt:
        raise InputError("--gantt draws each operator's measured interval of a placed step; --pipeline records "
                         "whole steps only: leave out --gantt or --pipeline")
    check_torchrun(args)


def check_torchrun(args: argparse.Namespace) -> None:
    """``--torchrun`` only where torchrun started the process, and only with flags it runs;
    a process that torchrun started without ``--torchrun`` would run the whole plan itself."""
    from dnnplace.pytorch.execution.launch import torchrun_env
    if not getattr(args, "torchrun", False):
        if os.environ.get("TORCHELASTIC_RUN_ID") is not None:
            raise InputError(f"this process was started by torchrun (RANK {os.environ.get('RANK')}, WORLD_SIZE "
                             f"{os.environ.get('WORLD_SIZE')}): pass --torchrun, so that each process runs one "
                             "device of the plan")
        return
    for flag in ("pipeline", "cuda"):
        if getattr(args, flag):
            raise InputError(f"--torchrun runs a placed step on CPU processes: leave out --{flag}")
    torchrun_env()


def torchrun_rank(args: argparse.Namespace, placement: dict, result: str) -> int | None:
    """Under ``--torchrun``: this process's rank, once WORLD_SIZE is checked against the
    number of devices the plan uses (one process per device); otherwise ``None``."""
    if not getattr(args, "torchrun", False):
        return None
    from dnnplace.pytorch.execution.launch import torchrun_env
    rank, world = torchrun_env()
    used = sorted(set(placement.values()))
    if world != len(used):
        raise InputError(f"--torchrun: torchrun started {world} process(es) (WORLD_SIZE {world}), but the plan in "
                         f"{result} uses {len(used)} device(s) ({', '.join(used)}): start one process per device "
                         f"(--nnodes x --nproc-per-node = {len(used)})")
    return rank


def cmd_execute(args: argparse.Namespace) -> int:
    """Run the plan in RESULT.json across processes; print and write the measurement."""
    check_flags(args)
    from dnnplace.command_args import check_out, cluster_file
    from dnnplace.graphs.io import (
        check_result_doc,
        graph_fingerprint,
        instance_for_placement,
        read_cluster,
        read_json,
        result_order,
        write_json,
    )
    from dnnplace.graphs.io.native import cluster_to_dict
    from dnnplace.pytorch.execution.launch import Plan, execute
    from dnnplace.pytorch.execution.reference import captured_meta
    model_file = args.model.rpartition(":")[0]  # mymodel.py:Net reads mymodel.py
    rank0 = os.environ.get("RANK", "0") == "0" or not args.torchrun   # under torchrun, rank 0 alone writes
    check_out([("--out", args.out), ("--gantt", args.gantt)] if rank0 else [],
              [("model", model_file or None), ("result", args.result), ("--graph", args.graph),
               ("--cluster", cluster_file(args.cluster))])  # before any work
    doc = read_json(args.result)
    if not isinstance(doc, dict):
        raise InputError(f"{args.result}: expected a result JSON or a {{node: device}} map")
    placement = doc["placement"] if isinstance(doc.get("placement"), dict) else doc
    given = result_order(doc)   # its priorities, else its start times
    if not all(isinstance(v, str) for v in placement.values()):
        raise InputError(f"{args.result}: 'placement' must map node ids to device names")
    rank = torchrun_rank(args, placement, args.result)
    graph_path = args.graph or (doc.get("instance") if isinstance(doc.get("instance"), str) else None)
    inst = None
    if graph_path and Path(graph_path).is_file():
        inst = instance_for_placement(graph_path, args.cluster, doc, args.result)  # --cluster, else the result's
        check_result_doc(doc, inst.graph, args.result, graph_path)  # a result of another graph: exit 2
    if inst is not None and inst.cluster is not None:
        names, kinds, note = list(inst.cluster.names), list(inst.cluster.kinds), None
    elif args.cluster:
        cl = read_cluster(args.cluster, None)   # a preset or a cluster file
        names, kinds, note = list(cl.names), list(cl.kinds), "no graph with costs: give --graph GRAPH.json"
    else:
        names = sorted(set(placement.values()))
        kinds = ["cpu" if d.startswith("cpu") else "gpu" for d in names]
        note = "no graph with costs and cluster: give --graph GRAPH.json and --cluster (e.g. local-cpu-2)"
    spec = model_spec(args)
    if args.pipeline:
        if args.cuda:
            raise InputError("--cuda runs placed steps; the pipeline (--pipeline) runs on CPU processes only")
        from dnnplace.pytorch.execution.pipeline import cmd_pipeline
        return cmd_pipeline(args, spec, placement, names, inst)
    sim = predict(inst, placement, given) if note is None else None
    order = given or (dict(zip(inst.graph.ids, sim.schedule.priorities().tolist())) if sim is not None else None)
    gpus = gpu_map(names, kinds) if args.cuda else {}
    runs = execute(spec, [Plan(placement, order)], names, steps=args.steps, warmup=args.warmup,
                   timeout_s=args.timeout, torch_devices=gpus, captured=captured_meta(inst), torchrun=rank is not None)
    if not runs:   # a torchrun process other than rank 0: it ran its device, rank 0 reports
        return 0
    m = runs[0]
    out = {"model": args.model, "result": args.result, **m.to_dict(),
           "graph": str(graph_path) if inst is not None else None,   # what `dnnplace calibrate` reads
           "cluster": cluster_to_dict(inst.cluster) if inst is not None and inst.cluster is not None else None,
           "plan": {"placement": placement, "start": order}}
    out["graph_fingerprint"] = graph_fingerprint(inst.graph) if inst is not None else doc.get("graph_fingerprint")
    out["predicted_step_ms"] = float(sim.makespan) if sim is not None else None
    out["prediction"] = note or ("simulator, each device in the plan's order" if given else
                                 "simulator, FIFO ready queue (the plan has no schedule; the executor ran "
                                 "the simulated order)")
    if sim is not None and out["measured_step_ms"] > 0:
        out["error_pct"] = 100.0 * (out["predicted_step_ms"] - out["measured_step_ms"]) / out["measured_step_ms"]
    say = print
    on = ", ".join(f"{d} on {t}" for d, t in m.torch_devices.items() if t != "cpu")
    say(f"measured step: {out['measured_step_ms']:.3f} ms (median of {args.steps}; min "
        f"{out['measured_min_ms']:.3f}, max {out['measured_max_ms']:.3f}) on {len(m.devices)} process(es)"
        f"{' (' + on + ')' if on else ''}")
    say(f"predicted: {'-' if sim is None else format(out['predicted_step_ms'], '.3f') + ' ' + inst.graph.unit} "
        f"({out['prediction']})")
    say(f"eager single-process step: {m.eager_step_ms:.3f} ms")
    say(f"matches the eager step: {'yes' if m.matches_reference else 'NO'} (loss {m.loss:.6g} vs "
        f"{m.reference_loss:.6g}, {m.n_grads_checked} gradients, max |diff| {m.max_abs_grad_diff:.3g})")
    say(f"transfers: {m.transfers} per step ({m.transfer_bytes:,} bytes) in {m.n_messages} messages")
    if args.gantt:
        from dnnplace.pytorch.execution.timeline import plot_measured
        plot_measured(m.ops, sim, args.gantt, title=f"{args.model}: measured vs simulated", messages=m.messages)
        say(f"wrote {args.gantt}")
    if args.out:
        write_json(args.out, out, indent=None)
        say(f"wrote {args.out}")
    return 0 if m.matches_reference else 1


def add_model_flags(p: Any) -> None:
    """The flags that say which step runs (as ``capture`` takes them; :func:`model_spec`
    reads them): inputs, loss, batch, sequence length, builder options, optimizer."""
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="example input, e.g. 16x3x32x32 or 16x10:int64 (repeatable, as for capture)")
    p.add_argument("--loss", choices=["sum", "mse", "cross_entropy"], help="loss of a user model (default sum)")
    p.add_argument("--batch", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="model builder option")
    p.add_argument("--optimizer", default="adam", choices=["adam", "momentum", "sgd"],
                   help="as captured (default adam)")
    p.add_argument("--lr", type=float, default=1e-3)


def add_parser(sub: Any) -> None:
    """The ``execute`` subcommand, added by :func:`dnnplace.cli.build_parser`."""
    p = sub.add_parser("execute", help="run a result's placement and order across processes (torch.distributed) "
                                       "and measure it",
                       description="One OS process per device (gloo), every tensor sent once to each device that "
                                   "consumes it, each device running its operators in the result's order; checks "
                                   "the loss and every gradient against an eager single-process step.")
    p.add_argument("model", help="zoo name, FILE.py:FACTORY or package.module:FACTORY (as for capture)")
    p.add_argument("result", help="result JSON (placement, and priorities or start times) or a {node: device} map")
    add_model_flags(p)
    p.add_argument("--graph", help="the graph with costs the plan was made on (default: the result's instance)")
    p.add_argument("--cluster", help="cluster preset or file for the prediction and the device names (default: the "
                                     "cluster the result was solved on)")
    p.add_argument("--steps", type=int, default=5, help="measured steps after the warm-up (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up steps (default 2)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a stuck step is stopped")
    p.add_argument("--cuda", action="store_true",
                   help="run the cluster's GPU devices on this host's CUDA GPUs (cuda:0, cuda:1, ... in cluster "
                        "order; one GPU per device; transfers through host memory); default: every device a CPU "
                        "process")
    p.add_argument("--pipeline", action="store_true",
                   help="run a contiguous max-load split of a forward model as a pipeline (torch.distributed."
                        "pipelining)")
    p.add_argument("--torchrun", action="store_true",
                   help="this process is one that torchrun started: rank r runs the plan's r-th device (cluster "
                        "order), gloo over torchrun's rendezvous; rank 0 checks against the eager step and reports "
                        "(docs/execution.md, 'Past one host')")
    p.add_argument("--microbatches", type=int, default=4, help="micro-batches per step with --pipeline")
    p.add_argument("--schedule", choices=["gpipe", "1f1b"], default="gpipe", help="pipeline schedule (--pipeline)")
    p.add_argument("--gantt", metavar="PNG", help="measured timeline above the simulated one")
    p.add_argument("--out", metavar="RUN.json")
    p.set_defaults(func=cmd_execute)

