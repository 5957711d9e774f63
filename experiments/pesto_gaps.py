"""Pesto's Fig. 5 and Fig. 8 with the ILPs run to their gaps: the ``gaps`` kind of a Pesto
config (:mod:`dnnplace.experiments.pesto`).

A ``gaps`` config names a ``base`` config (``pesto-hardware`` or ``pesto-congestion``) and
reruns that config's ILPs, on the same instances (graph, cluster, coarse size: everything
the base config says), under its own ``time_limit`` and ``rel_gap``, once per solver seed
of ``seeds`` (HiGHS's ``random_seed``, through the run's solver settings), with ``jobs``
runs at a time in worker processes (:func:`dnnplace.sweeps.make_executor`). The records go
to ``<out>/<name>/runs.jsonl`` as each run ends, so an interrupted run resumes. The base
config's own records (``runs.jsonl`` or ``runs.jsonl.gz`` in its folder) are read, never
run, and shown beside the new runs.

- base of kind ``hardware`` (Fig. 8): the cells of ``compute_scales`` x link 1 and link
  ``link_scales`` x compute 1 (the base's cells whose ILP stopped above the gap), each with
  the layer-wise expert, the list schedulers and the Pesto ILP once per seed. The figure's
  two directions are judged again on the base's axes with each rerun cell's median over
  the seeds in place of its 45 s run; a base cell that is a rerun cell with every time
  scaled (compute ``c`` and link ``l`` with the same ratio ``c / l``: a change of the time
  unit) takes that cell's figures, with the base records' makespan ratios as the evidence.
- base of kind ``congestion`` (Fig. 5): the ILP without and with the congestion constraints
  (7), once per seed. Where the limits are the base's, the base's run is the seed of the
  solver's default (0) and counts as one of the seeds.

:func:`run_gaps` writes ``table.md``/``table.csv`` (per cell and seed: the ILP's final gap,
termination and time, Pesto's simulated makespan and its reductions, beside the base run's),
the re-judged figure and a verdict sentence; the config's ``notes`` (the load while the runs
went, from ``uptime`` samples kept beside the records in ``load.txt``) follow the command at the
top. :func:`long_run_cause` is the same finding in one clause, for the cause of the base table's
verdict (a base config's ``long_runs`` key).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
from collections.abc import Callable
from pathlib import Path

from dnnplace.config import RunSpec
from dnnplace.experiments import verdicts as V
from dnnplace.experiments.instance_files import Variant, content_digest, write_variants
from dnnplace.experiments.makespan_runs import best_list, extra_of, list_specs, makespan_of, run_spec
from dnnplace.experiments.pesto_config import (
    EXPERT,
    Config,
    experiment_graph,
    ilp_gap,
    pesto_source,
    pesto_spec,
    scaled_cluster,
)
from dnnplace.experiments.pesto_figures import (
    _CONGESTION_RUNS,
    _FIG5_SWEEP,
    FIG5_NOISE,
    PAPER_FIG5_RATIO,
    PAPER_FIG8,
    _hardware_points,
)
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.runtime.termination import Termination
from dnnplace.tables import Column, fixed, percent, write_table

__all__ = ["run_gaps", "long_run_cause", "base_config"]

_PCT, _SIGNED_PCT, _MS, _SECONDS = percent(1), percent(1, signed=True), fixed(3), fixed(1)
_TERMINATION = {Termination.OPTIMAL: "gap reached",  # (optimal: within rel_gap)
                Termination.TIME_LIMIT: "time limit"}


def base_config(cfg: Config) -> Config:
    """The config ``cfg.base`` names (kind ``hardware`` or ``congestion``), checked."""
    if not cfg.base:
        raise InputError(f"experiment {cfg.name!r}: kind 'gaps' needs key 'base' (the config whose ILPs it reruns, "
                         "e.g. 'pesto-hardware')")
    base = Config.load(cfg.base)
    if base.kind not in ("hardware", "congestion"):
        raise InputError(f"experiment {cfg.name!r}: base = {cfg.base!r} is of kind {base.kind!r}; a gaps config "
                         "reruns a 'hardware' or 'congestion' config")
    return base


def _run_config(cfg: Config, base: Config) -> Config:
    """The base config under the gaps config's limits (everything else as the base says)."""
    return dataclasses.replace(base, time_limit=cfg.time_limit, rel_gap=cfg.rel_gap)


