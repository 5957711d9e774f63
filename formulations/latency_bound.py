r"""The closure segmentation bound: a lower bound on the single-sample latency
(docs/semantics.md 2.3) of every split with at most ``q`` contiguous pieces per
accelerator (the feasible set of Tarnawski et al.'s latency IP, Figs. 3-4), stronger than
the path segmentation bound of :func:`dnnplace.evaluation.bounds.latency_lower_bound`,
which it extends.

Both bounds follow a path :math:`P = v_1 \to \dots \to v_L`: the units it passes through
(accelerator pieces, CPU nodes) form a chain, each piece meets :math:`P` in one stretch
:math:`v_i..v_j` of consecutive nodes, so the latency is at least the sum of the
durations (7) of those units. The path bound charges a stretch only its own nodes'
compute and the host transfers of the path's two edges. Here a stretch is charged what
*every* piece :math:`S` holding it must contain and pay. Write :math:`D^*(v)` /
:math:`A^*(v)` for the descendants / ancestors of :math:`v`, itself included.

1. **Closure.** :math:`X(i,j) \subseteq S`, the smallest set that holds
   :math:`v_i..v_j`, is convex (a node on a path between two members is a member:
   Definition 3.1) and, for ``q = 1``, holds every colocation group it meets (the group
   sits on one accelerator, whose only piece is :math:`S`).
2. **Forbidden nodes.** :math:`v_{i-1} \notin S` (the stretch is maximal), hence no
   ancestor of :math:`v_{i-1}` is in :math:`S` (it would put :math:`v_{i-1}` on a path
   between two nodes of :math:`S`); likewise no descendant of :math:`v_{j+1}`:
   :math:`S \cap O(i,j) = \emptyset` with :math:`O = A^*(v_{i-1}) \cup D^*(v_{j+1})`, for
   ``q = 1`` closed under colocation (a node outside :math:`S` is on another device, and so
   is its group). A stretch whose closure meets :math:`O`, exceeds the largest accelerator
   memory, or holds a node no accelerator runs, is impossible.
3. **Forced transfers.** A node :math:`y \notin X` is *outside* :math:`S` if
   :math:`y \in O`, no accelerator runs it, or :math:`m(X) + m(\mathrm{group}(y)) >
   M` (for ``q >= 2`` :math:`y`'s own memory). Then every edge :math:`(u, x)`,
   :math:`x \in X`, from an outside :math:`u` is a transfer into :math:`S` (CommIn, paid
   once per source :math:`u`), and every edge :math:`(x, y)` to an outside :math:`y` one
   out of :math:`S` (CommOut, once per source :math:`x`). Any other in-neighbour
   :math:`u` of :math:`X` is either in :math:`S` (its compute counts) or not (its transfer
   counts): it adds at least :math:`\min(p_{acc}(u), c^{in}_u)`.

So a stretch lasts at least

.. math::

    C(i,j) = \sum_{x \in X} p_{acc}(x) + \sum_{u \text{ outside}} c^{in}_u
             + \sum_{u \text{ undecided}} \min(p_{acc}(u), c^{in}_u)
             + \sum_{x \in X \text{ with an outside successor}} c^{out}_x

(compute of distinct nodes and transfers of distinct sources are distinct terms of (7);
:math:`c^{in}_u`, :math:`c^{out}_x` are the least host transfer over the node's
out-edges and the accelerators, a lower bound on the evaluator's largest crossing one),
and the path segmentation DP of the path bound with these stretch costs,

.. math::

    f_{j}(s) = \min\big(f_{j-1}(s) + p_{cpu}(v_j),\;
               \min_{i \le j} f_{i-1}(s-1) + C(i,j)\big), \qquad
    \text{bound} = \min_{s \le qK} f_L(s),

is a lower bound for every path.

4. **Minimum cuts.** The rule of 3 decides each undecided neighbour alone. The least
   duration of a piece holding :math:`X` and avoiding the outside nodes, with all
   neighbours decided jointly (a neighbour that joins :math:`S` brings its own transfers),
   is a minimum cut (:func:`~dnnplace.formulations.latency_piece_cut.piece_cut`), never
   below :math:`C(i,j)`. Where the cut's piece exceeds the memory :math:`M`, the memory
   limit enters with a Lagrange price :math:`\lambda \ge 0` (each node costs
   :math:`\lambda m_v` more, the value drops by :math:`\lambda M`: a bound for every
   :math:`\lambda`); the price is doubled until the piece fits and bisected
   (``PRICE_STEPS`` cuts), and the best value kept. A cut costs a max flow, so the cuts
   are computed lazily: solve the DP, raise the costs of the stretches of its optimum and
   of their neighbours (one end moved by one) to their cuts, solve again, until the
   optimum uses only cut costs (or ``rounds`` times). Every DP value on the way is a
   bound, each cost being one.

5. **Parallel branches.** A path sees one branch of each fork; the returned value is the
   larger of the paths' DP values and the spine bound
   (:func:`~dnnplace.formulations.latency_spine.spine_bound`: a DP over the cut nodes of a
   fork-join graph that charges every branch of a block a spine piece enters or leaves),
   each a lower bound. It is what closes the gap on fork-join graphs such as InceptionV3,
   where one path sees one branch only.

**The split read off the bound** (:func:`closure_segmentation` with ``split=True``): the
stretches of the final DP optimum become pieces (the source sides of their cuts, at the
price that fits), every other node goes to the CPU. The evaluator scores it; where its
latency equals the bound, it is optimal.

Where every node's out-edges carry one transfer cost (the Tarnawski inputs) each stretch
costs at least the path bound's (its closure holds the stretch, its outside sources the
path's edges), so on the same paths the bound is never lower; otherwise
:math:`c^{in}_u`, :math:`c^{out}_x` may be below a path edge's cost and the larger of the
two bounds is returned. It is evaluated on the path bound's paths. Cost: per path, one
growing closure (bit sets) per start ``i``, stopped at the memory limit, vectorised over
the ends ``j``; then the lazy cuts.

How close the bound comes to its own split and to the best known splits of Tarnawski's
Table 4, against the path bound: ``results/tarnawski-latency-cert.md`` (each run under
its dated heading).

>>> import numpy as np
>>> from dnnplace.graphs.cluster import Cluster
>>> from dnnplace.graphs.graph import OpGraph
>>> # a -> b -> d and a -> c -> d; accelerators of 4 B hold two nodes of 2 B (the paths give
>>> # 12.0, the spine bound 16.0, the optimum)
>>> g = OpGraph(ids=list("abcd"), kinds=["acc", "cpu"], compute=[[1.0, 9.0]] * 4, memory=[2] * 4,
...             src=[0, 0, 1, 2], dst=[1, 2, 3, 3], edge_cost=[3.0] * 4)
>>> cl = Cluster.tarnawski(2, 1, 4)
>>> from dnnplace.evaluation.bounds import latency_lower_bound
>>> latency_lower_bound(g, cl), closure_segmentation_bound(g, cl)
(9.0, 16.0)
"""

