"""The simulator's discrete-event loop (see :mod:`dnnplace.evaluation.simulate` for the model).

:func:`run_events` executes a placement given its node durations, transfer tasks and a
dispatch order, and returns node and transfer start/finish times. It is a plain
``heapq`` loop over Python lists built once from numpy arrays:

* an event is ``(time, code)``: code ``p`` is the completion of the node at topological
  position ``p``, code ``n + p`` that node becoming ready. Codes are unique, so the
  order of events never depends on heap internals; events at one time are processed
  together (completions first) before idle devices pick their next node.
* a completing node ``u`` starts its transfer tasks -- once the resources they occupy
  are free (``congestion=True``: FCFS, one transfer at a time per resource; else at
  once) -- and then
  *delivers* to its consumers: a same-device consumer at once, a remote one when the
  transfer carrying the tensor finishes. A node becomes ready when its last arrival
  is delivered, at the latest of its arrival times.
* with a given link order (``link_seq``, congestion on) a completing node only
  *releases* its transfer tasks; every resource serves its sequence strictly in order:
  a task starts at ``max(its resources free, its release)`` once it is released and
  next in the sequence of each of its resources, and then the tasks it unblocked that
  are already released follow at once. A transfer's finish is known when it is
  served, so it delivers to its consumers then (its start is never before the current
  time, so events stay in time order). Without a link order the loop is the FCFS one
  above, unchanged.
* resources (:func:`transfer_resources`): with ``cluster.ports == "per_link"`` a
  transfer occupies its directed link ``a * D + b``; with ``"shared"`` it occupies the
  egress port of ``a`` (resource ``a``) and the ingress port of ``b`` (``D + b``).
"""

from __future__ import annotations

import heapq

import numpy as np

from dnnplace.evaluation.sim_costs import Transfers
from dnnplace.evaluation.sim_policies import device_sequences, raise_deadlock
from dnnplace.graphs.placement import Placement

__all__ = ["run_events", "transfer_resources"]


def transfer_resources(placement: Placement, tx: Transfers) -> tuple[np.ndarray, np.ndarray, int]:
    """The two resources every transfer occupies under congestion, and how many there
    are: per link, its directed link ``a * D + b`` twice (``D * D`` resources); with
    shared ports, the egress port of ``a`` (``a``) and the ingress port of ``b``
    (``D + b``; ``2 * D`` resources)."""
    D = placement.cluster.size
    if placement.cluster.ports == "shared":
        return tx.src_dev.astype(np.int64), (D + tx.dst_dev).astype(np.int64), 2 * D
    link = (tx.src_dev * D + tx.dst_dev).astype(np.int64)
    return link, link, D * D


