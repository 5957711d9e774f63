"""The ablation of results/tarnawski-table4/tiebreak-ablation.md: the max-load DP's tied optima
(:mod:`dnnplace.heuristics.dp_ties`, ``maxload_dp(tie_breaks=...)``) and greedy's topological
order (``greedy_fill(order=callable)``), and the benchmark that measures both."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from instances import random_inference

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.errors import InputError
from dnnplace.heuristics.baselines import greedy_fill
from dnnplace.heuristics.maxload_dp import maxload_dp

RULES = ("first", "earliest", "latest", "random:0", "random:1", "uniform:0", "any-earliest", "any-latest",
         "any-random:0", "any-uniform:1")


def test_every_tie_break_returns_an_optimal_split_and_earliest_is_the_kernels():
    """Integer costs (no rounding ties): the earliest argmin is the kernel's own choice (without
    the cross-block queries, which visit sources in another order), and every rule's split has the
    DP's max-load by the evaluator, contiguous per part."""
    checked = same = 0
    for seed in range(40):
        inst = random_inference(seed)
        res = maxload_dp(inst, tie_breaks=RULES, segments=False)
        if res.placement is None:
            continue
        assert set(res.tied) == set(RULES) and res.tied["first"] is res.placement
        same += bool((res.tied["earliest"].device == res.placement.device).all())
        for p in res.tied.values():
            ev = maxload(p, contiguity="both")
            assert ev.feasible, ev.violations
            assert ev.objective == pytest.approx(res.value, rel=1e-9)
            checked += 1
    assert checked >= 30 * len(RULES) and same == checked // len(RULES)


def test_ties_are_real_on_a_chain():
    """Chain a-b-c, unit compute, no transfers, 3 accelerators: the optimum 1 has one split
    (one node each) and, with 2 accelerators, max-load 2 has two (ab|c and a|bc) that the
    earliest and latest rules tell apart, and the uniform rule counts; the default stays the kernel's."""
    from dnnplace.graphs import Cluster, OpGraph
    from dnnplace.graphs.instance import Instance

    g = OpGraph(ids="abc", kinds=("acc", "cpu"), compute=[[1, 9]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2],
                edge_cost=[0, 0])
    res = maxload_dp(Instance(g, Cluster.tarnawski(2, 0, 10)), tie_breaks=("earliest", "latest", "uniform:0"))
    assert res.value == 2.0 and set(res.tied) == {"earliest", "latest", "uniform:0"}
    assert res.tie_chains == {"argmin": 2}
    first, last = (res.tied[r].device for r in ("earliest", "latest"))
    assert {tuple(first == first[0]), tuple(last == last[0])} == {(True, False, False), (True, True, False)}


def test_unknown_tie_break_and_replicas_are_refused():
    inst = random_inference(0)
    with pytest.raises(InputError, match="unknown tie-break 'middle'"):
        maxload_dp(inst, tie_breaks=("middle",))
    with pytest.raises(InputError, match="replicated"):
        maxload_dp(inst, tie_breaks=("earliest",), replicas=2)


def test_greedy_takes_an_order_function_and_checks_it():
    """A function giving the default order gives the default split; reversing it (not
    topological on a graph with an edge) is refused."""
    from dnnplace.graphs.orders import dfs_topological_order

    checked = 0
    for seed in range(10):
        inst = random_inference(seed)
        g, cl = inst.graph, inst.require_cluster()
        if not cl.devices_of_kind("cpu").size or not g.src.size:
            continue
        assert (greedy_fill(g, cl, order=dfs_topological_order).device == greedy_fill(g, cl).device).all()
        with pytest.raises(ValueError, match="no topological order"):
            greedy_fill(g, cl, order=lambda h: dfs_topological_order(h)[::-1])
        checked += 1
    assert checked >= 3


def test_benchmark_renders_one_row(tmp_path, monkeypatch):
    """The benchmark on the smallest Table 4 row (BERT-24 layers, 30 ideals), two samples."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from benchmarks.bench_tarnawski_tiebreak import run

    out = tmp_path / "t.md"
    run(argparse.Namespace(samples=2, only=["bert24"], out=out))
    text = out.read_text()
    assert "--samples 2 --only bert24" in text and text.count("| Layer bert24_inference |") == 2
    assert "same as the paper" in text and np.isfinite(float(text.split("| Layer bert24_inference | 30 | ")[1][:5]))
