"""Rounds of interleaved steps (dnnplace/measured_rounds.py) with the executor replaced by a
scripted one: the rounds stop at the precision or the cap, and every figure pools all rounds."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest

from dnnplace import measured_rounds


def scripted(rounds_of_steps: list[list[list[float]]], calls: list):
    """An ``execute`` that answers round ``k`` with ``rounds_of_steps[k]`` (per plan, its steps)
    and operator ``a`` timed at a tenth of each step."""
    def execute(spec, plans, names, *, steps, **kw):
        per_plan = rounds_of_steps[len(calls)]
        calls.append(steps)
        assert kw["interleave"] is True and len(per_plan) == len(plans)
        return [SimpleNamespace(step_ms=list(xs[:steps]), matches_reference=True,
                                op_durations_ms={"a": [x / 10 for x in xs[:steps]]}) for xs in per_plan]
    return execute


def test_rounds_stop_at_the_cap_and_pool_every_step(monkeypatch):
    # never within +-3 %, and the host drifts: every round slower than the one before
    wide = [[[d + x for x in (10.0, 20.0, 30.0, 15.0, 25.0, 12.0)], [d + x for x in (5.0, 9.0, 7.0, 6.0, 8.0, 5.5)]]
            for d in (0.0, 40.0, 80.0)]
    calls: list = []
    monkeypatch.setattr("dnnplace.pytorch.execution.launch.execute", scripted(wide, calls))
    out = measured_rounds.measure_rounds(None, ["p", "q"], ["cpu0"], ["p", "q"], steps=6, max_steps=15, warmup=1,
                                         timeout_s=1.0)
    assert calls == [6, 6, 3] and out.rounds == 3   # the last round only fills the cap
    assert [len(s) for s in out.samples] == [15, 15]
    pooled = wide[0][0] + wide[1][0] + wide[2][0][:3]
    assert out.samples[0] == pooled
    assert out.op_median_ms[0]["a"] == pytest.approx(statistics.median(x / 10 for x in pooled))
    assert out.op_median_ms[0]["a"] != pytest.approx(statistics.median(x / 10 for x in wide[2][0][:3]))


def test_rounds_stop_when_every_median_is_known(monkeypatch):
    tight = [[10.0 + 0.01 * k for k in range(8)], [20.0 + 0.02 * k for k in range(8)]]
    calls: list = []
    monkeypatch.setattr("dnnplace.pytorch.execution.launch.execute", scripted([tight] * 3, calls))
    out = measured_rounds.measure_rounds(None, ["p", "q"], ["cpu0"], ["p", "q"], steps=8, max_steps=40, warmup=1,
                                         timeout_s=1.0)
    assert out.rounds == 1 and calls == [8]
    assert all(measured_rounds.converged(s) for s in out.samples)
