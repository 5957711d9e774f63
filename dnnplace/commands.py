"""The ``dnnplace`` subcommands: one ``cmd_<name>(args) -> exit code`` per subcommand
(:mod:`dnnplace.cli` parses the arguments and maps errors to exit codes). Everything
heavy is imported inside the command that needs it, so ``--help`` and ``info`` stay fast.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from dnnplace.command_args import (
    check_out,
    cluster_file,
    graph_path,
    load,
    parse_param,
    placement_instance,
    transfer_mode,
    warn_uneven_outputs,
)
from dnnplace.graphs.errors import InputError
from dnnplace.textout import fmt_bytes, fmt_num, print_evaluation, say, text_table

__all__ = ["cmd_info", "cmd_evaluate", "cmd_simulate", "cmd_generate", "cmd_methods", "cmd_run", "cmd_reproduce"]


# ---------------------------------------------------------------------------- info
def cmd_info(args: argparse.Namespace) -> int:
    from dnnplace.graphs.stats import graph_stats

    inst = load(args.graph, args.cluster)
    stats = graph_stats(inst.graph, cluster=inst.cluster)
    cl = inst.cluster
    cluster_doc = None
    check = None
    if cl is not None:
        from dnnplace.graphs.checks import check_instance
        try:
            check_instance(inst.graph, cl)
            check = "ok"
        except InputError as exc:
            check = str(exc)
        cluster_doc = {"name": cl.name, "devices": [{"name": d.name, "kind": d.kind,
                                                     "memory": None if math.isinf(d.memory) else d.memory,
                                                     "speed": d.speed} for d in cl.devices],
                       "device_limit": cl.meta.get("device_limit"), "check": check}
    if args.json:
        say(json.dumps({"graph": stats, "cluster": cluster_doc}, indent=1, default=str))
        return 0
    unit = stats.get("unit", "ms")
    say(f"graph {stats['name']!r} ({inst.source})")
    rows = []
    for k, v in stats.items():
        if k in ("name",):
            continue
        if isinstance(v, dict):
            v = ", ".join(f"{a}: {fmt_num(b)}" for a, b in v.items())
        elif isinstance(v, list):
            v = ", ".join(map(str, v))
        elif k.endswith("bytes_total") or k == "memory_total":
            v = fmt_bytes(v)
        elif k in ("work", "critical_path_compute", "critical_path_with_transfers") and v is not None:
            v = f"{fmt_num(v)} {unit}"
        rows.append([k, v if isinstance(v, str) else fmt_num(v)])
    say(text_table(["statistic", "value"], rows))
    if cluster_doc is not None:
        say()
        lim = f", device limit {cluster_doc['device_limit']}" if cluster_doc["device_limit"] else ""
        say(f"cluster {cl.name!r}: {cl.size} devices{lim}")
        say(text_table(["device", "kind", "memory", "speed"],
                       [[d.name, d.kind, fmt_bytes(d.memory), fmt_num(d.speed)] for d in cl.devices]))
        say(f"feasibility check: {check}")
    else:
        say("\nno cluster in this file (give one with --cluster PRESET)")
    return 0


# ---------------------------------------------------------------------------- evaluate
def eval_options(args: argparse.Namespace, problem: str) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    given = {k: getattr(args, k, None) for k in ("objective", "contiguity", "policy", "congestion", "transfer_mode")}
    allowed = {"maxload": ("objective", "contiguity"), "latency": (),
               "makespan": ("policy", "congestion", "transfer_mode")}[problem]
    for k, v in given.items():
        if v is None:
            continue
        if k not in allowed:
            flag = "--no-congestion" if k == "congestion" else f"--{k.replace('_', '-')}"
            raise InputError(f"{flag} does not apply to problem {problem!r}")
        opts[k] = v
    return opts


def _recorded_mode(doc: Any) -> str | None:
    """The transfer mode a result was solved under (``options.transfer_mode``), if any."""
    opts = doc.get("options") if isinstance(doc, dict) else None
    return opts.get("transfer_mode") if isinstance(opts, dict) else None


def _result_order(policy: str, doc: Any, graph, source: str) -> dict[str, Any]:
    """Simulator arguments of ``--policy order|priority`` from a result JSON: its
    priorities (its ``priorities`` map, else its ``start`` times) and, for ``order``, its
    order of transfers on each link
    (``link_priorities``; without it links are first come first served)."""
    from dnnplace.evaluation.link_orders import link_priorities_from_doc
    from dnnplace.graphs.io import result_priorities

    if policy not in ("order", "priority"):
        return {}
    pr = result_priorities(doc, graph, source)
    if pr is None:
        what = "'priorities' or 'start' times" if policy == "priority" else "'start' times (its order)"
        raise InputError(f"--policy {policy} needs {what}: give a result JSON with them ({source} has none), or "
                         "use --policy fifo|critical_path")
    out: dict[str, Any] = {"priorities": pr}
    if policy == "order":
        out["link_priorities"] = link_priorities_from_doc(doc, graph, source=source)
    return out


def _is_ordered(doc: Any) -> bool:
    """Whether a result JSON carries its own schedule (start times per node)."""
    return isinstance(doc, dict) and isinstance(doc.get("placement"), dict) and isinstance(doc.get("start"), dict)


def replay_options(args: argparse.Namespace, doc: Any, graph) -> dict[str, Any]:
    """Simulator options that re-score a makespan result as it was scored: the flags given,
    else the result's transfer mode, and for a result that carries its own schedule
    (``start`` times) its order (``--policy order``) on the links it was scored on."""
    opts: dict[str, Any] = {"transfer_mode": transfer_mode(args, _recorded_mode(doc))}
    if args.policy is not None:
        opts["policy"] = args.policy
    elif _is_ordered(doc):
        opts["policy"] = "order"
        recorded = doc.get("options") if isinstance(doc.get("options"), dict) else {}
        if args.congestion is None and isinstance(recorded.get("congestion"), bool):
            opts["congestion"] = recorded["congestion"]  # the links the order was scored on
    if args.congestion is not None and "congestion" not in opts:
        opts["congestion"] = args.congestion
    opts.update(_result_order(opts.get("policy", "fifo"), doc, graph, args.placement))
    warn_uneven_outputs(graph, opts["transfer_mode"])
    return opts


def cmd_evaluate(args: argparse.Namespace) -> int:
    from dnnplace.evaluation.evaluate import PROBLEMS, evaluate
    from dnnplace.graphs.io import placement_from_doc, write_json

    args.graph, args.placement = graph_path(args.graph), graph_path(args.placement)  # bundled files by name
    check_out([("--out", args.out)], [("graph", args.graph), ("placement", args.placement),
                                      ("--cluster", cluster_file(args.cluster))])
    inst, doc = placement_instance(args)
    if args.problem is None:  # a result JSON says what it solved
        recorded = doc.get("problem") if isinstance(doc, dict) and "placement" in doc else None
        args.problem = recorded if recorded in PROBLEMS else "maxload"
    p = placement_from_doc(doc, inst, source=args.placement)
    opts = eval_options(args, args.problem)
    if args.problem == "makespan":
        # re-score as the result was scored: its transfer mode and its own order (defaults otherwise)
        opts.update(replay_options(args, doc, p.graph))
    ev = evaluate(p, args.problem, **opts)
    print_evaluation(ev, p)
    if args.out:
        write_json(args.out, ev.to_dict())
        say(f"\nwrote {args.out}")
    return 0


# ---------------------------------------------------------------------------- simulate
def cmd_simulate(args: argparse.Namespace) -> int:
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.io import placement_from_doc, write_json

    args.graph, args.placement = graph_path(args.graph), graph_path(args.placement)  # bundled files by name
    check_out([("--out", args.out), ("--gantt", args.gantt)],
              [("graph", args.graph), ("placement", args.placement), ("--cluster", cluster_file(args.cluster))])
    inst, doc = placement_instance(args)
    p = placement_from_doc(doc, inst, source=args.placement)
    graph = p.graph  # the input graph, or the transformed graph a result's placement is for
    opts = {"policy": "fifo", "congestion": p.cluster.default_congestion, **replay_options(args, doc, graph)}
    res = simulate(p, **opts)
    d = res.to_dict()
    unit = d["unit"]
    say(f"makespan: {fmt_num(d['makespan'])} {unit} (policy {opts['policy']}, congestion "
        f"{'on' if opts['congestion'] else 'off'}, links {d['link_order']}, "
        f"transfers {opts['transfer_mode'].replace('_', '-')})")
    say(f"transfers: {d['transfers']:,} ({fmt_bytes(d['transfer_bytes'])})")
    say()
    rows = [[n, v["nodes"], v["busy"], f"{100 * v['utilisation']:.1f}%", fmt_bytes(v["static_memory"]),
             "unknown" if v["peak_memory"] is None else fmt_bytes(v["peak_memory"]),
             fmt_bytes(v["memory_capacity"])]
            for n, v in d["devices"].items() if v["nodes"]]
    say(text_table(["device", "nodes", f"busy ({unit})", "utilisation", "static memory", "peak memory",
                    "capacity"], rows))
    if d["peak_memory_source"] == "edge_bytes":
        say("(peak memory estimated from edge bytes: the graph gives no output_bytes)")
    for msg in d["memory_violations"]:
        say(f"over capacity: {msg}")
    if d["links"]:
        say()
        top = sorted(d["links"].items(), key=lambda kv: -kv[1]["busy"])[:10]
        say(text_table(["link", "transfers", "bytes", f"busy ({unit})"],
                       [[k, v["transfers"], fmt_bytes(v["bytes"]), v["busy"]] for k, v in top]))
        if len(d["links"]) > 10:
            say(f"... {len(d['links']) - 10} more links")
    if args.gantt:
        from dnnplace.evaluation.gantt import plot_gantt
        plot_gantt(res, args.gantt)
        say(f"\nwrote {args.gantt}")
    if args.out:
        write_json(args.out, res.to_dict(trace=True), indent=None)
        say(f"wrote {args.out}")
    return 0


# ---------------------------------------------------------------------------- generate
def cmd_generate(args: argparse.Namespace) -> int:
    from dnnplace.graphs.generators import generate
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import save_instance
    from dnnplace.graphs.presets import cluster_preset

    check_out([("--out", args.out)], [("--cluster", cluster_file(args.cluster))])
    if args.nodes < 1:
        raise InputError(f"--nodes must be >= 1, got {args.nodes}")
    from dnnplace.formulations.solvers.options import MAX_SEED, SEED_RANGE

    if not 0 <= args.seed <= MAX_SEED:  # one seed range for every command (numpy refuses -1)
        raise InputError(f"--seed {args.seed}: {SEED_RANGE}")
    kw = dict(parse_param(t) for t in args.param)
    if args.training:
        kw["training"] = True
    try:
        graph = generate(args.family, n=args.nodes, seed=args.seed, **kw)
    except TypeError as exc:
        raise InputError(f"generator {args.family!r}: {exc}") from None
    cluster = cluster_preset(args.cluster, graph) if args.cluster else None
    src = f"generate {args.family} --nodes {args.nodes} --seed {args.seed}"
    save_instance(Instance(graph, cluster, src), args.out)
    say(f"wrote {args.out}: {graph.n:,} nodes, {graph.m:,} edges"
        + (f", cluster {cluster.name}" if cluster else ""))
    return 0


# ---------------------------------------------------------------------------- methods
def cmd_methods(args: argparse.Namespace) -> int:
    from dnnplace.command_args import SOLVER_FLAGS
    from dnnplace.evaluation.evaluate import PROBLEMS
    from dnnplace.registry import all_methods

    methods = all_methods()
    if args.name:
        from dnnplace.methods.base import describe_options
        from dnnplace.registry import get_method

        m = get_method(args.name)
        say(f"{m.name} ({m.kind}): {m.summary}")
        say(f"problems: {', '.join(m.problems)}   default contiguity: {m.default_contiguity}")
        if m.default_limits:
            limits = " ".join(f"{SOLVER_FLAGS.get(k, k)} {v:g}" for k, v in m.default_limits.items())
            say(f"without --time-limit: {limits}")
        rows = describe_options(m.options)
        if not rows:
            say("options: none")
            return 0
        say("options (--param KEY=VALUE, or [params] in an experiment config):")
        w = max(len(r[0]) for r in rows)
        for name, typ, default, doc in rows:
            say(f"  {name.ljust(w)}  {typ} = {default}  {doc}")
        return 0
    for prob in PROBLEMS:
        ms = [m for m in methods.values() if prob in m.problems]
        say(f"{prob}:")
        if not ms:
            say("  (none)")
        w = max((len(m.name) for m in ms), default=0)
        kw = max((len(m.kind) for m in ms), default=0)
        for m in ms:
            say(f"  {m.name.ljust(w)}  {m.kind.ljust(kw)}  {m.summary}")
    return 0


# ---------------------------------------------------------------------------- run / reproduce
RUN_FILES = ("runs.jsonl", "table.md", "table.csv")
"""The files ``dnnplace run`` writes in its output folder (none of them may be an input)."""


def cmd_run(args: argparse.Namespace) -> int:
    from dnnplace.config import load_config
    from dnnplace.runner import run_config
    from dnnplace.sweeps import make_executor

    if args.hang_margin is None or not args.hang_margin > 0:
        raise InputError(f"--hang-margin {args.hang_margin}: must be a positive number of seconds")
    from dnnplace.data import resolve_config

    args.config = resolve_config(args.config)  # a bundled config by name: quickstart
    cfg = load_config(args.config)
    executor = make_executor(args.executor, args.jobs, address=args.ray_address)
    out = Path(args.out) if args.out else (cfg.out_dir or Path("results") / cfg.name)
    read = [("config", args.config)] + [(f"config {what}", path) for s in cfg.specs
                                         for what, path in (("graph", s.graph), ("cluster", cluster_file(s.cluster)),
                                                            ("warm_start", s.warm_start))]
    check_out([("--out" if args.out else "out_dir", str(out))], read, folders=True, contents=RUN_FILES)
    records = run_config(cfg, fresh=args.fresh, progress=not args.quiet, out_dir=out,
                         retry_errors=args.retry_errors, executor=executor, margin=args.hang_margin)
    table = (out / "table.md").read_text()
    say(table.rstrip())
    errors = sum(1 for r in records if r.get("status") == "error")
    say(f"\n{len(records)} runs ({errors} errors); results in {out}/ (runs.jsonl, table.md, table.csv)")
    missing = len(cfg.specs) - len(records)
    if missing:
        print(f"dnnplace: {missing} run(s) not recorded (their worker died); the same command runs them",
              file=sys.stderr)
        return 1
    if errors:
        print(f"dnnplace: {errors} run(s) failed (see table.md); rerun with --retry-errors once fixed",
              file=sys.stderr)
        return 1
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from dnnplace.compare import compare

    check_out([("--out", args.out)], [("RESULTS", r) for r in args.results], folders=True,
              contents=("compare.md", "compare.csv"))
    md, pngs = compare(args.results, args.out, plots=args.plots)
    say(md.read_text().rstrip())
    say(f"\nwrote {md}, {md.with_suffix('.csv').name} and {len(pngs)} plot(s) in {md.parent}/")
    return 0


def _check_reproduction(args: argparse.Namespace) -> int:
    """``reproduce NAME --check`` (:func:`dnnplace.reproduce.check`): 0 when every table matches, else 1."""
    from dnnplace.reproduce import check

    for flag in ("quick", "fresh"):
        if getattr(args, flag):
            raise InputError(f"--check re-renders the tables in the tree from their records and runs nothing; it "
                             f"takes no --{flag}")
    if args.out is not None and not Path(args.out).is_dir():
        raise InputError(f"--out {args.out}: no such folder (with --check it names the folder whose tables and "
                         "records are compared)")
    same, diffs = check(args.name, args.out)
    if diffs:
        for line in diffs:
            print(f"{args.name}: {line}", file=sys.stderr)
        print(f"{args.name}: {len(diffs)} file(s) differ, {len(same)} match", file=sys.stderr)
        return 1
    say(f"{args.name}: {len(same)} files match")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dnnplace.reproduce import reproduce, reproductions

    if args.name not in reproductions():
        raise InputError(f"unknown reproduction {args.name!r}; known: {sorted(reproductions()) or 'none'}")
    if args.check:
        return _check_reproduction(args)
    check_out([("--out", args.out)], folders=True)
    out = reproduce(args.name, quick=args.quick, out_dir=args.out, fresh=args.fresh, progress=not args.quiet)
    say(out.read_text())
    say(f"wrote {out}")
    return 0
