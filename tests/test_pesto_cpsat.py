"""The CP-SAT engine of Pesto's makespan model against the exhaustive optimum and the
Pyomo MIP on seeded tiny instances, and through the ``pesto`` method (``engine=cpsat``).

Both exact engines state the same model (links in any order, Pesto (7), one transfer
per edge: the simulator's ``transfer_mode="per_edge"``, used for every comparison
here); the exhaustive reference :func:`test_pesto_ip.exact_any_order` enumerates every placement and every
device and link order, so all three must agree on every instance solved to optimality.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ortools", reason="CP-SAT engine needs the optional extra dnnplace[cpsat] (pip install ortools)")

from conftest import solver_approx  # noqa: E402
from instances import constrained_tiny_instance, pesto_tiny_instance  # noqa: E402
from test_pesto_ip import OPTS, exact_any_order, solve_ilp  # noqa: E402

from dnnplace.evaluation.link_orders import orders_from_times  # noqa: E402
from dnnplace.evaluation.simulate import simulate, transfer_semantics, validate_schedule  # noqa: E402
from dnnplace.formulations.multilevel.pesto import memory_ok, safe_horizon  # noqa: E402
from dnnplace.formulations.pesto_cpsat import solve_pesto_cpsat, time_scale  # noqa: E402
from dnnplace.formulations.pesto_ip import PestoOptions  # noqa: E402
from dnnplace.graphs import Cluster, OpGraph  # noqa: E402
from dnnplace.graphs.errors import InputError  # noqa: E402
from dnnplace.graphs.instance import Instance  # noqa: E402
from dnnplace.heuristics.list_scheduling import best_list_schedule  # noqa: E402
from dnnplace.registry import SolveRequest, SolverOptions, run_method, solve  # noqa: E402

CP = SolverOptions(time_limit=30, threads=1)


def _cpsat(g, cl, congestion: bool, warm: bool = True):
    with transfer_semantics("per_edge"):  # the model's accounting: horizon and start per edge
        ls, ms, _ = best_list_schedule(g, cl, congestion=congestion)
    ok = memory_ok(ls.placement)
    start = None
    if warm and ok:
        sim = simulate(ls.placement, policy="order", priorities=ls.priorities, congestion=congestion,
                       transfer_mode="per_edge")
        start = (ls.placement.device, sim.start, {int(e): float(s) for e, s in zip(sim.xfer_edge, sim.xfer_start)})
    return solve_pesto_cpsat(g, cl, horizon=ms if ok else safe_horizon(g, cl),
                             options=PestoOptions(congestion=congestion), solver=CP, warm_start=start)


def _cases():
    """24 plain tiny instances and 36 with tight memory, affinity and colocation
    together; congestion on even seeds."""
    for seed in range(24):
        yield pesto_tiny_instance(seed), seed % 2 == 0
    for seed in range(36):
        inst = constrained_tiny_instance(seed)
        yield (inst.graph, inst.require_cluster()), seed % 2 == 0


def test_cpsat_equals_the_exhaustive_optimum_and_its_schedule_replays():
    """60 tiny instances (:func:`_cases`): CP-SAT proves the exhaustive optimum; its
    device and link orders, replayed by the simulator with the true durations,
    reproduce it exactly and validate."""
    compared = replayed = 0
    for seed, ((g, cl), cong) in enumerate(_cases()):
        out, times = _cpsat(g, cl, cong, warm=seed % 3 != 0)
        assert out.status == "optimal" and out.bound == solver_approx(out.incumbent), (seed, out)
        assert out.incumbent == solver_approx(exact_any_order(g, cl, cong)), seed
        compared += 1
        pl, s, f, xs, xf = times.as_tuple()
        pr, lp = orders_from_times(g, s, f, xs, xf)
        cross = pl.device[g.src] != pl.device[g.dst]
        sim = simulate(pl, policy="order", priorities=pr, congestion=cong,
                       link_priorities=lp if cong and cross.any() else None, transfer_mode="per_edge")
        assert sim.makespan == solver_approx(out.incumbent), seed
        assert validate_schedule(sim.schedule, congestion=cong, transfers=sim) == []
        replayed += 1
    assert compared == replayed == 60


def test_cpsat_agrees_with_the_pyomo_mip():
    """The two engines reach the same optimum on 24 tiny instances (12 plain, 12 with
    tight memory, affinity and colocation together), congestion on and off."""
    agreed = 0
    for seed in range(12):
        for inst in (Instance(*pesto_tiny_instance(seed), f"tiny{seed}"), constrained_tiny_instance(seed)):
            g, cl = inst.graph, inst.require_cluster()
            cong = (seed + len(inst.source)) % 2 == 0
            out_cp, _ = _cpsat(g, cl, cong)
            _, out_mip = solve_ilp(g, cl, cong)
            assert out_cp.status == out_mip.status == "optimal", (inst.source, out_cp.status, out_mip.status)
            assert out_cp.incumbent == solver_approx(out_mip.incumbent), inst.source
            agreed += 1
    assert agreed == 24


def test_pesto_method_with_cpsat_engine_is_exact_on_constrained_instances():
    """Through the registry (``engine=cpsat``, evaluated per edge): 20 instances with tight
    memory, affinity and colocation, both congestion modes: status ``optimal``, the re-scored objective
    equals the exhaustive optimum and the bound, the placement is evaluator-feasible
    and, with congestion, the engine's link order is what the evaluator replays."""
    checked = given = 0
    for seed in range(20):
        inst = constrained_tiny_instance(seed)
        g, cl = inst.graph, inst.require_cluster()
        for cong in (True, False):
            res, _ = run_method(inst, "pesto", SolveRequest(problem="makespan", solver=OPTS, congestion=cong,
                                                            params={"engine": "cpsat"}, transfer_mode="per_edge"))
            exact = exact_any_order(g, cl, cong)
            assert res.solver == "cpsat" and res.status == "optimal", (seed, cong, res.status, res.message)
            assert res.evaluation["feasible"]
            assert res.objective == solver_approx(exact) and res.bound == solver_approx(exact)
            assert res.objective >= res.bound - 1e-6 * max(1.0, res.bound)
            checked += 1
            given += bool(cong and res.link_priorities and res.evaluation["link_order"] == "given")
    assert checked == 40 and given >= 10, given


