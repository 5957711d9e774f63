"""The experiment runner: config validation, the sweep, resume after interruption,
error runs, and the tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import LAYER, grid_config

import dnnplace.registry as registry
from dnnplace.cli import main
from dnnplace.config import load_config, parse_config
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.presets import cluster_preset
from dnnplace.heuristics.baselines import greedy_fill
from dnnplace.registry import Method, MethodOutput
from dnnplace.runner import read_runs, run_config


def write_config(tmp_path: Path, body: str, name: str = "cfg.toml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


TINY = grid_config("tiny", ["single", "expert"], solver="time_limit = 5")


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
def reference() -> dict:
    path = Path(__file__).resolve().parents[1] / "experiments" / "reference" / "tarnawski-neurips20.json"
    return json.loads(path.read_text())


def test_tiny_config_runs_and_writes_tables(tmp_path, reference):
    cfg = write_config(tmp_path, TINY)
    records = run_config(cfg, progress=False)
    out = tmp_path / "out"
    assert len(records) == 4 and len(lines(out / "runs.jsonl")) == 4
    for rec in records:
        assert {"run_key", "config", "run", "git_revision", "environment", "timestamp", "status", "objective",
                "evaluation", "solver_package_version"} <= set(rec)
        assert rec["config"] == "tiny" and rec["status"] == "feasible"
        assert rec["run"]["solver"] == {"time_limit": 5}
    expert = {r["instance"].rsplit("/", 1)[-1]: r["objective"] for r in records if r["method"] == "expert"}
    tps = {row["input"].rsplit("/", 1)[-1]: row["tps"]["expert"] for row in reference["table1_throughput"]}
    for name, value in expert.items():
        assert round(value, 2) == tps[name]  # Table 1 "Expert"
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert [(r["graph"], r["method"]) for r in rows] == [
        ("bert24_inference", "single"), ("bert24_inference", "expert"),
        ("gnmt_inference", "single"), ("gnmt_inference", "expert")]
    md = (out / "table.md").read_text()
    assert "| bert24_inference | maxload | expert |" in md and "20.08" in md


def test_rerun_resumes_without_duplicates(tmp_path):
    cfg = write_config(tmp_path, TINY)
    run_config(cfg, progress=False)
    first = (tmp_path / "out" / "runs.jsonl").read_text()
    run_config(cfg, progress=False)
    assert (tmp_path / "out" / "runs.jsonl").read_text() == first  # nothing re-run, nothing appended
    table = (tmp_path / "out" / "table.md").read_text()
    run_config(cfg, progress=False, fresh=True)
    assert len(lines(tmp_path / "out" / "runs.jsonl")) == 4
    # --fresh keeps every backup under a timestamped name, the tables with it
    (bak,) = (tmp_path / "out").glob("runs.jsonl.*.bak")
    assert bak.read_text() == first
    assert [p.read_text() for p in (tmp_path / "out").glob("table.md.*.bak")] == [table]
    run_config(cfg, progress=False, fresh=True)  # a second fresh start overwrites no backup
    baks = sorted((tmp_path / "out").glob("runs.jsonl.*.bak"))
    assert len(baks) == 2 and bak in baks and bak.read_text() == first
    assert len(list((tmp_path / "out").glob("table.csv.*.bak"))) == 2


def _with_methods(monkeypatch, *extra: Method) -> None:
    base = registry.all_methods()
    monkeypatch.setattr(registry, "all_methods", lambda: {**base, **{m.name: m for m in extra}})


def test_interrupted_sweep_loses_nothing(tmp_path, monkeypatch):
    calls = {"n": 0}

    def flaky(inst, req, opts):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # Ctrl-C during flaky's second run (the third of the sweep)
        return MethodOutput(greedy_fill(inst.graph, inst.require_cluster()))

    _with_methods(monkeypatch, Method("flaky", ("maxload",), flaky, "test"))
    cfg = write_config(tmp_path, TINY.replace('["single", "expert"]', '["flaky", "single"]'))
    with pytest.raises(KeyboardInterrupt):
        run_config(cfg, progress=False)
    runs = tmp_path / "out" / "runs.jsonl"
    # the two finished runs are on disk
    assert [(Path(r["instance"]).stem, r["method"]) for r in lines(runs)] == [
        ("bert24_inference", "flaky"), ("bert24_inference", "single")]
    # a crash in the middle of writing a line leaves a partial last line behind
    with runs.open("a") as fh:
        fh.write('{"run_key": "half a li')
    assert len(read_runs(runs)) == 2  # the partial line is not a record
    records = run_config(cfg, progress=False)
    assert calls["n"] == 3  # only the interrupted flaky run was repeated
    got = lines(runs)
    assert len(got) == 4 and len({r["run_key"] for r in got}) == 4
    assert [r["status"] for r in records] == ["feasible"] * 4


def test_killed_fresh_run_leaves_no_old_table_looking_current(tmp_path, monkeypatch):
    calls = {"n": 0}

    def flaky(inst, req, opts):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # Ctrl-C during the fresh sweep's second flaky run
        return MethodOutput(greedy_fill(inst.graph, inst.require_cluster()))

    _with_methods(monkeypatch, Method("flaky", ("maxload",), flaky, "test"))
    cfg = write_config(tmp_path, TINY.replace('["single", "expert"]', '["flaky", "single"]'))
    run_config(cfg, progress=False)
    out = tmp_path / "out"
    old_table = (out / "table.md").read_text()
    with pytest.raises(KeyboardInterrupt):
        run_config(cfg, progress=False, fresh=True)
    assert not (out / "table.md").exists() and not (out / "table.csv").exists()
    (bak,) = out.glob("table.md.*.bak")
    assert bak.read_text() == old_table
    assert len(lines(out / "runs.jsonl")) == 2  # the fresh sweep's finished runs only


def test_old_files_with_repeated_keys_are_compacted_visibly(tmp_path, capsys):
    cfg = write_config(tmp_path, TINY)
    run_config(cfg, progress=False)
    runs = tmp_path / "out" / "runs.jsonl"
    recs = lines(runs)
    older = dict(recs[0], status="error", message="boom")
    runs.write_text("".join(json.dumps(r) + "\n" for r in [older, *recs]))  # as retries used to append
    capsys.readouterr()
    records = run_config(cfg, progress=False)
    err = capsys.readouterr().err
    assert "dropped 1 older record(s)" in err and str(runs) in err
    got = lines(runs)
    assert len(got) == 4 and len({r["run_key"] for r in got}) == 4 and got[0] == recs[0]
    assert [r["status"] for r in records] == ["feasible"] * 4


def test_error_run_is_recorded_and_sweep_continues(tmp_path, monkeypatch):
    def broken(inst, req, opts):
        raise RuntimeError("solver exploded")

    _with_methods(monkeypatch, Method("broken", ("maxload",), broken, "test"))
    cfg = write_config(tmp_path, TINY.replace('["single", "expert"]', '["broken", "single"]'))
    records = run_config(cfg, progress=False)
    assert [r["status"] for r in records] == ["error", "feasible", "error", "feasible"]
    assert records[0]["message"] == "RuntimeError: solver exploded"
    assert "solver exploded" in (tmp_path / "out" / "table.md").read_text()
    # errors are kept on resume; --retry-errors runs them again
    run_config(cfg, progress=False)
    assert len(lines(tmp_path / "out" / "runs.jsonl")) == 4
    run_config(cfg, progress=False, retry_errors=True)
    got = lines(tmp_path / "out" / "runs.jsonl")  # a retried run replaces its line: one line per key
    assert len(got) == 4 and len({r["run_key"] for r in got}) == 4


def test_unknown_keys_are_named(tmp_path):
    with pytest.raises(InputError, match="'methodz'"):
        parse_config({"name": "x", "grid": {"graphs": [f"{LAYER}/bert24_inference.json"], "methodz": ["greedy"]}})
    with pytest.raises(InputError, match="'colour'"):
        parse_config({"name": "x", "colour": 1, "grid": {}})
    with pytest.raises(InputError, match="'time_limits'"):
        parse_config({"name": "x", "grid": {"graphs": [f"{LAYER}/bert24_inference.json"], "methods": "greedy",
                                            "solver": {"time_limits": 3}}})
    with pytest.raises(InputError, match="'nope'"):
        parse_config({"name": "x", "grid": {"graphs": [f"{LAYER}/bert24_inference.json"], "methods": "nope"}})
    with pytest.raises(InputError, match="matches no file"):
        parse_config({"name": "x", "grid": {"graphs": "missing/*.json", "methods": "greedy"}})
    with pytest.raises(InputError, match="invalid TOML"):
        load_config(write_config(tmp_path, "name = [unclosed"))


def test_grid_runs_and_defaults_expand(tmp_path):
    cfg = parse_config({
        "name": "x",
        "defaults": {"solver": {"time_limit": 3}, "problems": "maxload"},
        "grid": {"graphs": f"{LAYER}/bert24_*.json", "methods": ["greedy", "single"],
                 "objective": ["pipedream", "gpipe"]},
        "runs": [{"graphs": f"{LAYER}/gnmt_inference.json", "methods": "expert", "problems": ["latency", "maxload"],
                  "solver": {"rel_gap": 0.01}}],
    })
    grid = [s for s in cfg.specs if s.method != "expert"]
    assert len(grid) == 2 * 2 * 2  # bert24_inference + bert24_training, 2 methods, 2 objectives
    runs = [s for s in cfg.specs if s.method == "expert"]
    assert [s.problem for s in runs] == ["latency", "maxload"]
    assert runs[0].solver == {"time_limit": 3, "rel_gap": 0.01}
    assert len({s.key for s in cfg.specs}) == len(cfg.specs)


def test_transfer_mode_is_a_run_key_of_makespan_runs(tmp_path):
    """``transfer_mode`` reaches the request and the record; a makespan run's key always
    names it (records made per edge before the default changed are run again on
    resume), a max-load run's key never does (it does not simulate)."""
    main(["generate", "random-dag", "--nodes", "12", "--seed", "2", "--out", str(tmp_path / "g.json")])
    doc = {"name": "t", "grid": {"graphs": str(tmp_path / "g.json"), "methods": "heft", "problems": "makespan",
                                 "cluster": "single-host-2-nvlink", "transfer_mode": ["per_destination", "per_edge"]}}
    specs = parse_config(doc).specs
    assert [s.transfer_mode for s in specs] == ["per_destination", "per_edge"]
    assert [s.request().transfer_mode for s in specs] == ["per_destination", "per_edge"]
    assert specs[0].identity()["transfer_mode"] == "per_destination" and specs[0].key != specs[1].key
    assert "transfers=per_edge" in specs[1].options_summary() and "transfers" not in specs[0].options_summary()
    ml = parse_config({"name": "m", "grid": {"graphs": f"{LAYER}/bert24_inference.json", "methods": "greedy"}})
    assert "transfer_mode" not in ml.specs[0].identity()
    with pytest.raises(InputError, match="unknown transfer_mode 'per_tensor'"):
        parse_config({**doc, "grid": {**doc["grid"], "transfer_mode": "per_tensor"}})
    res = registry.solve(*_instance_and(specs[1]))
    assert res.options["transfer_mode"] == "per_edge" and res.evaluation["transfer_mode"] == "per_edge"


