r"""Celeritas' placer: operation fusion, then Adjusting Placement (Alg. 2, Eqs. 7-9) or
the Order-Place baseline on the coarse graph, mapped back to every node.

Adjusting Placement visits the coarse nodes in CPD-TOPO order (recomputed on the coarse
graph with its own nominal costs, Alg. 2 l.1-2) and keeps a busy timeline per device.
For node :math:`v` and device :math:`d` (Eq. 7, ``COMP_EST``):

.. math::

    \mathrm{pre}_t(v, d) = \max_{p \in \mathrm{pred}(v)} \mathrm{Fin}(p) +
        [\mathrm{dev}(p) \ne d]\, c_{\mathrm{dev}(p), d}(p, v), \qquad
    \mathrm{EST}(d) = \mathrm{earliest\_slot}(d, \mathrm{pre}_t(v, d), w(v, d)),

the earliest idle gap of ``d`` that holds ``v`` (insertion, l.30-31,
:class:`~dnnplace.heuristics.timeline.Timeline`), ``+inf`` where ``d`` cannot run ``v``,
lacks the memory (a group's whole memory counts where its first member goes), or holds
none of the devices that ``v``'s colocation groups are pinned to (unless none of those has
room: then colocation gives way and the repair pass below settles it). With ``d_k`` the
device of the previous node (``D[0]`` for the first, decision C5), ``d_1`` the device of
least EST (ties: ``d_k``, then the lowest index) and (Eq. 8)
:math:`\mathrm{back} = \max_{s \in \mathrm{succ}(v)} \bar c(v, s)` (0 for a sink),
``v`` goes to ``d_1`` when (Eq. 9) :math:`\mathrm{EST}(d_k) - \mathrm{EST}(d_1) > \mathrm{back}`
(which includes ``EST(d_k) = inf``), else to ``d_k`` while it is finite, else -- no device
has room -- by the memory policy ``on_oom`` (:func:`~dnnplace.heuristics.memory.best_effort_device`:
the most free memory, *paper says* ``argmin Ava_m``, *we do* ``argmax``, decision C6).
Then :math:`\mathrm{Fin}(v) = \mathrm{EST}(v) + w(v, d)` (the EST ignoring memory
for a best-effort node).

Order-Place (the paper's Sec. 6.2 baseline, ``adjust=False``): the same order and
timeline, ``v`` stays on ``d_k`` while it fits there, else goes to the next device after
``d_k`` in index order (cyclically) that fits, else by ``on_oom``. On two devices this
is Adjusting Placement with ``back = inf`` (a test).

Colocation (decision C9, Baechi's rule): the device of the first coarse node holding a
member of a group pins the group; a coarse node may hold members of groups pinned to
different devices, so after the coarse placement is mapped back a repair pass
(:func:`~dnnplace.heuristics.memory.repair_colocation`) moves every group onto the
device the group was pinned to (where its whole memory was reserved when its first
member was placed), and counts the nodes moved.

With per-message costs (docs/semantics.md 2.1) the planner counts them as
:mod:`~dnnplace.heuristics.message_costs` estimates: a new message from device ``a`` leaves
``send_overhead[a]`` after ``Fin(p)``, a tensor already sent to ``d`` is no new message, and
``v`` on ``d`` takes ``w(v, d) + recv_overhead[d]`` per new message, in ``EST`` and ``Fin``;
``back`` (Eq. 8) includes the mean message cost through the nominal costs.

The planner is congestion-free (decision C10) and charges every cross-device edge its
own transfer: without per-message costs its makespan estimate equals the simulation of the coarse graph replaying
its per-device order with congestion off and one transfer per edge
(``transfer_mode="per_edge"``; a test). The result is scored by the simulator on the original graph under ``fifo`` with
congestion on, as TensorFlow's executor would run it (Sec. 6.1).

*Paper says* each adjusting step is never worse than Order-Place (Sec. 5.2); the proof
argues one step at a time, so it is measured over random instances, not asserted
(``python -m benchmarks celeritas claim``: better on 135 of 200, equal on 59, worse on 6).

References
----------
.. [C] H. Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs", Sec. 5.2, Alg. 2.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.replay import Transformed
from dnnplace.heuristics.fusion import fuse
from dnnplace.heuristics.memory import best_effort_device, repair_colocation
from dnnplace.heuristics.message_costs import Messages
from dnnplace.heuristics.nominal import nominal_costs
from dnnplace.heuristics.timeline import Timeline
from dnnplace.heuristics.topo_orders import topo_order_by

__all__ = ["CoarsePlacement", "CeleritasRun", "adjust_placement", "celeritas", "one_device_reason"]

_INF = math.inf


@dataclass(frozen=True, eq=False)
class CoarsePlacement:
    """Adjusting Placement's (or Order-Place's) answer on the graph it placed."""

    device: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    order: np.ndarray
    best_effort: int
    anchor: np.ndarray  # the device each colocation group was pinned (and reserved) on
    kept: int = 0  # nodes Eq. 9 kept on d_k although another device had an earlier EST (the gain <= back)
    forced: int = 0  # nodes that went off d_k because d_k had no room (or could not run them)

    @property
    def planner_estimate(self) -> float:
        """The planner's own makespan (congestion-free)."""
        return float(self.finish.max()) if self.finish.size else 0.0

    @property
    def priorities(self) -> np.ndarray:
        """Rank by planned start (ties: placement order): the per-device sequence."""
        pos = np.empty(self.order.size, dtype=np.int64)
        pos[self.order] = np.arange(self.order.size)
        rank = np.empty(self.order.size, dtype=np.int64)
        rank[np.lexsort((pos, self.start))] = np.arange(self.order.size)
        return rank


