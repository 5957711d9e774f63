"""Discrete-event simulation of a placed operator graph (SPEC 2.1 and 3).

:func:`simulate` executes a :class:`~dnnplace.graphs.placement.Placement` the way a DL runtime
would and returns a :class:`SimResult`: the start and finish of every node, every
inter-device transfer, the makespan, per-device busy time, per-link traffic and the
static and dynamic (peak-over-time) memory per device. :func:`validate_schedule`
re-checks any schedule (simulated, or decoded from a solver) without sharing the
simulator's code path.

Execution model
---------------
* A device runs one node at a time without preemption; node ``i`` takes
  ``cluster.compute_matrix(graph)[i, dev(i)]`` time units (``graph.unit``).
* An edge ``(u, v)`` with ``dev(u) = a != dev(v) = b`` becomes a *transfer task* of
  ``cluster.transfer_time(a, b, bytes, cost)`` on the directed link ``(a, b)``, released
  when ``u`` completes (Pesto's DAG augmentation, Sec. 3.2.2). ``v`` may start once all
  its predecessors have completed and all its inbound transfers have completed.
* ``congestion=True``: a directed link carries one transfer at a time, first come first
  served by release time (ties: the source's topological position, then edge id),
  non-preemptive -- the FCFS link queue of Pesto Sec. 3.2 / 3.2.2. ``congestion=False``:
  transfers overlap freely (``finish = release + duration``), the classic
  congestion-free DAG-scheduling assumption (Pesto's ablation, Fig. 5).
* One transfer per edge. ``dedup_transfers=True`` (an option, never the default) sends
  a tensor once per (source node, destination device); the transfer takes the longest
  of the edges it stands for (ties: lowest edge id, which is reported as ``xfer_edge``).

Device policies (all but ``"order"`` are *non-delay*: an idle device never waits while
one of its nodes is ready):

``"fifo"``
    TensorFlow's default ready queue (also what PARDNN's scheduler emulator assumes,
    PARDNN Sec. 3.2.2): the node that became ready earliest first; ties by topological
    position.
``"critical_path"``
    the ready node with the largest bottom level first; the bottom level is the longest
    path to a sink counting node times on their placed devices and the (uncongested)
    transfer times of cross-device edges. Ties by topological position.
``"priority"``
    list scheduling by ``priorities``: the ready node with the lowest value first
    (ties by topological position).
``"order"``
    strict per-device order: each device runs its nodes exactly in increasing
    ``priorities`` (ties by topological position), waiting for the next one even if
    others are ready. This replays a solver's per-device sequence
    (:meth:`dnnplace.graphs.placement.Schedule.priorities`); an order that deadlocks against
    precedence raises :class:`~dnnplace.graphs.errors.InputError`.

Events at the same time are processed together before devices pick their next node
(completions first, then nodes becoming ready), so ties never depend on heap internals.
The event loop is a plain ``heapq`` loop over Python lists built once from the graph's
CSR arrays; a 200k-node, 300k-edge graph on 8 devices simulates in about a second
(``benchmarks/bench_simulate.py``).

References
----------
.. [Pesto] U. U. Hafeez, X. Sun, A. Gandhi, Z. Liu. "Towards optimal placement and
   scheduling of DNN operations with Pesto." Middleware 2021, Sec. 3.1, 3.2.2.
.. [PARDNN] F. Qararyah, M. Wahib, D. Dikbayir, M. E. Belviranli, D. Unat. "A
   computational-graph partitioning method for training memory-constrained DNNs."
   Parallel Computing 2021, Sec. 3.2.2, Eq. (2).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.placement import Placement, Schedule

__all__ = ["SimResult", "simulate", "validate_schedule", "bottom_level", "POLICIES"]

POLICIES = ("fifo", "critical_path", "priority", "order")


@dataclass(frozen=True, eq=False)
class SimResult:
    """Outcome of :func:`simulate`; all times in ``schedule.placement.graph.unit``.

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
        Dynamic peak per device (PARDNN Eq. 2), see :func:`simulate`.
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


# ---------------------------------------------------------------------------- helpers
def _durations(placement: Placement) -> np.ndarray:
    g, cl = placement.graph, placement.cluster
    dur = cl.compute_matrix(g)[np.arange(g.n), placement.device]
    bad = np.isnan(dur)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        d = cl.devices[placement.device[i]]
        raise InputError(f"{g._node(i)} cannot run on device {d.name!r} (kind {d.kind!r}): "
                         f"no compute time for that kind; {int(bad.sum())} node(s) placed unsupported")
    return dur


