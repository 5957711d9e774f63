"""Graph statistics on a hand-computed diamond, and against independent references."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.levels import (
    _sweep,
    _sweep_loop,
    blevel,
    critical_path,
    edge_weights,
    heights,
    level_widths,
    node_weights,
    tlevel,
)
from dnnplace.graphs.stats import average_parallelism, ccr, graph_stats

# The diamond (node: gpu time / cpu time, edge: explicit cost):
#
#              a (2 / 20)
#         1  /          \  3
#    b (3 / 30)        c (1 / 10)
#         2  \          /  1
#              d (4 / 40)
#
# tlevel (Eq. 2): a 0, b 0+2+1 = 3, c 0+2+3 = 5, d max(3+3+2, 5+1+1) = 8
# blevel (Eq. 3): d 4, b 3+2+4 = 9, c 1+1+4 = 6, a 2+max(1+9, 3+6) = 12
# critical path a-b-d of length 12 (= tlevel + blevel of a, b and d; c has 11)
# CCR (Eq. 1) = (1+3+2+1) / (2+3+1+4) = 0.7
# DoP = work / computation-only span = 10 / (2+3+4) = 10/9
# heights (Pesto Def. 3.4): a 1, b 2, c 2, d 3


@pytest.fixture
def diamond() -> OpGraph:
    return OpGraph.from_ids("abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], kinds=["gpu", "cpu"],
                            compute=[[2, 20], [3, 30], [1, 10], [4, 40]], memory=[0, 0, 0, 0],
                            edge_cost=[1, 3, 2, 1], edge_bytes=[100, 300, 200, 100], name="diamond")


def test_tlevel_blevel(diamond):
    assert tlevel(diamond).tolist() == [0, 3, 5, 8]
    assert blevel(diamond).tolist() == [12, 9, 6, 4]
    cpath = tlevel(diamond) + blevel(diamond)
    assert cpath.tolist() == [12, 12, 11, 12]


def test_levels_on_another_kind_and_without_communication(diamond):
    # on the CPU, computation only: a-b-d = 20+30+40
    assert tlevel(diamond, kind="cpu", comm=0).tolist() == [0, 20, 20, 50]
    assert blevel(diamond, kind="cpu", comm=0).tolist() == [90, 70, 50, 40]
    assert critical_path(diamond, kind="cpu", comm=0)[0] == 90


def test_critical_path(diamond):
    length, path = critical_path(diamond)
    assert length == 12
    assert [diamond.ids[i] for i in path] == ["a", "b", "d"]
    # with c's edges made expensive the path moves to a-c-d: 2+3+1+10+4 = 20
    length, path = critical_path(diamond, comm=[1, 3, 2, 10])
    assert length == 20 and [diamond.ids[i] for i in path] == ["a", "c", "d"]


def test_ccr_and_parallelism(diamond):
    assert ccr(diamond) == pytest.approx(0.7)
    assert ccr(diamond, comm=0) == 0
    assert average_parallelism(diamond) == pytest.approx(10 / 9)
    assert average_parallelism(diamond, kind="cpu") == pytest.approx(100 / 90)


def test_heights(diamond):
    assert heights(diamond).tolist() == [1, 2, 2, 3]
    assert level_widths(diamond).tolist() == [1, 2, 1]


def test_comm_from_a_cluster(diamond):
    # two GPUs: beta0 = 0.5, beta1 = 0.01 per byte on both directed links; explicit costs
    # take cost_factor (1) times the cost, so dropping them leaves the link model
    cl = Cluster.from_links([*Cluster.single_host(2, with_cpu=False).devices],
                            default={"beta0": 0.5, "beta1": 0.01})
    no_cost = diamond.with_(edge_cost=None)
    assert edge_weights(no_cost, cl).tolist() == [1.5, 3.5, 2.5, 1.5]
    assert edge_weights(diamond, cl).tolist() == [1, 3, 2, 1]
    assert ccr(no_cost, comm=cl) == pytest.approx(9 / 10)


def test_bad_kind_and_weights(diamond):
    with pytest.raises(InputError, match="no compute column for kind 'tpu'"):
        tlevel(diamond, kind="tpu")
    partial = diamond.with_(compute=np.array([[2, 20], [np.nan, 30], [1, 10], [4, 40]], dtype=float))
    with pytest.raises(InputError, match=r"node 'b' cannot run on kind 'gpu'"):
        blevel(partial, kind="gpu")
    assert node_weights(partial).tolist() == [2, 30, 1, 4]  # fastest supported kind
    with pytest.raises(InputError, match="expected 4 edges|expected 4 values"):
        tlevel(diamond, comm=[1, 2])


def test_graph_stats(diamond):
    s = graph_stats(diamond)
    assert s["nodes"] == 4 and s["edges"] == 4
    assert s["compute_total"] == {"gpu": 10, "cpu": 100}
    # with transfers a-b-d = 12 (above the work of 10: transfers are not work); compute
    # only a-b-d = 2+3+4 = 9; CCR = mean edge (7/4) / mean node (10/4) = 0.7
    assert s["ccr"] == pytest.approx(0.7) and s["ccr_link_model"] == "explicit edge costs"
    assert s["critical_path_with_transfers"] == 12 and s["critical_path_with_transfers_nodes"] == 3
    assert s["critical_path_compute"] == 9 and s["critical_path_compute_nodes"] == 3
    assert s["work"] == 10 and s["avg_parallelism"] == pytest.approx(10 / 9)
    assert "critical_path" not in s  # the unlabelled key is gone: say what the path counts
    assert s["depth"] == 3 and s["max_width"] == 2 and s["sources"] == 1 and s["sinks"] == 1
    assert s["training"] is False and s["backward_nodes"] == 0 and s["colocation_groups"] == 0


def test_empty_and_edgeless_graphs():
    empty = OpGraph(ids=[], kinds=["gpu"], compute=np.zeros((0, 1)), memory=[], src=[], dst=[])
    s = graph_stats(empty)
    assert s["nodes"] == 0 and s["depth"] == 0 and s["avg_parallelism"] == 0
    assert s["critical_path_compute"] == 0 and s["critical_path_with_transfers"] == 0 and s["ccr"] == 0
    flat = OpGraph(ids=[1, 2, 3], kinds=["gpu"], compute=[[1.0], [2.0], [3.0]], memory=[0, 0, 0], src=[], dst=[])
    assert average_parallelism(flat) == pytest.approx(2.0)
    assert critical_path(flat)[0] == 3 and tlevel(flat).tolist() == [0, 0, 0]


def reference_blevel(g: OpGraph, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Eq. 3 by networkx: the longest path to a virtual sink, edge (u, v) weighted w_u + c_uv."""
    dg = nx.DiGraph()
    dg.add_nodes_from(range(g.n))
    for e in range(g.m):
        dg.add_edge(int(g.src[e]), int(g.dst[e]), weight=w[g.src[e]] + c[e])
    for v in range(g.n):
        dg.add_edge(v, "T", weight=w[v])
    dist = {"T": 0.0}
    for v in reversed(list(nx.topological_sort(dg))):
        if v != "T":
            dist[v] = max(dist[s] + dg.edges[v, s]["weight"] for s in dg.successors(v))
    return np.array([dist[v] for v in range(g.n)])


