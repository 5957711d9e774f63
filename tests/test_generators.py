"""The generator registry and the random layered DAG family."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import GENERATORS, generate, random_layered_dag
from dnnplace.graphs.io.netx import to_networkx

FIELDS = ("compute", "memory", "src", "dst", "edge_bytes", "persistent_bytes", "output_bytes", "colocation",
          "backward")


def same(a, b) -> bool:
    return a.ids == b.ids and a.layers == b.layers and all(
        np.array_equal(getattr(a, k), getattr(b, k), equal_nan=getattr(a, k).dtype.kind == "f") for k in FIELDS)


def test_registry():
    assert "random-dag" in GENERATORS
    g = generate("random-dag", n=100, seed=2)
    assert same(g, random_layered_dag(100, seed=2))
    with pytest.raises(InputError, match="unknown graph family 'lstm-grid'.*random-dag"):
        generate("lstm-grid", n=10)


@pytest.mark.parametrize("training", [False, True])
def test_deterministic_for_a_seed(training):
    a = random_layered_dag(2000, seed=5, training=training, unsupported_frac=0.1)
    b = random_layered_dag(2000, seed=5, training=training, unsupported_frac=0.1)
    c = random_layered_dag(2000, seed=6, training=training, unsupported_frac=0.1)
    assert same(a, b)
    assert not same(a, c)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001])
@pytest.mark.parametrize("training", [False, True])
def test_size_and_dag(n, training):
    g = random_layered_dag(n, seed=n, training=training)
    assert g.n == n
    assert nx.is_directed_acyclic_graph(to_networkx(g))
    assert np.all(g.topo_position[g.src] < g.topo_position[g.dst])
    assert np.all(g.src < g.dst)  # ids are already a topological order
    assert len(set(zip(g.src.tolist(), g.dst.tolist(), strict=True))) == g.m  # no parallel edges
    assert g.backward.sum() == (n // 2 if training else 0)


def test_layered_structure_and_degree():
    n, width = 20_000, 100
    g = random_layered_dag(n, seed=1, width=width)
    layers = np.asarray(g.layers)
    assert int(g.level.max()) + 1 == math.ceil(n / width) == layers.max() + 1
    np.testing.assert_array_equal(g.level, layers)  # every node reaches its layer's depth exactly
    assert np.all(layers[g.src] < layers[g.dst])
    assert 1.4 <= g.m / g.n <= 1.5  # avg_degree 1.5 minus the dropped duplicates
    indeg = np.bincount(g.dst, minlength=n)
    outdeg = np.bincount(g.src, minlength=n)
    assert np.all((indeg == 0) == (layers == 0))  # sources: the first layer only
    assert np.all((outdeg == 0) == (layers == layers.max()))  # sinks: the last layer only
    assert random_layered_dag(5000, seed=1, avg_degree=3.0).m / 5000 > 2.8


def test_costs():
    g = random_layered_dag(5000, seed=3, unsupported_frac=0.1, kinds=("gpu", "tpu", "cpu"))
    gpu, tpu, cpu = g.compute.T
    only_cpu = np.isnan(gpu)
    assert 0.05 < only_cpu.mean() < 0.15
    assert np.all(np.isnan(tpu) == only_cpu) and not np.isnan(cpu).any()  # the last kind runs everything
    ratio = cpu[~only_cpu] / gpu[~only_cpu]
    assert ratio.min() >= 5.0 and ratio.max() <= 20.0
    ratio = tpu[~only_cpu] / gpu[~only_cpu]
    assert ratio.min() >= 0.5 and ratio.max() <= 2.0
    np.testing.assert_array_equal(g.memory, g.persistent_bytes + g.output_bytes)
    np.testing.assert_array_equal(g.edge_bytes, g.output_bytes[g.src])
    assert np.all(g.output_bytes % 4 == 0) and np.all(g.output_bytes > 0)
    assert np.all(np.isnan(g.edge_cost))  # transfer times come from the cluster
    assert 0.2 < (g.persistent_bytes > 0).mean() < 0.4


def test_training_mirror():
    g = random_layered_dag(1000, seed=9, training=True)
    fwd, bwd = np.flatnonzero(~g.backward), np.flatnonzero(g.backward)
    assert fwd.size == bwd.size == 500
    for b in bwd:  # each backward node is colocated with one forward partner, runs 1.5-2.5x longer
        partner = np.flatnonzero((g.colocation == g.colocation[b]) & ~g.backward)
        assert partner.size == 1
        assert 1.5 <= g.compute[b, 0] / g.compute[partner[0], 0] <= 2.5
        assert partner[0] in g.predecessors(b)  # the stashed activation
    # backward nodes depend on forward ones, never the other way round
    assert not np.any(g.backward[g.src] & ~g.backward[g.dst])


def test_bad_arguments():
    with pytest.raises(InputError, match="n must be a positive integer"):
        random_layered_dag(0)
    with pytest.raises(InputError, match="kinds"):
        random_layered_dag(10, kinds=("gpu", "gpu"))
    with pytest.raises(InputError, match="cpu_slowdown"):
        random_layered_dag(10, cpu_slowdown=(3.0, 1.0))


def test_200k_nodes_shape():
    # speed is measured by python -m benchmarks foundation, not asserted here
    g = random_layered_dag(200_000, seed=0)
    assert g.n == 200_000 and 290_000 <= g.m <= 300_000
    assert int(g.level.max()) + 1 <= 500
