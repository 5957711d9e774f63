"""The command-line contract under faults (docs/bad-input.md), end to end in subprocesses.

- Ctrl-C: SIGINT to a real ``dnnplace run`` sweep while HiGHS is solving an IP stops the
  sweep with exit 130; the interrupted run is not recorded (never as an error) and the
  same command resumes to one record per run key. ``dnnplace solve`` exits 130 without
  writing its JSON; Gurobi's own SIGINT handling does not turn an interrupt into a result.
- Resume repairs visibly: a half-written last line is cut off with one warning naming
  the file and the bytes; ``--retry-errors`` leaves one line per key; ``--fresh`` keeps
  every backup under a timestamped name, the tables with it.
- Bad input: exit 2, exactly one ``dnnplace: error: ...`` line on stderr naming the
  culprit, nothing on stdout, no output file (solver flags, solver options checked
  against the backend's option list, ``--out`` naming a folder, a model over Gurobi's
  size-limited licence, experiment configs checked before their first run).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import LAYER, grid_config
from instances import gurobi_is_size_limited

from dnnplace.data import tarnawski_dir

HAS_GUROBI = importlib.util.find_spec("gurobipy") is not None
GRAPHS = tarnawski_dir() / "throughput-inputs" / "LayerGraphs"
BERT = GRAPHS / "bert24_inference.json"
GNMT = GRAPHS / "gnmt_inference.json"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _default_sigint() -> None:  # a child of a shell that ignores SIGINT would ignore it too
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def dnnplace(*argv, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dnnplace", *map(str, argv)], cwd=cwd, env=ENV,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """Bad input: exit 2, nothing on stdout, one ``dnnplace: error:`` line on stderr."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout == "", proc.stdout
    err = proc.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("dnnplace: error: "), proc.stderr
    assert "rerun with --verbose" not in err[0] and not err[0].rstrip().endswith(":"), err[0]
    return err[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- Ctrl-C
SWEEP = f"""
name = "intr"
out_dir = "out"
[[runs]]
graphs = ["{LAYER}/gnmt_inference.json", "{LAYER}/bert24_inference.json"]
methods = "greedy"
[[runs]]
graphs = "{LAYER}/gnmt_inference.json"
methods = "ip"
[runs.solver]
time_limit = 15.0  # still running 0.5 s after the MIP starts, on a busy machine too (counts from the process start)
threads = 1
solver_options = {{log_file = "highs.log"}}  # written as HiGHS goes: tells the test when it is solving
"""


def _start_and_interrupt(argv: list, cwd: Path) -> subprocess.CompletedProcess:
    """Start ``dnnplace ARGV``, wait until HiGHS is in its MIP solve (its log file
    ``highs.log``), then send SIGINT; return the finished process."""
    log = cwd / "highs.log"
    with open(cwd / "stdout.txt", "w") as out, open(cwd / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dnnplace", "--verbose", *map(str, argv)], cwd=cwd,
                                env=ENV, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=_default_sigint)
        try:
            deadline = time.monotonic() + 90
            while not log.exists() or "Solving MIP model" not in log.read_text():
                assert proc.poll() is None, f"exited before the IP ran: {(cwd / 'stderr.txt').read_text()}"
                assert time.monotonic() < deadline, "HiGHS never started"
                time.sleep(0.05)
            time.sleep(0.5)  # inside branch and bound, seconds before the time limit
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, (cwd / "stdout.txt").read_text(),
                                       (cwd / "stderr.txt").read_text())


