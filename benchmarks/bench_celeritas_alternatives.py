"""Celeritas Table 3 under the alternatives of the choices made after seeing results.

Our Table 3 (results/celeritas/table3.md) rests on two settings chosen after earlier runs
(results/celeritas/README.md, "The paper's tables"): one GPU memory share for every model
(``gpu_share`` 0.35 of the model's static memory, experiments/celeritas-models.toml) and
TensorFlow's forward-backward colocation on the captured graphs (``colocate_gradients``,
:mod:`dnnplace.graphs.transforms.colocate`). The third such choice, METIS balanced on compute,
has its alternative in the table itself ("Metis (memory too)"). This reruns the table's methods
(``celeritas-table3``: Metis twice, m-TOPO, m-ETF, m-SCT, Order-Place, Celeritas) on its four
models (the three captured graphs committed in results/celeritas/graphs/, no torch needed, and
the Tensor Holography stand-in) under each setting of :data:`SETTINGS`: the committed one (which
must give table3.csv's step times, C12 cells and rankings exactly: checked, the run fails
otherwise), shares 0.25 and 0.5 with colocation, and colocation off at 0.35. Every setting goes
through the table's own code (:mod:`dnnplace.experiments.celeritas`: its instance files, run
specs, sweep driver, fifo re-simulation and Table 3 rows, C12 and ranking with their verdicts);
only the models' ``gpu_share`` / ``colocate_gradients`` change. The Tensor Holography stand-in
pairs its backward nodes itself, so colocation off leaves its instance, and its runs, unchanged.

    .venv/bin/python -m benchmarks celeritas-alternatives

Writes results/celeritas/alternatives-ablation.md (``--out``); the runs go to
results/celeritas/alternatives-ablation/ (the instance files are rebuilt on a rerun; kept: the
records gzipped as runs.jsonl.gz and each setting's Table 3 CSV; ``--fresh`` drops the records and
makes every run again). About 75 s of CPU.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import os
import shutil
import subprocess
import time
from pathlib import Path

from benchmarks.machine import utc_now
from benchmarks.options import add_shared
from benchmarks.paths import REPO
from benchmarks.rows import pack_runs

RESULTS = REPO / "results" / "celeritas"
COMMITTED = "committed (share 0.35, colocation on)"
SETTINGS = {
    COMMITTED: (0.35, True),
    "share 0.25 (colocation on)": (0.25, True),
    "share 0.5 (colocation on)": (0.5, True),
    "colocation off (share 0.35)": (0.35, False),
}
"""Label -> (``gpu_share``, ``colocate_gradients``) of every model; the first is the committed table's."""
METHODS = ("Metis", "Metis (memory too)", "m-TOPO", "m-ETF", "m-SCT", "Order-Place", "Celeritas")
SUMMARY = ("speed up (C12)", "ranking (feasible)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, out=RESULTS / "alternatives-ablation.md", fresh=False)


def alternative(cfg, gpu_share: float, colocate: bool):
    """``cfg`` (a :class:`~dnnplace.experiments.celeritas.Config`) with every model's memory share and
    forward-backward colocation set to these."""
    return dataclasses.replace(cfg, models=tuple(dataclasses.replace(m, gpu_share=gpu_share,
                                                                     colocate_gradients=colocate)
                                                 for m in cfg.models))


def slug(label: str) -> str:
    return "".join(c if c.isalnum() or c == "." else "-" for c in label.split(" (")[0]).strip("-")


def read_rows(path: Path) -> dict[tuple[str, str], dict]:
    """A Table 3 CSV as ``(model, method) -> row``."""
    with open(path, newline="") as fh:
        return {(r["model"], r["method"]): r for r in csv.DictReader(fh)}


def run_setting(cfg, work: Path, runs: Path, label: str) -> tuple[dict, dict]:
    """Run Table 3 under one setting (resuming from ``runs``); its rows (``(model, method) -> row``, the
    table's CSV written to ``work/<slug>/table3.csv``) and the models' sources."""
    from dnnplace.experiments.celeritas import _specs, _table3, _variants
    from dnnplace.graphs.io import load_instance
    from dnnplace.runner import execute

    variants = _variants(cfg, work, quick=False)
    specs = {m: _specs("table3", cfg, v) for m, (v, _) in variants.items()}
    done = execute([s for cols in specs.values() for s in cols.values()], runs, name="celeritas-alternatives",
                   progress=True)
    recs = {m: {col: done.get(s.key) for col, s in cols.items()} for m, cols in specs.items()}
    out = work / slug(label)
    out.mkdir(parents=True, exist_ok=True)
    md = _table3(out, variants, recs, {m.name: m for m in cfg.models})
    for extra in (md, md.with_suffix(".png")):  # the CSV holds every figure this page reads
        extra.unlink(missing_ok=True)
    limits = {m: float(load_instance(v.path).cluster.memory[0]) for m, (v, _) in variants.items()}
    return read_rows(md.with_suffix(".csv")), {m: (src, limits[m], least_over(recs[m])) for m, (_, src)
                                               in variants.items()}


def least_over(recs: dict) -> tuple[str, float, float]:
    """The method whose placement overflows its fullest GPU least (static memory): the method, the bytes over
    and their share of one GPU's memory (0 where it fits)."""
    def over(rec: dict) -> tuple[float, float]:
        devs = ((rec or {}).get("evaluation") or {}).get("devices") or {}
        return max(((d["static_memory_over"], d["static_memory_over"] / d["memory_capacity"]) for d in devs.values()),
                   default=(float("inf"), float("inf")))

    col = min(recs, key=lambda c: over(recs[c]))
    return (col, *over(recs[col]))


def check_committed(rows: dict) -> int:
    """Assert that the committed setting gives table3.csv's step times, OOM cells, C12 cells and rankings
    exactly; the number of cells compared."""
    table = read_rows(RESULTS / "table3.csv")
    n = 0
    for key, r in table.items():
        if key[1] in METHODS or key[1] in SUMMARY:
            assert key in rows and rows[key]["ours"] == r["ours"], (
                f"the committed setting does not reproduce table3.csv at {key}: "
                f"{rows.get(key, {}).get('ours')!r} against {r['ours']!r}")
            n += 1
    return n


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "uptime unavailable"


def run(args) -> None:
    from dnnplace.experiments.celeritas import Config, _warm_up
    from dnnplace.provenance import git_dirty, git_revision

    cfg = Config.load("celeritas-table3")
    work = args.out.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    runs = work / "runs.jsonl"
    if args.fresh:
        runs.unlink(missing_ok=True)
        (work / "runs.jsonl.gz").unlink(missing_ok=True)
    if (work / "runs.jsonl.gz").exists() and not runs.exists():  # resume from the kept records
        with gzip.open(work / "runs.jsonl.gz", "rt") as src, runs.open("w") as dst:
            shutil.copyfileobj(src, dst)
    graphs = work / "graphs"  # the committed captures, where model_graph looks for them (no capture runs)
    if not graphs.exists():
        graphs.symlink_to(os.path.relpath(RESULTS / "graphs", work), target_is_directory=True)
    resumed = sum(1 for _ in runs.open()) if runs.exists() else 0
    rev = (git_revision() or "unknown")[:7] + ("+dirty" if git_dirty() else "")
    up0, t0, c0 = uptime(), time.perf_counter(), time.process_time()
    try:
        _warm_up()
        results, sources = {}, {}
        for label, (share, colocate) in SETTINGS.items():
            results[label], sources[label] = run_setting(alternative(cfg, share, colocate), work, runs, label)
        checked = check_committed(results[COMMITTED])
    finally:
        graphs.unlink()
        shutil.rmtree(work / "instances", ignore_errors=True)
    wall, cpu, up1 = time.perf_counter() - t0, time.process_time() - c0, uptime()
    _write(args, results, sources, checked, rev, (up0, up1), wall, cpu, resumed)
    pack_runs(runs, work / "runs.jsonl.gz")


def _num(x: str) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _cell(r: dict | None) -> str:
    if r is None:
        return ""
    x = _num(r["ours"])
    return r["ours"] if x is None else f"{x:.0f}"


def celeritas_place(rows: dict, model: str) -> str:
    """Celeritas' place in the model's ranking of feasible methods, ``k of n``."""
    rank = rows[(model, "ranking (feasible)")]["ours"].split(" < ")
    return f"{rank.index('Celeritas') + 1} of {len(rank)}" if "Celeritas" in rank else "OOM"


def _verdict_word(r: dict) -> str:
    return (r.get("verdict") or "").split(":")[0]


def _write(args, results, sources, checked, rev, ups, wall, cpu, resumed) -> None:
    base = results[COMMITTED]
    models = list(dict.fromkeys(m for m, _ in base))
    lines = ["# Celeritas Table 3 under the alternatives of the choices made after seeing results", "",
             f"Command: `{args.command_line}` (benchmarks/bench_celeritas_alternatives.py). Run {utc_now()} at "
             f"{rev}; {wall:.0f} s wall, {cpu:.0f} s CPU (this process"
             f"{f', {resumed} runs resumed from the kept records' if resumed else ', every run made'}); "
             f"`uptime` at the start: `{ups[0]}`; at the "
             f"end: `{ups[1]}`.", "",
             "Simulation as table3.md: the same methods, models, cluster (4 V100-class GPUs over PCIe), fifo "
             "re-simulation and rules for C12, ranking (ties within 1 %) and verdicts, through the table's own "
             "code; only each model's `gpu_share` (one GPU's memory as a share of the model's static memory) and "
             "`colocate_gradients` (TensorFlow's forward-backward colocation on the captured graphs) change. The "
             "third choice made after seeing results, METIS balanced on compute, has its alternative in every "
             "table below (the row Metis (memory too)). Step times in the graph's unit (ms, simulated); OOM = a "
             "static-memory violation. "
             f"The committed setting reproduces table3.csv exactly ({checked} cells compared: every step time, OOM "
             "cell, C12 cell and ranking; the run fails otherwise). Records: alternatives-ablation/runs.jsonl.gz "
             "and each setting's Table 3 CSV in alternatives-ablation/<setting>/table3.csv.", "",
             "GPU memory per setting (bytes, one GPU):", ""]
    lines += ["| setting | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
    for label, src in sources.items():
        lines.append(f"| {label} | " + " | ".join(f"{src[m][1]:.4g}" for m in models) + " |")
    for label, rows in results.items():
        alt = label != COMMITTED
        lines += ["", f"## {label}", ""]
        if alt:
            lines += ["Each cell: this setting (committed setting); a cell that changes is in bold.", ""]
        lines += ["| method | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
        for meth in (*METHODS, "Celeritas' place", "speed up (C12)"):
            cells = []
            for m in models:
                if meth == "Celeritas' place":
                    a, b = celeritas_place(rows, m), celeritas_place(base, m)
                elif meth == "speed up (C12)":
                    a, b = rows[(m, meth)]["ours"], base[(m, meth)]["ours"]
                    a, b = f"{a} ({_verdict_word(rows[(m, meth)])})", f"{b} ({_verdict_word(base[(m, meth)])})"
                else:
                    a, b = _cell(rows.get((m, meth))), _cell(base.get((m, meth)))
                cells.append((f"**{a}** ({b})" if a != b else f"{a} ({b})") if alt else a)
            lines.append(f"| {meth} | " + " | ".join(cells) + " |")
        lines += ["", "Rankings (fastest first; verdict against the paper's):", ""]
        for m in models:
            r = rows[(m, "ranking (feasible)")]
            same = "" if not alt or r["ours"] != base[(m, "ranking (feasible)")]["ours"] else " (as committed)"
            lines.append(f"- {m}: {r['ours'] or 'no method fits'}{same}; {_verdict_word(r) or 'no verdict'}")
        if alt:
            lines += ["", "Sources: " + "; ".join(f"{m}: {sources[label][m][0]}" for m in models)]
    lines += ["", "## What changes", "", *changes(results, sources, models), ""]
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


def changes(results: dict, sources: dict, models: list[str]) -> list[str]:
    """Per alternative: the Table 3 verdicts that differ from the committed setting's (OOM cells against the
    paper's, C12, ranking), the published OOMs reproduced, Celeritas' place and C12, with the numbers."""
    base = results[COMMITTED]
    lead = []
    for label, rows in results.items():
        changed = [f"{m} {meth}" for (m, meth), a in rows.items() if _verdict_word(a) != _verdict_word(base[(m, meth)])]
        if label != COMMITTED:
            lead.append(f"{label}: {len(changed)}" + (f" ({', '.join(changed)})" if len(changed) <= 5 else ""))
    out = ["Table 3 verdicts (OOM cells against the paper's, C12, ranking) that differ from the committed setting's: "
           + "; ".join(lead) + ". Per alternative:", ""]
    for label, rows in results.items():
        if label == COMMITTED:
            continue
        if all(rows[(m, meth)]["ours"] == "OOM" for m in models for meth in METHODS):
            out.append(f"- {label}: every placement of every method is OOM, so no step time, ranking or C12 is "
                       f"left; the published OOMs reproduced: {oom_score(rows)} (committed {oom_score(base)}), and "
                       "the paper's other cells become `not reproduced: OOM under our GPU memory share, ran in the "
                       f"paper`. At {SETTINGS[label][0]} the four GPUs together hold {4 * SETTINGS[label][0]:.2g}x "
                       "the model's static memory, so only a perfect packing fits; the placement that overflows its "
                       "fullest GPU least: " + "; ".join(
                           f"{m} {sources[label][m][2][0]} ({sources[label][m][2][1]:.3g} B over, "
                           f"{sources[label][m][2][2]:.1e} of a GPU)" for m in models)
                       + ".")
            continue
        verdicts = []
        for (m, meth), a in rows.items():
            b = base[(m, meth)]
            if _verdict_word(a) != _verdict_word(b):
                verdicts.append(f"{m} {meth} `{_verdict_word(a) or 'none'}` (committed `{_verdict_word(b) or 'none'}`"
                                f"; ours {_cell(a)} against {_cell(b)}, paper {b['paper'] or '-'})")
        places = [f"{m} {celeritas_place(rows, m)} (committed {celeritas_place(base, m)})" for m in models
                  if celeritas_place(rows, m) != celeritas_place(base, m)]
        c12s = [f"{m} {rows[(m, 'speed up (C12)')]['ours']} (committed {base[(m, 'speed up (C12)')]['ours']})"
                for m in models if rows[(m, "speed up (C12)")]["ours"] != base[(m, "speed up (C12)")]["ours"]]
        fits = [f"{m} {meth} fits ({_cell(rows[(m, meth)])})" for m in models for meth in METHODS
                if base[(m, meth)]["ours"] == "OOM" and rows[(m, meth)]["ours"] != "OOM"]
        ooms = [f"{m} {meth} OOM (committed {_cell(base[(m, meth)])})" for m in models for meth in METHODS
                if base[(m, meth)]["ours"] != "OOM" and rows[(m, meth)]["ours"] == "OOM"]
        out.append(f"- {label}: verdicts changed: {'; '.join(verdicts) or 'none'}. Published OOMs reproduced: "
                   f"{oom_score(rows)} (committed {oom_score(base)}). OOM cells: "
                   f"{'; '.join(fits + ooms) or 'as committed'}. Celeritas' place: "
                   f"{'; '.join(places) or 'as committed'}. C12: {'; '.join(c12s) or 'as committed'}.")
    return out


def oom_score(rows: dict) -> str:
    """How many of the paper's OOM cells (of the methods run) are OOM here too."""
    cells = [r for (m, meth), r in rows.items() if meth in METHODS and r["paper"] == "OOM"]
    return f"{sum(r['ours'] == 'OOM' for r in cells)} of {len(cells)}"
