"""Reproductions re-render from their committed records (docs/architecture.md, "Adding a
reproduction"; results/README.md): ``dnnplace reproduce NAME --check`` re-renders NAME's
tables from the records in the tree in a temporary folder, runs nothing, and compares them
with the committed ``.md``/``.csv`` files; every record carries its provenance
(:mod:`dnnplace.provenance`) and every table says when and at which revision it was run.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from dnnplace.cli import main
from dnnplace.config import REPO_ROOT
from dnnplace.provenance import provenance, stamp
from dnnplace.reproduce import check, pack_records, reproductions
from dnnplace.runs_file import read_runs

REGISTERED = 22  # experiments/*.toml with a `reproduction` key
EXCLUDED: dict[str, str] = {}  # reproduction -> why its records are not in the tree (none today)
CHECKED = [n for n in reproductions() if n not in EXCLUDED]
# checks over ~10 s, in the slow run: PARDNN captures its models with torch in every process
# (no cache on disk): 40 s of CPU for pardnn-speedup's five models (2 min at load 4)
SLOW = {"pardnn-speedup", "pardnn-memory"}


def test_every_registered_reproduction_is_checked():
    """The count: every registered reproduction but the excluded ones (with their reason) has
    its records in the tree and is checked below."""
    assert len(reproductions()) == REGISTERED
    assert set(EXCLUDED) <= set(reproductions()) and SLOW <= set(CHECKED)
    assert len(CHECKED) == REGISTERED - len(EXCLUDED)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CHECKED])
def test_committed_tables_rerender_from_their_records(name):
    """No run (a missing record would be an error), every table file the same, and each says
    when it was run and at which revision."""
    if name.startswith("celeritas-") and not (REPO_ROOT / "results" / "celeritas" / "graphs").is_dir():
        pytest.skip("Celeritas' captured graphs are not cached in this checkout (not in the tree: regenerable; "
                    "`dnnplace reproduce celeritas-table2` captures them once, about 4 min with torch)")
    same, diffs = check(name)
    assert diffs == []
    tables = [p for p in same if p.suffix == ".md"]
    assert len(same) >= 2 and tables  # at least the table's .md and .csv
    assert all(re.search(r"\brun 20\d\d-\d\d-\d\d(\.\.20\d\d-\d\d-\d\d)? at [0-9a-f]{7}", p.read_text())
               for p in tables), name


def _tarnawski3(tmp_path: Path) -> Path:
    """A copy of tarnawski-table3's tables and records (their run keys name bundled graphs only)."""
    for f in ("tarnawski-table3.md", "tarnawski-table3.csv"):
        shutil.copy(REPO_ROOT / "results" / f, tmp_path / f)
    (tmp_path / "tarnawski-table3").mkdir()
    src = REPO_ROOT / "results" / "tarnawski-table3"
    for f in ("runs.jsonl", "runs.jsonl.gz"):
        if (src / f).exists():
            shutil.copy(src / f, tmp_path / "tarnawski-table3" / f)
            break
    return tmp_path


def test_check_passes_then_names_the_first_differing_line(tmp_path, capsys):
    out = _tarnawski3(tmp_path)
    assert main(["reproduce", "tarnawski-table3", "--check", "--out", str(out)]) == 0
    got = capsys.readouterr()
    assert got.out.strip() == "tarnawski-table3: 2 files match" and got.err == ""
    md = out / "tarnawski-table3.md"
    lines = md.read_text().splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("| "))
    lines[row + 2] = lines[row + 2].replace("|", "| x", 1)
    md.write_text("\n".join(lines) + "\n")
    (out / "tarnawski-table3.csv").unlink()
    before = sorted(p.name for p in out.rglob("*"))
    assert main(["reproduce", "tarnawski-table3", "--check", "--out", str(out)]) == 1
    got = capsys.readouterr()
    err = got.err.strip().splitlines()
    assert got.out == "" and len(err) == 3
    assert err[0] == f"tarnawski-table3: {out / 'tarnawski-table3.csv'}: not in the tree (re-rendering writes it)"
    assert err[1].startswith(f"tarnawski-table3: {md}: line {row + 3}: tree '| x")
    assert err[2] == "tarnawski-table3: 2 file(s) differ, 0 match"
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing written beside the tables


