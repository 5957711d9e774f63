r"""Interchangeable devices: the classes the symmetry-breaking rows of the IPs act on, and
the relabelling that makes a placement satisfy those rows (for warm starts).

Two rules, one per model, kept as they are (each model's rows were validated with its own):

* max-load IP (:mod:`dnnplace.formulations.maxload_ip`, ``symmetry_breaking``):
  :func:`identical_devices` groups devices of the same kind, memory and speed whose link
  figures to and from the other devices agree as a multiset; the rows order a class's
  devices by their earliest colocation group (:func:`group_order`), and
  :func:`canonical` relabels a placement accordingly.
* Pesto ILP (:mod:`dnnplace.formulations.pesto_ip`, ``symmetry``):
  :func:`identical_device_classes` asks more, that swapping two devices leaves every link
  array unchanged (a cluster automorphism); the rows order a class's devices by first use
  in topological order, and :func:`canonical_relabel` relabels a placement accordingly.

Both relabellings keep the objective: the devices swapped are interchangeable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement

__all__ = ["identical_devices", "group_order", "canonical", "identical_device_classes", "canonical_relabel"]


# ---------------------------------------------------------------------------- max-load IP
def identical_devices(cl: Any) -> list[list[int]]:
    """Classes (size >= 2) of interchangeable devices: same kind, memory, speed and
    the same link figures to and from every other device."""
    classes: dict[tuple, list[int]] = {}
    for d in range(cl.size):
        others = [e for e in range(cl.size) if e != d]
        key = (cl.kinds[d], float(cl.memory[d]), float(cl.speed[d]), float(cl.op_overhead[d]),
               float(cl.send_overhead[d]), float(cl.recv_overhead[d]),
               tuple(sorted(zip(cl.beta0[d, others], cl.beta0[others, d], cl.beta1[d, others],
                                cl.beta1[others, d], cl.cost_factor[d, others], cl.cost_factor[others, d]))))
        classes.setdefault(key, []).append(d)
    return [c for c in classes.values() if len(c) >= 2]


def group_order(data: Any) -> np.ndarray:
    """Groups ranked by the topological position of their first member (``data``: the
    max-load IP's model data, with ``graph``, ``label`` and ``n_groups``)."""
    first = np.full(data.n_groups, np.iinfo(np.int64).max)
    np.minimum.at(first, data.label, data.graph.topo_position)
    return np.argsort(first, kind="stable")


def canonical(data: Any, p: Placement) -> Placement:
    """``p`` with the devices of every interchangeable class relabelled in order of
    their earliest group (what the symmetry-breaking rows demand); same loads."""
    classes = getattr(data, "sym_classes", [])
    if not classes:
        return p
    dev = p.device.copy()
    grp_dev = np.full(data.n_groups, -1, dtype=np.int64)
    grp_dev[data.label] = dev
    order = group_order(data)
    rank = np.empty(data.n_groups, dtype=np.int64)
    rank[order] = np.arange(data.n_groups)
    new = dev.copy()
    for c in classes:
        firsts = []
        for d in c:
            on = np.flatnonzero(grp_dev == d)
            firsts.append((rank[on].min() if on.size else np.iinfo(np.int64).max, d))
        for target, (_, d) in zip(c, sorted(firsts)):
            new[dev == d] = target
    return Placement(p.graph, p.cluster, new)


# ---------------------------------------------------------------------------- Pesto ILP
def identical_device_classes(cluster: Cluster) -> list[list[int]]:
    """Classes of interchangeable devices: same kind, memory and speed, and swapping any
    two of them leaves every link array unchanged (so any permutation within a class is
    an automorphism of the cluster)."""
    D = cluster.size
    key: dict[tuple, list[int]] = {}
    for d, dev in enumerate(cluster.devices):
        key.setdefault((dev.kind, dev.memory, dev.speed, dev.op_overhead, dev.send_overhead, dev.recv_overhead),
                       []).append(d)
    out = []
    for members in key.values():
        if len(members) < 2:
            continue
        cls = [members[0]]
        for d in members[1:]:
            perm = np.arange(D)
            perm[[members[0], d]] = perm[[d, members[0]]]
            if all(np.array_equal(arr, arr[np.ix_(perm, perm)]) for arr in
                   (cluster.beta0, cluster.beta1, cluster.cost_factor)):
                cls.append(d)
        if len(cls) > 1:
            out.append(cls)
    return out


def canonical_relabel(graph: OpGraph, cluster: Cluster, device: np.ndarray) -> np.ndarray:
    """Relabel devices inside each identical class by first use in topological order,
    so that a placement satisfies the symmetry-breaking constraints (same schedule)."""
    dev = np.asarray(device, dtype=np.int64).copy()
    for cls in identical_device_classes(cluster):
        mapping: dict[int, int] = {}
        in_cls = set(cls)
        for v in graph.topo_order.tolist():
            d = int(dev[v])
            if d in in_cls and d not in mapping:
                mapping[d] = cls[len(mapping)]
        for d in cls:
            if d not in mapping:
                mapping[d] = [c for c in cls if c not in mapping.values()][0]
        lut = np.arange(cluster.size)
        for a, b in mapping.items():
            lut[a] = b
        dev = lut[dev]
    return dev
