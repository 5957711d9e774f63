"""Per-message costs as the makespan heuristics estimate them (docs/semantics.md 2.1,
per-message costs): the one home of that estimate for the list schedulers
(:mod:`dnnplace.heuristics.schedule_state`), FastT's placer
(:mod:`dnnplace.heuristics.fastt_placer`) and Celeritas' Adjusting Placement
(:mod:`dnnplace.heuristics.celeritas`), and of the placement-free share the priorities use.

A *message* is a transfer task of the simulator: one per (source node, output,
destination device) under ``transfer_mode="per_destination"``, one per cross-device edge
under ``"per_edge"`` (:func:`message_key`). While a scheduler places node ``v`` on device
``d`` after its predecessors, an input from ``u`` on device ``a != d``

* arrives with the message already committed for its key (another consumer of the same
  tensor on ``d`` took it in: no new message, no new cost), else
* is a new message: posted at ``FT(u) + send_overhead[a]`` (the sender spends its
  ``send_overhead`` right after ``u``, so the overhead is *added to the arrival*; the
  sender's timeline is not pushed), then the link time (queued as the scheduler
  queues transfers), arriving at ``X = FT(u) + send_overhead[a] + link``;

and ``v`` occupies ``d`` for its compute time plus ``recv_overhead[d]`` per new message
(it takes them in):

.. math::

    \\operatorname{ready}(v, d) = \\max_{u \\in pred(v)} X(u, v, d), \\qquad
    \\operatorname{dur}(v, d) = w(v, d) + \\operatorname{recv\\_overhead}[d] \\cdot |\\operatorname{new}(v, d)|.

So each (tensor, destination device) pays ``send_overhead`` once, on its arrival, and
``recv_overhead`` once, on the first node placed on ``d`` that reads it (the simulator
charges it to the first such node in topological position). With no message costs
(:attr:`Cluster.has_message_costs` false) the schedulers keep their own code paths
unchanged, so their answers are exactly those without the fields.

For priorities computed before placement, :func:`mean_message_time` is the mean of
:meth:`Cluster.message_time` over ordered pairs of distinct devices, which
:func:`~dnnplace.heuristics.nominal.nominal_costs` and the coarsening and PARDNN edge
weights add to their nominal transfer times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from dnnplace.evaluation.sim_costs import check_transfer_mode
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph

__all__ = ["Messages", "mean_message_time"]


def mean_message_time(cluster: Cluster, devices: np.ndarray | None = None) -> float:
    """Mean of ``send_overhead[a] + recv_overhead[b]`` over ordered pairs ``a != b`` of
    ``devices`` (all by default); 0 with fewer than two devices.

    >>> from dnnplace.graphs import Cluster, Device
    >>> mean_message_time(Cluster.from_links([Device("a", "cpu", send_overhead=1.0), Device("b", "cpu")]))
    0.5
    """
    idx = np.arange(cluster.size) if devices is None else np.asarray(devices, dtype=np.int64)
    if idx.size < 2 or not cluster.has_message_costs:
        return 0.0
    a, b = np.meshgrid(idx, idx, indexing="ij")
    off = a != b
    return float(cluster.message_time(a[off], b[off]).mean())


class Messages:
    """The messages a scheduler has committed and the estimate of a node's inputs on a
    device with message costs (module docstring); ``on`` is false when the cluster has
    none, and then nothing here is used."""

    def __init__(self, graph: OpGraph, cluster: Cluster, transfer_mode: str | None = None):
        self.on = cluster.has_message_costs
        self.send, self.recv = cluster.send_overhead.tolist(), cluster.recv_overhead.tolist()
        self.per_edge = check_transfer_mode(transfer_mode) == "per_edge"
        self.src, self.out = graph.src.tolist(), graph.edge_output.tolist()
        self.arrived: dict = {}  # message key -> its arrival time on its destination device

    def key(self, e: int, d: int):
        """The message edge ``e`` is carried by to device ``d``: the edge itself per edge,
        else (source node, output, ``d``)."""
        return e if self.per_edge else (self.src[e], self.out[e], d)

    def inputs(self, ins: Iterable[tuple[int, int]], d: int, dev: list, fin: list,
               link: Callable[[int, int, float], float]) -> tuple[float, list]:
        """Data-ready time of a node on ``d`` from its in-edges ``ins`` (``(u, e)`` pairs,
        in the order transfers should queue) and the new messages it needs, ``(key,
        arrival)`` each; ``link(a, e, post)`` is the arrival of a new message of edge
        ``e`` from device ``a`` posted at ``post`` (and books it on the caller's tentative
        link state)."""
        ready = 0.0
        new: list = []
        mine: dict = {}
        arrived, send = self.arrived, self.send
        for u, e in ins:
            a = dev[u]
            t = fin[u]
            if a != d:
                k = self.key(e, d)
                x = arrived.get(k)
                if x is None:
                    x = mine.get(k)
                if x is None:
                    x = link(a, e, t + send[a])
                    mine[k] = x
                    new.append((k, x))
                t = x
            if t > ready:
                ready = t
        return ready, new

    def extra(self, d: int, new: list) -> float:
        """Device time the node placed on ``d`` spends taking its new messages in."""
        return self.recv[d] * len(new) if new else 0.0

    def commit(self, new: list) -> None:
        """Record the new messages of a placed node."""
        for k, x in new:
            self.arrived[k] = x
