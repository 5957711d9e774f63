"""The ``dnnplace`` subcommands: one ``cmd_<name>(args) -> exit code`` per subcommand
(:mod:`dnnplace.cli` parses the arguments and maps errors to exit codes). Everything
heavy is imported inside the command that needs it, so ``--help`` and ``info`` stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.textout import device_table, fmt_bytes, fmt_num, print_evaluation, say, text_table, warn

__all__ = ["cmd_info", "cmd_evaluate", "cmd_simulate", "cmd_generate", "cmd_solve", "cmd_methods", "cmd_run",
           "cmd_reproduce", "build_request"]


# ---------------------------------------------------------------------------- helpers
def _load(graph: str, cluster: str | None = None):
    """Instance from a file (or a bundled workload by name), with ``--cluster`` replacing
    (or supplying) its cluster."""
    from dnnplace.graphs.io import load_instance

    return load_instance(_graph_path(graph), cluster)


def _graph_path(arg: str) -> str:
    """A graph argument as a path (a bundled workload by name: :func:`dnnplace.data.resolve_graph`)."""
    from dnnplace.data import resolve_graph

    return resolve_graph(arg)


def _placement_instance(args: argparse.Namespace):
    """``(instance, placement document)`` for ``evaluate``/``simulate``: the graph with
    ``--cluster``, else the cluster the result JSON was solved on, else the file's."""
    from dnnplace.graphs.io import instance_for_placement, read_json

    doc = read_json(args.placement)
    return instance_for_placement(args.graph, args.cluster, doc, source=args.placement), doc


def _parse_param(text: str, flag: str = "--param") -> tuple[str, Any]:
    if "=" not in text:
        raise InputError(f"{flag} {text!r}: expected KEY=VALUE")
    key, val = text.split("=", 1)
    key = key.strip()
    if not key:
        raise InputError(f"{flag} {text!r}: empty key")
    try:
        return key, json.loads(val)
    except json.JSONDecodeError:
        return key, val


def _check_out(outputs: list[tuple[str, str | None]], inputs: list[tuple[str, str | None]] = (),
               folders: bool = False) -> None:
    """Fail before any work if an output path is an input or cannot be written
    (:func:`dnnplace.outpaths.check_outputs`, the one home of the rule)."""
    from dnnplace.outpaths import check_outputs

    check_outputs(outputs, inputs, folders=folders)


# ---------------------------------------------------------------------------- info
def cmd_info(args: argparse.Namespace) -> int:
    from dnnplace.graphs.stats import graph_stats

    inst = _load(args.graph, args.cluster)
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
def _eval_options(args: argparse.Namespace, problem: str) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    given = {k: getattr(args, k, None) for k in ("objective", "contiguity", "policy", "congestion")}
    allowed = {"maxload": ("objective", "contiguity"), "latency": (), "makespan": ("policy", "congestion")}[problem]
    for k, v in given.items():
        if v is None:
            continue
        if k not in allowed:
            flag = "--no-congestion" if k == "congestion" else f"--{k}"
            raise InputError(f"{flag} does not apply to problem {problem!r}")
        opts[k] = v
    return opts



def cmd_evaluate(args: argparse.Namespace) -> int:
    from dnnplace.graphs.evaluation.evaluate import PROBLEMS, evaluate
    from dnnplace.graphs.io import placement_from_doc, write_json

    args.graph, args.placement = _graph_path(args.graph), _graph_path(args.placement)  # bundled files by name
    _check_out([("--out", args.out)], [("graph", args.graph), ("placement", args.placement)])
    inst, doc = _placement_instance(args)
    if args.problem is None:  # a result JSON says what it solved
        recorded = doc.get("problem") if isinstance(doc, dict) and "placement" in doc else None
        args.problem = recorded if recorded in PROBLEMS else "maxload"
    p = placement_from_doc(doc, inst, source=args.placement)
    opts = _eval_options(args, args.problem)
    if args.problem == "makespan" and isinstance(doc, dict) and isinstance(doc.get("options"), dict):
        # re-score as the result was scored: its transfer mode (the default otherwise)
        mode = doc["options"].get("transfer_mode")
        if mode is not None:
            opts.setdefault("transfer_mode", mode)
    ev = evaluate(p, args.problem, **opts)
    print_evaluation(ev, p)
    if args.out:
        write_json(args.out, ev.to_dict())
        say(f"\nwrote {args.out}")
    return 0


