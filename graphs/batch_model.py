"""How node times, tensor sizes and memory change with the batch size (``docs/heuristics.md`` 0).

FastT's data-parallel start (Yi et al. Sec. 5.2) runs every replica at a fraction of the
global batch, and every batch-size experiment (FastT Tables 1-3, Celeritas' "Standard
Evaluation") asks what a graph profiled at batch ``B`` costs at batch ``b``.
:class:`BatchModel` answers with

.. math::

    t_v(b) = \\min(t_v(B), t_0) + \\max(t_v(B) - t_0, 0)\\,\\frac{b + h}{B + h},

a kernel-launch floor ``t_0`` (default 5 µs) plus work that grows linearly with the
batch; ``h`` (``half_batch``, default 0) adds the *sublinear small-batch regime* of a GPU
that is not saturated: with ``h > 0`` the work term is ``(b + h)/(B + h)``, i.e. the device
reaches half its peak throughput at batch ``h``, so halving a small batch saves less than
half the time. ``h = 0`` is the linear rule of the notes. Nodes whose role (``graph.roles``)
is ``param`` or ``apply`` do not scale (they touch the weights only).

Tensors: an edge's bytes scale linearly, ``bytes_e(b) = bytes_e(B) * b / B``, where
``graph.edge_batch_scaled[e]`` is true and its producer is not a ``param`` or ``grad``
node (parameter and gradient tensors have the weights' size). Memory:
``persistent_bytes`` never scales; the rest of ``memory`` and ``output_bytes`` scale
linearly, except on ``param``/``grad``/``apply`` nodes.

Profiled tables
---------------
``profiles`` overrides the rule with measurements: a mapping ``{batch: OpGraph}`` of the
*same* graph captured (or profiled) at several batch sizes (same node ids in the same
order, same kinds, same edges), for instance one ``dnnplace.pytorch.capture`` run per batch.
At a batch between two profiled ones, compute times, edge bytes, memory and output bytes
are interpolated linearly between the neighbours; outside the profiled range, they are
extrapolated from the nearest two (clamped at 0); with one profile, the rule above is
applied from it. Unsupported kinds (``NaN``) must agree across the profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["BatchModel", "KERNEL_FLOOR_SECONDS", "check_profiles"]

KERNEL_FLOOR_SECONDS = 5e-6
_SECONDS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}


def check_profiles(profiles: Mapping[int, OpGraph]) -> dict[int, OpGraph]:
    """``profiles`` sorted by batch after checking that they are one graph: same node ids
    in the same order, kinds, edges, roles and op types; an :class:`InputError` names the
    first node or edge that differs.

    >>> g = OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [2.0]], memory=[0, 0], src=[0], dst=[1])
    >>> sorted(check_profiles({32: g, 8: g}))
    [8, 32]
    >>> check_profiles({8: g, 16: g.with_(ids=["a", "c"])})
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InputError: BatchModel profile at batch 16: node 1 has id 'c', at batch 8 'b'
    """
    out = {int(k): profiles[k] for k in sorted(profiles)}
    if not out or min(out) <= 0:
        raise InputError(f"BatchModel profiles need positive batch sizes, got {sorted(out)}")
    (k0, g0), *rest = out.items()
    for k, g in rest:
        where = f"BatchModel profile at batch {k}"
        if g.n != g0.n or g.m != g0.m or g.kinds != g0.kinds:
            raise InputError(f"{where}: {g.n} nodes, {g.m} edges, kinds {g.kinds}; at batch {k0}: {g0.n}, {g0.m}, "
                             f"{g0.kinds}")
        for attr, what in (("ids", "id"), ("roles", "role"), ("op_types", "op type")):
            a, b = list(getattr(g, attr) or []), list(getattr(g0, attr) or [])
            if a != b:
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)) - 1)
                raise InputError(f"{where}: node {i} has {what} {a[i] if a else None!r}, at batch {k0} "
                                 f"{b[i] if b else None!r}")
        bad = np.flatnonzero((g.src != g0.src) | (g.dst != g0.dst))
        if bad.size:
            e = int(bad[0])
            raise InputError(f"{where}: edge {e} is {g.ids[g.src[e]]!r} -> {g.ids[g.dst[e]]!r}, at batch {k0} "
                             f"{g0.ids[g0.src[e]]!r} -> {g0.ids[g0.dst[e]]!r}")
    return out


def _roles(graph: OpGraph) -> np.ndarray:
    if graph.roles is None:
        return np.full(graph.n, "compute", dtype=object)
    return np.asarray(graph.roles, dtype=object)


@dataclass(frozen=True)
class BatchModel:
    """Batch scaling of a graph profiled at batch ``batch`` (see the module docstring).

    Parameters
    ----------
    batch : int
        The batch ``B`` the graph's costs were profiled at.
    t0 : float, optional
        Kernel floor in the graph's time unit; default 5 µs converted to ``graph.unit``.
    half_batch : float
        ``h``: the batch at which a device reaches half its throughput (0 = linear).
    profiles : mapping of int to OpGraph, optional
        Measured graphs at several batch sizes; override the rule.

    Examples
    --------
    A 1 ms node at batch 32 with a 5 µs floor, at batch 16 and (sublinear, h = 32) at 16:

    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [0.001]], memory=[0, 0], src=[0], dst=[1],
    ...             edge_bytes=[64.0])
    >>> BatchModel(32).time(g, 16).ravel().round(6).tolist()
    [0.5025, 0.001]
    >>> BatchModel(32, half_batch=32).time(g, 16).ravel().round(6).tolist()
    [0.75125, 0.001]
    >>> BatchModel(32).bytes(g, 8).tolist()
    [16.0]
    """

    batch: int
    t0: float | None = None
    half_batch: float = 0.0
    profiles: Mapping[int, OpGraph] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not (self.batch > 0):
            raise InputError(f"BatchModel: batch must be > 0, got {self.batch}")
        if self.half_batch < 0:
            raise InputError(f"BatchModel: half_batch must be >= 0, got {self.half_batch}")
        if self.t0 is not None and self.t0 < 0:
            raise InputError(f"BatchModel: t0 must be >= 0, got {self.t0}")
        if self.profiles:
            check_profiles(self.profiles)

    def floor(self, graph: OpGraph) -> float:
        """The kernel floor ``t0`` in ``graph.unit``."""
        if self.t0 is not None:
            return float(self.t0)
        if graph.unit not in _SECONDS:
            raise InputError(f"BatchModel: graph unit {graph.unit!r} is not a time unit I know; give t0")
        return KERNEL_FLOOR_SECONDS * _SECONDS[graph.unit]

    # ------------------------------------------------------------------ profiles
    def _profiled(self, graph: OpGraph, b: float, attr: str) -> np.ndarray | None:
        if not self.profiles:
            return None
        if len(self.profiles) == 1:
            return None
        keys = sorted(self.profiles)
        for k in keys:
            p = self.profiles[k]
            if p.n != graph.n or p.m != graph.m or p.kinds != graph.kinds:
                raise InputError(f"BatchModel profile at batch {k}: {p.n} nodes, {p.m} edges, kinds {p.kinds}; "
                                 f"the graph has {graph.n}, {graph.m}, {graph.kinds}")
        j = int(np.clip(np.searchsorted(keys, b), 1, len(keys) - 1))
        lo, hi = keys[j - 1], keys[j]
        a, c = getattr(self.profiles[lo], attr), getattr(self.profiles[hi], attr)
        return np.maximum(a + (c - a) * (b - lo) / (hi - lo), 0.0)

    def _base(self, graph: OpGraph) -> tuple[OpGraph, float]:
        if self.profiles and len(self.profiles) == 1:
            (k, g), = self.profiles.items()
            return g, float(k)
        return graph, float(self.batch)

    # ------------------------------------------------------------------ the three quantities
    def time(self, graph: OpGraph, b: float) -> np.ndarray:
        """``(n, K)`` compute times at batch ``b`` (``NaN`` stays unsupported)."""
        prof = self._profiled(graph, b, "compute")
        if prof is not None:
            return np.where(np.isnan(graph.compute), np.nan, prof)
        g, B = self._base(graph)
        t0, h = self.floor(g), self.half_batch
        t = g.compute
        scaled = np.minimum(t, t0) + np.maximum(t - t0, 0.0) * ((b + h) / (B + h))
        fixed = np.isin(_roles(g), ("param", "apply"))
        return np.where(fixed[:, None], t, scaled)

    def bytes(self, graph: OpGraph, b: float) -> np.ndarray:
        """``(m,)`` edge bytes at batch ``b``."""
        prof = self._profiled(graph, b, "edge_bytes")
        if prof is not None:
            return prof
        g, B = self._base(graph)
        weights = np.isin(_roles(g), ("param", "grad"))
        scaled = g.edge_batch_scaled & ~weights[g.src]
        return np.where(scaled, g.edge_bytes * (b / B), g.edge_bytes)

    def mem(self, graph: OpGraph, b: float) -> np.ndarray:
        """``(n,)`` static memory at batch ``b``: persistent bytes fixed, the rest linear."""
        prof = self._profiled(graph, b, "memory")
        if prof is not None:
            return prof
        g, B = self._base(graph)
        keep = np.minimum(g.persistent_bytes, g.memory)
        fixed = np.isin(_roles(g), ("param", "grad", "apply"))
        return np.where(fixed, g.memory, keep + (g.memory - keep) * (b / B))

    def output_bytes(self, graph: OpGraph, b: float) -> np.ndarray:
        """``(n,)`` output tensor bytes at batch ``b``."""
        prof = self._profiled(graph, b, "output_bytes")
        if prof is not None:
            return prof
        g, B = self._base(graph)
        fixed = np.isin(_roles(g), ("param", "grad", "apply"))
        return np.where(fixed, g.output_bytes, g.output_bytes * (b / B))

    def at(self, graph: OpGraph, b: float) -> OpGraph:
        """``graph`` with every batch-dependent field at batch ``b`` (a new graph).

        >>> g = OpGraph(ids=[0], kinds=["gpu"], compute=[[2.0]], memory=[8.0], src=[], dst=[])
        >>> BatchModel(4, t0=0.0).at(g, 2).compute.ravel().tolist()
        [1.0]
        """
        if not (b > 0):
            raise InputError(f"BatchModel: batch must be > 0, got {b}")
        return graph.with_(compute=self.time(graph, b), edge_bytes=self.bytes(graph, b), memory=self.mem(graph, b),
                           output_bytes=self.output_bytes(graph, b),
                           meta={**graph.meta, "batch": b})
