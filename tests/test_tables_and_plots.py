"""Tables say where an answer came from; every file is written whole or not at all; the
compare plots are readable (tick labels apart, identical curves named, gap panels that
carry information only)."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
from pathlib import Path

import pytest
from conftest import png_pixels_by_colour, tarnawski_root

from dnnplace.cli import main
from dnnplace.compare import compare
from dnnplace.compare_records import rows
from dnnplace.graphs.io import prepare_instance, write_json
from dnnplace.registry import SolveRequest, solve
from dnnplace.results import answer_from_of
from dnnplace.runner import run_config
from dnnplace.runtime.deadline import TimeLimitReached

BERT = tarnawski_root() / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"


# ---------------------------------------------------------------------------- where an answer came from
def test_a_method_s_own_answer_names_the_method_and_no_answer_names_nothing():
    inst = prepare_instance(BERT, None)
    res = solve(inst, "greedy", SolveRequest(problem="maxload"))
    assert res.answer_from == "greedy" and res.to_dict()["answer_from"] == "greedy"
    assert answer_from_of({"method": "ip", "status": "no_solution", "answer_from": None}) is None


def test_the_quickstart_ip_whose_build_runs_out_of_time_shows_its_fallback_in_the_tables(tmp_path, monkeypatch):
    """The quickstart's bert24_inference IP (20 s, HiGHS): when its model build runs out
    of time, the answer is DPL's split, and the runs table and compare say so (the
    table used to show a bare "ip feasible 17.79")."""
    import dnnplace.methods.tarnawski_ip as tarnawski_ip

    def slow_build(*_a, **_k):
        raise TimeLimitReached("time limit reached during the IP's model build")

    monkeypatch.setattr(tarnawski_ip, "_build_ip", slow_build)  # a build that outlasts the limit, at once
    cfg = tmp_path / "quick.toml"
    cfg.write_text(f'name = "quick"\nout_dir = "out"\n[grid]\ngraphs = "{BERT}"\nproblems = "maxload"\n'
                   'methods = ["greedy", "ip"]\n[grid.solver]\nsolver = "highs"\ntime_limit = 20.0\n'
                   'rel_gap = 0.01\nthreads = 1\n')
    records = run_config(cfg, progress=False)
    ip = next(r for r in records if r["method"] == "ip")
    assert (ip["status"], ip["answer_from"]) == ("feasible", "fallback: dpl"), ip.get("message")
    table = (tmp_path / "out" / "table.md").read_text()
    head = next(line for line in table.splitlines() if line.startswith("| graph"))
    assert "| answer from |" in head
    ip_row = next(line for line in table.splitlines() if "| ip |" in line)
    assert "| fallback: dpl |" in ip_row and "| greedy | " in table
    md, _ = compare([tmp_path / "out"], plots=False)
    assert "| feasible | fallback: dpl |" in md.read_text()


# ---------------------------------------------------------------------------- compare's columns
def _solve_record(problem: str, method: str, objective: float, limit: float | None) -> dict:
    """A record as ``dnnplace solve --out`` writes it (the limit under options.solver)."""
    return {"problem": problem, "method": method, "instance": "graphs/branchy.json", "status": "feasible",
            "objective": objective, "bound": None, "lower_bound": 1.0, "evaluation": {"lower_bound": 1.0},
            "solver": None, "trace": [], "solve_seconds": 0.5, "build_seconds": 0.0, "cluster": "c2",
            "placement": {"a": "gpu0"}, "answer_from": method,
            "options": {"solver": {"name": "highs", "time_limit": limit}}}


def test_compare_fills_the_limit_and_lines_a_graph_up_across_problems(tmp_path):
    files = []
    for k, (problem, method) in enumerate((("maxload", "greedy"), ("makespan", "heft"))):
        files.append(write_json(tmp_path / f"r{k}.json", _solve_record(problem, method, 2.0 + k, 60.0)))
    md, _ = compare(files, tmp_path / "cmp", plots=False)
    table = rows([json.loads(f.read_text()) for f in files])
    assert [(r["instance"], r["problem"], r["time_limit"]) for r in table] == [("branchy", "makespan", 60.0),
                                                                              ("branchy", "maxload", 60.0)]
    text = md.read_text()
    assert "| branchy | maxload | c2 | greedy | - | feasible | greedy | 2.00 |" in text
    assert "| 0.50 | 0.00 | 60 |  |" in text  # solve s, build s, limit s
    assert "| branchy | makespan | c2 |" in text and "branchy makespan" not in text


def test_compare_help_names_result_files(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "result JSON files (dnnplace solve --out)" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------------------- log axes
SPANS = [(0.0065, 0.0105), (0.06, 0.6), (0.005, 0.012), (1e-3, 1e3), (0.5, 5000.0), (0.0071, 0.0079),
         (1e-2, 0.8), (0.9, 1.3), (2.0, 60.0)]


def test_log_axis_tick_labels_never_overlap():
    """Every labelled tick of a trace's log time axis, for short and long runs on narrow
    and wide axes, drawn and measured: no two labels touch (was "0.0070.0080.0090.01")."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dnnplace.log_axis import plain_log_ticks

    checked = 0
    for width in (4.0, 9.5):
        for lo, hi in SPANS:
            fig, ax = plt.subplots(figsize=(width, 3.0), dpi=100)
            ax.set_xscale("log")
            ax.plot([lo, hi], [0, 1])
            ax.set_xlim(lo, hi)
            plain_log_ticks(ax)
            fig.canvas.draw()
            r = fig.canvas.get_renderer()
            labels = [t.label1 for t in ax.xaxis.get_major_ticks() + ax.xaxis.get_minor_ticks()
                      if lo * (1 - 1e-9) <= t.get_loc() <= hi * (1 + 1e-9) and t.label1.get_text()
                      and t.label1.get_visible()]
            boxes = sorted((b.x0, b.x1) for b in (t.get_window_extent(r) for t in labels))
            assert len(boxes) >= 2, (width, lo, hi, [t.get_text() for t in labels])
            for (_a0, a1), (b0, _b1) in zip(boxes, boxes[1:]):
                assert b0 - a1 >= 2, (width, lo, hi, [t.get_text() for t in labels])
            assert all("e" not in t.get_text() for t in labels), [t.get_text() for t in labels]
            checked += 1
            plt.close(fig)
    assert checked == 2 * len(SPANS)


