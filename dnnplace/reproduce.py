"""The registry of reproductions, built from the bundled experiment configs.

A reproduction is a config ``experiments/<name>.toml`` whose top-level key
``reproduction = "<module>"`` names the module of :mod:`dnnplace.experiments` that runs it
(``tarnawski``, ``pesto``, ``fastt``, ``celeritas``, ``pardnn``): the module's
``reproduce(name, quick=, out_dir=, fresh=, progress=) -> Path`` reads the config by its name
and writes the paper-vs-ours table, returning its path. Adding a reproduction is one TOML
file (an existing module runs it) or one module and its TOML file; nothing else lists names
(docs/architecture.md, "Adding a reproduction").

``dnnplace reproduce NAME`` looks NAME up here; the module is imported only when it runs, so
listing reproductions loads no solver.

Records in the tree: every run's record (with its provenance, :mod:`dnnplace.provenance`) is
committed beside its table, as ``runs.jsonl``, or ``runs.jsonl.gz`` where the file is over
:data:`PACK_OVER` bytes (:func:`pack_records`, after each run; reading unpacks it,
:func:`dnnplace.runs_file.unpack`). :func:`check` (``dnnplace reproduce NAME --check``)
re-renders NAME's tables from those records alone in a temporary folder and compares them
with the files in the tree (docs/architecture.md, "Adding a reproduction").
"""

from __future__ import annotations

import functools
import gzip
import importlib
import os
import shutil
import tempfile
import tomllib
from pathlib import Path

from dnnplace.data import experiments_dir
from dnnplace.graphs.errors import InputError

__all__ = ["reproductions", "reproduce", "check", "pack_records", "strip_records", "PACK_OVER", "COMPARED"]

PACK_OVER = 1_000_000
"""Records files over this many bytes are committed compressed (``runs.jsonl.gz``)."""

COMPARED = (".md", ".csv")
"""The rendered files :func:`check` compares; plots (PNG) are not compared (their bytes vary
with the matplotlib version and fonts, not with the records)."""

RECORDS = ("runs.jsonl", "runs.jsonl.gz")


@functools.cache
def reproductions() -> dict[str, str]:
    """Reproduction name -> the :mod:`dnnplace.experiments` module that runs it, in name order."""
    found = {}
    for path in sorted(experiments_dir().glob("*.toml")):
        doc = tomllib.loads(path.read_text())
        module = doc.get("reproduction")
        if module is None:
            continue
        if not isinstance(module, str) or not module.isidentifier():
            raise InputError(f"{path.name}: reproduction = {module!r} must name a module of dnnplace.experiments")
        found[path.stem] = module
    return found


def reproduce(name: str, *, quick: bool = False, out_dir: str | Path | None = None, fresh: bool = False,
              progress: bool = True) -> Path:
    """Run the reproduction ``name`` (resuming from its records) and return the table it wrote."""
    known = reproductions()
    if name not in known:
        raise InputError(f"unknown reproduction {name!r}; known: {sorted(known) or 'none'}")
    module = importlib.import_module(f"dnnplace.experiments.{known[name]}")
    table = Path(module.reproduce(name, quick=quick, out_dir=out_dir, fresh=fresh, progress=progress))
    for folder in (table.parent, table.with_suffix("")):  # the records beside the table, or in its stem's folder
        strip_records(folder / "runs.jsonl", getattr(module, "DROP_FROM_RECORDS", ()))
        pack_records(folder / "runs.jsonl")
    return table


def strip_records(path: Path, keys: tuple[str, ...]) -> int:
    """Drop the top-level ``keys`` from every record of ``path`` (a module's ``DROP_FROM_RECORDS``:
    what its tables never read, e.g. FastT's placements and start times, nearly all of its
    records' bytes); returns the number of records changed (the file is rewritten atomically only then)."""
    import json

    from dnnplace.runs_file import dumps, rewrite

    if not keys or not path.exists():
        return 0
    out, changed = [], 0
    for line in path.read_text().splitlines():
        rec = json.loads(line) if line.strip() else None
        if isinstance(rec, dict) and any(k in rec for k in keys):
            rec = {k: v for k, v in rec.items() if k not in keys}
            changed += 1
            out.append(dumps(rec))
        elif line.strip():
            out.append(line + "\n")
    if changed:
        rewrite(path, "".join(out))
    return changed


