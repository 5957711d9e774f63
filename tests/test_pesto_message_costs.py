"""Per-message costs (docs/semantics.md 2.1) in Pesto's exact models: the MIP's (2') and
CP-SAT's (module docstrings of formulations/pesto_ip.py and formulations/pesto_cpsat.py)
against the exhaustive optimum on tiny instances, the independent schedule check, the
model's size without message costs, and the coarse models' message counts.

Shared semantics: one message per crossing edge (the simulator's
``transfer_mode="per_edge"``, Pesto's accounting); the exhaustive search
(:func:`test_pesto_ip.exact_any_order`) charges every node the per-message costs the
simulator counts (:func:`~dnnplace.evaluation.sim_costs.message_overheads`) and enumerates
every placement and every device and link order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyomo.environ as pyo
import pytest
from conftest import solver_approx
from instances import pesto_tiny_instance
from test_pesto_ip import exact_any_order, solve_ilp

from dnnplace.evaluation.link_orders import orders_from_times
from dnnplace.evaluation.sim_costs import build_transfers, message_overheads
from dnnplace.evaluation.simulate import simulate, transfer_semantics, validate_schedule
from dnnplace.formulations.multilevel.exact import coarse_messages, model_start, safe_horizon
from dnnplace.formulations.pesto_ip import PestoOptions, build_pesto_model, warm_start_values
from dnnplace.formulations.pesto_precompute import message_time
from dnnplace.formulations.pesto_solution import decode_times, ilp_orders
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.graphs.placement import Placement, Schedule
from dnnplace.heuristics.coarsening import coarsen
from dnnplace.heuristics.list_scheduling import best_list_schedule

SEEDS = (1, 2, 4, 5, 7, 10, 11, 13)  # pesto_tiny_instance: 4-6 nodes on 2 devices


def with_costs(cl: Cluster, seed: int) -> Cluster:
    """``cl`` with message costs: one value for every device on even seeds, a value per
    device on odd ones (halves: CP-SAT's time scale stays exact)."""
    sends, recvs = ([0.5, 1.0], [1.0, 0.5]) if seed % 2 else ([0.5, 0.5], [1.0, 1.0])
    devs = tuple(dataclasses.replace(d, send_overhead=sends[k % 2], recv_overhead=recvs[k % 2])
                 for k, d in enumerate(cl.devices))
    return dataclasses.replace(cl, devices=devs)


def cases():
    for seed in SEEDS:
        g, cl = pesto_tiny_instance(seed)
        assert cl.size == 2 and 4 <= g.n <= 6
        yield seed, g, cl, with_costs(cl, seed), seed % 4 in (0, 1)  # congestion on half


def _transfers(g, cl, dev, finish, xs, xf, congestion):
    """The crossing edges' transfers of a solved schedule: the model's own with
    congestion, else each as early as its source finishes (links do not queue)."""
    ce = np.flatnonzero(dev[g.src] != dev[g.dst])
    if congestion:
        return {"edge": ce, "start": xs[ce], "finish": xf[ce]}
    tt = cl.transfer_time(dev[g.src[ce]], dev[g.dst[ce]], g.edge_bytes[ce], g.edge_cost[ce])
    return {"edge": ce, "start": finish[g.src[ce]], "finish": finish[g.src[ce]] + tt}


def test_mip_optimum_with_message_costs_is_the_exhaustive_optimum_and_its_schedule_checks():
    """8 tiny instances on 2 devices (per-device overheads on 5): the MIP proves the
    exhaustive optimum; its own times pass the independent check with its transfers; the
    simulator replays its device and link orders at its optimum. The costs matter: the
    optimum is above the one without them on most instances."""
    checked = dearer = per_device = 0
    for seed, g, plain, cl, cong in cases():
        model, out = solve_ilp(g, cl, cong)
        assert out.status == "optimal", (seed, out)
        exact = exact_any_order(g, cl, cong)
        assert out.incumbent == solver_approx(exact), (seed, out.incumbent, exact)
        times = decode_times(model)
        pl, start, finish, xs, xf = times
        sched = Schedule(pl, start, finish)
        assert validate_schedule(sched, congestion=cong,
                                 transfers=_transfers(g, cl, pl.device, finish, xs, xf, cong)) == [], seed
        _, pr, lp, _ = ilp_orders(times, g, np.arange(g.n), g)
        sim = simulate(pl, policy="order", priorities=pr, congestion=cong, link_priorities=lp, transfer_mode="per_edge")
        assert sim.makespan == solver_approx(out.incumbent), seed
        assert validate_schedule(sim.schedule, congestion=cong, transfers=sim) == [], seed
        dearer += exact > exact_any_order(g, plain, cong) + 1e-9
        per_device += len(set(cl.send_overhead.tolist())) > 1
        checked += 1
    assert checked == 8 and per_device == 5 and dearer >= 6, (checked, per_device, dearer)


def _cpsat(g, cl, cong: bool, warm: bool):
    """CP-SAT on ``(g, cl)`` from the best per-edge list schedule (horizon, and hint when ``warm``)."""
    from dnnplace.formulations.pesto_cpsat import solve_pesto_cpsat
    from dnnplace.registry import SolverOptions

    with transfer_semantics("per_edge"):
        ls, ms, _ = best_list_schedule(g, cl, congestion=cong)
    sim0 = simulate(ls.placement, policy="order", priorities=ls.priorities, congestion=cong, transfer_mode="per_edge")
    start = (ls.placement.device, sim0.start, {int(e): float(s) for e, s in zip(sim0.xfer_edge, sim0.xfer_start)})
    return solve_pesto_cpsat(g, cl, horizon=ms, options=PestoOptions(congestion=cong),
                             solver=SolverOptions(time_limit=30, threads=1), warm_start=start if warm else None)


def _replay(g, times, cong: bool) -> float:
    """The simulator's makespan of CP-SAT's device and link orders, checked."""
    pl, s, f, xs, xf = times.as_tuple()
    pr, lp = orders_from_times(g, s, f, xs, xf)
    cross = pl.device[g.src] != pl.device[g.dst]
    sim = simulate(pl, policy="order", priorities=pr, congestion=cong,
                   link_priorities=lp if cong and cross.any() else None, transfer_mode="per_edge")
    assert validate_schedule(sim.schedule, congestion=cong, transfers=sim) == []
    return sim.makespan


def test_cpsat_optimum_with_message_costs_is_the_exhaustive_optimum_and_replays():
    """The same 8 instances with the CP-SAT engine: the exhaustive optimum, proven, and
    its orders replayed by the simulator at that makespan, passing the check."""
    pytest.importorskip("ortools", reason="CP-SAT engine needs the optional extra dnnplace[cpsat]")
    checked = 0
    for seed, g, _, cl, cong in cases():
        out, times = _cpsat(g, cl, cong, warm=seed % 3 != 0)
        exact = exact_any_order(g, cl, cong)
        assert out.status == "optimal" and out.incumbent == solver_approx(exact), (seed, out, exact)
        assert _replay(g, times, cong) == solver_approx(exact), seed
        checked += 1
    assert checked == 8


def test_cpsat_with_inexact_message_costs_is_a_relaxation():
    """Overheads of 1/3 and 2/7 (no exact time scale: every time rounded down) on 4 of
    the instances: CP-SAT never claims optimality, its bound is at most the exhaustive
    optimum, and its orders replay at that optimum up to the rounding."""
    pytest.importorskip("ortools", reason="CP-SAT engine needs the optional extra dnnplace[cpsat]")
    checked = 0
    for seed, g, plain, _, cong in list(cases())[:4]:
        devs = tuple(dataclasses.replace(d, send_overhead=(1 + k) / 3, recv_overhead=2 / 7)
                     for k, d in enumerate(plain.devices))
        cl = dataclasses.replace(plain, devices=devs)
        out, times = _cpsat(g, cl, cong, warm=True)
        exact = exact_any_order(g, cl, cong)
        assert out.status == "feasible" and out.bound <= exact * (1 + 1e-12), (seed, out, exact)
        assert _replay(g, times, cong) == pytest.approx(exact, rel=1e-6), seed
        checked += 1
    assert checked == 4


def _size(model) -> tuple[int, int]:
    return (sum(1 for _ in model.component_data_objects(pyo.Var)),
            sum(1 for _ in model.component_data_objects(pyo.Constraint, active=True)))


def test_without_message_costs_the_model_is_unchanged_and_with_them_one_column_per_op():
    """Without message costs the model is the one built before they existed (84
    variables and 126 constraints on this instance, measured on the commit that
    introduced the costs). With them, the products x_{id} z_e are read off the
    communication vertex y of (5): only one column mu_i and its defining row per op that
    can pay for messages, and the symmetry rows go where the costs tell the devices apart."""
    g, cl = pesto_tiny_instance(4)
    zero = build_pesto_model(g, cl, horizon=30.0)
    assert _size(zero) == (84, 126) and not hasattr(zero, "msg")
    dear = build_pesto_model(g, with_costs(cl, 0), horizon=30.0)
    k = len(dear.msg_ops)
    assert 0 < k <= g.n and _size(dear) == (84 + k, 126 + k)
    no_sym = build_pesto_model(g, cl, horizon=30.0, options=PestoOptions(symmetry=False))
    dear = build_pesto_model(g, with_costs(cl, 1), horizon=30.0)
    assert _size(no_sym) == (84, 120) and _size(dear) == (84 + k, 120 + k)


def test_the_models_accounting_is_the_simulators_per_edge():
    """message_time (the models' mu_i of (2')) equals the simulator's per-message costs
    with one transfer per edge, on 20 random placements of random graphs."""
    rng = np.random.default_rng(3)
    checked = 0
    for seed in range(10):
        g = random_layered_dag(25, seed=seed)
        cl = Cluster.from_links([Device(f"d{i}", g.kinds[0], send_overhead=0.1 * (i + 1), recv_overhead=0.05 * i)
                                 for i in range(3)], default={"beta0": 0.1})
        for _ in range(2):
            pl = Placement(g, cl, rng.integers(0, 3, g.n))
            want = message_overheads(pl, build_transfers(pl, dedup=False))
            assert np.allclose(message_time(g, cl, pl.device), want) and want.any()
            checked += 1
    assert checked == 20


def _violations(model, values, tol=1e-7) -> list[str]:
    """The constraints of ``model`` that ``values`` (a complete assignment) violate."""
    for var, val in values.items():
        var.set_value(val, skip_validation=True)
    bad = []
    for con in model.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(con.body)
        if (con.lower is not None and body < pyo.value(con.lower) - tol) or \
                (con.upper is not None and body > pyo.value(con.upper) + tol):
            bad.append(con.name)
    for var in model.component_data_objects(pyo.Var):
        if (var.lb is not None and var.value < var.lb - tol) or (var.ub is not None and var.value > var.ub + tol):
            bad.append(var.name)
    return bad


def test_a_coarse_edge_stands_for_its_messages_and_the_start_is_retimed_for_the_model():
    """A coarse edge stands for its original edges' messages (per edge: each one; per
    destination: each tensor); a schedule of the coarse graph, re-timed with those
    costs, is a complete feasible start of the model and its makespan a horizon (the
    simulator's own start, one message per coarse edge, is not)."""
    checked = 0
    for seed, cong in ((0, True), (1, False), (2, True)):
        g = random_layered_dag(40, seed=seed)
        cl = Cluster.from_links([Device(f"d{i}", g.kinds[0], send_overhead=0.2 + 0.1 * i, recv_overhead=0.3)
                                 for i in range(2)], default={"beta0": 0.5})
        cres = coarsen(g, cl, target=8)
        cg, labels = cres.graph, cres.labels
        w = coarse_messages(g, labels, cg, "per_edge")
        assert w.sum() == np.count_nonzero(labels[g.src] != labels[g.dst]) and w.max() > 1
        wd = coarse_messages(g, labels, cg, "per_destination")
        assert np.all((1 <= wd) & (wd <= w))
        dev = np.arange(cg.n) % 2  # coarse nodes alternate: many coarse edges cross
        sim = simulate(Placement(cg, cl, dev), policy="critical_path", congestion=cong, transfer_mode="per_edge")
        ms, st, xs = model_start(cg, cl, dev, sim, cong, w)
        assert sim.makespan < ms <= safe_horizon(cg, cl, w)
        model = build_pesto_model(cg, cl, horizon=ms, options=PestoOptions(congestion=cong, symmetry=False),
                                  messages=w)
        assert _violations(model, warm_start_values(model, dev, st, xs)) == [], seed
        xs0 = {int(e): float(s) for e, s in zip(sim.xfer_edge, sim.xfer_start)}
        assert _violations(model, warm_start_values(model, dev, sim.start, xs0)), seed
        checked += 1
    assert checked == 3


def test_coarsened_pipeline_hands_its_model_a_feasible_start_with_the_messages_counted(monkeypatch):
    """Through the pipeline (coarsened, per edge, the full model and its congestion-free
    start): every model gets its coarse edges' message counts, and its start satisfies every
    constraint of that model (so the horizon is a makespan of it); the answer is evaluated."""
    import dnnplace.formulations.multilevel.stages as stages
    from dnnplace.evaluation.evaluate import validate
    from dnnplace.formulations.multilevel.pesto import PipelineOptions, pesto
    from dnnplace.formulations.solvers.options import SolverOptions

    seen = []
    real = stages.solve_exact

    def spy(cg, cluster, horizon, opts, solver, engine, start, deadline=None, messages=None):
        model = build_pesto_model(cg, cluster, horizon=horizon, options=opts, messages=messages)
        seen.append((messages, _violations(model, warm_start_values(model, *start))))
        return real(cg, cluster, horizon, opts, solver, engine, start, deadline, messages)

    monkeypatch.setattr(stages, "solve_exact", spy)
    g = random_layered_dag(60, seed=1)
    cl = Cluster.from_links([Device(f"d{i}", g.kinds[0], send_overhead=0.3, recv_overhead=0.2 + 0.1 * i)
                             for i in range(3)], default={"beta0": 0.3})
    run = pesto(g, cl, PipelineOptions(coarsen_to=10, transfer_mode="per_edge", relaxed_start=0.3,
                                       solver=SolverOptions(time_limit=4, threads=1)))
    assert len(seen) == 2 and all(w is not None and w.max() > 1 and bad == [] for w, bad in seen), seen
    assert run.ilp_objective is not None and not validate(run.placement)
