"""The array-backed DAG: ids, CSR adjacency, topological order, levels, immutability."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.graphs.adjacency import csr_rows
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.graph import OpGraph

#   0 --> 1 --> 3
#    \         ^
#     -> 2 ---/      plus the isolated node 4
EDGES = [(0, 1), (0, 2), (1, 3), (2, 3)]


@pytest.fixture
def g() -> OpGraph:
    return OpGraph.from_ids([0, 1, 2, 3, 4], EDGES, kinds=["gpu", "cpu"],
                            compute=[[1, 2], [1, np.nan], [1, 2], [1, 2], [np.nan, 5]],
                            memory=[1, 2, 3, 4, 5], edge_bytes=[10, 20, 30, 40],
                            edge_cost=[np.nan, 1.0, 2.0, np.nan])


def test_sizes_ids_and_lookup(g):
    assert (g.n, g.m) == (5, 4)
    assert g.index_of(3) == g.index_of("3") == 3
    with pytest.raises(InputError, match="unknown node 9"):
        g.index_of(9)
    assert g.kind_index("cpu") == 1 and g.kind_index("tpu") == -1
    assert g.supports("gpu").tolist() == [True, True, True, True, False]
    assert g.supports("tpu").tolist() == [False] * 5


def test_csr(g):
    assert sorted(g.successors(0).tolist()) == [1, 2]
    assert sorted(g.predecessors(3).tolist()) == [1, 2]
    assert g.successors(4).size == 0 and g.predecessors(0).size == 0
    for v in range(g.n):  # out_eid points at the edge the entry came from
        for j in range(g.out_ptr[v], g.out_ptr[v + 1]):
            assert g.src[g.out_eid[j]] == v and g.dst[g.out_eid[j]] == g.out_nbr[j]
        for j in range(g.in_ptr[v], g.in_ptr[v + 1]):
            assert g.dst[g.in_eid[j]] == v and g.src[g.in_eid[j]] == g.in_nbr[j]
    assert csr_rows(np.array([0, 2, 2, 5]), np.array([2, 0])).tolist() == [2, 3, 4, 0, 1]


def test_topological_order_and_levels(g):
    assert g.level.tolist() == [0, 1, 1, 2, 0]
    assert g.topo_order.tolist() == [0, 4, 1, 2, 3]
    pos = g.topo_position
    assert all(pos[u] < pos[v] for u, v in EDGES)


def test_node_cost_and_training_flag(g):
    assert g.node_cost().tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]  # largest explicit out-edge cost
    assert not g.is_training
    assert g.with_(backward=[0, 0, 0, 1, 0]).is_training


def test_with_returns_a_new_graph(g):
    h = g.with_(memory=[0, 0, 0, 0, 0])
    assert g.memory.tolist() == [1, 2, 3, 4, 5] and h.memory.sum() == 0
    assert h.topo_order.tolist() == g.topo_order.tolist()
    with pytest.raises(AttributeError):
        g.name = "renamed"


def test_int_and_string_ids_collide():
    with pytest.raises(InputError, match="duplicate node id"):
        OpGraph(ids=[1, "1"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])


def test_edge_index_out_of_range():
    with pytest.raises(InputError, match=r"edge #0: endpoint index out of range 0..1"):
        OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[2])


def test_infinite_values_rejected():
    with pytest.raises(InputError, match="infinite compute time"):
        OpGraph(ids=["a"], kinds=["gpu"], compute=[[np.inf]], memory=[0], src=[], dst=[])
    with pytest.raises(InputError, match=r"node 'a': field 'memory' must be a finite number"):
        OpGraph(ids=["a"], kinds=["gpu"], compute=[[1.0]], memory=[np.inf], src=[], dst=[])
    with pytest.raises(InputError, match=r"edge 'a'->'b': field 'cost' must be a finite"):
        OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[1],
                edge_cost=[np.inf])


def test_wrong_lengths():
    with pytest.raises(InputError, match="'memory': expected 2 values, got 3"):
        OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0, 0], src=[], dst=[])
    with pytest.raises(InputError, match="src and dst have different lengths"):
        OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[])


def _networkx_levels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Independent of OpGraph: networkx's topological sort, then the longest-path recursion
    level(v) = max over predecessors u of level(u) + 1 (0 for a source)."""
    import networkx as nx

    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(zip(src.tolist(), dst.tolist()))
    level = [0] * n
    for u in nx.topological_sort(G):
        for v in G.successors(u):
            level[v] = max(level[v], level[u] + 1)
    return np.array(level)


def _deep_random_edges(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Each node takes up to two predecessors among the 39 nodes before it: thousands of
    narrow levels (the constructor's plain-Python step) and some wide ones."""
    v = np.repeat(np.arange(1, n), 2)
    u = v - rng.integers(1, 40, size=v.size)
    key = np.unique(u[u >= 0] * n + v[u >= 0])
    return key // n, key % n


@pytest.mark.parametrize("shape", ["wide", "deep"])
def test_large_graph_levels_match_networkx(shape):
    """Levels and topological order of large random graphs, against networkx on the same
    edges; node indices are shuffled so index order is not already topological.
    (Speed is measured by python -m benchmarks foundation, not asserted here.)"""
    rng = np.random.default_rng(1)
    if shape == "wide":
        base = random_layered_dag(100_000, seed=1)
        n, src, dst = base.n, base.src, base.dst
    else:
        n = 30_000
        src, dst = _deep_random_edges(n, rng)
    perm = rng.permutation(n)
    src, dst = perm[src], perm[dst]
    g = OpGraph(ids=list(range(n)), kinds=["gpu"], compute=np.ones((n, 1)), memory=np.zeros(n), src=src, dst=dst)
    expected = _networkx_levels(n, src, dst)
    sizes = np.bincount(expected)
    if shape == "wide":  # hundreds of levels, each wider than 16 nodes (the numpy step)
        assert len(sizes) >= 300 and sizes.min() > 16, (len(sizes), sizes.min())
    else:  # thousands of levels, nearly all narrow (the Python step), a few wide
        assert len(sizes) >= 2000 and (sizes <= 16).sum() >= 2000 and (sizes > 16).any()
    assert g.m >= n and np.array_equal(g.level, expected)
    order = g.topo_order
    assert np.array_equal(np.sort(order), np.arange(n))
    assert np.all(np.diff(expected[order]) >= 0)  # level by level
    assert np.all(g.topo_position[g.src] < g.topo_position[g.dst])
