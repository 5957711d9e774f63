"""``latency-ls`` (heuristics/latency_search.py) against the evaluator and brute force.

- its compiled scorer equals :func:`dnnplace.evaluation.evaluate.latency` on every split whose
  accelerator sets are single pieces, and rejects exactly the others;
- on seeded tiny instances its result is a feasible one-piece-per-accelerator split,
  never below the brute-force optimum (:func:`brute_force_latency`, q = 1), never
  worse than its start, and equal to the optimum on (nearly) all of them;
- fixed seed + iteration budget = same result; BERT-24 (layer) reaches the paper's
  IP latency 100.22 ms (Table 4) from the max-load DP split (108.03).
"""

from __future__ import annotations

import numpy as np
import pytest
from instances import brute_force_latency, latency_tiny_instance

from dnnplace.evaluation.evaluate import latency, validate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.latency_search import LatencyScorer, latency_search
from dnnplace.registry import SolveRequest, SolverOptions, solve


def _one_piece(ev) -> bool:
    return ev.objective is not None and max(ev.details["subgraphs"].values(), default=0) <= 1


def _assert_scorer_agrees(inst: Instance, devs) -> int:
    """Scorer vs evaluator on device arrays (CPU nodes on the pool); returns #finite."""
    sc = LatencyScorer(inst)
    comp = inst.cluster.compute_matrix(inst.graph)
    finite = 0
    for dev in devs:
        if np.isnan(comp[np.arange(inst.graph.n), dev]).any():
            continue
        val, _ = sc.score(dev)
        ev = latency(Placement(inst.graph, inst.cluster, dev))
        if np.isfinite(val):
            finite += 1
            assert _one_piece(ev), dev
            assert val == pytest.approx(ev.objective, rel=1e-12, abs=1e-9), dev
        else:  # a non-contiguous accelerator set, or subgraphs waiting on each other
            assert not _one_piece(ev), (dev, ev.objective)
    return finite


def test_scorer_matches_evaluator_tiny():
    finite = 0
    for seed in range(25):
        inst = latency_tiny_instance(2000 + seed)
        rng = np.random.default_rng(seed)
        finite += _assert_scorer_agrees(inst, rng.integers(0, inst.cluster.size, (150, inst.graph.n)))
    assert finite > 500  # the check is not vacuous


def test_scorer_matches_evaluator_link_model():
    """Edges without explicit costs: transfers priced by the host link model."""
    rng = np.random.default_rng(7)
    finite = 0
    for seed in range(10):
        base = latency_tiny_instance(2100 + seed).graph
        g = OpGraph(ids=list(range(base.n)), kinds=base.kinds, compute=base.compute, memory=base.memory,
                    src=base.src, dst=base.dst, edge_bytes=rng.uniform(0, 100, base.m).round(),
                    name="tiny-link")
        cl = Cluster.tarnawski(2, 1, 1e9, host_beta0=0.5, host_beta1=0.02)
        inst = Instance(g, cl)
        n_finite = _assert_scorer_agrees(inst, rng.integers(0, cl.size, (100, g.n)))
        assert n_finite > 0, seed
        finite += n_finite
    assert finite > 250, finite  # measured 357 of 1000 random splits


def test_scorer_matches_evaluator_on_workload(tarnawski_dir):
    """Random boundary moves around greedy's split of a real graph (GNMT layer)."""
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.baselines import greedy_fill

    inst = load_instance(tarnawski_dir / "latency-inputs" / "LayerGraphs" / "gnmt_inference.json")
    g, cl = inst.graph, inst.cluster
    dev = greedy_fill(g, cl).device.copy()
    cpu = cl.devices_of_kind("cpu")
    dev[np.isin(dev, cpu)] = cpu[0]
    rng = np.random.default_rng(0)
    sc = LatencyScorer(inst)
    devs = [dev]
    for _ in range(150):
        v = rng.integers(g.n)
        nbrs = np.r_[g.in_nbr[g.in_ptr[v]:g.in_ptr[v + 1]], g.out_nbr[g.out_ptr[v]:g.out_ptr[v + 1]]]
        d = dev.copy()
        d[v] = dev[rng.choice(nbrs)] if nbrs.size and rng.random() < 0.8 else cpu[0]
        devs.append(d)
        if rng.random() < 0.5 and np.isfinite(sc.score(d)[0]):  # walk on among valid splits
            dev = d
    assert _assert_scorer_agrees(inst, devs) > 50


