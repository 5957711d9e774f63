r"""Compiled latency of a contiguous split (the scorer of ``latency-ls``).

A split puts every node on a device; each usable accelerator holds one set of nodes,
run as one subgraph (``CommIn + compute + CommOut``), and every CPU node is a unit of
its own on the CPU pool (Tarnawski et al. Sec. 4 with ``q = 1``; docs/semantics.md 2.3). The *unit
graph* has one vertex per accelerator set and one per CPU node, and an arc per crossing
edge. :func:`score_split` builds it in ``O(n + m)`` and returns its longest path (the
latency) and the sum of the finish times of all its vertices, or ``inf`` when it has a
cycle, i.e. when some accelerator set is not contiguous or two subgraphs wait on each
other. On every split it accepts, the latency equals
:func:`dnnplace.evaluation.evaluate.latency`.

Transfers follow the evaluator: a node leaving its accelerator pays CommOut once (its
largest crossing edge out), and an accelerator pays CommIn once per outside source node
(its largest crossing edge in); edges without an explicit cost are priced by the link
model between the accelerator and the host (the first CPU device).

:class:`LatencyScorer` holds the arrays of one instance and scores device arrays; the
move kernels of :mod:`dnnplace.heuristics.latency_moves` call :func:`score_split` directly.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.heuristics.jit import cached_njit

__all__ = ["LatencyScorer", "score_split"]


@cached_njit
def score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin, indeg,
                uptr, uadj, stamp, tmp, queue):
    """Latency and sum of finish times of a split (``inf`` if its unit graph has a cycle).

    Unit of node ``v``: ``v`` itself on the CPU, ``n + a`` on accelerator slot ``a``.
    ``dev`` is the device of every node, ``acc_idx`` the accelerator slot of every
    device (``-1`` for CPUs), ``comp`` the node-by-device compute time, ``cin``/``cout``
    the edge-by-slot host transfer costs, ``out_*`` the graph's out-adjacency (CSR);
    the work arrays from ``unit`` on (:attr:`LatencyScorer.work`) are passed in to
    avoid allocation.
    """
    n = dev.shape[0]
    nu = n + n_acc
    for w in range(nu):
        dur[w] = 0.0
        start[w] = 0.0
        indeg[w] = 0
        uptr[w + 1] = 0
        stamp[w] = -1
    active = 0
    for v in range(n):
        a = acc_idx[dev[v]]
        if a >= 0:
            unit[v] = n + a
        else:
            unit[v] = v
        dur[unit[v]] += comp[v, dev[v]]
    for w in range(nu):
        fin[w] = -1.0  # marks active units below
    for v in range(n):
        fin[unit[v]] = 0.0
    for w in range(nu):
        if fin[w] == 0.0:
            active += 1
    # transfers: CommOut once per node leaving its piece (max crossing edge), CommIn once per
    # (source node, piece) (max crossing edge into that piece)
    for u in range(n):
        uu = unit[u]
        ua = acc_idx[dev[u]]
        mo = -np.inf
        for q in range(out_ptr[u], out_ptr[u + 1]):
            v = out_nbr[q]
            uv = unit[v]
            if uv == uu:
                continue
            e = out_eid[q]
            uptr[uu + 1] += 1
            indeg[uv] += 1
            if ua >= 0:
                c = cout[e, ua]
                if c > mo:
                    mo = c
            va = acc_idx[dev[v]]
            if va >= 0:
                c = cin[e, va]
                if stamp[uv] != u:
                    stamp[uv] = u
                    tmp[uv] = c
                elif c > tmp[uv]:
                    tmp[uv] = c
        if mo > -np.inf:
            dur[uu] += mo
        for q in range(out_ptr[u], out_ptr[u + 1]):
            uv = unit[out_nbr[q]]
            if uv != uu and stamp[uv] == u:
                dur[uv] += tmp[uv]
                stamp[uv] = -2
    # unit adjacency (CSR, arcs repeated per edge) and Kahn's longest path
    for w in range(nu):
        uptr[w + 1] += uptr[w]
    fill = uptr[:nu].copy()
    for u in range(n):
        uu = unit[u]
        for q in range(out_ptr[u], out_ptr[u + 1]):
            uv = unit[out_nbr[q]]
            if uv != uu:
                uadj[fill[uu]] = uv
                fill[uu] += 1
    head = 0
    tail = 0
    for w in range(nu):
        if fin[w] == 0.0 and indeg[w] == 0:
            queue[tail] = w
            tail += 1
    best = 0.0
    total = 0.0
    while head < tail:
        w = queue[head]
        head += 1
        f = start[w] + dur[w]
        fin[w] = f
        total += f
        if f > best:
            best = f
        for q in range(uptr[w], uptr[w + 1]):
            t = uadj[q]
            if f > start[t]:
                start[t] = f
            indeg[t] -= 1
            if indeg[t] == 0:
                queue[tail] = t
                tail += 1
    if head < active:
        return np.inf, np.inf
    return best, total



class LatencyScorer:
    """Compiled latency of contiguous splits of one instance (see the module docstring).

    ``score(device)`` returns ``(latency, sum of finish times)`` of a device array, or
    ``(inf, inf)`` when some accelerator set is not contiguous or two subgraphs wait on
    each other; memory and device support are *not* checked here.

    Devices: the usable accelerators (the first ``device_limit`` of each kind) and the
    pool (the first CPU device, or none). CPU nodes must be on the pool device.
    """

    def __init__(self, inst: Instance):
        g, cl = inst.graph, inst.require_cluster()
        self.graph, self.cluster = g, cl
        limit = cl.meta.get("device_limit", {})
        accs: list[int] = []
        for kind in dict.fromkeys(k for k in cl.kinds if k != "cpu"):
            accs += cl.devices_of_kind(kind)[: limit.get(kind, cl.size)].tolist()
        self.accs = np.array(sorted(accs), dtype=np.int64)
        cpus = cl.devices_of_kind("cpu")
        self.pool = int(cpus[0]) if cpus.size and limit.get("cpu", 1) >= 1 else -1
        self.acc_idx = np.full(cl.size, -1, dtype=np.int64)
        self.acc_idx[self.accs] = np.arange(self.accs.size)
        comp = cl.compute_matrix(g)
        self.supported = ~np.isnan(comp)
        self.comp = np.nan_to_num(comp, nan=np.inf)
        # host transfer cost of every edge for every accelerator slot, as the evaluator's _host_cost:
        # the explicit edge cost, else the link model between the accelerator and the host (first CPU)
        m = g.m
        self.cin = np.zeros((m, max(1, self.accs.size)))
        self.cout = np.zeros((m, max(1, self.accs.size)))
        missing = np.isnan(g.edge_cost)
        if missing.any() and not cpus.size:
            raise InputError("latency-ls needs explicit edge costs when the cluster has no CPU host")
        for a, d in enumerate(self.accs.tolist()):
            self.cin[:, a] = self.cout[:, a] = g.edge_cost
            if missing.any():
                h = int(cpus[0])
                self.cin[missing, a] = cl.beta0[h, d] + cl.beta1[h, d] * g.edge_bytes[missing]
                self.cout[missing, a] = cl.beta0[d, h] + cl.beta1[d, h] * g.edge_bytes[missing]
        n = g.n
        nu = n + self.accs.size
        self.work = (np.empty(n, np.int64), np.empty(nu), np.empty(nu), np.empty(nu), np.empty(nu, np.int64),
                     np.zeros(nu + 1, np.int64), np.empty(max(1, m), np.int64), np.empty(nu, np.int64),
                     np.empty(nu), np.empty(nu, np.int64))

    def score(self, device: np.ndarray) -> tuple[float, float]:
        """``(latency, sum of finish times)`` of ``device`` (``inf`` if not a valid split)."""
        g = self.graph
        return score_split(np.asarray(device, dtype=np.int64), self.acc_idx, self.accs.size, self.comp, self.cin,
                           self.cout, g.out_ptr, g.out_nbr, g.out_eid, *self.work)

