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

__all__ = ["closure_bits", "reachability"]


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


def reachability(graph: OpGraph) -> np.ndarray:
    """``R[u, v]``: there is a path ``u -> ... -> v`` (``u != v``), as a bool matrix.

    >>> g = OpGraph(ids=[0, 1, 2], kinds=("x",), compute=[[0.0]] * 3, memory=[0] * 3, src=[0, 1], dst=[1, 2])
    >>> reachability(g).astype(int).tolist()
    [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    """
    desc = _bits(graph.n, graph.topo_order[::-1], graph.out_ptr, graph.out_nbr)
    as_bytes = desc.astype("<u8").view(np.uint8).reshape(desc.shape[0], -1)
    return np.unpackbits(as_bytes, axis=1, count=graph.n, bitorder="little").astype(bool)[:graph.n]