@pytest.mark.parametrize("training", [False, True])
def test_level_sweep_matches_networkx_and_the_loop(training):
    g = random_layered_dag(3000, seed=11, training=training, unsupported_frac=0.05)
    rng = np.random.default_rng(0)
    w, c = node_weights(g), rng.random(g.m)
    ref = reference_blevel(g, w, c)
    assert g.n >= 8 * (g.level.max() + 1)  # wide enough for the vectorised path
    np.testing.assert_allclose(_sweep(g, w, c, forward=False), ref, rtol=1e-12)
    np.testing.assert_allclose(_sweep_loop(g, w, c, False, w.copy()), ref, rtol=1e-12)
    fwd = _sweep(g, w, c, forward=True)
    np.testing.assert_allclose(fwd, _sweep_loop(g, w, c, True, np.zeros(g.n)), rtol=1e-12)
    length, path = critical_path(g, comm=c)
    assert length == pytest.approx(ref.max())
    # the path is a path, and its cost is its length
    eid = {(int(s), int(d)): e for e, (s, d) in enumerate(zip(g.src, g.dst, strict=True))}
    cost = w[path].sum() + sum(c[eid[(int(u), int(v))]] for u, v in zip(path[:-1], path[1:], strict=True))
    assert cost == pytest.approx(length)
    assert (fwd + _sweep(g, w, c, forward=False)).max() == pytest.approx(length)


def test_deep_chain_uses_the_loop():
    n = 500  # a chain: one node per level
    g = OpGraph(ids=range(n), kinds=["gpu"], compute=np.ones((n, 1)), memory=np.zeros(n),
                src=np.arange(n - 1), dst=np.arange(1, n), edge_cost=np.full(n - 1, 0.5))
    assert critical_path(g)[0] == pytest.approx(n + 0.5 * (n - 1))
    assert tlevel(g)[-1] == pytest.approx((n - 1) * 1.5)
    assert average_parallelism(g) == pytest.approx(1.0)


def test_tarnawski_training_graph_stats(tarnawski_dir):
    g = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/resnet50_training.json").graph
    s = graph_stats(g)
    assert s["training"] and s["backward_nodes"] == g.n // 2
    assert s["colocation_groups"] == len(g.colocation_labels)
    assert s["depth"] == int(heights(g).max())
    assert s["critical_path_compute"] == pytest.approx(s["work"] / s["avg_parallelism"])
    assert s["critical_path_compute"] <= s["work"] + 1e-9
    assert s["critical_path_with_transfers"] >= s["critical_path_compute"] - 1e-9  # comm only lengthens paths
    assert math.isfinite(s["ccr"]) and s["ccr"] > 0
