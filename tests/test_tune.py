"""``dnnplace tune``: plans measured interleaved, the choice never slower than one device
(docs/execution.md, "Measured selection")."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from dnnplace.cli import main
from dnnplace.measured_rounds import converged, median_ci
from dnnplace.tune_command import ONE_DEVICE, choose

MODEL = f"{Path(__file__).with_name('exec_models.py')}:mlp"
NO_TORCH = pytest.mark.skipif(importlib.util.find_spec("torch") is None and not os.environ.get(
    "DNNPLACE_REQUIRE_TORCH"), reason="needs torch")
FLAGS = ["--input", "32x64", "--loss", "cross_entropy", "--cluster", "local-cpu-2"]


def _row(method: str, xs: list[float]) -> dict:
    med, lo, hi = median_ci(xs)
    return {"method": method, "measured_step_ms": med, "ci": [lo, hi], "matches_reference": True}


def test_choice_needs_an_interval_below_one_device():
    """A plan measured faster whose interval overlaps the one-device plan's is not chosen;
    separated, it is; a plan that does not equal the eager step never is."""
    rng = np.random.default_rng(0)
    one = _row(ONE_DEVICE, list(10 + rng.normal(0, 1.0, 20)))
    close = _row("heft", list(9.6 + rng.normal(0, 1.0, 20)))     # faster median, overlapping intervals
    assert close["measured_step_ms"] < one["measured_step_ms"] and close["ci"][1] >= one["ci"][0]
    assert choose([close], one) is one
    far = _row("dpos", list(7 + rng.normal(0, 0.2, 20)))
    assert far["ci"][1] < one["ci"][0]
    assert choose([close, far], one) is far
    assert choose([{**far, "matches_reference": False}, close], one) is one
    few = _row("pesto", [1.0, 1.1, 1.2])                         # under 6 steps: no interval, nothing separated
    assert few["ci"] == [-math.inf, math.inf] and choose([few], one) is one
    slower = _row("celeritas", list(20 + rng.normal(0, 0.1, 20)))
    assert choose([slower], one) is one


def test_median_interval_coverage_and_stopping():
    """The order-statistic interval holds the true median in about 95 % of samples (at least
    95 % by construction, above it where the binomial steps), on a skewed distribution; the
    stopping rule accepts a tight sample and refuses a wide one."""
    rng = np.random.default_rng(1)
    true = float(np.log(2))   # the median of an exponential(1)
    hits = trials = 0
    for _ in range(2000):
        _, lo, hi = median_ci(list(rng.exponential(1.0, 30)))
        hits += lo <= true <= hi
        trials += 1
    assert trials == 2000 and 0.94 <= hits / trials <= 0.99, hits / trials
    assert converged([10.0 + 0.01 * k for k in range(12)])
    assert not converged([10.0 + 0.5 * k for k in range(12)])
    assert not converged([10.0] * 5)   # too few steps for an interval


@NO_TORCH
def test_tune_measures_and_chooses(tmp_path, capfd):
    """The tiny MLP on local-cpu-2 with two methods: the JSON has its keys, every candidate
    was measured and matches the eager step, the choice is never measured slower than the
    one-device plan, and the top-level placement and start are the chosen plan's (a result
    for `dnnplace execute`)."""
    out, table, png = (tmp_path / f for f in ("tuned.json", "t.md", "t.png"))
    # two rounds of 3 steps: 3 steps give no interval, so the first round cannot stop the measurement
    rc = main(["tune", MODEL, *FLAGS, "--methods", "heft,dpos", "--top", "1", "--steps", "3", "--max-steps", "6",
               "--time-limit", "5", "--out", str(out), "--table", str(table), "--plot", str(png)])
    got = capfd.readouterr()
    assert rc == 0, got.err[-2000:]
    doc = json.loads(out.read_text())
    for key in ("chosen_method", "measured_step_ms", "measured_ci_ms", "one_device_step_ms", "one_device_ci_ms",
                "predicted_step_ms", "speedup", "candidates", "graph_fingerprint", "placement", "start"):
        assert key in doc, key
    rows = doc["candidates"]
    assert 2 <= len(rows) <= 2 and rows[-1]["method"] == ONE_DEVICE
    for r in rows:
        assert r["steps"] == 6 and len(r["steps_ms"]) == 6 and r["matches_reference"] is True
        assert r["predicted_step_ms"] > 0 and set(r["plan"]["placement"]) == set(r["plan"]["start"])
        for key in ("method", "measured_step_ms", "ci", "transfers"):
            assert key in r
    assert doc["measured_step_ms"] <= doc["one_device_step_ms"]
    assert doc["speedup"] >= 1.0
    chosen = next(r for r in rows if r["method"] == doc["chosen_method"])
    assert doc["placement"] == chosen["plan"]["placement"] and doc["start"] == chosen["plan"]["start"]
    assert "| one device |" in table.read_text() and png.stat().st_size > 10_000
    assert f"chosen: {doc['chosen_method']}" in got.out and "| method |" not in got.out
    assert doc["rounds"] == 2
    assert got.err.count("round 1: ") == 1 and got.err.count("round 2: ") == 1 and "round 3" not in got.err
    assert " step 1/" not in got.err, got.err


@NO_TORCH
def test_layer_plans_cut_only_between_layers():
    """``--granularity layer``: on the two towers (roofline costs x 100, 2 GPUs of a host) every
    method's layer plan, and the one-device plan moved layer by layer (``moves (layers)``),
    keeps each layer (its forward and backward operators, parameters and updates) on one
    device, and so sends no parameter; the moves shorten the one-device step; every plan
    feasible and predicted at the evaluator's makespan on the operator graph."""
    from dnnplace.api_scoring import evaluate
    from dnnplace.api_torch import capture
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.transforms.layers import layer_labels
    from dnnplace.tune_candidates import LAYER_SUFFIX, MOVES, method_plans, one_device_plan
    inst = capture(f"{Path(__file__).with_name('exec_models.py')}:two_towers", inputs=["64x256"],
                   params={"width": 256}, loss="cross_entropy", cluster="single-host-2-pcie")
    inst = Instance(inst.graph.with_(compute=inst.graph.compute * 100), inst.cluster, inst.source)  # compute-bound
    lab, rule = layer_labels(inst.graph, calls=True)
    assert rule.startswith("layerId") and lab.max() + 1 < inst.graph.n
    ops = {p[0]: p for p in method_plans(inst, {"heft": {}, "etf": {}}, 5.0, ("op",))}
    plans = method_plans(inst, {"heft": {}, "etf": {}}, 5.0, ("op", "layer"))
    assert [p[0] for p in plans] == ["heft", "etf", "heft" + LAYER_SUFFIX, "etf" + LAYER_SUFFIX, MOVES]
    g, ids = inst.graph, inst.graph.ids
    checked = 0
    for method, plan, sim, _ in plans:
        ev = evaluate(inst, {"placement": plan.placement, "start": plan.start}, problem="makespan")
        assert ev.feasible and sim.makespan == pytest.approx(ev.objective, rel=1e-6)
        if not method.endswith(LAYER_SUFFIX):
            assert sim.makespan == pytest.approx(ops[method][2].makespan, rel=1e-9)
            continue
        for layer in np.unique(lab):
            assert len({plan.placement[ids[i]] for i in np.flatnonzero(lab == layer)}) == 1
            checked += 1
        sent = [(ids[u], ids[v]) for u, v in zip(g.src, g.dst)
                if g.roles[u] == "param" and plan.placement[ids[u]] != plan.placement[ids[v]]]
        assert not sent, sent
    assert checked == 3 * (lab.max() + 1)
    assert plans[-1][2].makespan < 0.8 * one_device_plan(inst)[2].makespan


