"""FastT's experiments as simulations (Yi et al. Tables 1-3, 5, 6 and Fig. 2).

``dnnplace reproduce fastt-scaling | fastt-splits | fastt-memory`` reads
``experiments/<name>.toml`` and writes ``results/fastt/<name>/`` (``table.md``, ``table.csv``,
a plot). Every number is a registered method's result re-scored by
:func:`dnnplace.registry.solve` on the project's simulator: **simulation**, never a
hardware measurement; published numbers stand beside ours for the *relative* comparison
(docs/semantics.md 5).

How an experiment runs (as Pesto's, :mod:`dnnplace.experiments.pesto`): each graph is
written with the clusters it runs on as native instance files under
``<out>/instances/<family>-b<batch>/`` (:func:`~dnnplace.experiments.runs.write_variants`: a name
ends in a digest of the file's content, so a changed graph or cluster never resumes from
another's runs), every cell is a :class:`~dnnplace.config.RunSpec` of a registered method
on such a file, and the one sweep driver, :func:`dnnplace.runner.execute`, appends each
run's record to ``<out>/runs.jsonl`` as it finishes: a rerun skips the recorded runs
(``fresh`` starts over). The tables, ratios and the largest batch that fits are computed
from the records (the bisection's probes are runs too). Any cell can be repeated by hand
with ``dnnplace solve INSTANCE --problem makespan --method M``.

Model graphs (:func:`~dnnplace.experiments.fastt_models.family_graph`): the bundled
captured PyTorch training graphs with roofline V100 costs (``graphs/workloads/captured``:
Inception-V3, ResNet-50 standing in for ResNet-200, GNMT-4, RNNLM-2x2048, Transformer-base,
BERT-large), scaled to other batch sizes by a :class:`~dnnplace.graphs.batch_model.BatchModel`;
LeNet, AlexNet and VGG-19 are not captured and are *generated* by :func:`model_graph`: layer
lists of the published architectures turned into training graphs with parameter / gradient /
update roles, each op timed by a roofline of a V100 (``PEAK_FLOPS`` at ``PEAK_BW``, plus a 5 µs
kernel floor). Every table names each graph's source. The tables, plots and verdicts are written by
:mod:`dnnplace.experiments.fastt_tables`.

- ``fastt-scaling`` (Tables 1-2): throughput (samples/s) of the DP baseline (``dp-baseline``,
  fifo) and FastT (``os-dpos`` started from the data-parallel graph, strict order) at 1, 2,
  4, 8 GPUs; strong scaling (global batch fixed) and weak scaling (per-GPU batch fixed);
  speedup = best FastT over best DP minus 1 (the paper's metric, ``docs/heuristics.md`` 1.7).
- ``fastt-splits``: Table 5 (which VGG-19 ops OS-DPOS splits, on the model graph carrying
  Table 5's op times), Table 6 (DPOS vs OS-DPOS, split off/on, from the data-parallel start
  without keeping it, splits accepted by the planner as in the paper or by the simulation)
  and Fig. 2 (the OS-DPOS placement under its ``priority`` order vs TensorFlow's ``fifo``),
  all at 2 GPUs.
- ``fastt-memory`` (Table 3): BERT-large at growing global batch on one 16 GB GPU, DP on
  two and FastT (DPOS, ``start="auto"``: the data-parallel start while the model fits one
  GPU, else the model graph) on two: the step time, or OOM where the static footprint
  exceeds a GPU; and the largest batch each fits.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dnnplace.experiments import verdicts as V
from dnnplace.experiments.config import Key, Reproduction, Schema, load
from dnnplace.experiments.fastt_models import FAMILIES, family_graph, model_graph
from dnnplace.experiments.fastt_tables import (
    bar_chart,
    memory_verdict,
    scaling_plot,
    scaling_verdicts,
    speedup,
    splits_verdicts,
    write_table,
)
from dnnplace.experiments.runs import Variant, run_spec, write_variants
from dnnplace.graphs import Cluster, OpGraph
from dnnplace.graphs.errors import InputError
from dnnplace.runner import execute

__all__ = ["model_graph", "family_graph", "largest_batch", "reproduce", "FAMILIES", "EXPERIMENTS", "SCHEMA"]

EXPERIMENTS = ("fastt-scaling", "fastt-splits", "fastt-memory")

# Table 1 (strong): 1 GPU, (DP, FastT) at 2, 4, 8; Table 2 (weak) likewise; samples/s
TABLE1 = {"inception-v3": (191.0, (326.5, 323.2), (467.1, 474.1), (432.4, 438.3)),
          "resnet-50": (89.3, (114.2, 142.2), (122.1, 132.2), (88.4, 91.1)),
          "gnmt-4": (301.1, (435.3, 479.4), (573.9, 636.8), (584.4, 606.6)),
          "rnnlm-2x2048": (345.9, (349.7, 395.0), (335.0, 345.9), (254.9, 273.5)),
          "transformer-base": (7613.3, (11221.9, 11346.2), (13518.1, 15515.1), (5244.5, 5258.0)),
          "lenet": (8827.5, (14222.2, 23272.7), (17006.6, 19692.3), (17066.6, 19692.3)),
          "alexnet": (1630.5, (1868.6, 2752.6), (2000.0, 2534.6), (1695.3, 1729.7)),
          "vgg19": (129.0, (149.5, 199.4), (184.9, 294.9), (126.9, 132.5)),
          "bert-large": (84.2, (115.9, 132.2), (124.0, 152.3), (101.2, 117.6))}
TABLE2 = {"inception-v3": (195.1, (375.3, 375.3), (695.6, 695.6), (1245.7, 1340.3)),
          "resnet-50": (90.6, (175.8, 178.7), (322.4, 346.89), (598.1, 608.0)),
          "gnmt-4": (308.4, (571.4, 606.6), (1047.0, 1101.0), (1988.3, 1980.6)),
          "rnnlm-2x2048": (353.5, (592.5, 695.6), (898.2, 930.9), (964.2, 1013.8)),
          "transformer-base": (7861.8, (15142.3, 15170.3), (26815.0, 28151.2), (47976.5, 50334.9)),
          "lenet": (9142.8, (16516.1, 18285.7), (20897.9, 24975.6), (21557.8, 23011.2)),
          "alexnet": (1600.0, (2508.9, 2994.1), (2708.9, 3112.4), (2756.3, 2904.9)),
          "vgg19": (130.3, (240.6, 255.4), (475.8, 504.9), (707.1, 819.2)),
          "bert-large": (81.6, (137.3, 146.1), (229.3, 248.0), (361.5, 421.0))}
TABLE6 = {"lenet": (0.011, 0.011), "alexnet": (0.093, 0.093), "vgg19": (0.356, 0.321), "bert-large": (0.113, 0.105),
          "inception-v3": (0.161, 0.154), "resnet-50": (0.249, 0.225), "transformer-base": (0.281, 0.264),
          "gnmt-4": (0.201, 0.201), "rnnlm-2x2048": (0.162, 0.162)}
# the paper's model behind each of our graphs (captured stand-ins where the variant differs)
PAPER_MODEL = {"inception-v3": "Inception_v3", "resnet-50": "ResNet200 (ours: ResNet-50)", "gnmt-4": "GNMT-4",
               "rnnlm-2x2048": "RNNLM", "transformer-base": "Transformer", "bert-large": "Bert-large",
               "lenet": "LeNet", "alexnet": "AlexNet", "vgg19": "VGG-19"}
TABLE5 = {"conv1_1": (1.847, 1.792, False), "conv1_2": (11.14, 36.928, True), "conv1_2bp": (26.744, 36.928, True),
          "relu1_2": (1.08, 0.0, False), "pool1": (0.737, 0.0, False), "fc6": (1.374, 102764.544, False)}
TABLE3 = {16: (0.192, 0.138, 0.121), 32: (None, 0.233, 0.219), 40: (None, None, 0.287), 48: (None, None, 0.316)}


# ---------------------------------------------------------------------------- runs
def _cluster(k: int, cfg: Reproduction) -> Cluster:
    return Cluster.single_host(k, **{"with_cpu": False, "gpu_memory": 16e9, "interconnect": "nvlink", **cfg.cluster})


def _variants(folder: Path, g: OpGraph, source: str, ks, cfg: dict) -> dict[int, Variant]:
    """``g`` on ``k`` GPUs for each ``k`` in ``ks``, written as instance files in ``folder``
    (:func:`~dnnplace.experiments.runs.write_variants`: each name ends in a digest of the content)."""
    vs = write_variants(g, {f"gpus{k}": (_cluster(k, cfg), k, 1.0, 1.0) for k in ks}, folder, f"fastt: {source}")
    return {k: vs[f"gpus{k}"] for k in ks}


def _family(out: Path, fam: str, batch: int, ks, cfg: dict) -> tuple[dict[int, Variant], str]:
    """The instance files of ``fam`` at global ``batch`` (:func:`family_graph`) on each of ``ks``
    GPUs, in ``<out>/instances/<fam>-b<batch>/``, and the graph's source."""
    g, source = family_graph(fam, batch, half_batch=float(cfg.get("half_batch", 0.0)))
    return _variants(out / "instances" / f"{fam}-b{batch}", g, source, ks, cfg), source


