"""The bound-pruned exact max-load DP (heuristics/dp_bounds.py, the threshold runs of
heuristics/maxload_dp.py) and the compiled ideal enumeration (heuristics/dp_lattice.py).

Checked against: the exhaustive optimum (tests/test_maxload_dp.py's brute force, scored by
the evaluator) on seeded tiny instances, the unpruned DP on larger random DAGs and small
cell networks, and every downset of random DAGs found by trying all node subsets.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from instances import dp_costs, random_inference, random_training
from test_maxload_dp import brute_force

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators.cells import cell_network
from dnnplace.graphs.instance import Instance
from dnnplace.heuristics import dp_runs
from dnnplace.heuristics.dp_bounds import knapsack_bound
from dnnplace.heuristics.dp_prepare import prepare as _prepare
from dnnplace.heuristics.ideals import enumerate_ideals
from dnnplace.heuristics.maxload_dp import maxload_dp


@pytest.fixture(autouse=True)
def rising_runs_only(monkeypatch, request):
    """The rising threshold runs alone: the first run at the achievable value holds the
    optimum whenever the plain DP finishes, so it would answer every tiny instance by
    itself; ``test_first_run_*`` keeps it."""
    if "first_run" not in request.node.name:
        monkeypatch.setattr(dp_runs, "FIRST_SHARE", 0.0)


def test_first_run_holds_the_optimum_in_one_run(monkeypatch):
    """With the default first run (and no rising runs first, however close the bound):
    one run, the unpruned DP's optimum, on the 34 of 40 instances that have a split
    (measured)."""
    monkeypatch.setattr(dp_runs, "RISING_FIRST_STEPS", 0)
    checked = 0
    for s in range(40):
        inst = random_inference(s)
        on, off = maxload_dp(inst, prune=True), maxload_dp(inst, prune=False)
        if np.isinf(off.value):
            continue
        assert on.complete and on.value == pytest.approx(off.value, rel=1e-9) and on.seconds.get("thresholds", 1) == 1
        checked += 1
    assert checked == 34, checked


def test_first_run_or_rising_runs_by_the_bound():
    """The default: rising runs first where the bound is at most RISING_FIRST_STEPS steps
    below DPL's value, else the first run; the optimum either way (= unpruned DP, the
    split re-scored by the evaluator) on the 34 of 40 instances that have a split, 6 of
    them by the rising runs alone (measured)."""
    checked, rising = 0, 0
    for s in range(40):
        inst = random_inference(s)
        on, off = maxload_dp(inst, prune=True), maxload_dp(inst, prune=False)
        if np.isinf(off.value):
            continue
        assert on.complete and on.value == pytest.approx(off.value, rel=1e-9)
        ev = maxload(on.placement, contiguity="both")
        assert ev.feasible and ev.objective == pytest.approx(on.value, rel=1e-9)
        rising += on.seconds.get("first_run", 1.0) == 0
        checked += 1
    assert checked == 34, checked
    assert rising == 6, rising  # measured: both orders taken


def _knapsack(inst: Instance) -> float:
    a = _prepare(inst, linear=False).arrays
    return knapsack_bound(np.where(a["acc_ok_node"], a["acc_c"], 0.0), a["cpu_c"], a["cpu_ok_node"] & (a["l"] > 0),
                          a["k"], a["l"])


def _random_dag(seed: int) -> Instance:
    """8-13 nodes, random edges forward in the numbering, 2-4 accelerators and 0-2 CPUs,
    costs with ties, sometimes a binding memory limit or a node only a CPU can run."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 14))
    p = rng.uniform(0.15, 0.45)
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < p]
    return dp_costs(rng, n, edges, cpu_only=0.2, full_memory=0.6)


def test_pruned_dp_equals_brute_force():
    """Pruned DP = exhaustive optimum (evaluator-scored placement) on 40 inference, 25
    training and 10 overlap instances; the knapsack bound never exceeds the optimum, and
    on some instances a threshold run fails first (the pruning proves a bound)."""
    checked = failed_runs = 0
    cases = [(random_inference(s), "pipedream") for s in range(40)]
    cases += [(random_training(s), "pipedream") for s in range(25)]
    cases += [(random_inference(s), "overlap") for s in range(100, 110)]
    for inst, objective in cases:
        expected = brute_force(inst, objective)
        res = maxload_dp(inst, objective=objective, prune=True)
        if np.isinf(expected):
            assert res.placement is None and np.isinf(res.value)
            continue
        assert res.complete and res.value == pytest.approx(expected, rel=1e-9, abs=1e-9)
        ev = maxload(res.placement, objective=objective, contiguity="both")
        assert ev.feasible and ev.objective == pytest.approx(res.value, rel=1e-9)
        assert _knapsack(inst) <= expected + 1e-9
        failed_runs += res.seconds.get("thresholds", 1) > 1
        checked += 1
    assert checked == 69, checked
    assert failed_runs >= 10, failed_runs


