"""PARDNN (Qararyah et al. 2021) and its clustering baselines: docs/heuristics.md 3.8.

Slicing partitions V into paths and its first primary is a longest path (brute force);
known optima on chains and disjoint chains; the star example of the lookahead; Eq. 1's
two forms agree and the Fenwick span sums equal brute-force sums; the memory tracker
equals the simulator's dynamic peak; the FIFO emulator on a hand-made schedule;
heuristic I's success implies a simulated peak within 0.9 * cap; heuristic II on the
paper's 70/60-30/40 example; a memory limit no placement meets is reported, never
silently violated.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from instances import pesto_tiny_instance

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs import Cluster, OpGraph, Placement
from dnnplace.graphs.cluster import Device
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.levels import critical_path
from dnnplace.heuristics.clustering import cp_mayer, dsc, dsc_glb, lc_glb
from dnnplace.heuristics.pardnn import pardnn
from dnnplace.heuristics.pardnn_mapping import LevelSums, eq1_target, lflam
from dnnplace.heuristics.pardnn_memory import balance_residuals, memory_heuristic_i, residual_scores
from dnnplace.heuristics.pardnn_slicing import linear_clusters, slice_graph, target_costs, target_devices
from dnnplace.heuristics.pardnn_tracker import track
from dnnplace.registry import SolveRequest, SolverOptions, solve


def _gpus(k: int, memory: float = float("inf"), beta0: float = 0.0, beta1: float = 0.0) -> Cluster:
    return Cluster.from_links([Device(f"gpu{i}", "gpu", memory) for i in range(k)],
                              default={"beta0": beta0, "beta1": beta1})


def _random_graph(seed: int) -> OpGraph:
    """4-9 nodes, random forward edges, integer costs (exact sums)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 10))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.35]
    return OpGraph.from_ids(list(range(n)), pairs, kinds=["gpu"], compute=rng.integers(1, 6, (n, 1)).astype(float),
                            memory=np.zeros(n), edge_cost=rng.integers(0, 4, len(pairs)).astype(float))


def _longest_path(g: OpGraph, w: np.ndarray, c: np.ndarray) -> float:
    """Brute force: every source-to-sink path, enumerated depth first."""
    best = 0.0
    edge = {(int(u), int(v)): float(c[e]) for e, (u, v) in enumerate(zip(g.src, g.dst))}

    def walk(v: int, length: float) -> None:
        nonlocal best
        succ = g.successors(v).tolist()
        if not succ:
            best = max(best, length)
        for s in succ:
            walk(s, length + edge[(v, s)] + w[s])

    for v in np.flatnonzero(g.in_ptr[1:] == g.in_ptr[:-1]).tolist():
        walk(v, w[v])
    return best


def _path_length(g: OpGraph, path: np.ndarray, w: np.ndarray, c: np.ndarray) -> float:
    edge = {(int(u), int(v)): float(c[e]) for e, (u, v) in enumerate(zip(g.src, g.dst))}
    return float(w[path].sum()) + sum(edge[(int(a), int(b))] for a, b in zip(path[:-1], path[1:]))


# ---------------------------------------------------------------------------- slicing
def test_slicing_partitions_into_paths_and_primary_one_is_a_longest_path():
    checked = 0
    for seed in range(60):
        g = _random_graph(seed)
        w, c = g.compute[:, 0], np.nan_to_num(g.edge_cost)
        edges = set(zip(g.src.tolist(), g.dst.tolist()))
        for k in (1, 2, 3):
            s = slice_graph(g, w, c, k)
            nodes = np.concatenate(s.clusters)
            assert sorted(nodes.tolist()) == list(range(g.n))  # a partition of V
            for cl in s.clusters:
                assert all((int(a), int(b)) in edges for a, b in zip(cl[:-1], cl[1:]))  # each a path
            assert _path_length(g, s.clusters[0], w, c) == _longest_path(g, w, c)
            checked += 1
    assert checked == 180


