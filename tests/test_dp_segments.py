"""Cross-block stages by sorted queries (heuristics/dp_segments.py).

Checked: the cut-node detection on small DAGs; the separation (**) of a cross-block
stage's load, memory and CPU time against a direct count of docs/semantics.md 2.2 on
every cross-block pair of ideals of random chains of blobs; the DP with the queries
against the DP that walks every superset and against the exhaustive optimum.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from instances import dp_costs
from test_maxload_dp import brute_force

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators.cells import cell_network
from dnnplace.graphs.instance import Instance
from dnnplace.heuristics.dp_prepare import prepare as _prepare
from dnnplace.heuristics.dp_segments import narrow_cuts
from dnnplace.heuristics.maxload_dp import maxload_dp


def _blob_chain(seed: int, blobs: int, size: tuple[int, int], skip: float = 0.0,
                devices: tuple[int, int] | None = None) -> Instance:
    """Random DAG blobs joined in a chain by single nodes (cut nodes), random costs with
    ties, sometimes a binding memory limit; with probability ``skip`` an extra edge jumps
    over the cuts of the first half (which then are no block borders)."""
    rng = np.random.default_rng(seed)
    edges, n, prev = [], 1, 0
    for _ in range(blobs):
        m = int(rng.integers(size[0], size[1] + 1))
        nodes = list(range(n, n + m))
        n += m
        for i, v in enumerate(nodes):
            ins = [u for u in nodes[:i] if rng.random() < 0.4]
            for u in ins or [prev]:
                edges.append((u, v))
        join = n
        n += 1
        for v in nodes:
            if not any(u == v for u, _ in edges) or rng.random() < 0.3:
                edges.append((v, join))
        if rng.random() < 0.3:
            edges.append((prev, join))
        prev = join
    if rng.random() < skip:
        u = int(rng.integers(1, n // 2))
        edges.append((u, n - 2 if n - 2 > u else n - 1))
    edges = sorted(set(edges))
    return dp_costs(rng, n, edges, cpu_only=None, full_memory=0.5, devices=devices)


def test_narrow_cuts():
    """Cuts of a chain, a diamond, a cell network (the stem and every concat); not a cut
    that an edge jumps over; none where a node is apart."""
    chain = narrow_cuts(3, np.array([0, 1]), np.array([1, 2]))
    assert chain.tolist() == [True, True, True]
    assert narrow_cuts(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])).tolist() == [True, False, False, True]
    # 0 -> {1, 2} -> 3 -> 4, plus 1 -> 4 jumping over the cut 3: 3 is no border
    jump = narrow_cuts(5, np.array([0, 0, 1, 2, 3, 1]), np.array([1, 2, 3, 3, 4, 4]))
    assert jump.tolist() == [True, False, False, False, True]
    assert narrow_cuts(3, np.array([0]), np.array([1])) is None
    g = cell_network(seed=0, cells=3, branches=3, branch_len=(2, 3))
    cut = narrow_cuts(g.n, g.src, g.dst)
    names = [g.ids[v] for v in np.flatnonzero(cut)]
    assert names == ["stem", "cell0/concat", "cell1/concat", "cell2/concat"]


def _stage_load(a: dict, term_node: list[np.ndarray], s: set[int]) -> float:
    """docs/semantics.md 2.2 counted directly: compute of ``s`` plus each transfer term
    whose owner is in ``s`` with a target outside, or outside with a target inside."""
    load = float(sum(a["acc_c"][x] for x in s))
    for t in range(a["owner"].size):
        inside = [y in s for y in term_node[t]]
        if (a["owner"][t] in s and not all(inside)) or (a["owner"][t] not in s and any(inside)):
            load += float(a["cost"][t])
    return load


def test_cross_block_stage_separates():
    """(**) on every pair of ideals ``I`` in an earlier block than ``J`` of 12 chains of
    blobs and 3 cell networks: ``F(J) - E(I)`` is the stage's load counted directly, and memory and CPU time
    are differences; counts the pairs checked."""
    pairs = 0
    cells = [cell_network(seed=s, cells=2, branches=2, branch_len=(2, 3)) for s in range(3)]
    insts = [_blob_chain(seed, 3, (2, 3)) for seed in range(12)]
    insts += [Instance(g, Cluster.tarnawski(3, 1, float(g.memory.sum()))) for g in cells]
    for seed, inst in enumerate(insts):
        prep = _prepare(inst, linear=False)
        a, lat = prep.arrays, prep.lattice
        assert "seg" in a, seed
        seg = a["seg"]
        # the targets of every term, from the owner-side CSR of the kernel
        term_node = [[] for _ in range(a["owner"].size)]
        for y in range(a["acc_c"].size):
            for q in range(a["tgt_ptr"][y], a["tgt_ptr"][y + 1]):
                term_node[a["tgt_term"][q]].append(y)
        sets = [set(lat.nodes(i).tolist()) for i in range(lat.size)]
        blk = np.searchsorted(seg["starts"], np.arange(lat.size), side="right") - 1
        for i, j in itertools.combinations(range(lat.size), 2):
            if blk[i] >= blk[j]:
                continue
            s = sets[j] - sets[i]
            assert sets[i] <= sets[j]
            assert seg["F"][j] - seg["E"][i] == pytest.approx(_stage_load(a, term_node, s), abs=1e-9)
            assert seg["mem_i"][j] - seg["mem_i"][i] == pytest.approx(sum(a["mem"][x] for x in s))
            assert seg["cpu_i"][j] - seg["cpu_i"][i] == pytest.approx(sum(a["cpu_c"][x] for x in s))
            pairs += 1
    assert pairs == 1923, pairs


def _agree(inst: Instance, **kw) -> bool:
    """Queries = walks (value; the placement re-scored by the evaluator); whether the
    queries were used."""
    on = maxload_dp(inst, segments=True, **kw)
    off = maxload_dp(inst, segments=False, **kw)
    if np.isinf(off.value):
        assert np.isinf(on.value) and on.placement is None
        return False
    assert on.complete and on.value == pytest.approx(off.value, rel=1e-9, abs=1e-9)
    ev = maxload(on.placement, contiguity="both")
    assert ev.feasible and ev.objective == pytest.approx(on.value, rel=1e-9)
    return "seg" in _prepare(inst, linear=False).arrays


def test_segments_equal_brute_force():
    """The DP with the queries = exhaustive optimum on 16 chains of 2 blobs (5-7 nodes, 3
    devices)."""
    checked = 0
    for seed in range(16):
        inst = _blob_chain(500 + seed, 2, (1, 2), devices=(3, 0) if seed % 2 else (2, 1))
        expected = brute_force(inst)
        res = maxload_dp(inst, segments=True)
        assert "seg" in _prepare(inst, linear=False).arrays
        if np.isinf(expected):
            assert np.isinf(res.value)
            continue
        assert res.value == pytest.approx(expected, rel=1e-9, abs=1e-9)
        checked += 1
    assert checked >= 12, checked


@pytest.mark.parametrize("prune", [True, False])
def test_segments_equal_walks(prune):
    """Queries = walks on 40 chains of 2-4 blobs (with or without a jump over a cut) and
    on 8 cell networks with 2 clusters each; the queries ran on most of them."""
    used = checked = 0
    for seed in range(40):
        inst = _blob_chain(seed, 2 + seed % 3, (2, 4), skip=0.3)
        used += _agree(inst, prune=prune)
        checked += 1
    for seed in range(8):
        g = cell_network(seed=seed, cells=3, branches=3, branch_len=(2, 3))
        for k, cpus in ((3, 1), (2, 2)):
            used += _agree(Instance(g, Cluster.tarnawski(k, cpus, float(g.memory.sum()) / 2)), prune=prune)
            checked += 1
    assert checked == 56
    assert used >= 40, used


def test_segments_under_a_time_limit_bracket_the_optimum():
    """A run cut by the time limit (no time at all) still brackets the optimum with the
    queries on, on 8 cell networks."""
    checked = 0
    for seed in range(8):
        g = cell_network(seed=seed, cells=3, branches=3, branch_len=(2, 3))
        inst = Instance(g, Cluster.tarnawski(3, 1, float(g.memory.sum()) / 2))
        opt = maxload_dp(inst, segments=False).value
        cut = maxload_dp(inst, time_limit=0.0)
        assert cut.lower_bound <= opt + 1e-9 <= cut.value + 2e-9
        checked += 1
    assert checked == 8
