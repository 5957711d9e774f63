"""List scheduling for the makespan problem (docs/semantics.md 2.1): HEFT, ETF and Baechi's m-TOPO,
m-ETF and m-SCT.

Every algorithm builds a schedule node by node on a model of the cluster that matches
the simulator's semantics: a device runs one node at a time; an edge whose ends lie on
devices ``a != b`` is a transfer of ``cluster.transfer_time`` on the directed link
``(a, b)``; with ``congestion=True`` a link carries one transfer at a time (transfers are
appended to the link in the order the scheduler commits them, never inserted into an
earlier gap). Static memory (Pesto's constraint (8)) is respected: a node only goes to a
device whose remaining capacity holds it; if no device has room, the device with the
most room that can run the node is used, and a repair pass at the end moves whole units
off overflowing devices where they fit (:mod:`dnnplace.heuristics.memory`); what overflow
is left, the evaluator flags (status ``memory_infeasible``).

The result is a :class:`ListSchedule`: a placement, the scheduler's own start times and
``priorities`` (rank by start time, ties by topological position). The registered
methods report the makespan of the simulator replaying that per-device order
(``simulate(policy="order")``), which is what the evaluator re-scores; the scheduler's
internal makespan is kept in ``extra``. Any of them warm-starts the Pesto ILP
(:mod:`dnnplace.formulations.multilevel.pesto`).

Algorithms
----------
``heft``
    Topcuoglu et al.: nodes by decreasing upward rank (mean compute over the devices
    that can run the node + mean transfer time), each on the device giving the earliest
    finish time, with insertion into idle gaps (``insertion=True``).
``etf``
    Hwang et al.'s Earliest Task First: repeatedly the (ready node, device) pair with
    the earliest start time, ties by the larger bottom level; insertion optional. The
    pair comes from lazy priority queues (near-linear; same choices as a full scan).
``m-topo``
    Baechi's m-TOPO: nodes in topological order fill one device after the other, each
    up to an equal share of the total memory (or its capacity); order = topological.
``m-etf``
    Baechi's m-ETF: ETF without insertion where a device is only eligible while the
    node fits in its remaining memory.
``m-sct``
    Baechi's m-SCT (Small Communication Time, Hanen-Munier SCT): each node has a
    *favourite child*; a favourite child is placed on its parent's device when it fits
    (so the large transfer is avoided), other nodes as in m-ETF. Baechi picks favourite
    children from an LP relaxation; here the favourite child of ``u`` is the successor
    with the largest transfer time whose only largest-transfer parent is ``u`` (a
    documented simplification, no LP).

References
----------
.. [HEFT] H. Topcuoglu, S. Hariri, M.-Y. Wu. "Performance-effective and low-complexity task
   scheduling for heterogeneous computing." IEEE TPDS 13(3), 2002.
.. [ETF] J.-J. Hwang, Y.-C. Chow, F. D. Anger, C.-Y. Lee. "Scheduling precedence graphs in
   systems with interprocessor communication times." SIAM J. Comput. 18(2), 1989.
.. [Baechi] B. Jeon et al. "Baechi: fast device placement of machine learning graphs."
   SoCC 2020 (as described in Pesto Sec. 5.2 and Celeritas Sec. 2).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel
from dnnplace.heuristics.etf_queues import EtfQueues
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.schedule_state import ListSchedule, ScheduleState
from dnnplace.runtime.deadline import Deadline

__all__ = ["ListSchedule", "heft", "etf", "m_topo", "m_etf", "m_sct", "ALGORITHMS", "best_list_schedule",
           "simulated_makespan"]


def _upward_rank(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """HEFT's upward rank: the bottom level with mean nominal costs."""
    w, c = nominal_costs(graph, cluster, "mean")
    return blevel(graph, kind=w, comm=c)


def heft(graph: OpGraph, cluster: Cluster, *, insertion: bool = True, congestion: bool = True,
         memory: bool = True) -> ListSchedule:
    """HEFT: upward-rank order, earliest-finish device, insertion into idle gaps.

    Examples
    --------
    Two independent unit nodes on two GPUs run in parallel:

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])
    >>> heft(g, Cluster.single_host(2, with_cpu=False)).makespan
    1.0
    """
    st = ScheduleState(graph, cluster, congestion, insertion)
    rank = _upward_rank(graph, cluster)
    order = np.lexsort((graph.topo_position, -rank))
    for v in order.tolist():
        best = None
        for d in st.candidates(v, memory):
            s, f, xf = st.evaluate(v, d)
            if best is None or f < best[1] - 1e-12:
                best = (s, f, d, xf)
        st.commit(v, best[2], best[0], best[3])
    return st.result("heft", memory, insertion=insertion)