def test_more_primaries_than_paths_leaves_them_empty():
    g = OpGraph.from_ids("ab", [("a", "b")], kinds=["gpu"], compute=[[1.0], [2.0]], memory=[0, 0])
    s = slice_graph(g, g.compute[:, 0], np.ones(1), 4)
    assert [p.tolist() for p in s.primaries] == [[0, 1], [], [], []] and s.secondaries == []
    r = pardnn(g, _gpus(4))
    assert r.placement.device.tolist() == [0, 0]


def test_linear_clustering_recomputes_every_path():
    checked = 0
    for seed in range(30):
        g = _random_graph(seed)
        w, c = g.compute[:, 0], np.nan_to_num(g.edge_cost)
        s = linear_clusters(g, w, c)
        assert s.k == len(s.clusters) and sorted(np.concatenate(s.clusters).tolist()) == list(range(g.n))
        # each cluster is a critical path of the graph left after removing the earlier ones
        left = np.ones(g.n, dtype=bool)
        for cl in s.clusters:
            keep = np.flatnonzero(left)
            sub = OpGraph.from_ids(keep.tolist(), [(int(u), int(v)) for u, v in zip(g.src, g.dst)
                                                   if left[u] and left[v]], kinds=["gpu"],
                                   compute=w[keep][:, None], memory=np.zeros(keep.size))
            sub_c = np.array([c[e] for e in range(g.m) if left[g.src[e]] and left[g.dst[e]]])
            assert _path_length(g, cl, w, c) == _longest_path(sub, w[keep], sub_c)
            left[cl] = False
            checked += 1
    assert checked == 108  # clusters over the 30 graphs


# ---------------------------------------------------------------------------- known optima
def test_chain_goes_on_one_device():
    # a -> b -> c -> d: every transfer costs, K=2 gives one device and makespan sum w = 10
    g = OpGraph.from_ids("abcd", [("a", "b"), ("b", "c"), ("c", "d")], kinds=["gpu"],
                         compute=[[1.0], [2.0], [3.0], [4.0]], memory=[0] * 4, edge_bytes=[1.0] * 3)
    r = solve(Instance(g, _gpus(2, beta0=1.0)), "pardnn", SolveRequest(problem="makespan"))
    assert r.objective == 10.0 and len(set(r.placement.values())) == 1


def test_two_equal_disjoint_chains_get_one_device_each():
    # a -> b -> c and d -> e -> f (1 + 2 + 3 each), K=2: makespan = chain length 6
    g = OpGraph.from_ids("abcdef", [("a", "b"), ("b", "c"), ("d", "e"), ("e", "f")], kinds=["gpu"],
                         compute=[[1.0], [2.0], [3.0]] * 2, memory=[0] * 6, edge_bytes=[1.0] * 4)
    r = solve(Instance(g, _gpus(2, beta0=1.0)), "pardnn", SolveRequest(problem="makespan"))
    assert r.objective == 6.0
    assert r.placement["a"] == r.placement["b"] == r.placement["c"] != r.placement["d"] == r.placement["e"]


def test_star_singleton_joins_its_primary_when_the_span_has_room():
    # a -> b1..b4, all w = 1, c = 0.5; K=2: primaries a-b1 and b2; b3 is totally
    # communicating with primary 1 and L_1 + 1 = 2 <= W/K = 4/2 (a): lookahead maps it;
    # b4 then fails (a)-(c) and Eq. 1 (L = [2, 1], comm = [0.5, 0]) sends it to primary 2
    g = OpGraph.from_ids(["a", "b1", "b2", "b3", "b4"], [("a", f"b{i}") for i in range(1, 5)], kinds=["gpu"],
                         compute=[[1.0], [1.2], [1.1], [1.0], [1.0]], memory=[0] * 5)
    w = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    c = np.full(4, 0.5)
    s = slice_graph(g, g.compute[:, 0], c, 2)
    assert [cl.tolist() for cl in s.clusters] == [[0, 1], [2], [3], [4]]
    m = lflam(g, w, c, s)
    assert m.lookahead_mapped == 1 and m.balanced == 1
    assert m.primary_of.tolist() == [0, 0, 1, 0, 1]