def adjust_placement(graph: OpGraph, cluster: Cluster, *, adjust: bool = True, order: str = "cpd-topo",
                     nominal: str = "mean", on_oom: str = "best_effort", back: float | None = None,
                     groups: list[list[int]] | None = None, free_mem: np.ndarray | None = None,
                     group_mem: np.ndarray | None = None) -> CoarsePlacement:
    """Adjusting Placement (``adjust=True``) or Order-Place of ``graph`` (module docstring).

    Parameters
    ----------
    graph, cluster
        The graph to place (normally the fused graph) and the devices.
    adjust : bool
        Eq. 9 moves (``False``: Order-Place).
    order : str
        The visiting order (:data:`~dnnplace.heuristics.topo_orders.ORDERS`).
    nominal : str
        Nominal costs for the order and Eq. 8.
    on_oom : str
        ``"best_effort"`` or ``"raise"`` when no device has room.
    back : float, optional
        Overrides Eq. 8 for every node (``math.inf``: move only when the current device
        cannot take the node).
    groups, free_mem, group_mem : optional
        Colocation of a coarse graph: the original groups of every coarse node's
        members, the memory of its members in no group, and every group's memory;
        default the graph's own ``colocation`` and ``memory``. A group's whole memory
        is reserved where its first member goes.

    Examples
    --------
    Two independent unit nodes: the second starts at 0 on the other GPU, which beats
    waiting for the first by more than its (zero) back cost.

    >>> g = OpGraph(ids=[0, 1], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[])
    >>> r = adjust_placement(g, Cluster.single_host(2, with_cpu=False))
    >>> r.device.tolist(), r.planner_estimate
    ([0, 1], 1.0)
    >>> adjust_placement(g, Cluster.single_host(2, with_cpu=False), adjust=False).device.tolist()
    [0, 0]
    """
    n, D = graph.n, cluster.size
    w_bar, c_bar = nominal_costs(graph, cluster, nominal)
    seq = topo_order_by(graph, order, w_bar, c_bar)
    comp = np.nan_to_num(cluster.compute_matrix(graph), nan=_INF).tolist()
    if back is None:
        bk = np.zeros(n)
        if graph.m:
            np.maximum.at(bk, graph.src, c_bar)
        backs = bk.tolist()
    else:
        backs = [float(back)] * n
    if groups is None:
        co = graph.colocation
        groups = [[int(x)] if x >= 0 else [] for x in co.tolist()]
        own = np.where(co >= 0, 0.0, graph.memory)
        gmem = np.bincount(co[co >= 0], weights=graph.memory[co >= 0]) if (co >= 0).any() else np.zeros(0)
    else:
        own, gmem = np.asarray(free_mem), np.asarray(group_mem)
    mem, gm, cap = own.tolist(), gmem.tolist(), cluster.memory.tolist()
    free = list(cap)
    b0, b1, cf = cluster.beta0.tolist(), cluster.beta1.tolist(), cluster.cost_factor.tolist()
    ebytes, ecost = graph.edge_bytes.tolist(), graph.edge_cost.tolist()
    in_ptr, in_nbr, in_eid = graph.in_ptr.tolist(), graph.in_nbr.tolist(), graph.in_eid.tolist()
    dev, start, fin = [-1] * n, [0.0] * n, [0.0] * n
    gdev: dict[int, int] = {}
    tl = Timeline(D)
    devices = range(D)
    best_effort = kept = forced = 0
    dk = 0
    msg = Messages(graph, cluster)
    for v in seq.tolist():
        wv = comp[v]
        pre = [0.0] * D
        if msg.on:
            wv, pre, new = _message_inputs(msg, v, wv, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1, cf)
        else:
            for j in range(in_ptr[v], in_ptr[v + 1]):
                p, e = in_nbr[j], in_eid[j]
                a, fp = dev[p], fin[p]
                cost, nb = ecost[e], ebytes[e]
                for d in devices:
                    t = fp if a == d else fp + (b0[a][d] + b1[a][d] * nb if cost != cost else cf[a][d] * cost)
                    if t > pre[d]:
                        pre[d] = t
        # a group's whole memory is reserved on the device its first member goes to
        need = mem[v] + sum(gm[x] for x in groups[v] if x not in gdev)
        tol = need - 1e-9 * max(1.0, abs(need))
        cand = [d for d in devices if wv[d] < _INF]
        pinned = {gdev[x] for x in groups[v] if x in gdev}
        fits = [d for d in cand if free[d] >= tol and (not pinned or d in pinned)]
        if not fits:  # colocation gives way to memory and affinity; the repair pass settles it
            fits = [d for d in cand if free[d] >= tol]
        if not fits:
            d = best_effort_device(np.asarray(free), np.asarray(cand), on_oom=on_oom, what=graph._node(v), need=need)
            best_effort += 1
        elif adjust:
            est = [_INF] * D
            for d in fits:
                est[d] = tl.earliest_slot(d, pre[d], wv[d])
            d1 = min(devices, key=lambda x: (est[x], x != dk, x))
            d = d1 if est[dk] == _INF or est[dk] - est[d1] > backs[v] else dk
            kept += d == dk and est[d1] < est[dk]
            forced += est[dk] == _INF and d != dk
        else:
            d = dk if dk in fits else next(x for x in ((dk + s) % D for s in range(1, D + 1)) if x in fits)
            forced += d != dk
        s = tl.earliest_slot(d, pre[d], wv[d])
        dev[v], start[v], fin[v] = d, s, s + wv[d]
        tl.reserve(d, s, s + wv[d])
        free[d] -= need
        for x in groups[v]:
            gdev.setdefault(x, d)
        dk = d
        if msg.on:
            msg.commit(new[d])
    anchor = np.full(len(gm), -1, dtype=np.int64)
    for x, d in gdev.items():
        anchor[x] = d
    return CoarsePlacement(np.asarray(dev, dtype=np.int64), np.asarray(start), np.asarray(fin), seq, best_effort,
                           anchor, kept, forced)


