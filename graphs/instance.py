"""A problem instance: an operator graph and (optionally) the cluster it is placed on."""

from __future__ import annotations

from dataclasses import dataclass

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Instance", "PROBLEMS"]

PROBLEMS = ("maxload", "latency", "makespan")
"""The problems a placement is solved and scored for (docs/semantics.md)."""


@dataclass(frozen=True, eq=False)
class Instance:
    """Graph + cluster + where it came from (a file path or a generator call)."""

    graph: OpGraph
    cluster: Cluster | None = None
    source: str | None = None

    def require_cluster(self) -> Cluster:
        """The cluster, or an error saying the input has none."""
        if self.cluster is None:
            raise InputError(f"{self.source or self.graph.name}: no cluster given "
                             "(add a 'cluster' section or pass --cluster)")
        return self.cluster

    @property
    def name(self) -> str:
        return self.graph.name
