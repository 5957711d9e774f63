"""The closure segmentation bound (dnnplace.formulations.latency_bound) and the spine bound
(dnnplace.formulations.latency_spine) against exhaustive optima.

Validity: on seeded tiny instances (q = 1 and q = 2, with and without colocation, binding
memory, large transfers) the bound never exceeds the exhaustive optimum: for q = 1 the
best evaluator latency over every assignment with one piece per accelerator, for q = 2
the best latency over every Fig. 4 slot assignment (the latency IP's feasible set). It is
never below the path segmentation bound, and above it on most instances (so the test
can tell a bound that does nothing). The spine bound is checked on fork-join graphs
(parallel branches between cut nodes, sometimes an edge that jumps over one), where it
sees every branch.
"""

from __future__ import annotations

import numpy as np
import pytest
from instances import _tarnawski_tiny, brute_force_latency, latency_tiny_instance
from test_latency_ip import brute_force_slots

from dnnplace.evaluation.bounds import latency_lower_bound
from dnnplace.evaluation.evaluate import latency
from dnnplace.formulations.latency_bound import closure_segmentation, closure_segmentation_bound, descendants
from dnnplace.formulations.latency_closure_data import closure_data
from dnnplace.formulations.latency_spine import cut_nodes, spine_bound, spine_dp
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance


