r"""Hierarchical accelerator systems (Tarnawski et al. Appendix C.3): servers of GPUs.

Inside a server, transfers go through the server's host memory as in the paper's flat
model (a node's output costs ``c_u`` to write out and ``c_u`` to read in, docs/semantics.md 2.2).
Between servers, a tensor additionally crosses the network: server ``s``'s network
interface carries, per sample,

    net_s = sum_{u on s, some consumer on another server} rho * c_u      (uplink)
          + sum_{u off s, some consumer on s} rho * c_u                  (downlink)

each ``c_u`` once per node and direction, ``rho`` the slowdown of the inter-server link
over the host copy (``inter_factor``). Network interfaces are pipeline resources like
the devices (PipeDream's hierarchical model), so the max-load becomes
``max(max_d load_d, max_s net_s)``; :func:`network_loads` is what the independent
evaluator (:func:`dnnplace.evaluation.evaluate.maxload`) adds for a hierarchical cluster.

Presets: ``2x4`` and ``4x8`` (servers x GPUs per server), :func:`hierarchical_cluster`.

>>> cl = hierarchical_cluster("2x4", memory=16e9)
>>> cl.size, cl.meta["hierarchy"]["servers"][1]
(8, [4, 5, 6, 7])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InputError

__all__ = ["HIERARCHY_PRESETS", "hierarchical_cluster", "server_of", "network_loads"]

# preset: (servers, GPUs per server, inter-server slowdown rho)
HIERARCHY_PRESETS = {"2x4": (2, 4, 4.0), "4x8": (4, 8, 4.0)}


def hierarchical_cluster(shape: str | tuple[int, int], *, memory: float = float("inf"),
                         inter_factor: float | None = None, kind: str = "acc") -> Cluster:
    """``servers x gpus`` accelerators named ``s{i}.{kind}{j}``; ``shape`` a preset name
    or ``(servers, gpus)``; ``inter_factor`` the ``rho`` of the module docstring
    (default the preset's 4, i.e. a network 4x slower than the host copy)."""
    if isinstance(shape, str):
        if shape not in HIERARCHY_PRESETS:
            raise InputError(f"unknown hierarchy preset {shape!r}; use one of {sorted(HIERARCHY_PRESETS)}")
        servers, gpus, rho = HIERARCHY_PRESETS[shape]
    else:
        servers, gpus = shape
        rho = 4.0
    rho = rho if inter_factor is None else float(inter_factor)
    if servers < 1 or gpus < 1:
        raise InputError(f"a hierarchy needs at least one server and one GPU per server (empty level), "
                         f"got {servers} x {gpus}")
    if not np.isfinite(rho) or rho < 0:
        raise InputError(f"inter_factor must be a finite number >= 0, got {rho}")
    devs = [Device(f"s{s}.{kind}{g}", kind, memory) for s in range(servers) for g in range(gpus)]
    d = len(devs)
    srv = np.repeat(np.arange(servers), gpus)
    hops = 2.0 * (srv[:, None] != srv[None, :]) + 2.0 * (srv[:, None] == srv[None, :])
    np.fill_diagonal(hops, 0.0)
    return Cluster(tuple(devs), np.zeros((d, d)), np.zeros((d, d)), hops, name=f"hierarchy-{servers}x{gpus}",
                   meta={"model": "tarnawski",
                         "hierarchy": {"servers": [list(range(s * gpus, (s + 1) * gpus)) for s in range(servers)],
                                       "inter_factor": rho}})


def server_of(cluster: Cluster) -> np.ndarray | None:
    """Server index of every device, or ``None`` for a flat cluster."""
    h = cluster.meta.get("hierarchy")
    if not h:
        return None
    out = np.full(cluster.size, -1, dtype=np.int64)
    for s, devs in enumerate(h["servers"]):
        out[devs] = s
    if (out < 0).any():
        raise InputError(f"hierarchy: device {cluster.names[int(np.flatnonzero(out < 0)[0])]} is in no server")
    return out


def network_loads(placement: Any, node_cost: np.ndarray) -> np.ndarray:
    """``net_s`` per server (module docstring); ``node_cost[u]`` is ``c_u``."""
    cl, g = placement.cluster, placement.graph
    srv = server_of(cl)
    rho = float(cl.meta["hierarchy"]["inter_factor"])
    n_srv = int(srv.max()) + 1
    su, sv = srv[placement.device[g.src]], srv[placement.device[g.dst]]
    cross = su != sv
    up = np.unique(np.stack([g.src[cross], su[cross]], axis=1), axis=0) if cross.any() else np.empty((0, 2), int)
    down = np.unique(np.stack([g.src[cross], sv[cross]], axis=1), axis=0) if cross.any() else np.empty((0, 2), int)
    out = np.zeros(n_srv)
    for pairs in (up, down):
        np.add.at(out, pairs[:, 1], rho * node_cost[pairs[:, 0]])
    return out
