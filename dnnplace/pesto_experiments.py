"""Pesto experiments in simulation (Pesto Fig. 5, Fig. 8, Sec. 3.3/5.3), driven by TOML.

    dnnplace reproduce pesto-congestion      # experiments/pesto-congestion.toml
    dnnplace reproduce pesto-hardware        # experiments/pesto-hardware.toml
    dnnplace reproduce pesto-coarsening      # experiments/pesto-coarsening.toml

(``pesto-congestion-wide`` and ``pesto-hardware-100`` are variants on a wider graph and
with 100 coarse nodes.) Every number is a *simulation* (graphs/simulate.py, SPEC 2.1) of
generated operator graphs on a modelled cluster, not a hardware measurement.

How an experiment runs: it generates its graph deterministically
(:func:`dnnplace.graphs.generators.generate` with the config's ``graph`` table) and the
cluster variants it needs (GPU counts; compute and link speeds scaled by
:func:`scaled_cluster`), writes each variant as a native instance file under
``<out>/<name>/instances/`` (the file name ends in a digest of its content, so a changed
config or generator never resumes from runs of another instance), and runs every
measured placement as an ordinary file-based :class:`~dnnplace.config.RunSpec` of a
registered method through the one sweep driver, :func:`dnnplace.runner.execute`: each
run goes through :func:`dnnplace.registry.solve` (re-scored by the independent
simulator, status from that evaluation) and is appended to ``<out>/<name>/runs.jsonl``
as it finishes, so an interrupted experiment resumes (``fresh=True`` starts over). Any
run can be repeated by hand with ``dnnplace solve INSTANCE --problem makespan --method
M``. Every makespan in a table is its record's ``evaluation.objective`` (simulated with
link congestion). Tables go through :func:`dnnplace.tables.write_table`
(``table.md``/``table.csv``); plots beside them. ``--quick`` caps every ILP at 10 s and
writes to ``<out>/<name>-quick/``.

Methods: ``pesto`` (the coarsened ILP; options ``coarsen_to``, ``ilp_congestion``,
``fallback``), the list schedulers ``heft``, ``etf``, ``m-topo``, ``m-etf`` and ``m-sct``
(the *best list scheduler* is the best of their re-scored makespans; ETF-like ones only
up to :data:`MAX_ETF_NODES` nodes, as :func:`dnnplace.heuristics.list_scheduling.best_list_schedule`)
and ``layer-split``, Pesto's layer-wise expert (Sec. 5.2), simulated with the ``fifo``
dispatch policy like TensorFlow.

Experiment kinds (``kind`` in the TOML):

``congestion``  Fig. 5: the Pesto ILP without and with its congestion constraints (7),
                both reported as the ILP solved them (``fallback=false``) and simulated
                *with* congestion; makespan ratio, the same placements re-simulated
                without congestion, transfer counts, busiest link and Gantt charts (all
                replayed from the records). The earlier third run, the congestion ILP
                started from the no-congestion ILP's coarse solution, is dropped: it
                needs that run's in-memory coarse schedule, which no method option can
                name (on both graphs it had given the same answer as the
                list-scheduling start).
``hardware``    Fig. 8: compute speed and link speed scaled 0.1x-10x; Pesto vs the
                layer-wise expert and the best list scheduler; reduction over the expert
                in percent (the 1x point of both axes is one instance, run once).
``coarsening``  Sec. 3.3 / 5.3: coarse size vs ILP time, certified gap (of the coarse
                ILP) and simulated makespan on the original graph.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace.config import RunSpec, graph_label_of
from dnnplace.data import experiment_config
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import jsonable, load_instance, placement_from_doc, save_instance
from dnnplace.graphs.io.native import instance_to_native
from dnnplace.graphs.simulate import SimResult, simulate
from dnnplace.runner import execute
from dnnplace.tables import Column, write_table

__all__ = ["Config", "Variant", "LIST_SCHEDULERS", "MAX_ETF_NODES", "scaled_cluster", "replay", "reproduce"]

LIST_SCHEDULERS = ("heft", "etf", "m-topo", "m-etf", "m-sct")
MAX_ETF_NODES = 3000  # ETF-like schedulers are skipped above this size (as best_list_schedule does)
EXPERT = "layer-split"


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

    def solver(self) -> dict[str, Any]:
        """The ILP's solver options (one thread, the config's limits)."""
        return {"time_limit": self.time_limit, "rel_gap": self.rel_gap, "threads": 1}


def scaled_cluster(base: Cluster, compute: float = 1.0, link: float = 1.0) -> Cluster:
    """Devices ``compute`` times faster, links ``link`` times faster (beta0, beta1 / link)."""
    devs = tuple(Device(d.name, d.kind, d.memory, d.speed * compute) for d in base.devices)
    return Cluster(devs, base.beta0 / link, base.beta1 / link, base.cost_factor,
                   name=f"{base.name}-c{compute}-l{link}", meta=dict(base.meta))


# ---------------------------------------------------------------------------- instances and runs
@dataclass(frozen=True)
class Variant:
    """One instance file of an experiment: a cluster variant of its graph."""

    stem: str              # e.g. "gpus2-c0.3-l1"
    path: Path             # the written native instance file
    n: int                 # nodes of the graph
    gpus: int
    compute: float = 1.0
    link: float = 1.0

    @property
    def label(self) -> str:
        return graph_label_of(self.path)


def _write_variants(g: OpGraph, clusters: dict[str, tuple[Cluster, int, float, float]], folder: Path,
                    source: str) -> dict[str, Variant]:
    """Write each ``stem -> (cluster, gpus, compute, link)`` as ``<folder>/<stem>-<digest>.json``
    (digest of the file's content), drop instance files of earlier configs, return the variants."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Variant] = {}
    for stem, (cl, gpus, comp, link) in clusters.items():
        inst = Instance(g, cl, source)
        blob = json.dumps(jsonable(instance_to_native(inst)), sort_keys=True, allow_nan=False)
        path = folder / f"{stem}-{hashlib.sha1(blob.encode()).hexdigest()[:8]}.json"
        if not path.exists():
            save_instance(inst, path)
        out[stem] = Variant(stem, path, g.n, gpus, comp, link)
    keep = {v.path.name for v in out.values()}
    for old in folder.glob("*.json"):
        if old.name not in keep:
            old.unlink()
    return out


def _spec(v: Variant, method: str, params: dict | None = None, solver: dict | None = None) -> RunSpec:
    return RunSpec(graph=str(v.path), graph_label=v.label, problem="makespan", method=method,
                   solver=dict(solver or {}), params=dict(params or {}))


def _list_specs(v: Variant) -> list[RunSpec]:
    return [_spec(v, m) for m in LIST_SCHEDULERS
            if not (m in ("etf", "m-etf", "m-sct") and v.n > MAX_ETF_NODES)]


def _pesto_spec(v: Variant, cfg: Config, coarsen_to: int | None, **params: Any) -> RunSpec:
    return _spec(v, "pesto", {"coarsen_to": coarsen_to, **params}, cfg.solver())


def _makespan(rec: dict | None) -> float | None:
    """The record's re-scored makespan (``evaluation.objective``), ``None`` for an error."""
    if not rec or rec.get("status") == "error":
        return None
    return (rec.get("evaluation") or {}).get("objective")


def _best_list(v: Variant, done: dict[str, dict]) -> tuple[str | None, float | None]:
    """The best list scheduler on ``v`` by re-scored makespan: (method, makespan)."""
    best: tuple[str | None, float | None] = (None, None)
    for s in _list_specs(v):
        ms = _makespan(done.get(s.key))
        if ms is not None and (best[1] is None or ms < best[1] - 1e-12):
            best = (s.method, ms)
    return best


def replay(rec: dict, inst: Instance, *, congestion: bool = True) -> SimResult:
    """Simulate a record's placement in its recorded order: nodes ranked by their
    recorded start times (ties in topological order), replayed per device
    (``policy="order"``)."""
    g = inst.graph
    pl = placement_from_doc(rec["placement"], inst)
    start = np.array([float(rec["start"][str(v)]) for v in g.ids])
    pr = np.empty(g.n, dtype=np.int64)
    pr[np.lexsort((g.topo_position, start))] = np.arange(g.n)
    return simulate(pl, policy="order", priorities=pr, congestion=congestion)


def _problems(specs: list[RunSpec], done: dict[str, dict]) -> list[str]:
    """Footer lines for runs that failed or whose placement the evaluation rejects."""
    out = []
    for s in specs:
        rec = done.get(s.key)
        where = f"{Path(s.graph_label).stem} {s.method} {' '.join(f'{k}={v}' for k, v in s.params.items())}".strip()
        if rec is None:
            out.append(f"- {where}: not run (interrupted)")
        elif rec.get("status") == "error":
            out.append(f"- {where}: error: {str(rec.get('message'))[:200]}")
        elif rec.get("status") == "infeasible":
            viol = (rec.get("evaluation") or {}).get("violations") or []
            out.append(f"- {where}: infeasible: {'; '.join(viol[:2])}")
    return ["Runs that failed or were found infeasible:", "", *out] if out else []


def _preamble(name: str, cfg: Config, quick: bool, stem: str, done: dict[str, dict], specs: list[RunSpec]) -> list[str]:
    revs = sorted({(done[s.key].get("git_revision") or "unknown")[:7] for s in specs if s.key in done})
    cmd = f"dnnplace reproduce {name}" + (" --quick" if quick else "")
    limit = f"HiGHS {cfg.time_limit:g} s per ILP (1 thread, relative gap {cfg.rel_gap:g})"
    return [cfg.description.strip(),
            f"**Simulation**, not hardware. Generated by `{cmd}` at git {', '.join(revs) or 'unknown'} on "
            f"{platform.node()} ({platform.machine()}, {platform.python_version()}), "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {limit}. Runs in `{stem}/runs.jsonl`, "
            f"instances in `{stem}/instances/`. Every makespan is the run's `evaluation.objective`: the "
            "independent simulator's re-score with link congestion, in ms."]


def _write(out: Path, title: str, columns: list[Column], rows: list[dict], footer: list[str], *, name: str,
           cfg: Config, quick: bool, specs: list[RunSpec], done: dict[str, dict]) -> Path:
    """``table.md``/``table.csv`` of an experiment: the preamble, the rows, the footer and
    the runs that failed or were found infeasible."""
    problems = _problems(specs, done)
    return write_table(out / "table", f"{cfg.name} (simulation): {title}", columns, rows,
                       preamble=_preamble(name, cfg, quick, out.name, done, specs),
                       footer=[*footer, "", *problems] if problems else footer)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _ms(x: float) -> str:
    return f"{x:.3f}"


def _seconds(x: float) -> str:
    return f"{x:.1f}"


def _extra(rec: dict | None, key: str) -> Any:
    return ((rec or {}).get("extra") or {}).get(key)


def _ilp_gap(rec: dict | None) -> float | None:
    return _extra(rec, "ilp_gap")


# ---------------------------------------------------------------------------- congestion (Fig. 5)
_CONGESTION_RUNS = (("without_congestion", False), ("with_congestion", True))


def run_congestion(name: str, cfg: Config, out: Path, *, quick: bool, fresh: bool, progress: bool) -> Path:
    """Pesto ILP without / with congestion constraints, both re-simulated with congestion."""
    from dnnplace.graphs.gantt import plot_gantt

    g = generate(**cfg.graph)
    cl = Cluster.single_host(**cfg.cluster)
    variants = _write_variants(g, {"base": (cl, cl.devices_of_kind("gpu").size, 1.0, 1.0)}, out / "instances",
                               f"generate({cfg.graph}) on {cl.name}")
    v = variants["base"]
    specs = {label: _pesto_spec(v, cfg, cfg.coarsen_to, ilp_congestion=ilp_cong, fallback=False)
             for label, ilp_cong in _CONGESTION_RUNS}
    done = execute(list(specs.values()), out / "runs.jsonl", name=out.name, fresh=fresh, progress=progress)
    inst = load_instance(v.path)
    rows, notes = [], []
    for (label, ilp_cong), spec in zip(_CONGESTION_RUNS, specs.values(), strict=True):
        rec = done.get(spec.key)
        row = {"ilp": label.replace("_", " "), "ilp_congestion": ilp_cong, "status": (rec or {}).get("status"),
               "makespan": _makespan(rec), "ilp_objective": _extra(rec, "ilp_objective"), "ilp_gap": _ilp_gap(rec),
               "mip_start": _extra(rec, "warm_algorithm"), "source": _extra(rec, "source"),
               "ilp_s": (rec or {}).get("solve_seconds")}
        if row["makespan"] is not None and rec.get("placement"):
            sim = replay(rec, inst, congestion=True)
            if abs(sim.makespan - row["makespan"]) > 1e-9 * max(1.0, row["makespan"]):
                notes.append(f"- {label}: the replay of the recorded order gives {sim.makespan!r}, the record "
                             f"{row['makespan']!r}")
            plot_gantt(sim, out / f"gantt_{label}.png",
                       title=f"{g.name}: ILP {row['ilp']}, simulated with congestion "
                             f"(makespan {sim.makespan:.2f} {g.unit})")
            row.update(makespan_no_congestion=replay(rec, inst, congestion=False).makespan,
                       transfers=sim.n_transfers, busiest_link=float(sim.link_busy.max()))
        rows.append(row)
    columns = [Column("ilp", "ILP"), Column("ilp_congestion", "constraints (7)"), Column("status"),
               Column("makespan", "simulated makespan, congestion on (ms)", fmt=_ms, numeric=True),
               Column("makespan_no_congestion", "same, congestion off (ms)", fmt=_ms, numeric=True),
               Column("transfers", numeric=True), Column("busiest_link", "busiest link (ms)", fmt=_ms, numeric=True),
               Column("ilp_objective", "ILP obj (coarse)", fmt=_ms, numeric=True),
               Column("ilp_gap", "ILP gap", fmt=_pct, numeric=True), Column("mip_start", "MIP start"),
               Column("source"), Column("ilp_s", "ILP time (s)", fmt=_seconds, numeric=True)]
    footer = []
    a, b = rows[0]["makespan"], rows[1]["makespan"]
    if a is not None and b is not None:
        footer.append(f"Makespan ratio without / with congestion constraints: **{a / b:.3f}** (both ILPs started "
                      "from the best list schedule; Pesto Fig. 5 reports about 3x on real RNNLM-2-2048 hardware).")
    footer += ["", "Both runs report the ILP's own placement and order (`fallback=false`); `source` says whether "
               "it came from the ILP or, when the ILP found no solution, from its list-schedule start. The other "
               "columns are replays of the recorded placement and order (Gantt charts `gantt_*.png`). The earlier "
               "third row (the congestion ILP started from the no-congestion ILP's coarse solution) is not run: it "
               "needs that run's in-memory coarse schedule, which no option of the `pesto` method can name."]
    if notes:
        footer += ["", "Replay mismatches:", "", *notes]
    return _write(out, "Pesto ILP with and without congestion constraints", columns, rows, footer, name=name,
                  cfg=cfg, quick=quick, specs=list(specs.values()), done=done)


# ---------------------------------------------------------------------------- hardware (Fig. 8)
def _hardware_points(cfg: Config) -> list[tuple[str, float, float, float]]:
    """(axis, scale, compute factor, link factor) of every point of the two sweeps."""
    pts = [("compute", float(s), float(s), 1.0) for s in cfg.compute_scales]
    return pts + [("link", float(s), 1.0, float(s)) for s in cfg.link_scales]


def run_hardware(name: str, cfg: Config, out: Path, *, quick: bool, fresh: bool, progress: bool) -> Path:
    """Compute and link speed sweeps: Pesto vs the layer-wise expert and the best list scheduler."""
    g = generate(**cfg.graph)
    base = Cluster.single_host(**cfg.cluster)
    n_gpu = base.devices_of_kind("gpu").size
    clusters = {f"c{c:g}-l{link:g}": (scaled_cluster(base, compute=c, link=link), n_gpu, c, link)
                for _, _, c, link in _hardware_points(cfg)}
    variants = _write_variants(g, clusters, out / "instances", f"generate({cfg.graph})")
    specs: list[RunSpec] = []
    for v in variants.values():
        specs += [_spec(v, EXPERT), *_list_specs(v), _pesto_spec(v, cfg, cfg.coarsen_to)]
    done = execute(specs, out / "runs.jsonl", name=out.name, fresh=fresh, progress=progress)
    rows = []
    for axis, s, c, link in _hardware_points(cfg):
        v = variants[f"c{c:g}-l{link:g}"]
        pesto_rec = done.get(_pesto_spec(v, cfg, cfg.coarsen_to).key)
        expert = _makespan(done.get(_spec(v, EXPERT).key))
        best, best_ms = _best_list(v, done)
        ms = _makespan(pesto_rec)
        rows.append({"axis": axis, "scale": s, "expert": expert, "best_list": best_ms, "best_list_method": best,
                     "pesto": ms, "vs_expert": None if None in (ms, expert) else 1 - ms / expert,
                     "vs_list": None if None in (ms, best_ms) else 1 - ms / best_ms,
                     "list_vs_expert": None if None in (best_ms, expert) else 1 - best_ms / expert,
                     "ilp_gap": _ilp_gap(pesto_rec), "pesto_source": _pesto_source(pesto_rec)})
    _plot_hardware(rows, g.name, out / "hardware.png")
    columns = [Column("axis"), Column("scale", numeric=True, fmt=lambda x: f"{x:g}"),
               Column("expert", "expert (ms)", fmt=_ms, numeric=True),
               Column("best_list", "best list (ms)", fmt=_ms, numeric=True), Column("best_list_method", "list"),
               Column("pesto", "Pesto (ms)", fmt=_ms, numeric=True),
               Column("vs_expert", "Pesto vs expert", fmt=_signed_pct, numeric=True),
               Column("vs_list", "Pesto vs list", fmt=_signed_pct, numeric=True),
               Column("ilp_gap", "ILP gap", fmt=lambda x: f"{100 * x:.1f}%", numeric=True),
               Column("pesto_source", "Pesto answer")]
    footer = ["`Pesto vs X` is the reduction of the makespan over X (positive: Pesto is faster). Expert: Pesto's "
              "layer-wise split (`layer-split`, Sec. 5.2) with FIFO dispatch; best list: the best of "
              f"{', '.join(LIST_SCHEDULERS)} re-scored; Pesto: the ILP on the graph coarsened to {cfg.coarsen_to} "
              "nodes, keeping the better of the ILP's replay, the runtime's orders and the list-schedule start "
              "(`Pesto answer`: which one; `ilp/<order>` the ILP's placement in that order). The 1x point of both "
              "axes is the same instance, run once."]
    return _write(out, "hardware sensitivity", columns, rows, footer, name=name, cfg=cfg, quick=quick, specs=specs,
                  done=done)


def _pesto_source(rec: dict | None) -> str | None:
    """``warm_start`` or ``ilp/<order policy>`` of a pesto record."""
    src = _extra(rec, "source")
    if src != "ilp":
        return src
    order = (_extra(rec, "model_size") or {}).get("order_policy")
    return f"ilp/{order}" if order and order != "ilp" else "ilp"


def _plot_hardware(rows: list[dict], title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def pct(x: float | None) -> float:
        return np.nan if x is None else 100 * x

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, axis in zip(axes, ("compute", "link"), strict=True):
        rs = [r for r in rows if r["axis"] == axis]
        xs = [r["scale"] for r in rs]
        ax.plot(xs, [pct(r["vs_expert"]) for r in rs], "o-", label="Pesto vs expert")
        ax.plot(xs, [pct(r["list_vs_expert"]) for r in rs], "s--", label="best list sched. vs expert")
        ax.set_xscale("log")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel(f"{axis} speed (x)")
        ax.set_ylabel("training-time reduction over expert (%)")
        ax.legend()
    fig.suptitle(f"{title}: hardware sensitivity (simulation)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------- coarsening (Sec. 3.3, 5.3)
def run_coarsening(name: str, cfg: Config, out: Path, *, quick: bool, fresh: bool, progress: bool) -> Path:
    """Coarse size vs ILP time, certified coarse gap and simulated makespan."""
    g = generate(**cfg.graph)
    clusters = {}
    for n_gpu in cfg.gpus:
        cl = Cluster.single_host(n_gpu, **cfg.cluster)
        clusters[f"gpus{n_gpu}"] = (cl, n_gpu, 1.0, 1.0)
    variants = _write_variants(g, clusters, out / "instances", f"generate({cfg.graph})")
    specs: list[RunSpec] = []
    for v in variants.values():
        specs += [*_list_specs(v), *(_pesto_spec(v, cfg, size) for size in cfg.coarse_sizes)]
    done = execute(specs, out / "runs.jsonl", name=out.name, fresh=fresh, progress=progress)
    rows = []
    for v in variants.values():
        best, best_ms = _best_list(v, done)
        for size in cfg.coarse_sizes:
            rec = done.get(_pesto_spec(v, cfg, size).key)
            rows.append({"gpus": v.gpus, "target": size, "coarse_nodes": _extra(rec, "coarse_nodes"),
                         "binaries": (_extra(rec, "model_size") or {}).get("binaries"),
                         "ilp_s": (rec or {}).get("solve_seconds"), "ilp_gap": _ilp_gap(rec),
                         "pesto": _makespan(rec), "warm": _extra(rec, "warm_makespan"),
                         "pesto_source": _pesto_source(rec), "best_list": best_ms, "best_list_method": best})
    _plot_coarsening(rows, cfg, g, out / "coarsening.png")
    columns = [Column("gpus", "GPUs", numeric=True), Column("target", numeric=True),
               Column("coarse_nodes", "coarse nodes", numeric=True), Column("binaries", numeric=True),
               Column("ilp_s", "ILP time (s)", fmt=_seconds, numeric=True),
               Column("ilp_gap", "ILP gap", fmt=_pct, numeric=True),
               Column("pesto", "Pesto makespan (ms)", fmt=_ms, numeric=True),
               Column("warm", "warm start (ms)", fmt=_ms, numeric=True), Column("pesto_source", "Pesto answer"),
               Column("best_list", "best list, original graph (ms)", fmt=_ms, numeric=True),
               Column("best_list_method", "list")]
    footer = ["ILP gap: certified gap of the *coarse* ILP (a bound for the coarse problem only). Warm start: the "
              "best list schedule of the coarse graph, expanded and simulated on the original graph (the ILP's MIP "
              "start). Best list: the best list scheduler run on the original graph."]
    return _write(out, "coarsening trade-off", columns, rows, footer, name=name, cfg=cfg, quick=quick, specs=specs,
                  done=done)


def _plot_coarsening(rows: list[dict], cfg: Config, g: OpGraph, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def val(x: float | None, scale: float = 1.0) -> float:
        return np.nan if x is None else scale * x

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for n_gpu in cfg.gpus:
        rs = [r for r in rows if r["gpus"] == n_gpu]
        xs = [val(r["coarse_nodes"]) for r in rs]
        axes[0].plot(xs, [val(r["ilp_s"]) for r in rs], "o-", label=f"{n_gpu} GPUs")
        axes[1].plot(xs, [val(r["ilp_gap"], 100) for r in rs], "o-", label=f"{n_gpu} GPUs")
        axes[2].plot(xs, [val(r["pesto"]) for r in rs], "o-", label=f"Pesto, {n_gpu} GPUs")
        if rs and rs[0]["best_list"] is not None:
            axes[2].axhline(rs[0]["best_list"], ls="--", lw=0.8, label=f"best list sched., {n_gpu} GPUs")
    axes[0].set_ylabel("ILP solve time (s)")
    axes[1].set_ylabel("certified gap of the coarse ILP (%)")
    axes[2].set_ylabel(f"simulated makespan ({g.unit})")
    for ax in axes:
        ax.set_xlabel("coarse nodes")
        ax.legend(fontsize=7)
    fig.suptitle(f"{g.name}: coarsening trade-off (simulation, HiGHS {cfg.time_limit:.0f} s limit)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------- entry point
_RUNNERS = {"congestion": run_congestion, "hardware": run_hardware, "coarsening": run_coarsening}


def reproduce(name: str, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run (or resume) ``experiments/<name>.toml`` and write its table and plots.

    Parameters
    ----------
    name : str
        The reproduction, e.g. ``"pesto-congestion"`` (its config file's stem).
    quick : bool
        Cap every ILP at 10 s; outputs go to ``<config name>-quick``.
    out_dir : path, optional
        Parent of the output folder (default: the config's ``out_dir``, ``results/pesto``).
    fresh : bool
        Start over (the old ``runs.jsonl`` is kept as ``runs.jsonl.bak``).
    progress : bool
        Report each run on stderr.

    Returns
    -------
    Path
        ``<out_dir>/<config name>[-quick]/table.md`` (``table.csv``, ``runs.jsonl``,
        ``instances/`` and the plots beside it).
    """
    cfg = Config.load(experiment_config(name))
    if quick:
        cfg = dataclasses.replace(cfg, time_limit=min(cfg.time_limit, 10.0))
    out = (Path(out_dir) if out_dir is not None else Path(cfg.out_dir)) / (cfg.name + ("-quick" if quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    return _RUNNERS[cfg.kind](name, cfg, out, quick=quick, fresh=fresh, progress=progress)
