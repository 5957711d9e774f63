"""Link orders: the simulator replays a given order of the transfers on each link, and
Pesto's ILP hands its order (constraint (7)) to the evaluator, so a solved ILP is
replayed at its optimum.

Semantics under test (:mod:`dnnplace.evaluation.simulate`, "Link orders"): with
``policy="order"``, ``link_priorities`` (one value per edge) and congestion, a transfer
starts once its source has completed, its link is free and every transfer ranked
before it on that link has been carried; without ``link_priorities`` links stay first
come first served, bit for bit as before.

All hand-made instances below use 2 GPUs, explicit edge costs (the link time) and
``priorities = [0, 1, 2, ...]`` (node order per device = index order).
"""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest
from conftest import solver_approx
from instances import constrained_tiny_instance, pesto_tiny_instance, placements, tight_memory_instance
from test_pesto_ip import exact_any_order

from dnnplace.evaluation.link_orders import link_priorities_from_doc, link_priorities_to_json, orders_from_times
from dnnplace.evaluation.simulate import simulate, validate_schedule
from dnnplace.graphs import Cluster, OpGraph, Placement
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.registry import SolveRequest, SolverOptions, run_method

OPTS = SolverOptions(time_limit=60, threads=1, rel_gap=0.0, solver_options={"mip_abs_gap": 0.0})
TWO = Cluster.single_host(2, with_cpu=False)


def _graph(ids, edges, compute, cost, output=None):
    return OpGraph.from_ids(list(ids), edges, kinds=["gpu"], compute=[[c] for c in compute],
                            memory=[0] * len(ids), edge_cost=cost, edge_output=output)


def _order(pl):
    return np.arange(pl.graph.n, dtype=float)


# ---------------------------------------------------------------------------- hand-made instances
def test_link_order_beats_fcfs():
    """a (1) on gpu0 feeds c (edge 0, link time 2) and b (edge 1, link time 0.5) on gpu1,
    two different outputs of a (two transfers in either transfer mode), and gpu1 runs
    b (10) then c (1).

    FCFS (ties by edge id): a->c [1, 3), a->b [3, 3.5); b [3.5, 13.5); c [13.5, 14.5): 14.5.
    Link order a->b first: a->b [1, 1.5), a->c [1.5, 3.5); b [1.5, 11.5); c [11.5, 12.5): 12.5.
    """
    pl = Placement(_graph("abc", [("a", "c"), ("a", "b")], [1, 10, 1], [2.0, 0.5], [0, 1]), TWO, [0, 1, 1])
    fcfs = simulate(pl, policy="order", priorities=_order(pl))
    given = simulate(pl, policy="order", priorities=_order(pl), link_priorities=[1, 0])
    assert (fcfs.makespan, given.makespan) == (14.5, 12.5)
    assert fcfs.xfer_start.tolist() == [1.0, 3.0] and given.xfer_start.tolist() == [1.5, 1.0]
    assert (fcfs.link_order, given.link_order) == ("fcfs", "given")
    same = simulate(pl, policy="order", priorities=_order(pl), link_priorities=[0, 1])  # FCFS's own order
    assert same.makespan == 14.5
    for r in (fcfs, given):
        assert validate_schedule(r.schedule, congestion=True, transfers=r) == []


def test_link_waits_for_the_transfer_ranked_first():
    """a (1), x (5) on gpu0 (in that order); a->b and x->c (link time 1 each) to gpu1,
    which runs b (1) then c (1).

    FCFS: a->b [1, 2), b [2, 3); x [1, 6), x->c [6, 7), c [7, 8): 8.
    Link order x->c first: a->b is released at 1 but the link idles until x->c is
    carried: x->c [6, 7), a->b [7, 8); b [8, 9), c [9, 10): 10 (a given order may be worse).
    """
    pl = Placement(_graph("axbc", [("a", "b"), ("x", "c")], [1, 5, 1, 1], [1.0, 1.0]), TWO, [0, 0, 1, 1])
    fcfs = simulate(pl, policy="order", priorities=_order(pl))
    given = simulate(pl, policy="order", priorities=_order(pl), link_priorities=[1, 0])
    assert fcfs.makespan == 8.0 and given.makespan == 10.0
    assert given.xfer_start.tolist() == [7.0, 6.0]
    assert given.start.tolist() == [0.0, 1.0, 8.0, 9.0]


