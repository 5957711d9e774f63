"""Speed and reproduction benchmarks, one harness: ``python -m benchmarks NAME [options]``.

Every ``benchmarks/bench_<name>.py`` is one sub-command (``<name>``, underscores written
as hyphens) and follows one convention:

- its module docstring's first line is the one-line description that
  ``python -m benchmarks`` lists; the rest is its ``--help`` text;
- ``add_arguments(parser)`` adds its own options (options several benchmarks share,
  such as ``--out``, ``--time-limit`` or ``--seed``, come from
  :func:`benchmarks.options.add_shared`, declared once there);
- ``run(args)`` runs it and prints or saves its table.

Modules have no ``if __name__ == "__main__"`` block: the harness is the one entry point
(and its guard is the one that processes spawned by a benchmark rely on). Micro-benchmarks
of hot paths for pytest-benchmark are in ``benchmarks/test_kernels.py``
(``.venv/bin/pytest benchmarks/test_kernels.py --benchmark-only``).

Discovery reads the files, not the modules, so listing the benchmarks imports none of them.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
PREFIX = "bench_"


def command_name(module: str) -> str:
    """``bench_pesto_vcycle`` -> ``pesto-vcycle``."""
    return module.removeprefix(PREFIX).replace("_", "-")


def benchmarks() -> dict[str, str]:
    """Sub-command name -> module name, for every ``bench_*.py`` here, sorted by name."""
    return {command_name(p.stem): p.stem for p in sorted(HERE.glob(f"{PREFIX}*.py"))}


def description(module: str) -> str:
    """First line of the module's docstring, read without importing the module."""
    doc = ast.get_docstring(ast.parse((HERE / f"{module}.py").read_text()))
    return (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""


def load(name: str) -> ModuleType:
    """The module of sub-command ``name`` (hyphens or underscores); ``KeyError`` if none."""
    module = benchmarks()[name.replace("_", "-")]
    return importlib.import_module(f"{__name__}.{module}")
