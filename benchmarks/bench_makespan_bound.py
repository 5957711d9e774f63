"""Certified makespan gaps on the original graph: the old bound, heads-and-tails and the comm-aware relaxation.

Every makespan answer carries the graph's lower bound, which before 2026-11-27 was the
larger of the critical path of least times and the busiest device's work share and
ignored communication. Per row (graph, cluster) this prints and writes to
``results/makespan-bounds.md`` the best known answer, the old bound, the heads-and-tails
bound now in :func:`~dnnplace.evaluation.bounds.makespan_lower_bound`, the
comm-aware subgraph relaxation of :mod:`dnnplace.formulations.makespan_relaxation`
(CP-SAT, ``--time-limit`` seconds per row, its best bound) and the certified gaps
``1 - bound / answer``.

Rows: the 766-node LSTM training graph (4 layers x 20 steps, hidden 1024: the graph of
``experiments/pesto-coarsening.toml``) on 2 PCIe GPUs and the host CPU (``Cluster.single_host(2,
interconnect="pcie")``, the instance quoted with the task), answered here by HEFT and the
``pesto`` method (50 coarse nodes, ``--pesto-seconds``); the six captured rows of
``results/pesto/models.md`` (RNNLM-2x2048, Transformer-base, GNMT-4 on 2 and 4 V100s on
NVLink), whose answers are the stored runs of ``results/pesto/bench.jsonl`` (the best
feasible one over every method run there), not rerun.

    .venv/bin/python -m benchmarks makespan-bound --time-limit 40
    .venv/bin/python -m benchmarks makespan-bound --only rnnlm --time-limit 10
"""

from __future__ import annotations

import argparse
import platform
import subprocess

from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO
from benchmarks.rows import read_jsonl