def _message_inputs(msg: Messages, v: int, wv: list, dev, fin, in_ptr, in_nbr, in_eid, ecost, ebytes, b0, b1,
                    cf) -> tuple[list, list, list]:
    """With per-message costs: ``v``'s time on every device with the messages it takes
    in there, its data-ready time there and its new messages there
    (:meth:`~dnnplace.heuristics.message_costs.Messages.inputs`)."""
    ins = [(in_nbr[j], in_eid[j]) for j in range(in_ptr[v], in_ptr[v + 1])]
    pre, new, dur = [], [], []
    for d in range(len(wv)):
        def link(a: int, e: int, post: float, d: int = d) -> float:
            cost = ecost[e]
            return post + (b0[a][d] + b1[a][d] * ebytes[e] if cost != cost else cf[a][d] * cost)

        r, nd = msg.inputs(ins, d, dev, fin, link)
        pre.append(r)
        new.append(nd)
        dur.append(wv[d] + msg.extra(d, nd) if wv[d] < _INF else wv[d])
    return dur, pre, new


@dataclass(frozen=True, eq=False)
class CeleritasRun:
    """A Celeritas (or Order-Place) run: the placement of the original graph, the fusion
    and the coarse placement, with timings and the colocation repairs."""

    placement: Placement
    fusion: Transformed
    coarse: CoarsePlacement
    colocation_repairs: int
    fusion_seconds: float
    placement_seconds: float
    extra: dict = field(default_factory=dict)