def _solver(cfg: dict) -> dict:
    return {"time_limit": float(cfg.get("time_limit", 60.0))}


def _planner(cfg: dict) -> dict:
    """The FastT planners' link model: ``planner_congestion`` from the config (true: the planner
    plans on the model it is scored on, :mod:`dnnplace.methods.fastt`); absent: the paper's
    congestion-free planner (and the run keys of records made before the option existed)."""
    return {"planner_congestion": True} if cfg.get("planner_congestion", False) else {}


def _checked(rec: dict, runs: Path, *, oom_ok: bool = False) -> dict:
    """A record that is not an ``error`` (with ``oom_ok``: or an OOM); an error stops the
    reproduction (it stays recorded)."""
    if rec.get("status") == "error" and not (oom_ok and _oom(rec)):
        raise InputError(f"{runs}: run {rec['run_key']} failed: {rec.get('message')}; rerun with --fresh once fixed")
    return rec


def _execute(specs: dict, out: Path, name: str, fresh: bool, progress: bool) -> dict:
    """Run (or resume) ``{cell: {column: RunSpec}}`` through :func:`dnnplace.runner.execute` into
    ``<out>/runs.jsonl``; return ``{cell: {column: record}}``."""
    runs = out / "runs.jsonl"
    done = execute([s for cols in specs.values() for s in cols.values()], runs, name=name, fresh=fresh,
                   progress=progress)
    return {cell: {col: _checked(done[s.key], runs) for col, s in cols.items()} for cell, cols in specs.items()}


