"""PARDNN's dynamic-memory tracker (Qararyah et al. 2021, Sec. 3.2, Eq. 2; Table 2).

Memory model (Eq. 2, freed as in docs/semantics.md 1; ``docs/heuristics.md`` 3.1, P8)
-------------------------------------------------------------------------------------
On device ``d`` at time ``t`` the consumption ``M_cons(d, t)`` is the ``persistent_bytes``
of every node on ``d`` (residual nodes, live all step) plus every live *tensor copy*:

* the output of ``u`` on ``dev(u)``, live from ``st(u)`` until ``u``, its consumers on
  ``dev(u)`` and its outgoing transfers have all finished;
* a copy of ``u``'s output received on ``b != dev(u)``, live from the start of its first
  transfer to ``b`` until ``u``'s last consumer on ``b`` finishes (one copy per
  ``(u, b)``; a remote copy is thus live from the transfer start, Eq. 2's ``ft(n)``
  without congestion).

Intervals are half-open, frees before allocations at equal times. Tensor sizes are
``output_bytes`` (or, for graphs without them, the largest out-edge ``bytes``:
:func:`~dnnplace.evaluation.sim_memory.tensor_sizes`). The paper's Eq. 2 frees an input at
its consumer's *start*; its text ("once all direct descendants are executed") and docs/semantics.md 1
say *finish*, which we use. :func:`track` computes this from a schedule, one pass
over the copies sorted by time (the paper's tracker), and must equal the simulator's
``peak_memory`` for the same schedule (a test checks it).

Memory potential (Table 2) of a node ``n`` on ``d`` at ``t``: the bytes of the copies live
on ``d`` at ``t`` that ``n`` holds, as their producer or as the consumer whose finish
frees them (the last consumer on ``d``), plus ``n``'s ``persistent_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dnnplace.evaluation.sim_memory import tensor_sizes
from dnnplace.evaluation.simulate import SimResult
from dnnplace.graphs.graph import OpGraph

__all__ = ["MemoryTrace", "track", "tensor_bytes"]


def tensor_bytes(graph: OpGraph) -> np.ndarray:
    """Each node's output tensor size (0 for graphs without sizes)."""
    sizes, _ = tensor_sizes(graph)
    return np.zeros(graph.n) if sizes is None else sizes


