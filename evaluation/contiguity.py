"""Contiguity of device node sets (Tarnawski Definition 3.1) and the pipeline order of stages.

:func:`noncontiguous_sets` finds, for many labels at once, the node sets that are not
convex (reachability as 64-bit masks, one vectorised step per topological level);
:func:`noncontiguous` applies it to a placement's devices in the parts a contiguity mode
names, and :func:`contiguity_violations` words the findings, with a cycle of devices that
wait on each other (:func:`dnnplace.graphs.pipeline.device_cycle`).
"""

from __future__ import annotations

import numpy as np

from dnnplace.evaluation.loads import is_cpu
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.pipeline import convex_part_mode, device_cycle
from dnnplace.graphs.placement import Placement

__all__ = ["noncontiguous_sets", "noncontiguous", "contiguity_violations"]


def _propagate(g: OpGraph, edges: np.ndarray, bits: np.ndarray, forward: bool) -> np.ndarray:
    """OR of ``bits`` over all strict ancestors (``forward``) or descendants of each node,
    following only ``edges``; one vectorised step per topological level."""
    reach = np.zeros(g.n, dtype=np.uint64)
    if edges.size == 0:
        return reach
    head, tail = (g.src[edges], g.dst[edges]) if forward else (g.dst[edges], g.src[edges])
    lvl = g.level[tail]
    order = np.argsort(lvl if forward else -lvl, kind="stable")
    head, tail, lvl = head[order], tail[order], lvl[order]
    cuts = np.flatnonzero(np.diff(lvl)) + 1
    for h, t in zip(np.split(head, cuts), np.split(tail, cuts)):
        np.bitwise_or.at(reach, t, bits[h] | reach[h])
    return reach


def noncontiguous_sets(g: OpGraph, labels: np.ndarray, checked: np.ndarray,
                       mask: np.ndarray | None = None) -> list[tuple[int, np.ndarray]]:
    """``(label, offending nodes)`` for every label in ``checked`` whose node set
    ``{v : labels[v] == label}`` is not contiguous (Tarnawski Definition 3.1) within the
    subgraph induced by ``mask``.

    ``S`` is contiguous iff no node outside ``S`` is both reachable from ``S`` and
    reaches ``S``. Reachability is propagated for 64 labels at a time as bitmasks, one
    vectorised step per topological level, so the check is linear in the graph size.
    """
    mask = np.ones(g.n, bool) if mask is None else mask
    edges = np.flatnonzero(mask[g.src] & mask[g.dst])
    size = int(max(labels.max(initial=-1), checked.max(initial=-1))) + 1
    out = []
    for lo in range(0, checked.size, 64):
        chunk = checked[lo:lo + 64]
        slot = np.full(size + 1, -1, dtype=np.int64)  # labels of -1 map to the extra slot
        slot[chunk] = np.arange(chunk.size)
        s = slot[labels]
        bits = np.where(mask & (s >= 0), np.left_shift(np.uint64(1), np.maximum(s, 0).astype(np.uint64)),
                        np.uint64(0)).astype(np.uint64)
        between = _propagate(g, edges, bits, True) & _propagate(g, edges, bits, False) & ~bits
        between[~mask] = 0
        for j, lab in enumerate(chunk):
            bad = np.flatnonzero((between >> np.uint64(j)) & np.uint64(1))
            if bad.size:
                out.append((int(lab), bad))
    return out


def noncontiguous(p: Placement, mode: str = "all", *, include_cpus: bool = True) -> list[tuple[int, str, np.ndarray]]:
    """``(device, part, offending nodes)`` for every device whose node set is not
    convex (:func:`noncontiguous_sets`) in the parts of ``mode``: ``all`` (whole
    graph), ``forward`` (the forward part only, as the authors' reference IP), ``both``
    (forward and backward parts separately, as the paper's DP), ``none``; a
    ``convex-`` mode names the same parts. Convexity only: the pipeline order of the
    acyclic modes is :func:`dnnplace.graphs.pipeline.device_cycle`'s.
    """
    mode = convex_part_mode(mode)
    if mode == "none":
        return []
    g = p.graph
    checked = np.flatnonzero(~is_cpu(p) | include_cpus)
    parts = {"all": [("", None)],
             "forward": [("forward part", ~g.backward)],
             "both": [("forward part", ~g.backward), ("backward part", g.backward)]}[mode]
    if not g.is_training and mode != "all":
        parts = [("", None)]
    return [(d, label, bad) for label, mask in parts for d, bad in noncontiguous_sets(g, p.device, checked, mask)]


def contiguity_violations(p: Placement, mode: str = "all", *, include_cpus: bool = True) -> list[str]:
    """Messages for :func:`noncontiguous` devices, naming one offending node each, and,
    in the acyclic modes (:mod:`dnnplace.graphs.pipeline`), for a cycle of devices that
    wait on each other, naming one edge per arc."""
    g, cl = p.graph, p.cluster
    out = [f"device {cl.names[d]}{f' ({label})' if label else ''} is not contiguous: node "
           f"{g.ids[bad[0]]!r} (on {cl.names[p.device[bad[0]]]}) lies on a path between two of its "
           f"nodes ({bad.size} such node(s))" for d, label, bad in noncontiguous(p, mode, include_cpus=include_cpus)]
    checked = np.flatnonzero(~is_cpu(p) | include_cpus)
    cyc = device_cycle(g, p.device, mode, checked)
    if cyc is not None:
        arcs = " -> ".join([cl.names[cyc[0][0]]] + [cl.names[b] for _, b, _ in cyc])
        edges = "; ".join(f"edge {g.ids[g.src[e]]!r}->{g.ids[g.dst[e]]!r}"
                          f"{' (mirrored: backward edge of an orphan)' if p.device[g.src[e]] != a else ''}"
                          f" from {cl.names[a]} to {cl.names[b]}" for a, b, e in cyc)
        out.append(f"devices wait on each other in a cycle (no pipeline order of the stages): {arcs} ({edges})")
    return out
