"""Appendix B preprocessing and the ideal lattice for the max-load DP (Tarnawski et al.).

The DP of Sec. 5.1.1 runs on a *forward* DAG ``H`` whose nodes ("DP nodes") each stand
for a set of original nodes that must share a device: a contracted forward colocation
class (plus the strongly connected components that contraction creates) together with
the backward nodes colocated with it (Sec. 5.3, Appendix B). Orphaned backward groups
(no forward partner) get an artificial forward image, and every backward edge touching
an orphan is mirrored into ``H`` (Appendix B), so the backward side stays contiguous and
the number of ideals stays small.

An *ideal* of ``H`` (Definition 5.1) is a downward-closed node set. This module
enumerates all of them breadth-first by size and records the cover relation
``J -> J + {x}`` (the lattice edges), which the DP kernel walks to visit every superset
of an ideal with an incrementally updated device load.

Appendix B's subdivision of nodes with differently priced out-edges happens before this
module sees the graph (:func:`dnnplace.heuristics.transfer_costs.subdivide_out_costs`, a
staircase of colocated zero-cost nodes that charges the largest crossing edge, as the
evaluator does, where the paper's subdivision charges their sum), so here every node
has one transfer cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.components import strong_components, weak_components
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.orders import narrow_topological_order, stack_topological_order
from dnnplace.heuristics.dp_lattice import LatticeBuffers, grown_nbytes
from dnnplace.runtime.termination import Termination

__all__ = ["DPGraph", "build_dp_graph", "IdealLattice", "enumerate_ideals", "antichain_width", "linearize",
           "LINEAR_ORDERS", "TooManyIdeals"]


class TooManyIdeals(InputError):
    """The DAG has more ideals than the caller allowed (``reason``
    ``Termination.IDEAL_LIMIT``), its
    lattice would outgrow the caller's memory budget (``MEMORY_LIMIT``), or enumerating
    them ran past the caller's deadline (``TIME_LIMIT``); use DPL instead. ``count``:
    ideals enumerated."""

    def __init__(self, message: str, *, count: int = 0, reason: Termination = Termination.IDEAL_LIMIT):
        super().__init__(message)
        self.count, self.reason = count, reason

    @property
    def timed_out(self) -> bool:
        return self.reason is Termination.TIME_LIMIT


@dataclass
class DPGraph:
    """The preprocessed forward DAG of Appendix B.

    ``group[v]``: DP node of original node ``v`` (every original node, forward or
    backward, belongs to exactly one DP node); ``src/dst``: edges of ``H`` (original
    forward edges between groups plus mirrored edges of orphans); ``n_real``: DP nodes
    that contain an original forward node (the others are artificial images);
    ``backward_ok_needed``: whether backward contiguity must be checked (training).
    """

    n: int
    group: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    n_artificial: int
    training: bool


def _scc_merge(n: int, labels: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Merge labels that lie on a common cycle of the contracted graph; relabel 0..k-1."""
    labels = np.unique(labels, return_inverse=True)[1]
    k = int(labels.max()) + 1 if labels.size else 0
    a, b = labels[src], labels[dst]
    keep = a != b
    comp = strong_components(k, a[keep], b[keep])
    return np.unique(comp[labels], return_inverse=True)[1].astype(np.int64)


def _union(labels: np.ndarray, pairs_a: np.ndarray, pairs_b: np.ndarray) -> np.ndarray:
    """Merge label classes joined by the pairs (connected components); relabel 0..k-1."""
    k = int(labels.max()) + 1 if labels.size else 0
    comp = weak_components(k, pairs_a, pairs_b)
    return np.unique(comp[labels], return_inverse=True)[1].astype(np.int64)