def _edge_transfer_times(placement: Placement) -> np.ndarray:
    """Per-edge transfer time on the placed devices (0 for same-device edges)."""
    g, cl = placement.graph, placement.cluster
    a, b = placement.device[g.src], placement.device[g.dst]
    return cl.transfer_time(a, b, g.edge_bytes, g.edge_cost)


def bottom_level(placement: Placement) -> np.ndarray:
    """Longest path from each node to a sink on its placed devices.

    Counts every node's time on its device and the uncongested transfer time of every
    cross-device edge; ``max(bottom_level)`` is the critical-path lower bound on the
    makespan of the placement.

    Examples
    --------
    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0]], memory=[0, 0])
    >>> c = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices,
    ...                        default={"beta0": 0.5})
    >>> bottom_level(Placement(g, c, [0, 1])).tolist()
    [3.5, 2.0]
    """
    g = placement.graph
    dur = _durations(placement).tolist()
    w = _edge_transfer_times(placement)[g.out_eid].tolist()
    ptr, nbr = g.out_ptr.tolist(), g.out_nbr.tolist()
    bl = [0.0] * g.n
    for u in reversed(g.topo_order.tolist()):
        best = 0.0
        for k in range(ptr[u], ptr[u + 1]):
            val = w[k] + bl[nbr[k]]
            if val > best:
                best = val
        bl[u] = dur[u] + best
    return np.asarray(bl, dtype=np.float64)


def _check_priorities(priorities: Any, n: int, policy: str) -> np.ndarray:
    if priorities is None:
        raise InputError(f"policy {policy!r} needs a 'priorities' array (one number per node)")
    pr = np.asarray(priorities, dtype=np.float64).ravel()
    if pr.shape[0] != n:
        raise InputError(f"priorities: expected {n} values (one per node), got {pr.shape[0]}")
    if not np.all(np.isfinite(pr)):
        i = int(np.flatnonzero(~np.isfinite(pr))[0])
        raise InputError(f"priorities: value of node index {i} is not a finite number ({pr[i]})")
    return pr


def _transfers(placement: Placement, dedup: bool):
    """Build transfer tasks, sorted by (source node, edge id).

    Returns per-transfer arrays (edge, source node, link src/dst device, duration) and
    the CSR (``xd_ptr``, ``xd_nodes``) of destination nodes each transfer delivers to.
    """
    g, D = placement.graph, placement.cluster.size
    dev = placement.device
    src, dst = g.src, g.dst
    ce = np.flatnonzero(dev[src] != dev[dst])
    tt = placement.cluster.transfer_time(dev[src[ce]], dev[dst[ce]], g.edge_bytes[ce], g.edge_cost[ce])
    if not dedup:
        order = np.lexsort((ce, src[ce]))  # by source node, then edge id
        xe = ce[order]
        xdur = tt[order]
        xd_ptr = np.arange(xe.shape[0] + 1, dtype=np.int64)
        xd_nodes = dst[xe]
    else:
        key = src[ce] * D + dev[dst[ce]]
        # groups contiguous by key; first member = representative (longest, lowest id)
        by_key = np.lexsort((ce, -tt, key))
        first = np.ones(by_key.shape[0], dtype=bool)
        first[1:] = key[by_key][1:] != key[by_key][:-1]
        gid = np.cumsum(first) - 1  # group of each member (in by_key order)
        reps = by_key[first]
        xe, xdur = ce[reps], tt[reps]
        # renumber groups by (source node, representative edge id)
        g_order = np.lexsort((xe, src[xe]))
        new_gid = np.empty_like(g_order)
        new_gid[g_order] = np.arange(g_order.shape[0])
        mgid = new_gid[gid]
        members = ce[by_key][np.lexsort((ce[by_key], mgid))]
        xd_nodes = dst[members]
        xd_ptr = np.zeros(g_order.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(mgid, minlength=g_order.shape[0]), out=xd_ptr[1:])
        xe, xdur = xe[g_order], xdur[g_order]
    return xe, src[xe], dev[src[xe]], dev[dst[xe]], xdur, xd_ptr, xd_nodes


