"""Nothing lost (docs/bad-input.md): no output overwrites an input or fails after the work, every
engine stops on Ctrl-C without a result, two sweeps on one file never run a key twice.

- Output paths (:mod:`dnnplace.outpaths`): an ``--out``/``--gantt`` that is an input
  (also through a symlink or a hard link) or another output, an unwritable file or
  folder: exit 2, one line naming the clash, before any work (the loaders are replaced
  by tripwires), the input unchanged.
- Ctrl-C: ``dnnplace solve`` in a subprocess on an instance that runs > 20 s, SIGINT a
  second after the engine started (a marker written by a wrapper around the engine's
  entry point): exit 130 within 5 s, the traceback (``--verbose``) passes through the
  engine, no ``--out`` file. CP-SAT (which used to catch the signal itself and return
  its incumbent as a result) and a sweep stopped inside CP-SAT run by default; HiGHS,
  SCIP and the DP are marked slow.
- Two ``dnnplace run`` processes on one config at once: every key once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dnnplace.cli import main
from dnnplace.data import tarnawski_dir

LAYERS = tarnawski_dir() / "throughput-inputs" / "LayerGraphs"
BERT = LAYERS / "bert24_inference.json"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error(capsys) -> str:
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("dnnplace: error: "), (out, err)
    return lines[0]


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A folder with a graph ``g.json`` and a placement ``p.json`` of it; loading any
    graph afterwards trips a wire (the checks must come before any work)."""
    import dnnplace.graphs.io as gio

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.json").write_bytes(BERT.read_bytes())
    assert main(["-q", "solve", "g.json", "--method", "greedy", "--out", "p.json"]) == 0

    def tripwire(*a, **k):
        raise AssertionError("work started before the output check")

    monkeypatch.setattr(gio, "load_instance", tripwire)
    monkeypatch.setattr(gio, "prepare_instance", tripwire)
    return tmp_path


CLASHES = {
    "solve --out the graph": (["solve", "g.json", "--method", "greedy", "--out", "g.json"],
                              "--out g.json: is the input graph g.json"),
    "solve --out the graph by another path": (["solve", "g.json", "--method", "ip", "--out", "sub/../g.json"],
                                              "--out sub/../g.json: is the input graph g.json"),
    "solve --out the graph through a symlink": (["solve", "link.json", "--method", "greedy", "--out", "g.json"],
                                                "--out g.json: is the input graph link.json"),
    "solve --out the graph's hard link": (["solve", "hard.json", "--method", "greedy", "--out", "g.json"],
                                          "--out g.json: is the input graph hard.json"),
    "solve --out the warm start": (["solve", "g.json", "--method", "ip", "--warm-start", "p.json", "--out", "p.json"],
                                   "--out p.json: is the input --warm-start p.json"),
    "evaluate --out the placement": (["evaluate", "g.json", "p.json", "--out", "p.json"],
                                     "--out p.json: is the input placement p.json"),
    "simulate --gantt the graph": (["simulate", "g.json", "p.json", "--cluster", "single-host-2-nvlink",
                                    "--gantt", "g.json"], "--gantt g.json: is the input graph g.json"),
    "simulate --out the placement": (["simulate", "g.json", "p.json", "--cluster", "single-host-2-nvlink",
                                      "--out", "p.json"], "--out p.json: is the input placement p.json"),
    "simulate --out and --gantt one file": (["simulate", "g.json", "p.json", "--cluster", "single-host-2-nvlink",
                                             "--out", "x.png", "--gantt", "x.png"],
                                            "--gantt x.png: the same file as --out x.png"),
    "run --out the config": (["run", "c.toml", "--out", "c.toml"], "--out c.toml: is the input config c.toml"),
    "compare --out a file": (["compare", "g.json", "--out", "p.json"], "--out p.json: is a file, not a folder"),
    "generate --out under a file": (["generate", "random-dag", "--nodes", "5", "--out", "g.json/x.json"],
                                    "g.json is not a folder"),
}


@pytest.mark.parametrize("name", list(CLASHES))
def test_an_output_that_is_an_input_is_refused_before_any_work(work, capsys, name):
    argv, message = CLASHES[name]
    os.symlink("g.json", work / "link.json")
    os.link(work / "g.json", work / "hard.json")
    (work / "sub").mkdir()
    (work / "c.toml").write_text(f'name = "c"\n[grid]\ngraphs = "{BERT}"\nmethods = "greedy"\n')
    before = {p.name: digest(p) for p in work.iterdir() if p.is_file()}
    assert main(argv) == 2
    line = one_error(capsys)
    assert message in line, line
    assert {p.name: digest(p) for p in work.iterdir() if p.is_file()} == before  # nothing written or changed


