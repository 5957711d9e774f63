"""``--memory-limit``: the whole run held within a memory limit (docs/guide.md, "Time and memory
limits"). The RSS watchdog (:mod:`dnnplace.runtime.memory`) with fake samplers, the stop it raises
read by every deadline and by the solver hand-off, and end to end: a tiny limit ends the DP and the
IP with an evaluator-checked answer and termination ``memory_limit``, an IP whose model would not
fit is refused before it is built, and HiGHS is stopped mid-solve when the resident memory passes
the limit."""

from __future__ import annotations

import json
import threading
import time

import pytest

from dnnplace.cli import main
from dnnplace.formulations.solvers.interrupts import run_stoppable
from dnnplace.graphs.io import load_instance
from dnnplace.registry import SolveRequest, SolverOptions, solve
from dnnplace.runtime import memory
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached
from dnnplace.runtime.memory import MemoryWatch, headroom, rss_bytes, stop_requested
from dnnplace.runtime.termination import Termination


@pytest.fixture(scope="module")
def dag300(tmp_path_factory):
    """A 300-node random DAG: its DP stops on ideals, its IP takes well over 10 s to prove."""
    path = tmp_path_factory.mktemp("graphs") / "dag300.json"
    assert main(["generate", "random-dag", "--nodes", "300", "--seed", "1", "--out", str(path)]) == 0
    return path


def _fake(values: list[int], seen: list[int]):
    """A sampler that returns ``values`` in turn (the last one from then on), recording each call."""
    def sample() -> int:
        v = values[min(len(seen), len(values) - 1)]
        seen.append(v)
        return v
    return sample


def test_watchdog_trips_past_the_limit_and_every_deadline_reads_reached():
    seen: list[int] = []
    with MemoryWatch(100, sampler=_fake([10, 20, 30, 200], seen), interval=0.01) as watch:
        for _ in range(500):
            if watch.tripped:
                break
            time.sleep(0.01)
        assert watch.tripped and stop_requested()
        assert Deadline(None).expired() and Deadline(100.0).remaining() == 0.0
        with pytest.raises(TimeLimitReached, match="memory limit reached during the build"):
            Deadline(100.0).check("the build")
    assert not stop_requested() and not Deadline(None).expired()
    assert len(seen) >= 4 and seen[:4] == [10, 20, 30, 200]
    assert watch.record() == {"limit": 100.0, "peak_rss": 200, "stopped": True} and watch.at == 200


def test_watchdog_under_the_limit_keeps_the_peak_and_gives_the_headroom():
    seen: list[int] = []
    with MemoryWatch(1000, sampler=_fake([400, 700, 300], seen), interval=0.01) as watch:
        while len(seen) < 5:
            time.sleep(0.01)
        assert headroom() == 700.0  # the limit less the latest sample (300)
        assert not stop_requested()
    assert not watch.tripped and watch.peak == 700 and len(seen) >= 5
    assert headroom() is None  # outside a watch
    assert rss_bytes() > 1_000_000  # this process, from psutil or /proc/self/statm


def test_watchdog_stops_a_guarded_stage_without_a_time_limit():
    """A stage that checks no deadline (a Pyomo build, the DP's kernels) runs in a guard: the watchdog
    stops it as a deadline would, also where the run has no time limit."""
    seen: list[int] = []
    loops = 0
    t0 = time.monotonic()
    with MemoryWatch(100, sampler=_fake([10, 20, 30, 200], seen), interval=0.01):
        with pytest.raises(TimeLimitReached, match="memory limit reached during the build"):
            with NO_DEADLINE.guard("the build"):
                while time.monotonic() - t0 < 20.0:
                    loops += 1
    assert time.monotonic() - t0 < 5.0 and loops > 0 and len(seen) >= 4


def test_solver_hand_off_stops_at_the_memory_stop():
    """run_stoppable (HiGHS, CP-SAT) asks the solver to stop once the watchdog tripped."""
    asked = threading.Event()
    t0 = time.monotonic()
    with MemoryWatch(100, sampler=lambda: 200, interval=0.01):
        assert run_stoppable(lambda: asked.wait(30.0), asked.set) is True
    assert time.monotonic() - t0 < 5.0


def _result(tmp_path, capsys, *argv) -> dict:
    out = tmp_path / "res.json"
    code = main(["solve", *map(str, argv), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    return json.loads(out.read_text())


@pytest.mark.parametrize("method", ["dp", "ip"])
def test_tiny_memory_limit_ends_with_an_answer_and_termination_memory_limit(dag300, tmp_path, capsys, method):
    res = _result(tmp_path, capsys, dag300, "--cluster", "single-host-4-nvlink", "--method", method,
                  "--memory-limit", "1MB")
    assert res["termination"] == "memory_limit", res["message"]
    assert res["evaluation"]["feasible"] and res["evaluation"]["objective"] == pytest.approx(res["objective"])
    assert res["options"]["solver"]["memory_limit"] == 1e6  # recorded beside the time limit
    assert res["extra"]["memory"]["stopped"] and res["extra"]["memory"]["limit"] == 1e6
    assert res["lower_bound"] is not None and res["lower_bound"] <= res["objective"]


def test_default_memory_limit_is_recorded(dag300, tmp_path, capsys):
    res = _result(tmp_path, capsys, dag300, "--cluster", "single-host-4-nvlink", "--method", "greedy")
    assert res["options"]["solver"]["memory_limit"] is None  # not given: the default share
    assert res["extra"]["memory"]["limit"] == pytest.approx(memory.default_limit(), rel=0.05)
    assert not res["extra"]["memory"]["stopped"]


def test_ip_over_the_memory_left_is_not_built(dag300):
    inst = load_instance(str(dag300), "single-host-4-nvlink")
    limit = rss_bytes() + 40e6  # the model (about 130 MB estimated) does not fit in what is left
    res = solve(inst, "ip", SolveRequest(problem="maxload", solver=SolverOptions(memory_limit=limit)))
    assert res.termination is Termination.MEMORY_LIMIT
    assert "the IP was not built" in res.message and "model_estimate" in res.extra
    assert res.build_seconds == 0.0 and res.answer_from.startswith("fallback: ")
    assert res.evaluation["feasible"] and res.objective == pytest.approx(res.evaluation["objective"])


def test_watchdog_stops_highs_mid_solve(dag300, monkeypatch):
    """The resident memory (faked) passes the limit 1.5 s into the run: HiGHS is asked to stop and the
    IP returns its incumbent with termination memory_limit, long before it would prove its optimum."""
    inst = load_instance(str(dag300), "single-host-4-nvlink")
    t0 = time.monotonic()
    monkeypatch.setattr(memory, "rss_bytes", lambda: 100e6 if time.monotonic() - t0 < 1.5 else 5e9)
    res = solve(inst, "ip", SolveRequest(problem="maxload", solver=SolverOptions(memory_limit=1e9)))
    wall = time.monotonic() - t0
    assert res.termination is Termination.MEMORY_LIMIT, res.message
    assert res.extra["memory"]["stopped"] and res.extra["memory"]["peak_rss"] == 5e9
    assert res.evaluation["feasible"] and res.status == "feasible"
    assert wall < 12.0, wall


def test_memory_limit_that_is_no_size_is_bad_input(dag300, tmp_path, capsys):
    out = tmp_path / "res.json"
    for bad in ("0MB", "lots", "-4GB"):
        code = main(["solve", str(dag300), "--method", "greedy", f"--memory-limit={bad}", "--out", str(out)])
        captured = capsys.readouterr()
        assert code == 2 and captured.out == "" and not out.exists()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"dnnplace: error: --memory-limit {bad}: "), lines
