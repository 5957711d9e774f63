"""``--method auto`` for the exact problems (docs/guide.md, "The methods in brief"): the DP
where its ideals are few, else (or where the DP does not prove its split) the IP; the record says
which answered and which proved it. Checked against the exhaustive search of the DP's tests on
seeded tiny instances (both branches), on a chain (the DP), and on a wide random DAG whose DP
stops on its ideals at once while the IP proves the optimum."""

from __future__ import annotations

import json

import pytest
from instances import random_inference, random_training
from test_maxload_dp import brute_force

from dnnplace.cli import main
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.methods import exact_auto
from dnnplace.registry import SolveRequest, solve

SEEDS = range(12)


def _instance(seed: int) -> Instance:
    return random_training(seed) if seed % 2 else random_inference(seed)


@pytest.mark.parametrize("branch", ["dp", "ip"])
def test_auto_equals_brute_force_on_both_branches(branch, monkeypatch):
    if branch == "ip":  # every DP graph counts as too many ideals: the IP answers
        monkeypatch.setattr(exact_auto, "AUTO_MAX_IDEALS", 1)
    checked = 0
    for seed in SEEDS:
        inst = _instance(seed)
        if branch == "ip" and not inst.cluster.devices_of_kind("cpu").size:
            continue  # the IPs route transfers through a host CPU: auto keeps the DP there
        expected = brute_force(inst)
        res = solve(inst, "auto", SolveRequest(problem="maxload"))
        if expected == float("inf"):
            assert res.placement is None or not res.evaluation["feasible"]
            continue
        assert res.method == "auto" and res.extra["auto_choice"] == branch, res.extra
        assert res.extra["proved_by"] == branch and res.status == "optimal"
        assert res.objective == pytest.approx(expected, rel=1e-6, abs=1e-6)
        assert res.evaluation["feasible"] and res.evaluation["objective"] == pytest.approx(expected, rel=1e-6)
        checked += 1
    assert checked >= 6


def test_auto_on_a_chain_uses_the_dp():
    g = OpGraph(ids=range(6), kinds=("acc", "cpu"), compute=[[3, 9], [1, 9], [4, 9], [1, 9], [5, 9], [2, 9]],
                memory=[1] * 6, src=range(5), dst=range(1, 6), edge_cost=[0.5] * 5)
    inst = Instance(g, Cluster.tarnawski(2, 1, 10))
    res = solve(inst, "auto", SolveRequest(problem="maxload"))
    assert res.extra["auto_choice"] == "dp" and res.extra["proved_by"] == "dp" and res.solver is None
    assert "ideals" in res.extra["auto_reason"]
    assert res.objective == pytest.approx(brute_force(inst)) and res.status == "optimal"


def test_auto_on_a_wide_dag_returns_the_ips_proven_optimum(tmp_path, capsys):
    """40 nodes in layers of about 25: an antichain of 23 nodes, so at least 2^23 ideals; the DP alone
    returns DPL's split with a gap, auto the IP's proven optimum."""
    graph = tmp_path / "wide.json"
    assert main(["generate", "random-dag", "--nodes", "40", "--seed", "3", "--param", "width=25",
                 "--out", str(graph)]) == 0
    records = {}
    for method in ("dp", "auto"):
        out = tmp_path / f"{method}.json"
        assert main(["solve", str(graph), "--cluster", "local-cpu-2", "--method", method, "--out", str(out)]) == 0
        records[method] = json.loads(out.read_text())
    text = capsys.readouterr().out
    dp, auto = records["dp"], records["auto"]
    assert dp["termination"] == "ideal_limit" and dp["status"] == "feasible" and dp["gap"] > 0.01
    assert auto["method"] == "auto" and auto["extra"]["auto_choice"] == "ip" and auto["extra"]["proved_by"] == "ip"
    assert auto["extra"]["auto_dp"]["termination"] == "ideal_limit"
    assert auto["status"] == "optimal" and auto["gap"] == pytest.approx(0.0, abs=1e-4)
    assert auto["objective"] < dp["objective"] and auto["evaluation"]["feasible"]
    assert "auto: ip (the DP stopped: more than" in text and "proved optimal by ip" in text


def test_auto_for_latency_is_the_ip():
    inst = random_inference(3)
    res = solve(inst, "auto", SolveRequest(problem="latency"))
    assert res.extra["auto_choice"] == "ip" and "latency" in res.extra["auto_reason"]
    assert res.evaluation["feasible"]


def test_auto_without_a_host_cpu_keeps_the_dp(monkeypatch):
    """The IPs route every transfer through a host CPU: on accelerators alone auto answers with the DP
    even where it would otherwise turn to the IP."""
    monkeypatch.setattr(exact_auto, "AUTO_MAX_IDEALS", 1)
    inst = random_inference(9)  # 3 accelerators, no CPU; DPL's split 15, the optimum 12
    assert not inst.cluster.devices_of_kind("cpu").size
    res = solve(inst, "auto", SolveRequest(problem="maxload"))
    assert res.extra["auto_choice"] == "dp" and "host CPU" in res.extra["auto_reason"]
    assert res.evaluation["feasible"] and res.lower_bound <= res.objective


def test_auto_keeps_the_dps_bound_when_the_ip_has_none(monkeypatch):
    """The DP stops with a bound, the IP then ends with its warm start and no bound (a time
    limit before its first bound): the answer still carries the DP's bound (it was dropped, and the record said
    "no bound" beside a DP that had proven one)."""
    from dnnplace.methods import base
    monkeypatch.setattr(exact_auto, "AUTO_MAX_IDEALS", 1)
    inst = random_training(1)
    assert inst.cluster.devices_of_kind("cpu").size

    def no_bound(inst, req, opts):   # the IP's incumbent is its warm start, the DP's split; no bound yet
        return base.MethodOutput(placement=req.warm.placement, status="feasible", termination="time_limit",
                                 message="time limit reached before the IP's first bound")
    monkeypatch.setattr(exact_auto, "run_ip", no_bound)
    res = solve(inst, "auto", SolveRequest(problem="maxload"))
    assert res.extra["auto_choice"] == "ip" and res.evaluation["feasible"]
    assert res.bound is not None and res.bound == pytest.approx(res.extra["auto_dp"]["bound"]) and res.bound > 0
