"""Time limits as a whole process (issue 24): the mechanism, not the timings (those are in
``python -m benchmarks time-limits`` and results/time-limits/). A deadline passes from the
request down to every stage; a stage past it stops, and the method returns the incumbent
it already has (Pesto: its list schedule; the max-load IP: DPL's split) as ``feasible``
with termination ``time_limit``; the solver's hand-off stops at it; ``--threads`` is
capped at the machine's cores with a warning."""

from __future__ import annotations

import time

import numpy as np
import pyomo.environ as pyo
import pytest
from conftest import tarnawski_root
from instances import pesto_tiny_instance

from dnnplace.cli import main
from dnnplace.formulations.multilevel.exact import too_big
from dnnplace.formulations.multilevel.pesto import PipelineOptions, pesto
from dnnplace.formulations.solvers.driver import solve_model
from dnnplace.graphs.deadline import Deadline, TimeLimitReached, capped
from dnnplace.graphs.io import prepare_instance
from dnnplace.heuristics.list_scheduling import best_list_schedule
from dnnplace.registry import SolveRequest, SolverOptions, machine_cores, solve, with_limits

BERT = tarnawski_root() / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"


def test_a_guard_stops_python_code_at_the_deadline_and_nothing_after_it():
    t0 = time.monotonic()
    with pytest.raises(TimeLimitReached, match="during a busy loop"):
        with Deadline(0.3).guard("a busy loop"):
            while True:
                pass
    assert 0.25 < time.monotonic() - t0 < 5
    with Deadline(0.2).guard("a quick block"):  # ends in time: no exception then, nor later
        x = sum(range(100))
    time.sleep(0.4)
    assert x == 4950
    with pytest.raises(TimeLimitReached):  # already past: the block is not entered
        with Deadline(0.0).guard("nothing"):
            raise AssertionError("entered")
    assert capped(30.0, Deadline(0.0)) == 0.05 and capped(None, None) is None


def test_a_guard_fires_again_when_its_exception_is_swallowed():
    """Python drops an exception raised inside a weakref callback or ``__del__`` ("Exception
    ignored ..."); the guard delivers it again while the block runs, so the block still stops
    (it ran on to its end before: a 10 s Pesto run took 59.9 s)."""
    t0 = time.monotonic()
    swallowed = 0

    def spin():  # the whole loop inside the call, so a delivery lands inside the try below
        while time.monotonic() - t0 < 10:
            sum(range(100))

    with pytest.raises(TimeLimitReached, match="during a loop"):
        with Deadline(0.2).guard("a loop"):
            for attempt in range(2):
                try:
                    spin()
                except TimeLimitReached:
                    if attempt:
                        raise
                    swallowed += 1  # dropped, as a weakref callback's exception is
    assert swallowed == 1 and time.monotonic() - t0 < 3


def _tiny_mip() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    m.c = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) <= 2)
    m.obj = pyo.Objective(expr=sum(m.x[i] for i in range(3)), sense=pyo.maximize)
    return m


def test_solve_model_past_its_deadline_solves_nothing():
    out = solve_model(_tiny_mip(), SolverOptions(time_limit=30), deadline=Deadline(0.0))
    assert (out.status, out.termination) == ("no_solution", "maxTimeLimit")
    assert "time limit reached" in out.message
    ok = solve_model(_tiny_mip(), SolverOptions(time_limit=30), deadline=Deadline(30.0))
    assert ok.status == "optimal" and ok.incumbent == pytest.approx(2)


@pytest.mark.parametrize("engine", ["mip", "cpsat"])
def test_pesto_past_its_deadline_returns_its_list_schedule(engine):
    if engine == "cpsat":
        pytest.importorskip("ortools")
    g, cl = pesto_tiny_instance(4)
    o = PipelineOptions(solver=SolverOptions(time_limit=30, threads=1), engine=engine)
    r = pesto(g, cl, o, deadline=Deadline(0.0))
    assert r.termination == "time_limit" and r.status in ("feasible", "optimal")
    assert r.placement is not None and r.source == "warm_start"
    assert "time limit" in r.message
    ls, _, _ = best_list_schedule(g, cl)
    assert r.makespan <= ls.makespan * (1 + 1e-9) + 1e-9 or r.makespan == pytest.approx(ls.makespan)
    # with time, the same call solves the model
    full = pesto(g, cl, o)
    assert full.termination != "time_limit" and full.size.get("vars", 1) > 0


