"""Reading and writing solutions of the latency IP (:mod:`dnnplace.formulations.latency_ip`):
:func:`decode` (placement), :func:`decode_slots` / :func:`decode_pieces` (the IP's own
slots), and :func:`warm_start_values`, which completes a placement into values for every
variable (slots = the evaluator's pieces, the earliest-start times, so ``Total`` equals
the evaluator's latency). A model carries its instance data as ``m._data``."""

from __future__ import annotations

import graphlib

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from dnnplace.evaluation.evaluate import latency, latency_pieces
from dnnplace.formulations.contiguity import order_values, reach_down
from dnnplace.formulations.device_symmetry import identical_devices
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement

__all__ = ["decode", "decode_slots", "decode_pieces", "warm_start_values", "symmetric_first_slots", "slot_pieces",
           "horizon", "best_split"]


def symmetric_first_slots(data) -> list[list[int]]:
    """First slots of the accelerators of each interchangeable class, in device order."""
    first = {d: j for j, (d, s) in enumerate(data.slot_of) if j > 0 and s == 0}
    sup = data.supported
    return [[first[d] for d in c] for c in identical_devices(data.cluster)
            if all(d in first for d in c) and all((sup[:, first[c[0]]] == sup[:, first[d]]).all() for d in c)]



def decode_slots(m: pyo.ConcreteModel) -> np.ndarray:
    """Slot of every node in a solved model."""
    data = m._data
    score = np.full(data.supported.shape, -1.0)
    for (v, j), var in m.x.items():
        score[v, j] = var.value if var.value is not None else -1.0
    return score.argmax(axis=1)


def decode_pieces(m: pyo.ConcreteModel) -> np.ndarray:
    """Slot number within its accelerator of every node (0 for the CPU pool): the IP's
    own decomposition, which :func:`dnnplace.evaluation.evaluate.latency` scores with ``pieces=``."""
    data = m._data
    return np.array([data.slot_of[j][1] if j > 0 else 0 for j in decode_slots(m).tolist()], dtype=np.int64)


def decode(m: pyo.ConcreteModel) -> Placement:
    """Placement of a solved model; pool nodes go to the first CPU."""
    data = m._data
    slot = decode_slots(m)
    return Placement(data.graph, data.cluster, np.array(data.slots)[slot])


def warm_start_values(m: pyo.ConcreteModel, p: Placement) -> ComponentMap:
    """Values for every variable encoding ``p``: each accelerator's evaluator pieces
    (:func:`dnnplace.evaluation.evaluate.latency_pieces`) fill its slots in order; comm indicators,
    z witnesses and the earliest-start times follow, so ``total`` equals the
    evaluator's latency. Raises ``InputError`` when ``p`` needs more than ``q`` pieces
    on an accelerator, puts a node where it cannot run, or its pieces wait in a cycle.
    With ``symmetry_breaking``, interchangeable accelerators are first relabelled in
    order of the start of their first slot (same latency)."""
    vals = _values(m, p)
    if m.find_component("start_order") is None:
        return vals
    data = m._data
    lut = np.arange(data.cluster.size)
    for c in symmetric_first_slots(data):
        devs = [data.slot_of[j][0] for j in c]
        order = sorted(range(len(c)), key=lambda i: (vals[m.start[c[i]]], i))
        lut[[devs[i] for i in order]] = devs
    if (lut == np.arange(data.cluster.size)).all():
        return vals
    return _values(m, Placement(p.graph, p.cluster, lut[p.device]))


