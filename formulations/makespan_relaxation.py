r"""A makespan lower bound that counts transfers and memory: a subgraph relaxation solved
with OR-Tools CP-SAT (optional extra ``dnnplace[cpsat]``), whose *best bound* is valid
even when the solver stops at its time limit.

The combinatorial bound of :func:`~dnnplace.evaluation.bounds.makespan_lower_bound`
leaves transfers out, since a placement may avoid every one; which it can only do by
running dependent nodes on one device. This relaxation keeps that trade-off for a set
:math:`S` of kept nodes and is a lower bound of the makespan of the full instance
(docs/semantics.md 2.1: any placement, device and link order, with or without congestion,
either transfer mode; memory as below).

The relaxed problem
-------------------
With :math:`\underline w`, heads :math:`r_v` and tails :math:`q_v` of
:func:`~dnnplace.evaluation.bounds.heads_and_tails` (least times, and the transfers
a node's inputs or outputs cannot all avoid), made stronger per kept node by the work
of its ancestors and descendants (:func:`energy_heads_tails`),
:math:`p_{vd}` the time of :math:`v` on device :math:`d` (overhead included) and
:math:`t_{e,ab}` the link time of edge :math:`e`'s tensor from device :math:`a` to
:math:`b \ne a` (the evaluator's, ``Cluster.transfer_time``):

- every :math:`v \in S` gets one device :math:`d` that can run it (and colocated kept
  nodes the same one) and a start :math:`s_v \ge \max(r_v, \rho_v)`; it ends at
  :math:`e_v = s_v + p_{vd}`; kept nodes on one device do not overlap;
- a direct edge :math:`e = (u, v)` with both ends kept: :math:`s_v \ge e_u`, and
  :math:`s_v \ge e_u + t_{e,ab}` when :math:`u` is on :math:`a` and :math:`v` on
  :math:`b \ne a`;
- kept :math:`u, v` joined by paths whose inner nodes are all dropped:
  :math:`s_v \ge e_u + \ell_{uv}`, with :math:`\ell_{uv}` the largest sum of
  :math:`\underline w` over the inner nodes of such a path;
- with ``memory=True`` (answers judged under the static memory model), the kept nodes'
  static memory on each device fits its capacity;
- kept :math:`u, v` with :math:`v` a descendant of :math:`u`: :math:`s_v \ge e_u +
  W(D_u \cap A_v)/m`, the work of the nodes between them shared by the :math:`m` devices
  that can run some node (they all run after :math:`u` ends and before :math:`v` starts);
  joined through dropped nodes only, on two different devices: :math:`s_v \ge e_u +
  \ell_{uv} + c_{uv}`, with :math:`c_{uv}` the least transfer over the edges of the
  path giving :math:`\ell_{uv}` (one of its edges joins two devices);
- minimise :math:`\max_{v \in S} e_v + \max(q_v, \tau_v)`.

Why its optimum (and any lower bound of it) bounds the full instance
--------------------------------------------------------------------
Take any feasible schedule of the full instance, of makespan :math:`T`, and keep the
placement and the start of the nodes of :math:`S`. Each relaxed constraint holds:

1. *Heads*: every schedule starts :math:`v` at or after :math:`r_v`
   (:func:`~dnnplace.evaluation.bounds.comm_heads_and_tails` proves it) and after
   :math:`\rho_v` (:func:`energy_heads_tails`).
2. *Devices*: the full schedule runs one node at a time per device; dropping nodes keeps
   that true for the kept ones, and their durations are the same :math:`p_{vd}`.
3. *Direct edges*: a consumer starts after its input arrived; on another device the
   tensor's transfer starts no earlier than the producer's end and lasts the link time
   of the tensor (per destination it lasts the longest of the edges it stands for, so at
   least this edge's; per edge exactly this edge's); congestion only delays it.
   Dropping congestion (link and port orders) is therefore a relaxation.
4. *Paths through dropped nodes*: each inner node starts after its predecessor on the
   path ends and takes at least its least time; dropping the transfers between them only
   shortens the lag, except one on the path when its ends are apart (some edge of the
   path joins two devices, and its transfer lasts at least the least one on the path).
   *Work between*: the nodes both after :math:`u` and before :math:`v` run inside
   :math:`[e_u, s_v]` on at most :math:`m` devices, one node at a time each.
5. *Memory*: the static footprints of all nodes on a device fit its capacity, so those of
   the kept ones do (dropping the others' memory only loosens the constraint).
6. *Objective*: every schedule leaves at least :math:`q_v` and :math:`\tau_v` after
   :math:`v` ends (the same two functions), so :math:`T \ge e_v + \max(q_v, \tau_v)`.

So the restricted schedule is feasible for the relaxation with objective at most
:math:`T`; the relaxation's optimum, and every lower bound CP-SAT proves for it, is at most
the optimum of the full instance. Integers: CP-SAT needs them, so every time is scaled
by ``scale`` (a power of ten putting the horizon at :math:`10^5`-:math:`10^6` units) and
rounded *down* (heads, tails, durations, transfers, lags, memory in units of ``mem_unit``
bytes; capacities down too): the scaled real schedule, each time
rounded down, satisfies the rounded constraints, since
:math:`\lfloor x + y \rfloor \ge \lfloor x \rfloor + \lfloor y \rfloor` and
:math:`\sum \lfloor m_v \rfloor \le \lfloor M \rfloor` when :math:`\sum m_v \le M`; the
bound reported is CP-SAT's best objective bound divided by ``scale``. The variables'
domain ends at a horizon at least the full instance's optimum (a sum of every duration
and every edge's largest transfer, which bounds any schedule without needless idle
time, or the caller's smaller ``horizon`` of a feasible answer), so restricting the
domain cuts off no restricted optimal schedule.

Which nodes to keep
-------------------
The bound holds for any :math:`S`; :func:`makespan_relaxation_bound` tries a few
(:func:`candidate_sets`: heavy nodes related to most others, the nodes on and around
the longest paths, the ends of the edges with the dearest transfers, half of each, the
heaviest nodes, the nodes with the most memory) and keeps the largest bound, together
with the combinatorial one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from dnnplace.evaluation.bounds import heads_and_tails, makespan_lower_bound
from dnnplace.formulations.kept_subgraph import energy_heads_tails, machines, path_lags, reach_matrix
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.reach import reachability

__all__ = ["RelaxationBound", "makespan_relaxation_bound", "subgraph_relaxation", "candidate_sets",
           "edge_transfer_matrix"]


@dataclass
class RelaxationBound:
    """The bound of :func:`makespan_relaxation_bound`: ``bound`` (at least the combinatorial
    ``combinatorial``), and per kept set tried its name, size, CP-SAT's best bound and
    status (``sets``); ``seconds`` in all."""

    bound: float
    combinatorial: float
    sets: list[dict] = field(default_factory=list)
    seconds: float = 0.0


def edge_transfer_matrix(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """``(m, D, D)`` link time of every edge's tensor between every ordered device pair
    (0 on one device), as the evaluator times it; negative values clipped to 0."""
    D = cluster.size
    a, b = np.meshgrid(np.arange(D), np.arange(D), indexing="ij")
    a, b = a.ravel(), b.ravel()
    out = np.empty((graph.m, D * D))
    for k in range(D * D):
        out[:, k] = cluster.transfer_time(np.full(graph.m, a[k]), np.full(graph.m, b[k]), graph.edge_bytes,
                                          graph.edge_cost)
    return np.maximum(out, 0.0).reshape(graph.m, D, D)


def _safe_horizon(graph: OpGraph, comp: np.ndarray, tt: np.ndarray) -> float:
    """Every node's longest time plus every edge's dearest transfer: no schedule whose
    activities each start at a release or at another's end is longer."""
    p = np.where(np.isfinite(comp), comp, 0.0).max(axis=1) if graph.n else np.zeros(0)
    finite = np.where(np.isfinite(tt), tt, 0.0)  # a schedule that needs an endless link bounds nothing
    return float(p.sum() + (finite.reshape(graph.m, -1).max(axis=1).sum() if graph.m else 0.0))


