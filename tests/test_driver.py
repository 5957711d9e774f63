"""The solver driver: outcomes, warm starts and traces per backend, licence errors.

Instances are tiny max-load/latency IPs whose optimum is known by exhaustive search
(the evaluator is the reference), or a closed-form knapsack.
"""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pyomo.environ as pyo
import pytest
from conftest import solver_approx
from instances import gurobi_is_size_limited, maxload_tiny_instance

from dnnplace.evaluation.evaluate import maxload, validate
from dnnplace.formulations.maxload_ip import MaxLoadOptions, build_maxload_ip, decode, warm_start_values
from dnnplace.formulations.solvers.driver import SolveOutcome, available_solvers, solve_model
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement
from dnnplace.registry import SolveRequest, SolverOptions, solve

HAS_GUROBI = importlib.util.find_spec("gurobipy") is not None
gurobi = pytest.mark.skipif(not HAS_GUROBI, reason="gurobipy not installed")
HAS_SCIP = importlib.util.find_spec("pyscipopt") is not None
scip = pytest.mark.skipif(not HAS_SCIP, reason="pyscipopt not installed (pip install 'dnnplace[scip]')")


def knapsack() -> pyo.ConcreteModel:
    """max 5a + 4b + 3c s.t. 2a + 3b + c <= 4 over binaries: optimum a = c = 1, value 8
    (as a minimisation of the negated value: -8)."""
    m = pyo.ConcreteModel()
    m.goods = pyo.Set(initialize=["a", "b", "c"])
    m.x = pyo.Var(m.goods, within=pyo.Binary)
    m.cap = pyo.Constraint(expr=2 * m.x["a"] + 3 * m.x["b"] + m.x["c"] <= 4)
    m.obj = pyo.Objective(expr=-(5 * m.x["a"] + 4 * m.x["b"] + 3 * m.x["c"]))
    return m


def infeasible() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(within=pyo.Binary)
    m.y = pyo.Var(within=pyo.Binary)
    m.c = pyo.Constraint(expr=m.x + m.y >= 3)
    m.obj = pyo.Objective(expr=m.x + m.y)
    return m