# ---------------------------------------------------------------------------- simulate
def cmd_simulate(args: argparse.Namespace) -> int:
    import numpy as np

    from dnnplace.graphs.evaluation.simulate import simulate
    from dnnplace.graphs.io import placement_from_doc, write_json

    args.graph, args.placement = _graph_path(args.graph), _graph_path(args.placement)  # bundled files by name
    _check_out([("--out", args.out), ("--gantt", args.gantt)],
               [("graph", args.graph), ("placement", args.placement)])
    inst, doc = _placement_instance(args)
    p = placement_from_doc(doc, inst, source=args.placement)
    graph = p.graph  # the input graph, or the transformed graph a result's placement is for
    priorities = None
    if args.policy in ("order", "priority"):
        start = doc.get("start") if isinstance(doc, dict) else None
        if not isinstance(start, dict):
            raise InputError(f"--policy {args.policy} needs start times: give a result JSON with a 'start' map "
                             f"({args.placement} has none)")
        try:
            priorities = np.array([float(start[str(i)]) for i in graph.ids])
        except KeyError as exc:
            raise InputError(f"{args.placement}: 'start' has no time for node {exc.args[0]!r}") from None
    from dnnplace.graphs.evaluation.link_orders import link_priorities_from_doc

    link_priorities = None
    if args.policy == "order":  # the result's order of transfers on each link, if any; else FCFS
        link_priorities = link_priorities_from_doc(doc, graph, source=args.placement)
    res = simulate(p, policy=args.policy, priorities=priorities, congestion=args.congestion,
                   link_priorities=link_priorities)
    d = res.to_dict()
    unit = d["unit"]
    say(f"makespan: {fmt_num(d['makespan'])} {unit} (policy {args.policy}, congestion "
        f"{'on' if args.congestion else 'off'}, links {d['link_order']})")
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
        from dnnplace.graphs.evaluation.gantt import plot_gantt
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

    _check_out([("--out", args.out)])
    if args.nodes < 1:
        raise InputError(f"--nodes must be >= 1, got {args.nodes}")
    kw = dict(_parse_param(t) for t in args.param)
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


# ---------------------------------------------------------------------------- solve
def _contiguity(args: argparse.Namespace) -> str | None:
    if args.contiguous:
        return "both" if args.problem == "maxload" else "all"
    if args.non_contiguous:
        return "none"
    return args.contiguity


SOLVER_FLAGS = {"solver": "--solver", "time_limit": "--time-limit", "rel_gap": "--rel-gap", "threads": "--threads",
                "seed": "--seed", "tee": "--tee", "solver_options": "--solver-option"}
"""The ``dnnplace solve`` flag of each :class:`~dnnplace.registry.SolverOptions` field
(the layers below name the fields; this layer names its flags)."""


def solver_flag_error(exc, spelled: dict[str, str] | None = None) -> InputError:
    """A :class:`~dnnplace.formulations.solvers.options.SettingError` (``time_limit =
    -5: ...``) as the flag that set it (``--time-limit -5: ...``; ``spelled``: the
    spelling typed, e.g. ``--mip-gap``)."""
    from dnnplace.formulations.solvers.options import show_value

    shown = exc.value if isinstance(exc.value, str) else show_value(exc.value)
    if exc.key.startswith("solver_options."):
        return InputError(f"{SOLVER_FLAGS['solver_options']} {exc.key.split('.', 1)[1]}={shown}: {exc.reason}")
    flag = (spelled or {}).get(exc.key) or SOLVER_FLAGS.get(exc.key, exc.key)
    return InputError(f"{flag} {shown}: {exc.reason}")