def subgraph_relaxation(graph: OpGraph, cluster: Cluster, keep, *, time_limit: float = 10.0, memory: bool = True,
                        horizon: float | None = None, threads: int = 1, seed: int = 0,
                        _pre: tuple | None = None) -> tuple[float, str]:
    """``(bound, status)``: CP-SAT's best bound of the relaxation of the module docstring
    on the kept nodes ``keep`` (indices), in the graph's time unit; ``status`` is CP-SAT's
    (``OPTIMAL``: the bound is the relaxation's optimum). ``memory``: keep the static
    memory constraint (only for answers judged under the static memory model);
    ``horizon``: a makespan some feasible schedule reaches (else a safe one).
    ``INFEASIBLE`` (the kept nodes fit no device's memory) gives ``inf``."""
    from ortools.sat.python import cp_model

    keep = np.unique(np.asarray(keep, dtype=np.int64))
    comp = cluster.compute_matrix(graph)
    w, r, q, tt = _pre if _pre is not None else (*heads_and_tails(graph, cluster), edge_transfer_matrix(graph, cluster))
    H = _safe_horizon(graph, comp, tt)
    if horizon is not None and math.isfinite(horizon):
        H = min(H, float(horizon))
    if keep.size == 0 or H <= 0:
        return 0.0, "EMPTY"
    scale = 10.0 ** math.floor(math.log10(1e6 / H))  # the horizon at 1e5-1e6 units
    Hi = int(math.floor(H * scale)) + 1

    def fl(x: float) -> int:
        return int(math.floor(x * scale + 1e-9))

    D = cluster.size
    anc, desc = reach_matrix(graph, keep, False), reach_matrix(graph, keep, True)
    rho, tau = energy_heads_tails(graph, cluster, keep, w, r, q, anc, desc)
    head = dict(zip(keep.tolist(), rho.tolist()))
    tail = dict(zip(keep.tolist(), tau.tolist()))
    m = cp_model.CpModel()
    s, e, x = {}, {}, {}
    per_dev: list[list] = [[] for _ in range(D)]
    for v in keep.tolist():
        devs = [d for d in range(D) if np.isfinite(comp[v, d])]
        if not devs:
            return math.inf, "INFEASIBLE"
        s[v] = m.NewIntVar(min(fl(head[v]), Hi), Hi, f"s{v}")
        e[v] = m.NewIntVar(0, 2 * Hi, f"e{v}")
        lits = []
        for d in devs:
            lit = m.NewBoolVar(f"x{v}_{d}")
            p = max(0, int(math.floor(comp[v, d] * scale + 1e-9)))
            per_dev[d].append((m.NewOptionalIntervalVar(s[v], p, e[v], lit, f"i{v}_{d}"), lit, v))
            x[v, d] = lit
            lits.append(lit)
        m.AddExactlyOne(lits)
    for d in range(D):
        if len(per_dev[d]) > 1:
            m.AddNoOverlap([iv for iv, _, _ in per_dev[d]])
    # colocation among kept nodes
    grp = graph.colocation
    for c in set(grp[keep][grp[keep] >= 0].tolist()):
        members = keep[grp[keep] == c].tolist()
        for v in members[1:]:
            for d in range(D):
                a, b = x.get((members[0], d)), x.get((v, d))
                if a is not None and b is not None:
                    m.Add(a == b)
                elif a is not None:
                    m.Add(a == 0)
                elif b is not None:
                    m.Add(b == 0)
    # direct edges between kept nodes, with the transfer of a cross-device one
    kept = np.zeros(graph.n, dtype=bool)
    kept[keep] = True
    direct = np.flatnonzero(kept[graph.src] & kept[graph.dst])
    for ed in direct.tolist():
        u, v = int(graph.src[ed]), int(graph.dst[ed])
        m.Add(s[v] >= e[u])
        for a in range(D):
            for b in range(D):
                if a == b or (u, a) not in x or (v, b) not in x:
                    continue
                if not math.isfinite(tt[ed, a, b]):
                    m.AddBoolOr([x[u, a].Not(), x[v, b].Not()])  # no link: never apart this way
                    continue
                t = fl(tt[ed, a, b])
                if t > 0:
                    m.Add(s[v] >= e[u] + t).OnlyEnforceIf([x[u, a], x[v, b]])
    # kept pairs joined through dropped nodes: the longest such path, and on another device a
    # transfer on one of its edges; every kept pair u < v: the work of the nodes between them
    off = ~np.eye(D, dtype=bool)
    tmin = np.where(off[None], tt, np.inf).reshape(graph.m, -1).min(axis=1) if D > 1 else np.zeros(graph.m)
    tmin = np.where(np.isfinite(tmin), tmin, 0.0)
    between = (desc * w[None, :]).astype(np.float64) @ anc.T.astype(np.float64) / machines(graph, cluster)
    lags = path_lags(graph, keep, w, tmin)
    pos = {v: i for i, v in enumerate(keep.tolist())}
    for (u, v), (lag, c) in lags.items():
        m.Add(s[v] >= e[u] + fl(max(lag, between[pos[u], pos[v]])))
        if fl(lag + c) > fl(max(lag, between[pos[u], pos[v]])):
            for a in range(D):
                for b in range(D):
                    if a != b and (u, a) in x and (v, b) in x:
                        m.Add(s[v] >= e[u] + fl(lag + c)).OnlyEnforceIf([x[u, a], x[v, b]])
    for i, j in zip(*np.nonzero(between > 0)):
        u, v = int(keep[i]), int(keep[j])
        if (u, v) not in lags:
            m.Add(s[v] >= e[u] + fl(between[i, j]))
    if memory:
        mem_unit = max(1.0, float(np.max(graph.memory[keep], initial=0.0)) / 1e6)
        for d in range(D):
            cap = float(cluster.memory[d])
            if not math.isfinite(cap) or not per_dev[d]:
                continue
            terms = [(int(math.floor(graph.memory[v] / mem_unit)), lit) for _, lit, v in per_dev[d]]
            if sum(c for c, _ in terms) > cap / mem_unit:
                m.Add(sum(c * lit for c, lit in terms) <= int(math.floor(cap / mem_unit)))
    cmax = m.NewIntVar(0, 3 * Hi, "cmax")
    for v in keep.tolist():
        m.Add(cmax >= e[v] + fl(tail[v]))
    m.Minimize(cmax)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit))
    solver.parameters.num_workers = max(1, int(threads))
    solver.parameters.random_seed = int(seed)
    status = solver.Solve(m)
    name = solver.StatusName(status)
    if status == cp_model.INFEASIBLE:
        return math.inf, name
    if status == cp_model.MODEL_INVALID:
        raise RuntimeError(f"relaxation model invalid: {m.Validate()}")
    return max(0.0, float(solver.BestObjectiveBound()) / scale), name


