"""The one hash of a graph's content (:func:`graph_fingerprint`): what a result records of the
graph it was solved on, and what a transformed graph rebuilt from its steps must match."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["graph_fingerprint"]


def graph_fingerprint(graph) -> dict[str, Any]:
    """The one hash of a graph's content: its name, node and edge counts and a 16-digit
    digest of its node ids, edges (source, destination), compute times, memory and edge
    bytes. A result records it of the graph it was solved on (``graph_fingerprint``,
    docs/formats.md "Result JSON"; the cluster is recorded apart, in ``cluster``), and a
    transformed graph's record of what its rebuild must match
    (:func:`dnnplace.graphs.transforms.replay.fingerprint`).

    >>> from dnnplace.graphs.graph import OpGraph
    >>> g = OpGraph(ids=[0, 1], kinds=("gpu",), compute=[[1.0], [2.0]], memory=[0, 0], src=[0], dst=[1])
    >>> graph_fingerprint(g)["nodes"], len(graph_fingerprint(g)["digest"])
    (2, 16)
    """
    import hashlib

    h = hashlib.sha1()
    h.update("\x00".join(map(str, graph.ids)).encode())
    for arr in (graph.src, graph.dst):
        h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    for arr in (graph.compute, graph.memory, graph.edge_bytes):
        h.update(np.round(np.nan_to_num(np.asarray(arr, dtype=np.float64), nan=-1.0), 9).tobytes())
    return {"name": graph.name, "nodes": int(graph.n), "edges": int(graph.m), "digest": h.hexdigest()[:16]}
