"""Static-memory repair: the best-effort memory policy of the list schedulers.

A list scheduler places node by node and only ever sees the memory already used, so a
greedy choice can leave a later node no device with room although a feasible placement
exists (a bin-packing dead end). :func:`repair_static_memory` then moves whole
colocation units (a group, or a single node) off devices over their capacity (SPEC
static memory, Pesto (8)) onto devices that can run every member and still have room:
on each overflowing device the largest unit that fits elsewhere moves first, to the
device with the most free memory; when no single unit fits anywhere, two units swap
devices (the one that lowers the overflow most, on graphs of up to ``swap_limit``
units). It never makes a device overflow that did not, and stops when no move helps;
whatever overflow is left, the evaluator reports (``memory_infeasible``).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.contract import colocation_labels
from dnnplace.graphs.graph import OpGraph

__all__ = ["repair_static_memory"]


def repair_static_memory(graph: OpGraph, cluster: Cluster, device: np.ndarray, *,
                         swap_limit: int = 2000) -> tuple[np.ndarray, int]:
    """``device`` with units moved off overflowing devices, and the number of moves
    (a swap counts as two).

    Examples
    --------
    Three 600-byte nodes on a 1 KB GPU pair, two of them crowded on gpu0: one moves.

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids=[0, 1, 2], kinds=["gpu"], compute=[[1.0]] * 3, memory=[600] * 3, src=[], dst=[])
    >>> cl = Cluster.single_host(3, gpu_memory=1000.0, with_cpu=False)
    >>> dev, moves = repair_static_memory(g, cl, np.array([0, 0, 1]))
    >>> dev.tolist(), moves
    ([2, 0, 1], 1)

    Two GPUs of 9.9 bytes holding 8 and 10: no node fits on gpu0, a 4 and a 3 swap.

    >>> g = OpGraph(ids=list(range(6)), kinds=["gpu"], compute=[[1.0]] * 6, memory=[4, 3, 1, 3, 3, 4],
    ...             src=[], dst=[])
    >>> cl = Cluster.single_host(2, gpu_memory=9.9, with_cpu=False)
    >>> dev, moves = repair_static_memory(g, cl, np.array([0, 0, 0, 1, 1, 1]))
    >>> np.bincount(dev, weights=g.memory).tolist(), moves
    ([9.0, 9.0], 2)
    """
    device = np.asarray(device, dtype=np.int64).copy()
    cap = np.asarray(cluster.memory, dtype=np.float64)
    used = np.bincount(device, weights=graph.memory, minlength=cluster.size)
    if not (used > cap * (1 + 1e-12)).any():
        return device, 0
    labels = colocation_labels(graph)
    k = int(labels.max()) + 1
    umem = np.bincount(labels, weights=graph.memory, minlength=k)
    runs = ~np.isnan(cluster.compute_matrix(graph))  # (n, D)
    allowed = np.ones((k, cluster.size), dtype=bool)
    np.logical_and.at(allowed, labels, runs)
    udev = np.full(k, -1, dtype=np.int64)
    udev[labels] = device
    whole = np.bincount(labels, minlength=k) == np.bincount(labels[device == udev[labels]], minlength=k)
    moves = 0
    while True:
        over = np.flatnonzero(used > cap * (1 + 1e-12))
        moved = False
        for d in over.tolist():
            units = np.flatnonzero((udev == d) & whole & (umem > 0))
            for u in units[np.argsort(-umem[units], kind="stable")].tolist():
                room = cap - used
                ok = allowed[u] & (room >= umem[u] * (1 - 1e-12))
                ok[d] = False
                if not ok.any():
                    continue
                t = int(np.flatnonzero(ok)[np.argmax(room[ok])])
                device[labels == u] = t
                used[d] -= umem[u]
                used[t] += umem[u]
                udev[u] = t
                moves += 1
                moved = True
                break
            if not moved and k <= swap_limit:
                moved = _swap(d, used, cap, umem, udev, whole, allowed)
                if moved:
                    u, w, t = moved
                    device[labels == u], device[labels == w] = t, d
                    moves += 2
        if not moved or not (used > cap * (1 + 1e-12)).any():
            return device, moves


def _swap(d: int, used: np.ndarray, cap: np.ndarray, umem: np.ndarray, udev: np.ndarray, whole: np.ndarray,
          allowed: np.ndarray) -> tuple[int, int, int] | None:
    """The swap of a unit ``u`` on ``d`` with a smaller unit ``w`` elsewhere that lowers
    ``d``'s overflow most without overflowing ``w``'s device; applied to ``used`` and
    ``udev``; ``(u, w, target)`` or ``None``."""
    mine = np.flatnonzero((udev == d) & whole)
    other = np.flatnonzero((udev != d) & (udev >= 0) & whole)
    if not mine.size or not other.size:
        return None
    gain = umem[mine][:, None] - umem[other][None, :]  # memory leaving d
    t = udev[other][None, :]
    ok = gain > 0
    ok &= allowed[mine[:, None], t] & allowed[other[None, :], d]
    ok &= used[t] + gain <= cap[t] * (1 + 1e-12)
    if not ok.any():
        return None
    # the largest relief of d, capped at what d needs (beyond that a smaller swap is as good)
    need = used[d] - cap[d]
    score = np.where(ok, np.minimum(gain, need) - 1e-9 * gain, -np.inf)
    i, j = np.unravel_index(int(np.argmax(score)), score.shape)
    u, w, tgt = int(mine[i]), int(other[j]), int(udev[other[j]])
    used[d] -= gain[i, j]
    used[tgt] += gain[i, j]
    udev[u], udev[w] = tgt, d
    return u, w, tgt
