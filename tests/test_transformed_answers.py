"""Answers on a transformed graph: FastT's data-parallel baseline and
OS-DPOS answer on a graph they built from the input (replicas, split operators). Their
results carry the steps that rebuild that graph, so ``solve`` prints them, ``evaluate``
and ``simulate`` re-score them from the input graph file alone, and their bound is the
input's work share (the critical path does not hold for split operators), with a note."""

from __future__ import annotations

import json
import math
import re

import pytest

from dnnplace.cli import main
from dnnplace.evaluation.bounds import makespan_lower_bound, work_lower_bound
from dnnplace.graphs import Cluster, OpGraph
from dnnplace.graphs.cluster import Device
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance, save_instance
from dnnplace.graphs.transforms.replay import fingerprint, graph_of_record, replay
from dnnplace.registry import SolveRequest, run_method


def gpus(k: int, beta0: float = 0.0, beta1: float = 0.0) -> Cluster:
    devs = [Device(f"gpu{i}", "gpu", math.inf) for i in range(k)]
    return Cluster.from_links(devs, default={"beta0": beta0, "beta1": beta1})


def training_graph() -> OpGraph:
    """Two layers forward and backward, with parameters, gradients and updates (roles)."""
    ids = ["w1", "w2", "f1", "f2", "b2", "b1", "g2", "g1", "u1", "u2"]
    edges = [("w1", "f1"), ("f1", "f2"), ("w2", "f2"), ("f2", "b2"), ("b2", "b1"), ("b2", "g2"), ("b1", "g1"),
             ("g1", "u1"), ("g2", "u2"), ("w1", "u1"), ("w2", "u2")]
    roles = ["param", "param", "compute", "compute", "compute", "compute", "grad", "grad", "apply", "apply"]
    comp = [[0.0], [0.0], [4.0], [6.0], [8.0], [5.0], [3.0], [2.0], [0.5], [0.5]]
    return OpGraph.from_ids(ids, edges, kinds=["gpu"], compute=comp, memory=[40, 80, 4, 6, 6, 4, 40, 80, 0, 0],
                            persistent_bytes=[40, 80] + [0] * 8, edge_bytes=[40, 8, 80, 8, 8, 80, 40, 40, 80, 40, 80],
                            roles=roles, op_types=["Param", "Param", "MatMul", "MatMul", "MatMulGradInput",
                                                   "MatMulGradInput", "MatMulGradWeight", "MatMulGradWeight",
                                                   "Apply", "Apply"], meta={"batch": 8})


@pytest.fixture
def graph_file(tmp_path):
    path = tmp_path / "train.json"
    save_instance(Instance(training_graph(), gpus(2, beta0=0.01, beta1=1e-4), "train"), path)
    return path


def printed_makespan(text: str) -> float:
    return float(re.search(r"^makespan: ([0-9.]+) ms", text, re.M).group(1))


def solve_cli(graph_file, tmp_path, method, *params, capsys=None):
    out = tmp_path / f"{method}.json"
    argv = ["solve", str(graph_file), "--method", method, "--out", str(out)]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    return json.loads(out.read_text()), out


def test_dp_baseline_result_is_printed_rescored_and_simulated_from_the_input_file(graph_file, tmp_path, capsys):
    doc, out = solve_cli(graph_file, tmp_path, "dp-baseline")  # --problem inferred: makespan
    text = capsys.readouterr().out
    assert "answers on a transformed graph (" in text and "-dp2: 22 nodes" in text and "gpu1" in text  # + device table
    assert doc["problem"] == "makespan" and doc["transform"]["steps"][0]["kind"] == "data-parallel"
    assert "graph_doc" not in doc["transform"]  # steps, not the whole graph
    assert any(k.endswith("@r1") for k in doc["placement"])
    # evaluate and simulate rebuild the replicated graph from the input file: the same makespan
    ev_out = tmp_path / "ev.json"
    assert main(["evaluate", str(graph_file), str(out), "--out", str(ev_out)]) == 0
    ev = json.loads(ev_out.read_text())
    assert ev["problem"] == "makespan" and ev["objective"] == pytest.approx(doc["objective"], rel=1e-12)
    capsys.readouterr()
    assert main(["simulate", str(graph_file), str(out)]) == 0
    assert printed_makespan(capsys.readouterr().out) == pytest.approx(doc["objective"], abs=0.005)


