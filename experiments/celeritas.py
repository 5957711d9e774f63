"""Celeritas reproductions (Xu et al., Tables 2-4 and Fig. 6), in simulation where they
need hardware, driven by TOML.

    dnnplace reproduce celeritas-table2   # nodes and CCR before / after fusion
    dnnplace reproduce celeritas-table3   # step time of six placers on 4 GPUs (simulation)
    dnnplace reproduce celeritas-table4   # placement-generation time
    dnnplace reproduce celeritas-fig6     # sequential fill under M-TOPO / DFS-TOPO / CPD-TOPO

The four models (``experiments/celeritas-models.toml``) are captured from the model zoo
at the paper's configuration and batch (PyTorch ``torch.export`` joint graphs with roofline
V100 costs, :mod:`dnnplace.pytorch.capture`; captured once into ``<out>/graphs/``), or, for
Tensor Holography (not in the zoo) and wherever torch is missing, generated stand-ins of the
paper's size and CCR; every table says which. With ``colocate_gradients`` (the models file;
TensorFlow's ``colocate_gradients_with_ops``, which the paper's TF graphs carry) every backward
op of a captured graph joins its forward op's colocation group
(:mod:`dnnplace.graphs.transforms.colocate`); the random-DAG stand-ins pair them themselves. Each model
becomes one instance file under ``<out>/instances/`` with 4 V100-class GPUs over PCIe whose
memory holds ``gpu_share`` of the model each (one share for every model: the paper's large
batches exceed one GPU). Every placement is a run of a
registered method through the one sweep driver (:func:`dnnplace.runner.execute`: re-scored
by the simulator, recorded in ``<out>/runs.jsonl``, resumable; the four experiments share
their runs). Step times are the simulator's makespan under the ``fifo`` policy
(TensorFlow's executor) with link congestion, in the graph's unit: the placements of the
list schedulers, which the registry scores in their own order, are re-simulated under
``fifo`` from their records (their own-order makespan is kept in the CSV). OOM means the
evaluator's static-memory violation (status ``memory_infeasible``). HRL is quoted, never
run. ``--quick`` (tests) runs the generated stand-ins of at most 7,000 nodes into ``<out>-quick``.

The published numbers (hardware, TensorFlow 1.12, 4x V100 32 GB) are printed beside ours;
ours are simulations of other graphs, so only rankings and ratios compare (Pesto measured
its own simulator within 0.1-11.3 % of hardware, docs/heuristics.md 5.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dnnplace.evaluation.simulate import simulate
from dnnplace.experiments import verdicts as V
from dnnplace.experiments.celeritas_tables import (
    FIG6_RULE,
    TABLE3_RULE,
    bar_chart,
    c12,
    fig6_verdicts,
    table3_verdicts,
    table4_verdict,
)
from dnnplace.experiments.config import REQUIRED, Key, Reproduction, Schema, load
from dnnplace.experiments.instance_files import Variant, write_variants
from dnnplace.experiments.makespan_runs import makespan_of, run_spec
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.io import load_instance, placement_from_doc, save_instance
from dnnplace.runner import execute
from dnnplace.tables import Column, csv_cell, write_table

__all__ = ["NAMES", "Model", "Config", "SCHEMA", "model_graph", "reproduce", "DROP_FROM_RECORDS"]

DROP_FROM_RECORDS = ("start", "link_priorities")
"""What the committed records leave out (:func:`dnnplace.reproduce.strip_records`): no table reads
them (Table 3 re-simulates a list scheduler's placement, kept, under fifo); the start times are most
of the bytes (results/celeritas/README.md, "Records in the tree")."""

NAMES = ("celeritas-table2", "celeritas-table3", "celeritas-table4", "celeritas-fig6")
QUICK_MAX_NODES = 7000
FIG6_ORDERS = {"M-TOPO": "m-topo", "DFS-TOPO": "dfs-topo", "CPD-TOPO": "cpd-topo"}
FIG6_PAPER = {"M-TOPO": "m-TOPO", "DFS-TOPO": "DFS-TOPO", "Celeritas": "Celeritas"}
PLACEMENT_ONLY = ("celeritas", "order-place", "metis")  # scored under the request's policy (fifo)


@dataclass(frozen=True)
class Model:
    """One model of ``celeritas-models.toml``."""

    name: str
    capture: dict        # zoo name and build arguments (``model``, ``batch``, ...); empty: generated only
    generator: dict
    gpu_share: float
    paper: dict
    colocate_gradients: bool = True


@dataclass(frozen=True)
class Config:
    """One ``celeritas-*.toml``: the table it writes, its columns and the shared models."""

    name: str
    kind: str
    models: tuple[Model, ...]
    cluster: dict
    out_dir: str
    methods: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)   # column -> the method's options

    @classmethod
    def load(cls, name: str | Path) -> Config:
        """A bundled config by name (or a TOML file) through the one loader,
        :func:`dnnplace.experiments.config.load`, against :data:`SCHEMA`."""
        return cls.of(load(name, module="celeritas"))

    @classmethod
    def of(cls, cfg: Reproduction) -> Config:
        """Celeritas's view of a loaded config: its models (``models`` and the include's
        ``gpu_share`` / ``colocate_gradients``) and its columns (label -> method, options)."""
        models = tuple(Model(m["name"], dict(m["capture"]), dict(m["generator"]),
                             float(m.get("gpu_share", cfg.gpu_share)), m["paper"], bool(cfg.colocate_gradients))
                       for m in cfg.models)
        methods = {label: s.method for label, s in cfg.methods.items()}
        params = {label: dict(s.params) for label, s in cfg.methods.items() if s.params}
        return cls(cfg.name, cfg.kind, models, dict(cfg.cluster), cfg.out_dir, methods, params)


# Celeritas's own keys of a reproduction config and of a model table (the shared celeritas-models.toml)
SCHEMA = Schema(kinds=("table2", "table3", "table4", "fig6"), out_dir="results/celeritas", options={
    "gpu_share": Key(float, 0.0),              # one GPU's memory as a share of the model's static memory
    "colocate_gradients": Key(bool, False),    # TensorFlow's colocate_gradients_with_ops
}, model_keys={
    "name": Key(str, REQUIRED), "capture": Key(dict, {}), "generator": Key(dict, REQUIRED),
    "paper": Key(dict, REQUIRED), "gpu_share": Key(float),
})


def model_graph(m: Model, cache: Path, *, captured: bool = True) -> tuple[OpGraph, str]:
    """The model's graph and where it comes from: the zoo model of ``m.capture`` captured
    with roofline V100 costs (:mod:`dnnplace.pytorch.capture`; kept in ``cache``, so the
    capture runs once), else -- no capture configured, ``captured=False``, or no torch --
    the generator."""
    if m.capture and captured:
        args = {k: v for k, v in m.capture.items() if k != "model"}
        stem = m.capture["model"] + "".join(f"-{k}{v}" for k, v in sorted(args.items()))
        path = cache / f"{stem}.json"
        label = f"captured ({m.capture['model']}, {', '.join(f'{k}={v}' for k, v in args.items())}; roofline V100)"
        if path.exists():
            return load_instance(path).graph, label
        try:
            from dnnplace.pytorch.capture import capture, require_torch, zoo

            require_torch()
        except (ImportError, InputError):
            pass
        else:
            model, inputs, loss = zoo.build(m.capture["model"], **args)
            inst = capture(model, inputs, loss, name=stem)
            save_instance(inst, path)
            return inst.graph, label
    g = generate(**m.generator)
    args = ", ".join(f"{k}={v}" for k, v in m.generator.items() if k not in ("family", "kinds"))
    return g, f"generated stand-in ({m.generator['family']}: {args})"


def _variants(cfg: Config, out: Path, quick: bool) -> dict[str, tuple[Variant, str]]:
    """One instance file per model (4 PCIe GPUs, each holding ``gpu_share`` of the model)."""
    graphs = {}
    for m in cfg.models:
        if quick and m.generator.get("n", 0) > QUICK_MAX_NODES:
            continue
        g, source = model_graph(m, out / "graphs", captured=not quick)
        if m.colocate_gradients:
            g, source = _colocated(g, source)
        cl = Cluster.single_host(cfg.cluster["n_gpus"], interconnect=cfg.cluster["interconnect"],
                                 with_cpu=cfg.cluster["with_cpu"], gpu_memory=m.gpu_share * float(g.memory.sum()))
        graphs[m.name] = (g, cl, source)
    out_v = {}
    for name, (g, cl, source) in graphs.items():
        stem = name.lower().replace(" ", "-").replace("_", "-")
        v = write_variants(g, {stem: (cl, cl.size, 1.0, 1.0)}, out / "instances" / stem, f"celeritas: {name}")[stem]
        out_v[name] = (v, source)
    return out_v


def _colocated(g: OpGraph, source: str) -> tuple[OpGraph, str]:
    """TensorFlow's ``colocate_gradients_with_ops`` (:mod:`dnnplace.graphs.transforms.colocate`) on a
    captured graph; the random-DAG stand-ins already put each backward node with its
    forward node (``colocate_backward``); the LSTM grid records no pairing."""
    from dnnplace.graphs.transforms.colocate import colocate_gradients

    if g.layers is None or "capture" not in g.meta:
        if (g.colocation >= 0).any():
            return g, source + "; backward nodes colocated with their forward nodes by the generator"
        return g, source + "; no forward-backward colocation (the generator records no pairing)"
    h = colocate_gradients(g)
    info = h.meta["colocate_gradients"]
    return h, (source + f"; gradients colocated with their forward ops ({info['paired']} backward ops paired, "
                        f"{info['free']} free)")


def _specs(kind: str, cfg: Config, v: Variant) -> dict[str, Any]:
    """Column -> run spec of this experiment on one model."""
    if kind == "table2":
        return {"Celeritas": run_spec(v, "celeritas")}
    if kind == "fig6":
        cols = {col: run_spec(v, "order-place", {"R": 1, "order": o}) for col, o in FIG6_ORDERS.items()}
        return {**cols, "Celeritas": run_spec(v, "celeritas")}
    return {col: run_spec(v, method, cfg.params.get(col)) for col, method in cfg.methods.items()}


def _fifo(rec: dict | None, v: Variant) -> float | None:
    """The record's placement simulated under ``fifo`` with congestion: its evaluation for
    a placement-only method, else (a list scheduler, scored in its own order) a re-simulation."""
    if not rec or rec.get("status") == "error":
        return None
    if rec["method"] in PLACEMENT_ONLY:
        return makespan_of(rec)
    inst = load_instance(v.path)
    return simulate(placement_from_doc(rec["placement"], inst), policy="fifo", congestion=True).makespan


def _cut(rec: dict | None, v: Variant) -> int | None:
    if not rec or rec.get("status") == "error":
        return None
    inst = load_instance(v.path)
    dev = placement_from_doc(rec["placement"], inst).device
    return int(np.count_nonzero(dev[inst.graph.src] != dev[inst.graph.dst]))


def _cell(rec: dict | None, value: Any) -> Any:
    """What a table shows for a run: its value, OOM, or why there is none."""
    if rec is None or rec.get("status") == "error":
        return "error"
    return "OOM" if _oom(rec) else value


def _oom(rec: dict | None) -> bool:
    return bool(rec) and rec.get("status") == "memory_infeasible"


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.4e}"
    return str(x)


def reproduce(name: str, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run (or resume) ``experiments/<name>.toml`` and write its table (and plot).

    Returns the table's ``.md`` path, ``<out>/<table>.md`` (``<out>-quick`` with ``quick``).
    """
    cfg = Config.load(name)
    out = Path(out_dir) if out_dir is not None else Path(cfg.out_dir)
    if quick:
        out = out.with_name(out.name + "-quick")
    variants = _variants(cfg, out, quick)
    _warm_up()
    specs = {m: _specs(cfg.kind, cfg, v) for m, (v, _) in variants.items()}
    done = execute([s for cols in specs.values() for s in cols.values()], out / "runs.jsonl",
                   name=cfg.name, fresh=fresh, progress=progress)
    recs = {m: {col: done.get(s.key) for col, s in cols.items()}
            for m, cols in specs.items()}
    models = {m.name: m for m in cfg.models}
    writer = {"table2": _table2, "table3": _table3, "table4": _table4, "fig6": _fig6}[cfg.kind]
    return writer(out, variants, recs, models)


