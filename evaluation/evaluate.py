"""The independent evaluator (docs/semantics.md 3): validate and score any placement.

Nothing here trusts the method that produced a placement; formulations and heuristics
report their own objective and the framework asserts that the two agree.

Max-load (docs/semantics.md 2.2, Tarnawski et al. Sec. 5, Fig. 6). For a non-CPU device ``d``
holding node set ``S``::

    FW_d + BW_d = sum_{v in S} p_d(v)                                       (compute)
                + sum_{u not in S, (u,v) in E, v in S} c_u                  (CommIn)
                + sum_{u in S, (u,v) in E, v not in S} c_u                  (CommOut)

each ``c_u`` paid once per node and direction (Fig. 6, constraints (17)-(20)); a CPU pays
only its compute (constraint (21)). A transfer ``c_u`` counts in the forward part when
``u`` is a forward node and in the backward part otherwise. Objectives: ``pipedream``
``max_d (FW_d + BW_d)``; ``gpipe`` ``max_d FW_d + max_d BW_d`` (Appendix A);
``overlap`` ``max_d max(comm_d, compute_d)`` (Appendix C.1).

``c_u`` is the explicit cost of the edge that crosses (Tarnawski inputs give every
out-edge of ``u`` the same cost; if they differ, the largest crossing edge is charged),
or, without one, the link model between the device and the host (the first CPU device;
the consumer's device when the cluster has no CPU); the per-device sums are
:func:`dnnplace.evaluation.loads.device_loads`, and the contiguity a placement claims is
checked by :mod:`dnnplace.evaluation.contiguity`.

Latency (docs/semantics.md 2.3, Tarnawski Sec. 4, Figs. 3-4): every accelerator's node set is cut
into the fewest contiguous pieces along the topological order; each piece starts when
its inputs are in host memory and after the previous piece of its device, and takes
``CommIn + compute + CommOut`` (constraint (7)); CPU nodes run on an unbounded pool as
soon as their inputs are ready (constraints (8)-(9)). Pieces that wait on each other in
a cycle make the split infeasible.

Every evaluation reports ``lower_bound``, a value no placement of the instance beats
(:mod:`dnnplace.evaluation.bounds`): the busiest device's work share for a max-load, the
critical path of least times for a latency, both for a makespan; so every method's
answer, a heuristic's included, has a certified gap.
"""

from __future__ import annotations

import graphlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.evaluation.bounds import critical_path_lower_bound, makespan_lower_bound, maxload_lower_bound
from dnnplace.evaluation.contiguity import contiguity_violations, noncontiguous, noncontiguous_sets
from dnnplace.evaluation.loads import device_loads, grouped_max, host_cost, is_cpu, node_times
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import PROBLEMS
from dnnplace.graphs.pipeline import CONTIGUITY_MODES
from dnnplace.graphs.placement import Placement

__all__ = ["Evaluation", "PROBLEMS", "MAXLOAD_OBJECTIVES", "MEMORY_MODELS", "CONTIGUITY_MODES", "evaluate",
           "validate", "static_memory_violations", "maxload", "latency", "makespan", "latency_pieces"]

MAXLOAD_OBJECTIVES = ("pipedream", "gpipe", "overlap")
MEMORY_MODELS = ("static", "dynamic")  # docs/semantics.md 1: sum of memory; PARDNN's dynamic peak (Eq. 2)


@dataclass
class Evaluation:
    """An independent score: ``objective`` is ``None`` when the placement cannot be
    scored (unsupported node, cyclic subgraphs); ``feasible`` is False whenever any
    constraint is violated, and ``violations`` says which."""

    problem: str
    objective: float | None
    feasible: bool
    violations: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    schedule: Any = field(default=None, repr=False)  # makespan: the simulated Schedule (not serialised)
    memory_only: bool = field(default=False, repr=False)  # makespan: every violation is a memory overflow

    def to_dict(self) -> dict[str, Any]:
        return {"problem": self.problem, "objective": self.objective, "feasible": self.feasible,
                "violations": list(self.violations), **self.details}