def test_dp_baseline_bound_is_the_work_share_and_says_why(graph_file):
    inst = load_instance(graph_file)
    res, placed = run_method(inst, "dp-baseline", SolveRequest(problem="makespan"))
    # the replicas run at half the batch: the answer beats the input's critical path ...
    assert res.objective < makespan_lower_bound(inst.graph, inst.cluster)
    # ... so the bound reported is the work share, which it never beats, and the record says why
    assert res.lower_bound == pytest.approx(work_lower_bound(inst.graph, inst.cluster))
    assert res.objective >= res.lower_bound
    assert res.transform["work_bound_holds"] and "critical-path bound does not hold" in res.transform["bound_note"]
    assert placed.graph.n == res.transform["graph"]["nodes"] > inst.graph.n
    weak, _ = run_method(inst, "dp-baseline", SolveRequest(problem="makespan", params={"scaling": "weak"}))
    assert weak.lower_bound is None and "weak scaling" in weak.transform["bound_note"]


def test_os_dpos_split_result_replays_its_order_from_the_input_file(tmp_path, capsys):
    # a -> b -> c with a heavy b on two free-link GPUs: OS-DPOS splits b in two
    g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0], [8.0], [1.0]], memory=[0] * 3, src=[0, 1], dst=[1, 2],
                op_types=["Relu", "Conv2D", "Relu"])
    path = tmp_path / "chain.json"
    save_instance(Instance(g, gpus(2), "chain"), path)
    doc, out = solve_cli(path, tmp_path, "os-dpos", "kappa=0.5")
    assert [s["op"] for s in doc["transform"]["steps"]] == ["b"] and "b/part1" in doc["placement"]
    assert doc["objective"] == pytest.approx(6.5)  # 1 + 8/2 + 0.5 + 1, below the input's critical path 10
    assert doc["lower_bound"] == pytest.approx(5.0)  # the work share, 10 / 2
    capsys.readouterr()
    assert main(["simulate", str(path), str(out), "--policy", "order"]) == 0
    assert printed_makespan(capsys.readouterr().out) == pytest.approx(6.5, abs=0.005)


def test_a_result_scored_on_another_graph_is_refused(graph_file, tmp_path, capsys):
    _, out = solve_cli(graph_file, tmp_path, "dp-baseline")
    other = training_graph().with_(compute=training_graph().compute * 2)
    path = tmp_path / "other.json"
    save_instance(Instance(other, gpus(2), "other"), path)
    capsys.readouterr()
    assert main(["evaluate", str(path), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differs from the one it was solved on" in err


def test_replay_rebuilds_the_graph_and_refuses_unknown_steps():
    from dnnplace.graphs.batch_model import BatchModel
    from dnnplace.graphs.errors import InputError
    from dnnplace.graphs.transforms.data_parallel import data_parallel
    from dnnplace.graphs.transforms.op_split import split_operation

    g = training_graph()
    dp = data_parallel(g, 3, batch_model=BatchModel(8, half_batch=2.0)).graph
    s = split_operation(dp, dp.index_of("f2@r1"), "batch", 2, kappa=0.25)
    assert fingerprint(replay(g, s.meta["transforms"])) == fingerprint(s)
    rec = {"steps": list(s.meta["transforms"]), "graph": fingerprint(s)}
    assert graph_of_record(rec, g).ids == s.ids
    with pytest.raises(InputError, match="unknown kind 'rotate'"):
        replay(g, [{"kind": "rotate"}])
    with pytest.raises(InputError, match="unknown node 'zz'"):
        replay(g, [{"kind": "split", "op": "zz", "dim": "batch", "parts": 2}])