def path_packing(n: int) -> pyo.ConcreteModel:
    """min -(x_0 + ... + x_{n-1}) s.t. x_i + x_{i+1} <= 1 over binaries: n variables,
    n - 1 constraints, optimum -ceil(n / 2) (every other x set)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), within=pyo.Binary)
    m.pairs = pyo.Constraint(range(n - 1), rule=lambda m, i: m.x[i] + m.x[i + 1] <= 1)
    m.obj = pyo.Objective(expr=-sum(m.x[i] for i in range(n)))
    return m


def _tiny(seed: int):
    return maxload_tiny_instance(seed, training=seed % 2 == 1)


def _optimum(inst, contiguity="both"):
    """Exhaustive optimum (PipeDream objective) and one optimal placement."""
    g, cl = inst.graph, inst.cluster
    best, best_p = np.inf, None
    for combo in itertools.product(range(cl.size), repeat=g.n):
        p = Placement(g, cl, np.array(combo))
        if validate(p, contiguity=contiguity):
            continue
        v = maxload(p, contiguity=contiguity).objective
        if v < best:
            best, best_p = v, p
    return best, best_p


BACKENDS = ["highs", pytest.param("gurobi", marks=[pytest.mark.gurobi, gurobi]), pytest.param("scip", marks=scip)]


@pytest.mark.parametrize("solver", BACKENDS)
def test_outcome_fields(solver):
    out = solve_model(knapsack(), SolverOptions(solver))
    assert isinstance(out, SolveOutcome)
    assert out.status == "optimal" and out.termination == "optimal"
    assert out.incumbent == pytest.approx(-8) and out.bound == pytest.approx(-8) and out.gap == pytest.approx(0)
    assert out.solver == solver and out.solver_version and out.n_vars == 3 and out.n_cons == 1
    assert out.n_binaries == 3


@pytest.mark.parametrize("solver", BACKENDS)
def test_infeasible_is_a_status_not_an_exception(solver):
    out = solve_model(infeasible(), SolverOptions(solver))
    assert out.status == "infeasible" and out.incumbent is None


def test_unknown_or_missing_solver_is_an_error_result():
    out = solve_model(knapsack(), SolverOptions("no_such_solver_xyz"))
    assert out.status == "error" and out.message


@pytest.mark.parametrize("solver", ["highs", pytest.param("scip", marks=scip)])
def test_time_limit_with_warm_start_is_feasible_result(tarnawski_dir, solver):
    """A time limit with an incumbent is a result: the gnmt layer graph (96 nodes)
    cannot be closed in 0.5 s, the greedy start is the incumbent to beat."""
    from dnnplace.graphs.io import load_instance
    from dnnplace.heuristics.baselines import greedy_fill

    inst = load_instance(tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json")
    m = build_maxload_ip(inst, MaxLoadOptions(contiguity="both"))
    start = greedy_fill(inst.graph, inst.cluster)
    ws = warm_start_values(m, start)
    # SCIP presolves this model for about 0.7 s before its first bound: give it 3 s
    out = solve_model(m, SolverOptions(solver, time_limit=0.5 if solver == "highs" else 3.0), warm_start=ws)
    assert out.termination == "time_limit" and out.status == "feasible"
    assert out.incumbent <= maxload(start, contiguity="both").objective + 1e-9
    assert out.bound is not None and out.bound <= out.incumbent and out.gap > 0
    assert maxload(decode(m), contiguity="both").objective <= out.incumbent + 1e-9


@pytest.mark.parametrize("solver", BACKENDS)
def test_warm_start_optimum_is_first_incumbent(solver):
    """Per backend: a model started from a known-optimal placement reports that value
    as its first incumbent (trace) and as its final one; the trace must exist on most of
    the 12 models (measured: all 12 with HiGHS, with Gurobi and with SCIP)."""
    seen = 0
    for seed in range(12):
        inst = _tiny(7000 + seed)
        best, p = _optimum(inst)
        m = build_maxload_ip(inst, MaxLoadOptions(contiguity="both"))
        out = solve_model(m, SolverOptions(solver, rel_gap=1e-9), warm_start=warm_start_values(m, p))
        assert out.status == "optimal", out.message
        assert out.incumbent == solver_approx(best)
        assert out.warm_start_given
        firsts = [inc for _, inc, _ in out.trace if inc is not None]
        if firsts:  # HiGHS's presolve may close a 6-node model before any event fires
            assert firsts[0] == solver_approx(best)
            seen += 1
    assert seen >= 8, seen


def test_warm_start_first_incumbent_on_a_real_workload(tarnawski_dir):
    """HiGHS on the BERT-24 layer graph: the trace starts at the greedy start's value."""
    from dnnplace.graphs.io import load_instance

    inst = load_instance(tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json")
    r = solve(inst, "ip", SolveRequest("maxload", warm_start="greedy",
                                       solver=SolverOptions(time_limit=30, rel_gap=0.01)))
    assert r.trace[0][1] == pytest.approx(r.extra["warm_start_objective"])
    assert all(b is None or b <= i + 1e-9 for _, i, b in r.trace if i is not None)


@pytest.mark.gurobi
@gurobi
def test_highs_and_gurobi_agree():
    for seed in range(10):
        inst = _tiny(8000 + seed)
        for contiguity in ("none", "both"):
            vals = []
            for solver in ("highs", "gurobi"):
                m = build_maxload_ip(inst, MaxLoadOptions(contiguity=contiguity))
                out = solve_model(m, SolverOptions(solver, rel_gap=1e-9))
                # tiny models fit the size-limited pip licence: an error here is a defect
                assert out.status == "optimal", (solver, out.status, out.message)
                vals.append(out.incumbent)
            assert vals[0] == pytest.approx(vals[1], rel=1e-7, abs=1e-7)


@scip
def test_scip_agrees_with_brute_force():
    """SCIP's optimum of the max-load IP equals the exhaustive optimum of 10 seeded tiny
    instances (PipeDream objective, contiguous; 20 solves with the unconstrained IP,
    whose optimum is at most the contiguous one)."""
    checked = 0
    for seed in range(10):
        inst = _tiny(8000 + seed)
        best, _ = _optimum(inst, "both")
        vals = {}
        for contiguity in ("both", "none"):
            m = build_maxload_ip(inst, MaxLoadOptions(contiguity=contiguity))
            out = solve_model(m, SolverOptions("scip", rel_gap=1e-9))
            assert out.status == "optimal", (seed, contiguity, out.status, out.message)
            assert out.bound == solver_approx(out.incumbent)
            if contiguity == "both":
                assert maxload(decode(m), contiguity="both").objective == solver_approx(out.incumbent)
            vals[contiguity] = out.incumbent
            checked += 1
        assert vals["both"] == solver_approx(best)
        assert vals["none"] <= vals["both"] + 1e-6
    assert checked == 20


@scip
def test_scip_threads_seed_and_options_are_passed():
    out = solve_model(knapsack(), SolverOptions("scip", threads=1, seed=3, time_limit=10, rel_gap=0.0,
                                                solver_options={"display/verblevel": 0}))
    assert out.status == "optimal" and out.incumbent == pytest.approx(-8) and out.nodes is not None
    from dnnplace.formulations.solvers.options import check_backend

    with pytest.raises(InputError, match="not a SCIP parameter.*limits/time"):
        check_backend(SolverOptions("scip", solver_options={"limits/tim": 5}))
    with pytest.raises(InputError, match="SCIP rejects this value"):
        check_backend(SolverOptions("scip", solver_options={"limits/time": "soon"}))
    assert check_backend(SolverOptions("scip", solver_options={"limits/nodes": 10})) == []


@pytest.mark.gurobi
@gurobi
def test_gurobi_size_limit_is_a_clear_message():
    """A model over the pip licence's limits (2000 variables, 2000 constraints) -- here
    2500 variables and 2499 constraints -- is an error outcome with a one-line message
    naming its size, not a traceback. Which licence is installed is asked of gurobipy
    directly; with a full one (not the ``gurobi`` extra's) the model must solve."""
    n = 2500
    out = solve_model(path_packing(n), SolverOptions("gurobi", time_limit=30))
    assert (out.n_vars, out.n_cons, out.n_binaries) == (n, n - 1, n)
    if not gurobi_is_size_limited(n):
        assert out.status == "optimal", (out.status, out.message)
        assert out.incumbent == solver_approx(-(n // 2))
        return
    assert out.status == "error" and out.termination == "licence", (out.status, out.termination)
    assert out.incumbent is None
    assert out.message == (f"model has {n} variables / {n - 1} constraints, over the restricted licence; "
                           "use solver 'highs' or a full licence")


def test_available_solvers_lists_highs():
    assert "highs" in available_solvers()


def test_highs_thread_count_change_in_one_process():
    """HiGHS's scheduler is process-wide; the driver resets it when threads change."""
    for threads in (1, 2, None, 1):
        out = solve_model(knapsack(), SolverOptions(threads=threads))
        assert out.status == "optimal" and out.incumbent == pytest.approx(-8)