# ---------------------------------------------------------------------------- Eq. 1 and Fenwick sums
def test_eq1_forms_agree_with_ties():
    rng = np.random.default_rng(0)
    checked = ties = 0
    for _ in range(2000):
        k = int(rng.integers(1, 6))
        load = rng.integers(0, 4, k).astype(float)
        comm = rng.integers(0, 3, k).astype(float)
        total = comm.sum()
        naive = [(load[p] + (total - comm[p]), -comm[p], p) for p in range(k)]  # Eq. 1 as printed
        best = min(naive)
        ties += sum(1 for x in naive if x[0] == best[0]) > 1
        assert eq1_target(load, comm) == best[2]
        checked += 1
    assert checked == 2000 and ties == 466


def test_fenwick_span_sums_equal_brute_force_after_every_merge():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(20):
        size, rows = int(rng.integers(1, 40)), int(rng.integers(1, 5))
        fs = LevelSums(rows, size)
        dense = np.zeros((rows, size))
        for _ in range(30):  # a merge adds a node's work at its level rank
            r, i, v = int(rng.integers(rows)), int(rng.integers(size)), float(rng.integers(1, 9))
            fs.add(r, i, v)
            dense[r, i] += v
            a, b = sorted(rng.integers(0, size + 1, 2).tolist())
            assert np.array_equal(fs.between(a, b), dense[:, a:b].sum(axis=1))
            checked += 1
    assert checked == 600


# ---------------------------------------------------------------------------- emulator and tracker
def test_emulator_and_tracker_on_a_hand_made_schedule():
    # a(1) -> b(2), c(1) on gpu0; a -> d(3) on gpu1 (transfer 0.5); b, d -> e(1) on gpu0.
    # FIFO: b and c are ready at 1 on gpu0, b first (topological order): b [1,3), c [3,4);
    # d [1.5, 4.5); d->e arrives at 5: e [5, 6).
    g = OpGraph.from_ids("abcde", [("a", "b"), ("a", "c"), ("a", "d"), ("b", "e"), ("d", "e")], kinds=["gpu"],
                         compute=[[1.0], [2.0], [1.0], [3.0], [1.0]], memory=[0] * 5,
                         output_bytes=[4, 2, 1, 8, 1], edge_bytes=[1.0] * 5)
    res = simulate(Placement(g, _gpus(2, beta0=0.5), [0, 0, 0, 1, 0]), policy="fifo", congestion=False)
    assert res.start.tolist() == [0.0, 1.0, 3.0, 1.5, 5.0]
    # gpu0: a's 4 B live [0, 4) (until c), b's 2 B [1, 6), c's [3, 4), d's copy 8 B [4.5, 6), e's [5, 6): peak 11
    # gpu1: a's copy [1, 4.5), d's 8 B [1.5, 5) (until its transfer ends): peak 12
    tr = track(res)
    assert tr.peak.tolist() == [11.0, 12.0] == res.peak_memory.tolist()
    assert tr.first_overflow(np.array([10.0, 100.0])) == (5.0, 0, 11.0)
    assert tr.potential(0, 5.0) == {1: 2.0, 4: 11.0, 3: 8.0}  # b's tensor and d's copy are freed by e


def test_tracker_equals_the_simulator_peak():
    checked = 0
    for seed in range(40):
        g = random_layered_dag(15 + 5 * seed, seed=seed, training=seed % 2 == 0, kinds=("gpu",))
        rng = np.random.default_rng(seed)
        for cong in (False, True):
            res = simulate(Placement(g, Cluster.single_host(3, with_cpu=False), rng.integers(0, 3, g.n)),
                           policy="fifo", congestion=cong)
            assert np.array_equal(track(res).peak, res.peak_memory)
            checked += 1
    assert checked == 80


