"""networkx interop: export for drawing and small-graph algorithms, import from a DiGraph."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from dnnplace.graphs.columns import user_column
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["to_networkx", "from_networkx"]


def to_networkx(g: OpGraph) -> nx.DiGraph:
    """A DiGraph keyed by node id with attributes ``compute`` (dict of supported kinds),
    ``memory``, ``backward``, ``colocation`` and edges with ``bytes`` / ``cost`` (and
    ``output`` where it is not 0)."""
    out = nx.DiGraph(name=g.name, unit=g.unit)
    for i, v in enumerate(g.ids):
        comp = {k: float(g.compute[i, j]) for j, k in enumerate(g.kinds) if not math.isnan(g.compute[i, j])}
        attrs = {"compute": comp, "memory": float(g.memory[i]), "backward": bool(g.backward[i]),
                 "persistent_bytes": float(g.persistent_bytes[i]), "output_bytes": float(g.output_bytes[i])}
        if g.colocation[i] >= 0:
            attrs["colocation"] = g.colocation_labels[g.colocation[i]]
        for key, vals in (("name", g.names), ("op_type", g.op_types), ("layer", g.layers)):
            if vals is not None:
                attrs[key] = vals[i]
        out.add_node(v, **attrs)
    for e in range(g.m):
        attrs = {"bytes": float(g.edge_bytes[e])}
        if not math.isnan(g.edge_cost[e]):
            attrs["cost"] = float(g.edge_cost[e])
        if g.edge_output[e]:
            attrs["output"] = int(g.edge_output[e])
        out.add_edge(g.ids[g.src[e]], g.ids[g.dst[e]], **attrs)
    return out


def from_networkx(dg: nx.DiGraph, *, compute: str = "compute", memory: str = "memory",
                  nbytes: str = "bytes", cost: str = "cost", name: str | None = None) -> OpGraph:
    """An :class:`OpGraph` from a DiGraph whose nodes carry a ``compute`` dict
    (``{kind: time}``) and ``memory``; attribute keys are parameters.

    A kind left out of a node's ``compute`` dict, or given as ``None``, means the node
    cannot run there; a ``NaN`` time, memory, byte count or edge cost is an
    :class:`~dnnplace.graphs.errors.InputError` naming the node or edge and the field
    (see :func:`dnnplace.graphs.columns.user_column`), as is a graph without nodes.
    """
    ids = list(dg.nodes)
    gname = name or dg.graph.get("name") or "graph"
    if not ids:
        raise InputError(f"networkx graph: graph {gname!r} has no nodes")
    kinds: list[str] = []
    for v in ids:
        for k in dg.nodes[v].get(compute, None) or {}:
            if k not in kinds:
                kinds.append(k)

    def node(i: int) -> str:
        return f"node {ids[i]!r}"

    cols = [user_column([(dg.nodes[v].get(compute, None) or {}).get(k) for v in ids], field=f"{compute}.{k}",
                        owner=node, nullable=True, null_means=f"unsupported (cannot run on kind {k!r})")
            for k in kinds]
    comp = np.column_stack(cols) if cols else np.zeros((len(ids), 0))
    edges = list(dg.edges)

    def edge(j: int) -> str:
        return f"edge {edges[j][0]!r}->{edges[j][1]!r}"

    labels = sorted({dg.nodes[v]["colocation"] for v in ids if "colocation" in dg.nodes[v]},
                    key=lambda c: (str(type(c)), c))
    code = {c: j for j, c in enumerate(labels)}

    def column(key: str) -> list | None:
        return [dg.nodes[v].get(key) for v in ids] if any(key in dg.nodes[v] for v in ids) else None

    def node_numbers(key: str, default: float | None) -> np.ndarray:
        return user_column([dg.nodes[v].get(key, default) for v in ids], field=key, owner=node)

    return OpGraph.from_ids(
        ids, edges, kinds=tuple(kinds), compute=comp,
        memory=node_numbers(memory, None),
        edge_bytes=user_column([dg.edges[e].get(nbytes, 0.0) for e in edges], field=nbytes, owner=edge),
        edge_cost=user_column([dg.edges[e].get(cost) for e in edges], field=cost, owner=edge, nullable=True,
                              null_means="without an explicit cost (the link model applies)"),
        edge_output=[dg.edges[e].get("output", 0) for e in edges],
        persistent_bytes=node_numbers("persistent_bytes", 0.0),
        output_bytes=node_numbers("output_bytes", 0.0),
        backward=[bool(dg.nodes[v].get("backward", False)) for v in ids],
        colocation=[code[dg.nodes[v]["colocation"]] if "colocation" in dg.nodes[v] else -1 for v in ids],
        colocation_labels=labels, names=column("name"), op_types=column("op_type"), layers=column("layer"),
        name=gname, unit=dg.graph.get("unit", "ms"))