def test_inexact_durations_are_rounded_down_and_never_claimed_optimal():
    """Durations of 1/3 have no exact decimal scale: CP-SAT solves durations rounded
    down (a relaxation), keeps its bound (never above the true optimum) and reports
    ``feasible``; the method's answer is still a valid schedule, re-scored by the
    simulator with the true durations.

        a (1/3) -> b (1/3), a -> c (1/3), two GPUs, link time 1/3 per edge
    """
    third = 1.0 / 3.0
    g = OpGraph.from_ids(list("abc"), [("a", "b"), ("a", "c")], kinds=["gpu"], compute=[[third]] * 3,
                         memory=[0] * 3, edge_cost=[third, third])
    cl = Cluster.single_host(2, with_cpu=False)
    assert time_scale(np.array([third]), 1.0)[1] is False
    out, times = solve_pesto_cpsat(g, cl, horizon=1.0, solver=CP)
    assert out.status == "feasible" and "rounded down" in out.message
    assert out.bound <= 1.0 and out.bound == pytest.approx(1.0, abs=1e-6)
    assert out.incumbent == pytest.approx(1.0, abs=1e-6)  # all on one device: 3 x 1/3
    res = solve(Instance(g, cl, "thirds"), "pesto", SolveRequest(problem="makespan", solver=CP,
                                                               params={"engine": "cpsat"}))
    # the method's bound is then only the combinatorial one, which (transfer-aware) counts a's tail:
    # b and c after a on its GPU (2/3) or one of them a 1/3 transfer away, so 1/3 + 2/3 = the
    # answer, proved optimal without the rounded model's bound
    assert res.status == "optimal" and res.bound == pytest.approx(1.0, rel=1e-12)
    assert res.objective == pytest.approx(1.0, rel=1e-12)


def _thirds(g: OpGraph) -> OpGraph:
    """``g`` with every compute time and tensor size divided by 3: no decimal scale is exact."""
    return g.with_(compute=g.compute / 3.0, edge_bytes=g.edge_bytes / 3.0)


