"""The window search around an incumbent (formulations/window_search.py): a window that holds the
whole graph is the exact problem (the exhaustive optimum of tiny instances without link
queues), a search never returns a schedule worse than its start, and what it returns replays
strictly at the makespan it reports, within memory."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.evaluation.sim_costs import transfer_semantics
from dnnplace.evaluation.simulate import simulate
from dnnplace.formulations.window_search import latest_finish, window_search
from dnnplace.graphs import Cluster
from dnnplace.graphs.generators import generate
from dnnplace.graphs.placement import Placement

pytest.importorskip("ortools", reason="the window model is CP-SAT's")

from instances import pesto_tiny_instance, placements  # noqa: E402
from test_pesto_ip import exact_any_order  # noqa: E402


def _fifo(g, cl, dev, congestion=True):
    return simulate(Placement(g, cl, dev), policy="fifo", congestion=congestion).schedule.priorities()


def test_a_window_of_the_whole_graph_finds_the_exhaustive_optimum():
    """Tiny instances without colocation (a group's members keep their device in a window),
    one transfer per edge and links without queues (the model's transfers; a tensor sent
    once per device takes the longest of its edges there, which these graphs' unequal edge
    bytes make differ): from the first placement that fits, one window is the whole graph
    and its solve the exact problem, so the replay equals the exhaustive optimum (every
    placement, every device order) up to the model's rounding of times to 1e-4."""
    checked = moved = 0
    for seed in range(60):
        g, cl = pesto_tiny_instance(seed)
        if (g.colocation >= 0).any():
            continue
        first = next(iter(placements(g, cl)), None)
        if first is None:
            continue
        with transfer_semantics("per_edge"):
            start = simulate(Placement(g, cl, first), policy="fifo", congestion=False).makespan
            dev, pr, ms, info = window_search(g, cl, first, _fifo(g, cl, first, False), congestion=False,
                                              time_limit=20)
        opt = exact_any_order(g, cl, congestion=False, dedup=False)
        assert info["windows"] == 1 and not info["skipped"]
        assert ms == pytest.approx(opt, abs=1e-3 * g.n), (seed, ms, opt)
        checked += 1
        moved += start > opt + 1e-6
    assert checked == 49, checked   # 60 seeds less those with a colocation group
    assert moved >= 30, moved       # measured: 37 starts above the optimum


def test_windows_never_lose_and_replay_exactly():
    """Layered random DAGs of 80-150 nodes on 3 GPUs with queued links, started from a random
    placement in FIFO order: windows of 30 nodes never return a longer makespan, the
    returned devices and order replay strictly at exactly that makespan within every
    device's memory, and on most graphs some window is kept (2 s each)."""
    checked = improved = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        g = generate("random-dag", n=int(rng.integers(80, 151)), seed=seed)
        cl = Cluster.single_host(3, with_cpu=False)
        dev = rng.integers(0, 3, g.n)
        pr = _fifo(g, cl, dev)
        start = simulate(Placement(g, cl, dev), policy="order", priorities=pr).makespan
        out, pr2, ms, info = window_search(g, cl, dev, pr, size=30, time_limit=2, seed=seed)
        replay = simulate(Placement(g, cl, out), policy="order", priorities=pr2)
        assert ms <= start and replay.makespan == pytest.approx(ms, rel=1e-12)
        assert (np.bincount(out, weights=g.memory, minlength=3) <= np.asarray(cl.memory)).all()
        assert info["start_makespan"] == pytest.approx(start) and info["windows"] >= 1
        checked += 1
        improved += ms < start * (1 - 1e-9)
    assert checked == 5
    assert improved >= 4, improved   # measured: 5 of 5


def test_latest_finish_is_the_finish_on_the_critical_chain_and_never_earlier_elsewhere():
    """On a simulated schedule no node's latest finish is before its finish or after the
    makespan ``M``, and the node that ends last has ``L = M``."""
    g = generate("random-dag", n=60, seed=3)
    cl = Cluster.single_host(2, with_cpu=False)
    dev = np.arange(g.n) % 2
    sim = simulate(Placement(g, cl, dev), policy="fifo", congestion=False)
    late = latest_finish(sim)
    assert (late >= sim.schedule.finish - 1e-9).all()
    assert late[int(np.argmax(sim.schedule.finish))] == pytest.approx(sim.makespan)
    assert (late <= sim.makespan + 1e-12).all()


def test_pesto_gives_the_windows_their_share_of_the_last_stage():
    """A coarsened run through the registry: the window search runs after the moves (it is
    recorded), the answer is the evaluator's and never worse than the same run without it
    would have kept from the moves (the search starts from that answer); ``windows=0``
    leaves it out."""
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.instance import Instance
    from dnnplace.registry import SolveRequest, solve

    g = generate("random-dag", n=150, seed=4)
    inst = Instance(g, Cluster.single_host(3, with_cpu=False), "dag150")
    for share in (0.5, 0.0):
        res = solve(inst, "pesto", SolveRequest(problem="makespan", solver=SolverOptions(time_limit=8, threads=1),
                                                params={"coarsen_to": 20, "engine": "cpsat", "windows": share}))
        assert res.evaluation["feasible"] and res.objective == pytest.approx(res.evaluation["objective"], rel=1e-9)
        searched = res.extra["model_size"].get("window_search")
        if share:
            assert searched["windows"] >= 1 and searched["start_makespan"] >= res.objective * (1 - 1e-9)
        else:
            assert searched is None