def build_request(args: argparse.Namespace):
    """The :class:`~dnnplace.registry.SolveRequest` that ``dnnplace solve`` flags describe."""
    from dnnplace.formulations.solvers.options import SettingError, check_values
    from dnnplace.registry import SolveRequest, SolverOptions

    if args.problem is None:  # cmd_solve infers it from the method first
        args.problem = "maxload"
    params: dict[str, Any] = dict(_parse_param(t) for t in args.param)
    for key in ("subgraphs_per_device", "coarsen_to", "split"):  # method options with a flag of their own
        v = getattr(args, key)
        if v is None:
            continue
        if key in params and params[key] != v:
            raise InputError(f"--{key.replace('_', '-')} {v} and --param {key}={params[key]}: give one of them")
        params[key] = v
    if args.problem != "makespan" and (args.policy is not None or args.congestion is not None):
        flag = "--policy" if args.policy is not None else "--congestion/--no-congestion"
        raise InputError(f"{flag} applies to problem 'makespan' only, not {args.problem!r}")
    solver_opts = dict(_parse_param(t, "--solver-option") for t in args.solver_option)
    fields = dict(solver=args.solver, time_limit=args.time_limit, rel_gap=args.rel_gap, threads=args.threads,
                  seed=args.seed, tee=args.tee, solver_options=solver_opts)
    try:
        check_values(fields)  # --time-limit -5, --rel-gap -0.1, --threads 0 ... -> one line, exit 2
    except SettingError as exc:
        raise solver_flag_error(exc, getattr(args, "spelled", None)) from None
    solver = SolverOptions(**fields)
    return SolveRequest(problem=args.problem, objective=args.objective or "pipedream", contiguity=_contiguity(args),
                        solver=solver, warm_start=args.warm_start, seed=args.seed or 0,
                        congestion=True if args.congestion is None else args.congestion,
                        policy=args.policy or "fifo", params=params)


def solve_deadline(limit: float):
    """The deadline of ``dnnplace solve --time-limit L``: ``L`` from this process's start
    (start-up, imports and loading count), less a reserve for the evaluation and the
    output (5 % of the limit plus 0.2 s, at most half the limit)."""
    from dnnplace.graphs.deadline import Deadline, process_start

    reserve = min(0.05 * limit + 0.2, 0.5 * limit)
    return Deadline(limit - reserve, start=process_start())


def cmd_solve(args: argparse.Namespace) -> int:
    from dnnplace.graphs.io import write_json
    from dnnplace.registry import get_method, infer_problem, method_options, run_method

    args.graph = _graph_path(args.graph)
    _check_out([("--out", args.out)], [("graph", args.graph), ("--split", args.split),
                                       ("--warm-start", args.warm_start)])
    method = get_method(args.method)  # unknown method or option -> InputError before loading anything big
    if args.problem is None:  # the method's problem when it solves one (heft: makespan), else max-load
        args.problem = infer_problem(method) if len(method.problems) == 1 else "maxload"
    if args.objective is not None and args.problem != "maxload":
        raise InputError(f"--objective applies to problem 'maxload' only, not {args.problem!r}")
    req = build_request(args)
    method_options(method, req)
    if req.solver.time_limit is not None:  # the limit holds for this whole process (issue 24)
        req = dataclasses.replace(req, deadline=solve_deadline(req.solver.time_limit))
    from dnnplace.formulations.solvers.options import SettingError, SettingNote, check_backend

    try:
        notes = check_backend(req.solver)  # --solver cplex, --solver-option foo_bar=3 -> exit 2
    except SettingError as exc:
        raise solver_flag_error(exc) from None
    for w in notes:
        warn(f"{SOLVER_FLAGS.get(w.key, w.key)} {w.text}" if isinstance(w, SettingNote) else w)
    from dnnplace.graphs.io import prepare_instance

    inst = prepare_instance(args.graph, args.cluster)  # infeasible instance -> one line naming why
    if args.split and not Path(args.split).is_file():
        raise InputError(f"--split {args.split}: no such file")
    res, placed = run_method(inst, method, req)
    if getattr(args, "bound_time_limit", None):  # opt-in: the comm-aware relaxation bound (issue 26)
        from dnnplace.registry import relaxed_lower_bound

        relaxed_lower_bound(inst, res, args.bound_time_limit)
    if res.status == "error" and res.termination == "licensingProblems":
        # the model is too large for the installed licence: bad input for this backend, not a result
        from dnnplace.formulations.solvers.options import SolverLicenceError, licence_message

        raise SolverLicenceError(licence_message(res.message, req.solver.solver,
                                                 name=lambda key, value: f"{SOLVER_FLAGS[key]} {value}"))
    if args.out:  # written before anything is printed: `dnnplace solve ... | head` keeps it
        write_json(args.out, res.to_dict())
    unit = res.unit
    say(f"{res.method} on {res.instance} ({res.problem}): {res.status}"
        + (f" [{res.termination}]" if res.termination else ""))
    if res.message:
        say(f"message: {res.message}")
    say(f"objective: {fmt_num(res.objective)} {unit}   bound: {fmt_num(res.lower_bound)}   "
        f"gap: {'-' if res.certified_gap is None else f'{100 * res.certified_gap:.2f}%'}"
        f"   ({_bound_source(res)})")
    if res.transform is not None:
        g = res.transform["graph"]
        say(f"answers on a transformed graph ({g['name']}: {g['nodes']:,} nodes, {g['edges']:,} edges; the input "
            f"has {inst.graph.n:,}): {res.transform['bound_note']}")
    solver = f"{res.solver} {res.solver_version or ''}".strip() if res.solver else "none"
    say(f"solver: {solver}   build: {res.build_seconds:.3f} s   solve: {res.solve_seconds:.3f} s")
    ev = res.evaluation
    if ev is not None:
        agree = ""
        if res.objective is not None and ev.get("objective") is not None:
            diff = res.objective - ev["objective"]
            agree = ("agrees with the method" if abs(diff) <= 1e-6 * max(1.0, abs(ev["objective"]))
                     else f"method's value is an upper bound, {diff:.6g} above")
        say(f"independent evaluation: {fmt_num(ev.get('objective'))} {unit}, feasible "
            f"{'yes' if ev.get('feasible') else 'no'}" + (f" ({agree})" if agree else ""))
        for v in ev.get("violations", []):
            say(f"  violation: {v}")
        if placed is not None:
            say()
            say(device_table(placed, ev))
    if args.out:
        say(f"\nwrote {args.out}")
    return 0 if res.status != "error" else 1