def test_pesto_does_not_start_a_model_it_cannot_build_in_time():
    from dnnplace.graphs.generators import generate

    wide = generate("random-dag", n=3000, seed=0)
    why = too_big(wide, Deadline(1.0))
    assert why is not None and "device-order pairs" in why
    assert too_big(wide, Deadline(None)) is None
    g, _ = pesto_tiny_instance(4)
    assert too_big(g, Deadline(1.0)) is None


def test_the_ip_past_its_deadline_returns_a_feasible_split():
    inst = prepare_instance(BERT, None)
    req = SolveRequest(problem="maxload", solver=SolverOptions(time_limit=30), deadline=Deadline(0.0))
    res = solve(inst, "ip", req)
    assert (res.status, res.termination) == ("feasible", "time_limit"), res.message
    assert "time limit reached" in res.message and res.evaluation["feasible"]
    assert res.extra["incumbent_from"] in ("dpl", "greedy", "single")


def test_list_schedules_stop_starting_past_the_deadline():
    g, cl = pesto_tiny_instance(4)
    _, _, all_scores = best_list_schedule(g, cl)
    _, _, scores = best_list_schedule(g, cl, deadline=Deadline(0.0))
    assert len(scores) == 1 < len(all_scores)


def test_threads_are_capped_at_the_cores_with_a_warning(capsys):
    req = with_limits(SolveRequest(problem="makespan", solver=SolverOptions(threads=20000, time_limit=5)))
    assert req.solver.threads == machine_cores()
    assert req.deadline is not None and 0 < req.deadline.remaining() <= 5
    assert f"--threads 20000: this machine has {machine_cores()} cores" in capsys.readouterr().err
    inst = prepare_instance(BERT, None)
    res = solve(inst, "greedy", SolveRequest(problem="maxload", solver=SolverOptions(threads=20000)))
    assert res.extra["threads_asked"] == 20000 and res.options["solver"]["threads"] == machine_cores()
    assert "cores" in capsys.readouterr().err
    quiet = with_limits(SolveRequest(problem="makespan", solver=SolverOptions(threads=1)))
    assert quiet.solver.threads == 1 and quiet.deadline is None and capsys.readouterr().err == ""


def test_cli_solve_counts_the_limit_from_the_process_start(tmp_path, capsys):
    from dnnplace.solve_command import solve_deadline

    d = solve_deadline(10.0)  # this test process started long ago: much less than 10 s is left
    assert d.remaining() < 10.0 - 0.7
    out = tmp_path / "r.json"
    rc = main(["-q", "solve", str(BERT), "--method", "ip", "--time-limit", "1",
               "--threads", "20000", "--out", str(out)])
    assert rc == 0 and out.exists()
    err = capsys.readouterr().err
    assert "--threads 20000: this machine has" in err
    import json

    rec = json.loads(out.read_text())
    assert rec["termination"] == "time_limit" and rec["status"] == "feasible"  # the process is older than 1 s
    assert np.isfinite(rec["objective"])


def _knapsack() -> tuple[pyo.ConcreteModel, float]:
    """A 12-item 0/1 knapsack and its optimum (by enumeration)."""
    import itertools

    w = [23, 31, 29, 44, 53, 38, 63, 85, 89, 82, 17, 41]
    v = [92, 57, 49, 68, 60, 43, 67, 84, 87, 72, 21, 50]
    cap = 165
    best = max(sum(v[i] for i in range(12) if bits[i]) for bits in itertools.product((0, 1), repeat=12)
               if sum(w[i] for i in range(12) if bits[i]) <= cap)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(12), domain=pyo.Binary)
    m.cap = pyo.Constraint(expr=sum(w[i] * m.x[i] for i in range(12)) <= cap)
    m.obj = pyo.Objective(expr=sum(v[i] * m.x[i] for i in range(12)), sense=pyo.maximize)
    return m, float(best)