def _instance_and(spec):
    from dnnplace.graphs.io import prepare_instance

    return prepare_instance(spec.graph, cluster=spec.cluster), spec.method, spec.request()


def test_cluster_preset_runs_a_generated_graph(tmp_path):
    main(["generate", "random-dag", "--nodes", "20", "--seed", "4", "--out", str(tmp_path / "g.json")])
    cfg = write_config(tmp_path, """
name = "gen"
out_dir = "gen-out"
[grid]
graphs = "g.json"
methods = "single"
problems = ["maxload", "makespan"]
cluster = "single-host-2-nvlink"
""")
    records = run_config(cfg, progress=False)
    assert [r["status"] for r in records] == ["feasible", "feasible"]
    assert all(set(r["placement"].values()) == {"gpu0"} for r in records)


def test_cli_run_prints_table(tmp_path, capsys):
    cfg = write_config(tmp_path, TINY)
    assert main(["run", str(cfg), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert "| gnmt_inference | maxload | expert |" in out and "4 runs (0 errors)" in out
    assert "[4/4] gnmt_inference maxload expert: feasible 46.2" in err  # no terminal: a line per run
    assert (tmp_path / "o" / "table.csv").exists()


def test_quickstart_config_is_valid():
    cfg = load_config(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml")
    assert cfg.name == "quickstart" and len(cfg.specs) >= 6
    assert {s.method for s in cfg.specs} >= {"greedy", "expert", "single"}


def test_cluster_presets():
    c = cluster_preset("tarnawski-3-2-1GiB")
    assert c.names == ("acc0", "acc1", "acc2", "cpu0", "cpu1") and float(c.memory[0]) == 2 ** 30
    assert cluster_preset("single-host-2-pcie-32GB").memory.tolist()[:2] == [32e9, 32e9]
    with pytest.raises(InputError, match="byte count"):
        cluster_preset("tarnawski-3-2-lots")
