"""Local search baseline for max-load (Tarnawski et al. Sec. 6, Table 1).

Units are colocation classes (forward and backward nodes of a class move together).
Each restart draws a uniformly random accelerator for every unit, then repeatedly makes
the single unit move (to another accelerator) that lowers the max-load most, until no
move improves it by more than ``1e-5`` (a local optimum); the best of ``restarts``
seeded restarts is returned. As in the paper's baseline, CPUs are not used, splits may
be non-contiguous, and memory is not a search constraint: the independent evaluator
reports any memory violation of the result. Units that the accelerators cannot run are
pinned to the first CPU.

Moves are scored incrementally: moving a unit from device ``a`` to ``b`` changes only
the loads of ``a`` and ``b``, through the nodes of the unit and their predecessors,
kept in a per-node count of successors on each device (:func:`_move_delta`).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import colocation_labels
from dnnplace.heuristics.jit import cached_njit
from dnnplace.heuristics.transfer_costs import dp_devices, node_transfer_cost, subdivide_out_costs

__all__ = ["local_search"]


@cached_njit
def _loads(dev, comp, is_acc, cost, out_ptr, out_nbr, n_dev):
    """Per-device load (docs/semantics.md 2.2) and successor counts ``cnt[u, d]``."""
    n = dev.shape[0]
    cnt = np.zeros((n, n_dev), dtype=np.int64)
    load = np.zeros(n_dev)
    for u in range(n):
        load[dev[u]] += comp[u, dev[u]]
        for q in range(out_ptr[u], out_ptr[u + 1]):
            cnt[u, dev[out_nbr[q]]] += 1
    for u in range(n):
        crossing = False
        for d in range(n_dev):
            if d != dev[u] and cnt[u, d] > 0:
                crossing = True
                if is_acc[d]:
                    load[d] += cost[u]
        if crossing and is_acc[dev[u]]:
            load[dev[u]] += cost[u]
    return load, cnt


@cached_njit
def _node_charge(u, d, dev, cnt, is_acc, cost, n_dev):
    """Transfer cost node u puts on device d."""
    if not is_acc[d]:
        return 0.0
    if dev[u] == d:
        for e in range(n_dev):
            if e != d and cnt[u, e] > 0:
                return cost[u]
        return 0.0
    return cost[u] if cnt[u, d] > 0 else 0.0


@cached_njit
def _apply(unit_ptr, unit_nodes, pred_ptr, pred_nbr, x, b, dev, cnt, load, comp, is_acc, cost, n_dev, mark, stamp):
    """Move unit x to device b, updating dev, cnt and the loads of the two devices."""
    a = dev[unit_nodes[unit_ptr[x]]]
    if a == b:
        return
    # nodes whose charges may change: unit members and their predecessors
    touched = []
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        v = unit_nodes[q]
        if mark[v] != stamp:
            mark[v] = stamp
            touched.append(v)
        for r in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_nbr[r]
            if mark[u] != stamp:
                mark[u] = stamp
                touched.append(u)
    for u in touched:
        load[a] -= _node_charge(u, a, dev, cnt, is_acc, cost, n_dev)
        load[b] -= _node_charge(u, b, dev, cnt, is_acc, cost, n_dev)
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        v = unit_nodes[q]
        load[a] -= comp[v, a]
        load[b] += comp[v, b]
        dev[v] = b
        for r in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_nbr[r]
            cnt[u, a] -= 1
            cnt[u, b] += 1
    for u in touched:
        load[a] += _node_charge(u, a, dev, cnt, is_acc, cost, n_dev)
        load[b] += _node_charge(u, b, dev, cnt, is_acc, cost, n_dev)


@cached_njit
def _search(dev, movable, accs, unit_ptr, unit_nodes, pred_ptr, pred_nbr, comp, is_acc, cost, out_ptr, out_nbr,
            n_dev):
    load, cnt = _loads(dev, comp, is_acc, cost, out_ptr, out_nbr, n_dev)
    mark = np.full(dev.shape[0], -1, dtype=np.int64)
    stamp = 0
    cur = load.max()
    moves = 0
    while True:
        best, bx, bb = np.inf, -1, -1
        for x in range(unit_ptr.shape[0] - 1):
            if not movable[x]:
                continue
            a = dev[unit_nodes[unit_ptr[x]]]
            for b in accs:
                if b == a:
                    continue
                stamp += 1
                _apply(unit_ptr, unit_nodes, pred_ptr, pred_nbr, x, b, dev, cnt, load, comp, is_acc, cost, n_dev,
                       mark, stamp)
                val = load.max()
                stamp += 1
                _apply(unit_ptr, unit_nodes, pred_ptr, pred_nbr, x, a, dev, cnt, load, comp, is_acc, cost, n_dev,
                       mark, stamp)
                if val < best:
                    best, bx, bb = val, x, b
        if bx < 0 or best > cur - 1e-5:
            break
        stamp += 1
        _apply(unit_ptr, unit_nodes, pred_ptr, pred_nbr, bx, bb, dev, cnt, load, comp, is_acc, cost, n_dev, mark,
               stamp)
        cur = load.max()
        moves += 1
    return cur, moves


def local_search(inst: Instance, *, restarts: int = 10, seed: int = 0) -> tuple[Placement, float, list[float]]:
    """Best-improvement single-unit local search from ``restarts`` random starts.

    Returns the best placement, its max-load and the value of every restart.

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1], kinds=("acc", "cpu"), compute=[[3, 9], [3, 9]], memory=[0, 0],
    ...             src=[0], dst=[1], edge_cost=[1])
    >>> local_search(Instance(g, Cluster.tarnawski(2, 1, 10)), restarts=3)[1]  # apart: 3+1 each
    4.0
    """
    g, cl = inst.graph, inst.require_cluster()
    sub = subdivide_out_costs(g, cl)
    if sub is not g:  # out-edges of different costs (Appendix B): search the subdivided graph
        p, val, values = local_search(Instance(sub, cl, inst.source), restarts=restarts, seed=seed)
        return Placement(g, cl, p.device[: g.n]), val, values
    accs, cpus = dp_devices(cl)
    if accs.size == 0:
        raise InputError("local search needs at least one accelerator")
    comp = np.nan_to_num(cl.compute_matrix(g), nan=np.inf)
    is_acc = np.array([kd != "cpu" for kd in cl.kinds])
    cost = node_transfer_cost(g, cl)
    labels = colocation_labels(g)
    k = int(labels.max()) + 1
    order = np.argsort(labels, kind="stable")
    unit_ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=unit_ptr[1:])
    movable = ~np.bincount(labels, weights=np.isinf(comp[:, accs[0]]).astype(float), minlength=k).astype(bool)
    if (~movable).any() and cpus.size == 0:
        raise InputError("some nodes cannot run on the accelerators and there is no CPU")
    rng = np.random.default_rng(seed)
    best_dev, best_val, values = None, np.inf, []
    for _ in range(restarts):
        unit_dev = rng.choice(accs, size=k)
        if cpus.size:
            unit_dev[~movable] = cpus[0]
        dev = unit_dev[labels].astype(np.int64)
        val, _ = _search(dev, movable, accs, unit_ptr, order.astype(np.int64), g.in_ptr, g.in_nbr, comp, is_acc,
                         cost, g.out_ptr, g.out_nbr, cl.size)
        val = float(_loads(dev, comp, is_acc, cost, g.out_ptr, g.out_nbr, cl.size)[0].max())  # no drift
        values.append(val)
        if val < best_val:
            best_val, best_dev = val, dev.copy()
    return Placement(g, cl, best_dev), best_val, values
