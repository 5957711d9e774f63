"""Topological orders other than the cached level-by-level one.

Which topological order a list heuristic follows changes its result (Tarnawski et al.'s
greedy baseline and DPL both fix "a topological order"); the choice is a parameter of
those methods, never an accident of the implementation.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.graph import OpGraph

__all__ = ["TOPO_ORDERS", "dfs_topological_order", "narrow_topological_order", "stack_topological_order",
           "topological_order"]


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


def stack_topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kahn's algorithm with a stack: a node is emitted once all its predecessors are,
    continuing from the most recently enabled node (depth-first in spirit; the order
    DPL linearises with, Tarnawski Sec. 5.1.2). Takes raw edge arrays so that graphs
    built inside an algorithm (the DP's contracted graph) need no ``OpGraph``.

    >>> stack_topological_order(4, np.array([0, 0, 1]), np.array([1, 2, 3])).tolist()
    [0, 1, 3, 2]
    """
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist()):
        succs[a].append(b)
    stack = [v for v in range(n - 1, -1, -1) if indeg[v] == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for w in reversed(succs[v]):
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return np.array(order, dtype=np.int64)


def narrow_topological_order(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """A topological order whose prefixes keep a light *boundary*: the nodes emitted so far
    that still have a successor to come, each counted with its ``weight`` (in the DP graph,
    what a node pays to send its output to another device). Kahn's algorithm that emits, of
    the nodes whose predecessors are all out, the one that adds least to the boundary: its
    own weight if it has successors, less the weight of each predecessor whose last
    successor it is; ties in the order of :func:`stack_topological_order`. A split at a
    prefix of this order cuts the graph where its crossing tensors are cheap, which DPL's
    depth-first order ignores: on a network of parallel branches it runs one branch to its
    end while the others' inputs stay on the boundary. Lazy heap, ``O((n + m) log n)``.

    >>> # a -> b, a -> c, b -> d, c -> d: after a, emitting b or c leaves a on the boundary;
    >>> # c is the cheaper to hold (weight 1 against b's 5), so c goes first
    >>> narrow_topological_order(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]),
    ...                          np.array([1.0, 5.0, 1.0, 0.0])).tolist()
    [0, 2, 1, 3]
    """
    import heapq

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    pairs = np.unique(np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64))
    src, dst = (pairs // n).tolist(), (pairs % n).tolist()
    succs: list[list[int]] = [[] for _ in range(n)]
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src, dst):
        succs[a].append(b)
        preds[b].append(a)
    w = np.asarray(weight, dtype=np.float64).tolist()
    pos = np.empty(n, dtype=np.int64)
    pos[stack_topological_order(n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))] = np.arange(n)
    pos = pos.tolist()
    left = [len(x) for x in succs]         # successors not yet emitted
    waiting = [len(x) for x in preds]      # predecessors not yet emitted
    closes = [0.0] * n                     # boundary weight a node's emission removes
    for u in range(n):
        if left[u] == 1:
            closes[succs[u][0]] += w[u]
    done = [False] * n

    def key(v: int) -> tuple:
        return ((w[v] if succs[v] else 0.0) - closes[v], pos[v], v)

    heap = [key(v) for v in range(n) if waiting[v] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        k = heapq.heappop(heap)
        v = k[2]
        if done[v] or k != key(v):   # emitted, or an entry from before its key fell
            continue
        done[v] = True
        order.append(v)
        for u in preds[v]:
            left[u] -= 1
            if left[u] == 1:         # u's last successor to come now closes it
                x = next(y for y in succs[u] if not done[y])
                closes[x] += w[u]
                if waiting[x] == 0:
                    heapq.heappush(heap, key(x))
        for x in succs[v]:
            waiting[x] -= 1
            if waiting[x] == 0:
                heapq.heappush(heap, key(x))
    return np.array(order, dtype=np.int64)


TOPO_ORDERS = {"dfs": dfs_topological_order, "level": lambda g: g.topo_order,
               "stack": lambda g: stack_topological_order(g.n, g.src, g.dst)}


def topological_order(g: OpGraph, kind: str = "dfs") -> np.ndarray:
    """A topological order by name: ``dfs`` (reverse DFS post-order) or ``level``."""
    if kind not in TOPO_ORDERS:
        from dnnplace.graphs.errors import InputError
        raise InputError(f"unknown topological order {kind!r}; use one of {sorted(TOPO_ORDERS)}")
    return TOPO_ORDERS[kind](g)
