"""The Pesto experiments run through the one sweep driver: file-based runs of registered
methods, re-scored, resumable; and Pesto's layer-wise expert (``layer-split``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from dnnplace.data import experiment_config
from dnnplace.experiments.instance_files import Variant, write_variants
from dnnplace.experiments.pesto import Config, reproduce
from dnnplace.experiments.pesto_config import experiment_graph, pesto_spec
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators.lstm import lstm_grid
from dnnplace.graphs.instance import Instance
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
    assert len(recs) == 3
    assert all(r["method"] == "pesto" for r in recs)
    def label(r):
        p = r["run"]["params"]
        return ("with" if p["ilp_congestion"] else "without") + ("_relaxed" if p.get("relaxed_start") else "")
    assert sorted(label(r) for r in recs) == ["with", "with_relaxed", "without"]
    assert all(r["run"]["params"]["fallback"] is False for r in recs)
    for r in recs:  # status from the evaluation, on an ordinary instance file
        assert r["status"] in ("feasible", "optimal", "infeasible", "memory_infeasible")
        assert r["evaluation"]["feasible"] == (r["status"] in ("feasible", "optimal"))
        assert r["run"]["solver"]["time_limit"] == 10.0
        assert (folder / "instances").is_dir() and r["run"]["graph"].endswith(".json")
    relaxed = next(r for r in recs if label(r) == "with_relaxed")
    # the relaxed phase ran and is recorded; its start is what it replayed when it beat the list schedule
    info = relaxed["extra"]["model_size"]["relaxed_start"]
    assert set(info) >= {"status", "objective", "bound"} and info["objective"] is not None
    if relaxed["extra"]["warm_algorithm"] == "relaxation":
        assert relaxed["extra"]["model_size"]["horizon"] == pytest.approx(info["replayed"])
    by_label = {label(r): r for r in recs}
    with open(folder / "table.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [row["ilp"] for row in rows] == ["without congestion", "with congestion",
                                            "with congestion relaxed start"]
    for row, key in zip(rows, ("without", "with", "with_relaxed"), strict=True):
        rec = by_label[key]  # every makespan in the table is its record's evaluation
        assert float(row["makespan"]) == rec["evaluation"]["objective"]
        assert float(row["makespan_no_congestion"]) <= float(row["makespan"]) + 1e-9
    assert sorted(p.name for p in folder.glob("gantt_*.png")) == [
        "gantt_with_congestion.png", "gantt_with_congestion_relaxed_start.png", "gantt_without_congestion.png"]


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


@pytest.mark.parametrize("name", ["pesto-hardware-captured", "pesto-coarsening-captured"])
def test_captured_configs_load_the_bundled_rnnlm_and_run_cpsat(name, tmp_path):
    cfg = Config.load(experiment_config(name))
    g, source = experiment_graph(cfg)
    assert g.n == 2634 and g.name == "rnnlm-2x2048" and source == "workload captured/rnnlm-2x2048.json"
    v = write_variants(g, {"gpus2": (Cluster.single_host(2, with_cpu=False), 2, 1.0, 1.0)}, tmp_path, source)["gpus2"]
    spec = pesto_spec(v, cfg, 100)
    assert spec.params == {"coarsen_to": 100, "engine": "cpsat"} and spec.solver["time_limit"] == cfg.time_limit


def test_generated_configs_keep_their_graph_source_and_run_keys():
    cfg = Config.load(experiment_config("pesto-hardware"))
    g, source = experiment_graph(cfg)
    assert cfg.engine is None and source == f"generate({cfg.graph})" and g.meta  # as written into their instances
    v = Variant("x", experiment_config("pesto-hardware"), g.n, 2)
    assert pesto_spec(v, cfg, 60).params == {"coarsen_to": 60}  # no engine key: recorded runs still resume


def test_unknown_workload_is_an_error():
    cfg = Config(name="x", kind="hardware", graph="captured/no-such-model.json")
    with pytest.raises(InputError, match="no-such-model.*rnnlm-2x2048"):
        experiment_graph(cfg)


def test_coarsening_table_states_a_certified_gap_on_the_original_graph(tmp_path):
    """The coarsening runner on a small LSTM: every Pesto makespan is at or above the
    original graph's combinatorial lower bound, and the table's gap is 1 - bound / makespan."""
    from dnnplace.evaluation.bounds import makespan_lower_bound
    from dnnplace.experiments.pesto_figures import run_coarsening

    cfg = Config(name="tiny-coarsening", kind="coarsening", graph={"family": "lstm", "layers": 2, "steps": 3,
                                                                   "hidden": 64, "batch": 8, "vocab": 100,
                                                                   "training": True, "kinds": ["gpu"]},
                 cluster={"interconnect": "nvlink", "with_cpu": False}, coarse_sizes=(8, 16), gpus=(2,),
                 time_limit=5.0)
    md = run_coarsening("tiny-coarsening", cfg, tmp_path, quick=False, fresh=False, progress=False)
    with open(md.with_suffix(".csv")) as fh:
        rows = list(csv.DictReader(fh))
    g, _ = experiment_graph(cfg)
    lb = makespan_lower_bound(g, Cluster.single_host(2, interconnect="nvlink", with_cpu=False))
    assert len(rows) == 2
    for row in rows:
        ms = float(row["pesto"])
        assert float(row["lower_bound"]) == pytest.approx(lb) and lb <= ms * (1 + 1e-12)
        assert float(row["gap_to_bound"]) == pytest.approx(1 - lb / ms)
