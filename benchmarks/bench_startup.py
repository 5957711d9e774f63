"""Whole-process time of `dnnplace solve G --method dp`, start-up included, AOT and JIT.

Cold and warm cache, on the AOT path (the default) and the JIT path (``DNNPLACE_AOT=0``)
in the same run.

Before 2026-11-27 the command took 1.65 s of CPU as a whole process on the ResNet-50 layer
graph, where the authors' C++ took 0.15 s; the goal is <= 0.5 s (results/startup.md). Every
figure here is one whole process, timed from outside: CPU = user + system seconds of the
child and its waited-for children (``os.wait4``: the AOT build's compiler included), wall =
its start to its exit. Each cell is the median of ``--runs`` processes.

- cold: ``NUMBA_CACHE_DIR`` is a new empty folder for every run: the AOT path builds the
  extension of the DP's kernels (heuristics/aot.py), the JIT path compiles them (a first run
  after installing, or after the kernels' source changed);
- warm: ``NUMBA_CACHE_DIR`` holds what one unmeasured run of the same path left there, so the
  process loads the extension (AOT) or numba's cache (JIT).

Every child runs without ``PYTHONDONTWRITEBYTECODE``, as in a user's environment (this
machine's environment sets it: with no .pyc files in the checkout every process compiled
the project's sources again, as in the earlier tables of results/startup.md).

Beside them: the floor of the interpreter with the libraries the command needs
(``import numpy``; ``import numba``; the first call of a kernel on each path) and the C++
figures (the authors' DP on this machine class, ``benchmarks/bench_dp.py``; the
0.15 s quoted with the task). The C++ binary itself is not run here.

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
from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared, selected
from benchmarks.paths import REPO
from benchmarks.rows import md_header, md_row

WL = REPO / "graphs" / "workloads" / "tarnawski" / "throughput-inputs"
# name -> (graph file, (granularity, mode, model) key of the C++ figures, CPU s before 2026-11-27)
GRAPHS = {
    "layer inference resnet50": (WL / "LayerGraphs" / "resnet50_inference.json",
                                 ("layer", "inference", "resnet50"), 1.65),
    "op inference resnet50": (WL / "OperatorGraphs" / "resnet50_inference.json",
                              ("op", "inference", "resnet50"), None),
    "op inference bert_l-12": (WL / "OperatorGraphs" / "bert_l-12_inference.json",
                               ("op", "inference", "bert_l-12"), None),
}
CPP_QUOTED = {("layer", "inference", "resnet50"): 0.15}  # quoted with the task (its measurement is not in results/)

_CACHED_CALL = ("import numpy as np; from dnnplace.heuristics.dp_kernel import ideal_sizes; "
                "ideal_sizes(np.zeros(2, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), 1)")
AOT, JIT = {"DNNPLACE_AOT": "1"}, {"DNNPLACE_AOT": "0"}
FLOOR = {  # name -> (command, environment)
    "python -c pass": ([sys.executable, "-c", "pass"], AOT),
    "import numpy": ([sys.executable, "-c", "import numpy"], AOT),
    "import numpy, numba": ([sys.executable, "-c", "import numpy, numba"], AOT),
    "first call of a kernel, JIT path (numba's cache)": ([sys.executable, "-c", _CACHED_CALL], JIT),
    "first call of a kernel, AOT path (the extension)": ([sys.executable, "-c", _CACHED_CALL], AOT),
}


NOTES = """Reading: the JIT path's first call of a cached kernel less `import numpy, numba` is numba's
set-up (its typing and lowering registries, and `scipy.linalg` for its BLAS check), paid by
every JIT-path process whatever the graph; the AOT path loads the kernels from an extension
module built once per machine (heuristics/aot.py) and imports neither numba nor scipy. A
warm row less the AOT floor row is what the command itself costs (reading the graph, the
DP, the independent evaluation, the output). A cold AOT row is the one-off build (numba
compiling the kernels and a C compiler building the module, in a child process). The
authors' C++ is not run here (no binary in this checkout)."""


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


