r"""Lower bounds that no placement beats, for the makespan (docs/semantics.md 2.1) and the single-sample
latency (docs/semantics.md 2.3). The evaluator reports the makespan bound with every makespan; the
Pesto ILP and the latency IP start their objective from them, so a solver that cannot
finish its root relaxation still certifies a gap.

Latency: the path segmentation bound
-------------------------------------
Take any path :math:`P = v_1 \to \dots \to v_L` of the graph. In a split with at most
``q`` contiguous pieces per accelerator (the latency IP's feasible set, Tarnawski et al.
Figs. 3-4), each piece meets :math:`P` in one stretch of consecutive nodes (a node of
:math:`P` between two nodes of a contiguous piece lies on a path between them, so in the
piece), CPU nodes are units of their own, and the units :math:`P` passes through form a
chain of the unit graph: each starts after the one before it finishes. The latency is
therefore at least the sum of their durations, and a piece's duration is at least its
stretch's compute time plus the host transfer of the edge by which :math:`P` enters it
and of the edge by which it leaves (the evaluator's CommIn and CommOut, grouped per
source node, include them). With at most :math:`q \cdot K` stretches on the :math:`K`
accelerators, each stretch's memory within the largest accelerator memory, and every
other node ignored, the cheapest such segmentation of :math:`P` is a lower bound:

.. math::

    f_{j}(s) = \min\Big(f_{j-1}(s) + p_{cpu}(v_j),\;
               \min_{i \le j} f_{i-1}(s-1) + c^{in}_{i} + \sum_{k=i}^{j} p_{acc}(v_k)
               + c^{out}_{j}\Big), \qquad \text{bound} = \min_s f_L(s),

an O(L^2 qK) dynamic program (the inner sum stops at the memory limit). It is evaluated
on a few longest paths (by minimum time, by memory, by accelerator and by CPU time) and
the largest value is kept; it is never below the critical path of minimum times. Its
gaps on Tarnawski's Table 4: results/tarnawski-latency-cert.md, "Previous figures: path
segmentation bound".
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel, tlevel

__all__ = ["makespan_lower_bound", "latency_lower_bound", "work_lower_bound", "maxload_lower_bound",
           "critical_path_lower_bound", "heads_tails_lower_bound", "heads_and_tails", "comm_heads_and_tails",
           "capable_devices"]

#: The heads-and-tails bound tries at most this many thresholds per axis (quantiles of the
#: heads and of the tails when there are more distinct values; any choice is valid).
HT_LEVELS = 1024


def _min_times(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Each node's least compute time over the devices that can run it (0 if none can)."""
    comp = cluster.compute_matrix(graph)
    w = np.where(np.isnan(comp), np.inf, comp).min(axis=1)
    return np.where(np.isfinite(w), w, 0.0)


def capable_devices(graph: OpGraph, cluster: Cluster) -> int:
    """How many devices of ``cluster`` can run some node of ``graph`` (a CPU beside GPUs,
    for a graph with GPU times only, runs none and takes no share of the work)."""
    return int(np.count_nonzero(np.isfinite(cluster.compute_matrix(graph)).any(axis=0)))


def work_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """The busiest device's share of the total work, :math:`\\tfrac{1}{m}\\sum_v
    \\underline w(v)` over the :math:`m` devices that can run some node
    (:func:`capable_devices`): no makespan, max-load or pipeline stage time beats it, and it
    also holds for answers on a graph whose operators were split or replicated over the
    batch (the parts of an operator together never do less work than it).

    >>> g = OpGraph(ids=list("ab"), kinds=["gpu"], compute=[[3.0], [1.0]], memory=[0, 0], src=[0], dst=[1])
    >>> work_lower_bound(g, Cluster.single_host(2, with_cpu=False))
    2.0
    >>> work_lower_bound(g, Cluster.single_host(2))  # the host CPU runs no node of a GPU-only graph
    2.0
    """
    m = capable_devices(graph, cluster) if graph.n else 0
    if m == 0:
        return 0.0
    return float(_min_times(graph, cluster).sum()) / m


def critical_path_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """The critical path of least compute times (no transfers): no makespan or
    single-sample latency of ``graph`` beats it."""
    if graph.n == 0:
        return 0.0
    return float(blevel(graph, kind=_min_times(graph, cluster), comm=0.0).max())


