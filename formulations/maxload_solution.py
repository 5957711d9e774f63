r"""Between max-load IP values and placements (:mod:`dnnplace.formulations.maxload_ip`,
Tarnawski et al. Fig. 6): :func:`decode` reads the placement of a solved model, and
:func:`warm_start_values` completes a placement into values for every variable.

The completion is the tight one: ``x`` from the placement; each staircase level
``CommIn[u,d,t] = 1`` iff ``u`` is off ``d`` and a head of the level is on it
((17)-(18)), ``CommOut[u,d,t] = 1`` iff ``u`` is on ``d`` and a head of the level is off it
((19)); ``z`` the Lemma 4.1 witness (a node reaches a node of ``d`` inside its part,
(11)-(13)); ``order`` a pipeline order of the devices (interchangeable devices relabelled
along it, same loads); the objective variables the maxima of the loads (20)-(21) (App. A / C.1);
the symmetry-breaking prefix counts. Both functions are re-exported by
:mod:`dnnplace.formulations.maxload_ip`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from dnnplace.formulations.contiguity import contiguity_parts, order_values, reach_down
from dnnplace.formulations.device_symmetry import canonical, group_order
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.pipeline import device_order
from dnnplace.graphs.placement import Placement

__all__ = ["decode", "warm_start_values"]


def decode(m: pyo.ConcreteModel) -> Placement:
    """The placement of a solved model (each group on its device with the largest x)."""
    data = m._data  # the builder's model data (maxload_ip._Data)
    score = np.full((data.n_groups, data.cluster.size), -1.0)
    for (a, d), var in m.x.items():
        score[a, d] = var.value if var.value is not None else -1.0
    return Placement(data.graph, data.cluster, score.argmax(axis=1)[data.label])


def warm_start_values(m: pyo.ConcreteModel, p: Placement) -> dict[Any, float]:
    """Values for every variable of ``m`` that encode placement ``p`` consistently
    (x, tight CommIn/CommOut, the Lemma 4.1 witness z, the objective variables).

    Raises ``InputError`` when ``p`` splits a colocation group or uses an unsupported
    device (no feasible completion exists)."""
    data = m._data  # the builder's model data (maxload_ip._Data)
    g = data.graph
    p = canonical(data, p)
    rank = None
    if data.order_units:  # pipeline order: interchangeable devices relabelled along it
        order = device_order(g, p.device, data.opts.contiguity, data.order_units)
        rank = {d: r for r, d in enumerate(order)}
        lut = np.arange(data.cluster.size)
        for c in data.order_classes:
            lut[sorted(c, key=rank.__getitem__)] = c
        p = Placement(g, p.cluster, lut[p.device])
        rank = {int(lut[d]): r for d, r in rank.items()}
    dev = p.device
    grp_dev = np.full(data.n_groups, -1, dtype=np.int64)
    grp_dev[data.label] = dev
    if (grp_dev[data.label] != dev).any():
        raise InputError("warm start splits a colocation group")
    if not data.supported[np.arange(data.n_groups), grp_dev].all():
        raise InputError("warm start puts a node on a device it does not support")
    vals = ComponentMap()
    for (a, d), var in m.x.items():
        vals[var] = 1.0 if grp_dev[a] == d else 0.0
    on = lambda v, d: dev[v] == d  # noqa: E731
    for u, d, t, _, heads in data.comm_in:
        vals[m.comm_in[u, d, t]] = float(any(on(v, d) for v in heads) and not on(u, d))
    for u, d, t, _, heads in data.comm_out:
        vals[m.comm_out[u, d, t]] = float(on(u, d) and any(not on(v, d) for v in heads))
    if data.z_index:
        for mask in contiguity_parts(g, data.opts.contiguity):
            for d in {d for _, d in data.z_index}:
                z = reach_down(g, mask, dev == d)
                for v in np.flatnonzero(mask):
                    vals[m.z[int(v), d]] = float(z[v])
    if rank is not None:
        vals.update(order_values(m, rank))
    fw = np.array([_eval(m.fw[d], vals) for d in m.devices])
    bw = np.array([_eval(m.bw_load[d], vals) for d in m.devices])
    if data.opts.objective == "gpipe":
        vals[m.max_fw], vals[m.max_bw] = float(fw.max()), float(bw.max())
    elif data.opts.objective == "pipedream":
        vals[m.max_load] = float((fw + bw).max())
    else:
        comp = np.array([_eval(m.compute_load[d], vals) for d in m.devices])
        comm = np.array([_eval(m.comm_load[d], vals) for d in m.devices])
        vals[m.max_load] = float(np.maximum(comp, comm).max())
    if hasattr(m, "prefix"):
        counts = {d: np.cumsum(grp_dev[group_order(data)] == d) for d in {d for _, d in m.prefix}}
        for (r, d), var in m.prefix.items():
            vals[var] = float(counts[d][r])
    return vals


def _eval(expr: Any, vals: dict[Any, float]) -> float:
    """Value of a linear expression under ``vals`` (variables not in it count 0)."""
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(expr, compute_values=True)
    return float(repn.constant) + sum(float(c) * vals.get(v, 0.0) for c, v in zip(repn.linear_coefs,
                                                                                    repn.linear_vars))
