"""Connected and strongly connected components of a graph given as edge arrays, in numpy and
plain Python (no scipy: ``solve --method dp`` needs them on small graphs, where importing
``scipy.sparse.csgraph`` costs more CPU than the DP itself; results/startup.md).

Both number the components as ``scipy.sparse.csgraph.connected_components`` does, so a
caller's results do not change with the implementation: weak components by their smallest
node; strong components in the order a depth-first search from nodes ``0, 1, ...`` (each
node's successors in decreasing order) completes them (Tarjan's algorithm; a component is
complete when the search leaves its first-reached node). ``tests/test_components.py``
checks both against scipy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["weak_components", "strong_components"]


def weak_components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Label of each of the nodes ``0..n-1`` joined by the edges ``a[i] - b[i]`` (either
    direction), numbered ``0, 1, ...`` in the order of their smallest nodes."""
    parent = np.arange(n)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    while True:  # hook every edge's larger root onto its smaller one, then compress, until stable
        ra, rb = parent[a], parent[b]
        lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
        if not (lo != hi).any():
            break
        np.minimum.at(parent, hi, lo)
        while True:
            nxt = parent[parent]
            if (nxt == parent).all():
                break
            parent = nxt
    # parent[v] is now the smallest node of v's component; number components by it
    return np.unique(parent, return_inverse=True)[1].reshape(-1).astype(np.int64)


def strong_components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Label of each of the nodes ``0..n-1`` of the directed graph ``src[i] -> dst[i]``,
    numbered in the order Tarjan's search completes the components (see the module)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    order = np.lexsort((-dst, src))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    succ, ptr = dst[order].tolist(), ptr.tolist()
    index, low, label = [-1] * n, [0] * n, [-1] * n
    on_stack, stack, count, comps = [False] * n, [], 0, 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = count
        count += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, ptr[root])]
        while work:
            v, p = work[-1]
            if p < ptr[v + 1]:
                work[-1] = (v, p + 1)
                w = succ[p]
                if index[w] < 0:
                    index[w] = low[w] = count
                    count += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, ptr[w]))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    label[w] = comps
                    if w == v:
                        break
                comps += 1
    return np.array(label, dtype=np.int64)