def _folder(base: Config) -> Path:
    """The base config's results folder in the checkout (where its run keys name its instances)."""
    from dnnplace.config import REPO_ROOT

    out = Path(base.out_dir)
    return (out if out.is_absolute() else REPO_ROOT / out) / base.name


def _records(folder: Path) -> dict[str, dict]:
    """The newest record of every run key in ``folder``'s ``runs.jsonl`` (else its ``runs.jsonl.gz``)."""
    from dnnplace.runs_file import read_runs

    if (folder / "runs.jsonl").exists():
        recs = read_runs(folder / "runs.jsonl")
    elif (folder / "runs.jsonl.gz").exists():
        with gzip.open(folder / "runs.jsonl.gz", "rt") as fh:
            recs = [json.loads(line) for line in fh if line.strip()]
    else:
        raise InputError(f"{folder}: no records (runs.jsonl or runs.jsonl.gz) of the base config; run it first")
    return {r["run_key"]: r for r in recs}


def _digest(path: Path) -> str | None:
    try:
        return content_digest(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None


def _base_variant(v: Variant, base: Config) -> Variant:
    """``v``'s instance in the base config's folder: the file of the same stem and content (its name may
    carry an earlier digest, :func:`~dnnplace.experiments.instance_files.write_variants`); an error if the
    base holds no such file (the base ran on another instance)."""
    want = _digest(v.path)
    for path in sorted((_folder(base) / "instances").glob(f"{v.stem}-*.json")):
        if _digest(path) == want:
            return dataclasses.replace(v, path=path)
    raise InputError(f"{_folder(base) / 'instances'}: no instance {v.stem}-*.json of the content of {v.path}; "
                     f"rerun {base.name!r} or the gaps config")


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _preamble(name: str, cfg: Config, base: Config, out: Path, records: list[dict]) -> list[str]:
    from dnnplace.provenance import stamp

    seeds = ", ".join(map(str, cfg.seeds))
    return [*([cfg.description.strip()] if cfg.description.strip() else []),
            f"`nice -n 5 dnnplace reproduce {name}` (resumes from `{out.name}/runs.jsonl`), {stamp(records)}.",
            *cfg.notes,
            f"**Simulation**, not hardware. The ILPs of `{cfg.base}` ({base.description.strip().rstrip('.')}) rerun "
            "on the "
            f"same instances with {cfg.engine_label()} {cfg.time_limit:g} s per ILP (1 thread, relative gap "
            f"{cfg.rel_gap:g}), solver seeds {seeds} (HiGHS `random_seed`); beside them the base's own run "
            f"({base.engine_label()} {base.time_limit:g} s, relative gap {base.rel_gap:g}, the solver's default "
            f"seed, records in `{base.name}/`). {cfg.jobs} run(s) at a time. Every makespan is the run's "
            "`evaluation.objective`: the independent simulator's re-score with link congestion, in ms."]


def _ilp_cells(rec: dict | None) -> dict:
    """What a pesto record says of its ILP: gap, termination, solve time, its start's objective (the
    horizon), its incumbent and bound (all on the coarse graph), answer, makespan."""
    term = Termination.of((rec or {}).get("termination"))
    return {"gap": ilp_gap(rec), "termination": _TERMINATION.get(term, term and str(term)),
            "ilp_s": (rec or {}).get("solve_seconds"),
            "start": (extra_of(rec, "model_size") or {}).get("horizon"), "ilp_obj": extra_of(rec, "ilp_objective"),
            "ilp_bound": extra_of(rec, "ilp_bound"), "answer": pesto_source(rec), "pesto": makespan_of(rec)}


def _ilp_columns() -> list[Column]:
    return [Column("start", "ILP start (coarse)", fmt=_MS, numeric=True),
            Column("ilp_obj", "ILP incumbent (coarse)", fmt=_MS, numeric=True),
            Column("ilp_bound", "ILP bound (coarse)", fmt=_MS, numeric=True)]


def _kept_counts(rows: list[dict]) -> tuple[int, int]:
    """(how many of the rows' ILPs ended on their start, found no better incumbent; how many reported both)."""
    ran = [r for r in rows if None not in (r.get("start"), r.get("ilp_obj"))]
    return sum(r["ilp_obj"] >= r["start"] * (1 - 1e-9) for r in ran), len(ran)


def _kept_start(rows: list[dict]) -> str:
    kept, ran = _kept_counts(rows)
    return f"{kept} of {ran} of these ILPs ended on their start (the list schedule that is their MIP start)"


# ---------------------------------------------------------------------------- the run
def run_gaps(name: str, cfg: Config, out: Path, *, quick: bool, fresh: bool, progress: bool,
             execute_fn: Callable | None = None) -> Path:
    """Rerun ``cfg.base``'s ILPs per seed under ``cfg``'s limits and write the table."""
    from dnnplace.runner import execute
    from dnnplace.sweeps import make_executor

    base = base_config(cfg)
    run_cfg = _run_config(cfg, base)
    plan = _hardware_plan if base.kind == "hardware" else _congestion_plan
    variants, specs, render = plan(cfg, base, run_cfg, out)
    kwargs = {} if execute_fn is not None or cfg.jobs == 1 else {"executor": make_executor("local", cfg.jobs)}
    done = (execute_fn or execute)(specs, out / "runs.jsonl", name=out.name, fresh=fresh, progress=progress,
                                   **kwargs)
    base_done = _records(_folder(base))
    title, columns, rows, footer = render(done, base_done)
    records = [done[s.key] for s in specs if s.key in done]
    return write_table(out / "table", f"{cfg.name} (simulation): {title}", columns, rows,
                       preamble=_preamble(name, cfg, base, out, records), footer=footer)


# ---------------------------------------------------------------------------- Fig. 8
def _stem(c: float, link: float) -> str:
    return f"c{c:g}-l{link:g}"


def _hardware_plan(cfg: Config, base: Config, run_cfg: Config, out: Path):
    g, source = experiment_graph(base)
    cl = Cluster.single_host(**base.cluster)
    n_gpu = cl.devices_of_kind("gpu").size
    cells = _hardware_points(cfg)
    variants = write_variants(g, {_stem(c, link): (scaled_cluster(cl, compute=c, link=link), n_gpu, c, link)
                                  for _, _, c, link in cells}, out / "instances", source)
    cheap: list[RunSpec] = []
    ilps: list[RunSpec] = []
    for v in variants.values():
        cheap += [run_spec(v, EXPERT), *list_specs(v)]
        ilps += [pesto_spec(v, run_cfg, base.coarsen_to, seed=s) for s in cfg.seeds]
    ilps.sort(key=lambda s: s.graph_label.rsplit("/", 1)[-1].startswith("c1-l1-"))  # the 1x ILPs (shortest) last

    def render(done: dict, base_done: dict):
        return _hardware_table(cfg, base, run_cfg, cells, variants, done, base_done)

    return variants, cheap + ilps, render


def _reductions(rec_ms: float | None, expert: float | None, best_ms: float | None) -> dict:
    return {"vs_expert": None if None in (rec_ms, expert) else 1 - rec_ms / expert,
            "vs_list": None if None in (rec_ms, best_ms) else 1 - rec_ms / best_ms}


def _hardware_rows(cfg: Config, base: Config, run_cfg: Config, cells, variants, done, base_done):
    """Per cell: the rows of its seeds and of the base run, and the cell's medians."""
    rows, per_cell = [], {}
    for axis, s, c, link in cells:
        v = variants[_stem(c, link)]
        bv = _base_variant(v, base)
        expert = makespan_of(done.get(run_spec(v, EXPERT).key))
        best, best_ms = best_list(v, done)
        cell = {"axis": axis, "scale": s, "expert": expert, "best_list": best_ms, "best_list_method": best}
        seeds = []
        for seed in cfg.seeds:
            r = {**cell, "run": f"{run_cfg.time_limit:g} s, seed {seed}",
                 **_ilp_cells(done.get(pesto_spec(v, run_cfg, base.coarsen_to, seed=seed).key))}
            r.update(_reductions(r["pesto"], expert, best_ms))
            seeds.append(r)
        b_expert = makespan_of(base_done.get(run_spec(bv, EXPERT).key))
        b_best, b_best_ms = best_list(bv, base_done)
        b = {"axis": axis, "scale": s, "expert": b_expert, "best_list": b_best_ms, "best_list_method": b_best,
             "run": f"{base.time_limit:g} s (base)", **_ilp_cells(base_done.get(pesto_spec(bv, base,
                                                                                          base.coarsen_to).key))}
        b.update(_reductions(b["pesto"], b_expert, b_best_ms))
        med = {k: _median([r[k] for r in seeds]) for k in ("gap", "pesto", "vs_expert", "vs_list", "ilp_s")}
        rows += [*seeds, b, {"axis": axis, "scale": s, "run": f"median of {len(seeds)} seeds", **med}]
        per_cell[(c, link)] = {"seeds": seeds, "base": b, "median": med}
    return rows, per_cell


def _base_axis(base: Config, base_done: dict) -> dict[tuple[float, float], dict]:
    """The base run's figures at every point of its two axes (its own instances)."""
    pts = {}
    folder = _folder(base) / "instances"
    for axis, s, c, link in _hardware_points(base):
        path = next(iter(sorted(folder.glob(f"{_stem(c, link)}-*.json"))), None)
        if path is None:
            continue
        bv = Variant(_stem(c, link), path, 0, 0, c, link)
        expert = makespan_of(base_done.get(run_spec(bv, EXPERT).key))
        _, best_ms = best_list(bv, base_done)
        rec = base_done.get(pesto_spec(bv, base, base.coarsen_to).key)
        pts[(c, link)] = {"axis": axis, "scale": s, "expert": expert, "best_list": best_ms,
                          **_ilp_cells(rec), **_reductions(makespan_of(rec), expert, best_ms)}
    return pts


def _hardware_series(base: Config, base_pts: dict, per_cell: dict):
    """Per axis of the base: (point labels, the base's values, the medians' values, per seed the values, the
    points taken from a scaled rerun cell with the evidence)."""
    n_seeds = max((len(p["seeds"]) for p in per_cell.values()), default=0)
    out = {}
    scaled_notes = []
    for axis in PAPER_FIG8:
        labels, stars, base_vals, med_vals, seed_vals = [], [], [], [], [[] for _ in range(n_seeds)]
        for ax, s, c, link in _hardware_points(base):
            if ax != axis or (c, link) not in base_pts:
                continue
            b = base_pts[(c, link)]
            src = per_cell.get((c, link))
            twin = None
            if src is None:  # the same instance up to the time unit: the same compute / link ratio
                twin = next(((cc, ll) for (cc, ll) in per_cell if abs(cc / ll - c / link) < 1e-9 * (c / link)), None)
                src = per_cell.get(twin) if twin else None
                if src is not None and twin in base_pts:
                    t = base_pts[twin]
                    ratios = ", ".join(f"{word} {b[k] / t[k]:.4f}x" for k, word in
                                       (("expert", "expert"), ("best_list", "best list"), ("pesto", "Pesto"))
                                       if b.get(k) and t.get(k))
                    scaled_notes.append(f"{axis} {s:g}x is compute {twin[0]:g}x / link {twin[1]:g}x with every time "
                                        f"{(twin[0] / c):g}x (the same compute / link ratio), so it takes that "
                                        f"cell's long runs; evidence, the base records' makespans there over "
                                        f"those at the twin: {ratios}")
            labels.append(f"{s:g}x")
            stars.append(f"{s:g}x" + ("*" if src else ""))
            base_vals.append(b["vs_expert"])
            med_vals.append(src["median"]["vs_expert"] if src else b["vs_expert"])
            for i in range(n_seeds):
                seed_vals[i].append(src["seeds"][i]["vs_expert"] if src else b["vs_expert"])
        out[axis] = (labels, stars, base_vals, med_vals, seed_vals)
    return out, scaled_notes


_FIG8_CAUSE = ("the ILPs' gap is not it (the long runs below keep the direction); the cause measured on the "
               "base's records is in results/pesto/hardware/table.md")


def _fmt_series(labels: list[str], vals: list) -> str:
    return ", ".join(f"{lab} {v:+.1%}" for lab, v in zip(labels, vals) if v is not None)


def _fig8_judgement(base: Config, base_done: dict, per_cell: dict):
    """Per axis: (claim, base series, base verdict, long series, long verdict, per-seed verdicts), and notes."""
    series, notes = _hardware_series(base, _base_axis(base, base_done), per_cell)
    out = {}
    for axis, (increasing, claim) in PAPER_FIG8.items():
        labels, stars, base_vals, med_vals, seed_vals = series[axis]
        out[axis] = {"claim": claim, "base": _fmt_series(labels, base_vals),
                     "base_verdict": V.judge_direction(base_vals, increasing, abs_tol=0.01),
                     "long": _fmt_series(stars, med_vals),
                     "long_verdict": V.judge_direction(med_vals, increasing, abs_tol=0.01),
                     "seed_verdicts": [V.judge_direction(v, increasing, abs_tol=0.01) for v in seed_vals]}
    return out, notes


def _gap_reach(per_cell: dict) -> tuple[float | None, int]:
    """The largest final gap over the rerun ILPs and the number of seeds."""
    gaps = [r["gap"] for p in per_cell.values() for r in p["seeds"] if r["gap"] is not None]
    n = max((len(p["seeds"]) for p in per_cell.values()), default=0)
    return (max(gaps) if gaps else None), n


def _changes(before: str, after: str, seeds: list[str]) -> str:
    if any(kind != after for kind in seeds):
        return (f"unsettled: the median's series is {after or 'unjudged'}, the seeds' own series "
                f"{', '.join(k or 'unjudged' for k in seeds)}")
    return f"stays {after}" if after == before else f"changes from {before} to {after}"


def _hardware_table(cfg, base, run_cfg, cells, variants, done, base_done):
    rows, per_cell = _hardware_rows(cfg, base, run_cfg, cells, variants, done, base_done)
    judged, notes = _fig8_judgement(base, base_done, per_cell)
    worst, n = _gap_reach(per_cell)
    columns = [Column("axis"), Column("scale", numeric=True, fmt=lambda x: f"{x:g}"), Column("run"),
               Column("termination", "ILP stop"), Column("gap", "ILP gap", fmt=_PCT, numeric=True), *_ilp_columns(),
               Column("ilp_s", "ILP time (s)", fmt=_SECONDS, numeric=True),
               Column("expert", "expert (ms)", fmt=_MS, numeric=True),
               Column("best_list", "best list (ms)", fmt=_MS, numeric=True), Column("best_list_method", "list"),
               Column("pesto", "Pesto (ms)", fmt=_MS, numeric=True),
               Column("vs_expert", "Pesto vs expert", fmt=_SIGNED_PCT, numeric=True),
               Column("vs_list", "Pesto vs list", fmt=_SIGNED_PCT, numeric=True), Column("answer", "Pesto answer")]
    summary = []
    sentence = []
    for axis, j in judged.items():
        summary.append((f"Fig. 8, {axis} axis", j["claim"], f"{base.time_limit:g} s: {j['base']}",
                        V.with_cause(j["base_verdict"], _FIG8_CAUSE)))
        summary.append(("", "", f"{run_cfg.time_limit:g} s, median of {n} seeds: {j['long']}",
                        V.with_cause(j["long_verdict"], _FIG8_CAUSE)))
        sentence.append(f"the {axis} trend {_changes(j['base_verdict'], j['long_verdict'], j['seed_verdicts'])} "
                        f"(seeds: {', '.join(k or 'unjudged' for k in j['seed_verdicts'])})")
    reach = "unknown (no ILP reported one)" if worst is None else f"at most {worst:.1%}"
    footer = [f"ILP gap: the certified gap of the coarse ILP ({base.coarsen_to} nodes) when it stopped; `ILP stop`: "
              f"`gap reached` (at or below {cfg.rel_gap:g}) or `time limit`; `ILP time`: HiGHS's solve time, its "
              "share of the run's time limit (coarsening, the start and the refinement take the rest). `Pesto vs "
              "X` is the reduction of the makespan over X (positive: Pesto is faster); expert and best list as in "
              "the base table. The median row is the median over the seeds of each column.", "",
              f"Paper vs ours (direction within 1 percentage point per step; `*`: the median of the long runs of the "
              f"cell or of its scaled twin, below; the base's other cells keep their {base.time_limit:g} s run, whose "
              "ILP gap was already small):", "",
              *V.summary_table(summary), "",
              f"**Verdict.** With the ILPs' final gaps {reach} (limit {run_cfg.time_limit:g} s, relative gap "
              f"{cfg.rel_gap:g}) over {n} seeds: {'; '.join(sentence)}. "
              f"{_kept_start([r for p in per_cell.values() for r in p['seeds']])}; the ILP columns are "
              "the coarse model's objective (one transfer per edge), not the simulated makespan."]
    if notes:
        footer += ["", *(f"- {x}." for x in notes)]
    return "Fig. 8 with the ILPs run to their gaps", columns, rows, footer


# ---------------------------------------------------------------------------- Fig. 5
def _congestion_runs():
    return _CONGESTION_RUNS[:2]  # without and with the congestion constraints (7)


def _congestion_plan(cfg: Config, base: Config, run_cfg: Config, out: Path):
    g, source = experiment_graph(base)
    cl = Cluster.single_host(**base.cluster)
    variants = write_variants(g, {"base": (cl, cl.devices_of_kind("gpu").size, 1.0, 1.0)}, out / "instances",
                              f"{source} on {cl.name}")
    v = variants["base"]
    specs = [pesto_spec(v, run_cfg, base.coarsen_to, seed=s, ilp_congestion=cong, fallback=False, **kw)
             for s in cfg.seeds for _, cong, kw in _congestion_runs()]

    def render(done: dict, base_done: dict):
        return _congestion_table(cfg, base, run_cfg, v, done, base_done)

    return variants, specs, render


def _fig5_verdict(ratio: float | None) -> str:
    """The ratio judged against the paper's, with the sweep's measured cause where it is not reproduced."""
    if ratio is None:
        return ""
    return V.with_cause(V.judge(PAPER_FIG5_RATIO, ratio, abs_tol=FIG5_NOISE, neutral=1.0), _FIG5_SWEEP)


def _fig5_summary(cfg, base, run_cfg, v, done, base_done) -> dict:
    """The rows (per run and ILP) and the ratios without / with (7): the base's, per seed and their median."""
    bv = _base_variant(v, base)
    same_limits = (base.time_limit, base.rel_gap) == (run_cfg.time_limit, run_cfg.rel_gap)
    runs = [(f"{base.time_limit:g} s, default seed (base)", None, base_done, bv, base)]
    runs += [(f"{run_cfg.time_limit:g} s, seed {s}", s, done, v, run_cfg) for s in cfg.seeds]
    rows, ratios = [], []
    for label, seed, recs, var, c in runs:
        ms = {}
        for ilp, cong, kw in _congestion_runs():
            rec = recs.get(pesto_spec(var, c, base.coarsen_to, seed=seed, ilp_congestion=cong, fallback=False,
                                      **kw).key)
            r = {"run": label, "ilp": ilp.replace("_", " "), "status": (rec or {}).get("status"),
                 "source": extra_of(rec, "source"), **_ilp_cells(rec)}
            ms[ilp] = r["pesto"]
            rows.append(r)
        ratio = None if None in ms.values() else ms["without_congestion"] / ms["with_congestion"]
        rows[-1]["ratio"] = ratio
        if seed is not None or same_limits:
            ratios.append(ratio)
    med = _median(ratios)
    base_ratio = rows[1].get("ratio")
    return {"rows": rows, "ratios": ratios, "median": med, "base_ratio": base_ratio, "same_limits": same_limits,
            "worst": max((r["gap"] for r in rows if r["gap"] is not None), default=None),
            "change": _changes(*(V.kind_of(_fig5_verdict(x)) or "" for x in (base_ratio, med)),
                               [V.kind_of(_fig5_verdict(x)) or "" for x in ratios])}


def _congestion_table(cfg, base, run_cfg, v, done, base_done):
    f = _fig5_summary(cfg, base, run_cfg, v, done, base_done)
    med, base_ratio, ratios = f["median"], f["base_ratio"], f["ratios"]
    columns = [Column("run"), Column("ilp", "ILP"), Column("status"), Column("termination", "ILP stop"),
               Column("gap", "ILP gap", fmt=percent(2), numeric=True), *_ilp_columns(),
               Column("ilp_s", "ILP time (s)", fmt=_SECONDS, numeric=True), Column("source"),
               Column("pesto", "simulated makespan (ms)", fmt=_MS, numeric=True),
               Column("ratio", "ratio without / with (ours)", fmt=_MS, numeric=True)]
    counted = "the base run and the seeds" if f["same_limits"] else "the seeds"
    each = ", ".join(f"{x:.3f}" for x in ratios if x is not None)
    summary = [("Fig. 5, RNNLM-2-2048", f"~{PAPER_FIG5_RATIO:g}x (the ILP with (7) ahead)",
                "" if base_ratio is None else f"base: {base_ratio:.3f}", _fig5_verdict(base_ratio)),
               ("", "", "" if med is None else f"median over {len(ratios)} ({counted}): {med:.3f} (each: {each})",
                _fig5_verdict(med))]
    reach = "unknown (no ILP reported one)" if f["worst"] is None else f"at most {f['worst']:.2%}"
    footer = [f"ILP gap: the certified gap of the coarse ILP ({base.coarsen_to} nodes); `ILP stop`: `gap reached` or "
              "`time limit`; `source`: where the answer came from (`ilp`: the ILP's own, `fallback=false` as in the "
              f"base table). A ratio within {FIG5_NOISE:g} of 1 counts as no direction. Where the limits are the "
              "base's, the base run is the solver's default seed (0) and counts as one of the seeds.", "",
              "Paper vs ours:", "", *V.summary_table(summary), ""]
    if med is None:
        footer.append("**Verdict.** No ratio: a run has no makespan.")
    else:
        footer.append(f"**Verdict.** With the ILPs' final gaps {reach} over {len(ratios)} seeds, the Fig. 5 ratio "
                      f"{f['change']} (median {med:.3f}, each {each}; the paper's ~{PAPER_FIG5_RATIO:g}). "
                      f"{_kept_start(f['rows'])}.")
    return "Fig. 5 with the ILPs over seeds", columns, f["rows"], footer


# ---------------------------------------------------------------------------- the base tables' cause
def long_run_cause(gaps_name: str, figure: str) -> str | None:
    """One clause for the cause of a base table's verdict on ``figure`` (``"compute"`` or ``"link"`` for
    Fig. 8, ``"fig5"``), from the records of the gaps config ``gaps_name`` alone (no run); ``None`` without
    records."""
    cfg = Config.load(gaps_name)
    base = base_config(cfg)
    run_cfg = _run_config(cfg, base)
    from dnnplace.config import REPO_ROOT

    out = Path(cfg.out_dir) if Path(cfg.out_dir).is_absolute() else REPO_ROOT / cfg.out_dir
    folder = out / cfg.name
    try:
        done = _records(folder)
        base_done = _records(_folder(base))
    except InputError:
        return None
    where = f"{Path(cfg.out_dir).as_posix()}/{cfg.name}/table.md"
    if base.kind == "hardware":
        cells = _hardware_points(cfg)
        variants = {_stem(c, link): Variant(_stem(c, link), p, 0, 0, c, link) for _, _, c, link in cells
                    if (p := next(iter(sorted((folder / "instances").glob(f"{_stem(c, link)}-*.json"))), None))}
        if len(variants) < len(cells):
            return None
        _, per_cell = _hardware_rows(cfg, base, run_cfg, cells, variants, done, base_done)
        judged, _ = _fig8_judgement(base, base_done, per_cell)
        j = judged[figure]
        worst, n = _gap_reach(per_cell)
        change = _changes(j["base_verdict"], j["long_verdict"], j["seed_verdicts"])
        gaps = [r["gap"] for q in per_cell.values() for r in q["seeds"] if r["gap"] is not None]
        kept, ran = _kept_counts([r for q in per_cell.values() for r in q["seeds"]])
        head = (f"ILPs run for {run_cfg.time_limit:g} s over {n} seeds ({where}) stop at gaps of {min(gaps):.1%}-"
                f"{worst:.1%}, {kept} of {ran} never beating their list-schedule start")
        series = f"{j['long'].replace('*', '')}, the rerun cells at their seeds' median"
        if change.startswith("unsettled"):
            return f"cause unknown: {head}: {change} ({series})"
        return f"{head}: the trend {change} ({series})"
    v = next(iter(sorted((folder / "instances").glob("base-*.json"))), None)
    if v is None:
        return None
    f = _fig5_summary(cfg, base, run_cfg, Variant("base", v, 0, 0), done, base_done)
    if f["median"] is None:
        return None
    gaps = [r["gap"] for r in f["rows"] if r["gap"] is not None]
    head = (f"ILPs run for {run_cfg.time_limit:g} s over {len(f['ratios'])} seeds ({where}) stop at gaps of "
            f"{min(gaps):.2%}-{f['worst']:.2%}")
    tail = f"median {f['median']:.3f} (each {', '.join(f'{x:.3f}' for x in f['ratios'])})"
    if f["change"].startswith("unsettled"):
        return f"cause unknown: {head}: {f['change']}, {tail}"
    return f"{head}: the ratio {f['change']}, {tail}"