def one_device_reason(run: CeleritasRun, *, adjust: bool, R: int) -> str | None:
    """Why ``run`` put every operator on one device, in words (``None`` where it uses more).

    The true reasons in the code above, in the order they apply: the fusion left one coarse
    node (at most ``R`` nodes and memory ``M`` per fused node, so a graph of at most ``R``
    nodes whose memory fits ``M`` is one node); Order-Place keeps a node on the current
    device while it fits; Adjusting Placement moves a node off the current device only
    where its EST elsewhere is earlier by more than its largest outgoing transfer (Eq. 9),
    or where the current device has no room. Memory binds where a node had to leave the
    current device for room (``forced``) or went best effort."""
    p = run.placement
    used = np.unique(p.device)
    if used.size != 1 or p.graph.n == 0:
        return None
    name = p.cluster.names[int(used[0])]
    cp, fz = run.coarse, run.fusion
    load = float(p.graph.memory.sum())
    cap = float(p.cluster.memory[int(used[0])])
    moved = cp.forced + cp.best_effort
    memory = (f"memory does not bind (the graph's {load:.4g} B of {cap:.4g} B on {name})" if not moved
              else f"{moved} coarse node(s) had to leave the current device for room or support")
    head = f"all {p.graph.n} operators on {name}: {memory}"
    if fz.graph.n == 1:
        return (f"{head}; the fusion left one coarse node (at most R = {R} nodes and M = {fz.meta['M']:.4g} B "
                "per fused node), and Celeritas places fused nodes whole")
    if not adjust:
        return (f"{head}; Order-Place keeps each of the {fz.graph.n} coarse nodes on the current device while it "
                "fits")
    rule = "Adjusting Placement (Eq. 9) moves a coarse node off the current device only where it starts earlier " \
           "elsewhere by more than its largest outgoing transfer"
    if cp.kept == 0:
        waits = "its inputs' transfers" + (" and their message costs" if p.cluster.has_message_costs else "")
        return (f"{head}; each of the {fz.graph.n} coarse nodes starts earliest on {name} (elsewhere it would wait "
                f"for {waits}), and {rule}")
    return (f"{head}; {rule}: {cp.kept} of the {fz.graph.n} coarse nodes would start earlier elsewhere, but by no "
            f"more than that, and the others start earliest on {name}")


def celeritas(graph: OpGraph, cluster: Cluster, *, R: int = 200, M_frac: float = 0.25, order: str = "cpd-topo",
              adjust: bool = True, nominal: str = "mean", on_oom: str = "best_effort",
              back: float | None = None) -> CeleritasRun:
    """Fuse (:func:`~dnnplace.heuristics.fusion.fuse`), place the coarse graph
    (:func:`adjust_placement`), map back and repair colocation.

    ``R``, ``M_frac``, ``order`` and ``adjust`` are the ablations of the paper's
    Tables 3-4 and Fig. 6 (``R = 1``: no fusion, the sequential fill of the Standard
    Evaluation when ``adjust=False``).

    Examples
    --------
    >>> g = OpGraph.from_ids(list("abcd"), [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 4, memory=[1] * 4, edge_bytes=[1e9] * 4)
    >>> run = celeritas(g, Cluster.single_host(2, with_cpu=False))
    >>> run.fusion.graph.n, run.placement.device.tolist()
    (1, [0, 0, 0, 0])
    """
    t0 = time.perf_counter()
    fz = fuse(graph, cluster, R=R, M_frac=M_frac, order=order, nominal=nominal)
    t1 = time.perf_counter()
    co, labels = graph.colocation, fz.labels
    grouped = co >= 0
    groups: list[list[int]] = [[] for _ in range(fz.graph.n)]
    for v, x in zip(labels[grouped].tolist(), co[grouped].tolist()):
        if x not in groups[v]:
            groups[v].append(x)
    free_mem = np.bincount(labels[~grouped], weights=graph.memory[~grouped], minlength=fz.graph.n)
    group_mem = np.bincount(co[grouped], weights=graph.memory[grouped]) if grouped.any() else np.zeros(0)
    cp = adjust_placement(fz.graph, cluster, adjust=adjust, order=order, nominal=nominal, on_oom=on_oom, back=back,
                          groups=groups, free_mem=free_mem, group_mem=group_mem)
    device, repairs = repair_colocation(graph, cp.device[labels], cp.anchor)
    t2 = time.perf_counter()
    return CeleritasRun(Placement(graph, cluster, device), fz, cp, repairs, t1 - t0, t2 - t1)