# ---------------------------------------------------------------------------- memory heuristic I
def _tight(seed: int, k: int, share: float) -> tuple[OpGraph, Cluster, np.ndarray]:
    g = random_layered_dag(60 + 10 * (seed % 5), seed=seed, training=True, kinds=("gpu",))
    free = pardnn(g, _gpus(k), memory="none")
    peak = track(simulate(free.placement, policy="fifo", congestion=False)).peak
    cap = share * float(peak.max()) / 0.9
    return g, Cluster.single_host(k, with_cpu=False, gpu_memory=cap), free.placement.device


def test_memory_heuristic_i_success_means_peak_within_the_margin():
    succeeded = failed = 0
    for seed in range(24):
        g, cl, start = _tight(seed, 2 + seed % 3, 0.8)
        targets = target_devices(g, cl)
        w, c = target_costs(g, cl, targets)
        cap_eff = 0.9 * cl.memory
        dev, out = memory_heuristic_i(g, cl, start, cap_eff, w=w, c=c, targets=targets)
        assert int((dev != start).sum()) <= out.moved_nodes  # a node never moves twice (nor back)
        # each greedy knapsack covers its overflow, except the one that ends a pass
        assert sum(got < need for need, got, _ in out.knapsack) <= out.emulations
        if out.success:
            assert out.moved_units > 0
            peak = simulate(Placement(g, cl, dev), policy="fifo", congestion=False).peak_memory
            assert (peak <= cap_eff * (1 + 1e-12)).all()
            succeeded += 1
        else:  # e.g. one colocated pair of weights larger than any free room: the least overflow seen
            before = track(simulate(Placement(g, cl, start), policy="fifo", congestion=False)).peak
            assert np.maximum(out.peak - cap_eff, 0).sum() <= np.maximum(before - cap_eff, 0).sum()
            failed += 1
    assert (succeeded, failed) == (13, 11)


def test_memory_limit_no_placement_meets_is_reported():
    # the weights alone exceed all GPUs together: no placement fits
    g = random_layered_dag(80, seed=3, training=True, kinds=("gpu",))
    cap = float(g.persistent_bytes.sum()) / 3
    inst = Instance(g, Cluster.single_host(2, with_cpu=False, gpu_memory=cap))
    r = solve(inst, "pardnn", SolveRequest(problem="makespan"))
    assert r.status == "memory_infeasible" and r.placement is not None
    assert r.memory_model == "dynamic" and r.evaluation["memory_feasible"]["dynamic"] is False
    peaks = r.extra["emulated_peak"]
    assert set(peaks) == {"gpu0", "gpu1"} and max(peaks.values()) > cap
    assert all(r.evaluation["devices"][d]["peak_memory"] is not None for d in peaks)
    assert "over capacity" in r.message


def test_static_infeasible_but_dynamic_feasible():
    # every tensor is freed after use: the dynamic peak is far below the static sum
    g = random_layered_dag(200, seed=5, kinds=("gpu",), param_frac=0.0)
    free = pardnn(g, _gpus(2), memory="none")
    res = simulate(free.placement)
    cap = float(max(res.peak_memory.max() * 1.5, 1.0))
    assert res.static_memory.max() > cap  # static model: over
    inst = Instance(g, Cluster.single_host(2, with_cpu=False, gpu_memory=cap))
    r = solve(inst, "pardnn", SolveRequest(problem="makespan"))
    assert r.status == "feasible" and r.evaluation["memory_feasible"] == {"static": False, "dynamic": True}
    r2 = solve(inst, "cp-mayer", SolveRequest(problem="makespan"))
    assert r2.memory_model == "static" and r2.status == "memory_infeasible"