# ---------------------------------------------------------------------------- validate
def validate(p: Placement, *, contiguity: str = "none", include_cpus: bool = True,
             memory: bool = True) -> list[str]:
    """Constraint violations of a placement (empty list = feasible): supported devices,
    device-count limits, colocation, static memory (Pesto (8), Tarnawski (3)) and,
    where claimed, contiguity."""
    g, cl = p.graph, p.cluster
    out: list[str] = []
    times = node_times(p)
    bad = np.flatnonzero(np.isnan(times))
    for i in bad[:5]:
        out.append(f"node {g.ids[i]!r} is on {cl.names[p.device[i]]} (kind {cl.kinds[p.device[i]]!r}) "
                   "which it does not support")
    if bad.size > 5:
        out.append(f"... {bad.size - 5} more unsupported node placements")
    for kind, limit in cl.meta.get("device_limit", {}).items():
        devs = cl.devices_of_kind(kind)
        held = p.device if p.replication is None else \
            np.concatenate([p.device, [d for grp in p.replication.groups for d in grp[1:]]]).astype(np.int64)
        used = np.unique(held[np.isin(held, devs)])
        if used.size > limit:
            out.append(f"uses {used.size} {kind} devices; the instance allows {limit}")
    grouped = g.colocation >= 0
    if grouped.any():
        grp = g.colocation[grouped]
        first = np.full(grp.max() + 1, -1, dtype=np.int64)
        first[grp[::-1]] = p.device[grouped][::-1]
        split = np.unique(grp[p.device[grouped] != first[grp]])
        for c in split[:5]:
            members = np.flatnonzero(g.colocation == c)
            devs = sorted({cl.names[d] for d in p.device[members]})
            out.append(f"colocation group {g.colocation_labels[c]!r} is split over {devs}")
    if memory:
        out += static_memory_violations(p)
    out += contiguity_violations(p, contiguity, include_cpus=include_cpus)
    return out


def static_memory_violations(p: Placement) -> list[str]:
    """One message per device whose static footprint (sum of ``memory``, Pesto (8)) exceeds
    its capacity."""
    cl = p.cluster
    used_mem = np.bincount(p.device, weights=p.graph.memory, minlength=cl.size)
    return [f"device {cl.names[d]}: memory {used_mem[d]:.6g} B exceeds capacity "
            f"{cl.memory[d]:.6g} B by {100 * (used_mem[d] / cl.memory[d] - 1):.1f}%"
            for d in np.flatnonzero(used_mem > cl.memory * (1 + 1e-12))]


def _memory_details(p: Placement) -> dict[str, Any]:
    used = np.bincount(p.device, weights=p.graph.memory, minlength=p.cluster.size)
    return {"memory": {n: float(used[d]) for d, n in enumerate(p.cluster.names)}}


# ---------------------------------------------------------------------------- max-load
def maxload(p: Placement, *, objective: str = "pipedream", contiguity: str = "none",
            include_cpus: bool = True) -> Evaluation:
    """Score a placement for pipelined throughput (docs/semantics.md 2.2); see the module docstring."""
    if objective not in MAXLOAD_OBJECTIVES:
        raise InputError(f"unknown max-load objective {objective!r}; use one of {MAXLOAD_OBJECTIVES}")
    viol = validate(p, contiguity=contiguity, include_cpus=include_cpus)
    loads = device_loads(p)
    names = p.cluster.names
    per_dev = {n: {k: float(loads[k][d]) for k in ("load", "fw", "bw", "compute", "comm")}
               for d, n in enumerate(names)}
    details = {"objective_variant": objective, "contiguity": contiguity, "devices": per_dev,
               **_memory_details(p), "unit": p.graph.unit, "lower_bound": maxload_lower_bound(p.graph, p.cluster)}
    if p.replication is not None:  # Tarnawski App. C.2: replicated stages
        from dnnplace.graphs.replication import replicated_loads, replication_violations

        if objective == "gpipe":
            raise InputError("replicated stages are scored for the pipedream or overlap objective, not gpipe")
        viol += replication_violations(p)
        one = loads["load"] if objective == "pipedream" else np.maximum(loads["comm"], loads["compute"])
        stage = replicated_loads(p, one, objective)
        details["replication"] = p.replication.to_json(names)
        details["stage_time"] = {n: float(stage[d]) for d, n in enumerate(names)}
        value = float(stage.max())
    elif objective == "pipedream":
        value = float(loads["load"].max())
    elif objective == "gpipe":
        value = float(loads["fw"].max() + loads["bw"].max())
    else:
        value = float(np.maximum(loads["comm"], loads["compute"]).max())
    if p.cluster.meta.get("hierarchy"):  # Tarnawski App. C.3: servers' network interfaces
        from dnnplace.graphs.hierarchy import network_loads

        if objective == "gpipe":
            raise InputError("hierarchical clusters are scored for the pipedream or overlap objective, not gpipe")
        g = p.graph
        c = np.zeros(g.n)
        np.maximum.at(c, g.src, np.nan_to_num(g.edge_cost))
        net = network_loads(p, c)
        details["network"] = [float(x) for x in net]
        value = max(value, float(net.max(initial=0.0)))
    obj = None if math.isnan(value) else value
    return Evaluation("maxload", obj, not viol and obj is not None, viol, details)


