"""The ``dnnplace`` command line: each subcommand end to end, exit codes and messages.

Values asserted come from the paper (Table 1 "Expert" max-load of BERT-24 inference,
20.08 ms) or from the input file itself (a graph that fits one accelerator has max-load
equal to its total accelerator compute).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import png_pixels_by_colour

from dnnplace.cli import main
from dnnplace.graphs.io import load_instance, read_json

REQUIRED_RESULT_KEYS = {"problem", "method", "solver", "status", "objective", "bound", "gap", "build_seconds",
                        "solve_seconds", "placement", "evaluation"}


@pytest.fixture
def bert(tarnawski_dir: Path) -> Path:
    return tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"


@pytest.fixture
def bert_expert(tarnawski_dir: Path) -> Path:
    return tarnawski_dir / "human-experts" / "bert24_inference_expert.json"


@pytest.fixture
def reference() -> dict:
    path = Path(__file__).resolve().parents[1] / "experiments" / "reference" / "tarnawski-neurips20.json"
    return json.loads(path.read_text())


def table1(reference: dict, model: str, mode: str) -> dict:
    return next(r for r in reference["table1_throughput"]
                if r["granularity"] == "layer" and r["model"] == model and r["mode"] == mode)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- info
def test_info_table_and_json(capsys, bert, reference):
    nodes = table1(reference, "bert24", "inference")["nodes"]
    code, out, _ = run(capsys, "info", bert)
    assert code == 0
    assert "nodes" in out and str(nodes) in out
    assert "cluster 'tarnawski-6acc-1cpu'" in out  # the file's maxFPGAs = 6, maxCPUs = 1
    code, out, _ = run(capsys, "info", bert, "--json")
    doc = json.loads(out)
    assert doc["graph"]["nodes"] == nodes
    assert [d["name"] for d in doc["cluster"]["devices"]] == [f"acc{i}" for i in range(6)] + ["cpu0"]
    assert doc["cluster"]["check"] == "ok"


# ---------------------------------------------------------------------------- evaluate
def test_evaluate_expert_split_matches_table1(capsys, bert, bert_expert, reference):
    expert = table1(reference, "bert24", "inference")["tps"]["expert"]
    code, out, _ = run(capsys, "evaluate", bert, bert_expert, "--problem", "maxload")
    assert code == 0
    assert f"maxload (pipedream, contiguity none): {expert:.2f} ms" in out
    assert "feasible: yes" in out


def test_evaluate_out_writes_required_keys(capsys, tmp_path, bert, bert_expert, reference):
    out_file = tmp_path / "sub" / "eval.json"
    code, _, _ = run(capsys, "evaluate", bert, bert_expert, "--problem", "maxload", "--out", out_file)
    assert code == 0
    doc = read_json(out_file)
    assert {"problem", "objective", "feasible", "violations"} <= set(doc)
    assert doc["problem"] == "maxload" and doc["feasible"] is True and doc["violations"] == []
    assert round(doc["objective"], 2) == table1(reference, "bert24", "inference")["tps"]["expert"]


def test_evaluate_latency_of_expert_split_matches_table4(capsys, tmp_path, tarnawski_dir, reference):
    name = "latency-inputs/LayerGraphs/bert24_inference.json"
    row = next(r for r in reference["table4_latency"] if r["input"] == name)
    graph = tarnawski_dir / row["input"]
    split = tarnawski_dir / "human-experts" / "bert24_inference_expert.json"
    code, out, _ = run(capsys, "evaluate", graph, split, "--problem", "latency", "--out", tmp_path / "e.json")
    assert code == 0
    assert round(read_json(tmp_path / "e.json")["objective"], 2) == row["latency"]["expert"]


def test_evaluate_option_for_other_problem_is_rejected(capsys, tmp_path, bert, bert_expert):
    code, _, err = run(capsys, "evaluate", bert, bert_expert, "--problem", "latency", "--objective", "gpipe",
                       "--out", tmp_path / "e.json")
    assert code == 2 and "--objective" in err
    assert not (tmp_path / "e.json").exists()


# ---------------------------------------------------------------------------- generate / simulate
def test_generate_random_dag(capsys, tmp_path):
    path = tmp_path / "g.json"
    code, out, _ = run(capsys, "generate", "random-dag", "--nodes", 40, "--seed", 7, "--out", path,
                       "--cluster", "single-host-2-pcie")
    assert code == 0 and "40 nodes" in out
    inst = load_instance(path)
    assert inst.graph.n == 40
    assert inst.cluster.names == ("gpu0", "gpu1", "cpu0")
    again = tmp_path / "g2.json"
    run(capsys, "generate", "random-dag", "--nodes", 40, "--seed", 7, "--out", again, "--cluster",
        "single-host-2-pcie")
    assert again.read_text() == path.read_text()  # seeded


def test_simulate_writes_gantt_png_and_json(capsys, tmp_path):
    g = tmp_path / "g.json"
    run(capsys, "generate", "random-dag", "--nodes", 30, "--seed", 1, "--out", g, "--cluster",
        "single-host-2-nvlink")
    inst = load_instance(g)
    # alternate the two GPUs along the topological order, so that transfers happen
    dev = {str(inst.graph.ids[v]): f"gpu{k % 2}" for k, v in enumerate(inst.graph.topo_order)}
    pfile = tmp_path / "p.json"
    pfile.write_text(json.dumps(dev))
    png, sim = tmp_path / "gantt.png", tmp_path / "sim.json"
    code, out, _ = run(capsys, "simulate", g, pfile, "--gantt", png, "--out", sim)
    assert code == 0 and "makespan:" in out
    # the chart shows node bars (one colour: no op types, inference) and transfer bars
    # (measured: 89077 and 7788 pixels of a 1320 x 341 image)
    from dnnplace.evaluation.gantt import _FORWARD, _XFER

    px = png_pixels_by_colour(png, min_width=1000, min_height=250)
    assert px.get(_FORWARD.upper(), 0) > 40_000 and px.get(_XFER.upper(), 0) > 3_000
    doc = read_json(sim)
    assert doc["transfers"] == sum(v["transfers"] for v in doc["links"].values()) > 0  # the split transfers
    # a schedule is never shorter than the busiest device's total compute
    busiest = max(v["busy"] for v in doc["devices"].values())
    assert doc["makespan"] >= busiest - 1e-9
    code_nc, _, _ = run(capsys, "simulate", g, pfile, "--no-congestion", "--out", tmp_path / "nc.json")
    assert code_nc == 0
    assert read_json(tmp_path / "nc.json")["makespan"] <= doc["makespan"] + 1e-9  # congestion never helps


# ---------------------------------------------------------------------------- solve / methods
def test_solve_greedy_writes_result(capsys, tmp_path, bert):
    out_file = tmp_path / "r.json"
    code, out, _ = run(capsys, "solve", bert, "--problem", "maxload", "--method", "greedy", "--out", out_file)
    assert code == 0 and "independent evaluation" in out
    doc = read_json(out_file)
    assert REQUIRED_RESULT_KEYS <= set(doc)
    assert doc["method"] == "greedy" and doc["problem"] == "maxload" and doc["status"] == "feasible"
    # BERT-24's weights (1.8 GB) fit one 16 GiB accelerator, so the greedy fill puts every
    # layer on acc0 and the max-load is the total accelerator compute of the file
    raw = read_json(bert)
    total = sum(n["fpgaLatency"] for n in raw["nodes"])
    assert set(doc["placement"].values()) == {"acc0"}
    assert doc["objective"] == pytest.approx(total, rel=1e-12)
    assert doc["evaluation"]["objective"] == pytest.approx(total, rel=1e-12)


def test_solve_expert_with_split_and_flags(capsys, tmp_path, bert, bert_expert, reference):
    out_file = tmp_path / "r.json"
    code, _, _ = run(capsys, "solve", bert, "--method", "expert", "--split", bert_expert, "--time-limit", 5,
                     "--mip-gap", 0.01, "--threads", 1, "--seed", 3, "--out", out_file)
    assert code == 0
    doc = read_json(out_file)
    assert round(doc["objective"], 2) == table1(reference, "bert24", "inference")["tps"]["expert"]
    opts = doc["options"]
    assert opts["solver"]["time_limit"] == 5 and opts["solver"]["rel_gap"] == 0.01
    assert opts["solver"]["threads"] == 1 and opts["seed"] == 3
    assert opts["params"]["split"] == str(bert_expert)


def test_solve_request_from_flags():
    from dnnplace.cli import build_parser
    from dnnplace.solve_command import build_request

    args = build_parser().parse_args(["solve", "g.json", "--method", "x", "--contiguous", "--subgraphs-per-device",
                                      "2", "--coarsen-to", "50", "--param", "alpha=0.5", "--param", "name=abc"])
    req = build_request(args)
    assert req.contiguity == "both"  # maxload: forward and backward contiguous
    assert req.params == {"alpha": 0.5, "name": "abc", "subgraphs_per_device": 2, "coarsen_to": 50}
    args = build_parser().parse_args(["solve", "g.json", "--problem", "makespan", "--method", "x", "--contiguous",
                                      "--no-congestion", "--policy", "critical_path"])
    req = build_request(args)
    assert req.contiguity == "all" and req.params == {}
    assert req.congestion is False and req.policy == "critical_path"
    args = build_parser().parse_args(["solve", "g.json", "--method", "x", "--non-contiguous"])
    assert build_request(args).contiguity == "none"


def test_methods_lists_baselines(capsys):
    code, out, _ = run(capsys, "methods")
    assert code == 0
    sections = out.split("latency:")[0]
    assert "maxload:" in sections and "greedy" in sections and "expert" in sections


def test_solve_on_generated_graph_with_cluster_preset(capsys, tmp_path):
    g = tmp_path / "g.json"
    run(capsys, "generate", "random-dag", "--nodes", 25, "--seed", 2, "--out", g)
    code, _, err = run(capsys, "solve", g, "--method", "single", "--out", tmp_path / "r.json")
    assert code == 2 and "no cluster" in err and not (tmp_path / "r.json").exists()
    code, _, _ = run(capsys, "solve", g, "--method", "single", "--cluster", "single-host-4-nvlink",
                     "--out", tmp_path / "r.json")
    assert code == 0
    inst = load_instance(g)
    doc = read_json(tmp_path / "r.json")
    # everything on gpu0: max-load = total GPU compute, no transfers
    assert doc["objective"] == pytest.approx(float(np.nansum(inst.graph.compute[:, 0])), rel=1e-12)


# ---------------------------------------------------------------------------- bad input
def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("dnnplace: error: ")
    return lines[0]


def test_truncated_json_exits_2(capsys, tmp_path, bert):
    bad = tmp_path / "cut.json"
    bad.write_text(bert.read_text()[:300])
    code, _, err = run(capsys, "solve", bad, "--method", "greedy", "--out", tmp_path / "r.json")
    assert code == 2
    line = _one_line(err)
    assert "cut.json" in line and "truncated" in line
    assert not (tmp_path / "r.json").exists()


def test_unknown_method_exits_2(capsys, tmp_path, bert):
    code, _, err = run(capsys, "solve", bert, "--method", "no-such-method", "--out", tmp_path / "r.json")
    assert code == 2
    assert "'no-such-method'" in _one_line(err)
    assert not (tmp_path / "r.json").exists()


def test_unknown_device_in_placement_exits_2(capsys, tmp_path, bert):
    inst = load_instance(bert)
    pfile = tmp_path / "p.json"
    pfile.write_text(json.dumps({str(i): ("acc0" if k else "gpu9") for k, i in enumerate(inst.graph.ids)}))
    code, _, err = run(capsys, "evaluate", bert, pfile, "--out", tmp_path / "e.json")
    assert code == 2
    assert "'gpu9'" in _one_line(err)
    assert not (tmp_path / "e.json").exists()


def test_unknown_cluster_preset_and_missing_file(capsys, tmp_path, bert):
    code, _, err = run(capsys, "info", bert, "--cluster", "moon-base-3")
    assert code == 2 and "'moon-base-3'" in _one_line(err)
    code, _, err = run(capsys, "info", tmp_path / "nope.json")
    assert code == 2 and "nope.json" in _one_line(err)


def test_infeasible_instance_exits_2(capsys, tmp_path):
    g = tmp_path / "g.json"
    # GPU-only nodes with megabytes of weights, on one GPU of 1 KB: no placement exists
    run(capsys, "generate", "random-dag", "--nodes", 10, "--seed", 0, "--param", 'kinds=["gpu"]',
        "--param", "param_frac=1.0", "--out", g, "--cluster", "single-host-1-nvlink-1KB")
    code, _, err = run(capsys, "solve", g, "--method", "greedy", "--out", tmp_path / "r.json")
    assert code == 2
    line = _one_line(err)
    assert "node" in line and "gpu" in line
    assert not (tmp_path / "r.json").exists()


def test_verbose_shows_traceback(capsys, tmp_path):
    code, _, err = run(capsys, "--verbose", "info", tmp_path / "nope.json")
    assert code == 2 and "Traceback" in err


def test_reproduce_unknown_name_exits_2(capsys):
    code, _, err = run(capsys, "reproduce", "no-such-table")
    assert code == 2
    line = _one_line(err)
    assert "unknown reproduction 'no-such-table'" in line  # and the known names follow


# ---------------------------------------------------------------------------- console script
def test_console_script_subprocess(tmp_path, bert, bert_expert, reference):
    script = Path(sys.executable).with_name("dnnplace")
    cmd = [str(script)] if script.exists() else (
        [shutil.which("dnnplace")] if shutil.which("dnnplace") else [sys.executable, "-m", "dnnplace"])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([*cmd, "evaluate", str(bert), str(bert_expert)], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert f"{table1(reference, 'bert24', 'inference')['tps']['expert']:.2f} ms" in proc.stdout
    proc = subprocess.run([*cmd, "info", str(tmp_path / "missing.json")], capture_output=True, text=True,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("dnnplace: error:") and "missing.json" in proc.stderr


def test_makespan_result_replays_in_the_simulator(tmp_path):
    """A makespan method's result JSON carries the simulated start times, so
    ``simulate --policy order`` replays exactly the reported makespan."""
    import json

    from dnnplace.cli import main

    g = tmp_path / "g.json"
    res = tmp_path / "r.json"
    sim = tmp_path / "s.json"
    assert main(["generate", "random-dag", "--nodes", "60", "--seed", "3", "--cluster", "single-host-2-nvlink",
                 "--out", str(g)]) == 0
    assert main(["solve", str(g), "--problem", "makespan", "--method", "heft", "--out", str(res)]) == 0
    assert main(["simulate", str(g), str(res), "--policy", "order", "--out", str(sim)]) == 0
    reported = json.loads(res.read_text())
    assert len(reported["start"]) == 60
    assert json.loads(sim.read_text())["makespan"] == reported["objective"]


def test_rel_gap_flag_and_its_old_name():
    """``--rel-gap`` sets ``rel_gap`` (the name of configs and records); ``--mip-gap``
    still does, and a message names the flag as typed."""
    from dnnplace.cli import build_parser
    from dnnplace.graphs.errors import InputError
    from dnnplace.solve_command import build_request

    for flag in ("--rel-gap", "--mip-gap"):
        args = build_parser().parse_args(["solve", "g.json", "--method", "x", flag, "0.05"])
        assert build_request(args).solver.rel_gap == 0.05
        bad = build_parser().parse_args(["solve", "g.json", "--method", "x", flag, "-0.1"])
        with pytest.raises(InputError, match=f"^{flag} -0.1: must be a relative gap"):
            build_request(bad)


def test_coarsen_to_flag_is_the_param():
    """``--coarsen-to N`` (hidden, the old spelling) is ``--param coarsen_to=N``; both
    with different values is an error, not a silent choice."""
    from dnnplace.cli import build_parser
    from dnnplace.graphs.errors import InputError
    from dnnplace.solve_command import build_request

    base = ["solve", "g.json", "--method", "x", "--coarsen-to", "5", "--param"]
    assert build_request(build_parser().parse_args(base + ["coarsen_to=5"])).params == {"coarsen_to": 5}
    args = build_parser().parse_args(base + ["coarsen_to=6"])
    with pytest.raises(InputError, match="give one of them"):
        build_request(args)


def test_solver_layer_knows_no_flags():
    """The solver layer names settings by their field (``time_limit = -5``); the command
    line re-words them with its flags (:data:`dnnplace.command_args.SOLVER_FLAGS`), each one
    a flag of ``dnnplace solve``."""
    import argparse
    import dataclasses

    from dnnplace.cli import build_parser
    from dnnplace.command_args import SOLVER_FLAGS
    from dnnplace.formulations.solvers.options import SettingError, SolverOptions, check_values

    with pytest.raises(SettingError, match=r"^time_limit = -5: must be a positive number") as exc:
        check_values({"time_limit": -5})
    assert (exc.value.key, exc.value.value) == ("time_limit", -5)
    assert set(SOLVER_FLAGS) == {f.name for f in dataclasses.fields(SolverOptions)}
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {s: a.dest for a in sub.choices["solve"]._actions for s in a.option_strings}
    for key, flag in SOLVER_FLAGS.items():
        assert flags[flag] == key.replace("solver_options", "solver_option"), (key, flag)
    root = Path(__file__).resolve().parents[1] / "formulations" / "solvers"
    for path in root.glob("*.py"):
        text = path.read_text()
        for flag in [*SOLVER_FLAGS.values(), "--mip-gap"]:
            assert f"{flag} " not in text and f"{flag}:" not in text, (path.name, flag)


def test_solve_with_a_transform_answers_the_layer_graph(tmp_path, capsys):
    """``solve --transform contract-layers``: the captured ResNet-50 at layer granularity,
    the DP proves the layer graph's optimum (results/dp-layers.md: 34.119 ms, 200 groups),
    the record names the transform, and the placement re-scores the same on the operator
    graph (an unknown transform: tests/test_bad_input.py)."""
    out = tmp_path / "r.json"
    assert main(["solve", "captured/resnet-50", "--cluster", "single-host-4-nvlink", "--problem", "maxload",
                 "--method", "dp", "--transform", "contract-layers", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "--transform contract-layers (200 colocation groups)" in said, said
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal" and doc["objective"] == pytest.approx(34.119, abs=5e-4)
    assert doc["extra"]["transform"]["name"] == "contract-layers" and doc["extra"]["transform"]["groups"] == 200
    assert doc["instance"].endswith("| contract-layers")
    from dnnplace.api_scoring import evaluate
    ev = evaluate("captured/resnet-50", str(out), cluster="single-host-4-nvlink")
    assert ev.feasible and ev.objective == pytest.approx(doc["objective"], rel=1e-9)


def test_a_result_replays_its_order_where_start_times_tie(tmp_path):
    """Two zero-duration parameters start together on gpu0 and send over one link: q's
    short tensor first lets y (5) start at 0.03 and ends at 6.03 ms. A makespan result
    records each node's rank as ``priorities``, so ``simulate --policy order`` replays
    that order; start times alone rank the tie by topological position (p first) and
    replay 9.03 ms."""
    import json

    from dnnplace.cli import main
    from dnnplace.graphs import Cluster, Device, OpGraph
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import save_instance
    from dnnplace.registry import SolveRequest, solve

    g = OpGraph.from_ids(list("pqxy"), [("p", "x"), ("q", "y")], kinds=["gpu"], compute=[[0], [0], [1], [5]],
                         memory=[0] * 4, edge_bytes=[100.0, 1.0])
    cl = Cluster.from_links([Device("gpu0", "gpu"), Device("gpu1", "gpu")], default={"beta0": 0.0, "beta1": 0.03})
    inst = Instance(g, cl, "tie")
    save_instance(inst, tmp_path / "g.json")
    doc = solve(inst, "heft", SolveRequest(problem="makespan")).to_dict()
    assert sorted(doc["priorities"].values()) == [0, 1, 2, 3]  # every result carries its order
    doc.update(placement={"p": "gpu0", "q": "gpu0", "x": "gpu1", "y": "gpu1"}, link_priorities=None,
               start={"p": 0.0, "q": 0.0, "x": 5.03, "y": 0.03})
    replayed = {}
    for name, order in (("ranks", {"p": 1, "q": 0, "x": 3, "y": 2}), ("starts", None)):
        doc["priorities"] = order
        (tmp_path / "r.json").write_text(json.dumps(doc))
        assert main(["simulate", str(tmp_path / "g.json"), str(tmp_path / "r.json"), "--policy", "order",
                     "--out", str(tmp_path / "s.json")]) == 0
        replayed[name] = json.loads((tmp_path / "s.json").read_text())["makespan"]
    assert replayed == {"ranks": pytest.approx(6.03), "starts": pytest.approx(9.03)}