from __future__ import annotations

import time

import numpy as np

from dnnplace.evaluation.bounds import latency_lower_bound
from dnnplace.evaluation.evaluate import latency
from dnnplace.formulations.latency_closure_data import (
    ClosureData,
    as_bits,
    bit_members,
    closure_data,
    descendants,
    group_close,
)
from dnnplace.formulations.latency_piece_cut import piece_cut
from dnnplace.formulations.latency_spine import spine_bound
from dnnplace.formulations.latency_spine_split import spine_split
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import blevel
from dnnplace.graphs.placement import Placement

__all__ = ["closure_segmentation_bound", "closure_segmentation", "descendants"]

_INF = float("inf")
#: max flows per refined stretch searching the price of memory (:func:`_refine`)
PRICE_STEPS = 8


def _enter_order(d: ClosureData, path: list[int], i: int) -> tuple[np.ndarray, np.ndarray, int]:
    """For start ``i``: ``enter[x]`` = the first end ``j`` whose closure ``X(i, j)`` holds
    ``x`` (``L`` if none before the stop), the memory of ``X(i, j)`` per ``j``, and the stop
    (first ``j`` whose closure meets ``A*(v_{i-1})``, exceeds the memory or holds a node no
    accelerator runs; closures only grow, so no later ``j`` is possible). Sets are bit sets."""
    L = len(path)
    banned = d.nonrun | (as_bits(group_close(d, d.up[path[i - 1]])) if i > 0 else 0)
    enter = np.full(d.g.n, L)
    mem_x = np.full(L, _INF)
    inside = below = above = groups = 0          # X, D*(X), A*(X), the groups X meets
    used, limit = 0.0, d.cap * (1 + 1e-9) + 1e-9
    for j in range(i, L):
        new = (1 << path[j]) & ~inside
        while new:
            inside |= new
            for x in bit_members(new):
                enter[x] = j
                used += d.mem_list[x]
                below |= d.down_bits[x]
                above |= d.up_bits[x]
                groups |= d.group_bits[x]
            new = ((below & above) | groups) & ~inside
        if inside & banned or used > limit:
            enter[enter == j] = L
            return enter, mem_x, j
        mem_x[j] = used
    return enter, mem_x, L


