"""The instance files a reproduction writes and its runs name: one native instance file per
cluster variant of an experiment's graph (:class:`Variant`), named by a digest of its content
(:func:`content_digest`) so that a regenerated graph keeps its file, its run keys and so its
recorded runs (:func:`write_variants`). Shared by the Pesto, FastT, Celeritas and PARDNN
reproductions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dnnplace.config import graph_label_of
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import jsonable, save_instance
from dnnplace.graphs.io.native import instance_to_native

__all__ = ["Variant", "DIGEST_DIGITS", "content_digest", "write_variants"]


@dataclass(frozen=True)
class Variant:
    """One instance file of an experiment: a cluster variant of its graph."""

    stem: str              # e.g. "gpus2-c0.3-l1"
    path: Path             # the written native instance file
    n: int                 # nodes of the graph
    gpus: int
    compute: float = 1.0
    link: float = 1.0

    @property
    def label(self) -> str:
        return graph_label_of(self.path)



DIGEST_DIGITS = 12  # significant digits of the floats an instance file's name digest is taken over


def _canonical(x: Any) -> Any:
    """A JSON document with every float rounded to :data:`DIGEST_DIGITS` significant digits
    (what :func:`content_digest` hashes)."""
    if isinstance(x, dict):
        return {k: _canonical(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_canonical(v) for v in x]
    if isinstance(x, float):
        return float(f"{x:.{DIGEST_DIGITS}g}")
    return x


def content_digest(doc: Any) -> str:
    """The 8-hex-digit digest in an instance file's name: SHA-1 of the sorted JSON of the
    native document with its floats rounded to :data:`DIGEST_DIGITS` significant digits,
    so last-bit differences of a regenerated graph (numpy, summation order) keep the name,
    the run keys (whose graph label is the file's path) and so the recorded runs."""
    blob = json.dumps(_canonical(jsonable(doc)), sort_keys=True, allow_nan=False)
    return hashlib.sha1(blob.encode()).hexdigest()[:8]


def _file_digest(path: Path) -> str | None:
    """:func:`content_digest` of an instance file already written, ``None`` if unreadable."""
    try:
        with open(path) as fh:
            return content_digest(json.load(fh))
    except (OSError, ValueError):
        return None


def write_variants(g: OpGraph, clusters: dict[str, tuple[Cluster, int, float, float]], folder: Path,
                   source: str) -> dict[str, Variant]:
    """Write each ``stem -> (cluster, gpus, compute, link)`` as ``<folder>/<stem>-<digest>.json``
    (:func:`content_digest`: floats to :data:`DIGEST_DIGITS` significant digits), drop
    instance files of earlier configs, return the variants.

    The file is written as generated (full precision). A file of the same stem already in
    ``folder`` whose content has the same digest is kept and used under its own name, even
    one named by the earlier full-precision digest: its runs resume on exactly the floats
    they were computed on."""
    folder.mkdir(parents=True, exist_ok=True)
    existing: dict[tuple[str, str], Path] = {}
    for old in sorted(folder.glob("*.json")):
        stem, _, tail = old.stem.rpartition("-")
        if stem in clusters and len(tail) == 8 and (d := _file_digest(old)) is not None:
            existing.setdefault((stem, d), old)
    out: dict[str, Variant] = {}
    for stem, (cl, gpus, comp, link) in clusters.items():
        inst = Instance(g, cl, source)
        digest = content_digest(instance_to_native(inst))
        path = existing.get((stem, digest), folder / f"{stem}-{digest}.json")
        if not path.exists():
            save_instance(inst, path)
        out[stem] = Variant(stem, path, g.n, gpus, comp, link)
    keep = {v.path.name for v in out.values()}
    for old in folder.glob("*.json"):
        if old.name not in keep:
            old.unlink()
    return out