# ---------------------------------------------------------------------------- simulate
def simulate(placement: Placement, *, policy: str = "fifo", priorities: Any = None,
             congestion: bool = True, dedup_transfers: bool = False) -> SimResult:
    """Discrete-event execution of a placement (SPEC 2.1, 3).

    Parameters
    ----------
    placement : Placement
        Graph, cluster and the device of every node.
    policy : {"fifo", "critical_path", "priority", "order"}
        How a device picks its next node (see the module docstring).
    priorities : array (n,), optional
        Required by ``"priority"`` (lowest first among ready nodes) and ``"order"``
        (strict per-device sequence by increasing value); rejected by the others.
        ``Schedule.priorities()`` turns any schedule into such an array.
    congestion : bool
        One transfer at a time per directed link, FCFS by release time (Pesto Sec.
        3.2.2); ``False`` lets transfers overlap.
    dedup_transfers : bool
        Send a tensor once per (source node, destination device) instead of once per
        edge. Off by default (SPEC 2.1).

    Returns
    -------
    SimResult
        Makespan, node start/finish, transfers, per-device busy time, per-link traffic
        and memory. ``peak_memory[d]`` follows PARDNN Eq. (2): the ``persistent_bytes``
        of every node on ``d`` are live all step; the ``output_bytes`` of a node ``u``
        on ``d`` are live from ``u``'s start until its last consumer on ``d`` finishes
        and its last outgoing transfer finishes (at least until ``u`` finishes); a
        tensor received on ``d`` (``output_bytes`` of its remote producer ``u``, one
        copy per (``u``, ``d``) whether or not transfers are deduplicated) is live from
        the start of its first transfer to ``d`` until ``u``'s last consumer on ``d``
        finishes. Intervals are half-open ``[begin, end)``, so a tensor freed at ``t``
        and one allocated at ``t`` do not overlap.

    Raises
    ------
    InputError
        Unknown policy, missing or malformed ``priorities``, a node placed on a device
        kind it does not support, or (``"order"``) an order that deadlocks.

    Examples
    --------
    Two nodes on two GPUs joined by a 0.5-time-unit transfer:

    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0]], memory=[0, 0])
    >>> c = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices,
    ...                        default={"beta0": 0.5})
    >>> r = simulate(Placement(g, c, [0, 1]))
    >>> r.makespan, r.xfer_start.tolist(), r.start.tolist()
    (3.5, [1.0], [0.0, 1.5])
    """
    if policy not in POLICIES:
        raise InputError(f"unknown simulation policy {policy!r}; use one of {list(POLICIES)}")
    g, cl = placement.graph, placement.cluster
    n, D = g.n, cl.size
    if policy in ("priority", "order"):
        prio = _check_priorities(priorities, n, policy)
    elif priorities is not None:
        raise InputError(f"policy {policy!r} does not use 'priorities'; "
                         "use policy='priority' or 'order' to apply them")
    dur_a = _durations(placement)
    dev_a = placement.device
    tp_a = g.topo_position
    order_a = g.topo_order

    xe, xsrc, xa, xb, xdur_a, xd_ptr_a, xd_nodes_a = _transfers(placement, dedup_transfers)
    X = int(xe.shape[0])
    # CSR of transfers by source node (transfers are sorted by source node)
    x_ptr_a = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(xsrc, minlength=n), out=x_ptr_a[1:])
    # CSR of same-device successors
    same = dev_a[g.src] == dev_a[g.dst]
    ls = g.src[same]
    l_perm = np.argsort(ls, kind="stable")
    l_nodes_a = g.dst[same][l_perm]
    l_ptr_a = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ls, minlength=n), out=l_ptr_a[1:])

    # ---- convert to Python lists once (the event loop is pure Python)
    dur = dur_a.tolist()
    dev = dev_a.tolist()
    tp = tp_a.tolist()
    order = order_a.tolist()
    l_ptr, l_nodes = l_ptr_a.tolist(), l_nodes_a.tolist()
    x_ptr = x_ptr_a.tolist()
    xdur = xdur_a.tolist()
    xlink = (xa * D + xb).tolist()
    xd_ptr, xd_nodes = xd_ptr_a.tolist(), xd_nodes_a.tolist()
    cnt = np.bincount(g.dst, minlength=n).tolist()  # arrivals still expected per node

    strict = policy == "order"
    fifo = policy == "fifo"
    if policy == "critical_path":
        bl = bottom_level(placement)
        by_rank_a = np.lexsort((tp_a, -bl))
    elif policy in ("priority", "order"):
        by_rank_a = np.lexsort((tp_a, prio))
    else:
        by_rank_a = order_a
    rank_a = np.empty(n, dtype=np.int64)
    rank_a[by_rank_a] = np.arange(n)
    rank, by_rank = rank_a.tolist(), by_rank_a.tolist()
    seq: list[list[int]] = []
    nxt: list[int] = []
    if strict:
        # per-device sequences by rank; ptr[d] = next position to run
        seq = [by_rank_a[dev_a[by_rank_a] == d].tolist() for d in range(D)]
        nxt = [0] * D
        is_ready = [False] * n

    start = [0.0] * n
    fin = [0.0] * n
    rt = [0.0] * n
    xs = [0.0] * X
    xf = [0.0] * X
    running = [False] * D
    queues: list[list] = [[] for _ in range(D)]
    link_free = [0.0] * (D * D)
    heappush, heappop = heapq.heappush, heapq.heappop
    # event code: finish of node with topo position p -> p; node becomes ready -> n + p
    heap = [(0.0, n + tp[i]) for i in range(n) if cnt[i] == 0]
    heapq.heapify(heap)
    done = 0

    while heap:
        t = heap[0][0]
        dirty = []
        while heap and heap[0][0] == t:
            code = heappop(heap)[1]
            if code < n:  # ---- node u completes: release its outputs
                u = order[code]
                done += 1
                d = dev[u]
                running[d] = False
                dirty.append(d)
                for k in range(l_ptr[u], l_ptr[u + 1]):
                    v = l_nodes[k]
                    if rt[v] < t:
                        rt[v] = t
                    c = cnt[v] - 1
                    cnt[v] = c
                    if c == 0:
                        heappush(heap, (rt[v], n + tp[v]))
                for x in range(x_ptr[u], x_ptr[u + 1]):
                    if congestion:
                        lk = xlink[x]
                        s = link_free[lk]
                        if s < t:
                            s = t
                        f = s + xdur[x]
                        link_free[lk] = f
                    else:
                        s = t
                        f = t + xdur[x]
                    xs[x] = s
                    xf[x] = f
                    for k in range(xd_ptr[x], xd_ptr[x + 1]):
                        v = xd_nodes[k]
                        if rt[v] < f:
                            rt[v] = f
                        c = cnt[v] - 1
                        cnt[v] = c
                        if c == 0:
                            heappush(heap, (rt[v], n + tp[v]))
            else:  # ---- node v becomes ready on its device
                v = order[code - n]
                d = dev[v]
                if strict:
                    is_ready[v] = True
                elif fifo:
                    heappush(queues[d], (t, code - n))  # (ready time, topo position)
                else:
                    heappush(queues[d], rank[v])
                dirty.append(d)
        for d in dirty:
            if running[d]:
                continue
            if strict:
                sq = seq[d]
                p = nxt[d]
                if p == len(sq) or not is_ready[sq[p]]:
                    continue
                v = sq[p]
                nxt[d] = p + 1
            else:
                q = queues[d]
                if not q:
                    continue
                v = order[heappop(q)[1]] if fifo else by_rank[heappop(q)]
            start[v] = t
            f = t + dur[v]
            fin[v] = f
            running[d] = True
            heappush(heap, (f, tp[v]))

    if done < n:  # only a strict order can stall on a DAG
        _raise_deadlock(placement, seq, nxt)

    start_a = np.asarray(start, dtype=np.float64)
    fin_a = np.asarray(fin, dtype=np.float64)
    xs_a = np.asarray(xs, dtype=np.float64)
    xf_a = np.asarray(xf, dtype=np.float64)
    schedule = Schedule(placement, start_a, fin_a)

    busy = np.bincount(dev_a, weights=dur_a, minlength=D).astype(np.float64)
    lk = xa * D + xb
    link_busy = np.bincount(lk, weights=xdur_a, minlength=D * D).reshape(D, D)
    link_bytes = np.bincount(lk, weights=g.edge_bytes[xe], minlength=D * D).reshape(D, D)
    link_count = np.bincount(lk, minlength=D * D).reshape(D, D).astype(np.int64)
    static = np.bincount(dev_a, weights=g.memory, minlength=D).astype(np.float64)
    peak = _peak_memory(placement, start_a, fin_a, xsrc, xb, xs_a, xf_a)
    return SimResult(
        makespan=float(fin_a.max()) if n else 0.0, schedule=schedule, busy=busy,
        link_bytes=link_bytes, link_busy=link_busy, link_count=link_count,
        xfer_edge=xe.astype(np.int64), xfer_src_dev=xa.astype(np.int64), xfer_dst_dev=xb.astype(np.int64),
        xfer_start=xs_a, xfer_finish=xf_a, static_memory=static, peak_memory=peak,
        policy=policy, congestion=bool(congestion), dedup_transfers=bool(dedup_transfers))