# ---------------------------------------------------------------------------- memory heuristic II
def test_residual_balancing_moves_colocation_groups_together_towards_one():
    # partition 0: 70 % of the normal memory, residual pairs (variable + its update op,
    # one colocation group) of 10 % each, six of them; partition 1 the rest
    n_var = 10
    ids = ["n0", "n1"] + [f"v{i}" for i in range(n_var)] + [f"u{i}" for i in range(n_var)]
    coloc = [-1, -1] + list(range(n_var)) + list(range(n_var))
    g = OpGraph(ids=ids, kinds=["gpu"], compute=[[1.0]] * len(ids), memory=[0] * len(ids),
                src=[], dst=[], output_bytes=[70, 30] + [0] * 2 * n_var,
                persistent_bytes=[0, 0] + [10] * n_var + [0] * n_var, colocation=coloc)
    dev = np.array([0, 1] + [0] * 6 + [1] * 4 + [0] * 6 + [1] * 4)
    parts = np.array([0, 1])
    before = residual_scores(g, dev, parts)
    new, moved = balance_residuals(g, _gpus(2), dev, parts)
    after = residual_scores(g, new, parts)
    assert before.round(6).tolist() == [1.3, 0.7] and after.round(6).tolist() == [1.0, 1.0] and moved == 3
    assert all(new[2 + i] == new[2 + n_var + i] for i in range(n_var))  # groups stay together


def test_heuristic_ii_and_both_run_end_to_end():
    g = random_layered_dag(300, seed=2, training=True)
    for memory in ("II", "II+I", "none"):
        r = solve(Instance(g, Cluster.single_host(4)), "pardnn",
                  SolveRequest(problem="makespan", params={"memory": memory}))
        assert r.status == "feasible" and r.extra["memory_heuristic"] == memory


# ---------------------------------------------------------------------------- baselines
def test_cp_mayer_keeps_the_critical_path_together():
    checked = 0
    for seed in range(30):
        g = random_layered_dag(60, seed=seed, kinds=("gpu",))
        cl = Cluster.single_host(3, with_cpu=False)
        w, c = target_costs(g, cl, target_devices(g, cl))
        _, path = critical_path(g, kind=w, comm=c)
        dev = cp_mayer(g, cl).placement.device
        assert np.unique(dev[path]).size == 1
        # every other node went to the least-loaded GPU at its turn: final loads within one node
        load = np.bincount(dev, weights=w, minlength=3)
        rest = np.setdiff1d(np.arange(3), dev[path[:1]])
        if rest.size == 2:
            assert abs(load[rest[0]] - load[rest[1]]) <= w.max() + 1e-9
        checked += 1
    assert checked == 30


def test_dsc_on_a_fork_join_and_chains():
    # a chain is one cluster; a fork-join with heavy edges collapses onto one cluster
    g = OpGraph.from_ids("abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], kinds=["gpu"],
                         compute=[[1.0]] * 4, memory=[0] * 4)
    cid, tl = dsc(g, g.compute[:, 0], np.full(4, 10.0))
    assert len(set(cid.tolist())) == 1 and tl.tolist() == [0.0, 1.0, 2.0, 3.0]
    cid, tl = dsc(g, g.compute[:, 0], np.full(4, 0.1))  # cheap edges: b and c run in parallel
    assert len(set(cid.tolist())) == 2 and tl[3] == pytest.approx(2.1)


def test_baselines_place_every_node_and_respect_affinity():
    checked = 0
    for seed in range(20):
        g, cl = pesto_tiny_instance(seed)
        for f in (cp_mayer, dsc_glb, lc_glb, lambda a, b: pardnn(a, b, memory="none")):
            pl = f(g, cl).placement
            comp = cl.compute_matrix(g)
            assert not np.isnan(comp[np.arange(g.n), pl.device]).any()
            checked += 1
    assert checked == 80


def test_lc_time_limit_still_places_everything():
    g = random_layered_dag(400, seed=1)
    r = solve(Instance(g, Cluster.single_host(4)), "lc-glb",
              SolveRequest(problem="makespan", solver=SolverOptions(time_limit=0.0)))
    assert r.status == "feasible" and len(r.placement) == g.n and r.termination == "time_limit"