def _etf_core(graph: OpGraph, cluster: Cluster, name: str, *, insertion: bool, congestion: bool,
              memory: bool, favourite: np.ndarray | None = None) -> ListSchedule:
    """ETF selection with lazy priority queues (see :class:`~dnnplace.heuristics.etf_queues.EtfQueues`)."""
    st = ScheduleState(graph, cluster, congestion, insertion)
    w, c = nominal_costs(graph, cluster, "mean")
    q = EtfQueues(st, blevel(graph, kind=w, comm=c), memory, favourite)
    indeg = np.bincount(graph.dst, minlength=graph.n).tolist()
    optr, onbr = graph.out_ptr.tolist(), graph.out_nbr.tolist()
    for v in range(graph.n):
        if indeg[v] == 0:
            q.activate(v)
    for _ in range(graph.n):
        v = q.commit_best()
        for k in range(optr[v], optr[v + 1]):
            x = onbr[k]
            indeg[x] -= 1
            if indeg[x] == 0:
                q.activate(x)
    return st.result(name, memory, insertion=insertion)


def etf(graph: OpGraph, cluster: Cluster, *, insertion: bool = True, congestion: bool = True,
        memory: bool = True) -> ListSchedule:
    """ETF: the ready (node, device) pair with the earliest start first (ties: larger
    bottom level, earlier finish, topological position, lower device index). The pair is
    found by lazy per-device queues (:class:`~dnnplace.heuristics.etf_queues.EtfQueues`),
    about ``O(n D log n)`` start-time evaluations instead of a full scan's
    ``O(n * ready * D)``, with the same choices."""
    return _etf_core(graph, cluster, "etf", insertion=insertion, congestion=congestion, memory=memory)


def m_etf(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-ETF: ETF without insertion, devices eligible only while the node fits."""
    return _etf_core(graph, cluster, "m-etf", insertion=False, congestion=congestion, memory=True)


def m_sct(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-SCT: m-ETF where a favourite child follows its parent's device (see the
    module docstring for how favourite children are chosen)."""
    _, c = nominal_costs(graph, cluster, "mean")
    fav = np.full(graph.n, -1, dtype=np.int64)
    if graph.m:
        # favourite child of u: out-edge with the largest transfer time, if that child
        # does not already favour another parent (first come in edge-weight order)
        order = np.argsort(-c, kind="stable")
        taken = np.zeros(graph.n, dtype=bool)
        for e in order.tolist():
            u, v = int(graph.src[e]), int(graph.dst[e])
            if fav[u] < 0 and not taken[v] and c[e] > 0:
                fav[u] = v
                taken[v] = True
    return _etf_core(graph, cluster, "m-sct", insertion=False, congestion=congestion, memory=True, favourite=fav)


def m_topo(graph: OpGraph, cluster: Cluster, *, congestion: bool = True) -> ListSchedule:
    """Baechi m-TOPO: fill devices in topological order up to an equal memory share."""
    st = ScheduleState(graph, cluster, congestion, False)
    usable = [d for d in range(cluster.size)]
    total = float(graph.memory.sum())
    share = [min(cluster.memory[d], total / max(len(usable), 1) * 1.0 + 1e-9) for d in range(cluster.size)]
    if total == 0:  # no memory information: split the compute equally instead
        w = np.nanmin(cluster.compute_matrix(graph), axis=1)
        weights, share = w.tolist(), [float(w.sum()) / cluster.size + 1e-12] * cluster.size
    else:
        weights = graph.memory.tolist()
    cur, acc = 0, 0.0
    for v in graph.topo_order.tolist():
        cands = st.candidates(v, True)
        d = cur if cur in cands else None
        if d is not None and acc + weights[v] > share[cur] and cur + 1 < cluster.size:
            nxt = [x for x in cands if x > cur]
            if nxt:
                cur, acc = nxt[0], 0.0
                d = cur
        if d is None:
            d = cands[0]
        s, f, xf = st.evaluate(v, d)
        st.commit(v, d, s, xf)
        if d == cur:
            acc += weights[v]
    return st.result("m-topo")


ALGORITHMS = {
    "heft": heft,
    "etf": etf,
    "m-topo": m_topo,
    "m-etf": m_etf,
    "m-sct": m_sct,
}


def simulated_makespan(ls: ListSchedule, *, congestion: bool = True) -> float:
    """Makespan of the simulator replaying ``ls``'s per-device order."""
    from dnnplace.evaluation.simulate import simulate
    return simulate(ls.placement, policy="order", priorities=ls.priorities, congestion=congestion).makespan


def best_list_schedule(graph: OpGraph, cluster: Cluster, *, congestion: bool = True,
                       algorithms: tuple[str, ...] | None = None, max_etf_nodes: int = 3000,
                       deadline: Deadline | None = None) -> tuple[ListSchedule, float, dict[str, float]]:
    """Run several list schedulers; return the best by simulated makespan, that
    makespan and every algorithm's simulated makespan. Past ``deadline`` no further
    scheduler starts (the first one always runs)."""
    algorithms = algorithms or tuple(ALGORITHMS)
    scores: dict[str, float] = {}
    best = None
    for name in algorithms:
        if name in ("etf", "m-etf", "m-sct") and graph.n > max_etf_nodes:
            continue
        if best is not None and deadline is not None and deadline.expired():
            break
        ls = ALGORITHMS[name](graph, cluster, congestion=congestion)
        ms = simulated_makespan(ls, congestion=congestion)
        scores[name] = ms
        if best is None or ms < best[1] - 1e-12:
            best = (ls, ms)
    return best[0], best[1], scores