def _oom(rec: dict) -> bool:
    """OOM: the evaluator's static-memory violation, or the runner's check before the solve
    proved that no placement fits (an ``InfeasibleError`` record: the graph's static memory
    exceeds the GPUs' total; these graphs run on GPUs only, so it is memory)."""
    return rec["status"] == "memory_infeasible" or str(rec.get("message")).startswith("InfeasibleError:")


def _scaling(cfg: dict, out: Path, *, name: str, fresh: bool, progress: bool) -> Path:
    counts = [int(k) for k in cfg["gpus"]]
    hb = {"half_batch": float(cfg["half_batch"])}
    cells = [(mode, fam, k, int(cfg["batch"][fam]) * (k if mode == "weak" else 1))
             for mode in ("strong", "weak") for fam in cfg["families"] for k in counts]
    gpus_of: dict[tuple[str, int], list[int]] = {}  # one instance folder per graph, all its GPU counts
    for _, fam, k, b in cells:
        gpus_of.setdefault((fam, b), []).append(k)
    variants, source = {}, {}
    for (fam, b), ks in gpus_of.items():
        vs, source[fam, b] = _family(out, fam, b, sorted(set(ks)), cfg)
        variants.update({(fam, b, k): v for k, v in vs.items()})
    specs = {(mode, fam, k): {"one": run_spec(variants[fam, b, k], "dpos")} if k == 1 else
             {"dp": run_spec(variants[fam, b, k], "dp-baseline", hb),
              "ft": run_spec(variants[fam, b, k], "os-dpos", {"start": "data-parallel", **hb, **_planner(cfg)},
                             _solver(cfg))}
             for mode, fam, k, b in cells}
    recs = _execute(specs, out, name, fresh, progress)
    rows = []
    for mode, table in (("strong", TABLE1), ("weak", TABLE2)):
        for fam in cfg["families"]:
            thr, oom = {}, {}
            for k in counts:
                r, global_b = recs[mode, fam, k], int(cfg["batch"][fam]) * (k if mode == "weak" else 1)
                if k == 1:
                    thr[k] = (global_b / r["one"]["objective"] * 1e3,) * 4
                    oom[k] = "OOM" if _oom(r["one"]) else ""
                    continue
                dp, ft = r["dp"], r["ft"]
                thr[k] = (global_b / dp["objective"] * 1e3, global_b / ft["objective"] * 1e3,
                          global_b / ft["extra"]["planner_makespan"] * 1e3,
                          global_b / ft["extra"]["priority_policy"] * 1e3)
                oom[k] = " ".join(f"{m} OOM" for m, rec in (("DP", dp), ("FastT", ft)) if _oom(rec))
            ours = speedup(thr[1][0], [thr[k][0] for k in counts[1:]], [thr[k][1] for k in counts[1:]])
            pub = table[fam]
            paper = speedup(pub[0], [p[0] for p in pub[1:]], [p[1] for p in pub[1:]])
            for k in counts:
                pi = counts.index(k)
                p_dp, p_ft = (pub[0], pub[0]) if k == 1 else pub[pi]
                rows.append([mode, fam, k, thr[k][0], thr[k][1], thr[k][2], thr[k][3], thr[k][1] / thr[k][0], p_dp,
                             p_ft, p_ft / p_dp, oom[k]])
            src = source[fam, int(cfg["batch"][fam]) * (counts[-1] if mode == "weak" else 1)]
            rows.append([mode, f"{fam}: {src}; paper: {PAPER_MODEL[fam]}", "speedup", None, None, None, None,
                         ours, None, None, paper, ""])
    scaling_plot(rows, out / "scaling.png")
    scaling_verdicts(rows)
    header = ["scaling", "model", "GPUs", "DP samples/s (ours)", "FastT samples/s (ours)",
              "OS-DPOS schedule, strict", "OS-DPOS schedule, priority", "FastT/DP (ours)", "DP (paper)",
              "FastT (paper)", "FastT/DP (paper)", "static memory", "verdict"]
    notes = _notes(cfg) + [
        "FastT = os-dpos from the data-parallel graph with the DP deployment as its incumbent, kept when no "
        "schedule of its own simulates faster (keep_start); the two OS-DPOS columns are its own schedule, replayed "
        "strictly (device and link orders) and under the non-delay priority policy. All with link congestion: DP "
        "under TensorFlow's fifo with FCFS links; with planner_congestion the planner queues transfers as the "
        "simulator does and sends a tensor once per consuming GPU, so its estimate equals its strict replay. "
        "Speedup: best FastT over best baseline (1 GPU included) minus 1, the paper's metric.",
        V.tolerance_note(abs_tol=1, unit=" percentage point") + " Judged: FastT/DP - 1 per row, the speedup per "
        "model (throughputs differ in unit: ours simulated, the paper's hardware). The cause of a speedup not "
        "reproduced is measured in its rows: how much slower OS-DPOS's own schedule is than DP, and how DP scales."]
    return write_table(out, header, rows, notes, "FastT Tables 1-2: DP vs FastT throughput (simulation)")


