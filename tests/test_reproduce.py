"""The --quick reproductions of Tarnawski et al. Tables 1, 3 and 4."""

from __future__ import annotations

import csv

import pytest

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.transforms.layers import layer_labels
from dnnplace.reproduce import reproduce, reproductions


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_registry_is_built_from_the_configs(tmp_path, monkeypatch):
    """Every bundled config naming a module is listed (and nothing else); each module runs;
    a new TOML file is a new reproduction, a wrong module name is refused naming the file."""
    import importlib

    from dnnplace import reproduce as registry
    from dnnplace.data import experiments_dir

    tagged = {p.stem for p in experiments_dir().glob("*.toml") if "\nreproduction = " in p.read_text()}
    assert set(reproductions()) == tagged and len(tagged) >= 20
    assert set(reproductions().values()) == {"tarnawski", "pesto", "fastt", "celeritas", "pardnn"}
    for module in set(reproductions().values()):
        assert callable(importlib.import_module(f"dnnplace.experiments.{module}").reproduce)
    (tmp_path / "mine.toml").write_text('reproduction = "fastt"\nkind = "scaling"\n')
    (tmp_path / "plain.toml").write_text('name = "a sweep"\n')
    monkeypatch.setattr(registry, "experiments_dir", lambda: tmp_path)
    registry.reproductions.cache_clear()
    try:
        assert registry.reproductions() == {"mine": "fastt"}
        (tmp_path / "bad.toml").write_text('reproduction = "no such"\n')
        registry.reproductions.cache_clear()
        with pytest.raises(InputError, match="bad.toml"):
            registry.reproductions()
    finally:
        registry.reproductions.cache_clear()


def test_table3_quick(tmp_path):
    md = reproduce("tarnawski-table3", quick=True, out_dir=tmp_path)
    rows = _rows(tmp_path / "tarnawski-table3-quick.csv")
    assert md.exists() and len(rows) == 16  # 8 workloads x (operator, layer)
    op = [r for r in rows if r["column"] == "dp operator graph"]
    assert len(op) == 8 and all(r["ours"] for r in op)  # every operator-graph DP ran
    assert [r["verdict"] for r in op] == ["match"] * 8  # exact DP = the paper's figure
    bert12 = [r for r in rows if "bert_l-12" in r["row"] and r["column"] == "dp contracted layer graph"]
    assert len(bert12) == 2  # inference and training
    assert all(r["verdict"].startswith("match") for r in bert12)  # 159.43 and 465.41


def test_layer_grouping_of_bert12(tarnawski_dir):
    g = load_instance(tarnawski_dir / "throughput-inputs/OperatorGraphs/bert_l-12_inference.json").graph
    lab, rule = layer_labels(g)
    assert rule.startswith("layerId") and "'13'" in rule  # the split embedding/head layer


@pytest.mark.slow
def test_table1_quick(tmp_path):
    reproduce("tarnawski-table1", quick=True, out_dir=tmp_path)
    rows = _rows(tmp_path / "tarnawski-table1-quick.csv")
    tps = [r for r in rows if r["column"] == "dp"]
    assert len(tps) == 16  # every row of the paper, run or marked
    ran = [r for r in tps if r["ours"]]
    # --quick skips only the DP over InceptionV3's 36596 ideals (inference and training)
    assert len(ran) == 14, [r["row"] for r in tps if not r["ours"]]
    assert [r["verdict"] for r in ran] == ["match"] * len(ran)
    assert all("inceptionv3" in r["row"] and "not run" in r["note"] for r in tps if not r["ours"])
    ips = [r for r in rows if r["column"].startswith("ip")]
    assert len(ips) == 3 * 16 and all("not run" in r["note"] and not r["ours"] for r in ips)
    # what CI's wheel check counts: at least 8 matching exact cells in the written table
    md = (tmp_path / "tarnawski-table1-quick.md").read_text()
    assert md.count("| match |") >= 8


@pytest.mark.slow
def test_table4_quick(tmp_path):
    reproduce("tarnawski-table4", quick=True, out_dir=tmp_path)
    rows = _rows(tmp_path / "tarnawski-table4-quick.csv")
    assert {r["column"] for r in rows} >= {"greedy", "maxload_dp", "scotch", "expert", "ip"}
    by_column: dict[str, list[dict]] = {}
    for r in rows:
        by_column.setdefault(r["column"], []).append(r)
    assert all(len(cells) == 8 for cells in by_column.values())  # 4 operator + 4 layer graphs
    # the heuristics run everywhere; the DP on all but InceptionV3 (too many ideals for --quick)
    for col in ("greedy", "latency_ls", "scotch"):
        assert all(r["ours"] for r in by_column[col]), col
    dp_skipped = [r["row"] for r in by_column["maxload_dp"] if not r["ours"]]
    assert dp_skipped == ["Layer inceptionv3_inference"]
    assert all(r["note"] == "not run (--quick)" and not r["ours"] for r in by_column["ip"])
    greedy = {r["row"]: r for r in by_column["greedy"]}
    assert greedy["Operator bert_l-3_inference"]["verdict"] == "same"  # 416.20
