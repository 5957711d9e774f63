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
"""

from __future__ import annotations

import functools
import importlib
import tomllib
from pathlib import Path

from dnnplace.data import experiments_dir
from dnnplace.graphs.errors import InputError

__all__ = ["reproductions", "reproduce"]


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
    return Path(module.reproduce(name, quick=quick, out_dir=out_dir, fresh=fresh, progress=progress))
