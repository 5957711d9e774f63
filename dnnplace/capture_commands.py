"""``dnnplace capture`` and ``dnnplace profile-links``: PyTorch models and measured links
into the framework's files (:mod:`dnnplace.pytorch.capture`)."""

from __future__ import annotations

import argparse
import json

from dnnplace.graphs.errors import InputError

__all__ = ["cmd_capture", "cmd_profile_links", "model_params"]


def model_params(pairs: list[str]) -> dict:
    """``--param KEY=VALUE`` options of a model builder (values read as JSON where they parse)."""
    out = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--param {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def capture_one(args: argparse.Namespace, batch: int | None, over: dict, cost):
    """One capture (direct or ``--tiled``) at ``batch`` with the cost model(s) ``cost``: the
    instance and its name."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.pytorch.capture import capture
    from dnnplace.pytorch.capture.costs import model_origin
    from dnnplace.pytorch.capture.models import is_user_spec, load_model
    if is_user_spec(args.model):  # mymodel.py:Net -> mymodel-Net
        from pathlib import Path
        where, _, attr = args.model.rpartition(":")
        name = f"{Path(where).stem if where.endswith('.py') else where}-{attr}"
    else:
        name = args.model + "".join(f"-{k[0]}{v}" for k, v in over.items() if k in ("layers", "cells")) \
            + (f"-b{batch}" if batch else "") + (f"-s{args.seq}" if args.seq else "")
    if args.tiled:
        if args.inference:
            raise InputError("--tiled builds training graphs; leave out --inference")
        from dnnplace.pytorch.capture.zoo.parts import whole_model
        g = whole_model(args.model, cost=cost[0] if len(cost) == 1 else args.cost,
                        optimizer=args.optimizer, batch=batch, seq=args.seq, **over)
        return Instance(g.with_(name=name), None, f"capture:{name}"), name
    model, inputs, loss_fn = load_model(args.model, inputs=args.input, loss=args.loss, batch=batch, seq=args.seq,
                                        params=over)
    origin = model_origin(args.model, over, args.loss, batch=batch, seq=args.seq, inputs=args.input or None)
    inst = capture(model, inputs, loss_fn, training=not args.inference, cost=cost, name=name,
                   optimizer=args.optimizer, origin=origin)
    if is_user_spec(args.model) and inputs and inputs[0].dim():
        inst.graph.meta["batch"] = int(inputs[0].shape[0])  # a user model's batch: the first input's leading dim
    return inst, name


def _measured(cost: list) -> list:
    """The :class:`~dnnplace.pytorch.capture.costs.Measured` models among ``cost`` (a
    calibrated model's own measured one included)."""
    from dnnplace.pytorch.capture.costs import Calibrated, Measured
    return [c.measured if isinstance(c, Calibrated) else c for c in cost if isinstance(c, (Measured, Calibrated))]


def _costs_line(cost: list) -> str | None:
    """One line saying whether the measured costs of the last capture were measured or read
    from the profile cache (docs/execution.md, "Profile cache"), with the cache file; None
    when no cost model measures."""
    taken = [p for m in _measured(cost) for p in m.profiles]
    for m in _measured(cost):
        m.profiles.clear()
    if not taken:
        return None
    hits = [p for p in taken if p["hit"]]
    shown = hits if len(hits) == len(taken) else [p for p in taken if not p["hit"]]
    paths = [str(p["cache"]) for p in shown if p["cache"]]
    where = (paths[0] + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")) if paths else ""
    if len(hits) == len(taken):
        return f"costs: from the cache {where} (--fresh-costs re-measures)"
    return (f"costs: measured, written to {where}" if where else "costs: measured, not cached") \
        + (f" ({len(hits)} other profiles from the cache)" if hits else "")


def _batches(text: str) -> list[int]:
    """``--batches 8,16,32``: positive batch sizes, each once.

    >>> _batches("8,16")
    [8, 16]
    >>> _batches("8,0")
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: --batches '8,0': expected positive batch sizes, each once, ...
    """
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and int(p) > 0 for p in parts) or len(set(map(int, parts))) != len(parts):
        raise InputError(f"--batches {text!r}: expected positive batch sizes, each once, joined by commas, "
                         "e.g. 8,16,32")
    return [int(p) for p in parts]


def _batch_path(out: str, batch: int) -> str:
    """``g.json`` -> ``g-b8.json``."""
    from pathlib import Path
    p = Path(out)
    return str(p.with_name(f"{p.stem}-b{batch}{p.suffix or '.json'}"))


def cmd_capture(args: argparse.Namespace) -> int:
    """Capture a zoo model or the user's own (``FILE.py:FACTORY``, ``package.module:FACTORY``, resolved by
    :func:`dnnplace.pytorch.capture.models.load_model`) with costs and write its native graph JSON (one per
    batch size with ``--batches``: the profiles :class:`~dnnplace.graphs.batch_model.BatchModel` reads)."""
    from dnnplace.graphs.batch_model import check_profiles
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import save_instance
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.pytorch.capture import zoo
    from dnnplace.pytorch.capture.models import is_user_spec
    from dnnplace.pytorch.capture.ops import require_torch
    user = is_user_spec(args.model)
    if user:
        zoo_only = [flag for flag, v in (("--batch", args.batch), ("--batches", args.batches), ("--seq", args.seq),
                                         ("--layers", args.layers), ("--cells", args.cells), ("--tiled", args.tiled))
                    if v]
        if zoo_only:
            raise InputError(f"{args.model}: {', '.join(zoo_only)} apply to zoo models only; give your model's input "
                             "shapes with --input SHAPE[:dtype] and its factory's arguments with --param KEY=VALUE")
    else:
        zoo.entry(args.model)  # an unknown name lists the zoo before torch is imported
        if args.tiled and (args.input or args.loss):
            raise InputError("--tiled assembles a zoo model with its own inputs and loss; leave out --input and --loss")
        if args.input and (args.batch or args.batches):
            raise InputError("--input gives the zoo model's inputs (their batch included); leave out --batch and "
                             "--batches")
    if args.batches and args.batch:
        raise InputError("give --batch or --batches, not both")
    batches = _batches(args.batches) if args.batches else [args.batch]
    from dnnplace.pytorch.capture.zoo import entry
    for flag, value in (("--batch", args.batch), ("--seq", args.seq), ("--layers", args.layers),
                        ("--cells", args.cells)):
        if value is not None and value < 1:   # zoo.build refuses them too, after an earlier batch was written
            raise InputError(f"{flag} {value}: must be a positive integer"
                             f"{'' if user else f' (zoo model {entry(args.model).name!r})'}")
    from dnnplace.command_args import cluster_file
    from dnnplace.outpaths import check_outputs

    model_file = args.model.rpartition(":")[0] if user else ""  # mymodel.py:Net reads mymodel.py
    check_outputs([("--out", _batch_path(args.out, b) if args.batches else args.out) for b in batches],
                  [("model", model_file if model_file.endswith(".py") else None),
                   ("--cluster", cluster_file(args.cluster))])
    require_torch()
    from dnnplace.pytorch.capture.costs import cost_models
    cost = cost_models(args.cost)
    for m in _measured(cost):
        m.fresh = bool(args.fresh_costs)
    over = model_params(args.param)
    over.update({k: v for k, v in (("layers", args.layers), ("cells", args.cells)) if v is not None})
    made_graphs = {}
    for batch in batches:
        inst, name = capture_one(args, batch, over, cost)
        if args.cluster:
            inst = Instance(inst.graph, cluster_preset(args.cluster, inst.graph), inst.source)
        g = inst.graph
        if not user:
            g.meta["batch"] = batch if batch is not None else zoo.entry(args.model).defaults.get("batch")
        out = _batch_path(args.out, batch) if args.batches else args.out
        if args.batches:
            made_graphs[batch] = g
            check_profiles(made_graphs)  # node correspondence across batch sizes, before writing
        save_instance(inst, out)
        made = g.meta.get("assembled") or g.meta["capture"]
        took = made["capture_s"] + made["assemble_s"] if args.tiled else made["trace_s"]
        print(f"{name}: {g.n} nodes, {g.m} edges, {int(g.backward.sum())} backward, "
              f"{made.get('flops', 0) / 1e9:.2f} GFLOP, compute "
              f"{', '.join(f'{g.compute[:, i].sum():.3f} ms on {k}' for i, k in enumerate(g.kinds))} "
              f"({args.cost if len(g.kinds) > 1 else g.meta['cost'].get('model', args.cost)}), "
              f"{'assembled' if args.tiled else 'traced'} in "
              f"{took:.1f} s -> {out}")
        line = _costs_line(cost)
        if line:
            print(line)
    if args.batches:
        print(f"{len(batches)} batch profiles with the same nodes and edges: "
              f"BatchModel(B, profiles={{b: load_instance(path).graph}})")
    return 0


def _print_profiles(profiles) -> None:
    print(f"{'kind':<12} {'beta0 us':>10} {'GB/s':>10} {'r2':>8} {'max |rel resid|':>16}")
    for p in profiles:
        r = p.row()
        print(f"{r['kind']:<12} {r['beta0_us']:>10.2f} {r['bandwidth_GBps']:>10.2f} {r['r2']:>8.4f} "
              f"{r['max_rel_residual']:>16.3f}")
        for b, s, e in zip(p.nbytes, p.seconds, p.residuals):
            print(f"    {int(b):>12} B  {s * 1e6:>10.2f} us  residual {e:+.3f}")


def cmd_profile_links(args: argparse.Namespace) -> int:
    """Time copies and send/recv over sizes, fit the linear model, write a cluster file
    (``--nvml``: the data-sheet links of the local GPU topology instead, no timing;
    ``--gloo N``: gloo send/recv between N one-thread CPU processes, a ``local-cpu-N`` file).
    Refuses (exit 2) to write a GPU cluster for GPUs that are not visible."""
    from dnnplace.graphs.io import write_json
    from dnnplace.graphs.io.native import cluster_to_dict
    from dnnplace.outpaths import check_outputs

    check_outputs([("--out", args.out)])  # a folder, an unwritable path: before any timing
    if args.nvml:
        from dnnplace.pytorch.capture.topology import cluster_from_nvml
        cl = cluster_from_nvml()
        for pair, link in cl.meta["links"].items():
            print(f"{pair:<12} {link}")
        write_json(args.out, {"format": "dnnplace.cluster/1", **cluster_to_dict(cl)})
        print(f"cluster with {cl.size} devices from NVML ({', '.join(cl.meta['gpus'])}) -> {args.out}")
        return 0
    from dnnplace.pytorch.capture.ops import require_torch
    torch = require_torch()
    import dataclasses

    from dnnplace.pytorch.capture.links import (
        DEFAULT_SIZES,
        cluster_from_fits,
        cpu_cluster_from_p2p,
        time_copies,
        time_p2p,
        time_p2p_pairs,
    )
    sizes = [int(float(s)) for s in args.sizes.split(",")] if args.sizes else list(DEFAULT_SIZES)
    if args.gloo is not None:
        if args.gloo < 2:
            raise InputError(f"--gloo {args.gloo}: send/recv needs at least two processes")
        fits = time_p2p_pairs(args.gloo, sizes, backend="gloo", repeats=args.repeats, threads=1)
        _print_profiles([dataclasses.replace(p, kind=f"cpu{a}-cpu{b}") for (a, b), p in fits.items()])
        cl = cpu_cluster_from_p2p(args.gloo, fits, threads=1)
        write_json(args.out, {"format": "dnnplace.cluster/1", **cluster_to_dict(cl)})
        print(f"local-cpu-{args.gloo} cluster (gloo send/recv, one thread per process) -> {args.out}")
        return 0
    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    want = n_gpus if args.gpus is None else args.gpus
    if n_gpus == 0 or want > n_gpus:
        raise InputError(f"profile-links: {want or 'a'} GPU cluster asked for, {n_gpus} GPU(s) visible; refusing to "
                         "fit GPU links from CPU copies (this host's CPU processes: --gloo N)")
    if args.executor:   # every link as `dnnplace execute --cuda` sends: through host memory over gloo
        staged = time_p2p_pairs(2, sizes, backend="gloo+host", repeats=args.repeats, threads=1)[(0, 1)]
        _print_profiles([staged])
        cl = cluster_from_fits(want, staged, staged)
        write_json(args.out, {"format": "dnnplace.cluster/1", **cluster_to_dict(cl)})
        print(f"cluster with {cl.size} devices, links as the executor sends (gloo+host) -> {args.out}")
        return 0
    profiles = []
    if n_gpus >= 2:
        profiles.append(time_copies("d2d", sizes, repeats=args.repeats))
    profiles.append(time_copies("h2d", sizes, repeats=args.repeats))
    profiles.append(time_copies("d2h", sizes, repeats=args.repeats))
    if not args.no_p2p:
        profiles.append(time_p2p(sizes, repeats=args.repeats))
    _print_profiles(profiles)
    gpu = next((p for p in profiles if p.kind == "d2d" or p.kind.startswith("p2p")), profiles[0])
    cl = cluster_from_fits(want, gpu, profiles[1 if n_gpus >= 2 else 0])
    write_json(args.out, {"format": "dnnplace.cluster/1", **cluster_to_dict(cl)})
    print(f"cluster with {cl.size} devices -> {args.out}")
    return 0


def add_parsers(sub) -> None:
    """The two subcommands, added by :func:`dnnplace.cli.build_parser`."""
    p = sub.add_parser("capture", help="capture a zoo model or your own PyTorch model as a graph with costs",
                       description="Needs the torch extra: pip install 'dnnplace[torch]'. MODEL is a zoo name, "
                                   "FILE.py:FACTORY or package.module:FACTORY; the factory (a class or function, "
                                   "called with the --param values as keyword arguments) returns an nn.Module, or "
                                   "(model, inputs, loss_fn) for full control.")
    p.add_argument("model", help="zoo name (an unknown name lists the zoo), FILE.py:FACTORY or package.module:FACTORY")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one example input per positional argument of forward, repeatable: 16x3x32x32 (float32), "
                        "16x3x32x32:float16, 16x10:int64 (integers in [0, 2)), 16x10:int64:30522 (in [0, 30522)); "
                        "overrides the model's own inputs")
    p.add_argument("--loss", choices=["sum", "mse", "cross_entropy"],
                   help="training loss: sum of the output, mse against zeros, cross_entropy of [N, C] logits "
                        "against class 0 (default: the zoo's or the factory's loss, else sum)")
    p.add_argument("--batch", type=int)
    p.add_argument("--batches", metavar="B1,B2,...",
                   help="one capture per batch size, written as OUT-b<B>.json, nodes and edges checked equal "
                        "(profiles for BatchModel)")
    p.add_argument("--seq", type=int)
    p.add_argument("--layers", type=int, help="Transformer/LSTM layers (zoo parameter 'layers')")
    p.add_argument("--cells", type=int, help="NASNet normal cells per stack (zoo parameter 'cells')")
    p.add_argument("--tiled", action="store_true",
                   help="assemble the training graph from captured parts (bert, gpt2, rnnlm, nasnet): "
                        "200k operators in seconds, equal to a direct capture")
    p.add_argument("--inference", action="store_true", help="forward graph only")
    p.add_argument("--cost", default="roofline:v100",
                   help="roofline:<v100|a100|h100>, measured[:cpu|cuda] or calibrated:<gpu> (default roofline:v100); "
                        "several joined by + give one compute column each (measured:cuda+measured:cpu: a GPU "
                        "and a CPU column)")
    p.add_argument("--fresh-costs", action="store_true",
                   help="measured costs: measure again even when the profile cache holds them, and overwrite the "
                        "cache entry (docs/execution.md, Profile cache)")
    p.add_argument("--optimizer", default="adam", choices=["adam", "momentum", "sgd"])
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="zoo builder option (layers, hidden, ...) or a user factory's keyword argument, repeatable")
    p.add_argument("--cluster", help="cluster preset to attach (e.g. single-host-2-nvlink)")
    p.add_argument("--out", required=True, metavar="GRAPH.json")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("profile-links", help="time transfers, fit beta0 + beta1*bytes, write a cluster file")
    p.add_argument("--sizes", help="comma-separated byte sizes (default 1 KiB .. 16 MiB, powers of four)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--gpus", type=int, help="GPUs in the written cluster (default: the visible ones; more than "
                                             "are visible is refused)")
    p.add_argument("--gloo", type=int, metavar="N",
                   help="this host as N CPU processes (one thread each): time gloo send/recv between every pair and "
                        "write a local-cpu-N cluster (use it as --cluster FILE; the local-cpu-N preset holds "
                        "measured defaults)")
    p.add_argument("--no-p2p", action="store_true", help="skip the torch.distributed send/recv")
    p.add_argument("--executor", action="store_true",
                   help="fit every link on the path `dnnplace execute --cuda` takes (a copy to the host, gloo "
                        "send/recv, a copy to the GPU; timed between a GPU process and a CPU process) instead of "
                        "the hardware's copies")
    p.add_argument("--nvml", action="store_true",
                   help="no timing: NVLink/PCIe per GPU pair from NVML (pip install nvidia-ml-py) mapped to the "
                        "interconnect presets")
    p.add_argument("--out", required=True, metavar="CLUSTER.json")
    p.set_defaults(func=cmd_profile_links)