# ---------------------------------------------------------------------------- latency
def latency_pieces(p: Placement) -> np.ndarray:
    """Piece number of every node within its accelerator (0 for CPU nodes and for the
    first piece): each accelerator's nodes, in topological order, are cut whenever the
    next node is reachable from the current piece through a node outside it."""
    g = p.graph
    piece = np.zeros(g.n, dtype=np.int64)
    split = {d for d, _, _ in noncontiguous(p, "convex-all", include_cpus=False)}
    order = g.topo_order.tolist()
    in_ptr, in_nbr = g.in_ptr.tolist(), g.in_nbr.tolist()
    dev = p.device.tolist()
    for d in sorted(split):
        stamp = [-1] * g.n  # piece whose members reach this node (via any path)
        current = 0
        started = False
        for x in order:
            preds = in_nbr[in_ptr[x]:in_ptr[x + 1]]
            if dev[x] == d:
                # members of the current piece carry its stamp too, so a stamped
                # predecessor on another device is a path leaving the piece
                if started and any(stamp[u] == current and dev[u] != d for u in preds):
                    current += 1
                started = True
                piece[x] = current
                stamp[x] = current
            elif any(stamp[u] == current for u in preds):
                stamp[x] = current
    return piece


def latency(p: Placement, *, pieces: np.ndarray | None = None) -> Evaluation:
    """Single-sample latency of a split (docs/semantics.md 2.3); see the module docstring.

    ``pieces`` (optional): a method's own decomposition, the piece number of every
    accelerator node (Fig. 4's subgraph slots). Each piece must be contiguous; the
    pieces of a device run in increasing number. Without it each accelerator's nodes
    are cut into the fewest pieces along the topological order (:func:`latency_pieces`).
    """
    g, cl = p.graph, p.cluster
    viol = validate(p)
    times = node_times(p)
    cpu = is_cpu(p)
    on_acc = ~cpu[p.device]
    if pieces is None:
        piece = latency_pieces(p)
    else:
        piece = np.where(on_acc, np.asarray(pieces, dtype=np.int64).ravel(), 0)
        if piece.shape != (g.n,) or (piece < 0).any():
            raise InputError(f"pieces: expected {g.n} non-negative piece numbers")
        _, unit_of = np.unique(p.device * (int(piece.max(initial=0)) + 1) + piece, return_inverse=True)
        acc_units = np.unique(unit_of[on_acc])
        for u, bad in noncontiguous_sets(g, np.where(on_acc, unit_of, -1), acc_units):
            i = int(np.flatnonzero(unit_of == u)[0])
            viol.append(f"piece {cl.names[p.device[i]]}#{piece[i]} is not contiguous: node {g.ids[bad[0]]!r} "
                        "lies on a path between two of its nodes")
    # unit of every node: one per CPU node, one per accelerator piece
    unit_key = np.where(on_acc, -(p.device * (int(piece.max(initial=0)) + 1) + piece) - 1, np.arange(g.n))
    keys, unit = np.unique(unit_key, return_inverse=True)
    n_units = keys.size
    # per-unit duration: CPU node time, or CommIn + compute + CommOut of the piece
    dur = np.bincount(unit, weights=np.nan_to_num(times, nan=0.0), minlength=n_units)
    uu, uv = unit[g.src], unit[g.dst]
    cross = uu != uv
    for side, outgoing in ((uv, False), (uu, True)):
        e = np.flatnonzero(cross & on_acc[g.dst if not outgoing else g.src])
        k = side[e]
        cost = host_cost(p, e, p.device[g.dst[e] if not outgoing else g.src[e]], outgoing)
        keys2, cmax = grouped_max(g.src[e] * n_units + k, cost)
        dur += np.bincount(keys2 % n_units, weights=cmax, minlength=n_units)
    preds: dict[int, set[int]] = {int(x): set() for x in range(n_units)}
    for a, b in set(zip(uu[cross].tolist(), uv[cross].tolist())):
        preds[b].add(a)
    # consecutive pieces of one accelerator run one after another
    acc_nodes = np.flatnonzero(on_acc)
    chain = sorted(set(zip(p.device[acc_nodes].tolist(), piece[acc_nodes].tolist(), unit[acc_nodes].tolist())))
    for (d0, _, u0), (d1, _, u1) in zip(chain, chain[1:]):
        if d0 == d1:
            preds[u1].add(u0)
    details: dict[str, Any] = {"unit": g.unit, **_memory_details(p),
                               "subgraphs": {cl.names[d]: int(np.unique(piece[p.device == d]).size)
                                             for d in np.unique(p.device) if not cpu[d]},
                               "lower_bound": critical_path_lower_bound(g, cl)}
    try:
        topo = list(graphlib.TopologicalSorter(preds).static_order())
    except graphlib.CycleError as exc:
        names = {int(unit[i]): (f"{cl.names[p.device[i]]}#{piece[i]}" if on_acc[i] else f"cpu:{g.ids[i]!r}")
                 for i in range(g.n)}
        cyc = " -> ".join(names[u] for u in exc.args[1])
        return Evaluation("latency", None, False, viol + [f"subgraphs wait on each other in a cycle: {cyc}"],
                          details)
    finish = np.zeros(n_units)
    for u in topo:
        start = max((finish[v] for v in preds[u]), default=0.0)
        finish[u] = start + dur[u]
    value = float(finish.max()) if n_units else 0.0
    if np.isnan(times).any():
        return Evaluation("latency", None, False, viol, details)
    return Evaluation("latency", value, not viol, viol, details)


