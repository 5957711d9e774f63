"""Celeritas (docs/heuristics.md 2.8): orders, the exact fusion DP, coarse graphs, Adjusting
Placement and Order-Place, the planner's self-consistency, memory policy, METIS."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InfeasibleError
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.levels import critical_path
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.celeritas import adjust_placement, celeritas
from dnnplace.heuristics.fusion import fuse, fusion_dp
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.topo_orders import ORDERS, cpath, topo_order_by
from dnnplace.methods.base import SolveRequest, SolverOptions
from dnnplace.registry import solve


def _random_dag(seed: int, n: int, p: float = 0.35, *, mem_hi: int = 5) -> OpGraph:
    """Nodes ``0..n-1`` with random forward edges (i < j), costs and memory."""
    rng = np.random.default_rng(seed)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return OpGraph(ids=range(n), kinds=("gpu",), compute=rng.uniform(0.5, 3.0, (n, 1)),
                   memory=rng.integers(1, mem_hi, n).astype(float), src=[e[0] for e in edges],
                   dst=[e[1] for e in edges], edge_bytes=rng.uniform(1.0, 10.0, len(edges)), name=f"dag{seed}")


def _gpus(k: int, mem: float = math.inf, latency: float = 0.0) -> Cluster:
    """``k`` identical GPUs, transfer time ``latency + bytes`` (ms)."""
    devs = tuple(Device(f"gpu{i}", "gpu", mem) for i in range(k))
    return Cluster(devs, np.full((k, k), latency), np.ones((k, k)), np.ones((k, k)), name=f"{k}gpu")


def _graphs():
    """Random DAGs and generated training graphs (with colocation) of several shapes."""
    for seed in range(12):
        yield _random_dag(seed, int(np.random.default_rng(seed).integers(5, 40)))
    for seed in range(6):
        yield random_layered_dag(int(60 + 40 * seed), seed=seed, kinds=("gpu",), training=seed % 2 == 0)


# ---------------------------------------------------------------------------- orders
def test_orders_are_topological_permutations():
    cases = 0
    for g in _graphs():
        w, c = nominal_costs(g, _gpus(2), "mean")
        for name in ORDERS:
            order = topo_order_by(g, name, w, c)
            assert sorted(order.tolist()) == list(range(g.n))
            pos = np.empty(g.n, dtype=np.int64)
            pos[order] = np.arange(g.n)
            assert np.all(pos[g.src] < pos[g.dst])
            cases += 1
    assert cases == 54


def test_cpd_topo_follows_the_critical_path():
    """Each CP node comes right after its CP predecessor when that makes it ready."""
    checked = 0
    for seed in range(20):
        g = _random_dag(100 + seed, 25)
        w, c = nominal_costs(g, _gpus(2), "mean")
        order = topo_order_by(g, "cpd-topo", w, c)
        pos = np.empty(g.n, dtype=np.int64)
        pos[order] = np.arange(g.n)
        _, path = critical_path(g, kind=w, comm=c)
        cp = cpath(g, w, c)
        assert np.isclose(cp[path], cp.max()).all()
        for u, v in zip(path[:-1].tolist(), path[1:].tolist()):
            preds = g.in_nbr[g.in_ptr[v]:g.in_ptr[v + 1]]
            if pos[preds].max() == pos[u]:  # v becomes ready when u is output
                assert pos[v] == pos[u] + 1
                checked += 1
    assert checked >= 40


def test_fig3_depth_first_cuts_no_edge_where_m_topo_cuts_four():
    """Four two-node chains a_i -> b_i on two devices of four nodes each.

    M-TOPO fills [a1 a2 a3 a4 | b1 b2 b3 b4] (4 edges cut); DFS-TOPO [a1 b1 a2 b2 | a3 b3 a4 b4] (none).
    """
    ids = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    g = OpGraph.from_ids(ids, [(f"a{i}", f"b{i}") for i in range(4)], kinds=["gpu"], compute=[[1.0]] * 8,
                         memory=[1.0] * 8, edge_bytes=[1.0] * 4)
    cl = _gpus(2, mem=4.0)
    cuts = {}
    for name in ("m-topo", "dfs-topo"):
        dev = adjust_placement(g, cl, adjust=False, order=name).device
        cuts[name] = int(np.count_nonzero(dev[g.src] != dev[g.dst]))
    assert cuts == {"m-topo": 4, "dfs-topo": 0}


# ---------------------------------------------------------------------------- fusion DP
def _eq4(g: OpGraph, pos: np.ndarray, c: np.ndarray, i: int, j: int) -> float:
    """Eq. 4: edges from positions [i, j) to positions >= j."""
    ps, pd = pos[g.src], pos[g.dst]
    return float(c[(ps >= i) & (ps < j) & (pd >= j)].sum())


def _brute_force(g: OpGraph, order: np.ndarray, c: np.ndarray, R: int, M: float) -> float:
    """Least cut over all 2^(n-1) segmentations of ``order`` with |segment| <= R and
    memory <= M (singletons always allowed)."""
    n = g.n
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    masks = np.arange(2 ** (n - 1))
    cut_after = (masks[:, None] >> np.arange(n - 1)[None, :]) & 1  # a breakpoint after position k
    seg = np.concatenate([np.zeros((masks.size, 1), np.int64), np.cumsum(cut_after, axis=1)], axis=1)
    onehot = seg[:, :, None] == np.arange(n)[None, None, :]
    size = onehot.sum(axis=1)
    mem = (onehot * g.memory[order][None, :, None]).sum(axis=1)
    ok = (size <= R).all(axis=1) & ((mem <= M) | (size <= 1)).all(axis=1)
    cut = ((seg[:, pos[g.src]] != seg[:, pos[g.dst]]) * c[None, :]).sum(axis=1)
    return float(cut[ok].min())


def test_fusion_dp_equals_brute_force():
    rng = np.random.default_rng(7)
    cases = 0
    for seed in range(150):
        n = int(rng.integers(2, 13))
        g = _random_dag(1000 + seed, n, p=float(rng.uniform(0.15, 0.6)))
        c = rng.uniform(0.0, 5.0, g.m)
        order = topo_order_by(g, ORDERS[seed % 3], g.compute[:, 0], c)
        R = int(rng.integers(1, n + 1))
        M = float(rng.uniform(1.0, g.memory.sum())) if seed % 4 else math.inf
        r = fusion_dp(g, order, c, R=R, M=M)
        best = _brute_force(g, order, c, R, M)
        assert r.cut == pytest.approx(best, abs=1e-9)
        # the DP's own segmentation is allowed and cuts exactly S(n)
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        seg = r.segment[pos]
        assert float(c[seg[g.src] != seg[g.dst]].sum()) == pytest.approx(r.cut, abs=1e-9)
        sizes = np.bincount(r.segment)
        mems = np.bincount(r.segment, weights=g.memory[order])
        assert (sizes <= R).all() and ((mems <= M) | (sizes == 1)).all()
        cases += 1
    assert cases == 150


def test_eq5_recurrence_equals_eq4():
    entries = 0
    for seed in range(30):
        g = _random_dag(2000 + seed, 3 + seed % 10)
        c = np.random.default_rng(seed).uniform(0, 4, g.m)
        order = topo_order_by(g, "dfs-topo")
        pos = np.empty(g.n, dtype=np.int64)
        pos[order] = np.arange(g.n)
        table = fusion_dp(g, order, c, R=g.n, costs_table=True).table
        for j in range(1, g.n + 1):
            for i in range(j):
                assert table[i, j] == pytest.approx(_eq4(g, pos, c, i, j), abs=1e-9)
                entries += 1
    assert entries == sum((3 + s % 10) * (4 + s % 10) // 2 for s in range(30))


def test_fusion_ties_prefer_fewer_segments():
    """No edges: every segmentation cuts 0; the DP keeps one segment per window."""
    g = OpGraph(ids=range(7), kinds=["gpu"], compute=[[1.0]] * 7, memory=[0] * 7, src=[], dst=[])
    assert fusion_dp(g, np.arange(7), np.zeros(0), R=3).segment.tolist() == [0, 1, 1, 1, 2, 2, 2]


# ---------------------------------------------------------------------------- coarse graphs
def test_coarse_graphs_are_acyclic_and_preserve_sums():
    cases = 0
    for k, g in enumerate(_graphs()):
        cl = Cluster.single_host(4, interconnect="pcie", with_cpu=False, gpu_memory=float(g.memory.sum()) / 2,
                                 latency=0.0)
        R = (3, 10, 200)[k % 3]
        t = fuse(g, cl, R=R)
        cg, lab = t.graph, t.labels
        assert lab.min() == 0 and np.unique(lab).size == cg.n  # every node in exactly one cluster
        assert np.all(lab[g.src] <= lab[g.dst])  # edges never point to an earlier segment: acyclic
        assert cg.topo_order.size == cg.n
        np.testing.assert_allclose(cg.compute.sum(axis=0), g.compute.sum(axis=0))
        assert cg.memory.sum() == pytest.approx(g.memory.sum())
        sizes = np.bincount(lab)
        assert sizes.max() <= R
        assert ((cg.memory <= t.meta["M"] * (1 + 1e-12)) | (sizes == 1)).all()
        assert t.meta["ccr_after"] <= t.meta["ccr_before"] + 1e-12
        # with no link start-up cost the coarse edges carry exactly the DP's cut
        _, cc = nominal_costs(cg, cl, "mean")
        assert cc.sum() == pytest.approx(t.meta["cut"], rel=1e-9)
        # colocation: a placement honouring the coarse codes honours every group
        grp = g.colocation >= 0
        for x in np.unique(g.colocation[grp]):
            assert np.unique(cg.colocation[lab[g.colocation == x]]).size == 1
        cases += 1
    assert cases == 18


# ---------------------------------------------------------------------------- Adjusting Placement
def test_one_device_and_chains_give_the_total_work():
    cases = 0
    for seed in range(10):
        g = _random_dag(3000 + seed, 15)
        total = float(g.compute.sum())
        r = adjust_placement(g, _gpus(1))
        assert r.planner_estimate == pytest.approx(total) and (r.device == 0).all()
        n = 6 + seed
        chain = OpGraph(ids=range(n), kinds=["gpu"], compute=np.random.default_rng(seed).uniform(1, 3, (n, 1)),
                        memory=[1.0] * n, src=range(n - 1), dst=range(1, n), edge_bytes=[5.0] * (n - 1))
        r = adjust_placement(chain, _gpus(3))
        assert r.planner_estimate == pytest.approx(float(chain.compute.sum()))
        cases += 2
    assert cases == 20


def test_back_inf_with_ample_memory_stays_on_the_first_device():
    for seed in range(10):
        g = _random_dag(4000 + seed, 20)
        assert (adjust_placement(g, _gpus(3), back=math.inf).device == 0).all()


def test_back_inf_equals_order_place_on_two_devices_with_binding_memory():
    binding = 0
    for seed in range(40):
        g = _random_dag(5000 + seed, int(8 + seed % 15))
        cl = _gpus(2, mem=float(g.memory.sum()) * 0.6)
        a = adjust_placement(g, cl, back=math.inf)
        o = adjust_placement(g, cl, adjust=False)
        assert a.device.tolist() == o.device.tolist()
        binding += int((a.device == 1).any())
    assert binding == 40  # memory forced a move on every instance


def test_planner_estimate_equals_strict_order_simulation_without_congestion():
    cases = 0
    for k, g in enumerate(_graphs()):
        for D in (2, 4):
            cl = Cluster.single_host(D, interconnect="pcie", with_cpu=False,
                                     gpu_memory=float(g.memory.sum()) * 2 / D)
            run = celeritas(g, cl, R=(1, 5, 50)[k % 3])
            cp = run.coarse
            sim = simulate(Placement(run.fusion.graph, cl, cp.device), policy="order", priorities=cp.priorities,
                           congestion=False, transfer_mode="per_edge")  # the planner's model
            assert sim.makespan == pytest.approx(cp.planner_estimate, rel=1e-9, abs=1e-9)
            np.testing.assert_allclose(sim.start, cp.start, rtol=1e-9, atol=1e-9)
            cases += 1
    assert cases == 36


# ---------------------------------------------------------------------------- memory policy and methods
def test_infeasible_memory_is_reported_or_raised():
    g = _random_dag(6000, 12)
    cl = _gpus(2, mem=float(g.memory.sum()) * 0.3)  # 60 % of the memory in all
    inst = Instance(g, cl, "tight")
    for method in ("celeritas", "order-place"):
        res = solve(inst, method, SolveRequest(problem="makespan"))
        assert res.status == "memory_infeasible"
        assert res.extra["best_effort_nodes"] > 0
    with pytest.raises(InfeasibleError, match="on_oom='raise'"):
        solve(inst, "celeritas", SolveRequest(problem="makespan", params={"on_oom": "raise"}))


def test_methods_are_scored_by_fifo_simulation():
    g = random_layered_dag(400, seed=3, kinds=("gpu",), training=True)
    cl = Cluster.single_host(4, interconnect="pcie", with_cpu=False, gpu_memory=float(g.memory.sum()) / 2)
    inst = Instance(g, cl, "gen400")
    for method, params in (("celeritas", {}), ("celeritas", {"R": 1, "order": "m-topo"}), ("order-place", {}),
                           ("metis", {})):
        res = solve(inst, method, SolveRequest(problem="makespan", params=params))
        assert res.status == "feasible", (method, res.message)
        p = Placement.from_mapping(g, cl, res.placement)
        assert res.objective == pytest.approx(simulate(p, policy="fifo", congestion=True).makespan)


def test_colocation_groups_end_on_one_device():
    g = random_layered_dag(300, seed=5, kinds=("gpu",), training=True)
    assert (g.colocation >= 0).any()
    co = g.colocation
    group_mem = np.bincount(co[co >= 0], weights=g.memory[co >= 0]).max()
    cap = max(float(g.memory.sum()) / 3, 1.01 * group_mem)  # every group fits; 3 GPUs' worth in all
    cl = Cluster.single_host(4, interconnect="pcie", with_cpu=False, gpu_memory=cap)
    run = celeritas(g, cl, R=20)
    assert run.coarse.best_effort == 0 and run.colocation_repairs > 0
    dev = run.placement.device
    for x in np.unique(g.colocation[g.colocation >= 0]):
        assert np.unique(dev[g.colocation == x]).size == 1
    used = np.bincount(dev, weights=g.memory, minlength=4)
    assert (used <= cl.memory * (1 + 1e-12)).all()


# ---------------------------------------------------------------------------- reproduction
def test_c12_speed_up_arithmetic_reproduces_the_paper():
    """Table 3's speed-up column: (best of Metis, m-TOPO, m-ETF, m-SCT, HRL - Celeritas) / best."""
    from dnnplace.experiments.celeritas import Config
    from dnnplace.experiments.celeritas_tables import c12

    cfg = Config.load("celeritas-table3")
    got = {m.name: round(c12(m.paper["t3"]) * 100, 1) for m in cfg.models}
    assert got == {"Inception_V3": 7.8, "NMT": 11.0, "Transformer": 22.3, "Tensor Holography": 34.2}
    assert all(m.paper["speedup"] == f">{got[m.name]}%" for m in cfg.models)


