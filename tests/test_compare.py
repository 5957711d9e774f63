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
from dnnplace.compare import compare
from dnnplace.compare_records import load_records, method_profile, method_rows, rows, time_to_gap
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
    assert "| g1 | maxload | - | ip | scip | feasible |  | 120.00 | 95.00 | 20.83% | 95.00 |" in text
    assert "| highs | 2 | 2 | 2 | 2 of 2 | 0 |" in text  # best on g1, tied on g2 (ties count for both)
    assert "| scip | 2 | 1 | 1 | 1 of 2 | 0 |" in text
    table = list(csv.DictReader((folder / "compare.csv").open()))
    assert len(table) == 5 and table[0]["instance"] == "g1"
    names = sorted(p.relative_to(folder).as_posix() for p in pngs)
    # no instance lower bound in these records: no objective.png
    assert names == ["gap-profile.png", "profile.png", "runs/g1-ip-highs.png", "runs/g1-ip-scip.png",
                     "runs/g2-ip-highs.png", "runs/g2-ip-scip.png", "trace-g1-ip.png", "trace-g2-ip.png"]
    px = png_pixels_by_colour(folder / "trace-g1-ip.png")
    assert px.get(HIGHS_BLUE, 0) > 300 and px.get(SCIP_GREEN, 0) > 300  # both backends drawn
    px = png_pixels_by_colour(folder / "gap-profile.png", min_width=1000)
    assert px.get(HIGHS_BLUE, 0) > 300 and px.get(SCIP_GREEN, 0) > 300