def test_ctrl_c_stops_a_sweep_inside_highs_and_the_rerun_resumes(tmp_path):
    cfg = write(tmp_path / "intr.toml", SWEEP)
    proc = _start_and_interrupt(["run", cfg], tmp_path)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-3000:])
    assert "driver.py" in proc.stderr  # the interrupt came through the solve, not around it
    assert proc.stderr.rstrip().endswith("dnnplace: interrupted (finished runs are saved; the same command "
                                         "resumes)"), proc.stderr[-500:]
    runs = tmp_path / "out" / "runs.jsonl"
    first = lines(runs)
    assert [r["method"] for r in first] == ["greedy", "greedy"]  # the finished runs, not the interrupted IP
    assert all(r["status"] != "error" for r in first)
    rerun = dnnplace("run", cfg, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "2 of 3 runs already in" in rerun.stderr
    got = lines(runs)
    assert len(got) == 3 and len({r["run_key"] for r in got}) == 3
    assert [r["status"] for r in got][:2] == ["feasible", "feasible"]
    assert got[2]["method"] == "ip" and got[2]["status"] in ("optimal", "feasible"), got[2]["status"]


def test_ctrl_c_stops_solve_without_writing_its_json(tmp_path):
    out = tmp_path / "r.json"
    # a limit long enough that the MIP is still running when the signal comes, on a busy machine
    # too (the limit counts from the process start: imports and the warm start come out of it)
    proc = _start_and_interrupt(["solve", GNMT, "--method", "ip", "--time-limit", 60, "--threads", 1,
                                 "--solver-option", "log_file=highs.log", "--out", out], tmp_path)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-3000:])
    assert proc.stderr.rstrip().endswith("dnnplace: interrupted")
    assert not out.exists() and proc.stdout == ""  # no result printed, no JSON written


GUROBI_SCRIPT = """
import random, sys
import pyomo.environ as pyo
from dnnplace.formulations.solvers.driver import solve_model
from dnnplace.formulations.solvers.options import SolverOptions
# a market-split instance (Cornuejols & Dawande): 40 binaries, 5 equalities, hard for
# branch and bound and small enough for Gurobi's size-limited licence
rng = random.Random(1)
a = [[rng.randrange(100) for _ in range(40)] for _ in range(5)]
m = pyo.ConcreteModel()
m.x = pyo.Var(range(40), within=pyo.Binary)
m.s = pyo.Var(range(5), range(2), bounds=(0, None))
m.c = pyo.Constraint(range(5), rule=lambda m, i: sum(a[i][j] * m.x[j] for j in range(40)) + m.s[i, 0]
                     - m.s[i, 1] == sum(a[i]) // 2)
m.obj = pyo.Objective(expr=sum(m.s[i, k] for i in range(5) for k in range(2)))
print("solving", flush=True)
try:
    out = solve_model(m, SolverOptions("gurobi", time_limit=60, threads=1))
except KeyboardInterrupt:
    sys.exit(130)
print("returned", out.status, out.termination, flush=True)
sys.exit(1)
"""


@pytest.mark.gurobi
@pytest.mark.skipif(not HAS_GUROBI, reason="gurobipy not installed")
def test_ctrl_c_inside_gurobi_is_an_interrupt_not_a_result(tmp_path):
    """Gurobi catches SIGINT itself and returns 'interrupted' with its incumbent: the
    driver raises KeyboardInterrupt instead of reporting a feasible result."""
    log = tmp_path / "log.txt"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", GUROBI_SCRIPT], cwd=tmp_path, env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_default_sigint)
        try:
            deadline = time.monotonic() + 60
            while "solving" not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            time.sleep(1.5)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, log.read_text()[-2000:]


# ---------------------------------------------------------------------------- resume, retry, fresh
FAST = grid_config("fast", ["greedy", "single"])