def test_deduplicated_transfer_takes_its_lowest_rank():
    """x (1) then a (1) on gpu0; x->d, a->b, a->c (link time 1 each) to gpu1.

    Link priorities a->b: 5, a->c: 0, x->d: 1. Per edge: a->c [2, 3), x->d [3, 4),
    a->b [4, 5). Deduplicated, a sends one tensor to gpu1 ranked min(5, 0) = 0: it goes
    first, [2, 3), then x->d [3, 4). FCFS: x->d [1, 2), then a's [2, 3).
    """
    g = _graph("xabcd", [("a", "b"), ("a", "c"), ("x", "d")], [1, 1, 1, 1, 1], [1.0, 1.0, 1.0])
    pl = Placement(g, TWO, [0, 0, 1, 1, 1])
    lp = [5, 0, 1]
    per_edge = simulate(pl, policy="order", priorities=_order(pl), link_priorities=lp, transfer_mode="per_edge")
    assert dict(zip(per_edge.xfer_edge.tolist(), per_edge.xfer_start.tolist())) == {0: 4.0, 1: 2.0, 2: 3.0}
    dedup = simulate(pl, policy="order", priorities=_order(pl), link_priorities=lp)  # the default
    assert dedup.transfer_mode == "per_destination"
    assert dict(zip(dedup.xfer_edge.tolist(), dedup.xfer_start.tolist())) == {0: 2.0, 2: 3.0}
    # the older boolean spelling still selects the modes
    legacy = simulate(pl, policy="order", priorities=_order(pl), link_priorities=lp, dedup_transfers=False)
    assert np.array_equal(legacy.xfer_start, per_edge.xfer_start)
    fcfs = simulate(pl, policy="order", priorities=_order(pl))
    assert dict(zip(fcfs.xfer_edge.tolist(), fcfs.xfer_start.tolist())) == {0: 2.0, 2: 1.0}
    # every edge of a deduplicated transfer carries its rank
    assert dedup.link_priorities().tolist() == [0.0, 0.0, 1.0]


def test_without_congestion_a_link_order_has_no_effect():
    """The first instance without congestion: both transfers start at 1; b [1.5, 11.5),
    c [11.5, 12.5) whatever the link order."""
    pl = Placement(_graph("abc", [("a", "c"), ("a", "b")], [1, 10, 1], [2.0, 0.5], [0, 1]), TWO, [0, 1, 1])
    free = simulate(pl, policy="order", priorities=_order(pl), congestion=False)
    given = simulate(pl, policy="order", priorities=_order(pl), congestion=False, link_priorities=[1, 0])
    assert given.link_order == "overlap" and given.makespan == free.makespan == 12.5
    assert np.array_equal(given.xfer_start, free.xfer_start)


def test_link_order_against_precedence_deadlocks():
    """a (gpu0) -> b (gpu1) -> c (gpu0) -> d (gpu1): link gpu0->gpu1 carries a->b, then
    c->d. Ranking c->d first makes b wait for a transfer that needs b's own output."""
    g = _graph("abcd", [("a", "b"), ("b", "c"), ("c", "d")], [1, 1, 1, 1], [1.0, 1.0, 1.0])
    pl = Placement(g, TWO, [0, 1, 0, 1])
    assert simulate(pl, policy="order", priorities=_order(pl), link_priorities=[0, 0, 1]).makespan == 7.0
    with pytest.raises(InputError, match=r"deadlocks: device 'gpu1' must run node 'b'.*"
                                         r"transfer of edge 'a'->'b' on link gpu0->gpu1.*edge 'c'->'d'"):
        simulate(pl, policy="order", priorities=_order(pl), link_priorities=[1, 0, 0])


