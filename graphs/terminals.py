"""Virtual entry and exit nodes: one source and one sink for list schedulers.

FastT's DPOS (Yi et al. Sec. 5.1) follows the critical path from *the* entry operation,
and PARDNN's slicing (Qararyah et al. Alg. 1) from *the* sink, so both need a graph with
a unique source and a unique sink (``docs/heuristics.md`` 0). :func:`with_terminals`
adds them only where needed:

- a zero-cost virtual source ``__entry__`` with an edge to every source of ``G``, unless
  ``G`` already has exactly one source (then that node is the entry);
- a zero-cost virtual sink ``__exit__`` with an edge from every sink, likewise.

The terminals run on every device kind in zero time, use no memory and their edges carry
zero bytes at an explicit transfer cost of 0, so they never change a schedule. They are
appended *after* the original nodes, so ``order[:n]`` / ``device[:n]`` of an answer on the
extended graph is the answer on ``G`` (:meth:`Terminals.strip`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.graph import OpGraph

__all__ = ["Terminals", "with_terminals"]

ENTRY, EXIT = "__entry__", "__exit__"


@dataclass(frozen=True, eq=False)
class Terminals:
    """``graph`` = the original nodes ``0..n-1`` plus the virtual terminals; ``entry`` and
    ``exit`` are node indices in ``graph`` (an original node when it was already unique);
    ``n`` is the number of original nodes."""

    graph: OpGraph
    entry: int
    exit: int
    n: int

    @property
    def virtual(self) -> np.ndarray:
        """Indices of the virtual nodes (``>= n``)."""
        return np.arange(self.n, self.graph.n, dtype=np.int64)

    def strip(self, per_node: np.ndarray) -> np.ndarray:
        """A per-node array of the extended graph restricted to the original nodes."""
        return np.asarray(per_node)[: self.n]


def with_terminals(graph: OpGraph) -> Terminals:
    """``graph`` with a unique entry and exit (see the module docstring).

    Examples
    --------
    Two independent nodes get both terminals; a chain keeps its own ends:

    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [2.0]], memory=[0, 0], src=[], dst=[])
    >>> t = with_terminals(g)
    >>> t.graph.ids, t.entry, t.exit, t.graph.m
    (('a', 'b', '__entry__', '__exit__'), 2, 3, 4)
    >>> chain = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [2.0]], memory=[0, 0], src=[0], dst=[1])
    >>> t = with_terminals(chain)
    >>> t.graph is chain, t.entry, t.exit
    (True, 0, 1)
    """
    n = graph.n
    indeg = graph.in_ptr[1:] - graph.in_ptr[:-1]
    outdeg = graph.out_ptr[1:] - graph.out_ptr[:-1]
    sources, sinks = np.flatnonzero(indeg == 0), np.flatnonzero(outdeg == 0)
    add_entry, add_exit = sources.size != 1, sinks.size != 1
    if not (add_entry or add_exit):
        return Terminals(graph, int(sources[0]), int(sinks[0]), n)
    new_ids = ([ENTRY] if add_entry else []) + ([EXIT] if add_exit else [])
    entry = n if add_entry else int(sources[0])
    exit_ = n + int(add_entry) if add_exit else int(sinks[0])
    src_new = [np.full(sources.size, entry)] if add_entry else []
    dst_new = [sources] if add_entry else []
    if add_exit:
        src_new.append(sinks)
        dst_new.append(np.full(sinks.size, exit_))
    src_add, dst_add = np.concatenate(src_new), np.concatenate(dst_new)
    k = len(new_ids)
    extra = src_add.size

    def nodes(arr, fill):
        return np.concatenate([arr, np.full((k,) + arr.shape[1:], fill, dtype=arr.dtype)])

    def opt(values, fill):
        return None if values is None else tuple(values) + (fill,) * k

    g = graph.with_(
        ids=tuple(graph.ids) + tuple(new_ids), compute=nodes(graph.compute, 0.0), memory=nodes(graph.memory, 0.0),
        src=np.concatenate([graph.src, src_add]), dst=np.concatenate([graph.dst, dst_add]),
        edge_bytes=np.concatenate([graph.edge_bytes, np.zeros(extra)]),
        edge_cost=np.concatenate([graph.edge_cost, np.zeros(extra)]),
        edge_batch_scaled=np.concatenate([graph.edge_batch_scaled, np.zeros(extra, dtype=bool)]),
        edge_output=np.concatenate([graph.edge_output, np.zeros(extra, dtype=np.int64)]),
        persistent_bytes=nodes(graph.persistent_bytes, 0.0), output_bytes=nodes(graph.output_bytes, 0.0),
        colocation=nodes(graph.colocation, -1), backward=nodes(graph.backward, False),
        names=opt(graph.names, None), op_types=opt(graph.op_types, "Terminal"), layers=opt(graph.layers, None),
        roles=opt(graph.roles, "compute"),
        meta={**graph.meta, "virtual_terminals": k})
    return Terminals(g, entry, exit_, n)
