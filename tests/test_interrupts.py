"""Ctrl-C and deadlines delivered from outside the running code (docs/bad-input.md, "Interrupts
(Ctrl-C)").

- A signal's handler, and a deadline guard's exception, run at the main thread's next
  Python instruction, which may belong to a finalizer or a gc callback (a Pesto model's
  build spends seconds collecting garbage): Python drops the exception there ("Exception
  ignored in ...", under pytest a ``PytestUnraisableExceptionWarning``). A dropped Ctrl-C
  is raised again right after; a guard never raises inside a collection and a drop
  outside one is delivered again, never reported.
- A process started with SIGINT ignored (a script's background job) still stops on
  ``kill -INT``; after a Ctrl-C the process ends at once (exit 130) without freeing the
  interrupted model.
- Slow: SIGINT at random moments of a real Pesto run (``captured/nasnet-4x44``,
  ``coarsen_to=150``, 120 s): exit 130 within 5 s, no ``--out`` file, every time.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest

from dnnplace.formulations.solvers.interrupts import stop_on_ctrl_c
from dnnplace.runtime.deadline import Deadline, TimeLimitReached


class _SlowDel:
    """An object whose finalizer takes 2 ms, held in a reference cycle (freed by the gc)."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.002:
            pass


def _spin_callback(_ref) -> None:  # a weakref callback run when its object's last reference goes
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002:
        pass


def _gc_callback(phase: str, info: dict) -> None:  # a library's gc callback (hypothesis times collections so)
    t = time.perf_counter()
    while time.perf_counter() - t < 0.001:
        pass


class _Plain:
    pass


def _finalizer_heavy_loop(seconds: float) -> None:
    """Work that spends half its time in finalizers, gc callbacks and weakref callbacks: each
    round's plain work lasts as long as its collection did (a collection's length depends on
    the heap: under pytest it is several times longer than in a bare interpreter)."""
    end = time.monotonic() + seconds
    automatic = gc.isenabled()
    gc.disable()  # only the collections below (automatic ones would add more, unevenly)
    try:
        while time.monotonic() < end:
            t0 = time.perf_counter()
            for _ in range(2):
                _SlowDel()
            gc.collect()
            o = _Plain()
            r = weakref.ref(o, _spin_callback)
            del o, r
            spent, t1, x = time.perf_counter() - t0, time.perf_counter(), 0
            while time.perf_counter() - t1 < spent:  # plain work, as long as the finalizers above
                for i in range(1000):
                    x += i
    finally:
        if automatic:
            gc.enable()


@pytest.fixture
def unraisable(monkeypatch):
    """Every exception Python reports as unraisable during the test (and the gc callback)."""
    seen: list = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    gc.callbacks.insert(0, _gc_callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(_gc_callback)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_dropped_in_a_finalizer_is_raised_again(unraisable):
    trials, stopped, took = 6, 0, []
    for k in range(trials):
        timer = threading.Timer(0.05 + 0.03 * k, os.kill, (os.getpid(), signal.SIGINT))
        t0 = time.monotonic()
        try:
            with stop_on_ctrl_c():
                timer.start()
                _finalizer_heavy_loop(4.0)  # without the redelivery: runs its 4 s, the Ctrl-C dropped
        except KeyboardInterrupt:
            stopped += 1
        finally:
            timer.join()
        took.append(time.monotonic() - t0)
    assert stopped == trials and max(took) < 5.0, took  # mostly 0.1-0.6 s; the contract: within 5 s
    assert unraisable == []


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_guard_never_raises_inside_a_finalizer_or_gc_callback(unraisable):
    trials, stopped, took = 5, 0, []
    for k in range(trials):
        t0 = time.monotonic()
        with pytest.raises(TimeLimitReached, match="during finalizers"):
            with Deadline(0.05 + 0.02 * k).guard("finalizers"):
                _finalizer_heavy_loop(4.0)
        stopped += 1
        took.append(time.monotonic() - t0)
    assert stopped == trials and max(took) < 10.0, took  # 0.5-3 s at load 9 on 2 cores: half the time finalizing
    assert unraisable == []  # before: TimeLimitReached reported from __del__, weakref and gc callbacks


def test_ctrl_c_handling_overrides_an_inherited_ignore_and_restores_it():
    prev = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_on_ctrl_c():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, prev)


EXIT_SCRIPT = r"""
import atexit, sys
from dnnplace.formulations.solvers.interrupts import exit_process
class Big:
    def __del__(self):
        print("torn down", flush=True)
kept = Big()
atexit.register(lambda: print("atexit ran", flush=True))
print("exiting", flush=True)
exit_process(int(sys.argv[1]))
"""


def test_after_a_ctrl_c_the_process_ends_without_the_teardown(tmp_path):
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    got = {code: subprocess.run([sys.executable, str(script), str(code)], capture_output=True, text=True, timeout=60)
           for code in (130, 0)}
    assert got[130].returncode == 130 and got[130].stdout.split() == ["exiting", "atexit", "ran"], got[130]
    assert got[0].returncode == 0 and "torn down" in got[0].stdout  # a normal exit tears down as before


# ---------------------------------------------------------------------------- a real Pesto run, slow
def _sigint(ignored: bool):
    def pre() -> None:  # a script's background job starts with SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.SIG_DFL)
    return pre


@pytest.mark.slow
def test_ctrl_c_at_random_moments_of_a_pesto_run_exits_130_at_once(tmp_path):
    """SIGINT 3-30 s into ``dnnplace solve captured/nasnet-4x44 --method pesto --param
    coarsen_to=150 --time-limit 120`` (coarsening, list schedules, model build, hand-off,
    solve, depending on the moment and the machine's load): exit 130 within 5 s and no
    result, also for a process started with SIGINT ignored. Before: 3 of 11 trials took
    6.0-8.1 s (freeing the model on the way out), and a process started with SIGINT ignored
    ran to its limit and saved its answer (exit 0, 111 s after the SIGINT); after: 0.1-1.1 s."""
    rng = random.Random(7)
    trials, ok, report = 4, 0, []
    for k in range(trials):
        out = tmp_path / f"p{k}.json"
        with open(tmp_path / f"err{k}.txt", "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "dnnplace", "solve", "captured/nasnet-4x44", "--cluster",
                                     "single-host-4-nvlink", "--method", "pesto", "--param", "coarsen_to=150",
                                     "--time-limit", "120", "--out", str(out)], cwd=Path(__file__).parents[1],
                                    stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                    preexec_fn=_sigint(ignored=k % 2 == 1))
            try:
                time.sleep(rng.uniform(3.0, 30.0))
                assert proc.poll() is None, (tmp_path / f"err{k}.txt").read_text()[-2000:]
                proc.send_signal(signal.SIGINT)
                t0 = time.monotonic()
                proc.wait(timeout=60)
                seconds = time.monotonic() - t0
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        report.append((k, proc.returncode, round(seconds, 2), out.exists()))
        ok += proc.returncode == 130 and seconds < 5.0 and not out.exists()
    assert ok == trials, report
