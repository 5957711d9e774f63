"""Pesto's congestion ablation (Fig. 5) swept over coarse sizes, solver seeds and both exact engines.

Why Fig. 5's ratio is not reproduced (results/pesto/README.md), on the captured RNNLM-2x2048
training graph, 2 GPUs on PCIe.

Per (engine, coarse size, seed): the ``pesto`` ILP without its congestion constraints (7) and
with them, both reporting the ILP's own placement and order (``fallback=false``) and both
re-scored by the simulator *with* link congestion (shared PCIe ports, a tensor once per
consuming GPU). The ratio is makespan without / with (Pesto Fig. 5: about 3 for
RNNLM-2-2048 in the paper's own simulator, Sec. 3.2.2, the congestion-aware ILP ahead). Every run is a RunSpec on the
instance file of ``pesto-congestion-captured`` through the one sweep driver (resumable:
``<out>/runs.jsonl``); the table and ``ratio.png`` are drawn from the records.

    .venv/bin/python -m benchmarks pesto-congestion-sweep \\
        --sizes 50 100 200 300 --seeds 0 1 --engines cpsat highs --time-limit 20
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchmarks.options import add_shared
from benchmarks.paths import REPO


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, sizes=[50, 100, 200, 300], time_limit=20.0,
               out=REPO / "results" / "pesto" / "congestion-sweep",
               help={"sizes": "coarse sizes (nodes)", "time_limit": "seconds per ILP (one thread)",
                     "out": "folder of runs.jsonl, the instances, the table and ratio.png"})
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--engines", nargs="+", default=["cpsat", "highs"], choices=["cpsat", "highs"])
    parser.add_argument("--highs-sizes", type=int, nargs="*", default=None,
                        help="coarse sizes for HiGHS (default: --sizes)")


def run(args) -> None:
    from dnnplace.data import experiment_config
    from dnnplace.evaluation.sim_costs import transfer_semantics
    from dnnplace.experiments.instance_files import write_variants
    from dnnplace.experiments.makespan_runs import extra_of, makespan_of, replay, run_spec
    from dnnplace.experiments.pesto_config import Config, experiment_graph
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.io import load_instance
    from dnnplace.runner import execute
    from dnnplace.tables import Column, fixed, write_table

    cfg = Config.load(experiment_config("pesto-congestion-captured"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    g, source = experiment_graph(cfg)
    cl = Cluster.single_host(**cfg.cluster)
    v = write_variants(g, {"base": (cl, cl.devices_of_kind("gpu").size, 1.0, 1.0)}, out / "instances",
                       f"{source} on {cl.name}")["base"]
    cells = []
    for engine in args.engines:
        sizes = args.sizes if engine == "cpsat" or args.highs_sizes is None else args.highs_sizes
        for size in sizes:
            for seed in args.seeds:
                solver = {"time_limit": args.time_limit, "rel_gap": cfg.rel_gap, "threads": 1, "seed": seed}
                eng = {"engine": "cpsat"} if engine == "cpsat" else {}  # HiGHS: the MIP engine's default solver
                specs = {c: run_spec(v, "pesto", {"coarsen_to": size, **eng, "ilp_congestion": c, "fallback": False},
                                     solver)
                         for c in (False, True)}
                cells.append((engine, size, seed, specs))
    done = execute([s for *_, sp in cells for s in sp.values()], out / "runs.jsonl", name="congestion-sweep")
    rows = []
    inst = load_instance(v.path)
    for engine, size, seed, specs in cells:
        free, cong = done.get(specs[False].key), done.get(specs[True].key)
        a, b = makespan_of(free), makespan_of(cong)
        per_edge = None
        if a is not None and free.get("placement"):
            with transfer_semantics("per_edge"):  # every edge its own transfer (the ILP's accounting)
                per_edge = replay(free, inst, congestion=True).makespan
        rows.append({"per_edge": per_edge, "ratio_per_edge": per_edge / b if per_edge and b else None,
                     "engine": engine, "coarse": size, "seed": seed, "without": a, "with": b,
                     "ratio": a / b if a and b else None,
                     "gap_without": extra_of(free, "ilp_gap"), "gap_with": extra_of(cong, "ilp_gap"),
                     "coarse_nodes": extra_of(cong, "coarse_nodes"),
                     "source_with": extra_of(cong, "source")})
    _plot(rows, out / "ratio.png", args.time_limit)
    f3 = fixed(3)
    cols = [Column("engine"), Column("coarse", "coarse nodes asked", numeric=True), Column("seed", numeric=True),
            Column("without", "without (7), simulated (ms)", f3, True),
            Column("with", "with (7), simulated (ms)", f3, True),
            Column("ratio", "ratio without / with", f3, True),
            Column("per_edge", "without (7), replayed per edge (ms)", f3, True),
            Column("ratio_per_edge", "ratio, per edge", f3, True),
            Column("gap_without", "ILP gap without", lambda x: f"{100 * x:.1f}%", True),
            Column("gap_with", "ILP gap with", lambda x: f"{100 * x:.1f}%", True),
            Column("source_with", "answer with (7)")]
    pre = [f"{cfg.description.strip()} Swept here: coarse sizes {args.sizes}, solver seeds {args.seeds}, engines "
           f"{args.engines}, {args.time_limit:g} s per ILP (one thread, relative gap {cfg.rel_gap:g}): a reduced "
           "sweep (short limits, few seeds) on a shared 2-core machine.",
           "**Simulation**, not hardware: both ILPs' own placements and orders (`fallback=false`) replayed by the "
           "simulator with link congestion (shared PCIe ports, a tensor once per consuming GPU). Ratio = makespan "
           "without constraints (7) / with them; Pesto Fig. 5: about 3 for RNNLM-2-2048 in the paper's own "
           "simulator (Sec. 3.2.2). The "
           "per-edge columns replay the congestion-free ILP's schedule sending every edge separately (the "
           "project's earlier semantics and the ILP's accounting), against the with-(7) run as simulated."]
    write_table(out / "table", "Pesto congestion ablation vs coarse size (captured RNNLM-2x2048, 2 GPUs, PCIe)",
                cols, rows, preamble=pre,
                footer=[f"Command: `python -m benchmarks pesto-congestion-sweep --sizes "
                        f"{' '.join(map(str, args.sizes))} --seeds {' '.join(map(str, args.seeds))} --engines "
                        f"{' '.join(args.engines)} --time-limit {args.time_limit:g}"
                        + (f" --highs-sizes {' '.join(map(str, args.highs_sizes))}" if args.highs_sizes else "")
                        + "`."])
    for r in rows:
        print(r["engine"], r["coarse"], r["seed"], r["without"], r["with"], r["ratio"])


def _plot(rows: list[dict], path: Path, limit: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, engine in enumerate(sorted({r["engine"] for r in rows})):
        mine = [r for r in rows if r["engine"] == engine and r["ratio"] is not None]
        xs = [r["coarse"] * (1 + 0.03 * (k - 0.5)) for r in mine]
        ax.scatter(xs, [r["ratio"] for r in mine], label=f"{engine}, each seed", marker="o" if k == 0 else "s",
                   alpha=0.7, color=f"C{k}")
        ax.scatter(xs, [r["ratio_per_edge"] for r in mine], label=f"{engine}, replayed per edge",
                   marker="o" if k == 0 else "s", facecolors="none", edgecolors=f"C{k}", alpha=0.7)
        sizes = sorted({r["coarse"] for r in mine})
        med = [sorted(r["ratio"] for r in mine if r["coarse"] == s) for s in sizes]
        ax.plot(sizes, [m[len(m) // 2] if len(m) % 2 else math.sqrt(m[len(m) // 2 - 1] * m[len(m) // 2])
                        for m in med], alpha=0.6, color=f"C{k}")
    ax.axhline(1.0, color="black", lw=0.6)
    ax.axhline(3.0, color="grey", lw=0.8, ls="--", label="Pesto Fig. 5 (~3x, hardware)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("coarse nodes")
    ax.set_ylabel("makespan without (7) / with (7), simulated")
    ax.set_title(f"Pesto congestion ablation vs coarse size (captured RNNLM-2x2048, 2 GPUs, PCIe; {limit:g} s "
                 "per ILP)", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