# ---------------------------------------------------------------------------- profile and gap-profile
def _saved_figures(monkeypatch) -> list:
    """The matplotlib figures saved from now on, in order."""
    from matplotlib.figure import Figure

    figs, real = [], Figure.savefig

    def save(self, *args, **kwargs):
        figs.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", save)
    return figs


def _heuristic(method: str, graph: str, objective: float) -> dict:
    return {"run_key": f"{graph}|{method}", "problem": "makespan", "method": method, "instance": f"x/{graph}.json",
            "solver": None, "status": "feasible", "objective": objective, "bound": None, "lower_bound": 1.0,
            "cluster": "c2", "evaluation": {"lower_bound": 1.0}, "trace": [], "solve_seconds": 0.1, "unit": "ms"}


def test_identical_profile_curves_are_all_drawn_and_named(tmp_path, monkeypatch):
    """heft and etf tie on both graphs (the same profile curve): both colours show and
    the legend says which is identical to which."""
    import dnnplace.compare_plots as cp

    figs = _saved_figures(monkeypatch)
    recs = [_heuristic(m, g, v) for g in ("g1", "g2") for m, v in (("etf", 2.0), ("heft", 2.0), ("m-topo", 3.0))]
    cp.plot_method_profile(recs, tmp_path)
    legend = [t.get_text() for t in figs[-1].axes[0].get_legend().get_texts()]
    assert legend == ["etf (2 instances)", "heft (2 instances): identical to etf", "m-topo (2 instances)"]
    px = png_pixels_by_colour(tmp_path / "profile.png")
    etf_blue, heft_orange = "#1F77B4", "#FF7F0E"
    assert px.get(etf_blue, 0) > 300 and px.get(heft_orange, 0) > 300


def _mip(graph: str, trace: list, objective: float, bound: float, solve_s: float) -> dict:
    return {"run_key": f"{graph}|ip", "run": {"graph": f"x/{graph}.json", "problem": "maxload",
                                               "solver": {"solver": "highs", "time_limit": 5}},
            "problem": "maxload", "method": "ip", "instance": f"x/{graph}.json", "solver": "highs",
            "status": "feasible", "objective": objective, "bound": bound, "trace": trace,
            "solve_seconds": solve_s}