def test_device_and_link_orders_deadlock_together():
    """y (gpu0) -> z (gpu1) -> x (gpu0) and a (gpu0) -> b (gpu1). gpu0 runs y, x, a; the
    link gpu0->gpu1 carries a->b before y->z. Either order alone replays; together y->z
    waits for a->b, a for x (device order), x for z and z for y->z: a cycle.

    Device order with FCFS links: y [0, 1), y->z [1, 2), z [2, 3), z->x [3, 4), x [4, 5),
    a [5, 6), a->b [6, 7), b [7, 8): 8. Link order with gpu0 running a, y, x: a [0, 1),
    a->b [1, 2), y [1, 2), y->z [2, 3), z [3, 4), b [4, 5), z->x [4, 5), x [5, 6): 6."""
    g = _graph("yzxab", [("y", "z"), ("z", "x"), ("a", "b")], [1] * 5, [1.0, 1.0, 1.0])
    pl = Placement(g, TWO, [0, 1, 0, 0, 1])
    device_order = np.array([0, 1, 2, 3, 4], dtype=float)  # gpu0: y, x, a; gpu1: z, b
    link_order = [1, 0, 0]  # y->z after a->b (z->x is alone on gpu1->gpu0)
    assert simulate(pl, policy="order", priorities=device_order).makespan == 8.0
    assert simulate(pl, policy="order", priorities=[1, 2, 3, 0, 4], link_priorities=link_order).makespan == 6.0
    with pytest.raises(InputError, match="deadlocks.*the given device and link orders contradict precedence"):
        simulate(pl, policy="order", priorities=device_order, link_priorities=link_order)


def test_link_priorities_are_checked():
    pl = Placement(_graph("abc", [("a", "c"), ("a", "b"), ("b", "c")], [1, 1, 1], [1.0, 1.0, 1.0]), TWO, [0, 1, 1])
    kw = dict(policy="order", priorities=_order(pl))
    with pytest.raises(InputError, match="expected 3 values"):
        simulate(pl, **kw, link_priorities=[0, 1])
    with pytest.raises(InputError, match="edge 'a'->'b' crosses gpu0->gpu1 but its value is nan"):
        simulate(pl, **kw, link_priorities=[0, np.nan, 0])
    with pytest.raises(InputError, match="use policy='order'"):
        simulate(pl, policy="fifo", link_priorities=[0, 1, 2])
    # the edge b->c does not cross: its value is ignored
    assert simulate(pl, **kw, link_priorities=[0, 1, np.nan]).makespan == simulate(pl, **kw).makespan
    with pytest.raises(InputError, match="not an edge index"):
        link_priorities_from_doc({"link_priorities": {"7": 0}}, pl.graph)


def test_zero_length_tasks_at_one_instant_replay_without_deadlock():
    """Zero compute and zero link times: every task of a schedule starts at 0, so only
    the tie rules of :func:`orders_from_times` order them; replaying both orders must
    follow precedence (no deadlock) and give 0."""
    ids = "abcdef"
    edges = [("a", "b"), ("b", "c"), ("a", "d"), ("d", "e"), ("c", "f"), ("e", "f"), ("a", "f")]
    g = _graph(ids, edges, [0] * 6, [0.0] * len(edges))
    for dev in ([0, 1, 0, 1, 0, 1], [1, 0, 0, 1, 1, 0], [0, 1, 1, 0, 1, 0]):
        pl = Placement(g, TWO, dev)
        cross = np.array([dev[g.index_of(u)] != dev[g.index_of(v)] for u, v in edges])
        zeros = np.zeros(g.m)
        pr, lp = orders_from_times(g, np.zeros(g.n), np.zeros(g.n), np.where(cross, 0.0, np.nan), zeros)
        assert np.isnan(lp[~cross]).all() and sorted(lp[cross].tolist()) == list(range(int(cross.sum())))
        assert simulate(pl, policy="order", priorities=pr, link_priorities=lp).makespan == 0.0


