"""The outcome of a simulation: :class:`SimResult`.

Produced by :func:`dnnplace.evaluation.simulate.simulate` (and importable from there); it
holds the schedule, every transfer task, per-device and per-link totals and memory,
and turns itself into a JSON-ready summary or Gantt trace (:meth:`SimResult.to_dict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.evaluation.sim_costs import tensor_keys
from dnnplace.graphs.placement import Placement, Schedule

__all__ = ["SimResult", "fmt_bytes"]


def fmt_bytes(x: float) -> str:
    """A byte count for messages: ``1.80 KB``, ``512 B`` (powers of 1000, as the CLI).

    >>> fmt_bytes(1800.0), fmt_bytes(512), fmt_bytes(2.5e9)
    ('1.80 KB', '512 B', '2.50 GB')
    """
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.2f} {unit}"
    return f"{x:.0f} B"


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outcome of :func:`~dnnplace.evaluation.simulate.simulate`; all times in ``schedule.placement.graph.unit``.

    Attributes
    ----------
    makespan : float
        Completion time of the last node (0 for an empty graph).
    schedule : Schedule
        Start and finish of every node.
    busy : ndarray (D,)
        Total compute time per device.
    link_bytes, link_busy : ndarray (D, D)
        Bytes carried and total transfer time per directed link ``[a, b]``.
    link_count : ndarray (D, D) of int
        Number of transfers per directed link.
    xfer_edge : ndarray (X,) of int
        Edge id of each transfer (the representative edge when deduplicated: with
        ``transfer_mode="per_destination"`` one transfer carries every edge of its
        (source node, output, destination device)).
    xfer_src_dev, xfer_dst_dev : ndarray (X,) of int
        The directed link of each transfer.
    xfer_start, xfer_finish : ndarray (X,)
        When each transfer occupies its link.
    static_memory : ndarray (D,)
        Sum of ``graph.memory`` of the nodes on each device (Pesto's constraint (8)).
    peak_memory : ndarray (D,)
        Dynamic peak per device (PARDNN Eq. 2), see :func:`~dnnplace.evaluation.simulate.simulate`;
        only the ``persistent_bytes`` (a lower bound) when ``peak_memory_source`` is ``None``.
    policy : str
    congestion : bool
    transfer_mode : str
        ``"per_destination"`` (a tensor once to each consuming device, the default) or
        ``"per_edge"`` (one transfer per cross-device edge); see
        :data:`~dnnplace.evaluation.sim_costs.TRANSFER_MODES`. :attr:`dedup_transfers` is
        its older boolean spelling.
    peak_memory_source : str or None
        Where the tensor sizes of the dynamic peak came from
        (:func:`~dnnplace.evaluation.sim_memory.tensor_sizes`): ``"output_bytes"``,
        ``"edge_bytes"`` (estimated from the edges' byte counts) or ``None`` (the graph
        carries none: the peak is unknown and reported as ``None``).
    link_order : str
        How links served their transfers: ``"fcfs"`` (congestion, first come first
        served), ``"given"`` (congestion, in a given link order) or ``"overlap"`` (no
        congestion).

    Memory over capacity is flagged, never silently accepted: :attr:`memory_overflow`
    lists every device whose static footprint or (known) dynamic peak exceeds its
    capacity, :meth:`memory_violations` says so in words, and :meth:`to_dict` carries
    both (``devices[name]["memory_capacity"/"static_memory_over"/"peak_memory_over"]``
    and ``memory_violations``).
    """

    makespan: float
    schedule: Schedule
    busy: np.ndarray
    link_bytes: np.ndarray
    link_busy: np.ndarray
    link_count: np.ndarray
    xfer_edge: np.ndarray
    xfer_src_dev: np.ndarray
    xfer_dst_dev: np.ndarray
    xfer_start: np.ndarray
    xfer_finish: np.ndarray
    static_memory: np.ndarray
    peak_memory: np.ndarray
    policy: str
    congestion: bool
    transfer_mode: str = "per_destination"
    peak_memory_source: str | None = "output_bytes"
    link_order: str = "fcfs"

    @property
    def placement(self) -> Placement:
        """The simulated placement."""
        return self.schedule.placement

    @property
    def start(self) -> np.ndarray:
        """Start time per node (shortcut for ``schedule.start``)."""
        return self.schedule.start

    @property
    def finish(self) -> np.ndarray:
        """Finish time per node (shortcut for ``schedule.finish``)."""
        return self.schedule.finish

    @property
    def dedup_transfers(self) -> bool:
        """Whether transfers were deduplicated (``transfer_mode == "per_destination"``)."""
        return self.transfer_mode == "per_destination"

    @property
    def n_transfers(self) -> int:
        """Number of transfer tasks."""
        return int(self.xfer_edge.shape[0])

    def link_priorities(self) -> np.ndarray:
        """Rank of every edge's transfer by its start on the link: a link order the
        simulator can replay (``simulate(..., policy="order", link_priorities=...)``).

        Ties are broken by finish time, then the source's topological position, then
        edge id; edges without a transfer (both ends on one device) get ``NaN``; with
        deduplicated transfers every edge takes the rank of the transfer carrying it.
        Replaying a simulation's own ``schedule.priorities()`` and link priorities
        reproduces it.
        """
        g, pl = self.placement.graph, self.placement
        dev = pl.device
        xe = self.xfer_edge
        rank = np.empty(xe.shape[0], dtype=np.float64)
        rank[np.lexsort((xe, g.topo_position[g.src[xe]], self.xfer_finish, self.xfer_start))] = np.arange(xe.shape[0])
        out = np.full(g.m, np.nan)
        if not self.dedup_transfers:
            out[xe] = rank
            return out
        ce = np.flatnonzero(dev[g.src] != dev[g.dst])
        xkey = tensor_keys(pl, xe)  # unique per transfer when deduplicated
        ko = np.argsort(xkey)
        pos = ko[np.searchsorted(xkey[ko], tensor_keys(pl, ce))]
        out[ce] = rank[pos]
        return out

    @property
    def peak_memory_known(self) -> bool:
        """Whether :attr:`peak_memory` counts tensors (False: the graph has no tensor sizes)."""
        return self.peak_memory_source is not None

    @property
    def memory_capacity(self) -> np.ndarray:
        """Memory capacity per device in bytes (``inf`` = unbounded)."""
        return self.placement.cluster.memory

    @property
    def memory_overflow(self) -> list[dict[str, Any]]:
        """Every device over its capacity: ``{"device", "capacity", "static_memory",
        "static_over", "peak_memory", "peak_over"}`` (bytes; ``*_over`` is the excess,
        0 when that measure fits; ``peak_*`` ``None`` when the peak is unknown)."""
        cap = self.memory_capacity
        static_over = np.maximum(self.static_memory - cap, 0.0)
        peak_over = np.maximum(self.peak_memory - cap, 0.0) if self.peak_memory_known else np.zeros_like(cap)
        tol = 1e-12 * np.where(np.isfinite(cap), cap, 0.0)
        out = []
        for d in np.flatnonzero((static_over > tol) | (peak_over > tol)).tolist():
            out.append({"device": self.placement.cluster.names[d], "capacity": float(cap[d]),
                        "static_memory": float(self.static_memory[d]), "static_over": float(static_over[d]),
                        "peak_memory": float(self.peak_memory[d]) if self.peak_memory_known else None,
                        "peak_over": float(peak_over[d]) if self.peak_memory_known else None})
        return out

    def memory_violations(self) -> list[str]:
        """One message per device over its memory capacity (empty when all fit), e.g.
        ``"device gpu0: static memory 1.80 KB exceeds its capacity 1.00 KB by 800 B (80.0% over)"``."""
        out = []
        for o in self.memory_overflow:
            cap = o["capacity"]
            parts = []
            for what, used, over in (("static memory", o["static_memory"], o["static_over"]),
                                     ("dynamic peak memory", o["peak_memory"], o["peak_over"])):
                if over:
                    pct = f"{100.0 * over / cap:.1f}% over" if cap > 0 else "no memory at all"
                    parts.append(f"{what} {fmt_bytes(used)} exceeds its capacity {fmt_bytes(cap)} "
                                 f"by {fmt_bytes(over)} ({pct})")
            out.append(f"device {o['device']}: " + "; ".join(parts))
        return out

    def to_dict(self, *, trace: bool = False) -> dict[str, Any]:
        """JSON-ready summary: totals, per device name and per used link ``"a->b"``.

        With ``trace=True`` the full Gantt trace is added: ``nodes`` (id, device,
        start, finish) and ``transfers`` (edge ends, link, start, finish).
        """
        pl = self.placement
        g, cl = pl.graph, pl.cluster
        names = cl.names
        counts = np.bincount(pl.device, minlength=cl.size)
        span = self.makespan
        known = self.peak_memory_known
        cap = cl.memory
        devices = {
            names[d]: {
                "nodes": int(counts[d]),
                "busy": float(self.busy[d]),
                "utilisation": float(self.busy[d] / span) if span > 0 else 0.0,
                "static_memory": float(self.static_memory[d]),
                "peak_memory": float(self.peak_memory[d]) if known else None,
                "memory_capacity": None if math.isinf(cap[d]) else float(cap[d]),
                "static_memory_over": max(float(self.static_memory[d] - cap[d]), 0.0),
                "peak_memory_over": max(float(self.peak_memory[d] - cap[d]), 0.0) if known else None,
            }
            for d in range(cl.size)
        }
        links = {
            f"{names[a]}->{names[b]}": {
                "transfers": int(self.link_count[a, b]),
                "bytes": float(self.link_bytes[a, b]),
                "busy": float(self.link_busy[a, b]),
            }
            for a, b in zip(*np.nonzero(self.link_count), strict=True)
        }
        out: dict[str, Any] = {
            "makespan": float(span),
            "unit": g.unit,
            "policy": self.policy,
            "congestion": bool(self.congestion),
            "link_order": self.link_order,
            "transfer_mode": self.transfer_mode,
            "ports": cl.ports,
            "transfers": self.n_transfers,
            "transfer_bytes": float(self.link_bytes.sum()),
            "devices": devices,
            "links": links,
            "peak_memory_source": self.peak_memory_source,
            "memory_violations": self.memory_violations(),
        }
        if trace:
            ids = g.ids
            dev = pl.device.tolist()
            st, fi = self.start.tolist(), self.finish.tolist()
            out["nodes"] = [{"id": ids[i], "device": names[dev[i]], "start": st[i], "finish": fi[i]}
                            for i in range(g.n)]
            src, dst = g.src, g.dst
            out["trace_transfers"] = [
                {"edge": [ids[src[e]], ids[dst[e]]], "link": f"{names[a]}->{names[b]}",
                 "start": s, "finish": f}
                for e, a, b, s, f in zip(self.xfer_edge.tolist(), self.xfer_src_dev.tolist(),
                                         self.xfer_dst_dev.tolist(), self.xfer_start.tolist(),
                                         self.xfer_finish.tolist(), strict=True)
            ]
        return out