def _group_argmax(keys: np.ndarray, vals: np.ndarray, who: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key: the largest value and the ``who`` of the last entry attaining it
    (entries sorted by key, value, then input order)."""
    o = np.lexsort((np.arange(keys.size), vals, keys))
    k, v, h = keys[o], vals[o], who[o]
    last = np.flatnonzero(np.r_[k[1:] != k[:-1], True])
    return k[last], v[last], h[last]


@dataclass(frozen=True, eq=False)
class MemoryTrace:
    """Tensor copies of a schedule and the memory they occupy (see the module docstring).

    ``dev, owner, holder, begin, end, nbytes`` describe each copy; ``persistent`` the
    residual bytes per device; ``peak`` the largest ``M_cons`` per device.
    """

    dev: np.ndarray
    owner: np.ndarray
    holder: np.ndarray
    begin: np.ndarray
    end: np.ndarray
    nbytes: np.ndarray
    persistent: np.ndarray
    peak: np.ndarray
    _events: tuple = field(repr=False, default=())

    def first_overflow(self, cap: np.ndarray) -> tuple[float, int, float] | None:
        """The earliest ``(t, d, M_cons(d, t))`` with ``M_cons(d, t) > cap[d]`` (ties: the
        lowest device), or ``None``."""
        t, d, level = self._events
        over = level + self.persistent[d] > cap[d] * (1 + 1e-12)
        if not over.any():
            base = np.flatnonzero(self.persistent > cap * (1 + 1e-12))  # residuals alone overflow
            return (0.0, int(base[0]), float(self.persistent[base[0]])) if base.size else None
        idx = np.flatnonzero(over)
        j = idx[np.lexsort((d[idx], t[idx]))[0]]
        dd = int(d[j])
        # the level right after all events of device dd at time t[j]
        same = np.flatnonzero((d == dd) & (t == t[j]))
        return float(t[j]), dd, float(max(level[same].max(), 0.0) + self.persistent[dd])

    def potential(self, d: int, t: float) -> dict[int, float]:
        """Bytes of the copies live on ``d`` at ``t`` held by each node (as producer and as
        the consumer whose finish frees them; a copy counts for both when they differ)."""
        live = np.flatnonzero((self.dev == d) & (self.begin <= t) & (self.end > t) & (self.nbytes > 0))
        out: dict[int, float] = {}
        for i in live.tolist():
            b = float(self.nbytes[i])
            o, h = int(self.owner[i]), int(self.holder[i])
            out[o] = out.get(o, 0.0) + b
            if h != o:
                out[h] = out.get(h, 0.0) + b
        return out


def track(res: SimResult) -> MemoryTrace:
    """The memory tracker: tensor copies of a simulated schedule, their holders and the
    peak ``M_cons`` per device (Eq. 2, freed as in docs/semantics.md 1).

    Examples
    --------
    ``a`` (output 4 B) feeds ``b`` on the same GPU: the tensor lives from 0 until ``b``
    finishes at 2, then ``b``'s own 6 B; the peak is 10 B (at t = 1, both are live).

    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> from dnnplace.evaluation.simulate import simulate
    >>> g = OpGraph.from_ids("ab", [("a", "b")], kinds=["gpu"], compute=[[1.0], [1.0]],
    ...                      memory=[0, 0], output_bytes=[4, 6])
    >>> tr = track(simulate(Placement(g, Cluster.single_host(1, with_cpu=False), [0, 0])))
    >>> tr.peak.tolist(), tr.holder.tolist()
    ([10.0], [1, 1])
    """
    pl = res.placement
    g, D = pl.graph, pl.cluster.size
    dev = pl.device
    st, fi = res.start, res.finish
    ob = tensor_bytes(g)
    src, dst = g.src, g.dst
    same = dev[src] == dev[dst]
    xsrc = src[res.xfer_edge] if res.xfer_edge.size else np.empty(0, dtype=np.int64)
    # own copies: end = latest of (u's finish, local consumers' finishes, out-transfers' finishes)
    keys = np.concatenate([np.arange(g.n), src[same], xsrc])
    vals = np.concatenate([fi, fi[dst[same]], res.xfer_finish])
    who = np.concatenate([np.arange(g.n), dst[same], xsrc])
    _, own_end, own_holder = _group_argmax(keys, vals, who)  # every node is a key, in order
    parts = [(dev, np.arange(g.n), own_holder, st, own_end, ob)]
    cross = ~same
    if cross.any():
        rkey = src[cross] * D + dev[dst[cross]]
        rk, r_end, r_holder = _group_argmax(rkey, fi[dst[cross]], dst[cross])
        r_begin = np.full(rk.size, np.inf)
        np.minimum.at(r_begin, np.searchsorted(rk, xsrc * D + res.xfer_dst_dev), res.xfer_start)
        u = rk // D
        parts.append((rk % D, u, r_holder, r_begin, r_end, ob[u]))
    cdev, owner, holder, begin, end, nbytes = (np.concatenate(x) for x in zip(*parts))
    persistent = np.bincount(dev, weights=g.persistent_bytes, minlength=D).astype(np.float64)
    # one sweep over allocations and frees, per device by time, frees first at a time
    keep = nbytes != 0
    t = np.concatenate([begin[keep], end[keep]])
    delta = np.concatenate([nbytes[keep], -nbytes[keep]])
    d = np.concatenate([cdev[keep], cdev[keep]])
    o = np.lexsort((delta > 0, t, d))
    t, delta, d = t[o], delta[o], d[o]
    level = np.cumsum(delta)
    first = np.flatnonzero(np.r_[True, d[1:] != d[:-1]]) if d.size else np.empty(0, dtype=np.int64)
    level = level - np.repeat(np.r_[0.0, level][first], np.diff(np.r_[first, d.size]))
    peak = persistent.copy()
    if d.size:
        peak[d[first]] += np.maximum(np.maximum.reduceat(level, first), 0.0)
    return MemoryTrace(cdev, owner, holder, begin, end, nbytes, persistent, peak, (t, d, level))