def test_highs_that_does_not_return_by_its_deadline_answers_with_its_last_incumbent(monkeypatch):
    """HiGHS checks its limits only between root cut rounds (one ran 119 s past a 60 s
    limit): a solve still running a grace after its deadline is answered with the last
    improving solution HiGHS reported, loaded into the model, and left behind."""
    from highspy import Highs

    from dnnplace.formulations.solvers import highs_backend
    from dnnplace.formulations.solvers.interrupts import wait_for_left_behind

    real = Highs.run

    def run_then_hang(self):  # a solver whose last stretch checks no limit
        out = real(self)
        time.sleep(3.0)
        return out

    monkeypatch.setattr(Highs, "run", run_then_hang)
    monkeypatch.setattr(highs_backend, "_grace", lambda deadline: 0.3)
    m, best = _knapsack()
    t0 = time.monotonic()
    out = solve_model(m, SolverOptions(time_limit=30), deadline=Deadline(1.0))
    took = time.monotonic() - t0
    assert (out.status, out.termination) == ("feasible", "maxTimeLimit")
    assert out.incumbent == pytest.approx(best, abs=1e-6) and pyo.value(m.obj) == pytest.approx(best, abs=1e-6)
    assert "did not stop" in out.message and out.bound is not None and out.bound >= best - 1e-6
    assert 1.0 <= took < 1.0 + 0.3 + 1.0
    monkeypatch.setattr(Highs, "run", real)
    m2, _ = _knapsack()  # the next HiGHS solve waits for the one left behind, then solves
    again = solve_model(m2, SolverOptions(time_limit=30))
    assert again.status == "optimal" and again.incumbent == pytest.approx(best, abs=1e-6)
    assert wait_for_left_behind() < 0.5


def test_highs_asked_to_stop_at_its_deadline_reports_a_time_limit(monkeypatch):
    """A solve that returns after being asked to stop at the deadline (HiGHS's
    ``kInterrupt``) is a time limit with its incumbent, never an interrupt."""
    from highspy import Highs

    real = Highs.run

    def slow_start(self):  # the deadline passes before HiGHS starts: it stops at its first check
        time.sleep(1.5)
        return real(self)

    monkeypatch.setattr(Highs, "run", slow_start)
    m, best = _knapsack()
    out = solve_model(m, SolverOptions(time_limit=30), deadline=Deadline(1.0))
    assert out.termination == "maxTimeLimit", out
    assert out.status in ("feasible", "no_solution")


_LEFT_RUNNING = r"""
import sys
import numpy as np
import pyomo.environ as pyo
from dnnplace.formulations.solvers import backends, highs_backend
from dnnplace.formulations.solvers.driver import solve_model
from dnnplace.formulations.solvers.interrupts import exit_process
from dnnplace.graphs.deadline import Deadline
from dnnplace.registry import SolverOptions

# a HiGHS that ignores its deadline: its own limit stays 60 s and it is never asked to stop
backends.capped = lambda limit, deadline: limit
real = highs_backend.run_stoppable
highs_backend.run_stoppable = lambda run, stop, **kw: real(run, lambda: None, **kw)
highs_backend._grace = lambda deadline: 0.1
rng = np.random.default_rng(0)
n, rows = 400, 60
a = rng.integers(1, 100, size=(rows, n))
v = rng.integers(1, 100, size=n)
m = pyo.ConcreteModel()
m.x = pyo.Var(range(n), domain=pyo.Binary)
m.c = pyo.Constraint(range(rows),
                     rule=lambda m, r: sum(int(a[r, i]) * m.x[i] for i in range(n)) <= int(a[r].sum() // 3))
m.obj = pyo.Objective(expr=sum(int(v[i]) * m.x[i] for i in range(n)), sense=pyo.maximize)
out = solve_model(m, SolverOptions(time_limit=60, threads=1), deadline=Deadline(1.0))
print(out.status, out.termination, "left behind" if "left behind" in (out.message or "") else "returned", flush=True)
exit_process(3)
"""


def test_a_process_ends_at_once_with_a_solver_thread_left_running(tmp_path):
    """A script ending through ``exit_process`` with a HiGHS thread still inside its
    search exits with its own status at once: the interpreter's shutdown around the
    native thread aborted the process (status 134, its output lost) before."""
    import subprocess
    import sys

    script = tmp_path / "left_running.py"
    script.write_text(_LEFT_RUNNING)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout.split() == ["feasible", "maxTimeLimit", "left", "behind"]
    assert took < 30, took  # the search alone would run 60 s
