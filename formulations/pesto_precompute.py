r"""What the Pesto ILP (:mod:`dnnplace.formulations.pesto_ip`) is built from: its options
(:class:`PestoOptions`, which also decide what is precomputed) and the instance-side
precomputation: reachability, heads and tails, time windows, and the node and transfer
pairs that need an order variable; the result, :class:`PestoData`, is kept on the model
as ``model.pesto``.

A pair ordered by precedence (one reaches the other) or by its time windows (valid for
every schedule of makespan ``<= U``: op ``i`` inside ``[h_i, U - q_i]``, transfer ``(i, j)``
inside ``[h_i + pmin_i, U - q_j - pmin_j]``) gets no order variable: the reduction is exact.

Heads and tails (:func:`heads_tails`) are longest paths of least compute times; with
``comm_windows`` (default) each is raised to the transfer-aware and energetic ones of
:func:`strong_heads_tails`, which hold for every schedule of every placement as well:
fewer unordered pairs, smaller big-Ms, and the row
:math:`C_{\max} \ge C_i + q_i` for every op.

>>> import numpy as np
>>> from dnnplace.graphs.graph import OpGraph
>>> g = OpGraph.from_ids([0, 1, 2], [(0, 1), (1, 2)], kinds=("gpu",), compute=np.ones((3, 1)),
...                      memory=np.zeros(3))
>>> from dnnplace.graphs.reach import reachability
>>> reachability(g).astype(int).tolist()
[[0, 1, 1], [0, 0, 1], [0, 0, 0]]
>>> [h.tolist() for h in heads_tails(g, np.array([1.0, 2.0, 3.0]))]
[[0.0, 1.0, 3.0], [5.0, 3.0, 0.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.reach import reachability

__all__ = ["PestoOptions", "PestoData", "heads_tails", "strong_heads_tails", "prepare", "edge_messages",
           "message_time"]


@dataclass(frozen=True)
class PestoOptions:
    """Switchable constraint families of the Pesto ILP."""

    congestion: bool = True
    memory: bool = True
    colocation: bool = True
    symmetry: bool = True
    load_cuts: bool = True
    comm_windows: bool = True  # transfer-aware, energetic heads and tails (strong_heads_tails)


@dataclass(eq=False)
class PestoData:
    """Everything the builder derived from the instance (kept on ``model.pesto``)."""

    graph: OpGraph
    cluster: Cluster
    options: PestoOptions
    horizon: float
    p: np.ndarray            # (n, D) compute times, NaN = not allowed
    allowed: list            # per node: allowed device list
    head: np.ndarray
    tail: np.ndarray
    pmin: np.ndarray
    reach: np.ndarray        # (n, n) bool, u reaches v (u != v)
    cross_edges: list        # edges that may cross devices
    node_pairs: list         # (i, k) pairs with an order variable
    same_pairs: list         # (i, k) pairs with a same-device variable
    xfer_pairs: list         # (e, f) pairs with a link order variable
    group_leader: np.ndarray  # colocation leader per node (itself if none)
    same_set: frozenset = frozenset()
    messages: np.ndarray | None = None  # per edge, the messages it stands for when it crosses (edge_messages)


def heads_tails(graph: OpGraph, pmin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longest paths of minimum compute times into each node (``head``, the node itself
    excluded) and out of it (``tail``, excluding it): ``h_i <= S_i`` and ``C_i <= U - q_i`` on
    every schedule of makespan ``<= U`` (the big-M derivation of
    :mod:`dnnplace.formulations.pesto_ip`)."""
    head = np.zeros(graph.n)
    tail = np.zeros(graph.n)
    hp, tp_ = head.tolist(), tail.tolist()
    pm = pmin.tolist()
    ip, inb = graph.in_ptr.tolist(), graph.in_nbr.tolist()
    op, onb = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    order = graph.topo_order.tolist()
    for v in order:
        best = 0.0
        for k in range(ip[v], ip[v + 1]):
            u = inb[k]
            best = max(best, hp[u] + pm[u])
        hp[v] = best
    for u in reversed(order):
        best = 0.0
        for k in range(op[u], op[u + 1]):
            w = onb[k]
            best = max(best, tp_[w] + pm[w])
        tp_[u] = best
    return np.asarray(hp), np.asarray(tp_)


