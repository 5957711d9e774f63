r"""Communication costs shared by the Tarnawski et al. IPs (max-load Fig. 6, latency Figs. 3-4).

Every transfer goes through a host CPU: :func:`host_costs` gives the cost of moving an
edge's tensor host->device and device->host, as :mod:`dnnplace.evaluation.evaluate` charges
it. A node ``u`` pays its output cost once per direction and unit; when its out-edges
carry different costs the evaluator charges the largest *crossing* one, which the IPs
model exactly with a staircase (:func:`comm_levels`): for the sorted distinct costs
``w_1 < ... < w_r`` of ``u``'s edges there is one ``Comm[u,unit,t]`` per level, forced by
the edges of cost ``>= w_t`` and weighted ``w_t - w_{t-1}`` (one level, i.e. exactly the
paper's ``c_u Comm[u,d]`` of (17)-(21) and (4)-(7), on the Tarnawski inputs).

>>> import numpy as np
>>> from dnnplace.graphs.graph import OpGraph
>>> g = OpGraph.from_ids([0, 1, 2], [(0, 1), (0, 2)], kinds=("acc",), compute=np.ones((3, 1)),
...                      memory=np.zeros(3))
>>> cost = np.array([[1.0], [3.0]])
>>> [(u, unit, t, delta, heads) for u, unit, t, delta, heads in
...  comm_levels(g, cost, np.zeros(2, dtype=bool), [0])]
[(0, 0, 0, 1.0, [1, 2]), (0, 0, 1, 2.0, [2])]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["host_costs", "comm_levels"]


def host_costs(g: OpGraph, cl: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(m, D)`` cost of moving each edge's tensor host->device (in) and device->host
    (out), exactly as :mod:`dnnplace.evaluation.evaluate` charges it (explicit cost, else the link
    model to/from the first CPU)."""
    cpus = cl.devices_of_kind("cpu")
    if cpus.size == 0:
        raise InputError("the Tarnawski IPs route every transfer through a host CPU; the cluster has none")
    h = int(cpus[0])
    b = g.edge_bytes[:, None]
    cost = g.edge_cost[:, None]
    cin = np.where(np.isnan(cost), cl.beta0[h, :][None, :] + cl.beta1[h, :][None, :] * b, cost)
    cout = np.where(np.isnan(cost), cl.beta0[:, h][None, :] + cl.beta1[:, h][None, :] * b, cost)
    return cin, cout


def comm_levels(g: OpGraph, cost: np.ndarray, never_cross: np.ndarray, unit_device: list[int],
                keep_zero: bool = False) -> list[tuple[int, int, int, float, list[int]]]:
    """Staircase comm variables ``(u, unit, level, delta, heads)``: for node ``u`` and a
    unit (device or slot) on device ``unit_device[unit]``, level ``t`` is forced by the
    out-edges of ``u`` whose cost is ``>= w_t`` and weighs ``delta = w_t - w_{t-1}``.
    ``keep_zero`` keeps a zero-weight first level (the latency IP needs the indicator)."""
    out: list[tuple[int, int, int, float, list[int]]] = []
    ptr, eid = g.out_ptr, g.out_eid
    for u in range(g.n):
        es = eid[ptr[u]:ptr[u + 1]]
        es = es[~never_cross[es]]
        if es.size == 0:
            continue
        for unit, d in enumerate(unit_device):
            if d < 0:
                continue
            c = cost[es, d]
            prev = 0.0
            for t, w in enumerate(np.unique(c)):
                delta = float(w - prev)
                prev = float(w)
                if delta <= 0 and not (keep_zero and t == 0):
                    continue
                heads = sorted(set(g.dst[es[c >= w]].tolist()))
                out.append((u, unit, t, delta, heads))
    return out
