"""Where the bundled data lives, for a checkout and an installed wheel alike.

Workloads ship inside :mod:`dnnplace.graphs` (``graphs/workloads/`` in the checkout),
experiment configs and published references inside :mod:`dnnplace.experiments`
(``experiments/``); both are read through :mod:`importlib.resources`, never through a
path relative to the source tree. Outputs go to the working directory (``results/``).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from dnnplace.graphs.errors import InputError

__all__ = ["workloads_dir", "tarnawski_dir", "experiments_dir", "experiment_config", "reference_path",
           "expert_split_path"]


def _path(package: str, *parts: str) -> Path:
    # installed packages (wheel or editable) are plain folders, so this is a real path
    return Path(str(files(package).joinpath(*parts)))


def workloads_dir() -> Path:
    """The bundled workloads (``graphs/workloads``)."""
    return _path("dnnplace.graphs", "workloads")


def tarnawski_dir() -> Path:
    """Tarnawski et al.'s inputs and expert splits (``latency-inputs/``, ``throughput-inputs/``,
    ``human-experts/``)."""
    return workloads_dir() / "tarnawski"


def experiments_dir() -> Path:
    """The bundled experiment configs (``experiments/*.toml``)."""
    return _path("dnnplace.experiments")


def experiment_config(name: str) -> Path:
    """``experiments/<name>.toml``, or a named error listing the bundled ones."""
    p = experiments_dir() / f"{name}.toml"
    if not p.is_file():
        known = sorted(q.stem for q in experiments_dir().glob("*.toml"))
        raise InputError(f"no bundled experiment config {name!r}; known: {known}")
    return p


def reference_path(name: str) -> Path:
    """A published reference table (``experiments/reference/<name>.json``)."""
    return experiments_dir() / "reference" / f"{name}.json"


def expert_split_path(graph_name: str) -> Path:
    """The bundled human-expert split of a Tarnawski workload (a training graph without
    one of its own uses its inference split, whose ``colorClass`` covers the backward
    nodes), or a named error listing the bundled splits."""
    folder = tarnawski_dir() / "human-experts"
    candidates = [folder / f"{graph_name}_expert.json"]
    if graph_name.endswith("_training"):
        candidates.append(folder / f"{graph_name[: -len('_training')]}_inference_expert.json")
    for c in candidates:
        if c.is_file():
            return c
    raise InputError(f"no expert split for {graph_name!r}: pass one with --split FILE "
                     f"(bundled: {sorted(p.name for p in folder.glob('*.json'))})")