def strong_heads_tails(graph: OpGraph, cluster: Cluster,
                       reach: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Heads :math:`\rho_v \le S_v` and tails :math:`\tau_v` (:math:`C_v \le C_{\max} - \tau_v`)
    that hold for every schedule of every placement, any link order, either transfer
    mode: the transfer-aware heads and tails of
    :func:`~dnnplace.evaluation.bounds.comm_heads_and_tails` (a node's inputs all on
    its device run one at a time before it, else one arrives a least transfer after its
    producer ends), raised by the energy of the ancestors (descendants) shared by the
    devices that can run some node
    (:func:`~dnnplace.formulations.kept_subgraph.energy_heads_tails`). Both are at least
    :func:`heads_tails` of the least times over all devices; they use least times over all
    devices, so they hold under any affinity, memory or colocation restriction too.
    ``reach``: :func:`~dnnplace.graphs.reach.reachability` of ``graph``, if already computed.

    >>> g = OpGraph.from_ids([0, 1, 2], [(0, 2), (1, 2)], kinds=("gpu",), compute=np.ones((3, 1)),
    ...                      memory=np.zeros(3))
    >>> # 2 waits for 0 and 1: both on its GPU (2) or one sent over NVLink (1 + 0.01)
    >>> [h.tolist() for h in strong_heads_tails(g, Cluster.single_host(2, with_cpu=False))]
    [[0.0, 0.0, 1.01], [1.0, 1.0, 0.0]]
    """
    from dnnplace.evaluation.bounds import comm_heads_and_tails
    from dnnplace.formulations.kept_subgraph import energy_heads_tails

    w, r, q = comm_heads_and_tails(graph, cluster)
    reach = reachability(graph) if reach is None else reach
    return energy_heads_tails(graph, cluster, np.arange(graph.n), w, r, q, anc=reach.T, desc=reach)


def edge_messages(graph: OpGraph, messages: np.ndarray | None = None) -> np.ndarray:
    """Per edge, how many messages it stands for when it crosses devices: ``messages``
    checked (finite, ``>= 0``, one per edge), or 1 per edge (Pesto's accounting, the
    simulator's ``transfer_mode="per_edge"``); a coarse edge may stand for several
    (:func:`~dnnplace.formulations.multilevel.exact.coarse_messages`)."""
    if messages is None:
        return np.ones(graph.m)
    w = np.asarray(messages, dtype=np.float64)
    if w.shape != (graph.m,) or not np.all(np.isfinite(w) & (w >= 0)):
        raise InputError(f"messages: expected {graph.m} finite counts >= 0, one per edge")
    return w


def message_time(graph: OpGraph, cluster: Cluster, device: np.ndarray,
                 messages: np.ndarray | None = None) -> np.ndarray:
    r"""Per node, the device time its messages add under the models' accounting
    (docs/semantics.md 2.1, per-message costs, with one message per crossing edge, or
    ``messages[e]``): node :math:`v` on device :math:`d` pays
    :math:`\sigma_d \sum_{e=(v,w)} w_e z_e + \rho_d \sum_{e=(u,v)} w_e z_e` with
    :math:`z_e = 1` iff ``e`` crosses devices, :math:`\sigma` the ``send_overhead`` and
    :math:`\rho` the ``recv_overhead``. With one message per edge this is the simulator's
    :func:`~dnnplace.evaluation.sim_costs.message_overheads` under ``"per_edge"``.

    >>> from dnnplace.graphs.cluster import Device
    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["cpu"], compute=[[1.0]] * 3, memory=[0] * 3)
    >>> c = Cluster.from_links([Device("p", "cpu", send_overhead=0.5), Device("q", "cpu", recv_overhead=0.25)])
    >>> message_time(g, c, np.array([0, 1, 1])).tolist()
    [1.0, 0.25, 0.25]
    """
    dev = np.asarray(device, dtype=np.int64)
    out = np.zeros(graph.n)
    if not cluster.has_message_costs or graph.m == 0:
        return out
    w = edge_messages(graph, messages)
    a, b = dev[graph.src], dev[graph.dst]
    c = a != b
    out += np.bincount(graph.src[c], weights=cluster.send_overhead[a[c]] * w[c], minlength=graph.n)
    out += np.bincount(graph.dst[c], weights=cluster.recv_overhead[b[c]] * w[c], minlength=graph.n)
    return out


def prepare(graph: OpGraph, cluster: Cluster, options: PestoOptions, horizon: float,
            messages: np.ndarray | None = None) -> PestoData:
    """Everything the builder needs from the instance: allowed devices (affinity, memory,
    colocation), heads and tails, reachability, the edges that may cross devices, and the
    node and transfer pairs left unordered by precedence and by the time windows of a
    schedule of makespan ``<= horizon`` (the pairs that get order variables);
    ``messages``: :func:`edge_messages`. Heads, tails and windows use compute and
    transfer times alone: message costs only lengthen a schedule, so they stay valid."""
    n = graph.n
    messages = edge_messages(graph, messages)
    p = cluster.compute_matrix(graph)
    allowed = [np.flatnonzero(~np.isnan(p[i])).tolist() for i in range(n)]
    if options.memory:
        big = graph.memory[:, None] > cluster.memory[None, :]
        allowed = [[d for d in allowed[i] if not big[i, d]] for i in range(n)]
    leader = np.arange(n)
    if options.colocation and n:
        co = graph.colocation
        for grp in np.unique(co[co >= 0]).tolist():
            mem = np.flatnonzero(co == grp)
            leader[mem] = mem[0]
            common = set(allowed[mem[0]])
            for i in mem[1:].tolist():
                common &= set(allowed[i])
            for i in mem.tolist():
                allowed[i] = sorted(common)
    empty = [i for i in range(n) if not allowed[i]]
    if empty:
        raise InputError(f"{graph._node(empty[0])}: no device can run it (affinity, memory or colocation)")
    pmin = np.array([np.nanmin(p[i, allowed[i]]) for i in range(n)]) if n else np.zeros(0)
    head, tail = heads_tails(graph, pmin)
    reach = reachability(graph)
    if options.comm_windows and n:
        rho, tau = strong_heads_tails(graph, cluster, reach)
        head, tail = np.maximum(head, rho), np.maximum(tail, tau)
    asets = [set(a) for a in allowed]

    def forced_same(i: int, k: int) -> bool:
        if leader[i] == leader[k]:
            return True
        return len(asets[i]) == 1 and asets[i] == asets[k]

    cross = [e for e in range(graph.m) if not forced_same(int(graph.src[e]), int(graph.dst[e]))]
    # time windows valid for every schedule of makespan <= U: op i occupies
    # [head_i, U - tail_i]; transfer (i, j) occupies [head_i + pmin_i, U - tail_j - pmin_j]
    n_lo, n_hi = head, horizon - tail
    # node pairs: incomparable, able to share a device, windows overlap
    unordered = ~(reach | reach.T)
    iu, ku = np.nonzero(np.triu(unordered, k=1))
    node_pairs = [(int(i), int(k)) for i, k in zip(iu.tolist(), ku.tolist())
                  if asets[i] & asets[k] and n_lo[i] < n_hi[k] and n_lo[k] < n_hi[i]]
    same = {pair for pair in node_pairs if not forced_same(*pair)}
    xfer_pairs = []
    if options.congestion:
        src, dst = graph.src, graph.dst
        x_lo = {e: head[src[e]] + pmin[src[e]] for e in cross}
        x_hi = {e: horizon - tail[dst[e]] - pmin[dst[e]] for e in cross}
        for a_idx in range(len(cross)):
            e = cross[a_idx]
            i, j = int(src[e]), int(dst[e])
            for f in cross[a_idx + 1:]:
                k, l_ = int(src[f]), int(dst[f])
                if j == k or l_ == i or reach[j, k] or reach[l_, i]:
                    continue  # ordered by precedence
                if x_hi[e] <= x_lo[f] or x_hi[f] <= x_lo[e]:
                    continue  # ordered by their time windows
                common_src = asets[i] & asets[k]
                common_dst = asets[j] & asets[l_]
                if not common_src or not common_dst:
                    continue
                if len(common_src) == 1 and common_src == common_dst:
                    continue  # no link both can use
                xfer_pairs.append((e, f))
                for u, w in ((i, k), (j, l_)):
                    if u != w and not forced_same(u, w):
                        same.add((min(u, w), max(u, w)))
    return PestoData(graph, cluster, options, float(horizon), p, allowed, head, tail, pmin, reach, cross,
                     node_pairs, sorted(same), xfer_pairs, leader, frozenset(same), messages)