def test_the_gap_profile_draws_only_panels_that_carry_information(tmp_path, monkeypatch):
    """Two runs that reach 10 % but never 1 %: one panel (was six, five of them flat), the
    others named in the title; runs that close every gap at once: one panel (was three
    identical ones); runs that reach no gap at all: no figure."""
    import dnnplace.compare_plots as cp

    figs = _saved_figures(monkeypatch)
    two = [_mip("g1", [[0.05, 2.24, 2.05], [0.5, 2.24, 2.09]], 2.24, 2.09, 0.6),
           _mip("g2", [[0.01, 10.0, 9.5]], 10.0, 9.5, 0.02)]
    path = cp.plot_gap_profile(two, tmp_path)
    assert path == tmp_path / "gap-profile.png" and path.is_file()
    shown = [ax for ax in figs[-1].axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == ["ip, 2 instances on highs: gap <= 10%"]
    assert "not drawn (no run got there): ip at 1%, ip at 0.01%" in figs[-1]._suptitle.get_text()
    closed = [_mip("g4", [[0.05, 3.0, 3.0]], 3.0, 3.0, 0.05), _mip("g5", [[0.2, 4.0, 4.0]], 4.0, 4.0, 0.2)]
    cp.plot_gap_profile(closed, tmp_path / "closed")  # every gap at once: the same curves, one panel
    assert [ax.get_title() for ax in figs[-1].axes if ax.get_visible()] == [
        "ip, 2 instances on highs: gap <= 10% = 1% = 0.01%"]
    nowhere = [_mip("g3", [[0.1, 10.0, 1.0]], 10.0, 1.0, 0.2)]
    assert cp.plot_gap_profile(nowhere, tmp_path / "none") is None and not (tmp_path / "none").exists()


# ---------------------------------------------------------------------------- a full disk
class _FullDisk:
    """A file that takes ``budget`` bytes, then fails as a full disk does (ENOSPC)."""

    def __init__(self, fh, budget: int):
        self._fh, self._left = fh, budget

    def write(self, data):
        if len(data) > self._left:
            self._fh.write(data[: self._left])
            self._fh.flush()
            self._left = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._left -= len(data)
        return self._fh.write(data)

    def fileno(self):  # writers must go through write()
        raise io.UnsupportedOperation("fileno")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


def _fill_the_disk(monkeypatch, root: Path) -> None:
    """From now on, every file opened for writing under ``root`` takes 64 bytes, then the
    disk is full (the fake wraps ``open``, so any writer meets it, old or new)."""
    real = io.open

    def under(file) -> bool:
        if isinstance(file, int):
            try:
                return os.readlink(f"/proc/self/fd/{file}").startswith(str(root))
            except OSError:
                return False
        return isinstance(file, (str, os.PathLike)) and os.path.abspath(os.fspath(file)).startswith(str(root))

    def fake_open(file, mode="r", *args, **kwargs):
        fh = real(file, mode, *args, **kwargs)
        return _FullDisk(fh, 64) if any(c in mode for c in "wax") and under(file) else fh

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_a_full_disk_leaves_no_partial_file_and_no_empty_folder(tmp_path, capsys, monkeypatch):
    """simulate --gantt (was: a partial PNG), compare (was: its folder and a partial
    table left), a result JSON: each fails with one stderr line naming the file (exit 1)
    and leaves neither a file nor a folder it made."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    assert main(["solve", str(BERT), "--method", "greedy", "--out", str(inputs / "greedy.json")]) == 0
    capsys.readouterr()
    out.mkdir()
    _fill_the_disk(monkeypatch, out)
    checked = 0
    for argv, target in (
            (["simulate", str(BERT), str(inputs / "greedy.json"), "--gantt", str(out / "g" / "gantt.png")],
             out / "g"),
            (["simulate", str(BERT), str(inputs / "greedy.json"), "--gantt", str(out / "gantt.png")],
             out / "gantt.png"),
            (["compare", str(inputs / "greedy.json"), "--out", str(out / "cmp" / "deep")], out / "cmp"),
            (["compare", str(inputs / "greedy.json"), "--out", str(out / "cmp2"), "--no-plots"], out / "cmp2")):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("dnnplace: error: OSError: [Errno 28] No space left on device: ") and \
            err.count("\n") == 1, err
        assert not target.exists(), _files(out)
        checked += 1
    with pytest.raises(OSError) as exc:
        write_json(out / "j" / "k" / "x.json", {"big": "x" * 200})
    assert exc.value.errno == errno.ENOSPC and exc.value.filename == str(out / "j" / "k" / "x.json")
    assert _files(out) == [] and _files(inputs) == ["greedy.json"]
    assert checked == 4