def _notes(cfg: dict) -> list[str]:
    return ["Simulation, not hardware: captured PyTorch graphs with roofline V100 costs where bundled "
            "(graphs/workloads/captured), generated roofline graphs for LeNet, AlexNet and VGG-19 "
            "(experiments/fastt.py); published numbers beside ours for the relative comparison. "
            "Every run is a record of runs.jsonl beside this table (instance files in instances/).",
            cfg.get("description", "")]


def _splits(cfg: dict, out: Path, *, name: str, fresh: bool, progress: bool) -> Path:
    k = int(cfg.get("split_gpus", 2))
    # the graph carries Table 5's op times; the paper's conv1_2bp is our input- plus weight-gradient op
    times = {n: t for n, (t, _, _) in TABLE5.items() if not n.endswith("bp")}
    times["conv1_2_bp"] = times["conv1_2_bpf"] = TABLE5["conv1_2bp"][0] / 2
    g5 = model_graph("vgg19", int(cfg["batch"]["vgg19"]), times)
    v5 = _variants(out / "instances" / "vgg19-table5", g5, "vgg19 generated (roofline V100), Table 5's op times",
                   [k], cfg)[k]
    start = {"start": "data-parallel", "keep_start": False, "half_batch": float(cfg.get("half_batch", 0.0)),
             **_planner(cfg)}
    specs = {"table5": {"on": run_spec(v5, "os-dpos", _planner(cfg) or None, solver=_solver(cfg))}}
    source = {}
    for fam in cfg["families"]:
        vs, source[fam] = _family(out, fam, int(cfg["batch"][fam]), [k], cfg)
        specs[fam] = {"off": run_spec(vs[k], "dpos", start)}
        specs[fam].update({score: run_spec(vs[k], "os-dpos", {"score": score, **start}, _solver(cfg))
                           for score in ("planner", "simulation")})
    recs = _execute(specs, out, name, fresh, progress)
    rows = []
    accepted = recs["table5"]["on"]["extra"]["splits"]
    split = {op for op, _, _ in accepted}
    for op, (t, _wkb, yes) in TABLE5.items():
        ours = [op.replace("bp", "_bp"), op.replace("bp", "_bpf")] if op.endswith("bp") else [op]
        t_ours = float(sum(g5.compute[g5.index_of(o), 0] for o in ours))
        rows.append(["table5", "vgg19", op, t_ours, f"{t} ms, split: {'yes' if yes else 'no'}",
                     f"split: {'yes' if any(o in split for o in ours) else 'no'}"])
    rows.append(["table5", "vgg19", "all accepted splits", None, None,
                 ", ".join(f"{op} {dim} x{n}" for op, dim, n in accepted) or "none"])
    t6: dict[str, tuple[float, float]] = {}
    f2: dict[str, float] = {}
    for fam in cfg["families"]:
        off = recs[fam]["off"]
        p_off, p_on = TABLE6[fam]
        for score in ("planner", "simulation"):
            on = recs[fam][score]
            ms_off, ms_on = off["objective"], on["objective"]
            rows.append(["table6", f"{fam} ({source[fam]})", f"no split / split (ms), splits accepted by the {score}",
                         ms_off, ms_on, f"ours {ms_off / ms_on - 1:+.2%} ({len(on['extra']['splits'])} "
                                        f"splits; planner estimate {off['extra']['planner_estimate']:.4g} "
                                        f"-> {on['extra']['planner_estimate']:.4g}); paper {p_off / p_on - 1:+.2%}"])
            if score == "planner":
                t6[fam] = (100 * (ms_off / ms_on - 1), 100 * (p_off / p_on - 1))
                prio, fifo = on["extra"]["priority_policy"], on["extra"]["fifo_policy"]
                f2[fam] = 100 * (1 - prio / fifo)
                rows.append(["fig2", f"{fam} ({source[fam]})", "FastT placement: priority / fifo (ms)", prio, fifo,
                             f"priority {1 - prio / fifo:+.2%} faster (paper: up to 26.9%)"])
    bar_chart(out / "table6.png", list(t6), [a for a, _ in t6.values()], [b for _, b in t6.values()],
          "speed-up of splitting (%)", "FastT Table 6: OS-DPOS over DPOS, 2 GPUs (ours: simulation)")
    bar_chart(out / "fig2.png", list(f2), list(f2.values()), [float("nan")] * len(f2),
          "priority order over fifo (%)", "FastT Fig. 2: FastT's order vs TF fifo, 2 GPUs (paper: up to 26.9 %)")
    header = ["item", "model", "op / quantity", "ours (ms) / a", "paper split / b", "ours split / note", "verdict"]
    splits_verdicts(rows, t6, f2)
    notes = [*_notes(cfg), V.tolerance_note(abs_tol=1, unit=" percentage point") + " Judged: Table 5 split or not "
             "per op; Table 6's speed-up of splitting per model; Fig. 2's largest gain of the priority order over "
             "fifo (the paper gives only its maximum, 26.9 %)."]
    return write_table(out, header, rows, notes, "FastT Table 5, Table 6, Fig. 2 (simulation, 2 GPUs)")