def _raise_deadlock(placement: Placement, seq, nxt) -> None:
    """Name a device whose next node in the given order can never start, and why."""
    g, names = placement.graph, placement.cluster.names
    dev = placement.device.tolist()
    never = set()  # nodes that never ran: at or after their device's pointer
    for d, sq in enumerate(seq):
        never.update(sq[nxt[d]:])
    for d, sq in enumerate(seq):
        if nxt[d] == len(sq):
            continue
        v = sq[nxt[d]]
        why = ""
        for u in g.predecessors(v).tolist():
            if u in never:
                where = ("it comes later in the same device's order" if dev[u] == d
                         else f"it is stuck on {names[dev[u]]!r}")
                why = f"; it needs {g._node(u)} first, but {where}"
                break
        raise InputError(
            f"policy 'order' deadlocks: device {names[d]!r} must run {g._node(v)} next "
            f"(position {nxt[d]} of its order) but it never becomes ready{why}; "
            "the given order contradicts precedence")
    raise AssertionError("simulation stopped early without a blocked device")  # pragma: no cover


def _peak_memory(placement: Placement, start: np.ndarray, fin: np.ndarray, xsrc: np.ndarray,
                 xdst_dev: np.ndarray, xs: np.ndarray, xf: np.ndarray) -> np.ndarray:
    """Dynamic peak memory per device, PARDNN Eq. (2) (see :func:`simulate`)."""
    g, D = placement.graph, placement.cluster.size
    dev = placement.device
    ob = g.output_bytes
    persist = np.bincount(dev, weights=g.persistent_bytes, minlength=D).astype(np.float64)
    # own outputs: [start(u), max(finish u, finish of local consumers, finish of out-transfers))
    end = fin.copy()
    same = dev[g.src] == dev[g.dst]
    np.maximum.at(end, g.src[same], fin[g.dst[same]])
    if xsrc.size:
        np.maximum.at(end, xsrc, xf)
    t_parts = [start, end]
    b_parts = [ob, -ob]
    d_parts = [dev, dev]
    # received tensors: per (u, b): [first transfer start, last consumer of u on b finishes)
    cross = ~same
    if cross.any() and xsrc.size:
        key_e = g.src[cross] * D + dev[g.dst[cross]]
        keys, inv = np.unique(key_e, return_inverse=True)
        r_end = np.full(keys.shape[0], -np.inf)
        np.maximum.at(r_end, inv, fin[g.dst[cross]])
        r_begin = np.full(keys.shape[0], np.inf)
        xkey = xsrc * D + xdst_dev
        np.minimum.at(r_begin, np.searchsorted(keys, xkey), xs)
        u = keys // D
        b = keys % D
        t_parts += [r_begin, r_end]
        b_parts += [ob[u], -ob[u]]
        d_parts += [b, b]
    times = np.concatenate(t_parts)
    delta = np.concatenate(b_parts)
    devs = np.concatenate(d_parts)
    keep = delta != 0
    times, delta, devs = times[keep], delta[keep], devs[keep]
    peak = np.zeros(D)
    if delta.size:
        # frees (delta < 0) before allocations at equal times: half-open intervals
        o = np.lexsort((delta > 0, times, devs))
        delta, devs = delta[o], devs[o]
        cs = np.cumsum(delta)
        first = np.flatnonzero(np.r_[True, devs[1:] != devs[:-1]])
        base = np.r_[0.0, cs][first]  # cumsum before each device's segment
        seg_max = np.maximum.reduceat(cs, first) - base
        peak[devs[first]] = np.maximum(seg_max, 0.0)
    return persist + peak


