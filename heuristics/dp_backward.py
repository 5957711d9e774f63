"""Backward contiguity for the max-load DP on training graphs (Tarnawski et al. Sec. 5.3).

A forward ideal is used only when its backward partners form a set closed under backward
successors, so that the difference of two used ideals is contiguous in the backward part
too; :func:`backward_contiguity` computes that test for every ideal along the cover
relation, and the bitsets and closure the DP kernel checks stages with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.reach import closure_bits
from dnnplace.heuristics.ideals import IdealLattice

__all__ = ["backward_contiguity"]


def _bitsets(rows: list[np.ndarray], nbits: int) -> np.ndarray:
    """One row of ``nbits``-bit sets per list of bit positions."""
    words = max(1, (nbits + 63) // 64)
    out = np.zeros((len(rows), words), dtype=np.uint64)
    for r, bits in enumerate(rows):
        for b in bits.tolist():
            out[r, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return out


def _ideal_union(lat: IdealLattice, bmask: np.ndarray) -> np.ndarray:
    """Backward nodes carried by every ideal (bitsets), along the cover relation."""
    out = np.zeros((lat.size, bmask.shape[1]), dtype=np.uint64)
    first = np.full(lat.size, -1, dtype=np.int64)
    src_of = np.repeat(np.arange(lat.size), np.diff(lat.cover_ptr))
    # the first cover reaching each ideal (BFS order: sources come earlier)
    order = np.argsort(lat.cover_to, kind="stable")
    tos = lat.cover_to[order]
    starts = np.flatnonzero(np.r_[True, tos[1:] != tos[:-1]])
    first[tos[starts]] = order[starts]
    for j in range(1, lat.size):
        e = first[j]
        out[j] = out[src_of[e]] | bmask[lat.cover_node[e]]
    return out


def _is_filter(sets: np.ndarray, es: np.ndarray, ed: np.ndarray) -> np.ndarray:
    """Rows that are closed under backward successors (then differences of two such
    sets are contiguous)."""
    ok = np.ones(sets.shape[0], dtype=np.bool_)
    one = np.uint64(1)
    for a, b in zip(es.tolist(), ed.tolist()):
        ina = (sets[:, a >> 6] >> np.uint64(a & 63)) & one
        inb = (sets[:, b >> 6] >> np.uint64(b & 63)) & one
        ok &= ~((ina == 1) & (inb == 0))
    return ok


def backward_contiguity(g: OpGraph, grp: np.ndarray, n_groups: int, lattice: IdealLattice) -> dict[str, Any]:
    """The DP kernel's backward-contiguity inputs for graph ``g`` whose nodes form the DP
    nodes ``grp`` (``n_groups`` of them) with ideals ``lattice``: ``check_bw`` (a training
    graph), ``bmask`` (the backward nodes of each DP node, as bitsets), ``desc``/``anc``
    (the backward part's transitive closure) and ``ideal_ok`` (ideals whose backward
    nodes are closed under backward successors); trivial arrays for inference graphs."""
    bw = g.backward
    check_bw = bool(bw.any())
    if check_bw:
        bidx = np.full(g.n, -1, dtype=np.int64)
        bnodes = np.flatnonzero(bw)
        bidx[bnodes] = np.arange(bnodes.size)
        nb = bnodes.size
        bmask = _bitsets([bidx[bnodes[grp[bnodes] == x]] for x in range(n_groups)], nb)
        be = bw[g.src] & bw[g.dst]
        es, ed = bidx[g.src[be]], bidx[g.dst[be]]
        desc, anc = closure_bits(OpGraph(ids=range(nb), kinds=("x",), compute=np.zeros((nb, 1)),
                                         memory=np.zeros(nb), src=es, dst=ed))
        ideal_bw = _ideal_union(lattice, bmask)
        ideal_ok = _is_filter(ideal_bw, es, ed)
    else:
        bmask = np.zeros((n_groups, 1), dtype=np.uint64)
        desc = anc = np.zeros((1, 1), dtype=np.uint64)
        ideal_ok = np.ones(lattice.size, dtype=np.bool_)
    return dict(ideal_ok=ideal_ok, bmask=bmask, desc=desc, anc=anc, check_bw=check_bw)