MEMORY_RUNS = (("dpos", 1, {}), ("dp-baseline", 2, {}), ("dpos", 2, {"start": "auto"}))  # 1 GPU, DP 2, FastT 2


def _memory(cfg: dict, out: Path, *, name: str, fresh: bool, progress: bool) -> Path:
    runs = out / "runs.jsonl"
    at: dict[int, tuple[list, str]] = {}

    def specs_at(b: int) -> tuple[list, str]:
        """The three runs of Table 3 at global batch ``b`` and the graph's source."""
        if b not in at:
            vs, source = _family(out, "bert-large", b, (1, 2), cfg)
            at[b] = ([run_spec(vs[k], method, {**params, **(_planner(cfg) if method == "dpos" else {})})
                      for method, k, params in MEMORY_RUNS], source)
        return at[b]

    batches = [int(x) for x in cfg["batches"]]
    done = execute([s for b in batches for s in specs_at(b)[0]], runs, name=name, fresh=fresh, progress=progress)

    def record(b: int, i: int) -> dict:
        s = specs_at(b)[0][i]
        if s.key not in done:  # a probe of the bisection: run (or find) it now
            done.update(execute([s], runs, name=name, progress=progress))
        return _checked(done[s.key], runs, oom_ok=True)

    rows = []
    for b in batches:
        p = TABLE3.get(b, (None, None, None))
        cells = ["OOM" if _oom(r) else r["objective"] / 1e3 for r in (record(b, i) for i in range(3))]
        rows.append([b] + cells + ["OOM" if x is None else x for x in p])
    labels = [f"{col} b{r[0]}" for r in rows for col in ("1 GPU", "DP 2", "FastT 2")]
    bar_chart(out / "table3.png", labels,
          [x if isinstance(x, float) else float("nan") for r in rows for x in r[1:4]],
          [x if isinstance(x, float) else float("nan") for r in rows for x in r[4:7]],
          "s / step (missing bar: OOM)", "FastT Table 3: BERT-large step time by batch (ours: simulation)")
    top = int(cfg.get("max_batch", 4096))
    largest = [largest_batch(lambda b, i=i: not _oom(record(b, i)), top) for i in range(3)]
    rows.append(["largest batch that fits"] + largest + [16, 32, 48])
    for r in rows:
        r.append(memory_verdict(r[1:4], r[4:7]))
    header = ["global batch", "1 GPU (s)", "DP 2 GPUs (s)", "FastT 2 GPUs (s)", "paper 1 GPU", "paper DP 2",
              "paper FastT 2", "verdict"]
    notes = [V.tolerance_note() + " Judged per row: every cell within the tolerance (OOM where the paper has OOM) "
             "is `reproduced`; the same cells OOM but a time off by more is `trend`.",
             "OOM: static memory (semantics.md 2.1) exceeds a GPU. Largest batch: bisection over multiples of 8 up to "
             f"{top} (the paper's: the largest batch of its Table 3 that ran)."]
    source = specs_at(batches[-1])[1].split(", scaled")[0]
    notes.append(f"Graph: bert-large, {source}, scaled to each row's batch by the batch model.")
    return write_table(out, header, rows, _notes(cfg) + notes,
                  "FastT Table 3: BERT-large step time by batch under static memory (simulation)")


