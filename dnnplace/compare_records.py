"""The records ``dnnplace compare`` reads, and the rows it makes of them.

:func:`load_records` reads sweep records (``runs.jsonl``) and single results (``dnnplace
solve --out``); the ``*_of`` accessors read a record's instance, cluster, backend, options
and bounds across record versions; :func:`rows` is the per-run table, :func:`method_rows`
the objectives by method and :func:`method_profile` the performance profile's data
(:mod:`dnnplace.compare` writes them, :mod:`dnnplace.compare_plots` draws them).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.results import answer_from_of, relative_gap

__all__ = ["load_records", "rows", "method_rows", "method_profile", "time_to_gap", "GAPS", "backend_of", "instance_of",
           "problem_of", "time_limit_of", "where_of", "cluster_of", "lower_bound_of", "answer_from_of",
           "instance_bound", "options_of", "run_labels", "certified_gap_of", "pct"]

GAPS = (0.10, 0.01)
"""Gaps whose time-to columns the table has."""


def load_records(paths: Sequence[str | os.PathLike]) -> list[dict]:
    """The records of each ``runs.jsonl`` named (a folder stands for the ``runs.jsonl``
    in it) and of each result JSON written by ``dnnplace solve --out``; the newest
    record of each run key of a file (a result file is its own run). The same run key in
    two files is two runs (e.g. one sweep run on two executors), each record noting its
    file in ``_source``."""
    from dnnplace.graphs.io import read_json
    from dnnplace.runner import read_runs

    out: dict[str, dict] = {}
    for p in map(Path, paths):
        f = p / "runs.jsonl" if p.is_dir() else p
        if not f.is_file():
            raise InputError(f"{p}: no runs.jsonl there (give a results folder, a runs.jsonl file or a result JSON "
                             "of dnnplace solve --out)")
        if f.suffix == ".jsonl":
            recs = read_runs(f)
            if not recs:
                raise InputError(f"{f}: no run records")
            for r in recs:
                out[f"{f.resolve()}|{r['run_key']}"] = {**r, "_source": str(f)}
            continue
        doc = read_json(f)
        if not (isinstance(doc, dict) and {"method", "status", "problem"} <= doc.keys()):
            raise InputError(f"{f}: not a result JSON (no 'method', 'status' and 'problem'); give the --out file of "
                             "dnnplace solve, or a runs.jsonl")
        out[f"file:{f.resolve()}"] = {**doc, "run_key": f"file:{f.resolve()}", "_source": str(f)}
    return list(out.values())


def backend_of(rec: dict) -> str:
    """The MIP backend of a run (``-`` for a method that used none)."""
    name = rec.get("solver") or ""
    if not name:
        return "-"
    name = str(name).lower()
    return "gurobi" if name.startswith("gurobi") else ("scip" if name.startswith("scip") else name)


def instance_of(rec: dict) -> str:
    """The graph's stem, the same for every problem solved on it (the problem is
    :func:`problem_of`, a column of its own, so a graph's rows line up)."""
    run = rec.get("run") or {}
    return Path(str(run.get("graph") or rec.get("instance") or "?")).stem


def problem_of(rec: dict) -> str:
    """The problem a run solved (``maxload`` in records that do not say)."""
    return str(rec.get("problem") or (rec.get("run") or {}).get("problem") or "maxload")


def where_of(rec: dict) -> tuple[str, str, str]:
    """``(instance, problem, cluster)``: what a run's objective is comparable within."""
    return instance_of(rec), problem_of(rec), cluster_of(rec)


def time_limit_of(rec: dict) -> float | None:
    """The run's solver time limit as asked: a sweep record's ``run.solver.time_limit``, or
    a result file's ``options.solver.time_limit`` (``dnnplace solve --time-limit``)."""
    for src in (rec.get("run"), rec.get("options")):
        solver = (src or {}).get("solver") if isinstance(src, dict) else None
        if isinstance(solver, dict) and solver.get("time_limit") is not None:
            return solver["time_limit"]
    return None


