"""Executed costs and the per-model fit (pytorch/execution/executed_costs.py): synthetic runs
made by the simulator from known figures; the one-device plan is simulated at its measured
step, the spread plans at theirs, and a slowdown of the operators in spread runs becomes a
per-message top-up that restores their sum."""

from __future__ import annotations

import numpy as np
import pytest
from test_calibration import TRUE, synthetic_run, true_cluster

from dnnplace.graphs import InputError
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.pytorch.execution.calibration import simulate_run
from dnnplace.pytorch.execution.executed_costs import executed_graph, fit_model, one_device_run


def _runs(slowdown: float = 1.0, seed: int = 0):
    g = random_layered_dag(40, seed=seed, kinds=("cpu",), compute_ms=1.0, output_bytes=2e5)
    measured = 1.3 * g.compute[:, 0] + 0.02        # the executor's times, not the profile's
    rng = np.random.default_rng(seed)
    one, _ = synthetic_run(g, true_cluster(), np.zeros(g.n, dtype=int), measured)
    spread = [synthetic_run(g, true_cluster(), rng.integers(0, 2, g.n), slowdown * measured)[0] for _ in range(3)]
    return g, measured, one, spread


def test_executed_costs_replay_the_one_device_step_and_predict_spread_plans_exactly():
    checked = 0
    for seed in range(3):
        g, measured, one, spread = _runs(seed=seed)
        ge, cluster, figures = fit_model(g, true_cluster(), [one, *spread[:2]], congestion=False)
        assert ge.compute[:, 0] == pytest.approx(measured)
        assert figures["op_overhead_ms"] == pytest.approx(TRUE["gap"])
        assert figures["send_top_up_ms"] == pytest.approx(0.0, abs=1e-9) and figures["spread_runs"] == 2
        assert simulate_run(ge, cluster, one, congestion=False).makespan == pytest.approx(one.step_ms)
        held_out = spread[2]            # not fitted on
        assert simulate_run(ge, cluster, held_out, congestion=False).makespan == pytest.approx(held_out.step_ms)
        assert cluster.meta["executed_costs"]["one_device_ms"] == one.step_ms
        checked += 1
    assert checked == 3


def test_slower_operators_in_spread_runs_become_a_per_message_top_up():
    g, _, one, spread = _runs(slowdown=1.2, seed=5)
    ge, cluster, figures = fit_model(g, true_cluster(), [one, *spread], congestion=False)
    assert figures["send_top_up_ms"] > 0.01
    simulated = sum(simulate_run(ge, cluster, r, congestion=False).makespan for r in spread)
    assert simulated == pytest.approx(sum(r.step_ms for r in spread), rel=1e-6)
    assert simulate_run(ge, cluster, one, congestion=False).makespan == pytest.approx(one.step_ms)


def test_without_a_one_device_run_the_error_says_what_to_run():
    g, _, _, spread = _runs()
    with pytest.raises(InputError, match="one-device plan"):
        one_device_run(g, spread)
    partial = spread[0]
    partial.op_ms.pop(str(g.ids[0]))
    with pytest.raises(InputError, match=f"no measured time for node '{g.ids[0]}'"):
        executed_graph(g, partial)


def test_calibrate_writes_the_graph_with_executed_costs_and_its_cluster(tmp_path, capsys):
    import json

    from dnnplace.cli import main
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import load_instance, read_cluster, save_instance
    g, measured, one, spread = _runs(slowdown=1.1, seed=2)
    save_instance(Instance(g, None, "synthetic"), tmp_path / "g.json")
    paths = []
    for k, run in enumerate([one, *spread]):
        doc = {"ops": run.ops, "messages": run.messages, "op_median_ms": run.op_ms, "measured_step_ms": run.step_ms,
               "plan": {"placement": run.placement, "start": run.start}, "graph": str(tmp_path / "g.json")}
        paths.append(tmp_path / f"run{k}.json")
        paths[-1].write_text(json.dumps(doc))
    args = ["calibrate", *map(str, paths), "--cluster", "local-cpu-2", "--out", str(tmp_path / "c.json"),
            "--costs-out", str(tmp_path / "g2.json")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "executed costs: 40 operators" in text and "per-message top-up" in text and "| executed ms |" in text
    g2 = load_instance(tmp_path / "g2.json").graph
    assert g2.compute[:, 0] == pytest.approx(measured)
    cluster = read_cluster(str(tmp_path / "c.json"), g2)
    assert simulate_run(g2, cluster, one, congestion=cluster.default_congestion).makespan == pytest.approx(one.step_ms)
    # without the one-device run: one line, exit 2, neither file written
    assert main([*args[:1], *map(str, paths[1:]), *args[5:-2], "--out", str(tmp_path / "c3.json"),
                 "--costs-out", str(tmp_path / "g3.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one-device plan" in err[0]
    assert not (tmp_path / "c3.json").exists() and not (tmp_path / "g3.json").exists()
