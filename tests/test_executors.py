"""Executors of the sweep driver: local worker processes and a Ray cluster (a local one
started when no address is given) give the same records as the inline driver; a killed
driver or worker loses at most the runs in flight and a rerun completes the sweep with
one record per key; a hung run is cancelled at its deadline, counted from its start (not
its submission); bad executor settings are one-line errors."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import LAYER, REPO, grid_config

from dnnplace.cli import main
from dnnplace.graphs.errors import InputError
from dnnplace.runner import run_config
from dnnplace.sweeps import Executor, Finished, LocalProcesses, RayCluster, Task, make_executor

HAS_RAY = importlib.util.find_spec("ray") is not None
# CI installs Ray (the dev extra) and sets DNNPLACE_REQUIRE_RAY=1: there a missing Ray fails the Ray tests
needs_ray = pytest.mark.skipif(not HAS_RAY and os.environ.get("DNNPLACE_REQUIRE_RAY") != "1",
                               reason="ray not installed (pip install 'dnnplace[ray]')")

# fields that say when and where a run ran (the checkout's revision too: a commit may land
# between two sweeps), or how long it took: the rest must agree
TIMING = {"timestamp", "executor", "host", "git_revision", "provenance", "wall_seconds", "solve_seconds",
          "build_seconds", "handoff_seconds"}
BASELINES = grid_config("tiny", ["single", "greedy", "expert"])
SLOW_SWEEP = f"""
name = "sweep"
out_dir = "out"
[grid]
graphs = "{LAYER}/gnmt_inference.json"
methods = "ip"
contiguity = "both"
seed = [0, 1, 2, 3]
[grid.solver]
time_limit = 0.5
threads = 1
"""
"""Four IP runs of about a second each (gnmt is not closed in 0.5 s): long enough to kill
something in the middle of the sweep."""


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def comparable(rec: dict) -> dict:
    """A record less where and how long it ran (trace points keep their values)."""
    out = {k: v for k, v in rec.items() if k not in TIMING}
    out["trace"] = [p[1:] for p in rec.get("trace") or ()]
    # the memory limit in force and the peak follow the process that ran it
    out["extra"] = {k: v for k, v in (rec.get("extra") or {}).items() if not k.endswith("seconds") and k != "memory"}
    return out


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(cond, timeout: float = 60.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(step)
    raise AssertionError("timed out waiting")


def dnnplace(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dnnplace", "-q", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, stdin=subprocess.DEVNULL)


# ---------------------------------------------------------------------------- bad input
def test_bad_executor_settings_are_one_line_errors(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(BASELINES)
    assert main(["run", str(cfg), "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "dnnplace: error: --jobs 0: must be a whole number of parallel runs >= 1\n"
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    assert main(["run", str(cfg), "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dnnplace: error: --executor ray needs Ray: pip install 'dnnplace[ray]'")
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # nothing ran
    with pytest.raises(InputError, match="needs --executor ray"):
        make_executor("local", 2, address="127.0.0.1:6379")


@needs_ray
def test_unreachable_ray_address_is_a_one_line_error(tmp_path, capsys):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(BASELINES)
    assert main(["run", str(cfg), "--executor", "ray", "--ray-address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dnnplace: error: --ray-address 127.0.0.1:{port}: no Ray head reachable there")
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------- same records
def test_processes_give_the_inline_records(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(BASELINES)
    inline = run_config(cfg, progress=False, out_dir=tmp_path / "inline")
    procs = run_config(cfg, progress=False, out_dir=tmp_path / "procs", executor=make_executor("local", 2))
    assert len(inline) == len(procs) == 6
    assert [comparable(r) for r in inline] == [comparable(r) for r in procs]
    assert {r["executor"]["kind"] for r in inline} == {"inline"}
    assert {json.dumps(r["executor"]) for r in procs} == {'{"kind": "processes", "jobs": 2}'}
    assert {r["host"] for r in inline + procs} == {socket.gethostname()}


# ---------------------------------------------------------------------------- hangs
def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_a_hung_run_is_cancelled_at_its_deadline():
    ex = LocalProcesses(2)
    tasks = [Task("hangs", 60.0, deadline=1.0), Task("quick", 0.1, deadline=30.0), Task("no-limit", 0.2)]
    t0 = time.monotonic()
    got = {f.task.key: f for f in ex.run(_sleep, tasks)}
    assert time.monotonic() - t0 < 20
    assert got["hangs"].outcome == "hung" and "cancelled" in got["hangs"].message
    assert 1.0 <= got["hangs"].seconds < 10
    assert (got["quick"].outcome, got["quick"].value) == ("done", 0.1)
    assert (got["no-limit"].outcome, got["no-limit"].value) == ("done", 0.2)


class _Hangs(Executor):
    """Reports the first task as hung, runs the others inline."""

    kind = "stub"

    def run(self, fn, tasks):
        for i, t in enumerate(tasks):
            if i == 0:
                yield Finished(t, "hung", message="cancelled: still running 9 s after its start", seconds=9.0)
            else:
                yield Finished(t, "done", fn(t.payload), host="elsewhere")


def test_a_hung_run_is_recorded_as_cancelled(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(BASELINES)
    records = run_config(cfg, progress=False, executor=_Hangs())
    assert [r["status"] for r in records] == ["error"] + ["feasible"] * 5
    assert records[0]["termination"] == "cancelled" and records[0]["message"].startswith("cancelled")
    assert records[0]["executor"] == {"kind": "stub"} and records[1]["host"] == "elsewhere"
    again = run_config(cfg, progress=False, retry_errors=True)  # a retry replaces the cancelled record
    assert [r["status"] for r in again] == ["feasible"] * 6
    assert len(lines(tmp_path / "out" / "runs.jsonl")) == 6


# ---------------------------------------------------------------------------- kills
def _complete_after_rerun(tmp_path: Path, cfg: Path, before: list[str], extra: list[str]) -> list[dict]:
    """Rerun the sweep: the records written before stay as they were, every key once."""
    proc = dnnplace("run", str(cfg), *extra)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    text = (tmp_path / "out" / "runs.jsonl").read_text().splitlines()
    assert text[: len(before)] == before  # nothing rewritten
    recs = [json.loads(x) for x in text]
    assert len(recs) == 4 and len({r["run_key"] for r in recs}) == 4
    assert {r["run"]["seed"] for r in recs} == set(range(4))
    assert all(r["status"] != "error" for r in recs)
    return recs


def _kill_driver_mid_sweep(tmp_path: Path, extra: list[str], workers_of, rerun: list[str]) -> None:
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(SLOW_SWEEP)
    runs = tmp_path / "out" / "runs.jsonl"
    proc = dnnplace("run", str(cfg), *extra)
    try:
        wait_for(lambda: runs.exists() and len(lines(runs)) >= 1)
        workers = workers_of(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = runs.read_text().splitlines()
    assert 1 <= len(before) < 4
    for pid in workers:  # orphaned workers stop on their own
        wait_for(lambda pid=pid: not alive(pid), timeout=30)
    _complete_after_rerun(tmp_path, cfg, before, rerun)


def _local_workers(driver: int) -> list[int]:
    """Worker processes: children of the driver's fork server (the driver's child)."""
    return wait_for(lambda: [w for c in children(driver) for w in children(c)])


def test_killed_driver_loses_only_runs_in_flight_processes(tmp_path):
    _kill_driver_mid_sweep(tmp_path, ["--jobs", "2"], _local_workers, rerun=[])  # inline rerun: faster


def test_killed_worker_loses_only_its_run_processes(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(SLOW_SWEEP)
    proc = dnnplace("run", str(cfg), "--jobs", "2")
    try:
        victim = _local_workers(proc.pid)[0]
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert f"worker process {victim} died (killed by signal 9); not recorded" in err
    assert "1 run(s) not recorded (their worker died); the same command runs them" in err
    before = (tmp_path / "out" / "runs.jsonl").read_text().splitlines()
    assert len(before) == 3
    _complete_after_rerun(tmp_path, cfg, before, [])


# ---------------------------------------------------------------------------- Ray
TWO_IPS = f"""
name = "two-ips"
out_dir = "out"
[grid]
graphs = ["{LAYER}/bert24_inference.json", "{LAYER}/bert24_training.json"]
methods = ["single", "greedy", "expert", "ip"]
[grid.solver]
time_limit = 30.0
rel_gap = 0.0001
threads = 1
"""
"""Baselines and two IPs that HiGHS closes in a few seconds each."""


@needs_ray
def test_ray_without_address_starts_local_ray_and_gives_the_jobs1_records(tmp_path, capsys):
    """The one Ray test of the default run (Ray's start-up is slow): with no address and
    no cluster on this machine, ``--executor ray`` starts a local Ray instance and says
    so; a task waiting for a CPU is not cancelled, as its hang deadline counts from its
    start; a sweep of baselines and two IPs gives the ``--jobs 1`` records (same keys and
    statuses, objectives and bounds within solver tolerance, the rest equal)."""
    import ray
    from conftest import solver_approx
    from ray import cloudpickle

    assert not ray.is_initialized(), "run this test before any other that starts Ray"
    found_before = bool(os.environ.get("RAY_ADDRESS")) or Path("/tmp/ray/ray_current_cluster").exists()
    ex = make_executor("ray", None)
    try:
        err = capsys.readouterr().err
        if not found_before:  # nothing to join: a local instance, said on stderr
            assert ex.started_local
            assert "no Ray cluster found" in err and "started a local Ray instance" in err
            assert ex.describe()["address"] == "local (started by this sweep)"
        cpus = int(ex.jobs)
        # more slots than CPUs: two tasks wait behind the first wave; measured from their
        # submission they would pass their deadline, from their start they do not
        this = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(this)  # the workers cannot import this test module
        try:
            waves = RayCluster(ex.address, cpus + 2)
            waves._ray = ray
            tasks = [Task(f"t{i}", 2.5, deadline=4.5) for i in range(cpus + 2)]
            t0 = time.monotonic()
            got = list(waves.run(_sleep, tasks))
        finally:
            cloudpickle.unregister_pickle_by_value(this)
        assert time.monotonic() - t0 >= 5.0  # two waves did run one after the other
        assert sorted(f.outcome for f in got) == ["done"] * (cpus + 2), [f.message for f in got]

        cfg = tmp_path / "cfg.toml"
        cfg.write_text(TWO_IPS)
        inline = run_config(cfg, progress=False, out_dir=tmp_path / "inline")
        on_ray = run_config(cfg, progress=False, out_dir=tmp_path / "ray", executor=ex)
    finally:
        ray.shutdown()
    assert [r["run_key"] for r in inline] == [r["run_key"] for r in on_ray] and len(inline) == 8
    assert [r["status"] for r in on_ray] == [r["status"] for r in inline]
    assert [r["status"] for r in inline if r["method"] == "ip"] == ["optimal", "optimal"]
    for a, b in zip(inline, on_ray, strict=True):
        assert b["objective"] == solver_approx(a["objective"])
        if a["bound"] is not None:
            assert b["bound"] == solver_approx(a["bound"])
        skip = {"objective", "bound", "gap", "trace", "extra", "evaluation"} if a["method"] == "ip" else set()
        assert ({k: v for k, v in comparable(a).items() if k not in skip}
                == {k: v for k, v in comparable(b).items() if k not in skip})
    assert {r["executor"]["kind"] for r in on_ray} == {"ray"}


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs started (and stopped) by this test module; yields
    its address for ``--ray-address``."""
    if not HAS_RAY:
        pytest.skip("ray not installed (pip install 'dnnplace[ray]')")
    import ray

    try:
        info = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"a local Ray cluster does not start here: {exc}")
    try:
        yield info.address_info["gcs_address"]
    finally:
        ray.shutdown()


