"""The researcher's path: the problem inferred from the method,
results that carry their cluster (so evaluate/simulate need no --cluster again), a lower
bound and gap printed for every method, bundled workloads and configs by name, and the
capture commands' output paths checked before any work."""

from __future__ import annotations

import json
import re

import pytest

from dnnplace.cli import main
from dnnplace.data import resolve_config, resolve_graph, workloads_dir
from dnnplace.graphs.io import read_json


@pytest.fixture
def graph(tmp_path):
    g = tmp_path / "g.json"
    assert main(["generate", "random-dag", "--nodes", "14", "--seed", "2", "--out", str(g)]) == 0  # no cluster
    return g


def test_problem_inferred_and_result_carries_its_cluster(graph, tmp_path, capsys):
    out = tmp_path / "heft.json"
    capsys.readouterr()
    # heft solves makespans only: no --problem needed (was: "does not solve 'maxload'")
    assert main(["solve", str(graph), "--method", "heft", "--cluster", "single-host-2-nvlink", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    doc = read_json(out)
    assert doc["problem"] == "makespan" and doc["cluster"] == "single-host-2-nvlink"
    # a heuristic's bound and gap are printed (was "bound: -   gap: -")
    m = re.search(r"bound: ([0-9.]+)\s+gap: ([0-9.]+)%", text)
    assert m and float(m.group(1)) == pytest.approx(doc["lower_bound"], abs=0.006)
    assert doc["lower_bound"] == pytest.approx(doc["evaluation"]["lower_bound"])
    # evaluate and simulate: no --cluster, no --problem (the graph file has no cluster)
    ev = tmp_path / "ev.json"
    assert main(["evaluate", str(graph), str(out), "--out", str(ev)]) == 0
    assert read_json(ev)["problem"] == "makespan"
    assert main(["simulate", str(graph), str(out), "--policy", "order"]) == 0
    assert f"makespan: {doc['objective']:.2f}" in capsys.readouterr().out
    # without a result (a plain map) the cluster is still needed, and said so
    plain = tmp_path / "map.json"
    plain.write_text(json.dumps(doc["placement"]))
    assert main(["evaluate", str(graph), str(plain), "--problem", "makespan"]) == 2
    assert "no cluster given" in capsys.readouterr().err


def test_a_cluster_file_is_carried_whole(tmp_path, capsys):
    g = tmp_path / "g.json"
    assert main(["generate", "random-dag", "--nodes", "10", "--seed", "1", "--cluster", "single-host-3-pcie4",
                 "--out", str(g)]) == 0
    r = tmp_path / "r.json"
    assert main(["solve", str(g), "--method", "m-topo", "--out", str(r)]) == 0
    doc = read_json(r)
    assert isinstance(doc["cluster"], dict) and len(doc["cluster"]["devices"]) == 4  # 3 GPUs and the CPU
    bare = read_json(g)
    bare.pop("cluster")
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    ev = tmp_path / "ev.json"
    assert main(["evaluate", str(tmp_path / "bare.json"), str(r), "--out", str(ev)]) == 0
    assert read_json(ev)["objective"] == pytest.approx(doc["objective"])


def test_a_method_of_two_problems_defaults_to_maxload(capsys):
    assert main(["solve", "bert24_training", "--method", "greedy"]) == 0  # a bundled workload by name
    out = capsys.readouterr().out
    assert "(maxload): feasible" in out and "bound: " in out and "bound: -" not in out


def test_bundled_names_resolve_and_ambiguous_ones_are_named(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the checkout, as with an installed wheel
    assert resolve_graph("captured/resnet-50").endswith("captured/resnet-50.json")
    assert resolve_graph("graphs/workloads/captured/resnet-50.json").startswith(str(workloads_dir()))
    assert resolve_config("quickstart").endswith("quickstart.toml")
    assert resolve_config("experiments/quickstart.toml").endswith("quickstart.toml")
    assert main(["info", "captured/resnet-50"]) == 0
    capsys.readouterr()
    assert main(["info", "gnmt_inference"]) == 2  # latency-inputs and throughput-inputs both have one
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "latency-inputs" in err and "throughput-inputs" in err
    assert main(["run", "no-such-config"]) == 2


def test_capture_and_profile_links_check_their_outputs_first(tmp_path, capsys):
    model = tmp_path / "mymodel.py"
    model.write_text("def net():\n    pass\n")
    folder = tmp_path / "adir"
    folder.mkdir()
    for argv, flag in ((["capture", f"{model}:net", "--input", "2x3", "--out", str(model)], "--out"),
                       (["capture", "resnet-50", "--batches", "2,2", "--out", str(tmp_path / "x.json")], "--batches"),
                       (["profile-links", "--gloo", "2", "--out", str(folder)], "--out")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and flag in err, err
    assert model.read_text() == "def net():\n    pass\n"


def test_cluster_file_and_out_kept_when_the_output_is_cut(tmp_path):
    """``--cluster FILE`` reads a cluster JSON (profile-links' output, or a graph file's
    cluster); ``dnnplace solve ... --out R | head`` still writes R (it was lost to the
    broken pipe before the write)."""
    import subprocess
    import sys

    g = tmp_path / "g.json"
    assert main(["generate", "random-dag", "--nodes", "8", "--seed", "4", "--cluster", "single-host-2-pcie5",
                 "--out", str(g)]) == 0
    cl = tmp_path / "cl.json"
    cl.write_text(json.dumps({"format": "dnnplace.cluster/1", **read_json(g)["cluster"]}))
    bare = tmp_path / "bare.json"
    doc = read_json(g)
    doc.pop("cluster")
    bare.write_text(json.dumps(doc))
    out = tmp_path / "r.json"
    # `true` reads nothing and is gone before the solve ends: the first line printed breaks the pipe
    cmd = f"{sys.executable} -m dnnplace solve {bare} --cluster {cl} --method heft --out {out} | true"
    subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
    assert out.exists()
    assert read_json(out)["cluster"]["name"] == read_json(g)["cluster"]["name"]