def test_rounded_down_model_bounds_the_exhaustive_optimum_on_inexact_instances():
    """On 24 tiny instances with times divided by 3 (inexact: durations rounded
    down, transfer-aware windows, the combinatorial bound on C_max), CP-SAT's bound is at
    most the exhaustive optimum, and the orders of its proven (rounded) optimum replay,
    with the true durations, at the exhaustive optimum up to the rounding (one unit of
    1e-8 of the horizon per task)."""
    checked = 0
    for seed in range(24):
        g0, cl = pesto_tiny_instance(seed)
        g, cong = _thirds(g0), seed % 2 == 0
        out, times = _cpsat(g, cl, cong)
        exact = exact_any_order(g, cl, cong)
        assert out.status == "feasible" and out.termination == "optimal", (seed, out)
        assert out.bound <= exact * (1 + 1e-12), (seed, out.bound, exact)
        pl, s, f, xs, xf = times.as_tuple()
        pr, lp = orders_from_times(g, s, f, xs, xf)
        cross = pl.device[g.src] != pl.device[g.dst]
        sim = simulate(pl, policy="order", priorities=pr, congestion=cong,
                       link_priorities=lp if cong and cross.any() else None, transfer_mode="per_edge")
        assert sim.makespan == pytest.approx(exact, rel=1e-6), (seed, sim.makespan, exact)
        checked += 1
    assert checked == 24


def test_strengthening_and_lower_bound_search_keep_the_exhaustive_optimum():
    """With and without the transfer-aware windows, the combinatorial bound on
    C_max and the all-devices cumulative (``comm_windows``), and with the settings of
    ``benchmarks pesto-gap`` (two workers, one of them CP-SAT's lower-bound search), CP-SAT
    proves the exhaustive optimum on 12 tiny instances (24 solves): no strengthening
    cuts it off."""
    lb_search = SolverOptions(time_limit=30, threads=2,
                              solver_options={"cpsat_parameters": {"subsolvers": ["objective_lb_search"]}})
    checked = 0
    for seed in range(12):
        inst = constrained_tiny_instance(seed) if seed % 2 else Instance(*pesto_tiny_instance(seed), f"tiny{seed}")
        g, cl, cong = inst.graph, inst.require_cluster(), seed % 3 != 0
        exact = exact_any_order(g, cl, cong)
        with transfer_semantics("per_edge"):
            ls, ms, _ = best_list_schedule(g, cl, congestion=cong)
        horizon = ms if memory_ok(ls.placement) else safe_horizon(g, cl)
        for strong in (False, True):
            out, _ = solve_pesto_cpsat(g, cl, horizon=horizon, solver=lb_search,
                                       options=PestoOptions(congestion=cong, comm_windows=strong))
            assert out.status == "optimal" and out.incumbent == solver_approx(exact), (seed, strong, out)
            checked += 1
    assert checked == 24


def test_engine_option_is_checked():
    inst = Instance(*pesto_tiny_instance(1), "tiny1")
    with pytest.raises((InputError, ValueError), match="engine"):
        solve(inst, "pesto", SolveRequest(problem="makespan", params={"engine": "gecode"}))


def test_fractional_memory_is_rounded_safely():
    """Two independent unit-time nodes of 1.5 bytes, GPUs of 2.5 bytes: they cannot
    share a GPU (makespan 1). Bytes are rounded up and capacities down, so the answer
    fits, but the stricter model's bound is dropped and ``feasible`` reported."""
    from dnnplace.graphs.cluster import Device

    g = OpGraph.from_ids(["a", "b"], [], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[1.5, 1.5])
    cl = Cluster((Device("g0", "gpu", 2.5), Device("g1", "gpu", 2.5)), np.zeros((2, 2)), np.ones((2, 2)),
                 np.ones((2, 2)))
    out, times = solve_pesto_cpsat(g, cl, horizon=2.0, solver=CP)
    assert out.status == "feasible" and out.bound is None and out.incumbent == 1.0
    assert times.placement.device[0] != times.placement.device[1]
