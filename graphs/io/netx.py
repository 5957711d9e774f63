"""networkx interop: export for drawing and small-graph algorithms, import from a DiGraph."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from dnnplace.graphs.graph import OpGraph

__all__ = ["to_networkx", "from_networkx"]


def to_networkx(g: OpGraph) -> nx.DiGraph:
    """A DiGraph keyed by node id with attributes ``compute`` (dict of supported kinds),
    ``memory``, ``backward``, ``colocation`` and edges with ``bytes`` / ``cost``."""
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
        out.add_edge(g.ids[g.src[e]], g.ids[g.dst[e]], **attrs)
    return out


def from_networkx(dg: nx.DiGraph, *, compute: str = "compute", memory: str = "memory",
                  nbytes: str = "bytes", cost: str = "cost", name: str | None = None) -> OpGraph:
    """An :class:`OpGraph` from a DiGraph whose nodes carry a ``compute`` dict
    (``{kind: time}``) and ``memory``; attribute keys are parameters."""
    ids = list(dg.nodes)
    kinds: list[str] = []
    for v in ids:
        for k in dg.nodes[v].get(compute, {}):
            if k not in kinds:
                kinds.append(k)
    comp = np.full((len(ids), len(kinds)), np.nan)
    for i, v in enumerate(ids):
        for k, t in dg.nodes[v].get(compute, {}).items():
            comp[i, kinds.index(k)] = t
    edges = list(dg.edges)
    labels = sorted({dg.nodes[v]["colocation"] for v in ids if "colocation" in dg.nodes[v]},
                    key=lambda c: (str(type(c)), c))
    code = {c: j for j, c in enumerate(labels)}

    def column(key: str) -> list | None:
        return [dg.nodes[v].get(key) for v in ids] if any(key in dg.nodes[v] for v in ids) else None

    return OpGraph.from_ids(
        ids, edges, kinds=tuple(kinds), compute=comp,
        memory=[dg.nodes[v].get(memory, math.nan) for v in ids],
        edge_bytes=[dg.edges[e].get(nbytes, 0.0) for e in edges],
        edge_cost=[dg.edges[e].get(cost, math.nan) for e in edges],
        persistent_bytes=[dg.nodes[v].get("persistent_bytes", 0.0) for v in ids],
        output_bytes=[dg.nodes[v].get("output_bytes", 0.0) for v in ids],
        backward=[bool(dg.nodes[v].get("backward", False)) for v in ids],
        colocation=[code[dg.nodes[v]["colocation"]] if "colocation" in dg.nodes[v] else -1 for v in ids],
        colocation_labels=labels, names=column("name"), op_types=column("op_type"), layers=column("layer"),
        name=name or dg.graph.get("name") or "graph", unit=dg.graph.get("unit", "ms"))