CAPTURED = ["rnnlm-2x2048", "transformer-base", "gnmt-4"]
LSTM = dict(family="lstm", layers=4, steps=20, hidden=1024, batch=128, vocab=10000, training=True, kinds=["gpu"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, time_limit=40.0, out=REPO / "results" / "makespan-bounds.md", only=None,
               help={"time_limit": "CP-SAT seconds for the relaxation, per row",
                     "only": "substrings of the row names"})
    parser.add_argument("--size", type=int, default=100, help="kept nodes per relaxation set (default: 100)")
    parser.add_argument("--pesto-seconds", type=float, default=20.0,
                        help="time limit of the pesto answer on the generated LSTM (default: 20)")
    parser.add_argument("--rerun-answers", action="store_true",
                        help="also answer the captured rows with today's pesto (CP-SAT, 100 coarse nodes, its "
                             "sub-clusters; --pesto-seconds) and HEFT, keeping the better of those and the stored")


def _stored_answers() -> dict[tuple[str, int], tuple[float, str]]:
    """(model, GPUs) -> (best feasible objective, method) over the latest stored models row."""
    latest: dict[tuple[str, int], dict] = {}
    for r in read_jsonl(REPO / "results" / "pesto" / "bench.jsonl"):
        if r.get("bench") == "models":
            latest[r["model"], r["gpus"]] = r
    out = {}
    for key, r in latest.items():
        runs = [(v["objective"], k) for k, v in r.items()
                if isinstance(v, dict) and v.get("feasible") and v.get("objective") is not None]
        if runs:
            out[key] = min(runs)
    return out


def _answer(g, cl, name: str, seconds: float, params: dict) -> tuple[float, str, dict | None]:
    """The better of HEFT and the ``pesto`` method (``params``, ``seconds``) on ``(g, cl)``,
    each re-scored by the evaluator: (makespan, method, :func:`_chain` of its schedule)."""
    from dnnplace.graphs.instance import Instance
    from dnnplace.registry import SolveRequest, SolverOptions, solve

    inst = Instance(g, cl, name)
    runs = []
    for method, req in (("heft", SolveRequest(problem="makespan")),
                        ("pesto", SolveRequest(problem="makespan", params=params,
                                               solver=SolverOptions(time_limit=seconds, threads=1)))):
        res = solve(inst, method, req)
        if res.evaluation and res.evaluation.get("feasible"):
            runs.append((float(res.objective), method, res))
    objective, method, res = min(runs, key=lambda r: r[:2])
    return objective, method, _chain(g, cl, res)


def _chain(g, cl, res) -> dict | None:
    """What sets an answer's makespan: the evaluator's schedule of ``res`` (its placement in
    its recorded order) and its critical chain (``heuristics.refine.critical_chain``): the
    compute on the chain, the rest of the makespan (waits for transfers), and how many of
    the chain's steps are a device's previous node rather than an input (contention);
    ``None`` where the replay does not give the reported makespan."""
    import numpy as np

    from dnnplace.evaluation.link_orders import link_priorities_from_doc
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.io import result_priorities
    from dnnplace.graphs.placement import Placement
    from dnnplace.heuristics.refine import critical_chain

    doc = {"placement": res.placement, "priorities": res.priorities, "link_priorities": res.link_priorities}
    sim = simulate(Placement.from_mapping(g, cl, res.placement), policy="order",
                   priorities=result_priorities(doc, g), link_priorities=link_priorities_from_doc(doc, g))
    if abs(sim.makespan - float(res.objective)) > 1e-6 * max(1.0, float(res.objective)):
        return None   # not the evaluator's schedule: no figures rather than wrong ones
    chain = critical_chain(sim)
    sch = sim.schedule
    compute = float((sch.finish[chain] - sch.start[chain]).sum())
    edges = set(zip(g.src.tolist(), g.dst.tolist()))
    device_steps = sum((int(a), int(b)) not in edges for a, b in zip(chain[:-1], chain[1:]))
    return {"compute": compute, "waits": float(sim.makespan) - compute, "nodes": int(chain.size),
            "device_steps": device_steps, "devices": int(np.unique(sch.placement.device[chain]).size)}


def run(args) -> None:
    from dnnplace.evaluation.bounds import critical_path_lower_bound, heads_and_tails, makespan_lower_bound
    from dnnplace.formulations.makespan_relaxation import makespan_relaxation_bound
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.generators import generate
    from dnnplace.graphs.io import load_instance

    rows = []
    # the LSTM on the cluster quoted with the task: 2 PCIe GPUs and the host CPU (which runs none of its GPU-only nodes)
    specs = [("lstm-4x20-h1024", 2, "pcie")] + [(m, k, "nvlink") for m in CAPTURED for k in (2, 4)]
    stored = _stored_answers()
    head = (f"{'graph':18} {'GPUs':>4} {'nodes':>5} {'answer':>9} {'old':>9} {'heads-tails':>11} "
            f"{'relaxation':>10} {'old gap':>8} {'new gap':>8} {'relax s':>7}")
    print(head, flush=True)
    for name, k, link in specs:
        if not selected(f"{name}-gpus{k}", args.only):
            continue
        cl = Cluster.single_host(k, interconnect=link, with_cpu=name.startswith("lstm"))
        if name.startswith("lstm"):
            g = generate(**LSTM)
            answer, who, chain = _answer(g, cl, name, args.pesto_seconds, {"coarsen_to": 50})
        else:
            g = load_instance(REPO / "graphs" / "workloads" / "captured" / f"{name}.json").graph
            if (name, k) not in stored and not args.rerun_answers:
                continue
            answer, who = stored.get((name, k), (float("inf"), "-"))
            chain = None   # the stored runs keep no schedule
            if args.rerun_answers:   # today's pesto (CP-SAT, its sub-clusters) beside the stored best
                fresh, how, fresh_chain = _answer(g, cl, name, args.pesto_seconds,
                                                  {"coarsen_to": 100, "engine": "cpsat"})
                if fresh < answer:
                    answer, who, chain = fresh, f"{how} (rerun)", fresh_chain
        # the bound as it was: the critical path, and the total least work over all the cluster's devices
        old = max(critical_path_lower_bound(g, cl), float(heads_and_tails(g, cl)[0].sum()) / cl.size)
        ht = makespan_lower_bound(g, cl)
        rb = makespan_relaxation_bound(g, cl, time_limit=args.time_limit, size=args.size, horizon=answer)
        best = max(ht, rb.bound)
        if best > answer * (1 + 1e-9):
            raise AssertionError(f"{name} on {k} GPUs: bound {best} above the answer {answer}")
        sets = max((s for s in rb.sets if s["bound"] is not None), key=lambda s: s["bound"], default=None)
        row = dict(graph=name, gpus=k, link=link, nodes=g.n, answer=answer, who=who, old=old, ht=ht,
                   relax=rb.bound, relax_set=sets, seconds=rb.seconds, old_gap=1 - old / answer,
                   new_gap=1 - best / answer, chain=chain, cp=critical_path_lower_bound(g, cl))
        rows.append(row)
        print(f"{name:18} {k:>4} {g.n:>5} {answer:>9.3f} {old:>9.3f} {ht:>11.3f} {rb.bound:>10.3f} "
              f"{100 * row['old_gap']:>7.1f}% {100 * row['new_gap']:>7.1f}% {rb.seconds:>7.1f}", flush=True)
    if args.out and rows:
        _write(args, rows)
        print(f"\nwrote {args.out}")


def _write(args, rows: list[dict]) -> None:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    rerun = f" --rerun-answers --pesto-seconds {args.pesto_seconds:g}" if args.rerun_answers else ""
    lines = [
        "# Certified makespan gaps on the original graph", "",
        f"Generated by `.venv/bin/python -m benchmarks makespan-bound --time-limit {args.time_limit:g} "
        f"--size {args.size}{rerun}` at git {rev} on {platform.node()} ({machine_load()}), {utc_now()}. "
        "**Simulation**: makespans are the evaluator's (link congestion on).", "",
        "Bounds (each holds for every schedule; docs/semantics.md 2.1): **old** = max(critical path of least "
        "times, the total least work over all the cluster's devices, a host CPU that runs no node included); "
        "**heads-tails** = `makespan_lower_bound` now (the critical path and the max over thresholds a, b of "
        "a + b + W(S(a,b))/m, S(a,b) the nodes whose head is at least a and tail at least b, m the devices that "
        "can run some node); **relaxation** = `makespan_relaxation_bound`: CP-SAT's best bound of the subgraph "
        f"relaxation (kept sets of {args.size} nodes: placement, device order, per-destination transfer "
        "times between kept nodes, static memory; dropped nodes as heads, tails, path lags and work "
        "windows), at least the heads-tails bound, "
        f"{args.time_limit:g} s per row shared by its kept sets; **gap** = 1 - bound / answer.", "",
        "Answers: the LSTM row's are run here (HEFT and `pesto` with 50 coarse nodes, "
        f"{args.pesto_seconds:g} s, the better kept); the captured rows' are the stored runs of "
        "results/pesto/bench.jsonl behind results/pesto/models.md (best feasible over the methods run there, "
        "re-scored by the evaluator of that time)" + (
            f", or where better, HEFT or today's `pesto` (CP-SAT, 100 coarse nodes, its sub-clusters and windows, "
            f"{args.pesto_seconds:g} s; `(rerun)`), re-scored now." if args.rerun_answers else ", not rerun."), "",
        "| graph | GPUs | link | nodes | answer (ms) | from | old bound | heads-tails | relaxation "
        "| old gap | new gap | gap closed | relaxation s | best kept set |",
        "|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        closed = 1 - r["new_gap"] / r["old_gap"] if r["old_gap"] > 0 else 0.0
        s = r["relax_set"]
        lines.append(f"| {r['graph']} | {r['gpus']} | {r['link']} | {r['nodes']} | {r['answer']:.3f} | {r['who']} "
                     f"| {r['old']:.3f} | {r['ht']:.3f} | {r['relax']:.3f} | {100 * r['old_gap']:.1f}% "
                     f"| {100 * r['new_gap']:.1f}% | {100 * closed:.0f}% | {r['seconds']:.1f} "
                     f"| {s['set'] + ' ' + format(s['bound'], '.3f') + ' ' + s['status'] if s else '-'} |")
    lines += ["", "What sets each answer's makespan (answers run here): the chain of nodes whose finish sets "
              "it in the evaluator's schedule (`heuristics/refine.py: critical_chain`), its compute, the rest of "
              "the makespan (waits for transfers), and the steps of the chain where a node waited for its "
              "device's previous node rather than for an input; against the critical path of least times.", "",
              "| graph | GPUs | answer (ms) | critical path | chain compute | chain waits | chain nodes "
              "| steps behind the device's previous node | devices on the chain |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = r["chain"]
        if c:
            lines.append(f"| {r['graph']} | {r['gpus']} | {r['answer']:.3f} | {r['cp']:.3f} | {c['compute']:.3f} "
                         f"| {c['waits']:.3f} | {c['nodes']} | {c['device_steps']} | {c['devices']} |")
    lines += [
        "", "Reading. The old bound's work share divided by every device of the cluster, the host CPU "
        "included, which runs none of a GPU-only graph's nodes: on the LSTM row (35.95 ms quoted with the task against "
        "22.79) counting only the devices that can run some node gives 34.18 and closes most of the gap; "
        "the rest of the improvement comes from the work windows (heads-and-tails) and from heads and tails "
        "that count the transfers a node's inputs or outputs cannot all avoid. The CP-SAT relaxation adds "
        "little on these graphs (most visibly GNMT-4 on 2 GPUs, 55.9 -> 59.8 ms): its kept sets solve to "
        "optimality within seconds, so its limit is the relaxation, not the time, and it sees the dropped "
        "nodes only through heads, tails, lags and shared work. On tiny instances, where it keeps every "
        "node, it is nearly exact (tests/test_bounds.py: equal to the exhaustive optimum on 46 of 50, mean "
        "gap 0.5 % against 31 % for the old bound and 22 % for the new cheap one). Whether the remaining "
        "captured-graph gaps are the bound's or the answers' is not known: no optimum is known there.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
