"""Hierarchical clusters (Tarnawski et al. App. C.3): presets, the evaluator's network
loads, and the level-by-level DP against exhaustive search."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from instances import quotient_is_acyclic, random_inference

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.hierarchy import hierarchical_cluster, server_of
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.presets import cluster_preset
from dnnplace.heuristics.hierarchy_dp import hierarchical_dp


def test_presets_and_bad_input():
    for name, size in (("hierarchy-2x4", 8), ("hierarchy-4x8-16GB", 32)):
        cl = cluster_preset(name)
        assert cl.size == size and server_of(cl).tolist() == sorted(server_of(cl).tolist())
    assert hierarchical_cluster("4x8").meta["hierarchy"]["servers"][3] == list(range(24, 32))
    with pytest.raises(InputError, match="empty level"):
        hierarchical_cluster((2, 0))
    with pytest.raises(InputError, match="unknown hierarchy preset"):
        hierarchical_cluster("3x3")


def test_network_load_by_hand():
    # a -> b -> c, c_u = 1: {a} on s0, {b, c} on s1 (rho 3): s0 uplink 3, s1 downlink 3
    g = OpGraph(ids="abc", kinds=("acc",), compute=[[1], [1], [1]], memory=[0] * 3, src=[0, 1], dst=[1, 2],
                edge_cost=[1.0, 1.0])
    cl = hierarchical_cluster((2, 2), inter_factor=3.0)
    ev = maxload(Placement(g, cl, np.array([0, 2, 3])), contiguity="both")
    assert ev.details["network"] == [3.0, 3.0] and ev.objective == pytest.approx(3.0)
    # all on one server: no network, GPU loads 1 + 1, 1 + 1 + 1, 1 + 1
    assert maxload(Placement(g, cl, np.array([0, 1, 0])), contiguity="convex-both").details["network"] == [0, 0]


def _servers_ordered(g, cl, dev) -> bool:
    srv = server_of(cl)[dev]
    return quotient_is_acyclic(set(srv.tolist()), zip(srv[g.src].tolist(), srv[g.dst].tolist()))


def test_hierarchical_dp_equals_brute_force():
    """2 servers x 2 GPUs (rho 6) on the seeded 4-5 node inference instances without
    CPU-only nodes: the DP's value = the exhaustive optimum over splits the evaluator
    accepts (contiguity both) whose servers can be ordered, and its placement scores it.
    Measured: 11 instances; on 3 the network makes the optimum worse than the flat
    4-GPU DP's (so the servers' term is exercised)."""
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.heuristics.maxload_dp import maxload_dp

    checked = worse = 0
    for seed in range(40):
        base = random_inference(seed)
        g = base.graph
        if np.isnan(g.compute[:, 0]).any() or g.n > 5:
            continue
        g = g.with_(kinds=("acc",), compute=g.compute[:, :1])
        cl = hierarchical_cluster((2, 2), memory=float(base.cluster.memory[0]), inter_factor=6.0)
        best = np.inf
        for combo in itertools.product(range(4), repeat=g.n):
            p = Placement(g, cl, np.array(combo))
            ev = maxload(p, contiguity="both")
            if ev.feasible and ev.objective < best and _servers_ordered(g, cl, p.device):
                best = ev.objective
        res = hierarchical_dp(Instance(g, cl))
        assert res.value == pytest.approx(best, rel=1e-9, abs=1e-9), seed
        if res.placement is not None:
            ev = maxload(res.placement, contiguity="both")
            assert ev.feasible and ev.objective == pytest.approx(res.value, rel=1e-9)
        checked += 1
        worse += res.value > maxload_dp(Instance(g, Cluster.tarnawski(4, 0, float(cl.memory[0])))).value + 1e-9
    assert checked >= 10 and worse >= 2, (checked, worse)


def test_registry_runs_the_hierarchical_dp(tarnawski_dir):
    """`dp` on a hierarchical cluster runs the level-by-level DP; BERT-24 (30 ideals) on
    the 2x4 preset: re-scored by the evaluator, never below the flat 8-GPU DP."""
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.maxload_dp import maxload_dp
    from dnnplace.registry import SolveRequest, solve

    flat = load_instance(tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json")
    g = flat.graph
    mem = float(flat.cluster.memory[0])
    r = solve(Instance(g, hierarchical_cluster("2x4", memory=mem, kind=g.kinds[0])), "dp", SolveRequest("maxload"))
    assert r.status == "optimal" and r.evaluation["feasible"]
    assert r.objective >= maxload_dp(Instance(g, Cluster.tarnawski(8, 0, mem, acc_kind=g.kinds[0]))).value - 1e-9