def test_unwritable_outputs_are_refused_before_any_work(work, capsys, monkeypatch):
    """A read-only existing file, a read-only folder (the check asks ``os.access``, which
    root always passes: denied here for the two paths)."""
    import dnnplace.outpaths as op

    (work / "ro.json").write_text("{}")
    (work / "rodir").mkdir()
    denied = {str(work / "ro.json"), str(work / "rodir")}
    real = os.access
    monkeypatch.setattr(op.os, "access", lambda p, mode: str(p) not in denied and real(p, mode))
    checked = 0
    for argv, message in [
        (["solve", "g.json", "--method", "greedy", "--out", "ro.json"], "--out ro.json: the file exists and is not "
                                                                        "writable"),
        (["solve", "g.json", "--method", "greedy", "--out", "rodir/r.json"], f"folder {work / 'rodir'} is not "
                                                                             "writable"),
        (["solve", "g.json", "--method", "greedy", "--out", "rodir/new/r.json"], f"folder {work / 'rodir'} is not "
                                                                                 "writable"),
        (["simulate", "g.json", "p.json", "--gantt", "rodir/g.png"], f"folder {work / 'rodir'} is not writable"),
        (["run", "c.toml", "--out", "rodir/sweep"], f"folder {work / 'rodir'} is not writable"),
    ]:
        (work / "c.toml").write_text(f'name = "c"\n[grid]\ngraphs = "{BERT}"\nmethods = "greedy"\n')
        assert main(argv) == 2, argv
        assert message in one_error(capsys)
        checked += 1
    assert checked == 5 and (work / "ro.json").read_text() == "{}"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_really_read_only_folder_is_refused(work, capsys):
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["solve", "g.json", "--method", "greedy", "--out", "ro/r.json"]) == 2
        assert "is not writable" in one_error(capsys)
    finally:
        ro.chmod(0o755)


