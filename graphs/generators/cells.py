"""Inception/NASNet-like layer graphs: cells of parallel branches (family ``"cells"``).

Structure: a stem node, then ``cells`` cells in sequence. Every cell reads the previous
cell's output, runs ``branches`` parallel chains of layers (lengths drawn uniformly from
``branch_len``) and joins them in a concat node, which is the cell's output. With
``skip=True`` each cell's concat also reads the previous cell's output directly (a
residual edge; it adds no ideals). This is the shape that makes the max-load DP of
Tarnawski et al. (Sec. 5.1) expensive: the ideals of a cell are all combinations of
branch prefixes, so the graph has

    2 + sum over cells of prod over branches (length + 1)

ideals (the empty set, the stem, and per cell every prefix combination; the full
combination plus the concat is the next cell's empty combination), e.g. 4 cells of
5 branches of 13 layers: ``2 + 4 * 14**5 = 2,151,298``.

Costs (Tarnawski's model: kinds ``acc`` and ``cpu``, a transfer cost per node on its
out-edges): accelerator time lognormal with median ``compute_ms``; CPU time 5-20x that;
transfer cost ``comm_frac`` of the producer's time times a lognormal factor; memory
lognormal with median ``layer_bytes``.

>>> g = cell_network(seed=0, cells=2, branches=3, branch_len=(2, 2))
>>> g.n, g.m  # nodes: stem + 2 * (3 * 2 + concat); edges per cell: 6 + 3 into concat + skip
(15, 20)
>>> from dnnplace.heuristics.ideals import enumerate_ideals
>>> enumerate_ideals(g.n, g.src, g.dst).size == 2 + 2 * 3 ** 3
True
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["cell_network", "cell_ideal_count"]


def cell_ideal_count(lengths: list[list[int]]) -> int:
    """Ideals of a cell network with the given branch lengths per cell (module docstring)."""
    return 2 + sum(int(np.prod([x + 1 for x in cell], dtype=object)) for cell in lengths)


def cell_network(n: int | None = None, *, seed: int = 0, cells: int = 3, branches: int = 5,
                 branch_len: tuple[int, int] = (10, 16), skip: bool = True, compute_ms: float = 1.0,
                 comm_frac: float = 0.3, layer_bytes: float = 50e6) -> OpGraph:
    """A layer graph of ``cells`` Inception-like cells (see the module docstring).

    ``n`` is accepted for the generator registry's signature and ignored unless the
    other sizes are left at their defaults, in which case the branch length is chosen so
    that the graph has about ``n`` nodes. ``meta["generator"]["ideals"]`` records the
    exact ideal count.
    """
    lo, hi = branch_len
    if cells < 1 or branches < 1 or lo < 1 or hi < lo:
        raise InputError(f"cell_network needs cells, branches >= 1 and 1 <= branch_len[0] <= branch_len[1], "
                         f"got cells={cells}, branches={branches}, branch_len={branch_len}")
    if n is not None:
        per = max(1, round((n - 1) / cells / branches) - 1)
        lo = hi = per
    rng = np.random.default_rng(seed)
    lengths = [[int(x) for x in rng.integers(lo, hi + 1, branches)] for _ in range(cells)]
    src: list[int] = []
    dst: list[int] = []
    names = ["stem"]
    prev = 0
    for c, cell in enumerate(lengths):
        tails = []
        for b, length in enumerate(cell):
            last = prev
            for i in range(length):
                names.append(f"cell{c}/branch{b}/layer{i}")
                src.append(last)
                dst.append(len(names) - 1)
                last = len(names) - 1
            tails.append(last)
        names.append(f"cell{c}/concat")
        out = len(names) - 1
        for t in tails + ([prev] if skip else []):
            src.append(t)
            dst.append(out)
        prev = out
    n_nodes = len(names)
    acc = np.round(rng.lognormal(np.log(compute_ms), 0.6, n_nodes), 4)
    cpu = np.round(acc * rng.uniform(5, 20, n_nodes), 4)
    node_cost = np.round(comm_frac * acc * rng.lognormal(0.0, 0.5, n_nodes), 4)
    s, d = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    g = OpGraph(ids=names, kinds=("acc", "cpu"), compute=np.stack([acc, cpu], axis=1),
                memory=np.round(rng.lognormal(np.log(layer_bytes), 0.5, n_nodes)), src=s, dst=d,
                edge_cost=node_cost[s], name=f"cells-{cells}x{branches}-s{seed}")
    g.meta["generator"] = {"family": "cells", "seed": seed, "cells": cells, "branches": branches,
                           "lengths": lengths, "ideals": cell_ideal_count(lengths)}
    return g