def _median(cmd: list[str], runs: int, cache: str | None, path: dict[str, str]) -> tuple[float, float]:
    """Median CPU and wall s over ``runs`` processes; ``cache``: the NUMBA_CACHE_DIR (one
    unmeasured run first fills it), or ``None`` for a new empty one per run (cold); ``path``:
    the environment that picks the AOT or the JIT path."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if cache is not None:
        _time(cmd, {**base, **path, "NUMBA_CACHE_DIR": cache})
    cpu, wall = [], []
    for _ in range(runs):
        folder = cache or tempfile.mkdtemp(prefix="numba-cold-")
        try:
            c, w = _time(cmd, {**base, **path, "NUMBA_CACHE_DIR": folder})
        finally:
            if cache is None:
                shutil.rmtree(folder, ignore_errors=True)
        cpu.append(c)
        wall.append(w)
    return statistics.median(cpu), statistics.median(wall)


def run(args) -> None:
    dnnplace = [sys.executable, "-m", "dnnplace"]
    warm = {"AOT": tempfile.mkdtemp(prefix="numba-warm-aot-"), "JIT": tempfile.mkdtemp(prefix="numba-warm-jit-")}
    lines = ["# Start-up of `dnnplace solve G --method dp`", "",
             f"{utc_now()}, {machine_load()} at the start; median of {args.runs} whole processes per cell "
             f"(CPU = user + system s of the process and its waited-for children; wall: start to exit).", "",
             f"    {getattr(args, 'command_line', 'python -m benchmarks startup')}", ""]
    try:
        cols = ["graph", "cache", "AOT CPU s", "AOT wall s", "JIT CPU s", "JIT wall s", "CPU s before (2026-11-27)",
                "C++ s", "C++ from"]
        table = [md_header(cols, ["---", "---", "--:", "--:", "--:", "--:", "--:", "--:", "---"])]
        print(f"{'graph':28} {'cache':5} {'AOT CPU':>8} {'wall':>6} {'JIT CPU':>8} {'wall':>6} {'before':>7} "
              f"{'C++ s':>6}  C++ from", flush=True)
        for name, (graph, key, before) in GRAPHS.items():
            if not selected(name, args.only):
                continue
            cmd = dnnplace + ["solve", str(graph), "--method", "dp"]
            cpp, src = ((CPP_HERE[key], "this machine class (bench_dp.py)") if key in CPP_HERE
                        else (CPP_QUOTED[key], "quoted with the task (2026-11-27)") if key in CPP_QUOTED
                        else (None, "-"))
            for label in ("cold", "warm"):
                if label == "cold" and not args.cold:
                    continue
                cells = []
                for path, env in (("AOT", AOT), ("JIT", JIT)):
                    cpu, wall = _median(cmd, args.runs, None if label == "cold" else warm[path], env)
                    cells += [f"{cpu:.2f}", f"{wall:.2f}"]
                b = f"{before:.2f}" if before is not None and label == "warm" else "-"
                c = f"{cpp:.2f}" if cpp is not None else "-"
                table.append(md_row([name, label, *cells, b, c, src]))
                print(f"{name:28} {label:5} {cells[0]:>8} {cells[1]:>6} {cells[2]:>8} {cells[3]:>6} {b:>7} {c:>6}  "
                      f"{src}", flush=True)
        floor = [md_header(["process", "CPU s", "wall s"], ["---", "--:", "--:"])]
        print("\nfloor (warm cache):")
        for name, (cmd, env) in FLOOR.items():
            cpu, wall = _median(cmd, args.runs, warm["AOT" if env is AOT else "JIT"], env)
            floor.append(md_row([f"`{name}`", f"{cpu:.2f}", f"{wall:.2f}"]))
            print(f"  {name:52} {cpu:>6.2f} {wall:>6.2f}", flush=True)
    finally:
        for folder in warm.values():
            shutil.rmtree(folder, ignore_errors=True)
    lines += table + ["", "The floor: the interpreter with the libraries the command needs (warm cache):", ""]
    lines += floor + ["", NOTES, "", f"_{machine_load()} at the end._", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"\nwrote {args.out}")
