"""The makespan heuristics plan with the per-message costs (docs/semantics.md 2.1,
per-message costs; the estimate in :mod:`dnnplace.heuristics.message_costs`): without
them their answers are the ones they always were; where messages are dear they send
fewer and their plans run no slower than the plans made without knowing the costs."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.evaluation.evaluate import evaluate
from dnnplace.graphs import Cluster, Device, OpGraph, Placement
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io.native import cluster_from_dict, cluster_to_dict
from dnnplace.heuristics.message_costs import mean_message_time
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.schedule_state import ScheduleState
from dnnplace.methods.base import SolveRequest
from dnnplace.registry import solve

#: The makespan methods whose plans must change where messages are dear, with their options
#: (Celeritas with a fusion window of 3 nodes: its default fuses these small graphs into one
#: node, which leaves nothing to place).
AWARE = {"heft": {}, "etf": {}, "m-etf": {}, "m-sct": {}, "cpop": {}, "dpos": {}, "os-dpos": {},
         "dpos+congestion": {"planner_congestion": True}, "celeritas": {"R": 3}, "pardnn": {}, "dsc-glb": {}}


def _name(key: str) -> str:
    return key.split("+")[0]


def towers(lens=(10, 6, 3)) -> OpGraph:
    """Parallel branches: a source ``s`` feeds one chain per entry of ``lens`` (unit
    compute), all joining in a sink ``t``."""
    ids, edges = ["s", "t"], []
    for j, n in enumerate(lens):
        ids += [f"{j}_{i}" for i in range(n)]
        edges += [("s", f"{j}_0"), (f"{j}_{n - 1}", "t")] + [(f"{j}_{i}", f"{j}_{i + 1}") for i in range(n - 1)]
    return OpGraph.from_ids(ids, edges, kinds=["gpu"], compute=[[1.0]] * len(ids), memory=[0] * len(ids),
                            edge_bytes=[1e3] * len(edges))


def two_gpus(overhead: float) -> Cluster:
    devs = [Device(f"g{i}", "gpu", send_overhead=overhead, recv_overhead=overhead) for i in range(2)]
    return Cluster.from_links(devs, default={"beta0": 0.1, "beta1": 1e-9})


def _device(res, g: OpGraph, cl: Cluster) -> np.ndarray:
    return np.array([cl.names.index(res.placement[str(v)]) for v in g.ids], dtype=np.int64)


def _rescored(res, g: OpGraph, cl: Cluster) -> float:
    """The evaluator's makespan of ``res``'s placement on ``cl``, replayed as the registry
    scored it (its order where the method gave one, else its policy)."""
    p = Placement(g, cl, _device(res, g, cl))
    if res.evaluation["policy"] == "order":
        start = np.array([res.start[str(v)] for v in g.ids])
        rank = np.empty(g.n, dtype=np.int64)
        rank[np.lexsort((g.topo_position, start))] = np.arange(g.n)
        return evaluate(p, "makespan", policy="order", priorities=rank).objective
    return evaluate(p, "makespan", policy=res.evaluation["policy"]).objective


def test_a_message_is_estimated_once_per_tensor_and_destination():
    """a (1) on g0 feeds b and c (1 each) on g1 (send 0.5, recv 0.25, link 0.1): b's input
    arrives at 1 + 0.5 + 0.1 and b runs 1 + 0.25 (it takes the message in); c reads the
    tensor b's message brought: same arrival, no new message. Per edge, c's is a second one."""
    g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["gpu"], compute=[[1.0]] * 3, memory=[0] * 3)
    devs = [Device("g0", "gpu", send_overhead=0.5, recv_overhead=0.25),
            Device("g1", "gpu", send_overhead=0.5, recv_overhead=0.25)]
    cl = Cluster.from_links(devs, default={"beta0": 0.1})
    seen = []
    for mode in ("per_destination", "per_edge"):
        st = ScheduleState(g, cl, congestion=True, insertion=True, transfer_mode=mode)
        st.commit(0, 0, 0.0, st.evaluate(0, 0)[2])
        s, f, xf = st.evaluate(1, 1)
        assert (s, f, len(xf)) == (1.6, 2.85, 1)
        st.commit(1, 1, s, xf)
        s, f, xf = st.evaluate(2, 1)
        seen.append((s, f, len(xf)))
    # per destination: c waits for b on g1 and runs 1; per edge: its own message (posted at
    # 1.5, behind b's on the link until 1.6, arriving 1.7) and 1 + 0.25 after b
    assert seen == [(2.85, 3.85, 0), (2.85, 4.1, 1)]
    # placement-free priorities add the mean message cost to every edge's nominal time
    plain = Cluster.from_links([Device("g0", "gpu"), Device("g1", "gpu")], default={"beta0": 0.1})
    assert mean_message_time(cl) == 0.75 and mean_message_time(plain) == 0.0
    assert np.allclose(nominal_costs(g, cl, "mean")[1], nominal_costs(g, plain, "mean")[1] + 0.75)


def test_without_message_costs_every_plan_is_the_one_without_the_fields():
    g = towers()
    plain = Cluster.from_links([Device(f"g{i}", "gpu") for i in range(2)], default={"beta0": 0.1, "beta1": 1e-9})
    doc = cluster_to_dict(plain)
    doc.update(send_overhead=0.0, recv_overhead=0.0)  # the fields given, as 0
    zero = cluster_from_dict(doc)
    assert not zero.has_message_costs
    checked = 0
    for key, params in AWARE.items():
        a = solve(Instance(g, plain), _name(key), SolveRequest("makespan", params=dict(params)))
        b = solve(Instance(g, zero), _name(key), SolveRequest("makespan", params=dict(params)))
        assert a.placement == b.placement and a.objective == b.objective, key
        checked += 1
    assert checked == len(AWARE) == 11


def test_dear_messages_make_every_method_send_fewer_and_run_no_slower():
    """Three parallel chains (10, 6 and 3 unit nodes) on two GPUs, the link 0.1: without
    message costs every method splits the chains over both GPUs; with a message costing
    each end 10 (ten nodes' compute) it sends fewer messages, and its plan runs no slower
    on the dear cluster than the plan it made without knowing the costs."""
    g = towers()
    cheap, dear = two_gpus(0.0), two_gpus(10.0)
    checked = 0
    for key, params in AWARE.items():
        for mode in ("per_destination", "per_edge") if key in ("heft", "dpos+congestion") else ("per_destination",):
            blind = solve(Instance(g, cheap), _name(key), SolveRequest("makespan", params=dict(params),
                                                                       transfer_mode=mode))
            aware = solve(Instance(g, dear), _name(key), SolveRequest("makespan", params=dict(params),
                                                                      transfer_mode=mode))
            assert blind.status == aware.status == "feasible", (key, blind.status, aware.status)
            sent_blind = blind.evaluation["transfers"]
            assert sent_blind >= 2, key
            assert aware.evaluation["transfers"] < sent_blind, (key, mode, aware.evaluation["transfers"])
            with_costs = _rescored(blind, g, dear) if mode == "per_destination" else None
            if with_costs is not None:
                assert aware.objective <= with_costs + 1e-9, (key, aware.objective, with_costs)
            checked += 1
    assert checked == len(AWARE) + 2


def _dear(cl: Cluster, g: OpGraph, rng: np.random.Generator) -> Cluster:
    """``cl`` with per-message costs drawn per device up to half the mean compute time."""
    scale = float(np.nanmean(g.compute))
    devs = tuple(Device(d.name, d.kind, d.memory, d.speed, send_overhead=float(rng.uniform(0, 0.5)) * scale,
                        recv_overhead=float(rng.uniform(0, 0.5)) * scale) for d in cl.devices)
    return Cluster(devs, cl.beta0, cl.beta1, cl.cost_factor, name=cl.name)


def test_lazy_etf_queues_equal_the_full_scan_with_message_costs():
    """ETF / m-ETF / m-SCT with per-message costs: a message committed for one reader of a
    tensor lowers the keys of its other ready readers on that device, which the lazy
    queues re-file; their schedules equal the full scan's bit for bit (60 instances, 180
    schedules)."""
    from test_list_scheduling import _equivalence_cases, _reference_etf_core  # tests/ is on sys.path

    from dnnplace.heuristics import list_scheduling as lsm

    checked = 0
    for seed, g, cl, congestion, insertion in _equivalence_cases(60):
        cl = _dear(cl, g, np.random.default_rng(seed))
        fav = {}
        real = lsm._etf_core
        lsm._etf_core = lambda *a, fav=fav, **k: fav.setdefault("fav", k["favourite"])
        try:
            lsm.m_sct(g, cl)
        finally:
            lsm._etf_core = real
        runs = [("etf", dict(insertion=insertion, congestion=congestion, memory=seed % 5 != 0), None),
                ("m-etf", dict(insertion=False, congestion=congestion, memory=True), None),
                ("m-sct", dict(insertion=False, congestion=congestion, memory=True), fav["fav"])]
        for name, kw, favourite in runs:
            fast = lsm._etf_core(g, cl, name, favourite=favourite, **kw)
            ref = _reference_etf_core(g, cl, name, favourite=favourite, **kw)
            where = (seed, name, kw)
            assert np.array_equal(fast.placement.device, ref.placement.device), where
            assert np.array_equal(fast.start, ref.start) and np.array_equal(fast.finish, ref.finish), where
            checked += 1
    assert checked == 180


MAKESPAN_HEURISTICS = ("heft", "etf", "m-topo", "m-etf", "m-sct", "cpop", "dpos", "os-dpos", "celeritas",
                       "order-place", "pardnn", "cp-mayer", "lc-glb", "dsc-glb")


@pytest.mark.parametrize("mode", ["per_destination", "per_edge"])
def test_random_graphs_with_message_costs_give_evaluator_valid_answers(mode):
    """12 seeded random DAGs on 2-3 GPUs with per-message costs: every makespan heuristic's
    answer is one the evaluator finds feasible (its objective no lower than the bound)."""
    checked = 0
    for seed in range(12):
        rng = np.random.default_rng(100 + seed)
        g = random_layered_dag(int(rng.integers(15, 40)), seed=seed)
        cl = _dear(Cluster.single_host(int(rng.integers(2, 4)), with_cpu=False), g, rng)
        assert cl.has_message_costs
        for name in MAKESPAN_HEURISTICS:
            params = {"R": 4} if name in ("celeritas", "order-place") else {}
            if name == "dpos" and seed % 2:
                params = {"planner_congestion": True}
            res = solve(Instance(g, cl), name, SolveRequest("makespan", params=params, transfer_mode=mode))
            assert res.status in ("feasible", "optimal"), (seed, name, res.status, res.message)
            assert res.objective >= res.lower_bound - 1e-9, (seed, name)
            checked += 1
    assert checked == 12 * len(MAKESPAN_HEURISTICS)