@NO_TORCH
@pytest.mark.slow
def test_tune_on_executed_costs_predicts_the_one_device_plan_at_its_first_run(tmp_path, capfd):
    """--executed-costs: the one-device plan runs first and its operator times become the
    costs, so the one-device candidate is predicted at that run's step (docs/execution.md,
    Executed costs); the result still runs with execute (the captured graph's fingerprint)."""
    import re
    out = tmp_path / "tuned.json"
    rc = main(["tune", MODEL, *FLAGS, "--executed-costs", "--methods", "heft", "--top", "1", "--steps", "6",
               "--max-steps", "6", "--time-limit", "5", "--out", str(out)])
    got = capfd.readouterr()
    assert rc == 0, got.err[-2000:]
    first = re.search(r"executed costs: the one-device plan measured ([0-9.]+) ms over 6 steps; its operators sum "
                      r"to ([0-9.]+) ms", got.err)
    assert first, got.err
    doc = json.loads(out.read_text())
    assert doc["costs"] == "executed" and doc["candidates"][-1]["method"] == ONE_DEVICE
    step, ops = float(first[1]), float(first[2])
    assert doc["candidates"][-1]["predicted_step_ms"] == pytest.approx(max(step, ops), rel=1e-3)


@pytest.mark.parametrize("flags, culprit", [
    (["--methods", "heft,nope"], "--methods: unknown method 'nope'"),
    (["--methods", "dp"], "--methods: 'dp' does not solve the makespan problem"),
    (["--top", "0"], "--top 0: must be an integer >= 1"),
    (["--max-steps", "0"], "--max-steps 0: must be an integer >= 1"),
    (["--time-limit", "0"], "--time-limit 0: must be a number of seconds > 0"),
    (["--granularity", "op,module"], "--granularity 'op,module': expected op, layer or op,layer"),
])
def test_tune_bad_flags(tmp_path, capfd, flags, culprit):
    """Each bad flag: exit 2, one line naming it, nothing on stdout, no output, before any work."""
    out = tmp_path / "tuned.json"
    assert main(["tune", MODEL, *FLAGS, *flags, "--out", str(out)]) == 2
    got = capfd.readouterr()
    assert got.out == "" and got.err.count("\n") == 1 and got.err.startswith(f"dnnplace: error: {culprit}"), got.err
    assert not out.exists()