def largest_batch(fits, max_batch: int) -> int | None:
    """The largest multiple of 8 up to ``max_batch`` at which ``fits(batch)`` holds
    (bisection; ``fits`` is monotone: true up to some batch, false beyond), ``None`` if 8 does not fit.

    >>> largest_batch(lambda b: b <= 44, 4096)
    40
    """
    if not fits(8):
        return None
    lo, hi = 1, max_batch // 8
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(8 * mid):
            lo = mid
        else:
            hi = mid - 1
    return 8 * lo


_RUNNERS = {"scaling": _scaling, "splits": _splits, "memory": _memory}

# FastT's own keys of a reproduction config (beside the common cluster, time_limit, description)
SCHEMA = Schema(kinds=tuple(_RUNNERS), out_dir="results/fastt", time_limit=60.0, options={
    "families": Key(list, [], item=str),       # scaling, splits: the models (FAMILIES or captured graphs)
    "batch": Key(dict, {}),                    # family -> global batch
    "gpus": Key(list, [1, 2, 4, 8], item=int), # scaling axis
    "batches": Key(list, [], item=int),        # memory axis: BERT-large global batches
    "split_gpus": Key(int, 2),                 # splits: GPUs of Tables 5-6 and Fig. 2
    "half_batch": Key(float, 0.0),             # the batch model's half-efficiency batch
    "planner_congestion": Key(bool, False),    # DPOS / OS-DPOS plan on the model they are scored on
    "max_batch": Key(int, 4096),               # memory: the bisection's upper end
})


def reproduce(name: str, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run (or resume) ``experiments/<name>.toml`` and write ``results/fastt/<name>/table.md``
    (and plots); every run is appended to ``runs.jsonl`` beside it as it finishes, so a rerun
    skips the runs recorded there (``fresh``: start over, the old files kept as ``.bak``).
    ``quick`` caps each time limit at 5 s and uses the config's ``quick_*`` values (e.g.
    ``quick_batches`` for ``batches``); outputs go to ``<name>-quick``."""
    cfg = load(name, quick=quick, module="fastt")
    if quick:
        cfg = dataclasses.replace(cfg, time_limit=min(cfg.time_limit, 5.0))
    out = (Path(out_dir) if out_dir is not None else Path(cfg.out_dir)) / (cfg.name + ("-quick" if quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    return _RUNNERS[cfg.kind](cfg, out, name=out.name, fresh=fresh, progress=progress)