def _warm_up() -> None:
    """Load the fusion DP's compiled kernel (numba cache) before any run is timed."""
    from dnnplace.heuristics.fusion import fusion_dp

    g = OpGraph(ids=[0, 1], kinds=("gpu",), compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[1])
    fusion_dp(g, np.arange(2), np.ones(1), R=2)


_SIM = ("Ours are simulations (fifo policy, link congestion) of the graphs named in the source column on 4 "
        "V100-class GPUs over PCIe (12 GB/s, 20 us; each GPU's transfers share its PCIe ports, and a tensor is "
        "sent once to each GPU that consumes it, semantics.md 2.1), in the graph's time unit; the paper's are hardware "
        "measurements in seconds, so compare rankings and ratios, not values.")


def _stamp(recs: dict) -> str:
    """The table's ``run <date> at <revision>`` line (:func:`dnnplace.provenance.stamp`) of
    ``{model: {column: record}}`` (runs not made are left out)."""
    from dnnplace.provenance import stamp

    return stamp(r for cols in recs.values() for r in cols.values() if r)


def _source_note(variants: dict) -> list[str]:
    return [f"- {m}: {src}" for m, (_, src) in variants.items()]


def _plotted(out: Path, stem: str, title: str, cols: list, rows: list, pre: list, sources: list[str],
             plot: dict | None, figure: str) -> Path:
    """Write ``<out>/<stem>`` (table) and, given ``plot``, ``<out>/<stem>.png``: the step times of ``plot``
    relative to Celeritas'."""
    md = write_table(out / stem, title, cols, rows, preamble=pre, footer=["Sources:", *sources])
    if plot is not None:
        bar_chart(out / f"{stem}.png", plot, f"{figure} (simulation): step time relative to Celeritas; "
                  "no bar = OOM or not run", ref="Celeritas")
    return md


