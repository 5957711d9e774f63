r"""Replicated (data-parallel) pipeline stages, Tarnawski et al. Appendix C.2.

A stage (the node set of one accelerator, its *primary*) may run on ``r`` accelerators
of the primary's kind: every replica holds all of the stage's nodes and processes one
sample in ``r``, and after every step the replicas all-reduce the gradients of the
stage's weights. Time per sample of the stage (Appendix C.2)::

    acc(S, r) = acc(S) / r  +  (r - 1) / r * W(S) * sync      (pipedream: sum)
    acc(S, r) = max(acc(S) / r, (r - 1) / r * W(S) * sync)   (overlap, App. C.1)

where ``acc(S)`` is the stage's load on one device (docs/semantics.md 2.2, compute and transfers; for
``overlap`` the larger of the two), ``W(S)`` the bytes of its weights (the nodes'
``persistent_bytes`` when the graph has them, else their ``memory``: Tarnawski's
``size``) and ``sync`` the all-reduce time per byte (the paper's ``1 / B``). The GPipe
objective is not separable per stage and is not offered with replication.

A :class:`Replication` rides on a :class:`~dnnplace.graphs.placement.Placement`: the
placement maps every node to its stage's primary device; ``groups`` lists, per
replicated stage, the primary and its extra devices ("this stage runs on these ``r``
devices"). :func:`replication_violations` and :func:`replicated_loads` are what the
independent evaluator (:func:`dnnplace.evaluation.evaluate.maxload`) uses.

>>> rep = Replication(groups=((0, 2),), sync_per_byte=0.5)
>>> rep.factor(3)
[2, 1, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError

__all__ = ["Replication", "node_weights", "stage_weights", "replication_violations", "replicated_loads"]


@dataclass(frozen=True)
class Replication:
    """Replica groups ``(primary, extra, ...)`` of device indices and the all-reduce
    time per byte of weights."""

    groups: tuple[tuple[int, ...], ...]
    sync_per_byte: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(tuple(int(d) for d in grp) for grp in self.groups))
        if not np.isfinite(self.sync_per_byte) or self.sync_per_byte < 0:
            raise InputError(f"replication: sync_per_byte must be a finite number >= 0, got {self.sync_per_byte}")

    def factor(self, n_devices: int) -> list[int]:
        """Replication factor ``r`` of every device (1 for unreplicated and extra devices)."""
        out = [1] * n_devices
        for grp in self.groups:
            out[grp[0]] = len(grp)
        return out

    def to_json(self, names: tuple[str, ...]) -> dict[str, Any]:
        """``{"groups": {primary name: [all device names]}, "sync_per_byte": s}``."""
        return {"groups": {names[g[0]]: [names[d] for d in g] for g in self.groups},
                "sync_per_byte": self.sync_per_byte}


def node_weights(graph: Any) -> np.ndarray:
    """Bytes of weights of every node: ``persistent_bytes`` when the graph has any,
    else ``memory`` (Tarnawski's ``size``)."""
    pb = graph.persistent_bytes
    return pb if pb is not None and np.any(pb > 0) else graph.memory


def stage_weights(graph: Any, device: np.ndarray, n_devices: int) -> np.ndarray:
    """``W(S)`` per device: bytes of weights of its nodes (:func:`node_weights`)."""
    return np.bincount(device, weights=node_weights(graph), minlength=n_devices)


def replication_violations(placement: Any) -> list[str]:
    """Why a placement's replica groups cannot run: a device in two groups, an extra
    device that holds nodes of its own, a replica of another kind (or a CPU), or a
    replica without the memory for the stage."""
    rep: Replication = placement.replication
    cl, g = placement.cluster, placement.graph
    out: list[str] = []
    seen: dict[int, int] = {}
    used = set(np.unique(placement.device).tolist())
    mem = np.bincount(placement.device, weights=g.memory, minlength=cl.size)
    for grp in rep.groups:
        p = grp[0]
        for d in grp:
            if not 0 <= d < cl.size:
                out.append(f"replica group of device index {p}: device index {d} out of range")
                continue
            if d in seen:
                out.append(f"device {cl.names[d]} is in two replica groups")
            seen[d] = p
        if any(not 0 <= d < cl.size for d in grp):
            continue
        if cl.kinds[p] == "cpu":
            out.append(f"stage on {cl.names[p]} is replicated, but only accelerator stages can be")
        for d in grp[1:]:
            if d in used:
                out.append(f"{cl.names[d]} replicates the stage on {cl.names[p]} but holds nodes of its own")
            if cl.kinds[d] != cl.kinds[p]:
                out.append(f"{cl.names[d]} (kind {cl.kinds[d]!r}) replicates a stage on kind {cl.kinds[p]!r}")
            if mem[p] > cl.memory[d] * (1 + 1e-12):
                out.append(f"replica {cl.names[d]}: the stage of {cl.names[p]} needs {mem[p]:.6g} B, "
                           f"capacity {cl.memory[d]:.6g} B")
    return out


def replicated_loads(placement: Any, load: np.ndarray, objective: str) -> np.ndarray:
    """Time per sample of every device's stage (module docstring); extra devices get
    their stage's value. ``load`` is the one-device load per device (for ``overlap``
    already the larger of compute and transfers)."""
    rep: Replication = placement.replication
    cl = placement.cluster
    w = stage_weights(placement.graph, placement.device, cl.size)
    out = np.asarray(load, dtype=float).copy()
    for grp in rep.groups:
        p, r = grp[0], len(grp)
        sync = (r - 1) / r * w[p] * rep.sync_per_byte
        out[list(grp)] = load[p] / r + sync if objective == "pipedream" else max(load[p] / r, sync)
    return out
