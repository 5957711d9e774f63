"""The independent evaluator: hand-computed cases and the paper's published figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dnnplace.evaluation.contiguity import contiguity_violations
from dnnplace.evaluation.evaluate import latency, latency_pieces, maxload, validate
from dnnplace.graphs import Cluster, OpGraph, Placement
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance, load_placement
from dnnplace.registry import SolveRequest, solve

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "graphs" / "workloads" / "tarnawski"
REF = json.loads((ROOT / "experiments" / "reference" / "tarnawski-neurips20.json").read_text())
NAN = math.nan


def chain3(costs=(1.0, 2.0), acc=(3.0, 4.0, 5.0), cpu=(30.0, 40.0, 50.0)) -> OpGraph:
    """a -> b -> c with edge costs c_a, c_b."""
    return OpGraph(ids="abc", kinds=("acc", "cpu"), compute=np.column_stack([acc, cpu]), memory=[1, 1, 1],
                   src=[0, 1], dst=[1, 2], edge_cost=list(costs))


def place(g: OpGraph, cl: Cluster, devs: str) -> Placement:
    return Placement.from_mapping(g, cl, dict(zip(g.ids, devs.split())))


CL = Cluster.tarnawski(2, 1, 10.0)


# ---------------------------------------------------------------------------- max-load
def test_maxload_chain_split():
    # a,b on acc0 | c on acc1: acc0 = 3 + 4 + CommOut c_b (2) = 9; acc1 = 5 + CommIn c_b = 7
    e = maxload(place(chain3(), CL, "acc0 acc0 acc1"))
    assert e.objective == pytest.approx(9.0)
    assert e.details["devices"]["acc1"]["load"] == pytest.approx(7.0)
    assert e.feasible


def test_maxload_pays_cu_once_per_node_and_direction():
    #   u -> v, u -> w; v and w on acc1: acc1 pays c_u = 2 once; acc0 pays its CommOut once
    g = OpGraph(ids="uvw", kinds=("acc", "cpu"), compute=[[1, 9], [1, 9], [1, 9]], memory=[0, 0, 0],
                src=[0, 0], dst=[1, 2], edge_cost=[2.0, 2.0])
    e = maxload(place(g, CL, "acc0 acc1 acc1"))
    assert e.details["devices"]["acc0"]["load"] == pytest.approx(1 + 2)
    assert e.details["devices"]["acc1"]["load"] == pytest.approx(2 + 2)


def test_maxload_cpu_pays_no_communication():
    # a on acc0, b on cpu0, c on acc1: cpu0 load = 40 (no comm); acc1 = 5 + c_b
    e = maxload(place(chain3(), CL, "acc0 cpu0 acc1"))
    assert e.details["devices"]["cpu0"]["load"] == pytest.approx(40.0)
    assert e.details["devices"]["acc1"]["load"] == pytest.approx(7.0)
    assert e.objective == pytest.approx(40.0)


def training_graph() -> OpGraph:
    """f1 -> f2 -> b2 -> b1 (f: forward, b: backward); c_f1=1, c_f2=2, c_b2=3."""
    return OpGraph(ids=["f1", "f2", "b2", "b1"], kinds=("acc", "cpu"),
                   compute=[[1, 9], [2, 9], [4, 9], [8, 9]], memory=[0] * 4,
                   src=[0, 1, 2], dst=[1, 2, 3], edge_cost=[1.0, 2.0, 3.0], backward=[0, 0, 1, 1],
                   colocation=[0, 1, 1, 0], colocation_labels=[0, 1])


def test_maxload_objective_variants():
    # acc0 = {f1, b1}: FW = 1 + out c_f1 (1) = 2; BW = 8 + in c_b2 (3) = 11
    # acc1 = {f2, b2}: FW = 2 + in c_f1 (1) = 3; BW = 4 + out c_b2 (3) = 7
    p = place(training_graph(), CL, "acc0 acc1 acc1 acc0")
    assert maxload(p).objective == pytest.approx(13.0)                       # max(2+11, 3+7)
    assert maxload(p, objective="gpipe").objective == pytest.approx(3 + 11)  # max FW + max BW
    # overlap: acc0 comm 4 vs compute 9 -> 9; acc1 comm 4 vs compute 6 -> 6
    assert maxload(p, objective="overlap").objective == pytest.approx(9.0)
    assert maxload(p).feasible


def test_colocation_and_memory_violations():
    g = training_graph()
    p = place(g, Cluster.tarnawski(2, 1, 0.5), "acc0 acc1 acc0 acc0")
    viol = validate(p)
    assert any("colocation group 1" in v for v in viol)
    g2 = g.with_(memory=np.array([1.0, 0, 0, 0]))
    viol2 = validate(place(g2, Cluster.tarnawski(2, 1, 0.5), "acc0 acc1 acc1 acc0"))
    assert viol2 == ["device acc0: memory 1 B exceeds capacity 0.5 B by 100.0%"]


def test_unsupported_node_is_reported_and_not_scored():
    g = chain3(acc=(3.0, NAN, 5.0))
    e = maxload(place(g, CL, "acc0 acc0 acc1"))
    assert e.objective is None and not e.feasible
    assert "node 'b' is on acc0" in e.violations[0]


# ---------------------------------------------------------------------------- contiguity
def test_contiguity_definition_3_1():
    # a -> b -> c: {a, c} on acc0 with b elsewhere is not contiguous
    p = place(chain3(), CL, "acc0 acc1 acc0")
    (msg,) = contiguity_violations(p, "convex-all")  # Definition 3.1 alone
    assert "acc0 is not contiguous: node 'b'" in msg
    # two parallel chains a->b, c->d: {a, d} is contiguous although disconnected (Fig. 1a)
    g = OpGraph(ids="abcd", kinds=("acc", "cpu"), compute=[[1, 1]] * 4, memory=[0] * 4, src=[0, 2], dst=[1, 3])
    fig1a = place(g, CL, "acc0 acc1 acc1 acc0")
    assert contiguity_violations(fig1a, "convex-all") == []
    # ... but with b, c on the other device the two wait on each other: no pipeline order
    assert contiguity_violations(fig1a, "all")[0].startswith("devices wait on each other in a cycle")


def test_contiguity_per_part_of_training_graphs():
    # f1 -> f2 -> b2 -> b1 with {f1, b1} on acc0: not contiguous over the whole graph,
    # contiguous in the forward part and in the backward part separately
    p = place(training_graph(), CL, "acc0 acc1 acc1 acc0")
    assert contiguity_violations(p, "all")
    assert contiguity_violations(p, "forward") == []
    assert contiguity_violations(p, "both") == []


def issue_counterexample() -> OpGraph:
    # 0 -> 2 and 3 -> 5 (node 1 and 4 isolated): {0, 5} and {2, 3, 4} are each convex,
    # but the first waits for the second (3 -> 5) and the second for the first (0 -> 2)
    return OpGraph(ids=range(6), kinds=("acc", "cpu"), compute=[[1, 9]] * 6, memory=[0] * 6, src=[0, 3],
                   dst=[2, 5], edge_cost=[0.5, 0.5])


def test_pipeline_order_names_the_cycle():
    p = place(issue_counterexample(), CL, "acc0 cpu0 acc1 acc1 acc1 acc0")
    assert contiguity_violations(p, "convex-both") == [] and contiguity_violations(p, "convex-all") == []
    (msg,) = contiguity_violations(p, "both")
    assert msg == ("devices wait on each other in a cycle (no pipeline order of the stages): acc0 -> acc1 -> acc0 "
                   "(edge 0->2 from acc0 to acc1; edge 3->5 from acc1 to acc0)")
    assert contiguity_violations(p, "all") == [msg] and not maxload(p, contiguity="both").feasible
    # node 5 moved next to 2, 3, 4: a pipeline acc0 -> acc1 exists
    assert contiguity_violations(place(issue_counterexample(), CL, "acc0 cpu0 acc1 acc1 acc1 acc1"), "both") == []


def test_pipeline_order_of_training_graphs_mirrors_orphans():
    # forward f0 -> f1, f1 -> b1 (loss); backward o -> b1, o an orphan (no forward
    # partner): Appendix B orders o's forward image by the mirrored edge b1 -> o
    g = OpGraph(ids=["f0", "f1", "b1", "b0", "o"], kinds=("acc", "cpu"), compute=[[1, 9]] * 5, memory=[0] * 5,
                src=[0, 1, 4], dst=[1, 2, 2], colocation=[0, 1, 1, 0, -1], colocation_labels=("a", "b"),
                backward=[False, False, True, True, True])
    assert contiguity_violations(place(g, CL, "acc0 acc1 acc1 acc0 acc1"), "both") == []
    bad = place(g, CL, "acc0 acc1 acc1 acc0 acc0")  # o on acc0 would have to come after acc1
    (msg,) = contiguity_violations(bad, "both")
    assert msg.endswith("acc0 -> acc1 -> acc0 (edge 'f0'->'f1' from acc0 to acc1; "
                        "edge 'o'->'b1' (mirrored: backward edge of an orphan) from acc1 to acc0)")
    assert contiguity_violations(bad, "convex-both") == [] and contiguity_violations(bad, "forward") == []


def test_unknown_contiguity_mode_is_one_line_error():
    from dnnplace.graphs.errors import InputError

    with pytest.raises(InputError, match="unknown contiguity mode 'acyclic'"):
        validate(place(chain3(), CL, "acc0 acc0 acc0"), contiguity="acyclic")


def test_contiguity_scales_past_64_devices():
    n = 70
    g = OpGraph(ids=range(n + 1), kinds=("acc",), compute=[[1]] * (n + 1), memory=[0] * (n + 1),
                src=list(range(n)), dst=list(range(1, n + 1)))
    cl = Cluster.tarnawski(n, 0, 1e9)
    dev = np.arange(n + 1) % n  # the last node returns to acc0: acc0 = {0, 70} is split
    viol = contiguity_violations(Placement(g, cl, dev), "convex-all")
    assert len(viol) == 1 and viol[0].startswith("device acc0 ")
    (cyc,) = contiguity_violations(Placement(g, cl, dev), "all")[1:]  # and the 70-device cycle, named
    assert cyc.count(" -> ") == 70 and cyc.endswith("edge 69->70 from acc69 to acc0)")


# ---------------------------------------------------------------------------- latency
def test_latency_contiguous_chain():
    # a, b on acc0 (in 0, compute 7, out c_b 2) -> c on acc1 (in 2, compute 5): 9 + 7
    assert latency(place(chain3(), CL, "acc0 acc0 acc1")).objective == pytest.approx(16.0)


def test_latency_cpu_nodes_and_pieces():
    # a, c on acc0 with b on the CPU: acc0 runs two pieces, {a} then {c}
    # piece {a}: 3 + out c_a 1 = 4; b on CPU: 4 + 40 = 44; piece {c}: 44 + in c_b 2 + 5 = 51
    p = place(chain3(), CL, "acc0 cpu0 acc0")
    assert latency_pieces(p).tolist() == [0, 0, 1]
    e = latency(p)
    assert e.objective == pytest.approx(51.0)
    assert e.details["subgraphs"] == {"acc0": 2}


def test_latency_cyclic_subgraphs_are_infeasible():
    # a -> b, c -> d; acc0 = {a, d}, acc1 = {b, c}: both contiguous, but
    # acc0 waits for c (acc1) and acc1 waits for a (acc0)
    g = OpGraph(ids="abcd", kinds=("acc", "cpu"), compute=[[1, 1]] * 4, memory=[0] * 4,
                src=[0, 2], dst=[1, 3], edge_cost=[1.0, 1.0])
    e = latency(place(g, CL, "acc0 acc1 acc1 acc0"))
    assert e.objective is None and not e.feasible
    assert "cycle" in e.violations[-1]


def test_latency_parallel_accelerators_overlap():
    # s -> x, s -> y, x -> t, y -> t; x on acc0 and y on acc1 run in parallel
    g = OpGraph(ids="sxyt", kinds=("acc", "cpu"), compute=[[0, 1], [5, 50], [6, 60], [0, 1]], memory=[0] * 4,
                src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_cost=[1.0, 1.0, 2.0, 3.0])
    # s (cpu) done at 1; acc0: 1 + in 1 + 5 + out 2 = 9; acc1: 1 + 1 + 6 + 3 = 11; t: 11 + 1
    assert latency(place(g, CL, "cpu0 acc0 acc1 cpu0")).objective == pytest.approx(12.0)


# ---------------------------------------------------------------------------- paper figures
EXPERT_TABLE1 = [(r["model"], r["mode"], r["tps"]["expert"]) for r in REF["table1_throughput"]
                 if r["tps"]["expert"] is not None]


@pytest.mark.parametrize("model,mode,expected", EXPERT_TABLE1)
def test_expert_maxload_matches_table1(model, mode, expected):
    inst = load_instance(WORK / "throughput-inputs" / "LayerGraphs" / f"{model}_{mode}.json")
    split = WORK / "human-experts" / f"{model}_{mode}_expert.json"
    if not split.exists():  # training graph with an inference-only split, extended by colorClass
        split = WORK / "human-experts" / f"{model}_inference_expert.json"
    e = maxload(load_placement(split, inst), contiguity="both")
    assert round(e.objective, 2) == expected
    assert e.feasible


@pytest.mark.parametrize("model,expected", [("bert24", 111.94), ("gnmt", 293.40)])
def test_expert_latency_matches_table4(model, expected):
    inst = load_instance(WORK / "latency-inputs" / "LayerGraphs" / f"{model}_inference.json")
    e = latency(load_placement(WORK / "human-experts" / f"{model}_inference_expert.json", inst))
    assert round(e.objective, 2) == expected
    # the paper marks both: BERT-24's expert uses 6 accelerators where 5 are given,
    # GNMT's violates memory by 20% (Table 4 dagger)
    assert not e.feasible
    assert e.violations == {"bert24": ["uses 6 acc devices; the instance allows 5"],
                            "gnmt": ["device acc5: memory 7.5494e+08 B exceeds capacity 6.29146e+08 B by 20.0%"]}[model]


TABLE4 = [(Path(r["input"]), r["latency"]["greedy"]) for r in REF["table4_latency"]]


@pytest.mark.parametrize("path,published", TABLE4, ids=[p.stem + "-" + p.parent.name for p, _ in TABLE4])
def test_greedy_latency_beside_table4(path, published):
    """The greedy baseline (DFS topological order) is feasible and, on five of the
    eight rows, equal to Table 4's figure; the rest depend on the paper's unstated
    topological order (see README) and are only required to be feasible."""
    inst = load_instance(WORK / path)
    res = solve(inst, "greedy", SolveRequest("latency"))
    assert res.evaluation["feasible"]
    if path.stem in ("bert_l-3_inference", "bert_l-6_inference", "bert_l-12_inference", "bert24_inference") or (
            path.stem == "resnet50_inference" and path.parent.name == "OperatorGraphs"):
        assert res.objective == pytest.approx(published, abs=0.0100001)


def test_latency_of_a_given_decomposition():
    # all of a -> b -> c on acc0, cut by the method into {a} then {b, c}:
    # {a}: 3 + out c_a 1 = 4; {b, c}: 4 + in c_a 1 + 4 + 5 = 14 (one piece would take 12)
    p = place(chain3(), CL, "acc0 acc0 acc0")
    assert latency(p).objective == pytest.approx(12.0)
    e = latency(p, pieces=np.array([0, 1, 1]))
    assert e.objective == pytest.approx(14.0) and e.feasible
    assert e.details["subgraphs"] == {"acc0": 2}
    # {a, c} as one piece with b in another is not contiguous, and the two wait on each other
    bad = latency(p, pieces=np.array([0, 1, 0]))
    assert not bad.feasible
    assert any("piece acc0#0 is not contiguous: node 'b'" in v for v in bad.violations)


def test_every_makespan_comes_with_a_valid_lower_bound():
    """``lower_bound`` of the makespan evaluation is at most the makespan of any
    schedule: checked on HEFT and m-TOPO answers of 30 random DAGs on 2-4 GPUs (60 cases),
    and it binds (equals the makespan) on a chain kept on one device."""
    from dnnplace.evaluation.bounds import makespan_lower_bound
    from dnnplace.evaluation.evaluate import makespan
    from dnnplace.graphs.generators import generate

    checked = 0
    for seed in range(30):
        g = generate("random-dag", n=40, seed=seed, kinds=["gpu"])
        inst_cl = Cluster.single_host(2 + seed % 3, with_cpu=False, gpu_memory=1e15)
        for method in ("heft", "m-topo"):
            res = solve(Instance(g, inst_cl, f"dag{seed}"), method, SolveRequest(problem="makespan"))
            lb = res.evaluation["lower_bound"]
            assert lb == makespan_lower_bound(g, inst_cl) and 0 < lb <= res.evaluation["objective"] * (1 + 1e-12)
            checked += 1
    assert checked == 60
    chain = OpGraph.from_ids(list("abc"), [("a", "b"), ("b", "c")], kinds=["gpu"], compute=[[1.0], [2.0], [3.0]],
                             memory=[0, 0, 0], edge_bytes=[1e6, 1e6])
    cl = Cluster.single_host(2, with_cpu=False)
    ev = makespan(Placement(chain, cl, np.zeros(3, dtype=np.int64)))
    assert ev.objective == ev.details["lower_bound"] == 6.0