def _table2(out: Path, variants, recs, models) -> Path:
    rows = []
    for m, (v, src) in variants.items():
        rec, p = recs[m]["Celeritas"], models[m].paper
        ex = (rec or {}).get("extra", {})
        rows.append({"model": m, "source": src.split(" (")[0], "paper_nodes": p["nodes"], "nodes": v.n,
                     "paper_nodes_after": p["nodes_after"], "nodes_after": ex.get("coarse_nodes"),
                     "paper_ccr": p["ccr"], "ccr": ex.get("ccr_before"), "paper_ccr_after": p["ccr_after"],
                     "ccr_after": ex.get("ccr_after"),
                     "paper_reduction": p["nodes"] / p["nodes_after"],
                     "reduction": v.n / ex["coarse_nodes"] if ex.get("coarse_nodes") else None,
                     "paper_ccr_drop": p["ccr"] / p["ccr_after"],
                     "ccr_drop": ex["ccr_before"] / ex["ccr_after"] if ex.get("ccr_after") else None})
    return _table2_md(out, rows, _source_note(variants), (_stamp(recs),))


def _table2_md(out: Path, rows: list[dict], sources: list[str], pre_extra: tuple[str, ...] = ()) -> Path:
    f = _fmt
    cols = [Column("model"), Column("source"), Column("paper_nodes", "nodes (paper)", numeric=True),
            Column("nodes", "nodes (ours)", numeric=True),
            Column("paper_nodes_after", "after (paper)", numeric=True),
            Column("nodes_after", "after (ours)", numeric=True),
            Column("paper_reduction", "nodes/cluster (paper)", f, True),
            Column("reduction", "nodes/cluster (ours)", f, True),
            Column("paper_ccr", "CCR (paper)", f, True), Column("ccr", "CCR (ours)", f, True),
            Column("paper_ccr_after", "CCR after (paper)", f, True), Column("ccr_after", "CCR after (ours)", f, True),
            Column("paper_ccr_drop", "CCR drop x (paper)", f, True), Column("ccr_drop", "CCR drop x (ours)", f, True),
            Column("verdict", "verdict (CCR drop)")]
    for r in rows:
        r["verdict"] = V.judge(r["paper_ccr_drop"], r["ccr_drop"], neutral=1.0)
    pre = ["Optimal operation fusion with R = 200 and M = 0.25 x one GPU's memory, CPD-TOPO order. CCR = sum of "
           "nominal edge costs / sum of node costs (Eq. 1; mean over ordered pairs of the 4 PCIe GPUs). Every "
           "fused graph has at least ceil(n / R) nodes. Fusion lowers the numerator of Eq. 1 (the cut is all that "
           "is left of the edge costs) and leaves the denominator unchanged; the paper says the opposite.",
           V.TOLERANCE + " Judged: the CCR drop (CCR before / after fusion; neutral 1). Paper columns as printed "
           "in Table 2; nodes/cluster and the CCR drop are derived from them (nodes / after, CCR / CCR after).",
           *pre_extra]
    return write_table(out / "table2", "Celeritas Table 2: nodes and CCR before and after fusion", cols, rows,
                       preamble=pre, footer=["Sources:", *sources])