def _deliveries(placement: Placement, tx: Transfers,
                with_transfers: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSR by source node of the transfers it starts and of the arrivals it delivers.

    Returns ``x_ptr`` (transfers of node ``u`` are ``x_ptr[u]:x_ptr[u+1]``; they are
    sorted by source node) and the delivery CSR ``r_ptr, r_nodes, r_slot``: node ``u``
    delivers to ``r_nodes[k]`` at the finish time of transfer ``r_slot[k]``, or at once
    when ``r_slot[k] == X`` (a same-device successor). Same-device successors come first
    (by edge id), then each transfer's destinations in transfer order. Without
    ``with_transfers`` the CSR holds the same-device successors only (a given link order
    delivers each transfer's destinations when the link serves it).
    """
    g, dev = placement.graph, placement.device
    n, X = g.n, int(tx.edge.shape[0])
    x_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tx.src_node, minlength=n), out=x_ptr[1:])
    same = dev[g.src] == dev[g.dst]
    per_x = np.diff(tx.dst_ptr)
    if not with_transfers:
        per_x = np.zeros_like(per_x)
    keys = np.concatenate([g.src[same], np.repeat(tx.src_node, per_x)])
    nodes = np.concatenate([g.dst[same], tx.dst_nodes if with_transfers else tx.dst_nodes[:0]])
    slots = np.concatenate([np.full(int(same.sum()), X, dtype=np.int64), np.repeat(np.arange(X), per_x)])
    perm = np.argsort(keys, kind="stable")
    r_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=r_ptr[1:])
    return x_ptr, r_ptr, nodes[perm], slots[perm]


def run_events(placement: Placement, dur: np.ndarray, tx: Transfers, by_rank: np.ndarray, *,
               policy: str, congestion: bool,
               link_seq: list[list[int]] | None = None) -> tuple[np.ndarray, ...]:
    """Simulate; return node ``start, finish`` (n,), transfer ``start, finish`` (X,) and
    the nodes' dispatch sequence (n,): ``0..n-1`` in the order devices started them, which
    orders equal starts as the loop did (see :meth:`dnnplace.graphs.placement.Schedule.priorities`).

    Parameters
    ----------
    placement : Placement
    dur : ndarray (n,)
        Compute time of each node on its device.
    tx : Transfers
        Transfer tasks (:func:`dnnplace.evaluation.sim_costs.build_transfers`).
    by_rank : ndarray (n,)
        Nodes in dispatch order (:func:`dnnplace.evaluation.sim_policies.dispatch_order`).
    policy : str
    congestion : bool
    link_seq : list of lists, optional
        Per resource (:func:`transfer_resources`: a directed link ``a * D + b``, or a
        port), its transfer tasks in the order it must serve them
        (:func:`dnnplace.evaluation.sim_policies.link_sequences`); used with ``congestion``
        only (without it transfers overlap and no order applies).

    Raises
    ------
    InputError
        ``policy="order"`` and the per-device sequences (and the link sequences, if
        given) deadlock against precedence.
    """
    g, D = placement.graph, placement.cluster.size
    n, X = g.n, int(tx.edge.shape[0])
    lorder = link_seq is not None and congestion
    x_ptr, r_ptr, r_nodes, r_slot = (a.tolist() for a in _deliveries(placement, tx, not lorder))
    strict, fifo = policy == "order", policy == "fifo"
    rank_a = np.empty(n, dtype=np.int64)
    rank_a[by_rank] = np.arange(n)
    res1, res2, n_res = transfer_resources(placement, tx)
    lists = (dur.tolist(), placement.device.tolist(), g.topo_position.tolist(), g.topo_order.tolist(),
             rank_a.tolist(), by_rank.tolist(), tx.duration.tolist(), res1.tolist(), res2.tolist(),
             x_ptr, r_ptr, r_nodes, r_slot, np.bincount(g.dst, minlength=n).tolist())
    seq = device_sequences(placement, by_rank) if strict else []
    nxt = [0] * D
    links = None
    if lorder:  # (sequence per resource, next position per resource, released flags, destinations CSR)
        links = (link_seq, [0] * n_res, [False] * X, tx.dst_ptr.tolist(), tx.dst_nodes.tolist())
    start, fin, xs, xf, sequence, done = _loop(n, D, X, n_res, lists, seq, nxt, strict, fifo, congestion, links)
    if done < n:  # only a strict order can stall on a DAG
        raise_deadlock(placement, seq, nxt, (tx, links[0], links[1]) if links is not None else None)
    return (np.asarray(start, dtype=np.float64), np.asarray(fin, dtype=np.float64),
            np.asarray(xs, dtype=np.float64), np.asarray(xf[:X], dtype=np.float64),
            np.asarray(sequence, dtype=np.int64))


def _serve(x: int, a: int, b: int, t: float, xdur: list, link_free: list, xs: list, xf: list) -> float:
    """Transfer ``x`` on its resources ``a`` and ``b`` from the later of ``t`` and when both are
    free: record its start and finish in ``xs``/``xf``, hold both resources until it finishes;
    return the finish."""
    s = link_free[a]
    if link_free[b] > s:
        s = link_free[b]
    if s < t:
        s = t
    f = s + xdur[x]
    xs[x] = s
    xf[x] = f
    link_free[a] = f
    link_free[b] = f
    return f


def _loop(n: int, D: int, X: int, n_res: int, lists: tuple, seq: list[list[int]], nxt: list[int],
          strict: bool, fifo: bool, congestion: bool,
          links: tuple | None = None) -> tuple[list, list, list, list, list, int]:
    """The event loop proper, on Python lists (the hot path); advances ``nxt`` (and, with
    a link order, each resource's position) in place."""
    dur, dev, tp, order, rank, by_rank, xdur, xres1, xres2, x_ptr, r_ptr, r_nodes, r_slot, cnt = lists
    lseq = None
    if links is not None:
        lseq, lnxt, xrel, d_ptr, d_nodes = links
    start, fin, rt = [0.0] * n, [0.0] * n, [0.0] * n  # rt: latest arrival so far per node
    sequence = [0] * n  # dispatch position of each node
    dispatched = 0
    xs = [0.0] * X
    xf = [0.0] * (X + 1)  # xf[X]: the current time, when same-device outputs arrive
    is_ready = [False] * n if strict else []
    running = [False] * D
    queues: list[list] = [[] for _ in range(D)]
    link_free = [0.0] * n_res  # per resource (link or port): when it is free
    heappush, heappop = heapq.heappush, heapq.heappop
    heap = [(0.0, n + tp[i]) for i in range(n) if cnt[i] == 0]
    heapq.heapify(heap)
    done = 0
    while heap:
        t = heap[0][0]
        dirty = []
        while heap and heap[0][0] == t:
            code = heappop(heap)[1]
            if code < n:  # ---- node u completes: start its transfers, deliver its outputs
                u = order[code]
                done += 1
                d = dev[u]
                running[d] = False
                dirty.append(d)
                if lseq is not None:  # a given order: release, then serve each resource in order
                    for x in range(x_ptr[u], x_ptr[u + 1]):
                        xrel[x] = True
                        todo = [x]
                        while todo:  # x, then every released transfer that serving one unblocks
                            y = todo.pop()
                            a = xres1[y]
                            b = xres2[y]
                            sa = lseq[a]
                            sb = lseq[b]
                            pa = lnxt[a]
                            pb = lnxt[b]
                            if not xrel[y] or pa == len(sa) or sa[pa] != y or pb == len(sb) or sb[pb] != y:
                                continue  # not released, or an earlier transfer of a resource is not
                            f = _serve(y, a, b, t, xdur, link_free, xs, xf)
                            for k in range(d_ptr[y], d_ptr[y + 1]):
                                v = d_nodes[k]
                                if rt[v] < f:
                                    rt[v] = f
                                c = cnt[v] - 1
                                cnt[v] = c
                                if c == 0:
                                    heappush(heap, (rt[v], n + tp[v]))
                            lnxt[a] = pa + 1
                            if b != a:
                                lnxt[b] = pb + 1
                                if pb + 1 < len(sb):
                                    todo.append(sb[pb + 1])
                            if pa + 1 < len(sa):
                                todo.append(sa[pa + 1])
                elif congestion:  # FCFS: each transfer as soon as its resources are free
                    for x in range(x_ptr[u], x_ptr[u + 1]):
                        _serve(x, xres1[x], xres2[x], t, xdur, link_free, xs, xf)
                else:  # transfers overlap freely
                    for x in range(x_ptr[u], x_ptr[u + 1]):
                        xs[x] = t
                        xf[x] = t + xdur[x]
                xf[X] = t
                for k in range(r_ptr[u], r_ptr[u + 1]):
                    v = r_nodes[k]
                    a = xf[r_slot[k]]
                    if rt[v] < a:
                        rt[v] = a
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
            sequence[v] = dispatched
            dispatched += 1
            f = t + dur[v]
            fin[v] = f
            running[d] = True
            heappush(heap, (f, tp[v]))
    return start, fin, xs, xf, sequence, done