def _ray_workers(pid: int) -> list[int]:
    """Ray worker processes of this test's cluster running one of our runs (their
    process title names the task): descendants of this process, found by pid."""
    todo, found = [os.getpid()], []
    while todo:
        p = todo.pop()
        for c in children(p):
            todo.append(c)
            try:
                title = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::") and ("_ray_task" in title or "dnnplace-run" in title):
                found.append(c)
    return found


@pytest.mark.slow
@needs_ray
def test_ray_gives_the_inline_records(tmp_path, ray_cluster):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(BASELINES)
    inline = run_config(cfg, progress=False, out_dir=tmp_path / "inline")
    on_ray = run_config(cfg, progress=False, out_dir=tmp_path / "ray",
                        executor=make_executor("ray", None, address=ray_cluster))
    assert [comparable(r) for r in inline] == [comparable(r) for r in on_ray]
    assert {r["executor"]["kind"] for r in on_ray} == {"ray"}


@pytest.mark.slow
@needs_ray
def test_a_hung_run_is_cancelled_on_ray(ray_cluster):
    from ray import cloudpickle

    this = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(this)  # the workers cannot import this test module
    try:
        tasks = [Task("hangs", 60.0, deadline=2.0), Task("quick", 0.1, deadline=30.0)]
        t0 = time.monotonic()
        got = {f.task.key: f for f in make_executor("ray", 2, address=ray_cluster).run(_sleep, tasks)}
    finally:
        cloudpickle.unregister_pickle_by_value(this)
    assert time.monotonic() - t0 < 30
    assert got["hangs"].outcome == "hung" and got["hangs"].message.startswith("cancelled")
    assert (got["quick"].outcome, got["quick"].value) == ("done", 0.1)