def _table3(out: Path, variants, recs, models) -> Path:
    rows, plot = [], {}
    methods = list(next(iter(recs.values())))
    for m, (v, _) in variants.items():
        p = models[m].paper["t3"]
        ours = {}
        for col in methods:
            rec = recs[m][col]
            ms = _fifo(rec, v)
            ours[col] = ms
            cell = _cell(rec, ms)
            rows.append({"model": m, "method": col, "paper": p.get(col), "ours": cell,
                         "ours_value": ms, "status": (rec or {}).get("status"),
                         "own_order": makespan_of(rec) if rec and rec.get("method", "") not in PLACEMENT_ONLY
                         else None})
        rows.append({"model": m, "method": "HRL", "paper": p.get("HRL"), "ours": "not run (quoted)"})
        feasible = {k: x for k, x in ours.items() if x is not None and not _oom(recs[m][k])}
        base = [feasible[k] for k in ("Metis", "m-TOPO", "m-ETF", "m-SCT") if k in feasible]
        ce = feasible.get("Celeritas")
        rows.append({"model": m, "method": "speed up (C12)", "paper": models[m].paper["speedup"],
                     "ours": f"{(min(base) - ce) / min(base) * 100:.1f}%" if base and ce else "n/a",
                     "note": f"derived from the paper's times: {c12(p) * 100:.1f}%"})
        rank = sorted(feasible, key=feasible.get)
        rows.append({"model": m, "method": "ranking (feasible)", "ours": " < ".join(rank),
                     "paper": " < ".join(sorted((k for k, x in p.items() if isinstance(x, float)), key=p.get))})
        plot[m] = {k: (None if _oom(recs[m][k]) else x) for k, x in ours.items()}
    return _table3_md(out, rows, _source_note(variants), plot, (_stamp(recs),))