def _bound_source(res) -> str:
    """Where the printed bound comes from."""
    if res.lower_bound is None:
        return "no bound comparable with the input graph's" if res.transform is not None else "no bound"
    if res.transform is not None:
        return "the input graph's busiest-device work share"
    tol = 1e-9 * max(1.0, abs(res.lower_bound))
    if res.bound is not None and abs(res.bound - res.lower_bound) <= tol:
        return "the method's own bound" if res.solver in (None, "none") else f"proved by {res.solver}"
    rb = (res.extra or {}).get("relaxation_bound")
    if rb and abs(rb["bound"] - res.lower_bound) <= tol and rb["bound"] > (rb.get("combinatorial") or 0.0):
        return f"the comm-aware relaxation bound ({rb['seconds']:.1f} s of CP-SAT)"
    what = {"makespan": "critical path of least times, heads-and-tails work windows",
            "maxload": "busiest device's work share", "latency": "critical path of least times"}.get(res.problem, "")
    return f"the graph's lower bound: {what}" + ("" if res.bound is None else f"; the method's own: "
                                                                               f"{fmt_num(res.bound)}")


# ---------------------------------------------------------------------------- methods
def cmd_methods(args: argparse.Namespace) -> int:
    from dnnplace.graphs.evaluation.evaluate import PROBLEMS
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
def cmd_run(args: argparse.Namespace) -> int:
    from dnnplace.config import load_config
    from dnnplace.executors import make_executor
    from dnnplace.runner import run_config

    if args.hang_margin is None or not args.hang_margin > 0:
        raise InputError(f"--hang-margin {args.hang_margin}: must be a positive number of seconds")
    from dnnplace.data import resolve_config

    args.config = resolve_config(args.config)  # a bundled config by name: quickstart
    cfg = load_config(args.config)
    executor = make_executor(args.executor, args.jobs, address=args.ray_address)
    out = Path(args.out) if args.out else (cfg.out_dir or Path("results") / cfg.name)
    _check_out([("--out" if args.out else "out_dir", str(out))], [("config", args.config)], folders=True)
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

    _check_out([("--out", args.out)], folders=True)
    md, pngs = compare(args.results, args.out, plots=args.plots)
    say(md.read_text().rstrip())
    say(f"\nwrote {md}, {md.with_suffix('.csv').name} and {len(pngs)} plot(s) in {md.parent}/")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from dnnplace.reproduce import reproduce, reproductions

    if args.name not in reproductions():
        raise InputError(f"unknown reproduction {args.name!r}; known: {sorted(reproductions()) or 'none'}")
    _check_out([("--out", args.out)], folders=True)
    out = reproduce(args.name, quick=args.quick, out_dir=args.out, fresh=args.fresh, progress=not args.quiet)
    say(out.read_text())
    say(f"wrote {out}")
    return 0
