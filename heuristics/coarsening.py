r"""Cycle-free batch coarsening (Pesto Sec. 3.3, Theorem 3.5), vectorised with numpy.

Each round merges a *matching* of edges of the current graph, every merged edge
satisfying Pesto's Theorem 3.5, with priority to edges of large communication time
(Pesto: "we prioritize the merging of pairs of vertices based on the size of their
connecting edge"), until the graph has ``target`` nodes or no edge can be merged.
Merging goes through the framework's one coarsening interface,
:func:`dnnplace.graphs.transforms.contract.quotient` (summed compute and memory; ``NaN`` compute where a
member cannot run), and the result is a coarse graph plus ``labels`` (the coarse node of
every original node).

The merge rule, and why it never creates a cycle
-------------------------------------------------
Let :math:`H` be the heights of Definition 3.4 (``dnnplace.graphs.levels.heights``; every edge
:math:`x \to w` has :math:`H(w) \ge H(x) + 1`) and :math:`M` a matching of edges
:math:`(u, v)` with :math:`d = H(v) - H(u)`. An edge is mergeable when

(ii) ``outdeg(u) = 1`` **or** ``indeg(v) = 1`` **or** every other successor ``w`` of ``u``
     has :math:`H(w) > H(v)` ("strong" edges), **or** :math:`d = 1` ("weak" edges), and
(iii) no two weak edges :math:`(u_i, v_i), (u_j, v_j)` with :math:`H(u_i) = H(u_j)` are
     joined by an edge :math:`u_i \to v_j`.

(Theorem 3.5 as printed reads :math:`h(u_i) \ne h(v_j) + d_j` in (iii); with
:math:`H(v_j) - d_j = H(u_j)` the condition that makes the proof go through is the one
above.) Proof: suppose contracting :math:`M` gives a cycle; take one through distinct
coarse nodes :math:`X_1 \to \dots \to X_k \to X_1`, the arc :math:`X_t \to X_{t+1}` realised
by an edge :math:`a_t \to b_{t+1}`. Inside :math:`X_t` the cycle enters at :math:`b_t` and
leaves from :math:`a_t`. If every :math:`X_t` is traversed "forward" (:math:`b_t = a_t`, or
:math:`b_t = u, a_t = v`), the original graph has a cycle. So some pair is traversed in
reverse: entered at :math:`v`, left from :math:`u` to another node, so ``indeg(v) >= 2``
and ``outdeg(u) >= 2``. Follow :math:`H(b_t)` around the cycle: a forward traversal plus
the next edge raises it by :math:`\ge 1`; a reverse traversal of a pair whose other
successors all lie above :math:`H(v)` raises it by :math:`\ge 1` too; a reverse traversal of
a weak pair (:math:`d = 1`) gives :math:`H(b_{t+1}) \ge H(u) + 1 = H(b_t)`, with equality
only if :math:`b_{t+1}` is the ``v`` of another weak pair at the same height reached by an
edge from ``u``. Around a cycle the sum of increases is 0, so every step is such an
equality — exactly what (iii) forbids. Hence the contraction is acyclic (tests check it
on random DAGs and every bundled and generated workload).

Feasibility of merged nodes: both ends in the same colocation group or at most one in a
group (the merged node inherits it); some device of the cluster can run both (device
affinity: the merged node runs only where all members can) and holds their summed
memory; merging nodes of two different groups unites the groups, allowed while the
united group fits a device and carries at most ``1 / max(2, D)`` of the total work;
optionally a weight cap keeps merged nodes below ``weight_cap`` times the mean
coarse-node weight (the cap is doubled whenever it alone blocks progress), which keeps
parallelism.

Cost: per round ``O(m log m)`` numpy work (sorting edges by priority) plus the
quotient; a 200k-node graph reaches 200 nodes in a few seconds
(``python -m benchmarks pesto``).

References
----------
.. [Pesto] U. U. Hafeez et al., Middleware 2021, Sec. 3.3, Definition 3.4, Theorem 3.5.
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import heights
from dnnplace.graphs.transforms.contract import quotient
from dnnplace.graphs.transforms.replay import Transformed

__all__ = ["coarsen", "mergeable_matching", "expand_priorities",
           "monotone_keys"]


def _allowed_matrix(graph: OpGraph, cluster: Cluster | None) -> tuple[np.ndarray, np.ndarray]:
    """(n, D) bool: node can run on device; and per-device memory capacity."""
    if cluster is None:
        allowed = ~np.isnan(graph.compute)
        return allowed, np.full(allowed.shape[1], np.inf)
    return ~np.isnan(cluster.compute_matrix(graph)), cluster.memory


def _edge_priority(graph: OpGraph, cluster: Cluster | None) -> np.ndarray:
    """Estimated communication time of every edge (mean over the cluster's links, with
    the mean per-message cost where the cluster has one, docs/semantics.md 2.1), or its
    bytes when no cluster is given."""
    if cluster is None or cluster.size < 2:
        c = np.nan_to_num(graph.edge_cost, nan=0.0)
        return np.where(np.isnan(graph.edge_cost), graph.edge_bytes, c)
    from dnnplace.graphs.levels import edge_weights
    from dnnplace.heuristics.message_costs import mean_message_time
    c = edge_weights(graph, cluster)
    return c + mean_message_time(cluster) if cluster.has_message_costs else c


def mergeable_matching(graph: OpGraph, priority: np.ndarray, ok: np.ndarray, *,
                       rounds: int = 8) -> np.ndarray:
    """Edge ids of a matching satisfying Theorem 3.5 (ii)-(iii) (module docstring).

    ``ok`` masks edges allowed by the caller (colocation, affinity, memory, weight).
    Greedy by ``priority`` through locally dominant edges: an edge joins when it is the
    best remaining edge of both its ends; repeated ``rounds`` times.
    """
    n, m = graph.n, graph.m
    if m == 0:
        return np.empty(0, dtype=np.int64)
    src, dst = graph.src, graph.dst
    H = heights(graph)
    outdeg = np.diff(graph.out_ptr)
    indeg = np.diff(graph.in_ptr)
    d = H[dst] - H[src]
    # "every other successor w of u has H(w) > H(v)": u's successors with H <= H(v) are v only
    key = src * (int(H.max()) + 2) + H[dst]
    skey = np.sort(key)
    n_le = np.searchsorted(skey, key, side="right") - np.searchsorted(skey, src * (int(H.max()) + 2), side="left")
    strong = (outdeg[src] == 1) | (indeg[dst] == 1) | (n_le == 1)
    weak = (d == 1) & ~strong
    cand = ok & (strong | weak) & (src != dst)
    eids = np.flatnonzero(cand)
    if eids.size == 0:
        return eids
    # rank: 0 = best (largest priority, then smallest id)
    order = eids[np.lexsort((eids, -priority[eids]))]
    rank = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    rank[order] = np.arange(order.size)
    free = np.ones(n, dtype=bool)
    chosen = []
    live = order
    big = np.iinfo(np.int64).max
    for _ in range(rounds):
        live = live[free[src[live]] & free[dst[live]]]
        if live.size == 0:
            break
        best = np.full(n, big, dtype=np.int64)
        np.minimum.at(best, src[live], rank[live])
        np.minimum.at(best, dst[live], rank[live])
        win = live[(best[src[live]] == rank[live]) & (best[dst[live]] == rank[live])]
        if win.size == 0:
            break
        chosen.append(win)
        free[src[win]] = False
        free[dst[win]] = False
    match = np.concatenate(chosen) if chosen else np.empty(0, dtype=np.int64)
    # (iii): drop the lower-priority one of every two weak pairs joined by u_i -> v_j
    wk = match[weak[match]]
    if wk.size > 1:
        pair_of_v = np.full(n, -1, dtype=np.int64)
        pair_of_v[dst[wk]] = wk
        pair_of_u = np.full(n, -1, dtype=np.int64)
        pair_of_u[src[wk]] = wk
        pi = pair_of_u[src]            # weak pair whose u is the edge's source
        pj = pair_of_v[dst]            # weak pair whose v is the edge's target
        clash = (pi >= 0) & (pj >= 0) & (pi != pj) & (H[src[np.maximum(pj, 0)]] == H[src])
        if clash.any():
            a, b = pi[clash], pj[clash]
            loser = np.where(rank[a] > rank[b], a, b)
            drop = np.zeros(m, dtype=bool)
            drop[loser] = True
            match = match[~drop[match]]
    return match


def coarsen(graph: OpGraph, cluster: Cluster | None = None, *, target: int, weight_cap: float | None = 1.0,
            critical_only: bool = False, max_rounds: int = 1000, guide: np.ndarray | None = None) -> Transformed:
    """Coarsen ``graph`` to at most ``target`` nodes (or until no edge is mergeable).

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster, optional
        Gives device affinity, memory capacities and the link model for priorities.
    target : int
        Desired number of coarse nodes (>= 1).
    weight_cap : float or None
        Merged nodes stay below ``weight_cap * total_weight / target`` (weight = fastest
        compute time), relaxed by doubling when it blocks every merge; ``None``: no cap.
    max_rounds : int
    guide : array of int, optional
        A label per node (e.g. the device of a good placement): only nodes with equal
        labels are merged, so every coarse node is uniform in ``guide`` and the guiding
        placement is a placement of the coarse graph too (it survives coarsening and
        can seed the solver of the coarse problem; multilevel partitioners coarsen
        inside the parts of their incumbent in the same way). The result's
        ``meta["guide"]`` holds the coarse nodes' labels.

    Returns
    -------
    Transformed

    Examples
    --------
    A chain of four nodes becomes one node:

    >>> g = OpGraph.from_ids(list("abcd"), [("a", "b"), ("b", "c"), ("c", "d")], kinds=["gpu"],
    ...                      compute=[[1.0]] * 4, memory=[0] * 4)
    >>> c = coarsen(g, target=1, weight_cap=None)
    >>> c.graph.n, c.labels.tolist()
    (1, [0, 0, 0, 0])

    Guided by a placement that puts ``c`` and ``d`` on another device, the chain keeps
    two nodes:

    >>> c = coarsen(g, target=1, weight_cap=None, guide=np.array([0, 0, 1, 1]))
    >>> c.labels.tolist(), c.meta["guide"].tolist()
    ([0, 0, 1, 1], [0, 1])
    """
    if target < 1:
        raise InputError(f"coarsen: target must be >= 1, got {target}")
    allowed, caps = _allowed_matrix(graph, cluster)
    labels = np.arange(graph.n, dtype=np.int64)
    if guide is not None:
        guide = np.asarray(guide)
        if guide.shape != (graph.n,):
            raise InputError(f"coarsen: guide must have one label per node ({graph.n}), got shape {guide.shape}")
    gl = guide
    cur = quotient(graph, labels, name=f"{graph.name}-coarse")  # drops parallel edges
    coloc = graph.colocation.copy()
    w_all = np.nanmin(graph.compute, axis=1) if graph.n else np.zeros(0)
    total_w = float(w_all.sum())
    cap = np.inf if weight_cap is None else max(weight_cap * total_w / target, float(w_all.max(initial=0)))
    # a united colocation group must stay below an equal share of the work per device
    group_cap = total_w / max(2, allowed.shape[1])
    rounds = []
    for _ in range(max_rounds):
        if cur.n <= target or cur.m == 0:
            break
        src, dst = cur.src, cur.dst
        both = allowed[src] & allowed[dst]
        mem = cur.memory[src] + cur.memory[dst]
        fits = (both & (mem[:, None] <= caps[None, :])).any(axis=1)
        if gl is not None:
            fits &= gl[src] == gl[dst]
        # colocation: merging two groups unites them (all their members on one device);
        # allowed when some device can run every member and hold both groups' memory
        co_ok = (coloc[src] == coloc[dst]) | (coloc[src] < 0) | (coloc[dst] < 0)
        if (~co_ok).any():
            n_grp = int(coloc.max()) + 1
            has = coloc >= 0
            g_mem = np.bincount(coloc[has], weights=cur.memory[has], minlength=n_grp)
            g_all = np.ones((n_grp, allowed.shape[1]), dtype=bool)
            np.logical_and.at(g_all, coloc[has], allowed[has])
            x = np.flatnonzero(~co_ok)
            a, b = coloc[src[x]], coloc[dst[x]]
            g_w = np.bincount(coloc[has], weights=np.nanmin(cur.compute, axis=1)[has], minlength=n_grp)
            joint = g_all[a] & g_all[b]
            co_ok[x] = ((joint & ((g_mem[a] + g_mem[b])[:, None] <= caps[None, :])).any(axis=1)
                        & (g_w[a] + g_w[b] <= group_cap))
        w = np.nanmin(cur.compute, axis=1)
        light = (w[src] + w[dst]) <= cap
        prio = _edge_priority(cur, cluster)
        crit = _critical_edges(cur, prio) if critical_only else np.ones(cur.m, dtype=bool)
        match = mergeable_matching(cur, prio, fits & co_ok & light & crit)
        if match.size == 0 and critical_only:
            match = mergeable_matching(cur, prio, fits & co_ok & light)
        if match.size == 0:
            if np.isfinite(cap) and (fits & co_ok & ~light).any():
                cap *= 2
                continue
            break
        excess = cur.n - target
        if match.size > excess:
            match = match[np.lexsort((match, -prio[match]))][:excess]
        new = np.arange(cur.n, dtype=np.int64)
        new[dst[match]] = src[match]
        _, new = np.unique(new, return_inverse=True)
        k = int(new.max()) + 1
        coloc = _unite_groups(coloc, src[match], dst[match])
        c_new = np.full(k, -1, dtype=np.int64)
        np.maximum.at(c_new, new, coloc)
        a_new = np.zeros((k, allowed.shape[1]), dtype=bool)
        a_new[new] = True
        np.logical_and.at(a_new, new, allowed)
        nxt = quotient(cur, new, name=cur.name)
        # quotient renumbers nothing: coarse node ids are the label values
        labels = new[labels]
        if gl is not None:
            g_new = np.empty(k, dtype=gl.dtype)
            g_new[new] = gl  # every merged pair has one label
            gl = g_new
        cur, coloc, allowed = nxt, c_new, a_new
        rounds.append({"nodes": cur.n, "edges": cur.m, "merged": int(match.size), "cap": cap})
    n_grp = int(coloc.max()) + 1 if coloc.size else 0
    out = cur.with_(colocation=coloc, colocation_labels=tuple(f"group{i}" for i in range(n_grp)))
    meta = {"rounds": rounds} if gl is None else {"rounds": rounds, "guide": gl}
    return Transformed(out, labels, "batch-coarsening", meta)


def _critical_edges(g: OpGraph, comm: np.ndarray) -> np.ndarray:
    """Edges on a heaviest out-path of their source or in-path of their target."""
    from dnnplace.graphs.levels import blevel, tlevel

    w = np.nanmin(g.compute, axis=1)
    bl = blevel(g, kind=w, comm=comm)
    tl = tlevel(g, kind=w, comm=comm)
    via_out = comm + bl[g.dst]              # length of u's path through (u, v)
    best_out = np.zeros(g.n)
    np.maximum.at(best_out, g.src, via_out)
    via_in = tl[g.src] + w[g.src] + comm    # length of v's path through (u, v)
    best_in = np.zeros(g.n)
    np.maximum.at(best_in, g.dst, via_in)
    tol = 1e-12 * max(1.0, float(bl.max(initial=0)))
    return (via_out >= best_out[g.src] - tol) | (via_in >= best_in[g.dst] - tol)


def _unite_groups(coloc: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Colocation codes after merging pairs ``(u, v)``: groups joined by a merged pair
    become one group (connected components over group codes)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    a, b = coloc[u], coloc[v]
    both = (a >= 0) & (b >= 0) & (a != b)
    if not both.any():
        return coloc
    n_grp = int(coloc.max()) + 1
    adj = coo_matrix((np.ones(int(both.sum())), (a[both], b[both])), shape=(n_grp, n_grp))
    _, comp = connected_components(adj, directed=False)
    return np.where(coloc >= 0, comp[np.maximum(coloc, 0)], -1)


def expand_priorities(labels: np.ndarray, coarse_start: np.ndarray, graph: OpGraph) -> np.ndarray:
    """Original-graph priorities from a coarse schedule: by coarse start time, members of
    one coarse node (and ties) in topological order. For a valid coarse schedule this is
    a linear extension of the original precedence (an edge between coarse nodes ``A ->
    B`` has ``start(A) <= start(B)``), so replaying it never deadlocks."""
    key = np.asarray(coarse_start, dtype=np.float64)[labels]
    rank = np.empty(graph.n, dtype=np.int64)
    rank[np.lexsort((graph.topo_position, key))] = np.arange(graph.n)
    return rank


def monotone_keys(graph: OpGraph, key: np.ndarray) -> np.ndarray:
    """``key`` raised to the running maximum along every path (``key'(v) = max(key(v),
    key'(u))`` for every edge ``u -> v``): removes solver round-off that would let a
    successor sort before its predecessor."""
    out = np.asarray(key, dtype=np.float64).tolist()
    ptr, nbr = graph.in_ptr.tolist(), graph.in_nbr.tolist()
    for v in graph.topo_order.tolist():
        best = out[v]
        for k in range(ptr[v], ptr[v + 1]):
            if out[nbr[k]] > best:
                best = out[nbr[k]]
        out[v] = best
    return np.asarray(out)