@pytest.mark.slow
@needs_ray
def test_killed_driver_loses_only_runs_in_flight_ray(tmp_path, ray_cluster):
    extra = ["--executor", "ray", "--ray-address", ray_cluster]
    _kill_driver_mid_sweep(tmp_path, extra,
                           lambda _pid: wait_for(lambda: _ray_workers(_pid)), rerun=extra)


@pytest.mark.slow
@needs_ray
def test_killed_worker_loses_only_its_run_ray(tmp_path, ray_cluster):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(SLOW_SWEEP)
    extra = ["--executor", "ray", "--ray-address", ray_cluster]
    proc = dnnplace("run", str(cfg), *extra)
    try:
        victim = wait_for(lambda: _ray_workers(proc.pid))[0]
        os.kill(victim, signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Ray worker died" in err and "1 run(s) not recorded" in err
    before = (tmp_path / "out" / "runs.jsonl").read_text().splitlines()
    assert len(before) == 3
    _complete_after_rerun(tmp_path, cfg, before, extra)


# what a run that stopped at its time limit found depends on how fast it ran
AT_LIMIT = {"objective", "bound", "gap", "trace", "placement", "start", "link_priorities", "evaluation", "nodes",
            "extra", "message", "lower_bound"}


@pytest.mark.slow
@needs_ray
def test_quickstart_records_agree_inline_processes_and_ray(tmp_path, ray_cluster):
    """The quickstart sweep (12 runs) with --jobs 1, --jobs 2 and on Ray: the same
    records up to timings; runs that stopped at their time limit agree on everything
    but what they had found by then."""
    cfg = REPO / "experiments" / "quickstart.toml"
    got = {}
    for name, ex in (("inline", make_executor("local", 1)), ("processes", make_executor("local", 2)),
                     ("ray", make_executor("ray", None, address=ray_cluster))):
        got[name] = run_config(cfg, progress=False, out_dir=tmp_path / name, executor=ex)
    assert [len(v) for v in got.values()] == [12, 12, 12]
    limited = 0
    for a, b, c in zip(got["inline"], got["processes"], got["ray"], strict=True):
        if "time_limit" in (a.get("termination"), b.get("termination"), c.get("termination")):
            limited += 1
            assert a["status"] == b["status"] == c["status"] == "feasible"
            a, b, c = ({k: v for k, v in r.items() if k not in AT_LIMIT} for r in (a, b, c))
        assert comparable(a) == comparable(b) == comparable(c)
    assert limited <= 3  # the IP runs; the baselines are deterministic
