"""Cycle-free batch coarsening (Pesto Theorem 3.5): property tests.

Acyclicity is checked independently of the coarsener (networkx on the contracted edge
set), on random DAGs from hypothesis, on every bundled Tarnawski workload and on
generated graphs; a coarse schedule must expand to a valid schedule of the original
graph.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from conftest import tarnawski_root
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnplace.evaluation.simulate import simulate, validate_schedule
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.coarsening import coarsen, expand_priorities, mergeable_matching


def contracted_is_acyclic(g: OpGraph, labels: np.ndarray) -> bool:
    a, b = labels[g.src], labels[g.dst]
    keep = a != b
    G = nx.DiGraph()
    G.add_nodes_from(np.unique(labels).tolist())
    G.add_edges_from(zip(a[keep].tolist(), b[keep].tolist()))
    return nx.is_directed_acyclic_graph(G)


def check_coarsening(g: OpGraph, c, cluster=None) -> None:
    labels = c.labels
    assert labels.shape == (g.n,)
    assert set(np.unique(labels).tolist()) == set(range(c.graph.n))
    assert contracted_is_acyclic(g, labels)
    # merged node = summed compute and memory
    assert np.allclose(np.bincount(labels, weights=g.memory, minlength=c.graph.n), c.graph.memory)
    for k in range(len(g.kinds)):
        col = g.compute[:, k]
        ok = ~np.isnan(col)
        expect = np.bincount(labels, weights=np.where(ok, col, 0.0), minlength=c.graph.n)
        any_missing = np.bincount(labels, weights=(~ok).astype(float), minlength=c.graph.n) > 0
        got = c.graph.compute[:, k]
        assert np.all(np.isnan(got) == any_missing)
        assert np.allclose(got[~any_missing], expect[~any_missing])
    # never a merged node no device (kind) can run
    assert not np.all(np.isnan(c.graph.compute), axis=1).any()
    # colocation groups are never split across coarse groups
    co = g.colocation
    for grp in np.unique(co[co >= 0]).tolist():
        coarse_codes = c.graph.colocation[labels[co == grp]]
        assert len(set(coarse_codes.tolist())) == 1 and coarse_codes[0] >= 0


@st.composite
def random_dags(draw):
    n = draw(st.integers(2, 40))
    p = draw(st.floats(0.05, 0.6))
    seed = draw(st.integers(0, 10**6))
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)  # ids not in topological order
    pairs = [(int(perm[i]), int(perm[j])) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    comp = rng.uniform(0.1, 2.0, size=(n, 2))
    comp[rng.random(n) < 0.15, 0] = np.nan  # some nodes only on the second kind
    comp[np.isnan(comp).all(axis=1), 1] = 1.0
    coloc = np.full(n, -1)
    if draw(st.booleans()):
        k = int(rng.integers(1, 4))
        coloc[rng.choice(n, size=min(n, 2 * k), replace=False)] = np.repeat(np.arange(k), 2)[:min(n, 2 * k)]
        for grp in range(k):  # a group must be runnable somewhere: give members both kinds
            comp[coloc == grp] = np.nan_to_num(comp[coloc == grp], nan=1.0)
    g = OpGraph.from_ids(list(range(n)), pairs, kinds=["gpu", "cpu"], compute=comp,
                         memory=rng.uniform(0, 1, n), edge_bytes=rng.integers(1, 100, len(pairs)).astype(float),
                         colocation=coloc, colocation_labels=[f"c{i}" for i in range(max(0, coloc.max() + 1))])
    target = draw(st.integers(1, n))
    cap = draw(st.sampled_from([None, 2.0, 4.0]))
    return g, target, cap


@settings(max_examples=200, deadline=None)
@given(random_dags())
def test_random_dags_stay_acyclic(case):
    g, target, cap = case
    c = coarsen(g, target=target, weight_cap=cap)
    check_coarsening(g, c)
    # never below the target (a round merges at most the excess), never more nodes
    assert min(target, g.n) <= c.graph.n <= g.n
    # the recorded rounds each merged something and end at the returned graph
    sizes = [g.n] + [r["nodes"] for r in c.meta["rounds"]]
    assert all(a > b for a, b in zip(sizes, sizes[1:])) and sizes[-1] == c.graph.n


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_one_batch_is_acyclic(case):
    """A single matching (no re-check between merges) already gives a DAG."""
    g, _, _ = case
    match = mergeable_matching(g, g.edge_bytes, np.ones(g.m, dtype=bool))
    ends = np.concatenate([g.src[match], g.dst[match]])
    assert np.unique(ends).size == ends.size  # (i) a matching
    labels = np.arange(g.n)
    labels[g.dst[match]] = g.src[match]
    assert contracted_is_acyclic(g, labels)


def test_figure6_pair_is_not_merged_together():
    """Pesto Fig. 6: A -> C, B -> D, A -> D, B -> C. Merging (A, C) and (B, D) at once
    gives AC <-> BD. Both are weak pairs (d = 1, out/in-degree 2) at the same height
    joined by A -> D, so condition (iii) keeps only one of them."""
    g = OpGraph.from_ids(list("ABCD"), [("A", "C"), ("B", "D"), ("A", "D"), ("B", "C")], kinds=["gpu"],
                         compute=[[1.0]] * 4, memory=[0] * 4, edge_bytes=[10, 10, 1, 1])
    match = mergeable_matching(g, g.edge_bytes, np.ones(g.m, dtype=bool))
    assert match.size == 1
    c = coarsen(g, target=1, weight_cap=None)
    check_coarsening(g, c)


def test_chain_and_fork_merge_fully():
    """A chain collapses to one node; a fork a -> (b, c) -> d to one node as well."""
    chain = OpGraph.from_ids(list(range(6)), [(i, i + 1) for i in range(5)], kinds=["gpu"],
                             compute=[[1.0]] * 6, memory=[0] * 6)
    assert coarsen(chain, target=1, weight_cap=None).graph.n == 1
    fork = OpGraph.from_ids(list("abcd"), [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], kinds=["gpu"],
                            compute=[[1.0]] * 4, memory=[0] * 4)
    c = coarsen(fork, target=1, weight_cap=None)
    check_coarsening(fork, c)
    assert c.graph.n == 1


def test_affinity_and_memory_respected():
    """A CPU-only node is never merged with a GPU-only one; nodes whose summed memory
    exceeds every device stay apart."""
    g = OpGraph.from_ids(list("abc"), [("a", "b"), ("b", "c")], kinds=["gpu", "cpu"],
                         compute=[[1.0, np.nan], [np.nan, 1.0], [1.0, 1.0]], memory=[0, 6, 6])
    cl = Cluster.single_host(1, gpu_memory=10, cpu_memory=10)
    c = coarsen(g, cl, target=1, weight_cap=None)
    check_coarsening(g, c)
    assert c.graph.n == 3


WORKLOADS = sorted(str(p) for p in tarnawski_root().glob("*-inputs/*/*.json"))


def test_every_bundled_workload_is_listed():
    """An empty list would silently skip the parametrized test below."""
    assert len(WORKLOADS) == 24, WORKLOADS


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: Path(p).parent.name + "/" + Path(p).name)
def test_bundled_workloads_stay_acyclic(path):
    """Acyclic and consistent, and the coarsener really coarsens: every bundled workload
    reaches the target exactly (measured on all 24, both targets)."""
    from dnnplace.graphs.io import load_instance
    g = load_instance(path).graph
    for target in (max(1, g.n // 10), 20):
        c = coarsen(g, target=target)
        check_coarsening(g, c)
        assert c.graph.n == min(target, g.n), (target, c.graph.n)


@pytest.mark.parametrize("kw", [dict(family="random-dag", n=3000, seed=1),
                                dict(family="random-dag", n=3000, seed=2, training=True),
                                dict(family="random-dag", n=2000, seed=3, unsupported_frac=0.1),
                                dict(family="lstm", layers=2, steps=20),
                                dict(family="lstm", layers=4, steps=10, training=False)])
def test_generated_graphs_stay_acyclic_and_expand(kw):
    from dnnplace.graphs.generators import generate
    from dnnplace.heuristics.list_scheduling import heft

    g = generate(**kw)
    cl = Cluster.single_host(2)
    c = coarsen(g, cl, target=100)
    check_coarsening(g, c)
    # coarsened for real: 100 nodes, or up to 124 where colocation and affinity stop merges
    assert 100 <= c.graph.n <= g.n // 1.5, c.graph.n
    # a coarse schedule expands to a valid original schedule
    ls = heft(c.graph, cl)
    pl = Placement(g, cl, ls.placement.device[c.labels])
    pr = expand_priorities(c.labels, ls.start, g)
    sim = simulate(pl, policy="order", priorities=pr)
    assert validate_schedule(sim.schedule, transfers=sim) == []


@settings(max_examples=60, deadline=None)
@given(random_dags(), st.integers(0, 10**6))
def test_any_coarse_schedule_expands(case, seed):
    """Every coarse schedule (random device per coarse node, random linear extension of
    the coarse graph as start order) expands to an original order that replays without
    deadlock and validates."""
    g, target, _ = case
    c = coarsen(g, target=target)
    cg = c.graph
    rng = np.random.default_rng(seed)
    # random linear extension of the coarse DAG: Kahn with random picks
    indeg = np.bincount(cg.dst, minlength=cg.n)
    ready = list(np.flatnonzero(indeg == 0))
    key = np.zeros(cg.n)
    t = 0
    while ready:
        v = ready.pop(int(rng.integers(len(ready))))
        key[v] = t
        t += 1
        for w in cg.successors(v).tolist():
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    cl = Cluster.single_host(2)
    cmat = cl.compute_matrix(cg)
    dev_c = np.array([rng.choice(np.flatnonzero(~np.isnan(cmat[i]))) for i in range(cg.n)])
    # colocated coarse nodes share a device
    for grp in np.unique(cg.colocation[cg.colocation >= 0]).tolist():
        members = np.flatnonzero(cg.colocation == grp)
        ok = np.flatnonzero(~np.isnan(cmat[members]).any(axis=0))
        dev_c[members] = ok[0]
    pl = Placement(g, cl, dev_c[c.labels])
    sim = simulate(pl, policy="order", priorities=expand_priorities(c.labels, key, g))
    assert validate_schedule(sim.schedule, transfers=sim) == []


def test_lstm_generator_shape():
    """layers x steps cells of 4 ops + embed/project/loss per step + loss_sum; the
    backward pass doubles the ops and adds one update per layer. h tensors carry
    batch * hidden * 4 bytes, gate tensors four times that."""
    from dnnplace.graphs.generators import generate

    L, T, hid, b = 3, 5, 64, 8
    g = generate("lstm", layers=L, steps=T, hidden=hid, batch=b, vocab=50, training=False)
    assert g.n == T * (4 * L + 3) + 1
    gt = generate("lstm", layers=L, steps=T, hidden=hid, batch=b, vocab=50, training=True, seed=1)
    assert gt.n == 2 * g.n + L and gt.backward.sum() == g.n + L
    e = {(g.ids[s], g.ids[d]): by for s, d, by in zip(g.src, g.dst, g.edge_bytes)}
    assert e[("hidden[0,1]", "matmul[0,2]")] == b * hid * 4
    assert e[("matmul[1,1]", "gates[1,1]")] == 4 * b * hid * 4
    again = generate("lstm", layers=L, steps=T, hidden=hid, batch=b, vocab=50, training=True, seed=1)
    assert np.array_equal(again.compute, gt.compute)
    # the grid recurrence: hidden[l, t] precedes matmul[l+1, t] and matmul[l, t+1]
    R = nx.DiGraph(list(zip(g.src.tolist(), g.dst.tolist())))
    assert nx.has_path(R, g.index_of("hidden[0,0]"), g.index_of("matmul[2,4]"))
