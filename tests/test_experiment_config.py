"""The one loader of the reproductions' configs (dnnplace.experiments.config)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dnnplace.config import load_config
from dnnplace.data import experiment_config, experiments_dir
from dnnplace.experiments.config import Reproduction, load, load_include
from dnnplace.graphs.errors import InputError


def _docs() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(experiments_dir().glob("*.toml"))}


def test_every_bundled_toml_loads():
    docs = _docs()
    includes = set()
    for name, text in docs.items():
        if "\nreproduction = " not in "\n" + text:
            continue
        for quick in (False, True):
            cfg = load(name, quick=quick)
            assert isinstance(cfg, Reproduction) and cfg.name and cfg.kind and cfg.out_dir
        for line in text.splitlines():
            if line.startswith("models = \""):
                includes.add(line.split('"')[1])
    assert includes == {"celeritas-models", "pardnn-models"}
    for inc in includes:
        path, doc = load_include(inc)
        assert path.stem == inc and doc["models"]
    for name in set(docs) - includes:  # the rest are `dnnplace run` sweeps
        if "\nreproduction = " not in "\n" + docs[name]:
            assert load_config(experiment_config(name)).specs


def test_common_fields_and_module_keys():
    cfg = load("pardnn-speedup")
    assert cfg.reproduction == "pardnn" and cfg.kind == "speedup" and cfg.out_dir == "results/pardnn"
    assert cfg.cluster == {"gpu_memory": 32e9, "interconnect": "nvlink"}  # from the include
    assert [m["name"] for m in cfg.models][:2] == ["Word-RNN", "Char-CRN"]
    lc = cfg.methods["LC+GLB"]
    assert (lc.method, lc.time_limit, cfg.methods["PARDNN II+I"].params) == ("lc-glb", 60.0, {"memory": "II+I"})
    assert cfg.gpus == [2, 4, 8] and cfg["reference"] == "PARDNN II+I" and cfg.max_nodes is None
    with pytest.raises(AttributeError, match="no key 'nope'"):
        _ = cfg.nope


def test_quick_values_override_and_merge():
    full, quick = load("fastt-splits"), load("fastt-splits", quick=True)
    assert len(full.families) == 9 and quick.families == ["lenet"] and "quick_families" not in quick.options
    t1 = load("tarnawski-table1", quick=True)
    assert t1.methods["local_search"].params == {"restarts": 2} and load("tarnawski-table1").max_ideals is None
    assert t1.max_ideals == 20000
    t4 = load("tarnawski-table4", quick=True).methods["latency_ls"]
    assert t4.params == {"max_iters": 20} and t4.get("warm_start") == "greedy"
    assert load("tarnawski-table4").methods["latency_ls"].get("warm_start") is None


def _copy(tmp_path: Path, name: str, edit=lambda s: s, stem: str = "mine") -> Path:
    p = tmp_path / f"{stem}.toml"
    p.write_text(edit(experiment_config(name).read_text()))
    return p


@pytest.mark.parametrize("name, edit, match", [
    ("fastt-splits", lambda s: s.replace('kind = "splits"', 'kind = "splits"\nbogus = 1'),
     r"mine\.toml: unknown keys 'bogus'"),
    ("fastt-splits", lambda s: s.replace("split_gpus = 2", 'split_gpus = "two"'),
     r"mine\.toml: split_gpus = 'two': must be an integer"),
    ("fastt-splits", lambda s: s.replace('quick_families = ["lenet"]', "quick_families = [1]"),
     r"mine\.toml: quick_families\[0\] = 1: must be a string"),
    ("fastt-splits", lambda s: s.replace("time_limit = 20.0", "time_limit = -1.0"),
     r"mine\.toml: time_limit = -1\.0: must be positive"),
    ("fastt-splits", lambda s: s.replace('kind = "splits"', 'kind = "table9"'),
     r"mine\.toml: kind = 'table9': must be one of scaling, splits, memory"),
    ("fastt-splits", lambda s: s.replace('reproduction = "fastt"', 'reproduction = "nosuch"'),
     r"mine\.toml: reproduction = 'nosuch': no module dnnplace\.experiments\.nosuch"),
    ("pesto-congestion", lambda s: s.replace('interconnect = "pcie"', 'interconnect = "pci"'),
     r"mine\.toml: \[cluster\] interconnect = 'pci': must be one of 'nvlink', 'pcie'"),
    ("tarnawski-table1", lambda s: s.replace("exact = true", "exact = true\ncolour = 1"),
     r"mine\.toml: \[methods\.dp\] unknown keys 'colour'"),
    ("tarnawski-table1", lambda s: s.replace('method = "dpl"', 'method = "dlp"'),
     r"mine\.toml: \[methods\.dpl\] method = 'dlp': no such method"),
    ("celeritas-table3", lambda s: s.replace("memory = true", "memroy = true"),
     r"mine\.toml: \[methods\.'Metis \(memory too\)'\] params: method 'metis' has no option 'memroy'"),
    ("celeritas-table3", lambda s: s.replace('models = "celeritas-models"', 'models = "no-such-models"'),
     r"mine\.toml: models = 'no-such-models' \(an include\): no bundled experiment config 'no-such-models'"),
    ("pardnn-memory", lambda s: s.replace("gpus = [1, 2, 4, 8]\n", ""), r"mine\.toml: missing key 'gpus'"),
])
def test_bad_configs_are_refused_naming_file_and_key(tmp_path, name, edit, match):
    with pytest.raises(InputError, match=match):
        load(_copy(tmp_path, name, edit))


def test_an_include_beside_the_config_is_checked_as_its_own_file(tmp_path):
    inc = experiment_config("pardnn-models").read_text().replace("[[models]]", "colour = 1\n\n[[models]]", 1)
    (tmp_path / "my-models.toml").write_text(inc)
    p = _copy(tmp_path, "pardnn-speedup", lambda s: s.replace('"pardnn-models"', '"my-models"'))
    with pytest.raises(InputError, match=r"my-models\.toml: unknown keys 'colour'"):
        load(p)
    (tmp_path / "my-models.toml").write_text(inc.replace("colour = 1\n", "").replace("nodes = 10578", 'nodes = "x"'))
    with pytest.raises(InputError, match=r"my-models\.toml: \[\[models\]\] #1 \(Word-RNN\) nodes = 'x'"):
        load(p)


def test_a_user_toml_for_an_existing_module_is_a_new_reproduction(tmp_path, monkeypatch):
    """A copy of fastt-splits under another name loads by path with that name; a new TOML file
    for the tarnawski module in the experiments folder is listed and runs as a reproduction."""
    cfg = load(_copy(tmp_path, "fastt-splits", stem="my-splits"))
    assert (cfg.name, cfg.reproduction, cfg.kind) == ("my-splits", "fastt", "splits")

    import dnnplace.data as data
    import dnnplace.reproduce as registry

    folder = tmp_path / "experiments"
    folder.mkdir()
    (folder / "reference").symlink_to(experiments_dir() / "reference")  # the published tables
    (folder / "my-latency.toml").write_text(
        'reproduction = "tarnawski"\nkind = "table4"\nnotes = ["greedy only"]\n\n'
        '[methods.greedy]\nmethod = "greedy"\n')
    monkeypatch.setattr(data, "experiments_dir", lambda: folder)
    monkeypatch.setattr(registry, "experiments_dir", lambda: folder)
    registry.reproductions.cache_clear()
    try:
        assert registry.reproductions() == {"my-latency": "tarnawski"}
        md = registry.reproduce("my-latency", quick=True, out_dir=tmp_path / "out", progress=False)
    finally:
        registry.reproductions.cache_clear()
    assert md == tmp_path / "out" / "my-latency-quick.md" and "- greedy only" in md.read_text()
    with open(md.with_suffix(".csv")) as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["column"] for r in rows} == {"greedy"} and all(r["ours"] for r in rows)
