"""Whole-process time of `dnnplace solve G --method dp` (start-up included), cold and warm numba cache.

Issue 26: the command took 1.65 s of CPU as a whole process on the ResNet-50 layer graph,
where the authors' C++ took 0.15 s. Every figure here is one whole process, timed from
outside: CPU = user + system seconds of the child (``os.wait4``), wall = its start to its
exit. Each row is the median of ``--runs`` processes.

- cold: ``NUMBA_CACHE_DIR`` is a new empty folder for every run, so the DP kernels are
  compiled in the process (a first run after installing, or after the kernel's source
  changed);
- warm: ``NUMBA_CACHE_DIR`` holds the kernels one unmeasured run compiled, so the process
  loads them from disk (every later run).

Beside them: the floor of the interpreter with the libraries the command needs
(``import numpy``; ``import numba``; numba's first call of a cached kernel) and the C++
figures (the authors' DP on this machine class, ``benchmarks/bench_dp.py``; the issue's
0.15 s). The C++ binary itself is not run here.

    .venv/bin/python -m benchmarks startup               # 5 runs each, writes results/startup.md
    .venv/bin/python -m benchmarks startup --runs 3 --only resnet50
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.bench_dp import CPP_HERE
from benchmarks.common import REPO, add_shared, machine_load, md_header, md_row, selected, utc_now

WL = REPO / "graphs" / "workloads" / "tarnawski" / "throughput-inputs"
# name -> (graph file, (granularity, mode, model) key of the C++ figures, CPU s before issue 26)
GRAPHS = {
    "layer inference resnet50": (WL / "LayerGraphs" / "resnet50_inference.json",
                                 ("layer", "inference", "resnet50"), 1.65),
    "op inference resnet50": (WL / "OperatorGraphs" / "resnet50_inference.json",
                              ("op", "inference", "resnet50"), None),
    "op inference bert_l-12": (WL / "OperatorGraphs" / "bert_l-12_inference.json",
                               ("op", "inference", "bert_l-12"), None),
}
CPP_ISSUE = {("layer", "inference", "resnet50"): 0.15}  # the issue's figure (its measurement is not in results/)

_CACHED_CALL = ("import numpy as np; from dnnplace.heuristics.dp_kernel import ideal_sizes; "
                "ideal_sizes(np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), 1)")
FLOOR = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import numpy": [sys.executable, "-c", "import numpy"],
    "import numpy, numba": [sys.executable, "-c", "import numpy, numba"],
    "import numpy, numba + first call of a cached kernel": [sys.executable, "-c", _CACHED_CALL],
}


NOTES = """Reading: a warm row less the floor's last row is what the command itself costs (reading
the graph, the DP, the independent evaluation, the output); the floor's last row less
`import numpy, numba` is numba's set-up on the first call of a kernel loaded from its cache
(its typing and lowering registries, and `scipy.linalg` for its BLAS check), paid by every
process whatever the graph. The authors' C++ is not run here (no binary in this checkout)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="processes per row, median reported (default: 5)")
    parser.add_argument("--no-cold", dest="cold", action="store_false",
                        help="skip the cold rows (each compiles the kernels: 5-20 s a run)")
    add_shared(parser, out=REPO / "results" / "startup.md", only=None,
               help={"only": "substrings of the graph names to run"})


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU s, wall s) of one whole process (its waited-for children included)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


def _median(cmd: list[str], runs: int, cache: str | None) -> tuple[float, float]:
    """Median CPU and wall s over ``runs`` processes; ``cache``: the NUMBA_CACHE_DIR (one
    unmeasured run first fills it), or ``None`` for a new empty one per run (cold)."""
    if cache is not None:
        _time(cmd, {**os.environ, "NUMBA_CACHE_DIR": cache})
    cpu, wall = [], []
    for _ in range(runs):
        folder = cache or tempfile.mkdtemp(prefix="numba-cold-")
        try:
            c, w = _time(cmd, {**os.environ, "NUMBA_CACHE_DIR": folder})
        finally:
            if cache is None:
                shutil.rmtree(folder, ignore_errors=True)
        cpu.append(c)
        wall.append(w)
    return statistics.median(cpu), statistics.median(wall)


def run(args) -> None:
    dnnplace = [sys.executable, "-m", "dnnplace"]
    warm = tempfile.mkdtemp(prefix="numba-warm-")
    lines = ["# Start-up of `dnnplace solve G --method dp` (issue 26)", "",
             f"{utc_now()}, {machine_load()} at the start; median of {args.runs} whole processes per row "
             f"(CPU = user + system s of the process; wall: start to exit).", "",
             f"    {getattr(args, 'command_line', 'python -m benchmarks startup')}", ""]
    try:
        cols = ["graph", "cache", "CPU s", "wall s", "CPU s before (issue 26)", "C++ s", "C++ from"]
        table = [md_header(cols, ["---", "---", "--:", "--:", "--:", "--:", "---"])]
        print(f"{'graph':28} {'cache':5} {'CPU s':>7} {'wall s':>7} {'before':>7} {'C++ s':>6}  C++ from", flush=True)
        for name, (graph, key, before) in GRAPHS.items():
            if not selected(name, args.only):
                continue
            cmd = dnnplace + ["solve", str(graph), "--method", "dp"]
            cpp, src = ((CPP_HERE[key], "this machine class (bench_dp.py)") if key in CPP_HERE
                        else (CPP_ISSUE[key], "issue 26") if key in CPP_ISSUE else (None, "-"))
            for label, cache in (("cold", None), ("warm", warm)):
                if label == "cold" and not args.cold:
                    continue
                cpu, wall = _median(cmd, args.runs, cache)
                b = f"{before:.2f}" if before is not None and label == "warm" else "-"
                c = f"{cpp:.2f}" if cpp is not None else "-"
                table.append(md_row([name, label, f"{cpu:.2f}", f"{wall:.2f}", b, c, src]))
                print(f"{name:28} {label:5} {cpu:>7.2f} {wall:>7.2f} {b:>7} {c:>6}  {src}", flush=True)
        floor = [md_header(["process", "CPU s", "wall s"], ["---", "--:", "--:"])]
        print("\nfloor (warm numba cache):")
        for name, cmd in FLOOR.items():
            cpu, wall = _median(cmd, args.runs, warm)
            floor.append(md_row([f"`{name}`", f"{cpu:.2f}", f"{wall:.2f}"]))
            print(f"  {name:52} {cpu:>6.2f} {wall:>6.2f}", flush=True)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    lines += table + ["", "The floor: the interpreter with the libraries the command needs (warm cache):", ""]
    lines += floor + ["", NOTES, "", f"_{machine_load()} at the end._", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"\nwrote {args.out}")
