"""Per-device loads: what each node costs where it is placed, and what each device pays.

:func:`device_loads` gives the max-load components of docs/semantics.md 2.2 (compute and the
transfers to and from host memory, split into forward and backward parts); :func:`host_cost`
prices one edge's tensor between a device and host memory (the explicit cost, else the link
model), as the latency evaluation charges it too.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.placement import Placement

__all__ = ["is_cpu", "node_times", "host_cost", "grouped_max", "device_loads"]


def is_cpu(p: Placement) -> np.ndarray:
    """Per device of the cluster: whether it is a CPU."""
    return np.array([k == "cpu" for k in p.cluster.kinds])


def node_times(p: Placement) -> np.ndarray:
    """Processing time of every node on its placed device (``NaN`` if unsupported)."""
    comp = p.cluster.compute_matrix(p.graph)
    return comp[np.arange(p.graph.n), p.device]


def host_cost(p: Placement, e: np.ndarray, dev: np.ndarray, outgoing: bool) -> np.ndarray:
    """Cost of moving edge ``e``'s tensor between device ``dev`` and host memory."""
    g, cl = p.graph, p.cluster
    cpus = cl.devices_of_kind("cpu")
    if cpus.size:
        host = np.full(e.shape, cpus[0])
    else:
        host = p.device[g.dst[e]] if outgoing else p.device[g.src[e]]
    a, b = (dev, host) if outgoing else (host, dev)
    cost = g.edge_cost[e]
    model = cl.beta0[a, b] + cl.beta1[a, b] * g.edge_bytes[e]
    return np.where(np.isnan(cost), model, cost)


def grouped_max(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys and the max value per key."""
    if keys.size == 0:
        return keys, vals
    uniq, inv = np.unique(keys, return_inverse=True)
    out = np.full(uniq.shape, -np.inf)
    np.maximum.at(out, inv, vals)
    return uniq, out


def device_loads(p: Placement) -> dict[str, np.ndarray]:
    """Per-device max-load components (docs/semantics.md 2.2): compute, comm_in, comm_out, each
    split into forward and backward parts, as ``(D,)`` arrays."""
    g, cl = p.graph, p.cluster
    d_count = cl.size
    times = node_times(p)
    bw = g.backward
    dev = p.device
    comp_fw = np.bincount(dev[~bw], weights=times[~bw], minlength=d_count)
    comp_bw = np.bincount(dev[bw], weights=times[bw], minlength=d_count)
    pays = ~is_cpu(p)
    du, dv = dev[g.src], dev[g.dst]
    cross = du != dv
    out = {"compute_fw": comp_fw, "compute_bw": comp_bw}
    for name, side, outgoing in (("comm_in", dv, False), ("comm_out", du, True)):
        e = np.flatnonzero(cross & pays[side])
        d = side[e]
        cost = host_cost(p, e, d, outgoing)
        keys, cmax = grouped_max(g.src[e] * d_count + d, cost)
        u, d = keys // d_count, keys % d_count
        is_bw = bw[u]
        out[f"{name}_fw"] = np.bincount(d[~is_bw], weights=cmax[~is_bw], minlength=d_count)
        out[f"{name}_bw"] = np.bincount(d[is_bw], weights=cmax[is_bw], minlength=d_count)
    out["fw"] = out["compute_fw"] + out["comm_in_fw"] + out["comm_out_fw"]
    out["bw"] = out["compute_bw"] + out["comm_in_bw"] + out["comm_out_bw"]
    out["compute"] = comp_fw + comp_bw
    out["comm"] = out["comm_in_fw"] + out["comm_in_bw"] + out["comm_out_fw"] + out["comm_out_bw"]
    out["load"] = out["fw"] + out["bw"]
    return out
