"""Inputs are never written over; results carry the graph they were solved on and are read
back in their own order and transfer mode (docs/bad-input.md "Inputs are never written
over", "Results and the graph they were solved on", "Transfers and obvious candidates";
docs/formats.md "Result JSON"; docs/semantics.md 2.1).

Figures come from the link model of the ``single-host-2-nvlink`` preset (docs/formats.md:
a GPU-GPU transfer of ``b`` bytes takes ``0.01 ms + b / 25 GB/s``) or from the result
itself (its own objective).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dnnplace.cli import main
from dnnplace.graphs.io import read_json

NVLINK = "single-host-2-nvlink"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _graph_doc(name: str, compute: list[float], edges: list[tuple[str, str, float]], ids: str = "abcde") -> dict:
    return {"format": "dnnplace.graph/1", "name": name, "unit": "ms", "kinds": ["gpu"],
            "nodes": {"id": list(ids), "compute": {"gpu": compute}, "memory": [0] * len(ids)},
            "edges": {"src": [e[0] for e in edges], "dst": [e[1] for e in edges], "bytes": [e[2] for e in edges]}}


# One output of 'a' read by four nodes, its edges written for one transfer per edge (557, 106,
# 64 and 50 kB, no 'output' field), as a Pesto-style instance gives them.
FAN = [("a", "b", 557000.0), ("a", "c", 106000.0), ("a", "d", 64000.0), ("a", "e", 50000.0)]


@pytest.fixture
def fan(tmp_path: Path) -> Path:
    path = tmp_path / "fan.json"
    path.write_text(json.dumps(_graph_doc("fan", [1.0, 0.0, 0.0, 0.0, 0.0], FAN)))
    return path


@pytest.fixture
def fan_split(tmp_path: Path) -> Path:
    """'a' on gpu0, its four consumers on gpu1: every edge crosses the one link."""
    path = tmp_path / "split.json"
    path.write_text(json.dumps({"a": "gpu0", "b": "gpu1", "c": "gpu1", "d": "gpu1", "e": "gpu1"}))
    return path


@pytest.fixture
def ordered(tmp_path: Path, capsys) -> tuple[Path, Path]:
    """A random DAG and HEFT's result on it: an ordered result (start times per node)
    whose order FIFO does not reproduce."""
    graph, res = tmp_path / "dag.json", tmp_path / "heft.json"
    assert main(["generate", "random-dag", "--nodes", "30", "--seed", "1", "--cluster", "single-host-4-nvlink",
                 "--out", str(graph)]) == 0
    assert main(["solve", str(graph), "--method", "heft", "--out", str(res)]) == 0
    capsys.readouterr()
    return graph, res


# ---------------------------------------------------------------------------- inputs never written over
def _inputs(tmp_path: Path, capsys) -> dict[str, Path]:
    """One file per kind of input a subcommand reads, each a valid file of its kind."""
    f = {"graph": tmp_path / "g.json", "cluster": tmp_path / "c.json", "result": tmp_path / "r.json",
         "model": tmp_path / "mymodel.py", "split": tmp_path / "p.json", "config": tmp_path / "cfg.toml",
         "out": tmp_path / "out"}
    f["graph"].write_text(json.dumps(_graph_doc("g", [1.0] * 5, FAN)))
    assert main(["generate", "random-dag", "--nodes", "5", "--seed", "0", "--cluster", NVLINK,
                 "--out", str(tmp_path / "gc.json")]) == 0
    f["cluster"].write_text(json.dumps(read_json(tmp_path / "gc.json")["cluster"]))
    assert main(["solve", str(f["graph"]), "--method", "heft", "--cluster", NVLINK, "--out", str(f["result"])]) == 0
    f["model"].write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n")
    f["split"].write_text(json.dumps({n: "gpu0" for n in "abcde"}))
    f["out"].mkdir()
    (f["out"] / "table.csv").write_text(f["graph"].read_text())  # a graph a config names, inside the out folder
    (f["out"] / "compare.md").write_text("")
    f["config"].write_text(f'name = "x"\n[grid]\ngraphs = ["{f["out"] / "table.csv"}"]\nmethods = ["heft"]\n'
                           f'problems = ["makespan"]\ncluster = "{NVLINK}"\n')
    capsys.readouterr()
    return f


# (subcommand, input flag, argv with that input also given as an output, the output flag named)
OVERWRITES = [
    ("evaluate", "graph", ["evaluate", "{graph}", "{result}", "--out", "{graph}"]),
    ("evaluate", "placement", ["evaluate", "{graph}", "{result}", "--out", "{result}"]),
    ("evaluate", "--cluster", ["evaluate", "{graph}", "{result}", "--cluster", "{cluster}", "--out", "{cluster}"]),
    ("simulate", "graph", ["simulate", "{graph}", "{result}", "--out", "{graph}"]),
    ("simulate", "placement", ["simulate", "{graph}", "{result}", "--gantt", "{result}"]),
    ("simulate", "--cluster", ["simulate", "{graph}", "{result}", "--cluster", "{cluster}", "--out", "{cluster}"]),
    ("generate", "--cluster", ["generate", "random-dag", "--nodes", "5", "--cluster", "{cluster}",
                               "--out", "{cluster}"]),
    ("solve", "graph", ["solve", "{graph}", "--method", "heft", "--cluster", NVLINK, "--out", "{graph}"]),
    ("solve", "--cluster", ["solve", "{graph}", "--method", "heft", "--cluster", "{cluster}", "--out", "{cluster}"]),
    ("solve", "--warm-start", ["solve", "{graph}", "--method", "pesto", "--cluster", NVLINK, "--warm-start",
                               "{result}", "--out", "{result}"]),
    ("solve", "--split", ["solve", "{graph}", "--method", "expert", "--cluster", NVLINK, "--split", "{split}",
                          "--out", "{split}"]),
    ("solve", "--param", ["solve", "{graph}", "--method", "expert", "--cluster", NVLINK, "--param",
                          "split={split}", "--out", "{split}"]),
    ("run", "config graphs", ["run", "{config}", "--out", "{out}"]),
    ("compare", "RESULTS", ["compare", "{out}/compare.md", "--out", "{out}"]),
    ("capture", "model", ["capture", "{model}:Net", "--input", "2x3", "--out", "{model}"]),
    ("capture", "--cluster", ["capture", "alexnet", "--cluster", "{cluster}", "--out", "{cluster}"]),
    ("execute", "model", ["execute", "{model}:Net", "{result}", "--out", "{model}"]),
    ("execute", "result", ["execute", "alexnet", "{result}", "--out", "{result}"]),
    ("execute", "--graph", ["execute", "alexnet", "{result}", "--graph", "{graph}", "--gantt", "{graph}"]),
    ("execute", "--cluster", ["execute", "alexnet", "{result}", "--cluster", "{cluster}", "--out", "{cluster}"]),
]


def test_no_command_writes_over_any_of_its_inputs(tmp_path, capsys):
    """Every input flag of every subcommand that writes a file, given as its output: exit 2,
    one line naming the input, the input unchanged (byte for byte). ``info`` and
    ``methods`` write nothing; ``reproduce`` and ``profile-links`` read no file."""
    files = _inputs(tmp_path, capsys)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    checked = set()
    for command, flag, argv in OVERWRITES:
        code, out, err = run(capsys, *[a.format(**files) for a in argv])
        assert code == 2, (command, flag, err)
        assert out == "" and err.count("\n") == 1 and err.startswith("dnnplace: error: "), (command, flag, err)
        assert "is the input" in err, (command, flag, err)
        assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, (command, flag)
        checked.add((command, flag))
    assert len(checked) == len(OVERWRITES) == 20
    assert {c for c, _ in checked} == {"evaluate", "simulate", "generate", "solve", "run", "compare", "capture",
                                       "execute"}


# ---------------------------------------------------------------------------- the graph a result was solved on
def test_a_result_of_another_graph_with_the_same_ids_is_refused(tmp_path, capsys, fan, fan_split):
    """One compute time changed, the same node ids: evaluate, simulate, a warm start and
    execute refuse the result (exit 2, naming both graphs); without its fingerprint (an
    older file) it is read as before."""
    res = tmp_path / "r.json"
    assert main(["solve", str(fan), "--method", "heft", "--cluster", NVLINK, "--out", str(res)]) == 0
    doc = read_json(res)
    assert set(doc["graph_fingerprint"]) == {"name", "nodes", "edges", "digest"}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_graph_doc("fan", [1.0, 0.5, 0.0, 0.0, 0.0], FAN)))
    capsys.readouterr()
    refused = 0
    for argv in (["evaluate", other, res], ["simulate", other, res],
                 ["solve", other, "--method", "pesto", "--cluster", NVLINK, "--warm-start", res],
                 ["execute", "alexnet", res, "--graph", other]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, (argv[0], err)
        assert "differs from the one it was solved on" in err and str(other) in err and str(res) in err, err
        assert err.count("fingerprint") == 2, err
        refused += 1
    assert refused == 4
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(f'name = "s"\n[grid]\ngraphs = ["{fan}"]\nmethods = ["heft"]\nproblems = ["makespan"]\n'
                   f'cluster = "{NVLINK}"\n')
    assert main(["-q", "run", str(cfg), "--out", str(tmp_path / "sweep")]) == 0
    (record,) = [json.loads(line) for line in (tmp_path / "sweep" / "runs.jsonl").read_text().splitlines()]
    assert record["graph_fingerprint"] == doc["graph_fingerprint"]  # a run record carries it too
    del doc["graph_fingerprint"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert run(capsys, "evaluate", other, old)[0] == 0
    assert run(capsys, "evaluate", fan, res)[0] == 0


def test_result_fields_are_checked(tmp_path, capsys, fan):
    """``problem: "throughput"`` and a start time ``"soon"``: exit 2 naming the field (and the node)."""
    res = tmp_path / "r.json"
    assert main(["solve", str(fan), "--method", "heft", "--cluster", NVLINK, "--out", str(res)]) == 0
    doc = read_json(res)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "problem": "throughput"}))
    capsys.readouterr()
    code, out, err = run(capsys, "evaluate", fan, bad)
    assert (code, out, err.count("\n")) == (2, "", 1) and "field 'problem' is 'throughput'" in err
    bad.write_text(json.dumps({**doc, "start": {**doc["start"], "c": "soon"}}))
    for argv in (["evaluate", fan, bad], ["simulate", fan, bad, "--policy", "order"]):
        code, out, err = run(capsys, *argv)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert "node 'c': field 'start' must be a finite number, got 'soon'" in err


# ---------------------------------------------------------------------------- ordered results
def test_an_ordered_result_is_evaluated_in_its_own_order(capsys, ordered):
    """HEFT's result scored by ``evaluate`` and ``simulate`` (default), ``--policy order`` and ``--policy
    priority`` (its start times as priorities) is its own objective, at the evaluator's
    tolerance (1e-6 relative); FIFO differs on this graph, so the default matters."""
    graph, res = ordered
    own = read_json(res)["objective"]
    got = {}
    for policy in (None, "order", "priority", "fifo"):
        out = Path(str(res).replace(".json", f"-{policy}.json"))
        argv = ["evaluate", graph, res, "--out", out] + ([] if policy is None else ["--policy", policy])
        assert run(capsys, *argv)[0] == 0
        got[policy] = read_json(out)["objective"]
    for policy in (None, "order", "priority"):
        assert got[policy] == pytest.approx(own, rel=1e-6), policy
    assert got["fifo"] > own * 1.01
    simulated = {}
    for policy in (None, "fifo"):  # simulate replays it the same way
        out = Path(str(res).replace(".json", f"-sim-{policy}.json"))
        argv = ["simulate", graph, res, "--out", out] + ([] if policy is None else ["--policy", policy])
        assert run(capsys, *argv)[0] == 0
        simulated[policy] = read_json(out)["makespan"]
    assert simulated[None] == pytest.approx(own, rel=1e-6) and simulated["fifo"] == pytest.approx(got["fifo"])


def test_order_policies_need_an_order(tmp_path, capsys, fan, fan_split):
    """A plain ``{node: device}`` map carries no order: ``--policy order|priority`` is exit 2
    saying what is missing."""
    for policy, missing in (("order", "'start' times"), ("priority", "'priorities' or 'start' times")):
        code, out, err = run(capsys, "evaluate", fan, fan_split, "--problem", "makespan", "--cluster", NVLINK,
                             "--policy", policy)
        assert (code, out, err.count("\n")) == (2, "", 1) and f"--policy {policy} needs {missing}" in err


# ---------------------------------------------------------------------------- transfer modes
def test_transfer_mode_flag_changes_the_fan_out(tmp_path, capsys, fan, fan_split):
    """'a' (1 ms on gpu0) feeds four zero-time nodes on gpu1 over one NVLink link
    (0.01 ms + bytes / 25 GB/s, i.e. 4e-8 ms per byte):

    - per-destination: one transfer at the largest size, 0.01 + 557000 * 4e-8 = 0.03228 ms,
      so the makespan is 1 + 0.03228 = 1.03228 ms;
    - per-edge: four transfers queued on the link, 0.03228 + 0.01424 + 0.01256 + 0.012 =
      0.07108 ms, so 1.07108 ms.
    """
    expected = {"per-destination": 1.03228, "per-edge": 1.07108}
    seen = 0
    for mode, value in expected.items():
        for command in ("simulate", "evaluate"):
            out = tmp_path / f"{command}-{mode}.json"
            argv = [command, fan, fan_split, "--cluster", NVLINK, "--transfer-mode", mode, "--out", out]
            argv += ["--problem", "makespan"] if command == "evaluate" else []
            assert run(capsys, *argv)[0] == 0
            doc = read_json(out)
            got = doc["makespan"] if command == "simulate" else doc["objective"]
            assert got == pytest.approx(value, abs=1e-9), (command, mode)
            seen += 1
    assert seen == 4
    res = tmp_path / "r.json"
    assert run(capsys, "solve", fan, "--method", "heft", "--cluster", NVLINK, "--transfer-mode", "per-edge",
               "--out", res)[0] == 0
    assert read_json(res)["options"]["transfer_mode"] == "per_edge"
    code, out, err = run(capsys, "solve", fan, "--method", "dp", "--cluster", NVLINK, "--transfer-mode", "per-edge")
    assert (code, out) == (2, "") and "--transfer-mode applies to problem 'makespan' only" in err


def test_uneven_outputs_warn_once_naming_the_node(tmp_path, capsys, fan, fan_split):
    """Per-destination on edges of one output that carry different bytes: one warning line
    naming the node, the count and the sizes; none per-edge, none on a consistent graph."""
    code, _, err = run(capsys, "simulate", fan, fan_split, "--cluster", NVLINK)
    assert code == 0
    lines = [ln for ln in err.splitlines() if ln.startswith("dnnplace: warning:")]
    assert len(lines) == 1 and "1 output(s)" in lines[0] and "'a' output 0: 4 edges, 50000 to 557000 bytes" in lines[0]
    assert run(capsys, "simulate", fan, fan_split, "--cluster", NVLINK, "--transfer-mode", "per-edge")[2] == ""
    even = tmp_path / "even.json"
    even.write_text(json.dumps(_graph_doc("even", [1.0, 0.0, 0.0, 0.0, 0.0], [(s, d, 64000.0) for s, d, _ in FAN])))
    assert run(capsys, "simulate", even, fan_split, "--cluster", NVLINK)[2] == ""
    code, _, err = run(capsys, "solve", fan, "--method", "heft", "--cluster", NVLINK)
    assert code == 0 and err.count("dnnplace: warning:") == 1 and "'a' output 0" in err


def test_a_warm_start_of_another_graph_is_one_rule_for_every_method(fan):
    """A start handed to the library (not read from a file) that places another graph is
    refused by the registry for any method, before the method runs
    (:func:`dnnplace.graphs.io.check_same_graph`, the rule files go through too)."""
    import dataclasses

    from dnnplace.graphs.errors import InputError
    from dnnplace.graphs.io import load_instance
    from dnnplace.graphs.placement import Placement
    from dnnplace.methods.base import WarmStart
    from dnnplace.registry import SolveRequest, solve

    inst = load_instance(fan, NVLINK)
    other = dataclasses.replace(inst.graph, compute=inst.graph.compute * 2)
    start = WarmStart(Placement(other, inst.cluster, [0] * other.n), "a test's start")
    refused = 0
    for method in ("heft", "pesto"):
        with pytest.raises(InputError, match="warm start a test's start: places another graph"):
            solve(inst, method, SolveRequest(problem="makespan", warm=start))
        refused += 1
    assert refused == 2
    assert solve(inst, "heft", SolveRequest(problem="makespan", warm=WarmStart(
        Placement(inst.graph, inst.cluster, [0] * other.n), "its own"))).status == "feasible"
