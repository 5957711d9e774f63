"""The exact max-load methods on the captured zoo models at layer granularity.

Each captured training graph of ``graphs/workloads/captured`` is contracted to its layers
(every captured ``layer``, forward and backward with its parameters and updates, one
colocation class: :func:`~dnnplace.graphs.transforms.layers.contract_layers`, the layer
granularity of Tarnawski et al., Table 3) and solved for max-load (``pipedream``
objective) on a cluster of GPUs and the host CPU with ``--methods`` (default ``dp`` and
``auto``), each in its own process under ``--time-limit`` and ``--memory-limit``. Per row:
the operator count, the nodes left after the contraction (a layer whose operators have
another layer's on a path between them stays ungrouped: an RNN cell called at every time
step is one such layer), the DP graph's ideals where it enumerated them, the outcome, the answer re-scored by the
evaluator on the layer graph, the bound, the gap, the wall time and the process's peak RSS.

    .venv/bin/python -m benchmarks dp-layers --time-limit 120 --memory-limit 4GB
    .venv/bin/python -m benchmarks dp-layers --only resnet --methods dp

Writes ``results/dp-layers.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO

CAPTURED = REPO / "graphs" / "workloads" / "captured"
GROUPINGS = (("layer", "contract-layers"), ("call", "contract-calls"))
"""The table's groupings and the graph transform of each (graphs/transforms/replay.py)."""

_CHILD = r"""
import json, resource, sys, time
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.presets import cluster_preset
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.transforms.replay import apply_transform
from dnnplace.methods.base import SolveRequest
from dnnplace.registry import solve
path, cluster, method, transform = sys.argv[1:5]
limit, memory = float(sys.argv[5]), float(sys.argv[6])
g = load_instance(path).graph
inst, done = apply_transform(transform, Instance(g, cluster_preset(cluster), path))
rule = done.meta["rule"]
t = time.perf_counter()
res = solve(inst, method, SolveRequest("maxload", solver=SolverOptions(time_limit=limit, memory_limit=memory)))
ev = res.evaluation or {}
print(json.dumps({"n": g.n, "layers": int(inst.graph.colocation.max()) + 1, "rule": rule, "status": res.status,
                  "termination": res.termination, "objective": res.objective, "bound": res.bound, "gap": res.gap,
                  "feasible": ev.get("feasible"), "rescored": ev.get("objective"), "message": res.message,
                  "ideals": res.extra.get("ideals", (res.extra.get("auto_dp") or {}).get("ideals")),
                  "dp_nodes": res.extra.get("dp_nodes"), "auto_choice": res.extra.get("auto_choice"),
                  "seconds": time.perf_counter() - t,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=120.0, out=REPO / "results" / "dp-layers.md", only=None,
               help={"time_limit": "seconds per method and graph", "only": "substrings of the graph names"})
    parser.add_argument("--methods", default="dp,auto", help="max-load methods, comma-separated (default dp,auto)")
    parser.add_argument("--cluster", default="single-host-4-nvlink", help="cluster preset (default %(default)s)")
    parser.add_argument("--memory-limit", default="4GB", help="memory of each run (default 4GB)")


def run(args) -> None:
    from dnnplace.command_args import memory_bytes
    memory = memory_bytes(args.memory_limit)
    graphs = sorted(p for p in CAPTURED.glob("*.json") if selected(p.stem, args.only))
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    load_at_start, rows = machine_load(), []
    print(f"{'graph':18} {'group':5} {'method':6} {'ops':>5} {'layers':>6} {'outcome':>22} {'answer':>9} {'bound':>9} "
          f"{'gap':>7} {'s':>6} {'RSS MB':>7}", flush=True)
    for path in graphs:
        for grouping, transform in GROUPINGS:
            if grouping == "call" and not any("left ungrouped" in str(d.get("rule")) for d in rows
                                              if d["graph"] == path.stem):
                continue   # every layer contiguous: the same graph by call
            for method in methods:
                d = _solve(path, method, transform, args.cluster, args.time_limit, memory)
                rows.append({**d, "grouping": grouping})
                print(_line(rows[-1]), flush=True)
    if args.out and rows:
        _write(args, rows, load_at_start)
        print(f"\nwrote {args.out}")


def _solve(path, method: str, transform: str, cluster: str, time_limit: float, memory: float) -> dict:
    """One row: ``method`` on ``path`` after ``transform``, in its own process; the answer must
    be feasible by the evaluator."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), cluster, method, transform, str(time_limit),
                          str(memory)], capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        d = {"status": f"exit {out.returncode}", "message": out.stderr.strip().splitlines()[-1:]}
    else:
        d = json.loads(out.stdout.strip().splitlines()[-1])
    d.update(graph=path.stem, method=method, wall=time.perf_counter() - t0)
    if d.get("objective") is not None and not d.get("feasible"):
        raise RuntimeError(f"{path.stem} {method}: the evaluator finds the answer infeasible: {d}")
    return d


def _outcome(d: dict) -> str:
    s = d.get("status", "?")
    term = d.get("termination")
    return s if not term or term in s else f"{s} [{term}]"


def _ms(x) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else "-"


def _line(d: dict) -> str:
    gap = f"{100 * d['gap']:.2f}%" if isinstance(d.get("gap"), (int, float)) else "-"
    return (f"{d['graph']:18} {d['grouping']:5} {d['method']:6} {d.get('n', '-'):>5} {d.get('layers', '-'):>6} "
            f"{_outcome(d):>22} "
            f"{_ms(d.get('objective')):>9} {_ms(d.get('bound')):>9} {gap:>7} {d.get('seconds', d['wall']):>6.1f} "
            f"{d.get('rss_mb', 0):>7.0f}")


def _write(args, rows: list[dict], load_at_start: str) -> None:
    lines = ["# Exact max-load on the captured models at layer granularity", "",
             f"Generated by `{args.command_line}` on {utc_now()} ({load_at_start} at the start). "
             f"Cluster `{args.cluster}`, objective `pipedream`, each method in its own process under "
             f"`--time-limit {args.time_limit:g}` and `--memory-limit {args.memory_limit}`. Layer graph: every "
             "captured layer one colocation class (graphs/transforms/layers.py); a layer whose operators have "
             "another layer's on a path between them is left ungrouped (grouping `layer`, Tarnawski's rule) or "
             "split into its calls (grouping `call`, `--transform contract-calls`, run where some layer is not "
             "contiguous); answers re-scored by the evaluator on it. `auto` picks the DP or the IP by the DP "
             "graph's ideals (docs/guide.md).", "",
             "| graph | grouping | method | operators | after contraction | ideals | outcome | answered by | answer ms "
             "| bound ms | gap | s | peak RSS MB | note |",
             "|---|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|"]
    for d in rows:
        gap = f"{100 * d['gap']:.2f} %" if isinstance(d.get("gap"), (int, float)) else "-"
        note = d.get("message") or ""
        if isinstance(note, list):
            note = " ".join(note)
        ideals = f"{d['ideals']:,}" if d.get("ideals") else "-"   # 0: the enumeration stopped (the note says where)
        lines.append(f"| {d['graph']} | {d['grouping']} | {d['method']} | {d.get('n', '-')} | {d.get('layers', '-')} "
                     f"| {ideals} "
                     f"| {_outcome(d)} | {d.get('auto_choice') or d['method']} "
                     f"| {_ms(d.get('objective'))} | {_ms(d.get('bound'))} | {gap} | {d.get('seconds', d['wall']):.1f} "
                     f"| {d.get('rss_mb', 0):.0f} | {str(note)[:160].replace('|', '/')} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
