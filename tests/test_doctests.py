"""The docstring examples of every installed module, imported by its package name
(``dnnplace.graphs.stats``, not the file path), so they run against what pip installed."""

from __future__ import annotations

import doctest
import functools
import importlib
import os
import pkgutil
import re

import pytest

LAYERS = ("dnnplace", "dnnplace.graphs", "dnnplace.heuristics", "dnnplace.formulations", "dnnplace.experiments")
REQUIRE_TORCH = os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1"
"""CI installs the torch extra: there a module that needs torch must run, never skip."""


def _modules() -> list[str]:
    # each layer walked from its own package: in an editable install the layers are
    # separate folders, not subfolders of dnnplace/
    names = set()
    for layer in LAYERS:
        pkg = importlib.import_module(layer)
        names.add(layer)
        names.update(i.name for i in pkgutil.walk_packages(pkg.__path__, layer + "."))
    return sorted(names)


MODULES = _modules()


def test_every_layer_is_walked():
    """The walk reaches all four layers (a packaging mistake would silently skip one)."""
    for layer in ("dnnplace.graphs", "dnnplace.heuristics", "dnnplace.formulations", "dnnplace.graphs.io"):
        assert layer in MODULES


@functools.cache
def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _missing_torch(exc: ImportError) -> bool:
    return isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "torch"


def _import(name: str):
    """The module, or ``None`` where importing it needs torch and torch is absent (outside CI)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if _missing_torch(exc) and not REQUIRE_TORCH:
            return None
        raise


def _examples_use_torch(module) -> bool:
    """Some example of the module names torch (imports it, or shows a torch value)."""
    word = re.compile(r"\btorch\b")
    return any(word.search(ex.source) or word.search(ex.want)
               for test in doctest.DocTestFinder().find(module) for ex in test.examples)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = _import(name)
    if module is None:
        pytest.skip(f"{name} imports torch, which is not installed (the torch extra)")
    if not REQUIRE_TORCH and _examples_use_torch(module) and not _have_torch():
        pytest.skip(f"the examples of {name} use torch, which is not installed (the torch extra)")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"


def test_doctests_ran():
    """Examples exist and are found: a count of zero would mean the walk is broken (without
    torch, the modules that need it are left out of the count)."""
    modules = [m for m in map(_import, MODULES) if m is not None]
    if not _have_torch():
        modules = [m for m in modules if not _examples_use_torch(m)]
    attempted = sum(doctest.testmod(m, report=False, optionflags=doctest.ELLIPSIS).attempted for m in modules)
    assert attempted >= 40, attempted