def _instance(seed: int):
    """Two families: the latency IP's tiny instances, and chains with large transfers,
    tight memory and (training) colocation, where the closure and forced transfers bind."""
    q = 1 + seed % 2
    training = (seed // 2) % 2 == 1
    if seed % 3 == 0:
        inst = _tarnawski_tiny(seed, k=1 + seed % 3 if q == 1 else 1 + seed % 2, training=training, chain_prob=0.9,
                               cpu_slowdown=(2, 6), max_cost=8.0, coloc_prob=0.7, mem_frac=(0.3, 0.7))
    else:
        inst = latency_tiny_instance(seed, k=1 + seed % 2, training=training)
    return inst, q


@pytest.mark.parametrize(("seeds", "min_lifted", "min_splits", "min_proven"), [
    (30, 20, 12, 2), pytest.param(90, 60, 40, 10, marks=pytest.mark.slow)], ids=["30", "90"])
def test_closure_bound_never_exceeds_the_exhaustive_optimum(seeds, min_lifted, min_splits, min_proven):
    """``seeds`` seeded instances (30 in the default run, 90 with ``-m slow``): the bound is
    between the path bound and the optimum; for q = 1 the split read off it is feasible
    (one piece per accelerator) and never below the optimum (measured on 30 / 90: lifted
    above the path bound on 24 / 70; 15 / 45 splits, 2 / 13 of them proven optimal by the
    bound)."""
    checked = lifted = splits = proven = 0
    for seed in range(seeds):
        inst, q = _instance(seed)
        ref = brute_force_latency(inst, 1) if q == 1 else brute_force_slots(inst, q)
        old = latency_lower_bound(inst.graph, inst.cluster, q)
        new, split = closure_segmentation(inst.graph, inst.cluster, q, split=True)
        assert new == closure_segmentation_bound(inst.graph, inst.cluster, q)
        assert old - 1e-9 <= new <= ref + 1e-9, (seed, q, old, new, ref)
        lifted += new > old + 1e-9
        if split is not None:
            ev = latency(split)
            assert ev.feasible and max(ev.details["subgraphs"].values(), default=0) <= 1
            assert ev.objective >= ref - 1e-9, (seed, ev.objective, ref)
            splits += 1
            proven += ev.objective <= new + 1e-9
        checked += 1
    assert checked == seeds and lifted >= min_lifted and splits >= min_splits and proven >= min_proven, \
        (lifted, splits, proven)


def test_closure_bound_example_and_reachability():
    """The docstring's diamond: the path bound charges the path's two transfers, the
    closure bound also the transfer of the other branch that a full accelerator forces,
    the spine bound both branches' transfers (the optimum)."""
    g = OpGraph(ids=list("abcd"), kinds=["acc", "cpu"], compute=[[1.0, 9.0]] * 4, memory=[2] * 4,
                src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_cost=[3.0] * 4)
    cl = Cluster.tarnawski(2, 1, 4)
    assert descendants(g).astype(int).tolist() == [[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1]]
    assert latency_lower_bound(g, cl) == 9.0
    d = closure_data(g, cl, 1)
    assert cut_nodes(d).tolist() == [0, 3]
    assert spine_bound(d) == 16.0 == closure_segmentation_bound(g, cl)
    assert brute_force_latency(Instance(g, cl), 1) == 16.0
    assert np.isfinite(closure_segmentation_bound(g, cl, 2))


def fork_join_instance(seed: int, n_max: int = 7) -> Instance:
    """A chain of single nodes and forks (2-3 branches of 1-2 nodes joined by one node) on
    at most ``n_max`` nodes, with probability 0.3 an extra edge jumping forward over at least
    one node; compute, per-node transfers (some edges cheaper), memory as in
    :func:`instances.latency_tiny_instance` with transfers up to 8; 1-2 accelerators (memory
    30-80 % of the total) and a CPU."""
    rng = np.random.default_rng(seed)
    src, dst, n, tail = [], [], 1, 0
    while n < n_max - 1:
        if rng.random() < 0.6 and n + 3 <= n_max:
            ends = []
            for _ in range(int(rng.integers(2, 4))):
                prev = tail
                for _ in range(int(rng.integers(1, 3))):
                    if n >= n_max - 1:
                        break
                    src.append(prev)
                    dst.append(n)
                    prev, n = n, n + 1
                ends.append(prev)
            src += sorted(set(ends))
            dst += [n] * len(set(ends))
            tail, n = n, n + 1
        else:
            src.append(tail)
            dst.append(n)
            tail, n = n, n + 1
    if rng.random() < 0.3:
        u = int(rng.integers(0, n - 2))
        v = int(rng.integers(u + 2, n))
        if (u, v) not in zip(src, dst):
            src.append(u)
            dst.append(v)
    acc = rng.uniform(1, 10, n).round(1)
    cpu = (acc * rng.uniform(1.2, 4, n)).round(1)
    acc[rng.random(n) < 0.1] = np.nan
    cost = rng.uniform(0, 8, n).round(1)[src]
    uneven = rng.random(len(src)) < 0.15
    cost[uneven] = (cost[uneven] * rng.uniform(0.2, 1.0, uneven.sum())).round(1)
    mem = rng.integers(1, 5, n).astype(float)
    g = OpGraph(ids=list(range(n)), kinds=("acc", "cpu"), compute=np.c_[acc, cpu], memory=mem, src=src, dst=dst,
                edge_cost=cost, name=f"forkjoin{seed}")
    k = int(rng.integers(1, 3))
    return Instance(g, Cluster.tarnawski(k, 1, float(mem.sum() * rng.uniform(0.3, 0.8))))


@pytest.mark.parametrize(("seeds", "min_lifted", "min_tight"), [
    (14, 10, 4), pytest.param(60, 39, 31, marks=pytest.mark.slow)], ids=["14", "60"])
def test_spine_bound_never_exceeds_the_exhaustive_optimum(seeds, min_lifted, min_tight):
    """``seeds`` fork-join instances (q = 1; every other one with q = 2 on one accelerator,
    against the slot brute force): the spine bound is at most the optimum, the closure
    segmentation bound takes it as its floor, and it lifts the bound above what the paths
    give on most of them (measured on 14 / 60: lifted on 10 / 39, equal to the optimum on
    4 / 31)."""
    from dnnplace.formulations import latency_bound

    checked = lifted = tight = 0
    for seed in range(seeds):
        inst = fork_join_instance(seed)
        q = 2 if seed % 2 and inst.cluster.size == 2 else 1
        d = closure_data(inst.graph, inst.cluster, q)
        assert cut_nodes(d).size >= 1
        ref = brute_force_latency(inst, 1) if q == 1 else brute_force_slots(inst, q)
        spine = spine_bound(d)
        assert spine <= ref + 1e-9, (seed, q, spine, ref)
        assert spine_bound(d, grid=7) <= ref + 1e-9          # a coarse memory grid: still a bound
        paths = max(latency_bound._segment(d, p, 2000, float("inf"))[0] for p in latency_bound._paths(inst.graph, d))
        assert max(paths, spine) - 1e-9 <= closure_segmentation_bound(inst.graph, inst.cluster, q) <= ref + 1e-9
        lifted += spine > paths + 1e-9
        tight += spine >= ref - 1e-9
        checked += 1
    assert checked == seeds and lifted >= min_lifted and tight >= min_tight, (lifted, tight)


def test_spine_split_is_scored_as_its_dp_value():
    """The split read off the spine DP (the restriction: memory rounded up, middles on the
    CPU or in pieces of one chain): on the 29 of 40 fork-join instances whose nodes'
    out-edges carry one cost the evaluator accepts it (one piece per accelerator) and gives it
    exactly the DP's value (measured: 27 splits scored, 2 rejected for a middle piece's
    memory)."""
    from dnnplace.formulations.latency_spine_split import spine_split

    checked = scored = 0
    for seed in range(40):
        inst = fork_join_instance(seed, 8)
        d = closure_data(inst.graph, inst.cluster, 1)
        if d.uneven:
            continue
        checked += 1
        value, _ = spine_dp(d, 40, split=True)
        p = spine_split(d, inst.cluster, 40)
        ev = latency(p) if p is not None else None
        if ev is None or not ev.feasible:
            continue
        assert max(ev.details["subgraphs"].values(), default=0) <= 1
        assert ev.objective == pytest.approx(value, rel=1e-9, abs=1e-9), seed
        scored += 1
    assert checked == 29 and scored >= 25, (checked, scored)


def test_spine_bound_when_one_piece_holds_two_branches():
    """A fork 0 -> {1, 2 -> 5, 3 -> 4} on one accelerator of memory 6.19 and free transfers:
    the optimum (22.1) puts the parts 2, 5 and 3 of two branches in one piece, so the
    middle pieces of a block must not be counted per branch alone (that gave 24.1)."""
    acc = [0.0, 2.4, 0.0, 9.7, 3.1, 0.0]
    cpu = [6.8, 4.5, 2.8, 20.5, 5.6, 14.5]
    g = OpGraph(ids=list(range(6)), kinds=("acc", "cpu"), compute=np.c_[acc, cpu], memory=[4, 1, 3, 2, 4, 1],
                src=[0, 0, 0, 3, 2], dst=[1, 2, 3, 4, 5], edge_cost=[0.0] * 5)
    inst = Instance(g, Cluster.tarnawski(1, 1, 6.19))
    assert brute_force_latency(inst, 1) == pytest.approx(22.1)
    assert spine_bound(closure_data(g, inst.cluster, 1)) <= 22.1 + 1e-9