# ---------------------------------------------------------------------------- Ctrl-C on every engine
CHILD = r"""
import importlib, sys
from pathlib import Path
target, marker = sys.argv[1:3]
module, _, attr = target.partition(":")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for p in path:
    owner = getattr(owner, p)
orig = getattr(owner, name)
def wrapped(*a, **k):
    Path(marker).touch()
    return orig(*a, **k)
setattr(owner, name, wrapped)
from dnnplace.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _default_sigint() -> None:  # a child of a shell that ignores SIGINT would ignore it too
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_in_engine(tmp_path: Path, target: str, argv: list, *, after: float = 1.0):
    """Run ``dnnplace ARGV`` with ``target`` (``module:attr``, the engine's entry point)
    wrapped to touch a marker; SIGINT ``after`` seconds after the marker appears.
    Returns (exit code, seconds from SIGINT to exit, stdout, stderr)."""
    marker = tmp_path / "engine-started"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with open(tmp_path / "stdout.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, str(script), target, str(marker), "--verbose", *map(str, argv)],
                                cwd=tmp_path, env=ENV, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=_default_sigint)
        try:
            deadline = time.monotonic() + 120
            while not marker.exists():
                assert proc.poll() is None, f"ended before the engine ran: {(tmp_path / 'stderr.txt').read_text()}"
                assert time.monotonic() < deadline, "the engine never started"
                time.sleep(0.05)
            time.sleep(after)
            assert proc.poll() is None, "the engine finished before the interrupt: pick a longer instance"
            proc.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            try:
                proc.wait(timeout=30)
            finally:
                seconds = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, seconds, (tmp_path / "stdout.txt").read_text(), (tmp_path / "stderr.txt").read_text()


@pytest.fixture(scope="module")
def random200(tmp_path_factory) -> Path:
    """A 200-node random DAG on 4 GPUs: Pesto's CP-SAT model runs to a 60 s limit on it."""
    from dnnplace.graphs.generators import generate
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import save_instance
    from dnnplace.graphs.presets import cluster_preset

    g = generate("random-dag", n=200, seed=1)
    path = tmp_path_factory.mktemp("r200") / "r200.json"
    save_instance(Instance(g, cluster_preset("single-host-4-nvlink", g), "r200"), path)
    return path


HAS_CPSAT = importlib.util.find_spec("ortools") is not None
HAS_SCIP = importlib.util.find_spec("pyscipopt") is not None
GNMT_IP = ["solve", LAYERS / "gnmt_inference.json", "--method", "ip", "--time-limit", 60, "--threads", 1]
ENGINES = {
    # name: (wrapped entry point, argv after the graph is known, frame the traceback must show)
    "cpsat": ("ortools.sat.python.cp_model:CpSolver.Solve",
              ["--problem", "makespan", "--method", "pesto", "--param", "engine=cpsat", "--time-limit", 60],
              "pesto_cpsat.py"),
    "highs": ("dnnplace.formulations.solvers.driver:solve_highs", GNMT_IP[2:], "solve_highs"),
    "scip": ("dnnplace.formulations.solvers.driver:solve_scip", GNMT_IP[2:] + ["--solver", "scip"], "solve_scip"),
    "dp": ("dnnplace.heuristics.dp_runs:run_dp_pruned", ["--method", "dp"], "maxload_dp.py"),
    # pesto's own stages between solves: the model build (a Ctrl-C there could land in a gc finalizer)
    "pesto-build": ("dnnplace.formulations.multilevel.exact:build_pesto_model",
                    ["--problem", "makespan", "--method", "pesto", "--time-limit", 60], "build_pesto_model"),
}
GRAPHS = {"highs": LAYERS / "gnmt_inference.json", "scip": LAYERS / "gnmt_inference.json",
          "dp": LAYERS / "inceptionv3_training.json"}  # the DP runs ~7 s on InceptionV3 training (inference: < 1 s)


@pytest.mark.parametrize("engine", [
    pytest.param("cpsat", marks=pytest.mark.skipif(not HAS_CPSAT, reason="OR-Tools not installed")),
    pytest.param("highs", marks=pytest.mark.slow),
    pytest.param("scip", marks=[pytest.mark.slow, pytest.mark.skipif(not HAS_SCIP, reason="PySCIPOpt missing")]),
    pytest.param("dp", marks=pytest.mark.slow),
    pytest.param("pesto-build", marks=pytest.mark.slow),
])
def test_ctrl_c_stops_every_engine_with_130_and_no_result(tmp_path, random200, engine):
    target, argv, frame = ENGINES[engine]
    graph = GRAPHS.get(engine, random200)
    out = tmp_path / "r.json"
    rc, seconds, stdout, stderr = interrupt_in_engine(tmp_path, target, ["solve", graph, *argv, "--out", out])
    assert rc == 130, (rc, stderr[-3000:])
    assert seconds < 5.0, f"took {seconds:.1f} s to stop"
    assert frame in stderr, stderr[-3000:]  # the interrupt came through the engine
    assert stderr.rstrip().endswith("dnnplace: interrupted")
    assert not out.exists() and "objective" not in stdout  # no result printed or written


@pytest.mark.skipif(not HAS_CPSAT, reason="OR-Tools not installed")
def test_ctrl_c_inside_cpsat_stops_a_sweep_and_records_nothing_of_it(tmp_path, random200):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"""
name = "intr"
out_dir = "out"
[[runs]]
graphs = "{BERT}"
methods = "greedy"
[[runs]]
graphs = "{random200}"
problems = "makespan"
methods = "pesto"
params = {{engine = "cpsat"}}
solver = {{time_limit = 60}}
[[runs]]
graphs = "{BERT}"
methods = "single"
""")
    rc, seconds, _, stderr = interrupt_in_engine(tmp_path, ENGINES["cpsat"][0], ["run", cfg])
    assert rc == 130 and seconds < 5.0, (rc, seconds, stderr[-3000:])
    assert "pesto_cpsat.py" in stderr and "finished runs are saved" in stderr
    recs = [json.loads(x) for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert [r["method"] for r in recs] == ["greedy"]  # pesto not recorded, the sweep stopped before 'single'


# ---------------------------------------------------------------------------- two sweeps at once
def test_two_sweeps_on_one_file_never_run_a_key_twice(tmp_path):
    """Two ``dnnplace run`` of one config started together: the second waits for the
    first (it says so) and runs nothing again; both print the whole table."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"""
name = "twice"
out_dir = "out"
[grid]
graphs = ["{BERT}", "{LAYERS / 'gnmt_inference.json'}"]
methods = ["single", "greedy", "ip"]
[grid.solver]
time_limit = 3.0
threads = 1
""")
    cmd = [sys.executable, "-m", "dnnplace", "run", str(cfg)]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    keys = [json.loads(x)["run_key"] for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert len(keys) == 6 and len(set(keys)) == 6, keys
    assert all("6 runs (0 errors)" in o for o, _ in outs)
    waited = [e for _, e in outs if "waiting for the sweep that is writing" in e]
    ran_again = [e for _, e in outs if "6 of 6 runs already in" in e]
    assert len(waited) == 1 and len(ran_again) == 1, [e[-1000:] for _, e in outs]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["runs.jsonl", "table.csv", "table.md"]  # no lock
