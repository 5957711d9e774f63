"""Synthetic operator-graph generators, one module per family, behind one registry.

``GENERATORS`` maps a family name to a function ``f(n, *, seed=0, **options) -> OpGraph``;
:func:`generate` looks the family up and calls it. A new family (LSTM grid, Transformer,
Inception, ...) is a module beside :mod:`dnnplace.graphs.generators.random_dag` plus one line in
``GENERATORS``. Every generator is deterministic for its ``seed`` and draws randomness
only from a local ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators.cells import cell_network
from dnnplace.graphs.generators.convnets import conv_chain, wide_resnet
from dnnplace.graphs.generators.lstm import lstm_grid
from dnnplace.graphs.generators.random_dag import DEFAULT_MEMORY_BUDGET, random_layered_dag
from dnnplace.graphs.graph import OpGraph

__all__ = ["GENERATORS", "generate", "random_layered_dag", "DEFAULT_MEMORY_BUDGET"]

GENERATORS: dict[str, Callable[..., OpGraph]] = {
    "random-dag": random_layered_dag,
    "lstm": lstm_grid,
    "cells": cell_network,
    "conv-chain": conv_chain,
    "wide-resnet": wide_resnet,
}


def generate(family: str, **kwargs: Any) -> OpGraph:
    """Generate a graph of a registered ``family`` (see :data:`GENERATORS`).

    >>> generate("random-dag", n=50, seed=1).n
    50
    """
    try:
        fn = GENERATORS[family]
    except KeyError:
        raise InputError(f"unknown graph family {family!r}; known: {sorted(GENERATORS)}") from None
    return fn(**kwargs)
