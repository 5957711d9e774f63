"""CSR adjacency arrays and the level-by-level topological sort over them.

:class:`~dnnplace.graphs.graph.OpGraph` keeps its edges as CSR triples (row pointer,
neighbour, edge id) built by :func:`csr`; :func:`kahn_levels` sorts a graph given as such
a triple one numpy step per level, and :func:`csr_rows` gathers the entries of many rows
at once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["csr_rows", "csr", "kahn_levels"]


def csr_rows(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions of all CSR entries belonging to ``rows`` (vectorised ``concat(range)``).

    >>> csr_rows(np.array([0, 2, 2, 5]), np.array([0, 2]))
    array([0, 1, 2, 3, 4])
    """
    starts = ptr[rows]
    lens = ptr[rows + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(lens) + lens, lens)
    return offsets + np.arange(total, dtype=np.int64)


def csr(keys: np.ndarray, vals: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of the pairs ``(keys[j], vals[j])`` over ``n`` rows: row pointer, the values sorted by
    key (stable) and the position ``j`` of each entry."""
    perm = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, vals[perm].astype(np.int64), perm.astype(np.int64)


def kahn_levels(n: int, dst: np.ndarray, ptr: np.ndarray, nbr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kahn's algorithm, one numpy step per level, over the out-edge CSR ``(ptr, nbr)`` of
    ``n`` nodes whose edge targets are ``dst``; returns (order, level). On a cycle the order
    is shorter than ``n`` and the nodes left out keep level -1.

    Narrow levels (deep graphs such as tiled layer stacks, ~100k levels) take a plain
    Python step: a numpy step costs O(n) per level, O(n * depth) in all.

    >>> order, level = kahn_levels(3, np.array([1, 2]), np.array([0, 1, 2, 2]), np.array([1, 2]))
    >>> order.tolist(), level.tolist()
    ([0, 1, 2], [0, 1, 2])
    """
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    level = np.full(n, -1, dtype=np.int64)
    frontier = np.flatnonzero(indeg == 0)
    parts, depth = [], 0
    while frontier.size:
        parts.append(frontier)
        level[frontier] = depth
        depth += 1
        if frontier.size <= 16:
            nxt = []
            for v in frontier.tolist():
                for w in nbr[ptr[v]:ptr[v + 1]].tolist():
                    indeg[w] -= 1
                    if indeg[w] == 0:
                        nxt.append(w)
            frontier = np.array(sorted(nxt), dtype=np.int64)
            continue
        tgt = nbr[csr_rows(ptr, frontier)]
        if tgt.size == 0:
            break
        indeg -= np.bincount(tgt, minlength=n)
        cand = np.unique(tgt)
        frontier = cand[indeg[cand] == 0]
    order = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return order, level