def cluster_of(rec: dict) -> str:
    """The cluster a run was solved on: its preset name, a cluster file's name, or
    ``-`` (the graph file's own cluster, in records that do not say)."""
    cl = rec.get("cluster")
    if isinstance(cl, str):
        return cl
    if isinstance(cl, dict):
        return str(cl.get("name") or "custom")
    return str((rec.get("run") or {}).get("cluster") or "-")


def lower_bound_of(rec: dict) -> float | None:
    """The record's ``lower_bound``; older records: the larger of the solver's bound and
    the evaluation's lower bound."""
    if "lower_bound" in rec:
        return rec["lower_bound"]
    vals = [v for v in (rec.get("bound"), (rec.get("evaluation") or {}).get("lower_bound")) if v is not None]
    return max(vals) if vals else None


def instance_bound(rec: dict) -> float | None:
    """The instance's own lower bound (valid for every method's answer on the input
    graph): the evaluation's ``lower_bound``; none for an answer on a transformed graph."""
    if rec.get("transform") is not None:
        return None
    return (rec.get("evaluation") or {}).get("lower_bound")


def options_of(rec: dict) -> dict[str, str]:
    """A run's options as flat ``key -> text`` (a sweep record's run identity, or a result
    file's options), for telling apart runs of one method on one instance."""
    run = rec.get("run")
    src = dict(run) if isinstance(run, dict) else dict(rec.get("options") or {})
    for k in ("graph", "problem", "method", "cluster"):
        src.pop(k, None)
    flat: dict[str, str] = {}
    for k, v in src.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if v2 is not None and k2 not in ("solver", "name", "tee"):
                    flat[f"{k2}"] = str(v2)
        elif v is not None:
            flat[k] = str(v)
    return flat


def run_labels(records: Sequence[dict], with_backend: bool = True) -> dict[int, str]:
    """A label per record (by ``id``): the method, its backend where it used one (with
    ``with_backend``), and the options that differ between its runs on one instance and
    cluster."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((*where_of(r), str(r.get("method")), backend_of(r)), []).append(r)
    out: dict[int, str] = {}
    for (_i, _p, _c, method, backend), recs in groups.items():
        base = method if backend == "-" or not with_backend else f"{method}/{backend}"
        opts = [options_of(r) for r in recs]
        if len({tuple(sorted(o.items())) for o in opts}) < len(opts):  # the same run from several files
            srcs = {r.get("_source") for r in recs}
            if len(srcs) > 1:
                for o, r in zip(opts, recs):
                    o["from"] = Path(str(r.get("_source"))).parent.name or str(r.get("_source"))
        keys = sorted({k for o in opts for k in o})
        differ = [k for k in keys if len({o.get(k) for o in opts}) > 1]
        for r, o in zip(recs, opts):
            extra = " ".join(f"{k}={o[k]}" for k in differ if k in o)
            out[id(r)] = f"{base} {extra}".strip()
    return out


def time_to_gap(rec: dict, gap: float) -> float | None:
    """Seconds until the run's gap was at most ``gap``: the first trace point
    ``(t, incumbent, bound)`` there, else the solve time when its final certified gap
    is; ``None`` if never.

    >>> rec = {"trace": [[0.5, 120.0, 80.0], [2.0, 100.0, 95.0]], "objective": 100.0, "bound": 99.5,
    ...        "solve_seconds": 3.0, "status": "feasible"}
    >>> time_to_gap(rec, 0.10), time_to_gap(rec, 0.01), time_to_gap(rec, 0.001)
    (2.0, 3.0, None)
    """
    for t, inc, bnd in rec.get("trace") or ():
        g = relative_gap(inc, bnd)
        if g is not None and g <= gap + 1e-12:
            return float(t)
    final = certified_gap_of(rec)
    if final is not None and final <= gap + 1e-12:
        return float(rec.get("solve_seconds") or 0.0)
    return None


def certified_gap_of(rec: dict) -> float | None:
    """The final certified gap of a run that answered (``None`` for one that did not)."""
    if rec.get("status") not in ("optimal", "feasible"):
        return None
    return relative_gap(rec.get("objective"), lower_bound_of(rec))


def rows(records: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per run, sorted by instance, cluster, method, backend."""
    labels = run_labels(records, with_backend=False)
    out = []
    for r in records:
        row = {"instance": instance_of(r), "problem": problem_of(r), "cluster": cluster_of(r), "method": labels[id(r)],
               "backend": backend_of(r), "status": r.get("status"), "answer_from": answer_from_of(r),
               "objective": r.get("objective"), "lower_bound": lower_bound_of(r),
               "certified_gap": certified_gap_of(r), "bound": r.get("bound"),
               "transformed": "yes" if r.get("transform") is not None else ""}
        for g in GAPS:
            row[f"t_{pct(g)}"] = time_to_gap(r, g) if row["backend"] != "-" else None
        row.update(solve_s=r.get("solve_seconds"), build_s=r.get("build_seconds"),
                   time_limit=time_limit_of(r), message=short_error(r))
        out.append(row)
    out.sort(key=lambda x: (x["instance"], x["problem"], x["cluster"], str(x["method"]), x["backend"]))
    return out