def _table3_md(out: Path, rows: list[dict], sources: list[str], plot: dict | None,
               pre_extra: tuple[str, ...] = ()) -> Path:
    table3_verdicts(rows)
    cols = [Column("model"), Column("method"), Column("paper", "paper (s, hardware)", _fmt),
            Column("ours", "ours (simulation)", _fmt), Column("status"), Column("note"), Column("verdict")]
    pre = [_SIM, "Speed up (decision C12): (best baseline - Celeritas) / best baseline, baselines Metis, m-TOPO, "
                 "m-ETF, m-SCT (and HRL in the paper); Order-Place excluded. The CSV also holds the list "
                 "schedulers' makespan in their own order (own_order). The paper's speed up is the printed "
                 "column; its ranking is derived (the printed times in order, OOM left out).", TABLE3_RULE,
           *pre_extra]
    return _plotted(out, "table3", "Celeritas Table 3: single-step time on 4 GPUs (simulation)", cols, rows, pre,
                    sources, plot, "Celeritas Table 3")


def _table4(out: Path, variants, recs, models) -> Path:
    rows = []
    for m, (v, _) in variants.items():
        p = models[m].paper["t4"]
        for col in list(recs[m]) + ["HRL"]:
            rec = recs[m].get(col)
            ours = "not run (quoted)" if col == "HRL" else _cell(rec, (rec or {}).get("wall_seconds"))
            ex = (rec or {}).get("extra", {})
            note = "includes one simulation of its schedule" if col == "m-SCT" else ""
            if "fusion_seconds" in ex:
                note = f"fusion {ex['fusion_seconds']:.2f} s + placement {ex['placement_seconds']:.2f} s"
            rows.append({"model": m, "nodes": v.n, "method": col, "paper": p.get(col), "ours": ours, "note": note})
    return _table4_md(out, rows, _source_note(variants), models, (_stamp(recs),))


def _table4_md(out: Path, rows: list[dict], sources: list[str], models: dict,
               pre_extra: tuple[str, ...] = ()) -> Path:
    for r in rows:
        r["paper_nodes"] = models[r["model"]].paper["nodes"]
        r["verdict"] = table4_verdict(r["paper"], r["ours"], nodes=r["nodes"], paper_nodes=r["paper_nodes"])
    cols = [Column("model"), Column("nodes", numeric=True),
            Column("paper_nodes", "nodes (paper, Table 2)", numeric=True), Column("method"),
            Column("paper", "paper (s)", _fmt),
            Column("ours", "ours (s, CPU)", _fmt), Column("note"), Column("verdict")]
    pre = ["Placement-generation time: the method's wall time in our runs (Python with numpy/numba on a 2-core "
           "shared CPU, the numba kernel loaded before the runs), beside the paper's (its implementation language "
           "is not stated). HRL's 5 hours are quoted from Mars, not measured. Our captured graphs have fewer nodes "
           "than the paper's TF graphs; at the paper's node counts (generated graphs of 3.8k-36k nodes) the whole "
           "Celeritas method takes 0.1-1.4 s and 6.8 s at 200k nodes on 8 GPUs "
           "(python -m benchmarks celeritas speed, results/celeritas/bench-speed.jsonl).",
           "Verdict (`dnnplace.experiments.verdicts.judge_at_most`): the paper's claim is a fast placement, so ours at "
           "or below the paper's time is `reproduced`; a placement time grows with the graph, so on a graph whose "
           f"node count is more than {V.REL_TOL:.0%} off the paper's (Table 2) the cell is `not comparable`.",
           *pre_extra]
    return write_table(out / "table4", "Celeritas Table 4: placement-generation time", cols, rows, preamble=pre,
                       footer=["Sources:", *sources])