def pack_records(path: Path) -> Path | None:
    """Write ``runs.jsonl.gz`` beside ``path`` when ``path`` is over :data:`PACK_OVER` bytes
    (or a compressed copy is already there); byte-stable (no name or time in the gzip
    header), so unchanged records give an unchanged file. Returns the ``.gz`` written or kept."""
    gz = path.with_name(path.name + ".gz")
    if not path.exists() or (path.stat().st_size <= PACK_OVER and not gz.exists()):
        return None
    data = path.read_bytes()
    old = None
    if gz.exists():
        with gzip.open(gz, "rb") as fh:
            old = fh.read()
    if old != data:
        tmp = gz.with_name(gz.name + ".tmp")
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                   compresslevel=9) as fh:
            fh.write(data)
        os.replace(tmp, gz)
    st = path.stat()
    os.utime(gz, (st.st_atime, st.st_mtime))  # in step: reading does not unpack it again
    return gz


def _default_root(name: str) -> Path:
    """The folder NAME's tables and records are committed in: its config's ``out_dir`` in the checkout."""
    from dnnplace.config import REPO_ROOT

    doc = tomllib.loads((experiments_dir() / f"{name}.toml").read_text())
    module = importlib.import_module(f"dnnplace.experiments.{reproductions()[name]}")
    out = doc.get("out_dir") or module.SCHEMA.out_dir
    return Path(out) if Path(out).is_absolute() else REPO_ROOT / out


def _copy_records(root: Path, dest: Path) -> int:
    """Copy the records files in ``root`` and its subfolders (the compressed one where both
    are there: it is what the tree holds) to ``dest``, with the instance files beside them
    (``instances/``: a regenerated instance whose content digest matches a file there keeps
    that file's name, and so its runs' keys, :func:`dnnplace.experiments.instance_files.write_variants`)
    and any captured-graph cache (``graphs/``); returns the number of records files."""
    n = 0
    for folder in [root, *sorted(p for p in root.iterdir() if p.is_dir())]:
        src = next((folder / r for r in RECORDS[::-1] if (folder / r).exists()), None)
        if src is None:
            continue
        (dest / folder.relative_to(root)).mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / folder.relative_to(root) / src.name)
        n += 1
        if (folder / "instances").is_dir():
            shutil.copytree(folder / "instances", dest / folder.relative_to(root) / "instances")
    if (root / "graphs").is_dir():
        shutil.copytree(root / "graphs", dest / "graphs")
    return n


def _first_difference(a: list[str], b: list[str]) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: tree {x!r} vs re-rendered {y!r}"
    return f"line {min(len(a), len(b)) + 1}: the tree's has {len(a)} lines, the re-rendered {len(b)}"


def check(name: str, out_dir: str | Path | None = None) -> tuple[list[Path], list[str]]:
    """Re-render NAME's tables from the records in ``out_dir`` (default: the checkout's
    results folder of NAME) in a temporary folder -- no run: a missing record is an
    ``InputError`` -- and compare every table file it writes (:data:`COMPARED`) with the
    file of the same name in ``out_dir``. Returns (the files that match, one line per file
    that differs: its first differing line, or that it is missing)."""
    from dnnplace.config import LABEL_ROOT, RECORDS_ONLY, REPO_ROOT

    known = reproductions()
    if name not in known:
        raise InputError(f"unknown reproduction {name!r}; known: {sorted(known) or 'none'}")
    root = Path(out_dir) if out_dir is not None else _default_root(name)
    module = importlib.import_module(f"dnnplace.experiments.{known[name]}")
    try:  # run keys name instance files relative to the checkout: the copy keeps that relative path
        rel = root.resolve().relative_to(REPO_ROOT.resolve())
    except ValueError:
        rel = None
    with tempfile.TemporaryDirectory(prefix=f"dnnplace-check-{name}-") as tmp:
        tmp = Path(tmp)
        work = tmp / (rel if rel is not None else "out")
        work.mkdir(parents=True, exist_ok=True)
        if not root.is_dir() or not _copy_records(root, work):
            raise InputError(f"{name}: no records (runs.jsonl or runs.jsonl.gz) in {root}; run `dnnplace reproduce "
                             f"{name}` first")
        tokens = (RECORDS_ONLY.set(True), LABEL_ROOT.set(tmp if rel is not None else None))
        try:
            module.reproduce(name, out_dir=work, progress=False)
        finally:
            RECORDS_ONLY.reset(tokens[0])
            LABEL_ROOT.reset(tokens[1])
        same: list[Path] = []
        diffs: list[str] = []
        for new in sorted(p for p in work.rglob("*") if p.suffix in COMPARED and p.is_file()):
            old = root / new.relative_to(work)
            if not old.exists():
                diffs.append(f"{old}: not in the tree (re-rendering writes it)")
                continue
            a, b = old.read_text().splitlines(), new.read_text().splitlines()
            if a == b:
                same.append(old)
            else:
                diffs.append(f"{old}: {_first_difference(a, b)}")
    return same, diffs
