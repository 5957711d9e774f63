"""Pesto experiments in simulation (Pesto Fig. 5, Fig. 8, Sec. 3.3/5.3), driven by TOML.

    dnnplace reproduce pesto-congestion      # experiments/pesto-congestion.toml
    dnnplace reproduce pesto-hardware        # experiments/pesto-hardware.toml
    dnnplace reproduce pesto-coarsening      # experiments/pesto-coarsening.toml

(``--quick`` caps every ILP at 10 s; ``pesto-congestion-wide`` and ``pesto-hardware-100``
are variants on a wider graph and with 100 coarse nodes.)

Every number is a *simulation* (graphs/simulate.py, SPEC 2.1) of generated operator
graphs on a modelled cluster, not a hardware measurement. Each run writes
``results/pesto/<name>/results.json`` (config, git revision, solver version, per-run
status, timings and makespans), ``table.md`` and plots.

Experiment kinds (``kind`` in the TOML):

``congestion``  Fig. 5: the Pesto ILP with and without congestion constraints, both
                re-simulated *with* congestion; makespan ratio and Gantt charts.
``hardware``    Fig. 8: compute speed and link speed scaled 0.1x-10x; Pesto vs an
                expert layer-wise split (TensorFlow-like FIFO order) and the best list
                scheduler; reduction over the expert in percent.
``coarsening``  Sec. 3.3 / 5.3: coarse size vs ILP time, certified gap (on the coarse
                ILP) and simulated makespan on the original graph.
"""

from __future__ import annotations

import dataclasses
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace.data import experiment_config
from dnnplace.formulations.pesto import pesto
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.io import write_json
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.simulate import simulate
from dnnplace.heuristics.list_scheduling import best_list_schedule
from dnnplace.registry import SolverOptions
from dnnplace.runner import git_revision

ROOT = Path(__file__).resolve().parents[1]  # the checkout, for git provenance


@dataclass(frozen=True)
class Config:
    """A validated experiment config (see the TOML files for the meaning of each key)."""

    name: str
    kind: str
    description: str = ""
    graph: dict = field(default_factory=dict)        # generate(**graph)
    cluster: dict = field(default_factory=dict)      # Cluster.single_host(**cluster)
    coarsen_to: int | None = 100
    coarse_sizes: tuple = (50, 100, 200, 300)
    gpus: tuple = (2,)
    compute_scales: tuple = (0.1, 0.3, 1.0, 3.0, 10.0)
    link_scales: tuple = (0.1, 0.3, 1.0, 3.0, 10.0)
    time_limit: float = 60.0
    rel_gap: float = 0.01
    out_dir: str = "results/pesto"

    @classmethod
    def load(cls, path: str | Path) -> Config:
        doc = tomllib.loads(Path(path).read_text())
        known = set(cls.__dataclass_fields__)
        unknown = set(doc) - known
        if unknown:
            raise InputError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(known)}")
        if doc.get("kind") not in ("congestion", "hardware", "coarsening"):
            raise InputError(f"{path}: kind must be congestion, hardware or coarsening")
        for key in ("coarse_sizes", "gpus", "compute_scales", "link_scales"):
            if key in doc:
                doc[key] = tuple(doc[key])
        return cls(**doc)


def scaled_cluster(base: Cluster, compute: float = 1.0, link: float = 1.0) -> Cluster:
    """Devices ``compute`` times faster, links ``link`` times faster (beta0, beta1 / link)."""
    from dnnplace.graphs.cluster import Device
    devs = tuple(Device(d.name, d.kind, d.memory, d.speed * compute) for d in base.devices)
    return Cluster(devs, base.beta0 / link, base.beta1 / link, base.cost_factor,
                   name=f"{base.name}-c{compute}-l{link}", meta=dict(base.meta))