def test_tiny_instances_against_brute_force():
    """25 seeded instances (1-2 accelerators + CPU pool): never below the optimum,
    never worse than the start, feasible with one piece per accelerator; equal to the
    optimum on at least 23 (measured: 25/25 with 200 rounds)."""
    equal = 0
    for seed in range(25):
        inst = latency_tiny_instance(1000 + seed)
        ref = brute_force_latency(inst, 1)
        p, val, info = latency_search(inst, seed=seed, max_iters=200, time_limit=60)
        ev = latency(p)
        assert ev.feasible and _one_piece(ev), ev.violations
        assert not validate(p)
        assert val == pytest.approx(ev.objective, rel=1e-12)
        assert val >= ref - 1e-9
        assert val <= info["start_value"] + 1e-9
        equal += abs(val - ref) <= 1e-6 * max(1.0, ref)
    assert equal >= 23, equal


def test_device_limit_and_memory_respected():
    """A 2-accelerator cluster whose instance allows only one: the split uses one,
    and is never below the brute-force optimum under that limit."""
    for seed in range(6):
        inst = latency_tiny_instance(1100 + seed, k=2)
        cl = inst.cluster
        limited = Cluster(cl.devices, cl.beta0, cl.beta1, cl.cost_factor, name="limited",
                          meta={"model": "tarnawski", "device_limit": {"acc": 1, "cpu": 1}})
        inst = Instance(inst.graph, limited)
        ref = brute_force_latency(inst, 1)
        p, val, _ = latency_search(inst, seed=seed, max_iters=100, time_limit=60)
        assert not validate(p)  # memory, support, colocation, device limit
        assert np.unique(p.device[p.device < 2]).size <= 1
        assert val >= ref - 1e-9


def test_deterministic_for_fixed_seed():
    inst = latency_tiny_instance(1200, k=2)
    runs = [latency_search(inst, seed=3, max_iters=40, time_limit=60) for _ in range(2)]
    assert np.array_equal(runs[0][0].device, runs[1][0].device) and runs[0][1] == runs[1][1]


def test_registry_and_explicit_start(tarnawski_dir):
    """Through the registry (re-scored, EvaluationMismatch otherwise): BERT-24 layer from
    the DP split (108.03 ms) reaches the paper's IP latency 100.22 ms (Table 4); the
    result is deterministic for a fixed seed and never worse than its start."""
    from dnnplace.graphs.io import load_instance

    inst = load_instance(tarnawski_dir / "latency-inputs" / "LayerGraphs" / "bert24_inference.json")
    req = SolveRequest("latency", warm_start="dp", seed=1, solver=SolverOptions(time_limit=60),
                       params={"max_iters": 30})
    r1, r2 = solve(inst, "latency-ls", req), solve(inst, "latency-ls", req)
    assert r1.extra["start"] == "dp" and r1.extra["start_value"] == pytest.approx(108.03, abs=0.005)
    assert r1.objective <= 100.22 + 0.005
    assert r1.evaluation["feasible"] and max(r1.evaluation["subgraphs"].values()) == 1
    assert r1.placement == r2.placement
    # the path segmentation bound is this row's optimum: the answer is proven optimal
    assert r1.bound == pytest.approx(100.2185, abs=1e-4) and r1.status == "optimal"


def test_time_limit_covers_the_start_heuristics(monkeypatch):
    """The limit is the whole call's: a slow DP start is given at most half of it and the
    search stops at the limit counted from the call (a 136 s DP start once made a 30 s
    latency-ls run take 167 s)."""
    import time

    import dnnplace.heuristics.maxload_dp as dp_module
    real, given = dp_module.maxload_dp, []

    def slow_dp(inst, **kw):   # as the DP on a large graph: it uses the time it is given
        if not kw.get("linearized"):   # (the DP's own DPL incumbent calls it again)
            given.append(kw.get("time_limit"))
            time.sleep(min(kw.get("time_limit") or 10.0, 10.0))
        return real(inst, **kw)

    monkeypatch.setattr(dp_module, "maxload_dp", slow_dp)
    inst = latency_tiny_instance(3, k=2)
    t0 = time.perf_counter()
    _, _, info = latency_search(inst, time_limit=2.0, seed=0)
    took = time.perf_counter() - t0
    assert len(given) == 1 and given[0] is not None and given[0] <= 1.0 + 1e-9, given
    assert 0.9 <= info["start_seconds"] and took <= 2.0 + 1.0, (info["start_seconds"], took)