def _ranges(diff: np.ndarray, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, w: np.ndarray) -> None:
    """Add ``w`` on the columns ``[lo, hi)`` of each row of a difference array (empty ranges skipped)."""
    ok = lo < hi
    np.add.at(diff, (rows[ok], lo[ok]), w[ok])
    np.add.at(diff, (rows[ok], hi[ok]), -w[ok])


def _stretch_costs(d: ClosureData, path: list[int], i: int, last_anc: np.ndarray) -> tuple[np.ndarray, ...]:
    """``C(i, j)`` for every end ``j`` (``inf`` where impossible), as in the module docstring,
    with :func:`_enter_order`'s ``enter`` and memory per end (for :func:`_refine`).

    Every quantity is a range of ends: ``x`` is in ``X(i, j)`` for ``j >= enter[x]``; ``y``
    is in ``D*(v_{j+1})`` (group-closed) for ``j < last_anc[y]``; the memory rule holds
    for ``j >= jm[y]``. Columns are the ends ``i .. stop`` shifted by ``i``."""
    g, L = d.g, len(path)
    enter, mem_x, stop = _enter_order(d, path, i)
    cost = np.full(L, _INF)
    w = stop - i
    if w <= 0:
        return cost, enter, mem_x

    def col(j: np.ndarray) -> np.ndarray:
        return np.clip(j, i, stop) - i

    inner = enter < L
    comp = np.cumsum(np.bincount(enter[inner] - i, weights=d.p_acc[inner], minlength=w))[:w]
    bad = np.zeros(w + 1)
    _ranges(bad[None], np.zeros(int(inner.sum()), dtype=np.int64), col(enter[inner]), col(last_anc[inner]),
            np.ones(int(inner.sum())))
    impossible = np.cumsum(bad)[:w] > 0
    always = ~np.isfinite(d.p_acc)
    if i > 0:
        anc = d.up[path[i - 1]]
        always = always | (group_close(d, anc) if d.q == 1 else anc)
    limit = d.cap * (1 + 1e-9) + 1e-9
    jm = i + np.searchsorted(mem_x[i:stop], limit - d.gmem, side="right")

    def outside(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
        """Ends in ``[lo, hi)`` (columns) where ``y`` is outside: ``[lo, a)`` and ``[b, hi)``;
        undecided: ``[a, b)``."""
        a = np.clip(col(last_anc[y]), lo, hi)
        b = np.clip(col(np.maximum(jm[y], last_anc[y])), lo, hi)
        return np.where(always[y], hi, a), np.where(always[y], hi, b)

    src, dst = g.src, g.dst
    comm_in = np.zeros((1, w + 1))
    e = np.flatnonzero(enter[dst] < enter[src])       # u = src not yet in X when dst enters
    if e.size:
        first = np.full(g.n, L)
        np.minimum.at(first, src[e], enter[dst[e]])
        u = np.flatnonzero(first < L)
        lo, hi = col(first[u]), col(enter[u])
        a, b = outside(u, lo, hi)
        rows = np.zeros(u.size, dtype=np.int64)
        _ranges(comm_in, rows, lo, a, d.c_in[u])
        _ranges(comm_in, rows, b, hi, d.c_in[u])
        _ranges(comm_in, rows, a, b, np.minimum(d.c_in[u], d.p_acc[u]))
    comm_out = np.zeros(w)
    e = np.flatnonzero(enter[src] < enter[dst])       # x = src in X before dst
    if e.size:
        x, y = src[e], dst[e]
        lo, hi = col(enter[x]), col(enter[y])
        a, b = outside(y, lo, hi)
        sources, rows = np.unique(x, return_inverse=True)
        hit = np.zeros((sources.size, w + 1))
        ones = np.ones(e.size)
        _ranges(hit, rows, lo, a, ones)
        _ranges(hit, rows, b, hi, ones)
        comm_out = (np.cumsum(hit, axis=1)[:, :w] > 0.5).T @ d.c_out[sources]
    total = comp + np.cumsum(comm_in[0])[:w] + comm_out
    cost[i:stop] = np.where(impossible, _INF, total)
    return cost, enter, mem_x


def _dp(d: ClosureData, path: list[int], C: np.ndarray) -> tuple[float, list[tuple[int, int]]]:
    """The segmentation DP over stretch costs ``C``: its value and the stretches of an optimum."""
    L, S = len(path), d.stretches
    f = np.full((L + 1, S + 1), _INF)
    f[0, 0] = 0.0
    arg = np.full((L + 1, S + 1), -1)             # start of the last stretch, -1: v_j on the CPU
    for j in range(L):
        f[j + 1] = f[j] + d.p_cpu[path[j]]
        if S:
            cand = f[:j + 1, :-1] + C[:j + 1, j][:, None]
            best = cand.argmin(axis=0)
            better = cand[best, np.arange(S)] < f[j + 1, 1:]
            f[j + 1, 1:][better] = cand[best, np.arange(S)][better]
            arg[j + 1, 1:][better] = best[better]
    s = int(np.argmin(f[L]))
    value, used, j = float(f[L, s]), [], L
    while j > 0 and np.isfinite(value):
        i = int(arg[j, s])
        if i < 0:
            j -= 1
        else:
            used.append((i, j - 1))
            j, s = i, s - 1
    return value, used


def _last_reaching(d: ClosureData, path: list[int]) -> np.ndarray:
    """Per node ``y``: the last path index ``k`` with ``v_k`` reaching ``y`` (-1 if none), the
    largest over ``y``'s group for ``q = 1``; ``y`` is in ``D*(v_{j+1})`` iff ``j < last[y]``."""
    L = len(path)
    reach = d.down[path]                       # (L, n): v_k reaches y
    last = np.where(reach.any(axis=0), L - 1 - np.argmax(reach[::-1], axis=0), -1)
    out = np.full(d.n_groups, -1)              # gid is the identity for q >= 2
    np.maximum.at(out, d.gid, last)
    return out[d.gid]


def _segment(d: ClosureData, path: list[int], rounds: int, until: float) -> tuple[float, list, list]:
    """The DP of the module docstring on one path; then, up to ``rounds`` times, the
    stretches of the DP's optimum get the minimum-cut cost of
    :func:`~dnnplace.formulations.latency_piece_cut.piece_cut` (never lower: the same
    closure and outside set, the undecided neighbours decided jointly) and the DP is
    solved again, stopping early at the :func:`time.monotonic` reading ``until``. Every
    value of the DP is a bound (every cost is one); returns the last,
    the stretches of its optimum and the per-start rows of :func:`_stretch_costs`."""
    L = len(path)
    last_anc = _last_reaching(d, path)
    rows = [_stretch_costs(d, path, i, last_anc) for i in range(L)]
    C = np.vstack([r[0] for r in rows])
    done: set[tuple[int, int]] = set()
    value, used = _dp(d, path, C)
    for _ in range(rounds):
        todo = [(a, b) for i, j in used for a, b in ((i, j), (i, j - 1), (i, j + 1), (i - 1, j), (i + 1, j))
                if 0 <= a <= b < L and (a, b) not in done and np.isfinite(C[a, b])]
        todo = list(dict.fromkeys(todo))
        if not todo or time.monotonic() > until:
            break
        for i, j in todo:
            done.add((i, j))
            C[i, j] = max(C[i, j], _refine(d, path, i, j, rows[i], last_anc))
        value, used = _dp(d, path, C)
    return value, used, rows


def _refine(d: ClosureData, path: list[int], i: int, j: int, row: tuple, last_anc: np.ndarray, side: bool = False):
    """The minimum-cut cost of stretch ``(i, j)``: ``X(i, j)`` inside; outside the forbidden
    nodes, those no accelerator runs and those whose group no longer fits beside ``X``."""
    _, enter, mem_x = row
    inside = enter <= j
    outside = ~np.isfinite(d.p_acc) | (j < last_anc) | (mem_x[j] + d.gmem > d.cap * (1 + 1e-9) + 1e-9)
    if i > 0:
        outside |= group_close(d, d.up[path[i - 1]])
    outside &= ~inside
    value, members = piece_cut(d, inside, outside, side=True)
    if members is None or d.mem[members].sum() <= d.cap * (1 + 1e-9) + 1e-9 or d.cap <= 0:
        return (value, members) if side else value
    # the cut's piece does not fit: the Lagrangian price of memory (every price gives a bound);
    # raise it until the piece fits, then bisect towards the last price that did not
    best, fits, lo, hi = value, None, 0.0, value / d.cap
    for _ in range(PRICE_STEPS):
        price = hi if fits is None else (lo + hi) / 2
        v, m = piece_cut(d, inside, outside, side=True, price=price)
        if m is None:
            break
        if v > best:
            best = v
        if d.mem[m].sum() <= d.cap * (1 + 1e-9) + 1e-9:
            hi, fits = price, m
        elif fits is None:
            lo, hi = hi, 2 * hi
        else:
            lo = price
    return (best, fits) if side else best


def _paths(g: OpGraph, d: ClosureData) -> list[list[int]]:
    """Heaviest source-to-sink paths by least time, memory, accelerator and CPU time."""
    out = []
    w_min = np.fmin(d.p_cpu, d.p_acc)
    for w in (w_min, d.mem, d.p_acc, d.p_cpu):
        w = np.where(np.isfinite(w), w, 0.0)
        bl = blevel(g, kind=w, comm=0.0)
        sources = np.flatnonzero(np.bincount(g.dst, minlength=g.n) == 0)
        v = int(sources[np.argmax(bl[sources])])
        path = [v]
        ptr, nbr = g.out_ptr, g.out_nbr
        while ptr[v] < ptr[v + 1]:
            v = int(nbr[ptr[v] + np.argmax(bl[nbr[ptr[v]:ptr[v + 1]]])])
            path.append(v)
        if path not in out:
            out.append(path)
    return out


def closure_segmentation_bound(graph: OpGraph, cluster: Cluster, q: int = 1, rounds: int = 2000,
                               seconds: float | None = None) -> float:
    """A latency no split of ``graph`` with at most ``q`` contiguous pieces per accelerator
    beats (module docstring); never below
    :func:`~dnnplace.evaluation.bounds.latency_lower_bound`: where every node's
    out-edges carry one transfer cost (the Tarnawski inputs) by construction (the same
    paths, each stretch charged at least as much; the least-time path's value is at least
    the critical path of least times), otherwise by taking the larger of the two.
    ``rounds``: how many times the DP's stretches are refined by minimum cuts; ``seconds``:
    stop refining after about that long (the value is then lower, still a bound)."""
    return closure_segmentation(graph, cluster, q, rounds, seconds=seconds)[0]


def closure_segmentation(graph: OpGraph, cluster: Cluster, q: int = 1, rounds: int = 2000,
                         split: bool = False, seconds: float | None = None) -> tuple[float, Placement | None]:
    """:func:`closure_segmentation_bound` and, with ``split`` (``q = 1``), the split read
    off the bound: per path, the DP's stretches become pieces (the source sides of their
    minimum cuts, the largest on the accelerator with the most memory), every other node
    goes to the first CPU; with the split of the spine DP
    (:func:`~dnnplace.formulations.latency_spine_split.spine_split`), the best of them the
    evaluator accepts with one piece per accelerator (``None`` if none). Where its latency
    equals the bound it is optimal."""
    if graph.n == 0:
        return 0.0, None
    until = _INF if seconds is None else time.monotonic() + float(seconds)
    d = closure_data(graph, cluster, int(q))
    best, found, found_value = 0.0, None, _INF
    for path in _paths(graph, d):
        value, used, rows = _segment(d, path, rounds, until)
        best = max(best, value)
        if split and int(q) == 1 and np.isfinite(value):
            p = _split(d, cluster, path, used, rows)
            ev = latency(p) if p is not None else None
            if ev is not None and ev.feasible and ev.objective < found_value \
                    and max(ev.details["subgraphs"].values(), default=0) <= 1:
                found, found_value = p, ev.objective
    if d.uneven:
        best = max(best, latency_lower_bound(graph, cluster, q))
    if split and int(q) == 1:
        p = spine_split(d, cluster)
        ev = latency(p) if p is not None else None
        if ev is not None and ev.feasible and ev.objective < found_value \
                and max(ev.details["subgraphs"].values(), default=0) <= 1:
            found = p
    return max(best, spine_bound(d)), found


def _split(d: ClosureData, cluster: Cluster, path: list[int], used: list, rows: list) -> Placement | None:
    """The split of :func:`closure_segmentation` for one path."""
    cpus = cluster.devices_of_kind("cpu")
    accs = sorted((k for k in range(cluster.size) if cluster.kinds[k] != "cpu"), key=lambda k: -cluster.memory[k])
    if not cpus.size or len(used) > len(accs):
        return None
    last_anc = _last_reaching(d, path)
    pieces = []
    for i, j in used:
        _, members = _refine(d, path, i, j, rows[i], last_anc, side=True)
        if members is None:
            return None
        pieces.append(members)
    device = np.full(d.g.n, int(cpus[0]))
    for k, members in enumerate(sorted(pieces, key=lambda x: -float(d.mem[x].sum()))):
        if (device[members] != cpus[0]).any():
            return None
        device[members] = accs[k]
    return Placement(d.g, cluster, device)