def expert_layerwise(graph: OpGraph, cluster: Cluster) -> Placement:
    """Pesto's expert for RNN models (Sec. 5.2): LSTM layers split evenly over the GPUs in
    order; the embedding with the first layer, projection/softmax with the last;
    gradients with their layer."""
    gpus = cluster.devices_of_kind("gpu")
    layers = np.asarray(graph.layers, dtype=np.int64)
    lo, hi = 0, int(layers.max())
    lstm_layers = max(1, hi - lo)  # layer ids: -1 embed, 0..L-1 LSTM, L top
    lay = np.clip(layers, 0, lstm_layers - 1)
    dev = gpus[(lay * gpus.size) // lstm_layers]
    return Placement(graph, cluster, dev)


def _pesto_row(g, cl, cfg: Config, coarsen_to, **kw) -> dict:
    solver = SolverOptions(time_limit=cfg.time_limit, rel_gap=cfg.rel_gap, threads=1)
    t0 = time.perf_counter()
    r = pesto(g, cl, coarsen_to=coarsen_to, solver=solver, **kw)
    return {"makespan": r.makespan, "status": r.status, "termination": r.termination,
            "ilp_objective": r.ilp_objective, "ilp_bound": r.ilp_bound, "ilp_gap": r.ilp_gap,
            "warm_makespan": r.warm_makespan, "warm_algorithm": r.warm_algorithm, "source": r.source,
            "coarse_nodes": r.coarse_n, "coarsen_s": r.coarsen_seconds, "build_s": r.build_seconds,
            "solve_s": r.solve_seconds, "wall_s": time.perf_counter() - t0, "size": r.size,
            "solver_version": r.solver_version, "_run": r}


def run_congestion(cfg: Config, out: Path) -> dict:
    """Three ILP runs, all re-simulated with congestion and reported without any
    warm-start/runtime-order substitution (``fallback=False``):

    ``without_congestion``  ILP without (7), list-scheduling start;
    ``with_congestion``     ILP with (7), list-scheduling start;
    ``with_congestion_ws``  ILP with (7), started from the better of the list schedule
                            and the no-congestion ILP's solution (re-simulated with
                            congestion, hence feasible for this ILP).
    """
    from dnnplace.graphs.gantt import plot_gantt

    g = generate(**cfg.graph)
    cl = Cluster.single_host(**cfg.cluster)
    rows = {}
    runs = {}
    plan = (("without_congestion", False, None), ("with_congestion", True, None),
            ("with_congestion_ws", True, "without_congestion"))
    for label, ilp_cong, start_from in plan:
        extra = None
        if start_from is not None:
            prev = runs[start_from]
            pr = np.empty(prev.coarse_start.size, dtype=np.int64)
            pr[np.argsort(prev.coarse_start, kind="stable")] = np.arange(prev.coarse_start.size)
            extra = [(prev.coarse_placement.device, pr)]
        row = _pesto_row(g, cl, cfg, cfg.coarsen_to, congestion=True, ilp_congestion=ilp_cong, fallback=False,
                         extra_starts=extra)
        r = row.pop("_run")
        runs[label] = r
        sim = simulate(r.placement, policy="order", priorities=r.priorities, congestion=True)
        plot_gantt(sim, out / f"gantt_{label}.png",
                   title=f"{g.name}: ILP {label.replace('_', ' ')}, simulated with congestion "
                         f"(makespan {sim.makespan:.2f} {g.unit})")
        row["link_busy_max"] = float(sim.link_busy.max())
        row["transfers"] = sim.n_transfers
        row["sim_without_congestion"] = simulate(r.placement, policy="order", priorities=r.priorities,
                                                 congestion=False).makespan
        rows[label] = row
        print(label, f"{row['makespan']:.3f}", flush=True)
    ratio = rows["without_congestion"]["makespan"] / rows["with_congestion"]["makespan"]
    ratio_ws = rows["without_congestion"]["makespan"] / rows["with_congestion_ws"]["makespan"]
    lines = [f"# {cfg.name} (simulation)", "", cfg.description, "",
             "| ILP | simulated makespan, congestion on (ms) | same, congestion off (ms) | transfers | "
             "busiest link (ms) | ILP obj | ILP gap | MIP start |",
             "|---|---|---|---|---|---|---|---|"]
    for k, r in rows.items():
        obj = "-" if r["ilp_objective"] is None else f"{r['ilp_objective']:.3f}"
        gap = "-" if r["ilp_gap"] is None else f"{100 * r['ilp_gap']:.2f}%"
        lines.append(f"| {k} | {r['makespan']:.3f} | {r['sim_without_congestion']:.3f} | {r['transfers']} | "
                     f"{r['link_busy_max']:.3f} | {obj} | {gap} | {r['warm_algorithm']} |")
    lines += ["", f"makespan ratio without / with congestion constraints: **{ratio:.3f}** (list-scheduling "
              f"start), **{ratio_ws:.3f}** (congestion ILP started from the no-congestion solution).",
              "(Pesto Fig. 5 reports about 3x on real RNNLM-2-2048 hardware; this is a simulation.)"]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return {"rows": rows, "ratio": ratio, "ratio_warm": ratio_ws}


def run_hardware(cfg: Config, out: Path) -> dict:
    g = generate(**cfg.graph)
    base = Cluster.single_host(**cfg.cluster)
    results = {"compute": [], "link": []}
    for axis, scales in (("compute", cfg.compute_scales), ("link", cfg.link_scales)):
        for s in scales:
            cl = scaled_cluster(base, compute=s if axis == "compute" else 1.0, link=s if axis == "link" else 1.0)
            ex = expert_layerwise(g, cl)
            ex_ms = simulate(ex, policy="fifo", congestion=True).makespan
            _, ls_ms, scores = best_list_schedule(g, cl)
            row = _pesto_row(g, cl, cfg, cfg.coarsen_to)
            row.pop("_run")
            row.update(scale=s, expert=ex_ms, best_list=ls_ms, list_scores=scores,
                       reduction_vs_expert=1 - row["makespan"] / ex_ms,
                       reduction_vs_list=1 - row["makespan"] / ls_ms)
            results[axis].append(row)
            print(axis, s, f"pesto {row['makespan']:.3f} expert {ex_ms:.3f} list {ls_ms:.3f}", flush=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, axis in zip(axes, ("compute", "link")):
        rows = results[axis]
        xs = [r["scale"] for r in rows]
        ax.plot(xs, [100 * r["reduction_vs_expert"] for r in rows], "o-", label="Pesto vs expert")
        ax.plot(xs, [100 * (1 - r["best_list"] / r["expert"]) for r in rows], "s--", label="best list sched. vs expert")
        ax.set_xscale("log")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel(f"{axis} speed (x)")
        ax.set_ylabel("training-time reduction over expert (%)")
        ax.legend()
    fig.suptitle(f"{g.name}: hardware sensitivity (simulation)")
    fig.tight_layout()
    fig.savefig(out / "hardware.png", dpi=120)
    lines = [f"# {cfg.name} (simulation)", "", cfg.description, "",
             "| axis | scale | expert (ms) | best list (ms) | Pesto (ms) | Pesto vs expert | Pesto vs list | ILP gap |",
             "|---|---|---|---|---|---|---|---|"]
    for axis in ("compute", "link"):
        for r in results[axis]:
            gap = "-" if r["ilp_gap"] is None else f"{100 * r['ilp_gap']:.1f}%"
            lines.append(f"| {axis} | {r['scale']} | {r['expert']:.3f} | {r['best_list']:.3f} | {r['makespan']:.3f} | "
                         f"{100 * r['reduction_vs_expert']:+.1f}% | {100 * r['reduction_vs_list']:+.1f}% | {gap} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return results


def run_coarsening(cfg: Config, out: Path) -> dict:
    g = generate(**cfg.graph)
    rows = []
    for n_gpu in cfg.gpus:
        cl = Cluster.single_host(n_gpu, **cfg.cluster)
        _, ls_ms, scores = best_list_schedule(g, cl)
        for size in cfg.coarse_sizes:
            row = _pesto_row(g, cl, cfg, size)
            row.pop("_run")
            row.update(gpus=n_gpu, target=size, best_list_original=ls_ms)
            rows.append(row)
            print(n_gpu, size, f"pesto {row['makespan']:.3f} gap {row['ilp_gap']} solve {row['solve_s']:.1f}s",
                  flush=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for n_gpu in cfg.gpus:
        rs = [r for r in rows if r["gpus"] == n_gpu]
        xs = [r["coarse_nodes"] for r in rs]
        axes[0].plot(xs, [r["solve_s"] for r in rs], "o-", label=f"{n_gpu} GPUs")
        axes[1].plot(xs, [100 * (r["ilp_gap"] if r["ilp_gap"] is not None else np.nan) for r in rs], "o-",
                     label=f"{n_gpu} GPUs")
        axes[2].plot(xs, [r["makespan"] for r in rs], "o-", label=f"Pesto, {n_gpu} GPUs")
        axes[2].axhline(rs[0]["best_list_original"], ls="--", lw=0.8, label=f"best list sched., {n_gpu} GPUs")
    axes[0].set_ylabel("ILP solve time (s)")
    axes[1].set_ylabel("certified gap of the coarse ILP (%)")
    axes[2].set_ylabel(f"simulated makespan ({g.unit})")
    for ax in axes:
        ax.set_xlabel("coarse nodes")
        ax.legend(fontsize=7)
    fig.suptitle(f"{g.name}: coarsening trade-off (simulation, HiGHS {cfg.time_limit:.0f} s limit)")
    fig.tight_layout()
    fig.savefig(out / "coarsening.png", dpi=120)
    lines = [f"# {cfg.name} (simulation)", "", cfg.description, "",
             "| GPUs | target | coarse nodes | binaries | ILP time (s) | ILP gap | Pesto makespan | warm start | "
             "best list (original) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gap = "-" if r["ilp_gap"] is None else f"{100 * r['ilp_gap']:.2f}%"
        lines.append(f"| {r['gpus']} | {r['target']} | {r['coarse_nodes']} | {r['size']['binaries']} | "
                     f"{r['solve_s']:.1f} | {gap} | {r['makespan']:.3f} | {r['warm_makespan']:.3f} | "
                     f"{r['best_list_original']:.3f} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return {"rows": rows}


def reproduce(name: str, quick: bool = False, out_dir: Path | None = None, fresh: bool = True,
              progress: bool = True) -> Path:
    """Run ``experiments/<name>.toml``; write ``table.md``, ``results.json`` and plots
    into ``<out_dir or results/pesto>/<config name>/`` and return the table's path."""
    cfg = Config.load(experiment_config(name))
    if quick:
        cfg = dataclasses.replace(cfg, time_limit=min(cfg.time_limit, 10.0))
    out = (Path(out_dir) if out_dir is not None else Path(cfg.out_dir)) / cfg.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runner = {"congestion": run_congestion, "hardware": run_hardware, "coarsening": run_coarsening}[cfg.kind]
    res = runner(cfg, out)
    import highspy
    doc = {"config": cfg.__dict__, "git_revision": git_revision(ROOT), "simulation": True, "quick": quick,
           "solver": "highs", "solver_version": highspy.Highs().version(),
           "wall_seconds": time.perf_counter() - t0, "results": _public(res)}
    write_json(out / "results.json", doc)
    return out / "table.md"


def _public(x: Any) -> Any:
    """Drop private (``_``-prefixed) entries such as solver run objects."""
    if isinstance(x, dict):
        return {k: _public(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [_public(v) for v in x]
    return x