def method_rows(records: Sequence[dict]) -> tuple[list[str], list[dict[str, Any]]]:
    """Objectives by method: the method labels, and one row per instance, problem and
    cluster (:func:`where_of`) with each method's objective (``None``: no usable answer), the instance's lower
    bound, the best method and its certified gap against that bound."""
    labels = run_labels(records)
    by_key: dict[tuple[str, str, str], list[dict]] = {}
    for r in records:
        by_key.setdefault(where_of(r), []).append(r)
    methods = sorted({labels[id(r)] for r in records})
    out = []
    for (inst, problem, cl), recs in sorted(by_key.items()):
        row: dict[str, Any] = {"instance": inst, "problem": problem, "cluster": cl,
                               "transformed": {labels[id(r)] for r in recs if r.get("transform") is not None}}
        for r in recs:
            ok = r.get("status") in ("optimal", "feasible") and r.get("objective") is not None
            row[labels[id(r)]] = r["objective"] if ok else None
        lbs = [b for b in map(instance_bound, recs) if b is not None]
        row["lower_bound"] = max(lbs) if lbs else None
        vals = [(r["objective"], labels[id(r)]) for r in recs if row.get(labels[id(r)]) is not None
                and r.get("transform") is None]
        if vals:
            best, who = min(vals)
            row["best"], row["best_gap"] = who, relative_gap(best, row["lower_bound"])
        out.append(row)
    return methods, out


def short_error(rec: dict) -> str | None:
    """An errored run's message, cut to 90 characters."""
    if rec.get("status") != "error":
        return None
    msg = str(rec.get("message") or "")
    return msg if len(msg) <= 90 else msg[:87] + "..."


def pct(g: float) -> str:
    """A gap as a percentage label (``0.01`` -> ``1%``)."""
    return f"{100 * g:g}%"


def method_profile(records: Sequence[dict]) -> tuple[dict[str, set], dict[str, list[float]], list[str]]:
    """The data of the performance profile over methods: the (instance, problem, cluster)
    triples each method ran on, its sorted ratios ``objective / best objective there`` (one per
    instance where it answered), and the methods left out (answers on a transformed graph)."""
    methods, table = method_rows(records)
    labels = run_labels(records)
    ran: dict[str, set] = {}
    for r in records:
        if r.get("transform") is None:
            ran.setdefault(labels[id(r)], set()).add(where_of(r))
    ratios: dict[str, list[float]] = {m: [] for m in methods if m in ran}
    for r in table:
        vals = [r[m] for m in ratios if r.get(m) is not None and m not in r["transformed"]]
        if not vals:
            continue
        best = min(vals)
        for m in ratios:
            if r.get(m) is not None and m not in r["transformed"]:
                ratios[m].append(r[m] / best if best > 0 else (1.0 if r[m] == best else float("inf")))
    left_out = sorted({labels[id(r)] for r in records if r.get("transform") is not None} - set(ran))
    return ran, {m: sorted(v) for m, v in ratios.items()}, left_out