@pytest.mark.parametrize("method", ["pardnn", "cp-mayer", "lc-glb", "dsc-glb"])
def test_registered_methods_run_and_are_rescored(method):
    g = random_layered_dag(150, seed=4, training=True)
    r = solve(Instance(g, Cluster.single_host(3)), method, SolveRequest(problem="makespan"))
    assert r.status == "feasible" and r.objective > 0
    assert set(r.evaluation["memory_feasible"]) == {"static", "dynamic"}


def test_small_instances_pardnn_never_worse_than_one_device_by_much():
    """Not a paper claim: a sanity bound. PARDNN's makespan stays within the serial time
    plus the transfers it creates on 30 tiny instances (counted)."""
    checked = 0
    for seed, k in itertools.product(range(15), (2, 3)):
        g = random_layered_dag(40, seed=seed, kinds=("gpu",))
        cl = Cluster.single_host(k, with_cpu=False)
        r = pardnn(g, cl, memory="none")
        ms = simulate(r.placement).makespan
        serial = float(g.compute[:, 0].sum())
        assert ms <= serial + simulate(r.placement).link_busy.sum() + 1e-9
        checked += 1
    assert checked == 30


def _naive_balancing(g: OpGraph, w: np.ndarray, c: np.ndarray, s) -> list[int]:
    """Level-aware balancing written out: brute-force span sums and Eq. 1 as printed."""
    from dnnplace.heuristics.pardnn_slicing import clustered_levels

    tl, bl = clustered_levels(g, w, c, s.cluster_of)
    sink = float((tl + w).max())
    owner = np.full(g.n, -1)
    for p, nodes in enumerate(s.primaries):
        owner[nodes] = p
    secs = s.secondaries
    crit = [tl[x[0]] + w[x].sum() + bl[x[-1]] - w[x[-1]] for x in secs]
    order = sorted(range(len(secs)), key=lambda j: (-crit[j], -w[secs[j]].sum(), g.topo_position[secs[j][0]]))
    for j in order:
        x = secs[j]
        lo = max((tl[p] + w[p] for p in g.predecessors(x[0])), default=0.0)
        hi = min((tl[q] for q in g.successors(x[-1])), default=sink)
        in_span = (tl >= lo) & (tl < hi)
        load = np.array([w[(owner == p) & in_span].sum() for p in range(s.k)])
        comm = np.zeros(s.k)
        for e in range(g.m):
            a, b = int(g.src[e]), int(g.dst[e])
            if (a in x) != (b in x):
                o = b if a in x else a
                if owner[o] >= 0:
                    comm[owner[o]] += c[e]
        score = [(load[p] + comm.sum() - comm[p], -comm[p], p) for p in range(s.k)]
        owner[x] = min(score)[2]
    return owner.tolist()


def test_balancing_equals_a_naive_implementation_on_random_graphs():
    checked = 0
    for seed in range(40):
        g = _random_graph(seed)
        w, c = g.compute[:, 0], np.nan_to_num(g.edge_cost)
        for k in (2, 3):
            s = slice_graph(g, w, c, k)
            assert lflam(g, w, c, s, lookahead=False).primary_of.tolist() == _naive_balancing(g, w, c, s)
            checked += 1
    assert checked == 80


def test_reproduction_reads_its_configs():
    """The reproduction's models and configs parse; the stand-ins keep the paper's node counts."""
    from dnnplace.experiments.config import load
    from dnnplace.experiments.pardnn import NAMES, _models

    assert NAMES == ("pardnn-speedup", "pardnn-memory")
    for name in NAMES:
        models = _models(load(name))
        assert [m.nodes for m in models] == [10578, 22748, 55756, 187742, 204792]
        assert all(m.paper["nodes"] == m.nodes for m in models)