def test_resume_repairs_visibly_keeps_one_line_per_key_and_every_backup(tmp_path):
    cfg = write(tmp_path / "fast.toml", FAST)
    runs = tmp_path / "out" / "runs.jsonl"
    assert dnnplace("run", cfg, cwd=tmp_path).returncode == 0
    recs = lines(runs)
    # a crash in the middle of a write left half a line; an earlier run failed
    broken = dict(recs[1], status="error", message="RuntimeError: solver exploded", objective=None)
    half = '{"run_key": "half a li'
    runs.write_text("".join(json.dumps(r) + "\n" for r in [recs[0], broken, *recs[2:]]) + half)
    proc = dnnplace("run", cfg, cwd=tmp_path)
    assert proc.returncode == 1  # the error record is still there: a sweep with a failed run
    warnings = [x for x in proc.stderr.splitlines() if x.startswith("dnnplace: warning:")]
    assert len(warnings) == 1, proc.stderr
    assert "runs.jsonl" in warnings[0] and "half-written last line" in warnings[0]
    assert f"{len(half)} bytes" in warnings[0] and "line 5" in warnings[0]
    assert len(lines(runs)) == 4
    # --retry-errors: the new record replaces the error line, the tables show it
    proc = dnnplace("run", cfg, "--retry-errors", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = lines(runs)
    assert len(got) == 4 and len({r["run_key"] for r in got}) == 4
    assert [r["status"] for r in got] == ["feasible"] * 4
    with (tmp_path / "out" / "table.csv").open() as fh:
        assert [row["status"] for row in csv.DictReader(fh)] == ["feasible"] * 4
    # --fresh keeps every backup under a timestamped name (none overwritten), the tables with it
    out = tmp_path / "out"
    first = runs.read_text()
    for _ in range(2):
        proc = dnnplace("run", cfg, "--fresh", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "previous results are kept" in proc.stderr
    baks = sorted(out.glob("runs.jsonl.*.bak"))
    assert len(baks) == 2 and first in [b.read_text() for b in baks]  # the first backup was not overwritten
    assert len(list(out.glob("table.md.*.bak"))) == 2 and len(list(out.glob("table.csv.*.bak"))) == 2


# ---------------------------------------------------------------------------- bad input
CONFIG = f"""
name = "bad"
out_dir = "bad-out"
[grid]
graphs = "{LAYER}/bert24_inference.json"
methods = "greedy"
"""

# id -> (argv; {file name: text} to write first; words the one error line must contain)
SOLVE = ["solve", BERT, "--method", "greedy", "--out", "r.json"]
BAD = {
    "unknown solver": (SOLVE + ["--solver", "cplex"], {}, ["--solver cplex", "not available here", "highs"]),
    "negative time limit": (SOLVE + ["--time-limit", "-5"], {}, ["--time-limit -5", "positive number of seconds"]),
    "zero time limit": (SOLVE + ["--time-limit", "0"], {}, ["--time-limit 0", "leave it out for no limit"]),
    "negative gap": (SOLVE + ["--mip-gap", "-0.1"], {}, ["--mip-gap -0.1", ">= 0"]),
    "zero threads": (SOLVE + ["--threads", "0"], {}, ["--threads 0", ">= 1"]),
    "unknown highs option": (SOLVE + ["--solver-option", "foo_bar=3"], {},
                             ["--solver-option foo_bar=3", "not a HiGHS option"]),
    "highs option typo": (SOLVE + ["--solver-option", "mip_rel_gaap=0.1"], {},
                          ["mip_rel_gaap", "did you mean 'mip_rel_gap'"]),
    "out is a folder": (["solve", BERT, "--method", "greedy", "--out", "adir"], {"adir/keep.txt": ""},
                        ["--out adir", "is a folder"]),
    "config negative time limit": (["run", "c.toml"], {"c.toml": CONFIG + "[grid.solver]\ntime_limit = -5\n"},
                                   ["c.toml", "[grid.solver]", "time_limit = -5"]),
    "config word time limit": (["run", "c.toml"], {"c.toml": CONFIG + '[grid.solver]\ntime_limit = "fast"\n'},
                               ["c.toml", "[grid.solver]", 'time_limit = "fast"']),
    "config unknown solver": (["run", "c.toml"], {"c.toml": CONFIG + '[grid.solver]\nsolver = "cplex"\n'},
                              ["c.toml", '[grid.solver] solver = "cplex"', "not available"]),
    "config negative gap": (["run", "c.toml"], {"c.toml": CONFIG + "[grid.solver]\nrel_gap = -0.1\n"},
                            ["c.toml", "rel_gap = -0.1"]),
    "config unknown solver option": (["run", "c.toml"],
                                     {"c.toml": CONFIG + "[grid.solver]\nsolver_options = {foo_bar = 3}\n"},
                                     ["c.toml", "solver_options.foo_bar = 3", "not a HiGHS option"]),
    "config unknown param": (["run", "c.toml"], {"c.toml": CONFIG + '[grid.params]\nordr = "level"\n'},
                             ["c.toml", "'ordr'", "'order'"]),
}
if HAS_GUROBI:
    BAD["unknown gurobi parameter"] = (SOLVE + ["--solver", "gurobi", "--solver-option", "MipGapp=0.1"], {},
                                       ["--solver-option MipGapp=0.1", "not a Gurobi parameter", "'MIPGap'"])


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory) -> dict:
    """Every bad-input command, each in its own folder, run concurrently (they are
    independent; this keeps the file fast)."""
    def one(item):
        name, (argv, files, _) = item
        cwd = tmp_path_factory.mktemp(name.replace(" ", "-"))
        for rel, text in files.items():
            (cwd / rel).parent.mkdir(parents=True, exist_ok=True)
            (cwd / rel).write_text(text)
        before = sorted(p.relative_to(cwd) for p in cwd.rglob("*"))
        proc = dnnplace(*argv, cwd=cwd)
        after = sorted(p.relative_to(cwd) for p in cwd.rglob("*"))
        return name, (proc, before, after)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, BAD.items()))


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_exits_2_with_one_line_and_no_file(name, bad_input_runs):
    proc, before, after = bad_input_runs[name]
    line = one_error_line(proc)
    for word in BAD[name][2]:
        assert word in line, (word, line)
    assert after == before, f"files written: {sorted(set(after) - set(before))}"  # no result, no output folder
    assert ".tmp" not in line