def _merge_trivial(g: OpGraph, group: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge every zero-cost DP node that has exactly one neighbour in ``H`` and no
    forward member adjacent to a backward node into that neighbour, until none is left.

    Such a node (e.g. a weight-free input or a zero-time sink) never lowers any load by
    sitting apart from its only neighbour, so merging keeps the optimum (memory aside:
    its bytes go with the neighbour; they are counted exactly). This is what keeps the
    number of ideals of GNMT at the paper's 17914 instead of millions (16 zero-time
    sinks would each double it). The paper does not describe this step; the authors'
    public driver applies the same reduction, re-implemented here from its description.
    """
    k = int(group.max()) + 1 if group.size else 0
    comp = np.nan_to_num(g.compute, nan=0.0).sum(axis=1)
    busy = np.bincount(group, weights=comp, minlength=k) > 0
    touches_bw = np.zeros(k, dtype=bool)
    mixed = g.backward[g.src] != g.backward[g.dst]
    touches_bw[group[g.src[mixed & ~g.backward[g.src]]]] = True
    touches_bw[group[g.dst[mixed & ~g.backward[g.dst]]]] = True
    nbrs: list[set[int]] = [set() for _ in range(k)]
    for a, b in pairs.tolist():
        nbrs[a].add(b)
        nbrs[b].add(a)
    parent = np.arange(k)
    queue = [x for x in range(k) if not busy[x] and not touches_bw[x] and len(nbrs[x]) == 1]
    while queue:
        x = queue.pop()
        if parent[x] != x or len(nbrs[x]) != 1 or busy[x] or touches_bw[x]:
            continue
        (y,) = nbrs[x]
        parent[x] = y
        nbrs[y].discard(x)
        nbrs[x] = set()
        touches_bw[y] |= touches_bw[x]
        if not busy[y] and not touches_bw[y] and len(nbrs[y]) == 1:
            queue.append(y)
    root = parent.copy()
    while True:
        nxt = parent[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    labels = np.unique(root, return_inverse=True)[1].astype(np.int64)
    a, b = labels[pairs[:, 0]], labels[pairs[:, 1]]
    keep = a != b
    new_pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0) if keep.any() else np.empty((0, 2), np.int64)
    return labels[group], new_pairs


def build_dp_graph(g: OpGraph, *, trivial: bool = True) -> DPGraph:
    """Appendix B: contract colocation classes (forward and backward parts separately)
    and the SCCs this creates, pair backward groups with their forward partners, add
    artificial forward images of orphaned backward groups with mirrored edges, and
    contract the SCCs the mirrored edges create. Iterates until stable.
    """
    n = g.n
    bw = g.backward
    # colocation classes split into forward and backward parts; singletons otherwise
    cls = np.where(g.colocation >= 0, g.colocation, g.colocation.max(initial=-1) + 1 + np.arange(n))
    lab = np.unique(cls * 2 + bw.astype(np.int64), return_inverse=True)[1].astype(np.int64)
    inner = bw[g.src] == bw[g.dst]  # contiguity is per part: SCCs only within a part
    s_in, d_in = g.src[inner], g.dst[inner]
    while True:
        lab = _scc_merge(n, lab, s_in, d_in)
        # backward group -> forward groups sharing a colocation class with it
        has = g.colocation >= 0
        fw_nodes = np.flatnonzero(has & ~bw)
        bw_nodes = np.flatnonzero(has & bw)
        fw_of_class = {}
        for v in fw_nodes:
            fw_of_class.setdefault(int(g.colocation[v]), int(lab[v]))
        pa, pb = [], []
        partner: dict[int, int] = {}
        for v in bw_nodes:
            f = fw_of_class.get(int(g.colocation[v]))
            if f is None:
                continue
            b = int(lab[v])
            if b in partner and partner[b] != f:
                pa.append(partner[b])
                pb.append(f)  # a backward group with two forward partners: merge them
            partner.setdefault(b, f)
        # also merge forward groups colocated (through a class) with each other
        for v in fw_nodes:
            f0 = fw_of_class[int(g.colocation[v])]
            if f0 != lab[v]:
                pa.append(f0)
                pb.append(int(lab[v]))
        if not pa:
            break
        lab = _union(lab, np.array(pa, dtype=np.int64), np.array(pb, dtype=np.int64))
    k = int(lab.max()) + 1 if n else 0
    is_bw_group = np.zeros(k, dtype=bool)
    is_bw_group[lab[bw]] = True
    fw_groups = np.unique(lab[~bw])
    # DP node of every group: forward groups are DP nodes; backward groups map to their
    # partner or to a new artificial image
    dp_of = np.full(k, -1, dtype=np.int64)
    dp_of[fw_groups] = np.arange(fw_groups.size)
    nxt = fw_groups.size
    for b, f in partner.items():
        dp_of[b] = dp_of[f]
    orphans = np.flatnonzero(is_bw_group & (dp_of < 0))
    dp_of[orphans] = nxt + np.arange(orphans.size)
    n_dp = nxt + orphans.size
    group = dp_of[lab]
    # edges of H: forward edges between distinct DP nodes, and mirrored backward edges
    # (u', v') with an orphan end point become (img v', img u')
    fwe = ~bw[g.src] & ~bw[g.dst]
    hs, hd = [group[g.src[fwe]]], [group[g.dst[fwe]]]
    orphan_group = np.zeros(k, dtype=bool)
    orphan_group[orphans] = True
    bwe = bw[g.src] & bw[g.dst]
    mir = bwe & (orphan_group[lab[g.src]] | orphan_group[lab[g.dst]])
    hs.append(group[g.dst[mir]])
    hd.append(group[g.src[mir]])
    hs_a, hd_a = np.concatenate(hs), np.concatenate(hd)
    keep = hs_a != hd_a
    hs_a, hd_a = hs_a[keep], hd_a[keep]
    # the mirrored edges may close cycles: contract them (they must share a device
    # in any contiguous split of H anyway)
    merged = _scc_merge(n_dp, np.arange(n_dp), hs_a, hd_a)
    group = merged[group]
    n_final = int(merged.max()) + 1 if n_dp else 0
    a, b = merged[hs_a], merged[hd_a]
    keep = a != b
    pairs = np.unique(np.stack([a[keep], b[keep]], axis=1), axis=0) if keep.any() else np.empty((0, 2), np.int64)
    if trivial:
        group, pairs = _merge_trivial(g, group, pairs)
        n_final = int(group.max()) + 1 if n else 0
    real = np.zeros(n_final, dtype=bool)
    real[group[~bw]] = True
    return DPGraph(n=n_final, group=group, src=pairs[:, 0].astype(np.int64), dst=pairs[:, 1].astype(np.int64),
                   n_artificial=int((~real).sum()), training=bool(bw.any()))


@dataclass
class IdealLattice:
    """All ideals of a DAG, indexed by size (index 0 = empty set, last = all nodes).

    ``cover_ptr/cover_node/cover_to``: CSR of the cover relation, ideal ``i`` plus node
    ``cover_node[j]`` is ideal ``cover_to[j]``. ``member``: ``(n_ideals, words)`` uint64
    bitsets.
    """

    n_nodes: int
    member: np.ndarray
    cover_ptr: np.ndarray
    cover_node: np.ndarray
    cover_to: np.ndarray

    @property
    def size(self) -> int:
        return int(self.member.shape[0])

    @property
    def n_covers(self) -> int:
        return int(self.cover_node.size)

    def nodes(self, i: int) -> np.ndarray:
        """Node indices in ideal ``i``."""
        bits = np.unpackbits(self.member[i].view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.n_nodes])


def antichain_width(n: int, src: np.ndarray, dst: np.ndarray) -> int:
    """The size of the largest set of nodes with equal depth (longest path from a source) in the
    DAG ``(n, src->dst)``. Such a set is an antichain (a path raises the depth), and every subset
    of an antichain is the set of maximal nodes of exactly one ideal (its down-closure), so the
    DAG has at least ``2 ** width`` ideals.

    >>> antichain_width(4, np.array([0, 0]), np.array([1, 2]))  # depths: {0, 3} 0, {1, 2} 1
    2
    """
    if n == 0:
        return 0
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    pos[stack_topological_order(n, src, dst)] = np.arange(n)
    depth = np.zeros(n, dtype=np.int64)
    e = np.argsort(pos[dst], kind="stable")  # every edge into u comes before the edges out of u
    for a, b in zip(src[e].tolist(), dst[e].tolist()):
        if depth[a] + 1 > depth[b]:
            depth[b] = depth[a] + 1
    return int(np.bincount(depth).max())


CHUNK_SECONDS = 0.05
"""Seconds of compiled work between two checks of the deadline and the memory budget while
enumerating ideals (the chunk of ideals processed adapts to the measured rate)."""


def enumerate_ideals(n: int, src: np.ndarray, dst: np.ndarray, *, max_ideals: int = 6_000_000,
                     deadline: float | None = None, max_bytes: float | None = None,
                     bytes_per_ideal: float = 0.0) -> IdealLattice:
    """Breadth-first enumeration of the ideals of the DAG ``(n, src->dst)``.

    Every ideal is reached from a smaller one by adding one node all of whose
    predecessors it contains (:mod:`dnnplace.heuristics.dp_lattice`, compiled: bitsets
    in a hash table), so the cost is ``O(ideals * width * words)``; memory is the
    bitsets (``8 * words`` bytes an ideal) and 16 bytes per cover, with arrays that
    grow by doubling (measured in ``python -m benchmarks dp-scale``).

    Raises :class:`TooManyIdeals`

    - at once where an antichain of the DAG (:func:`antichain_width`) alone has more than
      ``max_ideals`` subsets (a wide graph: the captured NASNet's DP graph has 1125 sources);
    - past ``max_ideals`` ideals;
    - before a growth of the arrays that would take them past ``max_bytes``, or where the
      lattice found so far with ``bytes_per_ideal`` for each of its ideals (what the caller
      allocates per ideal afterwards, once the arrays have shrunk to the lattice) would;
    - past ``deadline`` (a ``time.perf_counter()`` value), checked every
      :data:`CHUNK_SECONDS` of compiled work and before every growth (the first chunk
      always runs).

    >>> lat = enumerate_ideals(3, np.array([0]), np.array([1]))  # 0->1, 2 isolated
    >>> lat.size  # {}, {0}, {2}, {0,1}, {0,2}, {0,1,2}
    6
    """
    width = antichain_width(n, src, dst)
    if width > np.log2(max(max_ideals, 1)):
        raise TooManyIdeals(f"at least 2^{width} ideals (an antichain of {width} nodes), more than {max_ideals}; "
                            "use DPL (linearised) instead", count=0)
    buf = LatticeBuffers(n, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))
    heads, first = 16, True
    while True:
        if max_bytes is not None:  # the peak: the growing arrays now, or the lattice and the caller's arrays later
            lattice = buf.count * (8 * buf.words + 8) + int(buf.ptr[buf.count]) * 16
            need = max(grown_nbytes(buf), lattice + bytes_per_ideal * buf.count)
            if need > max_bytes:
                raise TooManyIdeals(f"the ideals found so far ({buf.count}) and the next growth of their arrays "
                                    f"would take {need / 1e9:.2f} GB, more than the budget of {max_bytes / 1e9:.2f} "
                                    "GB; use DPL instead", count=buf.count, reason=Termination.MEMORY_LIMIT)
        if not first and deadline is not None and time.perf_counter() > deadline:
            raise TooManyIdeals(f"time limit while enumerating ideals ({buf.count} so far); use DPL instead",
                                count=buf.count, reason=Termination.TIME_LIMIT)
        first = False
        t = time.perf_counter()
        finished = buf.step(heads)
        if buf.count > max_ideals:
            raise TooManyIdeals(f"more than {max_ideals} ideals; use DPL (linearised) instead", count=buf.count)
        if finished:
            break
        took = time.perf_counter() - t
        heads = int(min(max(heads * CHUNK_SECONDS / max(took, 1e-6), 1), heads * 4, 1 << 20))
    count = buf.count
    m = int(buf.ptr[count])
    member, ptr, cover_node, cover_to = buf.member, buf.ptr, buf.cover_node, buf.cover_to
    del buf  # the arrays shrink in place: no second copy of the lattice at its peak
    member.resize((count, member.shape[1]), refcheck=False)
    ptr.resize(count + 1, refcheck=False)
    cover_node.resize(m, refcheck=False)
    cover_to.resize(m, refcheck=False)
    return IdealLattice(n, member, ptr, cover_node, cover_to)


LINEAR_ORDERS = ("dfs", "narrow")
"""The topological orders DPL can linearise with: ``dfs``, the paper's depth-first one
(Sec. 5.1.2, :func:`~dnnplace.graphs.orders.stack_topological_order`), and ``narrow``, which
keeps the transfer weight of every prefix's boundary small
(:func:`~dnnplace.graphs.orders.narrow_topological_order`)."""


def linearize(n: int, src: np.ndarray, dst: np.ndarray, order: str = "dfs",
              weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """DPL (Sec. 5.1.2): the edges of a topological order (one of :data:`LINEAR_ORDERS`;
    ``narrow`` weighs each node by ``weight``) made into a path."""
    if order not in LINEAR_ORDERS:
        raise InputError(f"unknown DPL order {order!r}; use one of {LINEAR_ORDERS}")
    seq = stack_topological_order(n, src, dst) if order == "dfs" else \
        narrow_topological_order(n, src, dst, np.zeros(n) if weight is None else weight)
    return seq[:-1].copy(), seq[1:].copy()
