"""The closure segmentation bound (dnnplace.formulations.latency_bound) against exhaustive optima.

Validity: on seeded tiny instances (q = 1 and q = 2, with and without colocation, binding
memory, large transfers) the bound never exceeds the exhaustive optimum: for q = 1 the
best evaluator latency over every assignment with one piece per accelerator, for q = 2
the best latency over every Fig. 4 slot assignment (the latency IP's feasible set). It is
never below the path segmentation bound, and above it on most instances (so the test
can tell a bound that does nothing).
"""

from __future__ import annotations

import numpy as np
import pytest
from instances import _tarnawski_tiny, brute_force_latency, latency_tiny_instance
from test_latency_ip import brute_force_slots

from dnnplace.formulations.latency_bound import closure_segmentation, closure_segmentation_bound, descendants
from dnnplace.graphs.evaluation.bounds import latency_lower_bound
from dnnplace.graphs.evaluation.evaluate import latency


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
    closure bound also the transfer of the other branch that a full accelerator forces."""
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.graph import OpGraph
    from dnnplace.graphs.instance import Instance

    g = OpGraph(ids=list("abcd"), kinds=["acc", "cpu"], compute=[[1.0, 9.0]] * 4, memory=[2] * 4,
                src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_cost=[3.0] * 4)
    cl = Cluster.tarnawski(2, 1, 4)
    assert descendants(g).astype(int).tolist() == [[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1]]
    assert latency_lower_bound(g, cl) == 9.0
    assert closure_segmentation_bound(g, cl) == 12.0
    assert brute_force_latency(Instance(g, cl), 1) == 16.0
    assert np.isfinite(closure_segmentation_bound(g, cl, 2))