def _values(m: pyo.ConcreteModel, p: Placement) -> ComponentMap:
    data = m._data
    g = data.graph
    q = int(data.opts.subgraphs_per_device)
    piece = latency_pieces(p)
    is_cpu = np.array([k == "cpu" for k in data.cluster.kinds])
    slot_index = {(d, s): j for j, (d, s) in enumerate(data.slot_of) if j > 0}
    slot = np.zeros(g.n, dtype=np.int64)
    for v in range(g.n):
        d = int(p.device[v])
        if not is_cpu[d]:
            if piece[v] >= q:
                raise InputError(f"warm start needs {piece[v] + 1} subgraphs on {data.cluster.names[d]}; q = {q}")
            slot[v] = slot_index[d, int(piece[v])]
    if not data.supported[np.arange(g.n), slot].all():
        raise InputError("warm start puts a node on a device it does not support")
    vals = ComponentMap()
    for (v, j), var in m.x.items():
        vals[var] = float(slot[v] == j)
    ind_in: dict[tuple[int, int], bool] = {}
    dur = np.zeros(len(data.slots))
    for u, j, t, delta, heads in data.comm_in:
        on = any(slot[v] == j for v in heads) and slot[u] != j
        vals[m.comm_in[u, j, t]] = float(on)
        dur[j] += delta * on
        if t == 0:
            ind_in[u, j] = on
    for u, j, t, delta, heads in data.comm_out:
        on = slot[u] == j and any(slot[v] != j for v in heads)
        vals[m.comm_out[u, j, t]] = float(on)
        dur[j] += delta * on
    for v in range(g.n):
        if slot[v] > 0:
            dur[slot[v]] += data.p_acc[v, slot[v]]
    if hasattr(m, "z"):
        everything = np.ones(g.n, dtype=bool)
        for j in m.acc_slots:
            z = reach_down(g, everything, slot == j)
            for v in range(g.n):
                vals[m.z[v, j]] = float(z[v])
    # earliest-start schedule over units (pool nodes and slots)
    unit = np.where(slot > 0, -slot, np.arange(g.n) + 1)  # slots as negative keys
    preds: dict[int, set[int]] = {int(k): set() for k in np.unique(unit)}
    preds.update({-j: set() for j in m.acc_slots})
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        if unit[u] != unit[v]:
            preds[int(unit[v])].add(int(unit[u]))
    for j in m.acc_slots:
        if data.slot_of[j][1] > 0:
            preds[-j].add(-(j - 1))
    try:
        topo = list(graphlib.TopologicalSorter(preds).static_order())
    except graphlib.CycleError as exc:
        raise InputError(f"warm start: subgraphs wait on each other in a cycle ({exc.args[1]})") from None
    if hasattr(m, "r"):
        rank = {-k: r for r, k in enumerate(x for x in topo if x < 0)}
        vals.update(order_values(m, rank))
        order_v = list(g.topo_order.tolist())
        on_pool = slot == 0
        for j in m.acc_slots:
            r = np.zeros(g.n, dtype=bool)
            for v in order_v:
                for w in g.in_nbr[g.in_ptr[v]:g.in_ptr[v + 1]].tolist():
                    if slot[w] == j or (on_pool[w] and r[w]):
                        r[v] = True
                        break
            for v in range(g.n):
                vals[m.r[v, j]] = float(r[v])
    fin: dict[int, float] = {}
    start: dict[int, float] = {}
    for k in topo:
        s = max((fin[w] for w in preds[k]), default=0.0)
        start[k] = s
        fin[k] = s + (dur[-k] if k < 0 else float(data.p_cpu[k - 1]))
    lat = np.array([fin[int(unit[v])] for v in range(g.n)])
    for v in range(g.n):
        vals[m.lat[v]] = float(lat[v])
    for j in m.acc_slots:
        vals[m.start[j]], vals[m.finish[j]] = start[-j], fin[-j]
    vals[m.total] = float(lat.max()) if g.n else 0.0
    return vals


def slot_pieces(p: Placement) -> np.ndarray:
    """Number of pieces (the evaluator's decomposition) on every device of ``p``."""
    piece = latency_pieces(p)
    out = np.zeros(p.cluster.size, dtype=np.int64)
    np.maximum.at(out, p.device, piece + 1)
    return out


def horizon(inst: Instance, q: int, candidates: list[Placement] = ()) -> tuple[float, str]:
    """An achievable latency to serve as the big-M ``H``: the best evaluator latency
    among the feasible ``candidates`` whose pieces fit in ``q`` slots, greedy's split,
    and the all-CPU split; ``(value, which)``."""
    value, which, _ = best_split(inst, q, candidates)
    return value, which


def best_split(inst: Instance, q: int, candidates: list[Placement] = ()) -> tuple[float, str, Placement]:
    """:func:`horizon` plus the split that achieves it (the natural warm start)."""
    from dnnplace.heuristics.baselines import latency_starts

    cl = inst.require_cluster()
    cands = [(p, "given") for p in candidates] + [(p, name) for name, p in latency_starts(inst)]
    best, which, split = np.inf, "", None
    acc = np.array([k != "cpu" for k in cl.kinds])
    for p, name in cands:
        ev = latency(p)
        if ev.objective is None or not ev.feasible or (slot_pieces(p)[acc] > q).any():
            continue
        if ev.objective < best:
            best, which, split = ev.objective, name, p
    if split is None:
        raise InputError("no heuristic split fits the latency IP (needed for its big-M); pass a horizon")
    return float(best), which, split