def maxload_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """A max-load (time per sample of a pipeline, docs/semantics.md 2.2: PipeDream, GPipe or overlap
    objective, with or without replicated stages) no placement beats: the busiest
    device's share of the work (:func:`work_lower_bound`; every variant's load of a
    device is at least the compute time of its nodes, and a stage replicated on ``r``
    devices serves ``1/r`` of the samples on each)."""
    return work_lower_bound(graph, cluster)


def heads_and_tails(graph: OpGraph, cluster: Cluster, comm: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(w, r, q)``: each node's least time :math:`\\underline w(v)` over the devices that
    can run it, its *head* :math:`r_v` (no schedule starts :math:`v` earlier) and its
    *tail* :math:`q_v` (no schedule of makespan :math:`T` ends :math:`v` later than
    :math:`T - q_v`). ``comm=False``: the longest path of least times from a source to
    :math:`v` (:math:`v` excluded) and :math:`\\operatorname{blevel}_{\\underline w}(v) -
    \\underline w(v)`, transfers left out; ``comm=True`` (default): those of
    :func:`comm_heads_and_tails`, at least as large, which count the transfers a node's
    inputs (outputs) cannot all avoid. Both hold for every placement."""
    if comm:
        return comm_heads_and_tails(graph, cluster)
    w = _min_times(graph, cluster)
    r = tlevel(graph, kind=w, comm=0.0)
    q = blevel(graph, kind=w, comm=0.0) - w
    return w, r, np.maximum(q, 0.0)


def _edge_least_transfer(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Each edge's least link time between two distinct devices that can run some node
    (0 with fewer than two such devices): what a consumer placed apart from its producer
    waits at least, after the producer ends, for this edge's tensor."""
    cap = np.flatnonzero(np.isfinite(cluster.compute_matrix(graph)).any(axis=0))
    if cap.size < 2 or graph.m == 0:
        return np.zeros(graph.m)
    best = np.full(graph.m, np.inf)
    for a in cap.tolist():
        for b in cap.tolist():
            if a != b:
                t = cluster.transfer_time(np.full(graph.m, a), np.full(graph.m, b), graph.edge_bytes, graph.edge_cost)
                best = np.minimum(best, t)
    return np.maximum(best, 0.0)


def _one_device(release: list[float], work: list[float]) -> float:
    """When the last of jobs with these releases and works ends at the earliest on one
    device: earliest release first, :math:`\\max_k \\rho_{(k)} + \\sum_{i \\ge k} w_{(i)}`."""
    t = 0.0
    for rel, p in sorted(zip(release, work, strict=True)):
        t = max(t, rel) + p
    return t


def _side(ends: list[float], lat: list[float], work: list[float], cap: int = 256) -> float:
    """:math:`\\min_j \\max(\\kappa_j, L(B_j))` of :func:`comm_heads_and_tails`: the
    neighbours sorted by ``ends[u] + lat[u]`` (:math:`\\kappa`) decreasing, :math:`B_j` the
    first :math:`j - 1` of them, :math:`L` :func:`_one_device` of their ``ends - work``
    (releases) and ``work``; after ``cap`` prefixes the rest counts as :math:`L(B_{cap})`."""
    order = sorted(range(len(ends)), key=lambda u: -(ends[u] + lat[u]))
    best = float("inf")
    rel, wk = [], []
    for j, u in enumerate(order):
        if j >= cap:
            return min(best, _one_device(rel, wk))
        best = min(best, max(ends[u] + lat[u], _one_device(rel, wk)))
        rel.append(ends[u] - work[u])
        wk.append(work[u])
    return min(best, _one_device(rel, wk))


def comm_heads_and_tails(graph: OpGraph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(w, r, q)`` as :func:`heads_and_tails`, with heads and tails that count transfers
    where a placement cannot avoid them all. Head of ``v`` with predecessors ``P``, each
    ``u`` with head :math:`r_u`, least time :math:`w_u` and least transfer
    :math:`t_{uv}` of its edges into ``v`` (:func:`_edge_least_transfer`; the largest over
    parallel edges): in any schedule let :math:`A \\subseteq P` be the predecessors on
    ``v``'s device. Those outside :math:`A` deliver after their end plus a transfer, so
    :math:`s_v \\ge r_u + w_u + t_{uv}` for :math:`u \\notin A`; those in :math:`A` run one
    at a time on one device before :math:`s_v`, each from its head on, so
    :math:`s_v \\ge L(A)`, the earliest end of :math:`A` on one device (:func:`_one_device`).
    Sorting :math:`P` by :math:`\\kappa_u = r_u + w_u + t_{uv}` decreasing and taking
    :math:`j` the first position not in :math:`A` (:math:`j = |P| + 1` when all are,
    :math:`\\kappa = 0` there), :math:`B_j`, the first :math:`j - 1`, lie in :math:`A` and
    :math:`L` only grows with the job set, so

    .. math::  s_v \\ge \\min_{j} \\max(\\kappa_j, L(B_j)) =: r_v,

    at least the path head (each term is at least :math:`\\max_u r_u + w_u`). Tails are
    the mirror image over successors (their tails as delivery times). Transfers are
    taken at their least link time and without queueing, so both hold under any
    congestion, transfer mode and placement. O(sum over nodes of deg^2 log deg), the
    prefixes capped at 256 per node (:func:`_side`)."""
    w = _min_times(graph, cluster)
    t = _edge_least_transfer(graph, cluster)
    n = graph.n
    r, q = np.zeros(n), np.zeros(n)
    wl = w.tolist()
    for forward, out in ((True, r), (False, q)):
        ptr, nbr, eid = (graph.in_ptr, graph.in_nbr, graph.in_eid) if forward else \
            (graph.out_ptr, graph.out_nbr, graph.out_eid)
        order = graph.topo_order if forward else graph.topo_order[::-1]
        for v in order.tolist():
            lo, hi = int(ptr[v]), int(ptr[v + 1])
            if hi == lo:
                continue
            lat: dict[int, float] = {}
            for u, e in zip(nbr[lo:hi].tolist(), eid[lo:hi].tolist(), strict=True):
                lat[u] = max(lat.get(u, 0.0), float(t[e]))
            us = list(lat)
            if len(us) == 1:
                u = us[0]
                out[v] = out[u] + wl[u]
                continue
            ends = [out[u] + wl[u] for u in us]
            out[v] = _side(ends, [lat[u] for u in us], [wl[u] for u in us])
    return w, r, q


def _thresholds(x: np.ndarray, levels: int) -> np.ndarray:
    """Candidate thresholds, ascending: the distinct values of ``x``, or ``levels`` of
    its quantiles (values of ``x``) when it has more; always its minimum."""
    u = np.unique(x)
    if u.shape[0] <= levels:
        return u
    return np.unique(np.quantile(x, np.linspace(0.0, 1.0, levels), method="inverted_cdf"))


def heads_tails_lower_bound(graph: OpGraph, cluster: Cluster, levels: int = HT_LEVELS) -> float:
    """The heads-and-tails bound of parallel-machine scheduling (see
    :func:`makespan_lower_bound`): :math:`\\max_{a,b}\\, a + b + W(S(a,b))/m` over
    thresholds ``a`` among the heads and ``b`` among the tails (at most ``levels`` of
    each: all distinct values, else quantiles), where
    :math:`S(a,b) = \\{v : r_v \\ge a,\\ q_v \\ge b\\} \\ne \\emptyset` and ``m`` counts the devices
    that can run some node, and at least the longest :math:`r_v + \\underline w(v) + q_v`
    (heads and tails of :func:`heads_and_tails`). O(n log n + levels^2) after the heads
    and tails: nodes are binned by their largest threshold at or below their head and
    tail, and :math:`W` is a suffix sum over both axes of the bins.

    >>> g = OpGraph(ids=list("abcd"), kinds=["gpu"], compute=[[1.0], [1.0], [1.0], [1.0]], memory=[0] * 4,
    ...             src=[0, 0, 0], dst=[1, 2, 3])
    >>> heads_tails_lower_bound(g, Cluster.single_host(2, with_cpu=False))  # a = 1: b, c, d after a, 3 / 2
    2.5
    """
    if graph.n == 0:
        return 0.0
    w, r, q = heads_and_tails(graph, cluster)
    m = capable_devices(graph, cluster)
    if m == 0:
        return 0.0
    through = float((r + w + q).max())  # a node's head, its own time and its tail
    A, B = _thresholds(r, levels), _thresholds(q, levels)
    ia = np.searchsorted(A, r, side="right") - 1  # the largest threshold <= r_v (A[0] = min r)
    ib = np.searchsorted(B, q, side="right") - 1
    cell, size = ia * B.shape[0] + ib, A.shape[0] * B.shape[0]

    def suffix(x: np.ndarray) -> np.ndarray:  # [i, j] = the sum over bins (>= i, >= j)
        return x.reshape(A.shape[0], -1)[::-1, ::-1].cumsum(axis=0).cumsum(axis=1)[::-1, ::-1]

    W = suffix(np.bincount(cell, weights=w, minlength=size))  # W[i, j] = W(S(A[i], B[j]))
    val = np.where(suffix(np.bincount(cell, minlength=size)) > 0, A[:, None] + B[None, :] + W / m, -np.inf)
    return max(through, float(val.max()))


def makespan_lower_bound(graph: OpGraph, cluster: Cluster) -> float:
    """A makespan no schedule of ``graph`` on ``cluster`` beats (docs/semantics.md 2.1: any placement,
    device order and link order, with or without congestion, either transfer mode, static
    or dynamic memory): with :math:`\\underline w(v)` the node's least compute time over
    the devices that can run it (overhead included), heads :math:`r_v` and tails
    :math:`q_v` of :func:`heads_and_tails` (which count the transfers a node's inputs or
    outputs cannot all avoid, :func:`comm_heads_and_tails`) and :math:`m` the number of
    devices that can run some node, the larger of the critical path of
    :math:`\\underline w`, the longest head-node-tail and the heads-and-tails bound:

    .. math::  \\max\\Big(\\max_v \\operatorname{blevel}_{\\underline w}(v),\\;
               \\max_v r_v + \\underline w(v) + q_v,\\;
               \\max_{a, b}\\; a + b + \\tfrac{1}{m} \\sum_{v \\in S(a,b)} \\underline w(v)\\Big),
               \\qquad S(a,b) = \\{v : r_v \\ge a,\\ q_v \\ge b\\}.

    Why it holds: in a schedule of makespan :math:`T` every node starts at or after
    :math:`r_v`, takes at least :math:`\\underline w(v)` and ends at or before
    :math:`T - q_v`; so every node of :math:`S(a,b)` runs inside :math:`[a, T - b]`,
    where the :math:`m` devices, one node at a time each, do at most :math:`m (T - a - b)`
    of work, while the nodes of :math:`S(a,b)` need at least
    :math:`\\sum_{v \\in S(a,b)} \\underline w(v)` (:math:`S(a,b)` not empty: an empty set
    puts no node in the window, and is skipped). :math:`a = b = 0` gives the busiest
    device's share of the total work, :math:`\\tfrac{1}{m}\\sum_v \\underline w(v)`
    (:func:`work_lower_bound`; devices that can run no node, such as a host CPU beside the
    GPUs of a GPU-only graph, take no share); the thresholds tried are those of
    :func:`heads_tails_lower_bound` (a subset of all pairs is still valid).

    Memory is left out, and transfers count only where heads and tails see them;
    :func:`dnnplace.formulations.makespan_relaxation.makespan_relaxation_bound` adds placement,
    transfers and memory on a kept subgraph, at a solver's cost. Near-linear in practice
    (:func:`comm_heads_and_tails`, then O(n log n + levels^2)), cheap enough for every evaluation. The
    evaluator reports it with every makespan (``lower_bound``).

    >>> g = OpGraph(ids=list("abc"), kinds=["gpu"], compute=[[2.0], [1.0], [1.0]], memory=[0, 0, 0],
    ...             src=[0], dst=[1])
    >>> makespan_lower_bound(g, Cluster.single_host(2, with_cpu=False))  # chain a -> b: 3; work 4 / 2
    3.0
    """
    if graph.n == 0:
        return 0.0
    return max(critical_path_lower_bound(graph, cluster), work_lower_bound(graph, cluster),
               heads_tails_lower_bound(graph, cluster))


def _heaviest_path(graph: OpGraph, w: np.ndarray) -> tuple[list[int], list[int]]:
    """A source-to-sink path of maximum total ``w`` (nodes, and the edges between them)."""
    bl = blevel(graph, kind=w, comm=0.0)
    sources = np.flatnonzero(np.bincount(graph.dst, minlength=graph.n) == 0)
    v = int(sources[np.argmax(bl[sources])])
    nodes, edges = [v], []
    ptr, nbr, eid = graph.out_ptr, graph.out_nbr, graph.out_eid
    while ptr[v] < ptr[v + 1]:
        k = int(ptr[v] + np.argmax(bl[nbr[ptr[v]:ptr[v + 1]]]))
        edges.append(int(eid[k]))
        v = int(nbr[k])
        nodes.append(v)
    return nodes, edges


def _segmentation(nodes: list[int], c_in: list[float], c_out: list[float], p_cpu: np.ndarray, p_acc: np.ndarray,
                  mem: np.ndarray, cap: float, stretches: int) -> float:
    """The path segmentation DP of the module docstring (``c_in[k]`` / ``c_out[k]``: the
    host transfer of the path's edge into / out of node ``k``'s stretch, 0 at the ends)."""
    L = len(nodes)
    pc, pa, mm = p_cpu[nodes].tolist(), p_acc[nodes].tolist(), mem[nodes].tolist()
    inf = float("inf")
    f = [[inf] * (stretches + 1) for _ in range(L + 1)]
    f[0][0] = 0.0
    for j in range(L):
        for s in range(stretches + 1):
            base = f[j][s]
            if base == inf:
                continue
            if pc[j] < inf and base + pc[j] < f[j + 1][s]:
                f[j + 1][s] = base + pc[j]
            if s == stretches:
                continue
            t, used = base + c_in[j], 0.0
            for k in range(j, L):
                used += mm[k]
                if pa[k] == inf or used > cap:
                    break
                t += pa[k]
                if t + c_out[k] < f[k + 1][s + 1]:
                    f[k + 1][s + 1] = t + c_out[k]
    return min(f[L])


def latency_lower_bound(graph: OpGraph, cluster: Cluster, q: int = 1) -> float:
    """A latency no split of ``graph`` with at most ``q`` contiguous pieces per
    accelerator beats (the path segmentation bound of the module docstring); ``0`` for an
    empty graph, the critical path of minimum times when no path needs more.

    >>> g = OpGraph(ids=list("abc"), kinds=["acc", "cpu"], compute=[[1.0, 4.0]] * 3, memory=[2, 2, 2],
    ...             src=[0, 1], dst=[1, 2], edge_cost=[3.0, 3.0])
    >>> cl = Cluster.tarnawski(2, 1, 4)   # two accelerators of 4 B: a chain of 6 B needs both, or the CPU
    >>> latency_lower_bound(g, cl)        # a, b on one (2 + 3 out), c on the other (3 in + 1): 9
    9.0
    """
    if graph.n == 0:
        return 0.0
    comp = cluster.compute_matrix(graph)
    accs = [d for d in range(cluster.size) if cluster.kinds[d] != "cpu"]
    cpus = cluster.devices_of_kind("cpu")
    inf = np.inf
    runs = np.where(np.isnan(comp), inf, comp)  # a device that cannot run a node takes forever
    p_cpu = runs[:, cpus].min(axis=1, initial=inf)
    p_acc = runs[:, accs].min(axis=1, initial=inf)
    cap = float(np.max(cluster.memory[accs])) if accs else 0.0
    # host transfer of each edge into / out of an accelerator: its explicit cost, else the
    # cheapest link between an accelerator and the host (the first CPU; without one, another accelerator)
    hosts = [int(cpus[0])] if cpus.size else accs
    pairs_in = [(h, a) for h in hosts for a in accs if h != a]
    pairs_out = [(a, h) for h in hosts for a in accs if h != a]

    def link_cost(pairs: list) -> np.ndarray:
        if not pairs:
            return np.zeros(graph.m)
        model = np.min([cluster.beta0[a, b] + cluster.beta1[a, b] * graph.edge_bytes for a, b in pairs], axis=0)
        return np.where(np.isnan(graph.edge_cost), model, graph.edge_cost)

    e_in, e_out = link_cost(pairs_in), link_cost(pairs_out)
    w_min = np.fmin(p_cpu, p_acc)
    best = float(blevel(graph, kind=np.where(np.isfinite(w_min), w_min, 0.0), comm=0.0).max())
    for w in (w_min, graph.memory.astype(np.float64), p_acc, p_cpu):
        nodes, edges = _heaviest_path(graph, np.where(np.isfinite(w), w, 0.0))
        c_in = [0.0] + [float(e_in[e]) for e in edges]
        c_out = [float(e_out[e]) for e in edges] + [0.0]
        best = max(best, _segmentation(nodes, c_in, c_out, p_cpu, p_acc, graph.memory, cap, q * len(accs)))
    return best
