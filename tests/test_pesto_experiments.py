"""The Pesto experiments run through the one sweep driver: file-based runs of registered
methods, re-scored, resumable; and Pesto's layer-wise expert (``layer-split``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators.lstm import lstm_grid
from dnnplace.graphs.instance import Instance
from dnnplace.pesto_experiments import Config, reproduce
from dnnplace.registry import SolveRequest, solve
from dnnplace.runner import read_runs


@pytest.fixture(scope="module")
def congestion_quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("pesto")
    md = reproduce("pesto-congestion", quick=True, out_dir=out, progress=False)
    return out, md


def test_congestion_quick_runs_through_the_driver(congestion_quick):
    out, md = congestion_quick
    folder = md.parent
    assert folder == out / "congestion-quick" and md.exists() and (folder / "table.csv").exists()
    recs = read_runs(folder / "runs.jsonl")
    assert len(recs) == 2
    assert all(r["method"] == "pesto" for r in recs)
    assert {r["run"]["params"]["ilp_congestion"] for r in recs} == {False, True}
    assert all(r["run"]["params"]["fallback"] is False for r in recs)
    for r in recs:  # status from the evaluation, on an ordinary instance file
        assert r["status"] in ("feasible", "optimal", "infeasible", "memory_infeasible")
        assert r["evaluation"]["feasible"] == (r["status"] in ("feasible", "optimal"))
        assert r["run"]["solver"]["time_limit"] == 10.0
        assert (folder / "instances").is_dir() and r["run"]["graph"].endswith(".json")
    by_flag = {r["run"]["params"]["ilp_congestion"]: r for r in recs}
    with open(folder / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2
    for row in rows:  # every makespan in the table is its record's evaluation
        rec = by_flag[row["ilp_congestion"] == "True"]
        assert float(row["makespan"]) == rec["evaluation"]["objective"]
        assert float(row["makespan_no_congestion"]) <= float(row["makespan"]) + 1e-9
    assert sorted(p.name for p in folder.glob("gantt_*.png")) == ["gantt_with_congestion.png",
                                                                  "gantt_without_congestion.png"]


def test_congestion_quick_resumes(congestion_quick):
    out, md = congestion_quick
    runs = md.parent / "runs.jsonl"
    before = runs.read_bytes()
    md2 = reproduce("pesto-congestion", quick=True, out_dir=out, progress=False)
    assert md2 == md and runs.read_bytes() == before  # nothing run again


def test_unknown_config_key_is_an_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('name = "x"\nkind = "congestion"\ncoarsen = 10\n')
    with pytest.raises(InputError, match="unknown keys"):
        Config.load(p)


def test_layer_split_puts_each_lstm_layer_on_one_gpu_in_order():
    g = lstm_grid(layers=4, steps=3, hidden=64, batch=8, vocab=100, training=True, kinds=["gpu"])
    inst = Instance(g, Cluster.single_host(4, with_cpu=False, gpu_memory=1e12), "lstm-4x3")
    res = solve(inst, "layer-split", SolveRequest(problem="makespan"))
    assert res.status == "feasible" and res.options["policy"] == "fifo"
    layers = np.asarray(g.layers)
    dev = np.array([int(res.placement[str(v)].removeprefix("gpu")) for v in g.ids])
    for lay in range(4):  # layer l (forward, backward, update) on gpu l
        assert set(dev[layers == lay]) == {lay}
    assert set(dev[layers == -1]) == {0} and set(dev[layers == 4]) == {3}  # embedding first, projection last
    two = solve(Instance(g, Cluster.single_host(2, with_cpu=False, gpu_memory=1e12)), "layer-split",
                SolveRequest(problem="makespan"))
    dev2 = np.array([int(two.placement[str(v)].removeprefix("gpu")) for v in g.ids])
    assert [sorted(set(dev2[layers == lay])) for lay in range(-1, 5)] == [[0], [0], [0], [1], [1], [1]]
