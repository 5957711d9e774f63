"""The outcome of a simulation: :class:`SimResult`.

Produced by :func:`dnnplace.graphs.simulate.simulate` (and importable from there); it
holds the schedule, every transfer task, per-device and per-link totals and memory,
and turns itself into a JSON-ready summary or Gantt trace (:meth:`SimResult.to_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.placement import Placement, Schedule

__all__ = ["SimResult"]


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outcome of :func:`~dnnplace.graphs.simulate.simulate`; all times in ``schedule.placement.graph.unit``.

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
        Edge id of each transfer (the representative edge when deduplicated).
    xfer_src_dev, xfer_dst_dev : ndarray (X,) of int
        The directed link of each transfer.
    xfer_start, xfer_finish : ndarray (X,)
        When each transfer occupies its link.
    static_memory : ndarray (D,)
        Sum of ``graph.memory`` of the nodes on each device (Pesto's constraint (8)).
    peak_memory : ndarray (D,)
        Dynamic peak per device (PARDNN Eq. 2), see :func:`~dnnplace.graphs.simulate.simulate`.
    policy : str
    congestion : bool
    dedup_transfers : bool
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
    dedup_transfers: bool = False

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
    def n_transfers(self) -> int:
        """Number of transfer tasks."""
        return int(self.xfer_edge.shape[0])

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
        devices = {
            names[d]: {
                "nodes": int(counts[d]),
                "busy": float(self.busy[d]),
                "utilisation": float(self.busy[d] / span) if span > 0 else 0.0,
                "static_memory": float(self.static_memory[d]),
                "peak_memory": float(self.peak_memory[d]),
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
            "dedup_transfers": bool(self.dedup_transfers),
            "transfers": self.n_transfers,
            "transfer_bytes": float(self.link_bytes.sum()),
            "devices": devices,
            "links": links,
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
