"""Queue-based topological orders: Baechi's M-TOPO, Celeritas' DFS-TOPO and CPD-TOPO.

All three are Kahn's algorithm with a queue of ready nodes (in-degree 0); they differ in
where newly ready nodes go and in which order (Celeritas Sec. 4.2.2, Sec. 5.1.3,
Alg. 1 lines 6-21):

``m-topo``
    a FIFO queue (breadth first): newly ready children are appended at the tail.
``dfs-topo``
    children that become ready when ``v`` is output go to the *head* of the queue, so the
    order follows one branch down before it returns to the others (depth first).
``cpd-topo``
    DFS-TOPO with the critical-path key ``cpath(v) = tlevel(v) + blevel(v)``
    (Eqs. 2-3, with placement-free nominal costs): the sources start sorted by ``cpath``
    decreasing, and the children of ``v`` are sorted by ``cpath`` increasing and pushed
    to the head one after the other (l.15-20), so the ready child with the *largest*
    ``cpath`` -- the next node on the critical path -- is output next.

One function :func:`keyed_topo_order` does all three: ``key`` (``None`` for no key) and
``lifo`` (head or tail insertion). Ties between equal keys go to the lower topological
position (:attr:`~dnnplace.graphs.graph.OpGraph.topo_position`), among sources and among
the children of one node alike; *paper says* DFS-TOPO takes children in adjacency
order, *we do* topological position, which is the same for graphs whose edges are listed
in order and makes the order independent of edge listing. Cost: ``O(V + E)`` plus
sorting the children of each node (``O(E log deg)``), in plain Python over CSR lists
(a 200k-node graph in about a second).

References
----------
.. [C] H. Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs", Sec. 4.2.2, 5.1.3.
.. [B] B. Jeon et al., "Baechi: fast device placement of machine learning graphs", SoCC 2020 (M-TOPO).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, tlevel

__all__ = ["ORDERS", "keyed_topo_order", "topo_order_by", "cpath"]

ORDERS = ("m-topo", "dfs-topo", "cpd-topo")


def cpath(graph: OpGraph, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``tlevel + blevel`` of every node (Celeritas Eqs. 2-3): the longest path through it."""
    return tlevel(graph, kind=w, comm=c) + blevel(graph, kind=w, comm=c)


def keyed_topo_order(graph: OpGraph, key: np.ndarray | None = None, *, lifo: bool = True) -> np.ndarray:
    """A topological order of ``graph`` driven by a ready queue (module docstring).

    Parameters
    ----------
    graph : OpGraph
    key : array (n,), optional
        Larger keys first among the sources and among the children that become ready
        together; ``None``: topological position only.
    lifo : bool
        Newly ready children go to the head of the queue (DFS-TOPO, CPD-TOPO) or, with
        ``False``, to its tail (M-TOPO).

    Returns
    -------
    ndarray of int64
        The nodes in order.

    Examples
    --------
    Two chains ``a -> b`` and ``c -> d``: breadth first interleaves them, depth first
    finishes one before the other.

    >>> g = OpGraph.from_ids(list("abcd"), [("a", "b"), ("c", "d")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 4, memory=[0] * 4)
    >>> [g.ids[v] for v in keyed_topo_order(g, lifo=False)]
    ['a', 'c', 'b', 'd']
    >>> [g.ids[v] for v in keyed_topo_order(g)]
    ['a', 'b', 'c', 'd']
    """
    n = graph.n
    pos = graph.topo_position
    k = np.zeros(n) if key is None else np.asarray(key, dtype=np.float64)
    if k.shape != (n,):
        raise InputError(f"order key: expected {n} values, got {k.shape}")
    # one global rank by (key desc, topological position): sorting children by it is
    # sorting them by the key with the required tie-break
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((pos, -k))] = np.arange(n)
    indeg = np.diff(graph.in_ptr).tolist()
    optr, onbr = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    rk = rank.tolist()
    sources = [v for v in range(n) if indeg[v] == 0]
    sources.sort(key=rk.__getitem__)
    queue = deque(sources)
    out = []
    pop, push_all = queue.popleft, (queue.extendleft if lifo else queue.extend)
    while queue:
        v = pop()
        out.append(v)
        ready = []
        for j in range(optr[v], optr[v + 1]):
            c = onbr[j]
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
        if ready:
            if len(ready) > 1:
                # head insertion reverses: push the worst first so the best ends at the head
                ready.sort(key=rk.__getitem__, reverse=lifo)
            push_all(ready)
    return np.asarray(out, dtype=np.int64)


def topo_order_by(graph: OpGraph, name: str, w: np.ndarray | None = None, c: np.ndarray | None = None) -> np.ndarray:
    """The order ``name`` (one of :data:`ORDERS`); ``cpd-topo`` needs the nominal node
    and edge costs ``w``, ``c`` (:func:`~dnnplace.heuristics.nominal.nominal_costs`)."""
    if name not in ORDERS:
        raise InputError(f"unknown order {name!r}; use one of {', '.join(ORDERS)}")
    if name == "m-topo":
        return keyed_topo_order(graph, lifo=False)
    if name == "dfs-topo":
        return keyed_topo_order(graph)
    if w is None or c is None:
        raise InputError("cpd-topo needs node and edge costs")
    return keyed_topo_order(graph, cpath(graph, w, c))
