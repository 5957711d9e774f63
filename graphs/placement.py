"""Placements (node -> device) and schedules (placement + start times + device order)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Placement", "Schedule"]


@dataclass(frozen=True, eq=False)
class Placement:
    """Device index of every node: ``device[i]`` indexes ``cluster.devices``.

    A placement is only a decision; whether it is feasible and what it costs is the
    evaluator's business (:mod:`dnnplace.evaluation.evaluate`). ``replication`` (optional,
    max-load only): stages that also run on extra devices, Tarnawski App. C.2
    (:class:`dnnplace.graphs.replication.Replication`); ``device`` then names each
    stage's primary device.
    """

    graph: OpGraph
    cluster: Cluster
    device: np.ndarray
    replication: Any = None

    def __post_init__(self) -> None:
        dev = np.asarray(self.device, dtype=np.int64).ravel()
        if dev.shape[0] != self.graph.n:
            raise InputError(f"placement covers {dev.shape[0]} nodes, graph has {self.graph.n}")
        if dev.size and (dev.min() < 0 or dev.max() >= self.cluster.size):
            i = int(np.flatnonzero((dev < 0) | (dev >= self.cluster.size))[0])
            raise InputError(f"node {self.graph.ids[i]!r}: device index {dev[i]} out of range")
        object.__setattr__(self, "device", dev)

    @classmethod
    def from_mapping(cls, graph: OpGraph, cluster: Cluster, mapping: Mapping[Any, str]) -> Placement:
        """From ``{node id: device name}``; every node must be named, and only once."""
        dev = np.full(graph.n, -1, dtype=np.int64)
        for node, name in mapping.items():
            dev[graph.index_of(node)] = cluster.index_of(name)
        missing = np.flatnonzero(dev < 0)
        if missing.size:
            ids = [graph.ids[i] for i in missing[:5]]
            raise InputError(f"placement leaves {missing.size} node(s) unplaced, e.g. {ids}")
        return cls(graph, cluster, dev)

    def to_mapping(self) -> dict[str, str]:
        """``{str(node id): device name}`` (JSON-ready)."""
        names = self.cluster.names
        return {str(v): names[d] for v, d in zip(self.graph.ids, self.device.tolist())}

    def nodes_on(self, device: int) -> np.ndarray:
        """Node indices placed on device index ``device``."""
        return np.flatnonzero(self.device == device)

    def used_devices(self) -> np.ndarray:
        """Indices of devices that hold at least one node."""
        return np.unique(self.device)


@dataclass(frozen=True, eq=False)
class Schedule:
    """A placement plus start times and the order each device runs its nodes in.

    ``start[i]`` is the start of node ``i`` and ``finish[i]`` its completion (both in
    ``graph.unit``). ``sequence`` (optional, a simulation's) is the order the nodes were
    dispatched in, ``0..n-1``; it orders equal starts as the simulation did, so a strict
    replay of :meth:`priorities` reproduces the schedule even where zero-duration nodes
    (parameters, views) start together and release transfers that share a link.
    """

    placement: Placement
    start: np.ndarray
    finish: np.ndarray
    sequence: np.ndarray | None = None

    def _order(self) -> np.ndarray:
        """Node indices by start; ties by dispatch sequence where known, else zero-duration
        nodes first, then topological position."""
        g = self.placement.graph
        if self.sequence is not None:
            return np.lexsort((self.sequence, self.start))
        return np.lexsort((g.topo_position, self.finish, self.start))

    @property
    def makespan(self) -> float:
        """Completion time of the last node."""
        return float(self.finish.max()) if self.finish.size else 0.0

    def device_order(self) -> list[np.ndarray]:
        """Per device, its node indices sorted by start time (ties: the dispatch sequence
        where known, else zero-duration nodes, which finish at their start, first; then
        topological position)."""
        key = self._order()
        dev = self.placement.device[key]
        return [key[dev == d] for d in range(self.placement.cluster.size)]

    def priorities(self) -> np.ndarray:
        """Rank of every node by start time: a total order the simulator can replay.

        Ties are broken by the dispatch sequence where the schedule carries one (a
        simulation's: its replay under ``policy="order"`` is then the same schedule), else
        by finish time (a zero-duration node that ran at ``t`` comes before a node that
        starts at ``t`` and lasts longer), then by topological position.
        """
        rank = np.empty(self.placement.graph.n, dtype=np.int64)
        rank[self._order()] = np.arange(rank.size)
        return rank