def test_check_runs_nothing_and_names_a_missing_record(tmp_path, capsys):
    out = _tarnawski3(tmp_path)
    runs = out / "tarnawski-table3" / "runs.jsonl"
    recs = read_runs(runs)
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs[1:]))
    assert main(["reproduce", "tarnawski-table3", "--check", "--out", str(out)]) == 2
    got = capsys.readouterr()
    assert got.out == "" and len(got.err.strip().splitlines()) == 1
    assert got.err.startswith("dnnplace: error: tarnawski-table3: 1 of 16 runs have no record in ")
    assert recs[0]["run_key"] in got.err and "re-rendering runs nothing" in got.err


@pytest.mark.parametrize("flag", ["--quick", "--fresh"])
def test_check_refuses_quick_and_fresh(flag, capsys):
    assert main(["reproduce", "tarnawski-table3", "--check", flag]) == 2
    got = capsys.readouterr()
    assert got.out == ""
    assert got.err.strip().splitlines() == [f"dnnplace: error: --check re-renders the tables in the tree from their "
                                            f"records and runs nothing; it takes no {flag}"]


def test_provenance_and_its_table_line():
    p = provenance()
    assert set(p) == {"git_revision", "git_dirty", "date", "host", "load", "dnnplace_version"}
    assert set(p["host"]) == {"platform", "cpu", "cores"} and p["date"].endswith("+00:00")
    recs = [{"provenance": {**p, "git_revision": "a" * 40, "git_dirty": False, "date": "2026-11-29T07:00:00+00:00"}},
            {"provenance": {**p, "git_revision": "a" * 40, "git_dirty": False, "date": "2026-11-30T01:00:00+00:00"}}]
    assert stamp(recs) == "run 2026-11-29..2026-11-30 at aaaaaaa"
    old = {"git_revision": "b" * 40, "timestamp": "2026-11-20T10:00:00+00:00"}  # a record from before provenance
    assert stamp([recs[0], old]) == ("run 2026-11-20..2026-11-29 at aaaaaaa (1 records), bbbbbbb (1 records); "
                                     "1 of 2 records from before provenance (revision and date only)")
    recs[0]["provenance"]["git_dirty"] = True
    assert stamp(recs[:1]) == "run 2026-11-29 at aaaaaaa+dirty"


def test_sweep_records_carry_provenance(tmp_path):
    from conftest import grid_config

    from dnnplace.runner import run_config

    cfg = tmp_path / "c.toml"
    cfg.write_text(grid_config("c", ["single"]))
    recs = run_config(cfg, progress=False)
    assert len(recs) == 2 and read_runs(tmp_path / "out" / "runs.jsonl") == recs
    for rec in recs:
        assert set(rec["provenance"]) == {"git_revision", "git_dirty", "date", "host", "load", "dnnplace_version"}


def test_large_records_are_committed_compressed_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setattr("dnnplace.reproduce.PACK_OVER", 100)
    runs = tmp_path / "runs.jsonl"
    recs = [{"run_key": f"k{i}", "objective": i} for i in range(10)]
    runs.write_text("".join(json.dumps(r) + "\n" for r in recs))
    gz = pack_records(runs)
    first = gz.read_bytes()
    assert gzip.decompress(first) == runs.read_bytes()
    assert pack_records(runs).read_bytes() == first  # byte-stable: unchanged records, unchanged file
    runs.unlink()
    assert read_runs(runs) == recs  # unpacked where only the compressed file is there
    assert runs.exists()
    small = tmp_path / "small" / "runs.jsonl"
    small.parent.mkdir()
    small.write_text(json.dumps(recs[0]) + "\n")
    assert pack_records(small) is None and not small.with_name("runs.jsonl.gz").exists()


def test_records_written_into_the_checkout_do_not_make_it_dirty(tmp_path):
    """A resumed reproduction appends to tracked records under results/: the code it ran is
    unchanged, so its records say clean; a change to code says dirty."""
    import subprocess

    from dnnplace.provenance import git_dirty

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "runs.jsonl").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    assert git_dirty(tmp_path) is False
    (tmp_path / "results" / "runs.jsonl").write_text("{}\n{}\n")
    assert git_dirty(tmp_path) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_dirty(tmp_path) is True
