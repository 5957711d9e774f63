"""Lower bounds that let the exact max-load DP skip ideals (Tarnawski et al. Sec. 5.1.1).

A state of the DP is an ideal ``I`` split over ``a`` of the ``k`` accelerators and ``b`` of
the ``l`` CPUs. If some split has max-load at most ``T``, the rest ``V \\ I`` is split over
at most ``k - a`` accelerators and ``l - b`` CPUs with every load at most ``T``. A load is
at least its compute (Sec. 5.1: compute plus transfers, or their maximum, App. C.1; a
stage on ``r`` replicas takes ``r`` accelerators and at least ``1/r`` of its compute,
App. C.2), so the accelerators carry at most ``(k - a) T`` accelerator time, and the nodes
the CPUs carry have CPU time at most ``(l - b) T``, hence accelerator time at most

    f(C) = max { acc(S) : cpu(S) <= C },   C = (l - b) T,

which the fractional knapsack over all nodes bounds from above (take nodes by decreasing
``acc / cpu`` until the CPU time is used up, the last one in part). So a state with

    acc(V \\ I) > (k - a) T + f((l - b) T)                                   (*)

lies on no split of max-load ``<= T``: :func:`state_caps` gives the right-hand side per
``(a, b)``, the DP kernel skips an ideal whose every state fails (*) or has a value above
``T``. At the empty ideal (*) gives a lower bound on the optimum (:func:`knapsack_bound`).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.instance import Instance

__all__ = ["cpu_relief", "state_caps", "knapsack_bound", "load_lower_bound"]


def cpu_relief(acc_c: np.ndarray, cpu_c: np.ndarray, cpu_ok: np.ndarray, capacity: float) -> float:
    """``f(capacity)``: an upper bound on the accelerator time of a node set whose CPU time
    is at most ``capacity`` (fractional knapsack over the nodes that can run on a CPU).

    >>> cpu_relief(np.array([1.0, 2.0]), np.array([10.0, 10.0]), np.array([True, True]), 15.0)
    2.5
    """
    if capacity <= 0:
        return float(acc_c[cpu_ok & (cpu_c <= 0)].sum())
    a, c = acc_c[cpu_ok], cpu_c[cpu_ok]
    free = c <= 0
    base = float(a[free].sum())
    a, c = a[~free], c[~free]
    order = np.argsort(-(a / c), kind="stable")
    a, c = a[order], c[order]
    cum = np.cumsum(c)
    full = int(np.searchsorted(cum, capacity, side="right"))
    got = base + float(a[:full].sum())
    if full < a.size:
        used = float(cum[full - 1]) if full else 0.0
        got += float(a[full]) * (capacity - used) / float(c[full])
    return got


def state_caps(acc_c: np.ndarray, cpu_c: np.ndarray, cpu_ok: np.ndarray, k: int, l: int,  # noqa: E741
               t: float) -> np.ndarray:
    """The right-hand side of (*) for every ``(a, b)``, shape ``(k+1, l+1)``; ``inf`` for
    ``t = inf``. A tiny relative slack keeps float sums along the lattice from rejecting
    a state that meets (*) exactly."""
    if not np.isfinite(t):
        return np.full((k + 1, l + 1), np.inf)
    relief = np.array([cpu_relief(acc_c, cpu_c, cpu_ok, m * t) for m in range(l + 1)])
    caps = (k - np.arange(k + 1))[:, None] * t + relief[::-1][None, :]
    return caps * (1 + 1e-9) + 1e-9


def knapsack_bound(acc_c: np.ndarray, cpu_c: np.ndarray, cpu_ok: np.ndarray, k: int, l: int) -> float:  # noqa: E741
    """The least ``T`` with ``acc(V) <= k T + f(l T)`` ((*) at the empty ideal), by
    bisection (the right-hand side grows with ``T``): no split has a smaller max-load.

    >>> round(knapsack_bound(np.array([4.0, 4.0]), np.array([8.0, 8.0]), np.array([True, True]), 1, 1), 9)
    5.333333333
    """
    total = float(acc_c.sum())
    if total <= 0:
        return 0.0
    if k == 0 and cpu_relief(acc_c, cpu_c, cpu_ok, float(cpu_c[cpu_ok].sum()) + 1.0) < total * (1 - 1e-12):
        return float("inf")
    lo, hi = 0.0, total / k if k else float(cpu_c[cpu_ok].sum()) / max(l, 1) + 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if k * mid + cpu_relief(acc_c, cpu_c, cpu_ok, l * mid) >= total:
            hi = mid
        else:
            lo = mid
    return lo


def load_lower_bound(inst: Instance, replicas: int = 1) -> float:
    """A lower bound on the max-load of every split (any contiguity, either objective):
    every node runs somewhere, and a device's load is at least its compute, so the
    optimum is at least the largest ``min(p_acc(v), p_cpu(v))`` (divided by ``replicas``,
    the largest replication factor), at least the total of these minima spread over the
    devices of the kinds that can run some node (a stage on ``r`` replicas takes ``r``
    devices; a host CPU beside the GPUs of a GPU-only graph takes no share), and at least
    :func:`knapsack_bound` over all nodes ((*) at the empty ideal).

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> from dnnplace.graphs.instance import Instance
    >>> g = OpGraph(ids=[0, 1, 2], kinds=("acc", "cpu"), compute=[[2, 9], [2, 9], [5, 9]],
    ...             memory=[0, 0, 0], src=[0, 1], dst=[1, 2])
    >>> load_lower_bound(Instance(g, Cluster.tarnawski(2, 0, 10)))  # max(5, 9 / 2)
    5.0
    >>> g = OpGraph(ids=[0, 1], kinds=("acc", "cpu"), compute=[[4, np.nan], [4, np.nan]], memory=[0, 0],
    ...             src=[0], dst=[1])
    >>> load_lower_bound(Instance(g, Cluster.tarnawski(2, 1, 10)))  # the CPU runs neither: 8 / 2
    4.0
    """
    from dnnplace.evaluation.bounds import work_lower_bound
    from dnnplace.heuristics.transfer_costs import dp_devices

    g, cl = inst.graph, inst.require_cluster()
    accs, cpus = dp_devices(cl)
    comp = cl.compute_matrix(g)
    acc = comp[:, accs[0]] if accs.size else np.full(g.n, np.nan)
    cpu = comp[:, cpus[0]] if cpus.size else np.full(g.n, np.nan)
    best = np.fmin(acc, cpu)
    if np.isnan(best).any():
        return float("inf")
    k = accs.size if np.isfinite(acc).any() else 0
    l = cpus.size if np.isfinite(cpu).any() else 0  # noqa: E741
    knapsack = knapsack_bound(np.nan_to_num(acc), np.nan_to_num(cpu), np.isfinite(cpu), k, l) if k else 0.0
    return float(max(best.max(initial=0.0) / replicas, work_lower_bound(g, cl), knapsack))