def test_cli_compare_and_bad_input(tmp_path, capsys):
    folder = write_runs(tmp_path / "res", RECORDS)
    assert main(["compare", str(folder), "--out", str(tmp_path / "cmp"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "| g2 | maxload | - | ip | scip | optimal |" in out and (tmp_path / "cmp" / "compare.csv").exists()
    assert not list((tmp_path / "cmp").glob("*.png"))
    assert main(["compare", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err == f"dnnplace: error: {tmp_path / 'nothing'}: no runs.jsonl there (give a results folder, a " \
                  "runs.jsonl file or a result JSON of dnnplace solve --out)\n"


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


# ---------------------------------------------------------------------------- methods, clusters, result files
def heuristic(graph: str, method: str, cluster: str, objective: float, lower: float = 50.0,
              transformed: bool = False) -> dict:
    return {"run_key": f"{graph}|{cluster}|{method}", "problem": "makespan", "method": method,
            "instance": f"x/{graph}.json", "solver": None, "status": "feasible", "objective": objective,
            "bound": None, "lower_bound": lower, "cluster": cluster, "evaluation": {"lower_bound": lower},
            "trace": [], "solve_seconds": 0.1, "unit": "ms",
            "transform": {"steps": [], "bound_note": "replicated"} if transformed else None}


HEURISTICS = [heuristic("g", "heft", "c2", 60.0), heuristic("g", "etf", "c2", 75.0),
              heuristic("g", "heft", "c4", 55.0), heuristic("g", "etf", "c4", 55.0),
              heuristic("g", "dp-baseline", "c2", 40.0, lower=20.0, transformed=True)]


def test_rows_are_keyed_by_instance_and_cluster_and_every_method_is_ranked():
    table = rows(HEURISTICS)
    assert [(r["cluster"], r["method"]) for r in table] == [("c2", "dp-baseline"), ("c2", "etf"), ("c2", "heft"),
                                                           ("c4", "etf"), ("c4", "heft")]
    etf2 = table[1]
    assert etf2["lower_bound"] == 50.0 and etf2["certified_gap"] == pytest.approx(25 / 75)
    assert table[0]["transformed"] == "yes"
    methods, mt = method_rows(HEURISTICS)
    assert methods == ["dp-baseline", "etf", "heft"]
    c2, c4 = mt
    # the transformed answer (40, below the instance's bound 50) is shown but not ranked
    assert (c2["best"], c2["dp-baseline"], c2["lower_bound"]) == ("heft", 40.0, 50.0)
    assert c2["best_gap"] == pytest.approx(10 / 60) and c4["best"] in ("etf", "heft")
    ran, ratios, left_out = method_profile(HEURISTICS)
    assert ratios == {"etf": [1.0, 1.25], "heft": [1.0, 1.0]} and left_out == ["dp-baseline"]
    assert ran["etf"] == {("g", "makespan", "c2"), ("g", "makespan", "c4")}


def test_compare_draws_objectives_and_the_method_profile(tmp_path):
    folder = write_runs(tmp_path / "h", HEURISTICS)
    md, pngs = compare([folder])
    text = md.read_text()
    assert "| g | makespan | c2 | 40.00* | 75.00 | 60.00 | 50.00 | heft | 16.67% |" in text
    names = sorted(p.name for p in pngs)
    assert names == ["objective.png", "profile.png"]  # no solver runs: no traces
    etf_blue, heft_orange = "#1F77B4", "#FF7F0E"  # tab10, methods in order (dp-baseline left out)
    px = png_pixels_by_colour(folder / "profile.png")
    assert px.get(etf_blue, 0) > 300 and px.get(heft_orange, 0) > 300
    px = png_pixels_by_colour(folder / "objective.png")
    assert px.get("#2CA02C", 0) > 30  # heft, third of three methods


def test_solve_result_files_and_sweep_records_compare_together(tmp_path, capsys):
    g = tmp_path / "g.json"
    assert main(["generate", "random-dag", "--nodes", "12", "--seed", "3", "--out", str(g)]) == 0
    for k in (2, 4):  # the same graph on two clusters, --problem inferred from heft
        assert main(["solve", str(g), "--method", "heft", "--cluster", f"single-host-{k}-nvlink",
                     "--out", str(tmp_path / f"heft{k}.json")]) == 0
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('name = "s"\nout_dir = "sweep"\n[grid]\ngraphs = "g.json"\nproblems = "makespan"\n'
                   'methods = ["etf", "m-topo"]\ncluster = "single-host-2-nvlink"\n')
    run_config(cfg, progress=False)
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "heft2.json"), str(tmp_path / "heft4.json"), str(tmp_path / "sweep"),
                 "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "4 runs of 3 method(s) on 2 instance/problem/cluster triple(s)" in out
    methods, mt = method_rows(load_records([tmp_path / "heft2.json", tmp_path / "heft4.json", tmp_path / "sweep"]))
    assert methods == ["etf", "heft", "m-topo"]
    two = next(r for r in mt if r["cluster"] == "single-host-2-nvlink")
    assert all(two[m] is not None for m in methods) and two["lower_bound"] > 0
    assert two[two["best"]] == min(two[m] for m in methods)
    assert sorted(p.name for p in (tmp_path / "cmp").glob("*.png")) == ["objective.png", "profile.png"]
    assert main(["compare", str(g)]) == 2  # a graph is not a result
    assert "not a result JSON" in capsys.readouterr().err


def test_the_same_sweep_in_two_folders_is_two_sets_of_runs(tmp_path):
    """Comparing one config run twice (e.g. on two executors) keeps both: run keys are
    unique per file only (was: the second file's records replaced the first's)."""
    a = write_runs(tmp_path / "inline", HEURISTICS)
    b = write_runs(tmp_path / "ray", [{**r, "objective": r["objective"] + 1} for r in HEURISTICS])
    recs = load_records([a, b])
    assert len(recs) == 2 * len(HEURISTICS)
    table = rows(recs)
    heft_c2 = sorted((r["method"], r["objective"]) for r in table if r["cluster"] == "c2" and "heft" in r["method"])
    assert heft_c2 == [("heft from=inline", 60.0), ("heft from=ray", 61.0)]
