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
           "expert_split_path", "bundled_graph", "resolve_graph", "resolve_config"]


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


def resolve_graph(arg: str) -> str:
    """A graph argument as a path: the file itself when it exists, else a bundled
    workload named relative to ``graphs/workloads/`` (``tarnawski/throughput-inputs/
    LayerGraphs/bert24_inference.json``, ``captured/transformer-base``), or by its
    stem when that is unique (``transformer-base``, ``bert24_inference``); ``.json``
    may be left out. Unknown names come back unchanged (the loader then says "no such
    file").

    >>> Path(resolve_graph("captured/transformer-base")).name
    'transformer-base.json'
    >>> Path(resolve_graph("bert24_training")).relative_to(workloads_dir()).as_posix()
    'tarnawski/throughput-inputs/LayerGraphs/bert24_training.json'
    >>> resolve_graph("gnmt_inference")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: gnmt_inference: no such file; bundled workloads of that name: tarnawski/...
    """
    if not arg or Path(arg).exists():
        return arg
    hit = bundled_graph(arg)
    return arg if hit is None else str(hit)


def bundled_graph(name: str) -> Path | None:
    """The bundled workload ``name`` names (the one resolver of bundled graph names, for the
    command line, ``dnnplace run`` configs and reproduction configs alike): a path relative
    to ``graphs/workloads/`` (or from the checkout's root), ``.json`` optional, or a unique
    stem; ``None`` when none matches, an :class:`InputError` when a stem is ambiguous.

    >>> bundled_graph("captured/nasnet-4x44").relative_to(workloads_dir()).as_posix()
    'captured/nasnet-4x44.json'
    >>> bundled_graph("no-such-graph") is None
    True
    """
    root = workloads_dir()
    names = [name] if name.endswith(".json") else [name, f"{name}.json"]
    for prefix in ("", "graphs/workloads/"):  # a path from the checkout's root, used outside it
        for n in names:
            if n and n.startswith(prefix) and (root / n[len(prefix):]).is_file():
                return root / n[len(prefix):]
    if name and "/" not in name and "\\" not in name:
        hits = sorted(p for n in names for p in root.rglob(n) if p.is_file() and "human-experts" not in p.parts)
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise InputError(f"{name}: no such file; bundled workloads of that name: "
                             f"{', '.join(h.relative_to(root).as_posix() for h in hits)} (give one of them)")
    return None


def resolve_config(arg: str) -> str:
    """A config argument as a path: the file itself when it exists, else a bundled
    config by name (``quickstart``, ``experiments/quickstart.toml``).

    >>> Path(resolve_config("quickstart")).name
    'quickstart.toml'
    """
    if not arg or Path(arg).exists():
        return arg
    stem = Path(arg).name.removesuffix(".toml")
    if (Path(arg).parent.name in ("", "experiments")) and (experiments_dir() / f"{stem}.toml").is_file():
        return str(experiments_dir() / f"{stem}.toml")
    return arg
