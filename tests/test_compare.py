"""``dnnplace compare``: the certified gap, the time to a gap from traces, the per-backend
summary, the plots (checked by their colours), and a real sweep over two backends."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest
from conftest import png_pixels_by_colour

from dnnplace.cli import main
from dnnplace.compare import compare, rows, time_to_gap
from dnnplace.runner import run_config

HIGHS_BLUE, SCIP_GREEN = "#1F77B4", "#2CA02C"
HAS_SCIP = importlib.util.find_spec("pyscipopt") is not None


def record(graph: str, solver: str, trace, objective, bound, status="feasible", solve=10.0) -> dict:
    return {"run_key": f"{graph}|maxload|ip|{solver}", "run": {"graph": f"x/{graph}.json", "problem": "maxload",
                                                               "solver": {"solver": solver, "time_limit": 10}},
            "problem": "maxload", "method": "ip", "instance": f"x/{graph}.json", "solver": solver,
            "status": status, "objective": objective, "bound": bound, "trace": trace, "solve_seconds": solve,
            "build_seconds": 0.1}


RECORDS = [
    # g1: HiGHS reaches 10 % at 1 s, 1 % at 4 s and proves optimality at 5 s
    record("g1", "highs", [[0.2, 150.0, 80.0], [1.0, 100.0, 91.0], [4.0, 100.0, 99.5]], 100.0, 100.0, "optimal", 5.0),
    # g1: SCIP ends at the limit with 120 vs 95 (certified gap 20.8 %)
    record("g1", "scip", [[0.5, 130.0, 70.0], [3.0, 120.0, 95.0]], 120.0, 95.0),
    # g2: both optimal, SCIP first
    record("g2", "highs", [[2.0, 50.0, 50.0]], 50.0, 50.0, "optimal", 2.0),
    record("g2", "scip", [[0.3, 50.0, 50.0]], 50.0, 50.0, "optimal", 0.3),
    # a heuristic run: no backend
    {"run_key": "g1|maxload|greedy|0", "run": {"graph": "x/g1.json", "problem": "maxload"}, "problem": "maxload",
     "method": "greedy", "instance": "x/g1.json", "solver": None, "status": "feasible", "objective": 180.0,
     "bound": None, "trace": [], "solve_seconds": 0.01},
]


def write_runs(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_rows_gap_and_times():
    got = {(r["instance"], r["method"], r["backend"]): r for r in rows(RECORDS)}
    assert len(got) == 5
    h1, s1 = got[("g1", "ip", "highs")], got[("g1", "ip", "scip")]
    assert (h1["certified_gap"], h1["t_10%"], h1["t_1%"]) == (0.0, 1.0, 4.0)
    assert s1["certified_gap"] == pytest.approx(25 / 120)
    assert s1["t_10%"] is None and s1["t_1%"] is None
    assert got[("g2", "ip", "scip")]["t_1%"] == 0.3 and got[("g2", "ip", "highs")]["t_1%"] == 2.0
    greedy = got[("g1", "greedy", "-")]
    assert greedy["certified_gap"] is None and greedy["t_10%"] is None
    # a run that closed without trace points: its solve time
    assert time_to_gap(record("g3", "highs", [], 7.0, 7.0, "optimal", 0.7), 0.01) == 0.7
    assert time_to_gap(record("g3", "highs", [], None, 5.0, "no_solution"), 0.5) is None


def test_compare_writes_tables_summary_and_plots(tmp_path):
    folder = write_runs(tmp_path / "res", RECORDS)
    md, pngs = compare([folder])
    text = md.read_text()
    assert "| g1 | ip | scip | feasible | 120.00 | 95.00 | 20.83% |" in text
    assert "| highs | 2 | 2 | 2 | 2 of 2 | 0 |" in text  # best on g1, tied on g2 (ties count for both)
    assert "| scip | 2 | 1 | 1 | 1 of 2 | 0 |" in text
    table = list(csv.DictReader((folder / "compare.csv").open()))
    assert len(table) == 5 and table[0]["instance"] == "g1"
    names = sorted(p.relative_to(folder).as_posix() for p in pngs)
    assert names == ["profile.png", "runs/g1-highs.png", "runs/g1-scip.png", "runs/g2-highs.png",
                     "runs/g2-scip.png", "trace-g1.png", "trace-g2.png"]
    px = png_pixels_by_colour(folder / "trace-g1.png")
    assert px.get(HIGHS_BLUE, 0) > 300 and px.get(SCIP_GREEN, 0) > 300  # both backends drawn
    px = png_pixels_by_colour(folder / "profile.png", min_width=1000)
    assert px.get(HIGHS_BLUE, 0) > 300 and px.get(SCIP_GREEN, 0) > 300


def test_cli_compare_and_bad_input(tmp_path, capsys):
    folder = write_runs(tmp_path / "res", RECORDS)
    assert main(["compare", str(folder), "--out", str(tmp_path / "cmp"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "| g2 | ip | scip | optimal |" in out and (tmp_path / "cmp" / "compare.csv").exists()
    assert not list((tmp_path / "cmp").glob("*.png"))
    assert main(["compare", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err == f"dnnplace: error: {tmp_path / 'nothing'}: no runs.jsonl there (give a results folder or a " \
                  "runs.jsonl file)\n"


@pytest.mark.skipif(not HAS_SCIP, reason="pyscipopt not installed (pip install 'dnnplace[scip]')")
def test_a_real_sweep_over_two_backends(tmp_path):
    """Two generated 10-node graphs, the contiguous max-load IP on HiGHS and SCIP: both
    prove the same optimum on each (4 runs), and compare lines them up."""
    for seed in (1, 2):
        assert main(["generate", "random-dag", "--nodes", "10", "--seed", str(seed), "--cluster",
                     "tarnawski-2-1-16GB", "--out", str(tmp_path / f"g{seed}.json")]) == 0
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("""
name = "two"
out_dir = "out"
[defaults]
graphs = "g*.json"
methods = "ip"
contiguity = "both"
[[runs]]
solver = { solver = "highs", time_limit = 30, rel_gap = 1e-6 }
[[runs]]
solver = { solver = "scip", time_limit = 30, rel_gap = 1e-6 }
""")
    records = run_config(cfg, progress=False)
    assert [r["status"] for r in records] == ["optimal"] * 4
    md, _ = compare([tmp_path / "out"], plots=False)
    got = {(r["instance"], r["backend"]): r for r in rows(records)}
    assert sorted(got) == [("g1", "highs"), ("g1", "scip"), ("g2", "highs"), ("g2", "scip")]
    for g in ("g1", "g2"):
        assert got[(g, "highs")]["objective"] == pytest.approx(got[(g, "scip")]["objective"], rel=1e-6)
        assert all(got[(g, b)]["t_1%"] is not None for b in ("highs", "scip"))
    assert "| highs | 2 | 2 | 2 | 2 of 2 | 0 |" in md.read_text()
