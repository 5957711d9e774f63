"""Contraction (the one coarsening interface): quotient graphs and cycle-free labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dnnplace.graphs import OpGraph
from dnnplace.graphs.errors import CycleError
from dnnplace.graphs.transforms.contract import acyclic_labels, colocation_labels, expand, quotient


def diamond() -> OpGraph:
    #     a
    #    / \
    #   b   c      edges carry bytes 1..4 and explicit costs
    #    \ /
    #     d
    return OpGraph(ids="abcd", kinds=("gpu", "cpu"), compute=[[1, 10], [2, 20], [3, math.nan], [4, 40]],
                   memory=[1, 2, 3, 4], src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_bytes=[1, 2, 3, 4],
                   edge_cost=[0.5, 0.7, 0.2, 0.3])


def test_quotient_sums_costs_and_merges_parallel_edges():
    g = diamond()
    q = quotient(g, np.array([0, 1, 1, 2]))  # merge b and c
    assert q.n == 3 and q.m == 2
    assert q.compute[1, 0] == 5 and math.isnan(q.compute[1, 1])  # c cannot run on cpu
    assert q.memory.tolist() == [1, 5, 4]
    e = {(int(s), int(t)): (b, c) for s, t, b, c in zip(q.src, q.dst, q.edge_bytes, q.edge_cost)}
    # a -> {b,c}: one source node, largest explicit cost 0.7; {b,c} -> d: two sources, 0.2 + 0.3
    assert e[(0, 1)] == (3.0, 0.7)
    assert e[(1, 2)] == (7.0, pytest.approx(0.5))


def test_cyclic_contraction_is_refused_and_acyclic_labels_fix_it():
    g = diamond()
    bad = np.array([0, 1, 2, 0])  # {a, d} and b, c in between: a cycle
    with pytest.raises(CycleError):
        quotient(g, bad)
    lab = acyclic_labels(g, bad)
    assert len(set(lab.tolist())) == 1  # everything is one strongly connected component
    lab2 = acyclic_labels(g, np.array([0, 1, 2, 3]))
    q = quotient(g, lab2)
    assert (lab2[g.src] < lab2[g.dst]).all()  # numbered in a topological order
    assert q.n == 4


def test_colocation_labels_and_expand():
    g = diamond().with_(colocation=np.array([0, -1, 0, -1]), colocation_labels=["x"])
    lab = colocation_labels(g)
    assert lab[0] == lab[2] and len(set(lab.tolist())) == 3
    assert expand(lab, np.arange(3) * 10).tolist() == [lab[i] * 10 for i in range(4)]