def test_table2_quick_reproduction(tmp_path):
    from dnnplace.experiments.celeritas import reproduce

    md = reproduce("celeritas-table2", quick=True, out_dir=tmp_path / "celeritas", progress=False)
    text = md.read_text()
    assert "Tensor Holography" in text and "Inception_V3" in text
    with open(tmp_path / "celeritas-quick" / "table2.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2
    for r in rows:
        nodes, after = int(r["nodes"]), int(r["nodes_after"])
        assert math.ceil(nodes / 200) <= after < nodes
        assert float(r["ccr_after"]) < float(r["ccr"])


def test_fusion_in_front_of_the_pesto_ilp():
    """``coarsen_with=celeritas-fusion``: the ILP solves the fused graph (at least coarsen_to nodes)."""
    g = random_layered_dag(30, seed=2, kinds=("gpu",))
    cl = Cluster.single_host(2, with_cpu=False, gpu_memory=float(g.memory.sum()))
    res = solve(Instance(g, cl, "g30"), "pesto", SolveRequest(
        problem="makespan", params={"coarsen_to": 5, "coarsen_with": "celeritas-fusion"},
        solver=SolverOptions(time_limit=3.0, threads=1)))
    assert res.status in ("feasible", "optimal")
    assert 5 <= res.extra["coarse_nodes"] < g.n


def test_a_one_device_answer_says_why():
    """Celeritas puts every node on one device when memory does not bind; the result says why,
    in the terms of the code that decided it: the fusion left one coarse node (a 4-node diamond,
    R = 200), Order-Place keeps nodes where they fit, or Eq. 9 never moved a coarse node (a chain
    with transfers: each node starts earliest where its input is). An answer on several devices
    carries no such note, nor does one where memory moved nodes."""
    diamond = OpGraph.from_ids(list("abcd"), [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], kinds=["gpu"],
                               compute=[[1.0]] * 4, memory=[1] * 4, edge_bytes=[1e9] * 4)
    n = 12
    chain = OpGraph(ids=range(n), kinds=["gpu"], compute=np.linspace(1.0, 3.0, n)[:, None], memory=[1.0] * n,
                    src=range(n - 1), dst=range(1, n), edge_bytes=[5.0] * (n - 1))
    wide = OpGraph(ids=range(8), kinds=["gpu"], compute=np.ones((8, 1)), memory=[1.0] * 8, src=[], dst=[])
    cl = _gpus(3)
    notes = {}
    for name, g, params in (("fused", diamond, {}), ("order-place", chain, {"R": 1}), ("eq9", chain, {"R": 1}),
                            ("spread", wide, {"R": 1})):
        method = "order-place" if name == "order-place" else "celeritas"
        res = solve(Instance(g, cl, name), method, SolveRequest(problem="makespan", params=params))
        assert res.status == "feasible"
        notes[name] = res.message
        if res.message is not None:
            assert len(set(res.placement.values())) == 1 and res.extra["one_device"] == res.message
    assert notes["fused"].startswith("all 4 operators on gpu0: memory does not bind")
    assert "the fusion left one coarse node (at most R = 200 nodes" in notes["fused"]
    assert f"Order-Place keeps each of the {n} coarse nodes on the current device while it fits" in notes["order-place"]
    assert f"all {n} operators on gpu0: memory does not bind" in notes["eq9"]
    assert f"each of the {n} coarse nodes starts earliest on gpu0" in notes["eq9"] and "(Eq. 9)" in notes["eq9"]
    assert notes["spread"] is None
    # memory binds: a chain that does not fit one device is spread, and says nothing
    tight = solve(Instance(chain, _gpus(3, mem=n / 2), "tight"), "celeritas",
                  SolveRequest(problem="makespan", params={"R": 1}))
    assert tight.message is None and len(set(tight.placement.values())) > 1