@NO_TORCH
def test_tune_interrupted_writes_nothing(tmp_path, capfd, monkeypatch):
    """Ctrl-C during the work: exit 130, nothing written."""
    import dnnplace.capture_commands as cc

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(cc, "capture_one", interrupted)
    out = tmp_path / "tuned.json"
    assert main(["tune", MODEL, *FLAGS, "--out", str(out), "--plot", str(tmp_path / "p.png")]) == 130
    assert "dnnplace: interrupted" in capfd.readouterr().err
    assert not out.exists() and not (tmp_path / "p.png").exists()


@NO_TORCH
@pytest.mark.slow
def test_tuned_result_runs_with_execute(tmp_path, capfd):
    """The tuned file is a result `dnnplace execute` runs (its top-level placement and start)."""
    out, run = tmp_path / "tuned.json", tmp_path / "run.json"
    assert main(["tune", MODEL, *FLAGS, "--methods", "heft", "--steps", "6", "--max-steps", "6",
                 "--out", str(out)]) == 0
    assert main(["execute", MODEL, str(out), *FLAGS, "--steps", "1", "--warmup", "0", "--out", str(run)]) == 0
    doc = json.loads(run.read_text())
    assert doc["matches_reference"] is True and doc["graph_fingerprint"] == json.loads(out.read_text())[
        "graph_fingerprint"]
    assert os.path.getsize(run) > 0


def test_tune_never_writes_over_its_inputs(tmp_path, capfd):
    """The model file or the cluster file given as --out, --table or --plot: exit 2 naming
    the input, the file unchanged, before any work."""
    import shutil
    model = tmp_path / "m.py"
    shutil.copy(Path(__file__).with_name("exec_models.py"), model)
    cluster = tmp_path / "c.json"
    cluster.write_text('{"format": "dnnplace.cluster/1"}')
    before = {p: p.read_bytes() for p in (model, cluster)}
    checked = 0
    for argv in (["--out", str(model)], ["--out", str(tmp_path / "t.json"), "--plot", str(model)],
                 ["--cluster", str(cluster), "--out", str(tmp_path / "t.json"), "--table", str(cluster)]):
        assert main(["tune", f"{model}:mlp", *FLAGS, *argv]) == 2
        got = capfd.readouterr()
        assert got.out == "" and got.err.count("\n") == 1 and "is the input" in got.err, got.err
        checked += 1
    assert checked == 3 and {p: p.read_bytes() for p in (model, cluster)} == before
    assert not (tmp_path / "t.json").exists()