_TINY = '''
reproduction = "pardnn"
name = "tiny-{kind}"
kind = "{kind}"
cluster = {{ gpu_memory = 4e6, interconnect = "nvlink" }}
gpus = [1, 2, 4]
quick_gpus = [{gpus}]
reference = "PARDNN I"
max_batch = 8

[methods]
"PARDNN I" = "pardnn"
CP = "cp-mayer"

[[models]]
name = "tiny-pardnn-{kind}"
nodes = 30
batch = 4
paper = {{ nodes = 30, dop = 2.0, ccr = 1.0, max_batch = [1, 2, 4, 8, 16], x_dp = [1, 1, 1, 1, 1] }}
generator = {{ family = "random-dag", n = 30, seed = 3, training = true, kinds = ["gpu"] }}
'''


@pytest.mark.parametrize("kind, gpus, runs", [("speedup", "2, 4", 4), ("memory", "1, 2", None)])
def test_reproduction_resumes_from_its_records(kind, gpus, runs, tmp_path, monkeypatch):
    """A rerun reads every run back from ``runs.jsonl`` (none executed, the file and table
    unchanged); ``fresh`` runs them all again and keeps the old file and table as backups."""
    import json

    from dnnplace.experiments import pardnn as P

    calls: list[str] = []

    def counting(inst, method, req):
        calls.append(method)
        return solve(inst, method, req)

    monkeypatch.setattr(P, "solve", counting)
    cfg = tmp_path / f"tiny-{kind}.toml"
    cfg.write_text(_TINY.format(kind=kind, gpus=gpus))
    md = P.reproduce(str(cfg), quick=True, out_dir=tmp_path / "out", progress=False)
    path = md.parent / "runs.jsonl"
    first, table = path.read_text(), md.read_text()
    recs = [json.loads(line) for line in first.splitlines()]
    n = len(calls)
    assert n == len(recs) > 0 and len({r["run_key"] for r in recs}) == n
    if runs is not None:
        assert n == runs  # 2 methods x 2 GPU counts
    else:  # 1 and 2 GPUs, batches 1..8 until the first dynamic OOM
        assert {r["cell"]["gpus"] for r in recs} == {1, 2}
    assert all("placement" not in r and r["config"] == md.parent.name for r in recs)

    P.reproduce(str(cfg), quick=True, out_dir=tmp_path / "out", progress=False)
    assert len(calls) == n  # nothing executed again
    assert path.read_text() == first
    assert _without_timestamp(md.read_text()) == _without_timestamp(table)

    P.reproduce(str(cfg), quick=True, out_dir=tmp_path / "out", progress=False, fresh=True)
    assert len(calls) == 2 * n
    backups = sorted(p.name for p in md.parent.glob("*.bak"))
    assert len(backups) == 3 and any(b.startswith("runs.jsonl.") for b in backups)
    (old,) = md.parent.glob("runs.jsonl.*.bak")
    assert old.read_text() == first
    assert len(path.read_text().splitlines()) == n


def _without_timestamp(text: str) -> str:
    import re

    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?( UTC)?", "", text)


def test_records_without_run_keys_are_kept_aside(tmp_path):
    """A ``runs.jsonl`` of before run keys (nothing to resume from) is kept as a backup, not appended to."""
    from dnnplace.experiments import pardnn as P

    cfg = tmp_path / "tiny-speedup.toml"
    cfg.write_text(_TINY.format(kind="speedup", gpus="2"))
    out = tmp_path / "out" / "speedup-quick"
    out.mkdir(parents=True)
    legacy = '{"problem": "makespan", "method": "pardnn", "cell": {"model": "x", "gpus": 2}}\n'
    (out / "runs.jsonl").write_text(legacy)
    P.reproduce(str(cfg), quick=True, out_dir=tmp_path / "out", progress=False)
    (old,) = out.glob("runs.jsonl.*.bak")
    assert old.read_text() == legacy
    assert all("run_key" in line for line in (out / "runs.jsonl").read_text().splitlines())