# ---------------------------------------------------------------------------- validation
def _transfer_arrays(transfers: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(transfers, Mapping):
        try:
            e, s, f = transfers["edge"], transfers["start"], transfers["finish"]
        except KeyError as exc:
            raise InputError(f"transfers: missing key {exc.args[0]!r} (need 'edge', 'start', 'finish')") from None
    else:
        e, s, f = transfers.xfer_edge, transfers.xfer_start, transfers.xfer_finish
    e = np.asarray(e, dtype=np.int64).ravel()
    s = np.asarray(s, dtype=np.float64).ravel()
    f = np.asarray(f, dtype=np.float64).ravel()
    if not (e.shape == s.shape == f.shape):
        raise InputError("transfers: 'edge', 'start' and 'finish' differ in length")
    return e, s, f


def _overlaps(groups: np.ndarray, begin: np.ndarray, end: np.ndarray, tol: float) -> list[tuple[int, int]]:
    """Pairs (earlier, later) of items in the same group whose intervals overlap."""
    o = np.lexsort((end, begin, groups))
    out = []
    gs, bs, es = groups[o].tolist(), begin[o].tolist(), end[o].tolist()
    cur_g, cur_end, cur_item = None, -np.inf, -1
    for k in range(len(o)):
        if gs[k] != cur_g:
            cur_g, cur_end, cur_item = gs[k], es[k], int(o[k])
            continue
        if bs[k] < cur_end - tol:
            out.append((cur_item, int(o[k])))
        if es[k] > cur_end:
            cur_end, cur_item = es[k], int(o[k])
    return out


def validate_schedule(schedule: Schedule, *, congestion: bool = True, transfers: Any = None,
                      tol: float = 1e-9, limit: int = 50) -> list[str]:
    """Check a schedule against SPEC 2.1, independently of how it was produced.

    Checks: start/finish are finite, ``start >= 0`` and ``finish = start + duration`` on
    a device that supports the node; no two nodes overlap on a device; every edge's
    precedence including its transfer time. With ``transfers`` (a :class:`SimResult`
    or a mapping with arrays ``edge``, ``start``, ``finish``), every cross-device edge
    must be carried by a transfer of ``(source node, destination device)`` -- the
    edge's own, or a deduplicated one that lasts at least as long -- that starts after
    the source finishes, lasts its link-model time and ends before the destination
    starts; with ``congestion=True`` transfers on one directed link must not overlap.
    Without ``transfers`` each cross edge needs ``start(v) >= finish(u) + time(u, v)``
    (link occupancy cannot be checked then).

    Parameters
    ----------
    schedule : Schedule
    congestion : bool
        Check link non-overlap (only meaningful with ``transfers``).
    transfers : SimResult or mapping, optional
    tol : float
        Relative tolerance (scaled by ``max(1, makespan)``).
    limit : int
        Report at most this many violations (plus a count of the rest).

    Returns
    -------
    list of str
        Human-readable violations; empty when the schedule is valid.
    """
    pl = schedule.placement
    g, cl = pl.graph, pl.cluster
    names = cl.names
    dev = pl.device
    n = g.n
    msgs: list[str] = []
    start = np.asarray(schedule.start, dtype=np.float64).ravel()
    fin = np.asarray(schedule.finish, dtype=np.float64).ravel()
    if start.shape[0] != n or fin.shape[0] != n:
        return [f"schedule has {start.shape[0]} start / {fin.shape[0]} finish times for {n} nodes"]
    if not (np.all(np.isfinite(start)) and np.all(np.isfinite(fin))):
        i = int(np.flatnonzero(~(np.isfinite(start) & np.isfinite(fin)))[0])
        return [f"{g._node(i)}: start/finish not finite ({start[i]}, {fin[i]})"]
    span = float(fin.max()) if n else 0.0
    eps = tol * max(1.0, abs(span))
    dur = cl.compute_matrix(g)[np.arange(n), dev]

    def node(i: int) -> str:
        return f"{g._node(i)} on {names[dev[i]]}"

    for i in np.flatnonzero(np.isnan(dur)):
        msgs.append(f"{node(i)}: device kind {cl.kinds[dev[i]]!r} is not supported by this node")
    ok = ~np.isnan(dur)
    for i in np.flatnonzero(ok & (np.abs(fin - start - np.nan_to_num(dur)) > eps)):
        msgs.append(f"{node(i)}: runs {fin[i] - start[i]:g} (from {start[i]:g} to {fin[i]:g}) "
                    f"but takes {dur[i]:g}")
    for i in np.flatnonzero(start < -eps):
        msgs.append(f"{node(i)}: starts at negative time {start[i]:g}")
    for a, b in _overlaps(dev, start, fin, eps):
        msgs.append(f"device {names[dev[a]]}: {g._node(a)} [{start[a]:g}, {fin[a]:g}) overlaps "
                    f"{g._node(b)} [{start[b]:g}, {fin[b]:g})")

    src, dst = g.src, g.dst
    same = dev[src] == dev[dst]
    for e in np.flatnonzero(same & (start[dst] < fin[src] - eps)):
        u, v = src[e], dst[e]
        msgs.append(f"{g._edge(e)}: {node(v)} starts at {start[v]:g} before its predecessor "
                    f"finishes at {fin[u]:g}")
    ce = np.flatnonzero(~same)
    tt = cl.transfer_time(dev[src[ce]], dev[dst[ce]], g.edge_bytes[ce], g.edge_cost[ce])
    if transfers is None:
        late = start[dst[ce]] < fin[src[ce]] + tt - eps
        for e, t in zip(ce[late], tt[late], strict=True):
            u, v = src[e], dst[e]
            msgs.append(f"{g._edge(e)}: {node(v)} starts at {start[v]:g} before the transfer "
                        f"from {names[dev[u]]} can arrive ({fin[u]:g} + {t:g})")
    else:
        xe, xs, xf = _transfer_arrays(transfers)
        if xe.size and (xe.min() < 0 or xe.max() >= g.m):
            return msgs + ["transfers: edge id out of range"]
        xu, xv = src[xe], dst[xe]
        xa, xb = dev[xu], dev[xv]
        bad_x = np.flatnonzero(xa == xb)
        for x in bad_x:
            msgs.append(f"transfer #{x} ({g._edge(xe[x])}) joins nodes on the same device")
        xt = cl.transfer_time(xa, xb, g.edge_bytes[xe], g.edge_cost[xe])
        for x in np.flatnonzero(np.abs(xf - xs - xt) > eps):
            msgs.append(f"transfer #{x} ({g._edge(xe[x])}, {names[xa[x]]}->{names[xb[x]]}) lasts "
                        f"{xf[x] - xs[x]:g} but the link model gives {xt[x]:g}")
        for x in np.flatnonzero(xs < fin[xu] - eps):
            msgs.append(f"transfer #{x} ({g._edge(xe[x])}) starts at {xs[x]:g} before its source "
                        f"finishes at {fin[xu[x]]:g}")
        # carrier of each cross edge: its own transfer, else one for (source, dest device)
        own = np.full(g.m, -1, dtype=np.int64)
        own[xe[::-1]] = np.arange(xe.shape[0])[::-1]
        D = cl.size
        xkey = xu * D + xb
        ko = np.argsort(xkey, kind="stable")
        carrier = own[ce]
        need = np.flatnonzero(carrier < 0)
        if need.size and xe.size:
            ks = xkey[ko]
            ekey = src[ce[need]] * D + dev[dst[ce[need]]]
            pos = np.minimum(np.searchsorted(ks, ekey), ks.shape[0] - 1)
            carrier[need] = np.where(ks[pos] == ekey, ko[pos], -1)
        for e in ce[carrier < 0]:
            msgs.append(f"{g._edge(e)}: crosses {names[dev[src[e]]]}->{names[dev[dst[e]]]} "
                        "but no transfer carries it")
        has = carrier >= 0
        e_c, x_c, t_c = ce[has], carrier[has], tt[has]
        early = start[dst[e_c]] < xf[x_c] - eps
        for e, x in zip(e_c[early], x_c[early], strict=True):
            v = dst[e]
            msgs.append(f"{g._edge(e)}: {node(v)} starts at {start[v]:g} before its transfer "
                        f"finishes at {xf[x]:g}")
        short = (xf[x_c] - xs[x_c]) < t_c - eps
        for e, x, t in zip(e_c[short], x_c[short], t_c[short], strict=True):
            msgs.append(f"{g._edge(e)}: carried by transfer #{x} lasting {xf[x] - xs[x]:g} < its "
                        f"own transfer time {t:g}")
        if congestion and xe.size:
            for a, b in _overlaps(xa * D + xb, xs, xf, eps):
                msgs.append(f"link {names[xa[a]]}->{names[xb[a]]}: transfer {g._edge(xe[a])} "
                            f"[{xs[a]:g}, {xf[a]:g}) overlaps transfer {g._edge(xe[b])} "
                            f"[{xs[b]:g}, {xf[b]:g})")
    if len(msgs) > limit:
        msgs = msgs[:limit] + [f"... and {len(msgs) - limit} more violation(s)"]
    return msgs