# ---------------------------------------------------------------------------- makespan
def makespan(p: Placement, *, policy: str = "fifo", priorities: np.ndarray | None = None,
             congestion: bool = True, transfer_mode: str | None = None,
             link_priorities: np.ndarray | None = None, memory_model: str = "static",
             dedup_transfers: bool | None = None) -> Evaluation:
    """Simulated makespan (docs/semantics.md 2.1) of a placement under a dispatch policy; a given
    ``priorities`` array with ``policy="order"`` replays a method's device order, and
    ``link_priorities`` (one value per edge, with ``policy="order"``) its order of the
    transfers on each link; without them links are first come first served
    (:func:`dnnplace.evaluation.simulate.simulate`, "Link orders"). ``transfer_mode`` says
    what is sent (docs/semantics.md 2.1): ``"per_destination"`` (the default) a tensor once to each
    device that consumes it, ``"per_edge"`` one transfer per cross-device edge (Pesto's
    ILP accounting); ``None`` takes the current mode
    (:func:`~dnnplace.evaluation.sim_costs.transfer_semantics`); ``dedup_transfers`` is its
    older boolean spelling.

    Memory is judged under both models and both verdicts are reported in
    ``details["memory_feasible"]`` (``{"static": bool, "dynamic": bool or None}``):
    *static*, the sum of ``memory`` per device (docs/semantics.md 1, Pesto (8)), and *dynamic*, the
    simulated peak of live tensors (PARDNN Eq. 2; ``None`` when the graph carries no
    tensor sizes). ``memory_model`` (``"static"`` or ``"dynamic"``, recorded in
    ``details["memory_model"]``) names the one whose overflow makes the placement
    infeasible; an unknown dynamic peak falls back to the static check.
    ``details["lower_bound"]`` is a makespan no schedule of the instance beats
    (:func:`~dnnplace.evaluation.bounds.makespan_lower_bound`), so every method's answer comes
    with a certified gap.
    """
    from dnnplace.evaluation.simulate import simulate, validate_schedule

    if memory_model not in MEMORY_MODELS:
        raise InputError(f"unknown memory model {memory_model!r}; use one of {MEMORY_MODELS}")
    viol = validate(p, memory=False)
    if any("does not support" in v for v in viol):
        return Evaluation("makespan", None, False, viol + static_memory_violations(p), {})
    res = simulate(p, policy=policy, priorities=priorities, congestion=congestion,
                   transfer_mode=transfer_mode, dedup_transfers=dedup_transfers,
                   link_priorities=link_priorities)
    viol += validate_schedule(res.schedule, congestion=congestion, transfers=res)
    static = static_memory_violations(p)
    dynamic = [f"device {o['device']}: dynamic peak memory {o['peak_memory']:.6g} B exceeds capacity "
               f"{o['capacity']:.6g} B by {100 * o['peak_over'] / o['capacity']:.1f}%"
               for o in res.memory_overflow if o["peak_over"]]
    known = res.peak_memory_known
    judged = dynamic if memory_model == "dynamic" and known else static
    details = {**res.to_dict(), "memory_model": memory_model,
               "memory_feasible": {"static": not static, "dynamic": (not dynamic) if known else None},
               "lower_bound": makespan_lower_bound(p.graph, p.cluster)}
    return Evaluation("makespan", float(res.makespan), not (viol or judged), viol + judged, details,
                      schedule=res.schedule, memory_only=bool(judged) and not viol)


def evaluate(p: Placement, problem: str, **options: Any) -> Evaluation:
    """Dispatch to :func:`maxload`, :func:`latency` or :func:`makespan`."""
    funcs = {"maxload": maxload, "latency": latency, "makespan": makespan}
    if problem not in funcs:
        raise InputError(f"unknown problem {problem!r}; use one of {PROBLEMS}")
    return funcs[problem](p, **options)
