"""Pesto's Fig. 5 and Fig. 8 with the ILPs run to their gaps (experiments/pesto_gaps.py, configs
experiments/pesto-*-gaps.toml, results/pesto/hardware-gaps/ and congestion-gaps/): the solver seed of a
run reaches HiGHS and its record, a spec without a seed keeps its old key, and the configs load."""

from __future__ import annotations

import dataclasses

import pytest

from dnnplace.experiments.instance_files import write_variants
from dnnplace.experiments.pesto import reproduce
from dnnplace.experiments.pesto_config import Config, pesto_spec
from dnnplace.experiments.pesto_gaps import _changes, base_config
from dnnplace.formulations.solvers import highs_backend
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate
from dnnplace.graphs.presets import cluster_preset
from dnnplace.runner import execute


def test_each_seed_reaches_highs_and_its_record(tmp_path, monkeypatch):
    """A tiny instance solved by ``pesto`` with seeds 3 and 7: HiGHS runs with each as its
    ``random_seed`` (read back from the solver object after each solve: a run solves the whole cluster and
    its sub-clusters) and each record keeps it."""
    seen: list[int] = []
    step = highs_backend._highs_solve_step

    def spy(solver, runner):
        run = step(solver, runner)

        def wrapped(*args, **kwargs):
            out = run(*args, **kwargs)
            seen.append(solver._solver_model.getOptionValue("random_seed")[1])
            return out
        return wrapped

    monkeypatch.setattr(highs_backend, "_highs_solve_step", spy)
    g = generate("random-dag", n=8, seed=1)
    cl = cluster_preset("single-host-2-pcie", g)
    v = write_variants(g, {"tiny": (cl, 2, 1.0, 1.0)}, tmp_path / "instances", "random-dag 8")["tiny"]
    cfg = Config(name="tiny", kind="gaps", time_limit=20.0, rel_gap=0.0)
    specs = [pesto_spec(v, cfg, None, seed=s) for s in (3, 7)]
    done = execute(specs, tmp_path / "runs.jsonl", name="tiny", progress=False)
    assert set(seen) == {3, 7} and seen.count(3) == seen.count(7) >= 1  # every HiGHS solve of a run (sub-clusters too)
    assert [done[s.key]["options"]["solver"]["seed"] for s in specs] == [3, 7]
    assert all(done[s.key]["status"] != "error" for s in specs)


def test_a_spec_without_a_seed_keeps_its_key():
    """The committed Pesto records' keys: no ``seed`` in the solver settings unless one is given."""
    cfg = Config(name="x", kind="hardware", time_limit=45.0, rel_gap=0.01)
    assert cfg.solver() == {"time_limit": 45.0, "rel_gap": 0.01, "threads": 1}
    assert cfg.solver(0) == {**cfg.solver(), "seed": 0}


def test_the_gaps_configs_load():
    hw = Config.load("pesto-hardware-gaps")
    assert (hw.kind, hw.base, hw.seeds, hw.jobs, hw.time_limit, hw.rel_gap) == ("gaps", "pesto-hardware",
                                                                               (0, 1, 2), 2, 600.0, 0.02)
    assert (hw.compute_scales, hw.link_scales) == ((1.0, 3.0, 10.0), (0.3,))
    assert base_config(hw).kind == "hardware" and base_config(hw).coarsen_to == 60
    cong = Config.load("pesto-congestion-gaps")
    assert (cong.seeds, cong.time_limit, cong.rel_gap) == ((1, 2), 120.0, 0.01)
    base = base_config(cong)
    assert (base.kind, base.time_limit, base.rel_gap) == ("congestion", 120.0, 0.01)  # so the base run is seed 0
    assert Config.load("pesto-hardware").long_runs == "pesto-hardware-gaps"
    assert Config.load("pesto-congestion").long_runs == "pesto-congestion-gaps"


@pytest.mark.parametrize("base, message", [(None, "needs key 'base'"),
                                           ("pesto-coarsening", "is of kind 'coarsening'")])
def test_a_gaps_config_names_a_figure_config(base, message):
    cfg = dataclasses.replace(Config.load("pesto-hardware-gaps"), base=base)
    with pytest.raises(InputError, match=message):
        base_config(cfg)


def test_a_verdict_is_settled_only_where_every_seed_agrees():
    assert _changes("not reproduced", "not reproduced", ["not reproduced"] * 3) == "stays not reproduced"
    assert _changes("not reproduced", "trend", ["trend"] * 3) == "changes from not reproduced to trend"
    unsettled = _changes("not reproduced", "trend", ["trend", "not reproduced", "trend"])
    assert unsettled.startswith("unsettled") and "not reproduced" in unsettled


@pytest.mark.slow
def test_quick_run_of_the_fig5_seeds_writes_its_table(tmp_path):
    """``--quick``: each ILP capped at 10 s, into ``<out>/congestion-gaps-quick/`` (about 30 s of ILPs)."""
    table = reproduce("pesto-congestion-gaps", quick=True, out_dir=tmp_path, progress=False)
    text = table.read_text()
    assert table.parent.name == "congestion-gaps-quick" and "**Verdict.**" in text
    assert text.count("| 10 s, seed ") == 4 and text.count("default seed (base)") == 2