def _spine_scores(graph: OpGraph, w: np.ndarray, m: int, max_nodes: int = 8000) -> np.ndarray | None:
    """Per node, how far it can lift a bound by being comparable to most of the graph:
    :math:`(m - 1)\\,\\underline w(v) - W(I_v)`, :math:`I_v` the nodes neither ancestors nor
    descendants of :math:`v` (with nothing beside it, :math:`v` runs alone on one device
    while the others idle). ``None`` above ``max_nodes`` nodes (an n x n reachability)."""
    if graph.n > max_nodes:
        return None
    desc = reachability(graph)
    related = desc.astype(np.float64) @ w + desc.T.astype(np.float64) @ w  # work of descendants + ancestors
    return (m - 1) * w - (w.sum() - w - related)


def candidate_sets(graph: OpGraph, cluster: Cluster, size: int = 80,
                   _pre: tuple | None = None) -> dict[str, np.ndarray]:
    """A few kept sets of at most ``size`` nodes (name -> node indices): ``path``, the
    nodes of largest :math:`r_v + \\underline w(v) + q_v` (on and around the longest
    paths); ``spine``, the nodes of largest :func:`_spine_scores` (heavy nodes related to
    most others); ``comm``, the ends of the edges with the dearest least transfer, then path
    nodes; ``path+comm``, half of each; ``heavy``, the nodes of largest least time; ``memory``,
    the nodes of largest static memory."""
    w, r, q, tt = _pre if _pre is not None else (*heads_and_tails(graph, cluster), edge_transfer_matrix(graph, cluster))
    size = min(size, graph.n)
    through = r + w + q
    by_path = np.lexsort((-w, -through))

    def fill(first: np.ndarray, rest: np.ndarray, k: int) -> np.ndarray:
        seen, out = set(), []
        for v in np.concatenate([first, rest]).tolist():
            if v not in seen:
                seen.add(v)
                out.append(v)
                if len(out) >= k:
                    break
        return np.array(sorted(out), dtype=np.int64)

    D = cluster.size
    if graph.m and D > 1:
        off = ~np.eye(D, dtype=bool)
        tmin = np.where(off[None], tt, np.inf).reshape(graph.m, -1).min(axis=1)
        by_comm = np.argsort(-tmin, kind="stable")
        ends = np.stack([graph.src[by_comm], graph.dst[by_comm]], axis=1).ravel()
    else:
        ends = np.zeros(0, dtype=np.int64)
    score = _spine_scores(graph, w, machines(graph, cluster))
    sets = {"spine": fill(np.argsort(-score, kind="stable"), by_path, size)} if score is not None else {}
    sets |= {"path": fill(by_path, by_path, size),
            "comm": fill(ends, by_path, size),
            "path+comm": fill(np.concatenate([by_path[: size // 2], ends]), by_path, size),
            "heavy": fill(np.argsort(-w, kind="stable"), by_path, size),
            "memory": fill(np.argsort(-graph.memory, kind="stable"), by_path, size)}
    out: dict[str, np.ndarray] = {}
    for k, v in sets.items():
        if not any(np.array_equal(v, o) for o in out.values()):
            out[k] = v
    return out


def makespan_relaxation_bound(graph: OpGraph, cluster: Cluster, *, time_limit: float = 20.0, size: int = 80,
                              memory: bool = True, horizon: float | None = None, threads: int = 1,
                              sets: dict[str, np.ndarray] | None = None) -> RelaxationBound:
    """The largest of :func:`~dnnplace.evaluation.bounds.makespan_lower_bound` and the
    relaxation bounds of the kept sets ``sets`` (default :func:`candidate_sets` of
    ``size`` nodes), ``time_limit`` seconds in all, shared evenly. ``memory``: keep the
    static memory constraint (answers judged under the static memory model only);
    ``horizon``: a makespan a feasible schedule reaches, if known.

    >>> from dnnplace.graphs.cluster import Device
    >>> g = OpGraph(ids=list("abc"), kinds=["gpu"], compute=[[1.0], [2.0], [2.0]], memory=[1, 2, 2],
    ...             src=[0, 0], dst=[1, 2], edge_bytes=[1.0, 1.0])
    >>> cl = Cluster((Device("g0", "gpu", 3.0), Device("g1", "gpu", 3.0)), np.zeros((2, 2)),
    ...              np.full((2, 2), 3.0), np.ones((2, 2)))  # 3 B per GPU; any tensor takes 3 to cross
    >>> makespan_lower_bound(g, cl)  # b and c on a's GPU (5), or one of them waits 3 for its input
    5.0
    >>> rb = makespan_relaxation_bound(g, cl, time_limit=5)  # memory keeps b and c apart: 1 + 3 + 2
    >>> rb.bound, makespan_relaxation_bound(g, cl, time_limit=5, memory=False).bound
    (6.0, 5.0)
    """
    t0 = time.perf_counter()
    base = makespan_lower_bound(graph, cluster)
    res = RelaxationBound(bound=base, combinatorial=base)
    if graph.n == 0:
        return res
    pre = (*heads_and_tails(graph, cluster), edge_transfer_matrix(graph, cluster))
    if sets is None:
        sets = candidate_sets(graph, cluster, size, _pre=pre)
    left = list(sets.items())
    for i, (name, keep) in enumerate(left):
        budget = (time_limit - (time.perf_counter() - t0)) / (len(left) - i)
        if budget <= 0.05:
            res.sets.append({"set": name, "nodes": int(len(keep)), "bound": None, "status": "SKIPPED"})
            continue
        b, status = subgraph_relaxation(graph, cluster, keep, time_limit=budget, memory=memory, horizon=horizon,
                                        threads=threads, _pre=pre)
        res.sets.append({"set": name, "nodes": int(len(keep)), "bound": b, "status": status})
        if math.isfinite(b):
            res.bound = max(res.bound, b)
    res.seconds = time.perf_counter() - t0
    return res
