"""Run keys are reproducible: a reproduction built twice (quick mode, two fresh output
folders, :func:`dnnplace.runner.execute` stubbed so nothing runs) asks for the same run
keys, so a rerun finds its records (nothing in instance files or keys depends on the run);
and the committed Pesto records are found by the specs the current code builds."""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from dnnplace.config import REPO_ROOT, RunSpec, graph_label_of
from dnnplace.reproduce import reproductions

# specs handed to the first execute() call of each reproduction in quick mode
SPECS = {"celeritas-fig6": 8, "celeritas-table2": 2, "celeritas-table3": 14, "celeritas-table4": 6,
         "fastt-memory": 6, "fastt-scaling": 12, "fastt-splits": 4,
         "pesto-coarsening-captured": 8, "pesto-coarsening": 18, "pesto-congestion-captured": 3,
         "pesto-congestion-wide": 3, "pesto-congestion": 3, "pesto-hardware-100": 63, "pesto-hardware-captured": 35,
         "pesto-hardware": 63, "pesto-hardware-gaps": 36, "pesto-congestion-gaps": 4, "tarnawski-table1": 86,
         "tarnawski-table3": 16, "tarnawski-table4": 35}
SLOW = ("pardnn",)  # modules whose quick build captures models with torch (tens of seconds): opt in with -m slow


class _Stop(Exception):
    pass


def _build(name: str, out: Path, monkeypatch) -> list[RunSpec]:
    """The specs of the first execute() call of reproduction ``name`` (quick) into ``out``."""
    import dnnplace.runner as runner

    mod = importlib.import_module(f"dnnplace.experiments.{reproductions()[name]}")
    got: list[RunSpec] = []

    def stub(specs, runs_path, **kw):
        got.extend(specs)
        raise _Stop

    real = runner.execute
    monkeypatch.setattr(runner, "execute", stub)
    for m in list(sys.modules.values()):  # modules that imported execute by name
        if m is not None and m.__name__.startswith("dnnplace.experiments.") and getattr(m, "execute", None) is real:
            monkeypatch.setattr(m, "execute", stub)
    with pytest.raises(_Stop):
        mod.reproduce(name, quick=True, out_dir=out, progress=False)
    return got


def _moved(spec: RunSpec, src: str, dst: str) -> RunSpec:
    """``spec`` with its graph label's output folder ``src`` read as ``dst``."""
    return dataclasses.replace(spec, graph_label=spec.graph_label.replace(src, dst))


def test_every_cheap_reproduction_is_checked():
    assert {n for n, m in reproductions().items() if m not in SLOW} == set(SPECS)
    assert sum(SPECS.values()) == 425


@pytest.mark.parametrize("name", sorted(SPECS))
def test_run_keys_are_the_same_in_two_fresh_folders(name, tmp_path, monkeypatch):
    a = _build(name, tmp_path / "a", monkeypatch)
    b = _build(name, tmp_path / "b", monkeypatch)
    assert len(a) == len(b) == SPECS[name]
    src, dst = graph_label_of(tmp_path / "a"), graph_label_of(tmp_path / "b")
    assert [_moved(s, src, dst).key for s in a] == [s.key for s in b]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pardnn-speedup", "pardnn-memory"])
def test_pardnn_run_keys_are_the_same_in_two_builds(name, tmp_path, monkeypatch):
    """PARDNN makes its runs one by one on in-memory instances: the key of its first run
    (model captured afresh each time) is the same in two builds."""
    from dnnplace.experiments import pardnn as P
    from dnnplace.experiments import pardnn_models as PM

    def first_key(sub: str) -> str:
        got: list[RunSpec] = []

        def record(**kw) -> RunSpec:
            got.append(RunSpec(**kw))
            return got[-1]

        def solve(*a, **k):
            raise _Stop

        monkeypatch.setattr(P, "RunSpec", record)
        monkeypatch.setattr(P, "solve", solve)
        monkeypatch.setattr(PM, "_CACHE", {})
        monkeypatch.setattr(PM, "_PROFILES", {})
        with pytest.raises(_Stop):
            P.reproduce(name, quick=True, out_dir=tmp_path / sub, progress=False)
        assert len(got) == 1
        return got[0].key

    keys = [first_key("a"), first_key("b")]
    assert keys[0] == keys[1]


@pytest.mark.parametrize("name, runs", [("pesto-congestion", 3), ("pesto-hardware", 63)])
def test_committed_pesto_records_are_found(name, runs, tmp_path, monkeypatch):
    """The specs built today (beside a copy of the committed instance files) have the keys
    of the committed records: regenerated graphs that differ in the last bits of some
    floats keep their instance file and so their run keys."""
    from dnnplace.experiments.pesto_config import Config

    sub = Config.load(name).name
    committed = REPO_ROOT / "results" / "pesto" / sub
    found = [committed / f for f in ("runs.jsonl.gz", "runs.jsonl") if (committed / f).exists()]
    if not found:
        pytest.skip("no committed records in this checkout")
    shutil.copytree(committed / "instances", tmp_path / sub / "instances")

    def stub(specs, *a, **k):
        raise _Stop(list(specs))

    monkeypatch.setattr("dnnplace.experiments.pesto_figures.execute", stub)
    with pytest.raises(_Stop) as stop:
        importlib.import_module("dnnplace.experiments.pesto").reproduce(name, out_dir=tmp_path, progress=False)
    specs = stop.value.args[0]
    src, dst = graph_label_of(tmp_path), graph_label_of(REPO_ROOT / "results" / "pesto")
    with (gzip.open(found[0], "rt") if found[0].suffix == ".gz" else open(found[0])) as fh:  # large: compressed
        recorded = {json.loads(line)["run_key"] for line in fh if line.strip()}
    keys = {_moved(s, src, dst).key for s in specs}
    assert len(keys) == runs and keys <= recorded
