"""Static-memory repair: the best-effort memory policy of the list schedulers.

A list scheduler places node by node and only ever sees the memory already used, so a
greedy choice can leave a later node no device with room although a feasible placement
exists (a bin-packing dead end). :func:`repair_static_memory` then moves whole
colocation units (a group, or a single node) off devices over their capacity
(docs/semantics.md 2.1 static memory, Pesto (8)) onto devices that can run every member and still have room:
on each overflowing device the largest unit that fits elsewhere moves first, to the
device with the most free memory; when no single unit fits anywhere, two units swap
devices (the one that lowers the overflow most, on graphs of up to ``swap_limit``
units). It never makes a device overflow that did not, and stops when no move helps;
whatever overflow is left, the evaluator reports (``memory_infeasible``).

Two more pieces of the shared memory and colocation policy (``docs/heuristics.md`` 0),
for placers that fill devices node by node (Celeritas, FastT, PARDNN):

- :func:`best_effort_device`, the ``on_oom`` policy when no device has room for a node:
  ``"best_effort"`` takes the device with the most free memory (Celeritas Alg. 2 l.18;
  *paper says* ``argmin Ava_m``, *we do* ``argmax``, the "lowest memory usage" of its
  text, decision C6) and the result is then ``memory_infeasible``; ``"raise"`` raises
  :class:`~dnnplace.graphs.errors.InfeasibleError`;
- :func:`repair_colocation`, the final pass that moves every colocation group onto the
  device of its largest-memory member (coarse nodes may have put a group's members on
  several devices), counting the nodes moved.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InfeasibleError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.transforms.contract import colocation_labels

__all__ = ["ON_OOM", "best_effort_device", "repair_colocation", "repair_static_memory"]

ON_OOM = ("best_effort", "raise")


def best_effort_device(free: np.ndarray, candidates: np.ndarray, *, on_oom: str = "best_effort",
                       what: str = "a node", need: float = 0.0) -> int:
    """The device for a node that fits on none of ``candidates`` (indices into ``free``):
    the one with the most free memory (ties: lowest index), or
    :class:`~dnnplace.graphs.errors.InfeasibleError` under ``on_oom="raise"``.

    >>> best_effort_device(np.array([1.0, 5.0, 5.0]), np.array([0, 1, 2]))
    1
    >>> best_effort_device(np.array([1.0]), np.array([0]), on_oom="raise", what="node 'a'", need=2.0)
    Traceback (most recent call last):
    ...
    dnnplace.graphs.errors.InfeasibleError: node 'a': no device has room for its 2 bytes (most free: 1); on_oom='raise'
    """
    if on_oom not in ON_OOM:
        raise InfeasibleError(f"on_oom {on_oom!r}: expected one of {', '.join(ON_OOM)}")
    candidates = np.asarray(candidates, dtype=np.int64)
    room = np.asarray(free, dtype=np.float64)[candidates]
    if on_oom == "raise":
        raise InfeasibleError(f"{what}: no device has room for its {need:g} bytes (most free: {room.max():g}); "
                              "on_oom='raise'")
    return int(candidates[int(np.argmax(room))])


def repair_colocation(graph: OpGraph, device: np.ndarray, anchor: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``device`` with every colocation group moved onto the device of its largest-memory
    member (ties: lowest node index), or onto ``anchor[group]`` where that is given and
    ``>= 0`` (a placer that pinned and reserved the group there), and the number of nodes
    moved.

    >>> g = OpGraph(ids=[0, 1, 2], kinds=["gpu"], compute=[[1.0]] * 3, memory=[1, 5, 1], src=[], dst=[],
    ...             colocation=[0, 0, 0])
    >>> dev, moved = repair_colocation(g, np.array([0, 1, 0]))
    >>> dev.tolist(), moved
    ([1, 1, 1], 2)
    >>> repair_colocation(g, np.array([0, 1, 0]), anchor=np.array([0]))[0].tolist()
    [0, 0, 0]
    """
    device = np.asarray(device, dtype=np.int64).copy()
    grp = graph.colocation
    members = np.flatnonzero(grp >= 0)
    if members.size == 0:
        return device, 0
    # members by group, then memory decreasing, then index: the first of each group leads
    order = members[np.lexsort((members, -graph.memory[members], grp[members]))]
    first = np.ones(order.size, dtype=bool)
    first[1:] = grp[order[1:]] != grp[order[:-1]]
    lead = np.zeros(int(grp.max()) + 1, dtype=np.int64)
    lead[grp[order[first]]] = device[order[first]]
    if anchor is not None:
        anchor = np.asarray(anchor, dtype=np.int64)[: lead.size]
        lead[: anchor.size] = np.where(anchor >= 0, anchor, lead[: anchor.size])
    target = lead[grp[members]]
    moved = int(np.count_nonzero(device[members] != target))
    device[members] = target
    return device, moved


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
