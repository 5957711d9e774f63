"""Reachability for the methods: descendant and ancestor sets as bitsets.

One helper for every method that needs "is there a path u -> v" (the max-load DP's
backward-contiguity check, the Pesto ILP's order pairs). The evaluator keeps its own
on purpose, to stay independent of what it checks. Rows are ``uint64`` words (bit
``v & 63`` of word ``v >> 6``), filled in one pass over a topological order with
numpy ``bitwise_or`` over successor rows: ``O(n * m / 64)`` word operations, meant for
graphs of up to some ten thousand nodes.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.graph import OpGraph

__all__ = ["closure_bits", "reachability", "descendant_matrix", "narrow_cut_mask", "descendant_bits_within"]


def _bits(n: int, order: np.ndarray, ptr: np.ndarray, nbr: np.ndarray) -> np.ndarray:
    words = max(1, (n + 63) // 64)
    bits = np.zeros((max(n, 1), words), dtype=np.uint64)
    own = np.zeros((max(n, 1), words), dtype=np.uint64)
    idx = np.arange(n)
    own[idx, idx >> 6] = np.left_shift(np.uint64(1), (idx & 63).astype(np.uint64))
    for u in order.tolist():
        nxt = nbr[ptr[u]:ptr[u + 1]]
        if nxt.size:
            bits[u] = np.bitwise_or.reduce(bits[nxt] | own[nxt], axis=0)
    return bits


def closure_bits(graph: OpGraph) -> tuple[np.ndarray, np.ndarray]:
    """Strict descendants and strict ancestors of every node, as ``uint64`` bitset rows.

    >>> g = OpGraph(ids=[0, 1, 2], kinds=("x",), compute=[[0.0]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2])
    >>> desc, anc = closure_bits(g)
    >>> [int(w) for w in desc[:, 0]], [int(w) for w in anc[:, 0]]
    ([6, 4, 0], [0, 1, 3])
    """
    order = graph.topo_order
    desc = _bits(graph.n, order[::-1], graph.out_ptr, graph.out_nbr)
    anc = _bits(graph.n, order, graph.in_ptr, graph.in_nbr)
    return desc, anc


def descendant_bits_within(graph: OpGraph, keep: np.ndarray) -> np.ndarray:
    """Strict descendants of every node along paths inside the node mask ``keep`` (edges
    with both ends kept), as ``uint64`` bitset rows (nodes outside ``keep``: empty rows).

    >>> g = OpGraph(ids=[0, 1, 2], kinds=("x",), compute=[[0.0]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2])
    >>> [int(w) for w in descendant_bits_within(g, np.array([True, True, False]))[:, 0]]
    [2, 0, 0]
    """
    inside = keep[graph.src] & keep[graph.dst]
    src, dst = graph.src[inside], graph.dst[inside]
    order = np.argsort(src, kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(src, minlength=graph.n))]
    return _bits(graph.n, graph.topo_order[::-1], ptr, dst[order])


def _unpack(bits: np.ndarray, n: int) -> np.ndarray:
    as_bytes = bits.astype("<u8").view(np.uint8).reshape(bits.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1, count=n, bitorder="little").astype(bool)[:n]


def descendant_matrix(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """:func:`reachability` of the DAG given by its edge arrays (``n`` nodes, edges
    ``src[i] -> dst[i]``), for graphs that are not an :class:`OpGraph` (the DP's).

    >>> descendant_matrix(3, np.array([0, 1]), np.array([1, 2])).astype(int).tolist()
    [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    """
    order = np.argsort(src, kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(src, minlength=n))]
    nbr = np.asarray(dst)[order]
    indeg = np.bincount(dst, minlength=n)
    topo, stack = [], [v for v in range(n) if indeg[v] == 0]
    while stack:
        u = stack.pop()
        topo.append(u)
        for v in nbr[ptr[u]:ptr[u + 1]].tolist():
            indeg[v] -= 1
            if indeg[v] == 0:
                stack.append(v)
    return _unpack(_bits(n, np.array(topo[::-1], dtype=np.int64), ptr, nbr), n)


def narrow_cut_mask(desc: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """The *narrow cut* nodes, as a mask: comparable to every other node (``desc``: the
    strict descendant matrix) and jumped over by no pair ``(u, v)`` of ``pairs`` (an edge,
    or any other pair that must stay within a block: ``u`` above the node, ``v`` below).
    The max-load DP's block borders (``heuristics/dp_segments.py``) and the latency spine
    bound's cut nodes (``formulations/latency_spine.py``).

    >>> d = descendant_matrix(4, np.array([0, 1, 2, 0]), np.array([1, 2, 3, 2]))
    >>> narrow_cut_mask(d, np.array([[0, 1], [1, 2], [2, 3], [0, 2]])).tolist()  # 0 -> 2 jumps over 1
    [True, False, True, True]
    """
    cut = desc.sum(axis=1) + desc.sum(axis=0) == desc.shape[0] - 1
    for lo in range(0, pairs.shape[0], 4096):  # a node with a pair jumping over it is no cut
        p = pairs[lo:lo + 4096]
        cut &= ~(desc[p[:, 0]] & desc[:, p[:, 1]].T).any(axis=0)
    return cut


def reachability(graph: OpGraph) -> np.ndarray:
    """``R[u, v]``: there is a path ``u -> ... -> v`` (``u != v``), as a bool matrix.

    >>> g = OpGraph(ids=[0, 1, 2], kinds=("x",), compute=[[0.0]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2])
    >>> reachability(g).astype(int).tolist()
    [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    """
    return _unpack(_bits(graph.n, graph.topo_order[::-1], graph.out_ptr, graph.out_nbr), graph.n)
