"""Topological orders other than the cached level-by-level one.

Which topological order a list heuristic follows changes its result (Tarnawski et al.'s
greedy baseline and DPL both fix "a topological order"); the choice is a parameter of
those methods, never an accident of the implementation.
"""

from __future__ import annotations

import numpy as np

from graphs.graph import OpGraph

__all__ = ["TOPO_ORDERS", "dfs_topological_order", "topological_order"]


def dfs_topological_order(g: OpGraph) -> np.ndarray:
    """Reverse DFS post-order: sources in index order, successors in edge order.

    This is the order DPL linearises a DAG with (Tarnawski Sec. 5.1.2): consecutive
    nodes tend to be connected, so a contiguous run follows a branch to its end.

    >>> g = OpGraph(ids="abcd", kinds=("x",), compute=[[1]] * 4, memory=[0] * 4,
    ...             src=[0, 0, 1], dst=[1, 2, 3])
    >>> [g.ids[i] for i in dfs_topological_order(g)]
    ['a', 'c', 'b', 'd']
    """
    n = g.n
    ptr, nbr = g.out_ptr.tolist(), g.out_nbr.tolist()
    indeg = np.bincount(g.dst, minlength=n)
    seen = [False] * n
    post: list[int] = []
    for s in np.flatnonzero(indeg == 0).tolist():
        seen[s] = True
        stack = [(s, ptr[s])]
        while stack:
            v, k = stack[-1]
            if k < ptr[v + 1]:
                stack[-1] = (v, k + 1)
                w = nbr[k]
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, ptr[w]))
            else:
                post.append(v)
                stack.pop()
    return np.array(post[::-1], dtype=np.int64)


TOPO_ORDERS = {"dfs": dfs_topological_order, "level": lambda g: g.topo_order}


def topological_order(g: OpGraph, kind: str = "dfs") -> np.ndarray:
    """A topological order by name: ``dfs`` (reverse DFS post-order) or ``level``."""
    if kind not in TOPO_ORDERS:
        from graphs.errors import InputError
        raise InputError(f"unknown topological order {kind!r}; use one of {sorted(TOPO_ORDERS)}")
    return TOPO_ORDERS[kind](g)
