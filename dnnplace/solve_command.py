"""``dnnplace solve``: one request from the command line to a re-scored result, and how
the solver settings are worded as the command's flags (:data:`SOLVER_FLAGS`; the layers
below name settings by their field). Shared helpers: :mod:`dnnplace.command_args`.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from dnnplace.command_args import (
    SOLVER_FLAGS,
    check_out,
    cluster_file,
    graph_path,
    memory_bytes,
    param_files,
    parse_param,
    positive_seconds,
    solver_flag_error,
    transfer_mode,
    warn_uneven_outputs,
)
from dnnplace.graphs.errors import InputError
from dnnplace.runtime.termination import Termination
from dnnplace.textout import device_table, fmt_num, say, warn

__all__ = ["cmd_solve", "build_request", "solve_deadline"]


def _contiguity(args: argparse.Namespace) -> str | None:
    if args.contiguous:
        return "both" if args.problem == "maxload" else "all"
    if args.non_contiguous:
        return "none"
    return args.contiguity


def build_request(args: argparse.Namespace):
    """The :class:`~dnnplace.registry.SolveRequest` that ``dnnplace solve`` flags describe."""
    from dnnplace.formulations.solvers.options import SettingError, check_values
    from dnnplace.registry import SolveRequest, SolverOptions

    if args.problem is None:  # cmd_solve infers it from the method first
        args.problem = "maxload"
    params: dict[str, Any] = dict(parse_param(t) for t in args.param)
    for key in ("subgraphs_per_device", "coarsen_to", "split"):  # method options with a flag of their own
        v = getattr(args, key)
        if v is None:
            continue
        if key in params and params[key] != v:
            raise InputError(f"--{key.replace('_', '-')} {v} and --param {key}={params[key]}: give one of them")
        params[key] = v
    given = [flag for flag, v in (("--policy", args.policy), ("--congestion/--no-congestion", args.congestion),
                                  ("--transfer-mode", getattr(args, "transfer_mode", None))) if v is not None]
    if args.problem != "makespan" and given:
        flag = given[0]
        raise InputError(f"{flag} applies to problem 'makespan' only, not {args.problem!r}")
    solver_opts = dict(parse_param(t, "--solver-option") for t in args.solver_option)
    fields = dict(solver=args.solver, time_limit=args.time_limit, rel_gap=args.rel_gap, threads=args.threads,
                  seed=args.seed, tee=args.tee, solver_options=solver_opts,
                  memory_limit=memory_bytes(getattr(args, "memory_limit", None)))
    try:
        check_values(fields)  # --time-limit -5, --rel-gap -0.1, --threads 0 ... -> one line, exit 2
    except SettingError as exc:
        raise solver_flag_error(exc, getattr(args, "spelled", None)) from None
    positive_seconds("--bound-time-limit", getattr(args, "bound_time_limit", None), "no relaxation bound")
    solver = SolverOptions(**fields)
    return SolveRequest(problem=args.problem, objective=args.objective or "pipedream", contiguity=_contiguity(args),
                        solver=solver, warm_start=args.warm_start, seed=args.seed or 0,
                        congestion=True if args.congestion is None else args.congestion,
                        policy=args.policy or "fifo", transfer_mode=transfer_mode(args), params=params)


DEPRECATED_FLAGS = {"--mip-gap": "--rel-gap", "--coarsen-to": "--param coarsen_to=N"}
"""Old spellings ``dnnplace solve`` still takes (users' scripts have them) -> the flag that replaces each."""


def deprecation_notes(args: argparse.Namespace) -> list[str]:
    """One note per old flag spelling (:data:`DEPRECATED_FLAGS`) in the command, so that a
    script moves to the current name before the old one goes; printed once the input is
    checked (bad input keeps its one error line)."""
    used = {"--mip-gap": (getattr(args, "spelled", None) or {}).get("rel_gap") == "--mip-gap",
            "--coarsen-to": getattr(args, "coarsen_to", None) is not None}
    return [f"{old} is deprecated: use {new} (the same setting)" for old, new in DEPRECATED_FLAGS.items() if used[old]]


def solve_deadline(limit: float):
    """The deadline of ``dnnplace solve --time-limit L``: ``L`` from this process's start
    (start-up, imports and loading count), less a reserve for the evaluation and the
    output (5 % of the limit plus 0.2 s, at most half the limit)."""
    from dnnplace.runtime.deadline import Deadline, process_start

    reserve = min(0.05 * limit + 0.2, 0.5 * limit)
    return Deadline(limit - reserve, start=process_start())


def cmd_solve(args: argparse.Namespace) -> int:
    from dnnplace.graphs.io import write_json
    from dnnplace.registry import get_method, infer_problem, method_options, run_method

    args.graph = graph_path(args.graph)
    check_out([("--out", args.out)], [("graph", args.graph), ("--split", args.split),
                                      ("--warm-start", args.warm_start), ("--cluster", cluster_file(args.cluster)),
                                      *param_files(args.param)])
    method = get_method(args.method)  # unknown method or option -> InputError before loading anything big
    if args.problem is None:  # the method's problem when it solves one (heft: makespan), else max-load
        args.problem = infer_problem(method) if len(method.problems) == 1 else "maxload"
    if args.objective is not None and args.problem != "maxload":
        raise InputError(f"--objective applies to problem 'maxload' only, not {args.problem!r}")
    req = build_request(args)
    method_options(method, req)
    if req.solver.time_limit is not None:  # the limit holds for this whole process (docs/bad-input.md)
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
    transformed = None
    if args.transform:   # as a config's transform: the result is for the transformed graph
        from dnnplace.graphs.transforms.replay import apply_transform
        inst, transformed = apply_transform(args.transform, inst)
    if args.congestion is None and req.congestion != inst.cluster.default_congestion:   # a calibrated cluster's links
        req = dataclasses.replace(req, congestion=inst.cluster.default_congestion)
    if args.split and not Path(args.split).is_file():
        raise InputError(f"--split {args.split}: no such file")
    if args.warm_start and Path(args.warm_start).is_file():  # a start of another graph: exit 2 before any work
        from dnnplace.graphs.io import load_placement

        load_placement(args.warm_start, inst)
    if req.problem == "makespan":
        warn_uneven_outputs(inst.graph, req.transfer_mode)
    for note in deprecation_notes(args):
        warn(note)
    res, placed = run_method(inst, method, req)
    if transformed is not None:
        res.extra["transform"] = transformed.record()
    if getattr(args, "bound_time_limit", None):  # opt-in: the comm-aware relaxation bound (results/makespan-bounds.md)
        from dnnplace.registry import relaxed_lower_bound

        relaxed_lower_bound(inst, res, args.bound_time_limit)
    if res.status == "error" and res.termination is Termination.LICENCE:
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
    if res.extra.get("auto_choice"):  # --method auto: which exact method answered, and which proved it
        proved = res.extra.get("proved_by")
        say(f"auto: {res.extra['auto_choice']} ({res.extra.get('auto_reason')}); "
            + (f"proved optimal by {proved}" if proved else "not proved optimal"))
    say(f"objective: {fmt_num(res.objective)} {unit}   bound: {fmt_num(res.lower_bound)}   "
        f"gap: {'-' if res.certified_gap is None else f'{100 * res.certified_gap:.2f}%'}"
        f"   ({_bound_source(res)})")
    if transformed is not None:
        groups = transformed.meta.get("groups")
        say(f"solved on the graph after --transform {transformed.name}"
            + (f" ({groups:,} colocation groups)" if groups else "") + ": its status and bound are that graph's")
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