@pytest.mark.gurobi
@pytest.mark.skipif(not gurobi_is_size_limited(2500), reason="needs Gurobi's size-limited licence")
def test_model_over_the_gurobi_licence_is_bad_input(tmp_path):
    proc = dnnplace("solve", GNMT, "--method", "ip", "--solver", "gurobi", "--out", "r.json", cwd=tmp_path)
    line = one_error_line(proc)
    size = re.search(r"--solver gurobi: model has (\d+) variables / (\d+) constraints, over the restricted", line)
    assert size and max(int(size[1]), int(size[2])) > 2000, line
    assert "at most 2000 variables and 2000 constraints" in line and "--solver highs" in line
    assert not (tmp_path / "r.json").exists()


def test_old_flag_spellings_work_with_one_deprecation_line(tmp_path):
    """``--mip-gap`` (the old name of ``--rel-gap``) still sets the gap, and says once, on
    stderr, that it is deprecated; ``--rel-gap`` says nothing. ``--coarsen-to N`` (the old
    spelling of ``--param coarsen_to=N``) gets the same note. Bad input with an old name
    keeps its one error line (``BAD["negative gap"]``)."""
    from dnnplace.cli import build_parser
    from dnnplace.solve_command import deprecation_notes

    old = dnnplace(*SOLVE, "--mip-gap", "0.01", cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    notes = [x for x in old.stderr.splitlines() if "deprecated" in x]
    assert notes == ["dnnplace: warning: --mip-gap is deprecated: use --rel-gap (the same setting)"], old.stderr
    assert json.loads((tmp_path / "r.json").read_text())["options"]["solver"]["rel_gap"] == 0.01
    new = build_parser().parse_args(["solve", "g.json", "--method", "x", "--rel-gap", "0.01"])
    assert deprecation_notes(new) == []
    both = build_parser().parse_args(["solve", "g.json", "--method", "x", "--mip-gap", "0.01", "--coarsen-to", "9"])
    assert deprecation_notes(both) == ["--mip-gap is deprecated: use --rel-gap (the same setting)",
                                       "--coarsen-to is deprecated: use --param coarsen_to=N (the same setting)"]