def _fig6(out: Path, variants, recs, models) -> Path:
    rows, plot = [], {}
    for m, (v, _) in variants.items():
        p = models[m].paper["fig6"]
        plot[m] = {}
        for col, rec in recs[m].items():
            ms = _fifo(rec, v)
            plot[m][col] = None if _oom(rec) else ms
            paper = p.get(FIG6_PAPER.get(col, ""), "")
            rows.append({"model": m, "placement": col if col == "Celeritas" else f"sequential fill, {col}",
                         "paper": paper, "ours": _cell(rec, ms), "cut_edges": _cut(rec, v)})
    return _fig6_md(out, rows, _source_note(variants), plot, (_stamp(recs),))


def _fig6_md(out: Path, rows: list[dict], sources: list[str], plot: dict | None,
             pre_extra: tuple[str, ...] = ()) -> Path:
    fig6_verdicts(rows)
    cols = [Column("model"), Column("placement"), Column("paper", "paper: Standard Evaluation time"),
            Column("ours", "ours: simulated step time", _fmt), Column("cut_edges", "edges cut", numeric=True),
            Column("verdict", "verdict (ranking of the model's placements)")]
    pre = [_SIM, "The sequential fill is Order-Place without fusion (R = 1): nodes in the order fill GPU 0 to its "
                 "memory, then the next. The paper reports the Standard Evaluation's wall time (running the "
                 "large-batch model under that placement), which the step time of the placement drives.", FIG6_RULE,
           *pre_extra]
    return _plotted(out, "fig6", "Celeritas Fig. 6: sequential fill under each order (simulation)", cols, rows, pre,
                    sources, plot, "Celeritas Fig. 6")


def rerender(name: str, out_dir: str | Path | None = None) -> Path:
    """Re-judge and rewrite a written table from its CSV (no run), for a table whose records are not in the
    tree: the paper columns from the models file, the verdicts by the one rule, the sources from the old table,
    and a line saying the records are missing where ``runs.jsonl`` is."""
    import csv

    cfg = Config.load(name)
    out = Path(out_dir) if out_dir is not None else Path(cfg.out_dir)
    stem = out / cfg.kind
    with open(stem.with_suffix(".csv"), newline="") as f:
        rows = [{k: csv_cell(x) for k, x in r.items() if k != "verdict"} for r in csv.DictReader(f)]
    md = stem.with_suffix(".md").read_text().splitlines()
    sources = md[md.index("Sources:") + 1:] if "Sources:" in md else []
    extra = () if (out / "runs.jsonl").exists() else (f"records: not in the tree; rerun with `dnnplace reproduce "
                                                      f"{name}`",)
    models = {m.name: m for m in cfg.models}
    for r in rows:  # the printed figures, from the models file
        p = models[r["model"]].paper
        if cfg.kind == "table3" and r["method"] == "speed up (C12)":
            r["paper"] = p["speedup"]
            r["note"] = f"derived from the paper's times: {c12(p['t3']) * 100:.1f}%"
        elif cfg.kind == "table3" and r["method"] in p["t3"]:
            r["paper"] = p["t3"][r["method"]]
        elif cfg.kind == "table4" and r["method"] in p["t4"]:
            r["paper"] = p["t4"][r["method"]]
    if cfg.kind == "table2":
        return _table2_md(out, rows, sources, extra)
    if cfg.kind == "table3":
        return _table3_md(out, rows, sources, None, extra)
    if cfg.kind == "table4":
        return _table4_md(out, rows, sources, models, extra)
    return _fig6_md(out, rows, sources, None, extra)
