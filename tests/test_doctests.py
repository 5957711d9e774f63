"""The docstring examples of every installed module, imported by its package name
(``dnnplace.graphs.stats``, not the file path), so they run against what pip installed."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

LAYERS = ("dnnplace", "dnnplace.graphs", "dnnplace.heuristics", "dnnplace.formulations", "dnnplace.experiments")


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


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"


def test_doctests_ran():
    """Examples exist and are found: a count of zero would mean the walk is broken."""
    attempted = sum(doctest.testmod(importlib.import_module(n), report=False,
                                    optionflags=doctest.ELLIPSIS).attempted for n in MODULES)
    assert attempted >= 40, attempted