def test_pruned_dp_equals_unpruned_on_random_dags():
    """Pruned = unpruned DP (value, and the pruned placement re-scored by the evaluator)
    on 80 random DAGs of 8-13 nodes, both objectives; the knapsack bound is below the
    optimum; on many of them a threshold run fails first (a bound proven by pruning)."""
    checked = failed_runs = 0
    for seed in range(80):
        inst = _random_dag(seed)
        objective = "overlap" if seed % 4 == 3 else "pipedream"
        off = maxload_dp(inst, objective=objective, prune=False)
        on = maxload_dp(inst, objective=objective, prune=True)
        if np.isinf(off.value):
            assert np.isinf(on.value) and on.placement is None
            continue
        assert on.complete and on.value == pytest.approx(off.value, rel=1e-9, abs=1e-9)
        ev = maxload(on.placement, objective=objective, contiguity="both")
        assert ev.feasible and ev.objective == pytest.approx(on.value, rel=1e-9)
        assert _knapsack(inst) <= off.value + 1e-9
        failed_runs += on.seconds.get("thresholds", 1) > 1
        checked += 1
    assert checked >= 60, checked
    assert failed_runs >= 20, (failed_runs, checked)


@pytest.mark.parametrize("replicas", [2, 3])
def test_pruned_dp_with_replication_equals_unpruned(replicas):
    """Appendix C.2 replicas: the rest bound stays valid (a stage on r accelerators takes
    r of them): pruned = unpruned on 30 random DAGs."""
    checked = 0
    for seed in range(30):
        inst = _random_dag(1000 + seed)
        if replicas > inst.cluster.devices_of_kind("acc").size:
            continue
        off = maxload_dp(inst, prune=False, replicas=replicas, sync_per_byte=0.05)
        on = maxload_dp(inst, prune=True, replicas=replicas, sync_per_byte=0.05)
        assert on.value == pytest.approx(off.value, rel=1e-9, abs=1e-9)
        checked += np.isfinite(off.value)
    assert checked >= 10, checked


def test_pruned_dp_on_cell_networks():
    """Small Inception-like cell networks (the shape of the dp-scale benchmark): pruned =
    unpruned, on 6 networks and 2 clusters each; a run stopped by the time limit brackets
    the optimum with its incumbent and bound."""
    checked = 0
    for seed in range(6):
        g = cell_network(seed=seed, cells=2, branches=3, branch_len=(2, 4))
        for k, cpus in ((3, 1), (4, 0)):
            inst = Instance(g, Cluster.tarnawski(k, cpus, float(g.memory.sum()) / 2))
            off = maxload_dp(inst, prune=False)
            on = maxload_dp(inst, prune=True)
            assert on.value == pytest.approx(off.value, rel=1e-9)
            ev = maxload(on.placement, contiguity="both")
            assert ev.feasible and ev.objective == pytest.approx(on.value, rel=1e-9)
            cut = maxload_dp(inst, prune=True, time_limit=0.0)
            assert cut.lower_bound <= off.value + 1e-9 <= cut.value + 2e-9
            checked += 1
    assert checked == 12


def _downsets(n: int, src: np.ndarray, dst: np.ndarray) -> set[frozenset]:
    out = set()
    for bits in itertools.product((0, 1), repeat=n):
        s = {v for v in range(n) if bits[v]}
        if all(u in s for u, v in zip(src.tolist(), dst.tolist()) if v in s):
            out.add(frozenset(s))
    return out


def test_enumeration_matches_all_downsets():
    """The compiled enumeration finds exactly the downsets (every subset tried) of 60
    random DAGs of 1-12 nodes (with duplicate edges), in order of size, with the cover
    relation J = I + {x} for exactly the nodes x addable to I."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(1, 13))
        m = int(rng.integers(0, 2 * n + 1))
        a, b = rng.integers(0, n, m), rng.integers(0, n, m)
        keep = a != b
        src, dst = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
        lat = enumerate_ideals(n, src, dst)
        sets = [frozenset(lat.nodes(i).tolist()) for i in range(lat.size)]
        assert set(sets) == _downsets(n, src, dst) and len(sets) == lat.size
        assert [len(s) for s in sets] == sorted(len(s) for s in sets)
        for i in range(lat.size):
            got = {(int(x), sets[int(j)]) for x, j in zip(lat.cover_node[lat.cover_ptr[i]:lat.cover_ptr[i + 1]],
                                                         lat.cover_to[lat.cover_ptr[i]:lat.cover_ptr[i + 1]])}
            want = {(x, sets[i] | {x}) for x in range(n) if x not in sets[i] and sets[i] | {x} in set(sets)}
            assert got == want
        checked += 1
    assert checked == 60