# ---------------------------------------------------------------------------- random placements
def random_case(seed: int) -> tuple[Placement, np.ndarray]:
    """A seeded random DAG (20-80 nodes, zero compute and byte counts included, so ties
    occur) on 2-4 GPUs with a random placement, and a random priority per node."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 80))
    src, dst = [], []
    for j in range(1, n):
        for i in rng.choice(j, size=min(int(rng.integers(1, 4)), j), replace=False).tolist():
            src.append(i)
            dst.append(j)
    g = OpGraph(ids=range(n), kinds=("gpu",), compute=rng.integers(0, 6, size=(n, 1)).astype(float),
                memory=np.zeros(n), src=src, dst=dst, edge_bytes=rng.integers(0, 5, size=len(src)).astype(float))
    D = int(rng.integers(2, 5))
    devs = Cluster.single_host(D, with_cpu=False).devices
    cl = Cluster(devs, np.full((D, D), float(rng.integers(0, 2))), np.full((D, D), float(rng.choice([0.5, 1.0]))),
                 np.ones((D, D)))
    return Placement(g, cl, rng.integers(0, D, size=n)), rng.permutation(n).astype(float)


# sha256 (first 20 hex digits) of start, finish, transfer start and transfer finish of
# all 16 runs below (4 policies x congestion on/off x dedup off/on), computed with the
# simulator of commit 3691c12, before link orders existed
FCFS_DIGESTS = {0: "b5aa645e3a4c17afe0d6", 1: "e24e8cab10e9f8c16501", 2: "a917dd3ce636026cbe77",
                3: "fb994daa9e94c31d86a7", 4: "5e2211ac8fa6316fae01", 5: "e26eeefd5bc788b949e3",
                6: "4e01f1938c8d3330d05e", 7: "f65767373558d40d43d4"}


@pytest.mark.parametrize("seed", sorted(FCFS_DIGESTS))
def test_no_link_order_is_fcfs_bit_for_bit(seed):
    pl, pr = random_case(seed)
    h = hashlib.sha256()
    for policy in ("fifo", "critical_path", "priority", "order"):
        for cong in (True, False):
            for mode in ("per_edge", "per_destination"):  # the digests' order (dedup off, on)
                given = {"priority": pr, "order": pl.graph.level + pr / pl.graph.n}.get(policy)
                r = simulate(pl, policy=policy, priorities=given, congestion=cong, transfer_mode=mode)
                assert r.link_order == ("fcfs" if cong else "overlap")
                for a in (r.start, r.finish, r.xfer_start, r.xfer_finish):
                    h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    assert h.hexdigest()[:20] == FCFS_DIGESTS[seed]


@pytest.mark.parametrize("seed", range(40))
def test_replaying_a_simulation_s_own_orders_reproduces_it(seed):
    """A FCFS run's device order and link order (by start time), replayed strictly, give
    the same schedule to the last bit; its JSON form replays the same way."""
    pl, _ = random_case(seed)
    for policy in ("fifo", "critical_path"):
        for mode in ("per_edge", "per_destination"):
            r = simulate(pl, policy=policy, transfer_mode=mode)
            lp = r.link_priorities()
            rep = simulate(pl, policy="order", priorities=r.schedule.priorities(), link_priorities=lp,
                           transfer_mode=mode)
            for a, b in ((r.start, rep.start), (r.xfer_start, rep.xfer_start), (r.xfer_finish, rep.xfer_finish)):
                assert np.array_equal(a, b)
            back = link_priorities_from_doc({"link_priorities": link_priorities_to_json(pl, lp)}, pl.graph)
            rep2 = simulate(pl, policy="order", priorities=r.schedule.priorities(), link_priorities=back,
                            transfer_mode=mode)
            assert np.array_equal(rep2.xfer_start, r.xfer_start)


# ---------------------------------------------------------------------------- Pesto, realised exactly
SEEDS = range(60)


def _pesto(inst: Instance, congestion: bool, transfer_mode: str = "per_edge"):
    """Pesto through the registry; per edge by default, the ILP's own accounting, which
    ``exact_any_order`` searches exhaustively."""
    try:
        return run_method(inst, "pesto", SolveRequest(problem="makespan", solver=OPTS, congestion=congestion,
                                                      transfer_mode=transfer_mode))
    except InputError:  # a node fits no device: named before any solve
        return None, None


@pytest.mark.parametrize("seed", SEEDS)
def test_pesto_attains_the_exhaustive_optimum(seed):
    """Plain and tight-memory tiny instances, congestion on and off, evaluated per edge
    (the ILP's accounting): the objective is never below the bound, every ``optimal``
    answer is feasible for the evaluator, and
    with an ILP solution (no coarsening, solved to optimality) the replay equals the
    exhaustive optimum of the ILP's semantics (any order on every device and link,
    ``exact_any_order``), so the answer is ``optimal``: 115 instances have a feasible
    placement (60 plain, 55 tight), 230 runs are compared. Before link orders were
    replayed (FCFS re-simulation), 9 of the 115 congested runs were ``feasible``, 6 of
    them above the ILP optimum (plain 50, 59; tight 13, 16, 22, 32); uncongested runs
    were all optimal already."""
    plain = pesto_tiny_instance(seed)
    for inst in (Instance(*plain, f"tiny{seed}"), tight_memory_instance(seed)):
        g, cl = inst.graph, inst.require_cluster()
        feasible = any(True for _ in placements(g, cl))
        for congestion in (True, False):
            res, pl = _pesto(inst, congestion)
            if res is None:  # refused as input: only where no placement exists at all
                assert not feasible, (inst.source, congestion)
                continue
            if res.bound is not None:
                assert res.objective >= res.bound - 1e-6 * max(1.0, res.bound)
            if res.status == "optimal":
                assert res.evaluation["feasible"]
            if not feasible:
                assert res.status in ("infeasible", "memory_infeasible")
                continue
            exact = exact_any_order(g, cl, congestion)
            assert res.status == "optimal", (inst.source, congestion, res.status, res.objective, exact)
            assert res.objective == solver_approx(exact)
            assert res.evaluation["objective"] == solver_approx(exact)
            if congestion and res.link_priorities:
                # the record replays: start times as device order, plus its link order
                pr = np.array([res.start[str(v)] for v in g.ids])
                lp = link_priorities_from_doc(res.to_dict(), g)
                assert simulate(pl, policy="order", priorities=pr, link_priorities=lp,
                                transfer_mode="per_edge").makespan == solver_approx(exact)


ENGINES = ["mip"] + (["cpsat"] if importlib.util.find_spec("ortools") else [])


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_pesto_is_exact_with_tight_memory_affinity_and_colocation_together(engine):
    """100 instances with every constraint family at once (:func:`constrained_tiny_instance`:
    tight GPUs, a GPU-only and a CPU-only node, a colocation pair), both congestion
    modes, 200 runs per engine (``mip``; ``cpsat`` where OR-Tools is installed): the
    objective is never below the bound, every answer is evaluator-feasible and
    ``optimal``, equals the exhaustive optimum of the engines' semantics, and with
    congestion the recorded device and link orders replay to it. (About 1 min per
    engine here; the default suite checks 20 of these instances with CP-SAT in
    ``test_pesto_cpsat.py`` and plain/tight instances above.)"""
    runs = given = 0
    for seed in range(100):
        inst = constrained_tiny_instance(seed)
        g = inst.graph
        for congestion in (True, False):
            res, pl = run_method(inst, "pesto", SolveRequest(problem="makespan", solver=OPTS, congestion=congestion,
                                                             params={"engine": engine}, transfer_mode="per_edge"))
            exact = exact_any_order(g, inst.require_cluster(), congestion)
            assert res.bound is not None and res.objective >= res.bound - 1e-6 * max(1.0, res.bound)
            assert res.evaluation["feasible"], (seed, res.evaluation["violations"])
            assert res.status == "optimal", (seed, congestion, res.status, res.objective, exact)
            assert res.objective == solver_approx(exact) and res.evaluation["objective"] == solver_approx(exact)
            if congestion and res.link_priorities:
                pr = np.array([res.start[str(v)] for v in g.ids])
                lp = link_priorities_from_doc(res.to_dict(), g)
                assert simulate(pl, policy="order", priorities=pr, link_priorities=lp,
                                transfer_mode="per_edge").makespan == solver_approx(exact)
                given += 1
            runs += 1
    assert runs == 200 and given >= 40, given


def test_coarsened_pesto_expands_its_link_order():
    """A 30-node graph coarsened to 12: the ILP's coarse link order goes to the member
    edges (each coarse edge's members in topological order) and the evaluator replays
    it; ``fallback=False`` keeps the ILP's own orders."""
    from dnnplace.graphs.generators import random_layered_dag

    g = random_layered_dag(30, seed=4, kinds=("gpu",))
    inst = Instance(g, Cluster.single_host(2, with_cpu=False), source="rand30")
    req = SolveRequest(problem="makespan", solver=SolverOptions(time_limit=10, threads=1),
                       params={"coarsen_to": 12, "fallback": False})
    res, pl = run_method(inst, "pesto", req)
    assert res.extra["coarse_nodes"] <= 12
    assert res.extra["model_size"]["link_order"] == "ilp" and res.evaluation["link_order"] == "given"
    assert res.evaluation["feasible"] and res.objective == pytest.approx(res.evaluation["objective"], rel=1e-12)
    lp = link_priorities_from_doc(res.to_dict(), g)
    cross = pl.device[g.src] != pl.device[g.dst]
    assert np.isfinite(lp[cross]).all() and np.isnan(lp[~cross]).all()
