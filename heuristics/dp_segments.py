"""Blocks of the ideal lattice at cut nodes: cross-block stages of the max-load DP
(Tarnawski et al. Sec. 5.1.1) as sorted min-max queries instead of superset walks.

A *cut node* ``z`` of the DP graph ``H`` is comparable to every other node. Number them
``z_1 < ... < z_m`` (they form a chain); block ``s`` holds ``z_s`` and the nodes strictly
between ``z_s`` and ``z_{s+1}`` (block 0 the nodes before ``z_1``), and an ideal lies in
block ``s`` when it holds exactly ``s`` cut nodes. Ideals come in order of size, so the
ideals of a block are a contiguous range of indices. If every edge ``u -> v`` of ``H``
stays in its block or enters the next block at its cut node (*narrow cuts*; every cell
boundary of :mod:`dnnplace.graphs.generators.cells` is one), the transfer terms of a stage
``S = J \\ I`` with ``I`` in block ``s`` and ``J`` in a later block ``s'`` separate
(docs/semantics.md 2.2): a term owned by a node of ``I`` is paid exactly when it is in the
*frontier* of ``I`` (some target outside ``I``: all its targets lie in ``J``), a term owned
by a node of ``S`` exactly when it is in the frontier of ``J``, every other term is zero.
With ``fr(X)`` the cost of the frontier of ``X``::

    acc(S) + comm(S) = F(J) - E(I),   F(J) = acc(J) + fr(J),   E(I) = acc(I) - fr(I)
    mem(S) = mem(J) - mem(I),         cpu(S) = cpu(J) - cpu(I)                    (**)

so the recurrence's accelerator candidates for ``J`` are
``min_I max(dp[I][a-1][b], F(J) - E(I))`` over the sources ``I`` of earlier blocks with
``mem(I) >= mem(J) - M``. With ``kappa = dp[I][a-1][b] + E(I)`` this is
``min(min{dp : kappa >= F(J)}, F(J) - max{E : kappa < F(J)})``: sweeping the sources by
decreasing memory into two Fenwick trees over the ranks of ``kappa`` (suffix minimum of
``dp``, prefix maximum of ``E``) answers every ``J`` in ``O(log)``; the CPU candidates are the
same without memory or transfers. The superset walks then stay inside their block
(:func:`~dnnplace.heuristics.dp_kernel.run_dp_pruned` with ``stop`` at the cut nodes).

Used for the ``pipedream`` objective without replication or backward contiguity, when
every node runs on an accelerator and (if there are CPUs) on a CPU; otherwise the DP
walks as before (:func:`segment_arrays` returns ``None``).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.reach import descendant_matrix, narrow_cut_mask
from dnnplace.heuristics.jit import cached_njit

__all__ = ["narrow_cuts", "segment_arrays", "cross_into"]


def narrow_cuts(n: int, src: np.ndarray, dst: np.ndarray, also: np.ndarray | None = None,
                max_nodes: int = 5000) -> np.ndarray | None:
    """The narrow cut nodes (a mask) of the DAG ``(n, src, dst)``: nodes comparable to
    every other node that no edge (and no pair of ``also``, shape ``(m, 2)``: the transfer
    terms' owner and target, each target below its owner) jumps over (``u < z < v``), so
    that every edge stays in its block or enters the next at its cut (module docstring);
    ``None`` when there is none, a pair of ``also`` does not go down the DAG, or
    ``n > max_nodes`` (the check holds an ``n x n`` reachability matrix).

    >>> narrow_cuts(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3])).tolist()  # diamond
    [True, False, False, True]
    >>> narrow_cuts(4, np.array([0, 1, 2, 0]), np.array([1, 2, 3, 2])).tolist()  # 0 -> 2 jumps over 1
    [True, False, True, True]
    >>> narrow_cuts(3, np.array([0]), np.array([1])) is None  # node 2 is apart
    True
    """
    if n < 2 or n > max_nodes or src.size == 0:
        return None
    desc = descendant_matrix(n, src, dst)
    pairs = np.stack([src, dst], axis=1)
    if also is not None:
        also = also.reshape(-1, 2)
        if not desc[also[:, 0], also[:, 1]].all():
            return None
        pairs = np.concatenate([pairs, also])
    cut = narrow_cut_mask(desc, pairs)
    if not cut.any():
        return None
    return cut


@cached_njit
def _ideal_terms(n_ideals, cover_ptr, cover_node, cover_to, member, is_cut, acc_c, cpu_c, mem, cost, own_ptr,
                 own_term, tgt_ptr, tgt_term, term_ptr, term_node):
    """Along the first cover reaching each ideal ``j = i + {x}``: its block, ``E``, ``F``,
    memory and CPU time (module docstring, (**)); the frontier cost gains ``x``'s terms
    (its targets are successors of ``x``, outside ``j``) and loses each term targeting
    ``x`` whose targets now all lie in ``j``."""
    blk = np.full(n_ideals, -1, dtype=np.int32)
    acc = np.zeros(n_ideals)
    fr = np.zeros(n_ideals)
    cpu = np.zeros(n_ideals)
    mm = np.zeros(n_ideals)
    blk[0] = 0
    for i in range(n_ideals):
        for p in range(cover_ptr[i], cover_ptr[i + 1]):
            j = cover_to[p]
            if blk[j] >= 0:
                continue
            x = cover_node[p]
            blk[j] = blk[i] + (1 if is_cut[x] else 0)
            acc[j] = acc[i] + acc_c[x]
            cpu[j] = cpu[i] + cpu_c[x]
            mm[j] = mm[i] + mem[x]
            f = fr[i]
            for q in range(own_ptr[x], own_ptr[x + 1]):
                f += cost[own_term[q]]
            for q in range(tgt_ptr[x], tgt_ptr[x + 1]):
                t = tgt_term[q]
                inside = True
                for r in range(term_ptr[t], term_ptr[t + 1]):
                    y = term_node[r]
                    if not (member[j, y >> 6] >> np.uint64(y & 63)) & np.uint64(1):
                        inside = False
                        break
                if inside:
                    f -= cost[t]
            fr[j] = f
    return blk, acc - fr, acc + fr, mm, cpu


def segment_arrays(is_cut: np.ndarray, lattice, a: dict) -> dict:
    """Per ideal ``E``, ``F``, memory and CPU time, and the first ideal of every block
    (``starts``, length ``blocks + 1``), for :func:`cross_into`, where the module's
    conditions hold (every node runs on an accelerator and a CPU, no backward contiguity:
    the caller checks)."""
    blk, e, f, mm, cpu = _ideal_terms(lattice.size, lattice.cover_ptr, lattice.cover_node, lattice.cover_to,
                                      lattice.member, is_cut, a["acc_c"], a["cpu_c"], a["mem"], a["cost"],
                                      a["own_ptr"], a["own_term"], a["tgt_ptr"], a["tgt_term"], a["term_ptr"],
                                      a["term_node"])
    if np.any(np.diff(blk) < 0):
        raise RuntimeError("ideals of a block are not contiguous in the enumeration order")
    starts = np.searchsorted(blk, np.arange(int(blk[-1]) + 2), side="left").astype(np.int64)
    return dict(starts=starts, E=e, F=f, mem_i=mm, cpu_i=cpu)


@cached_njit
def _fen_best(tree_v, tree_i, pos, sign):
    """Best (``sign`` 1: least, -1: largest) value and its index over Fenwick positions ``< pos``."""
    best = np.inf * sign
    arg = -1
    while pos > 0:
        if tree_v[pos] * sign < best * sign:
            best = tree_v[pos]
            arg = tree_i[pos]
        pos -= pos & (-pos)
    return best, arg


@cached_njit
def _fen_put(tree_v, tree_i, pos, val, idx, sign):
    """Offer ``val`` (index ``idx``) at Fenwick position ``pos`` (0-based)."""
    pos += 1
    n = tree_v.shape[0] - 1
    while pos <= n:
        if val * sign < tree_v[pos] * sign:
            tree_v[pos] = val
            tree_i[pos] = idx
        pos += pos & (-pos)


@cached_njit
def _relax(dp, parent, kind, jj, a, b, val, src, knd, ub):
    if val <= ub and val < dp[jj, a, b]:
        dp[jj, a, b] = val
        parent[jj, a, b] = src
        kind[jj, a, b] = knd
        return 1
    return 0


@cached_njit
def cross_into(lo, hi, cand, e, f, mem_i, cpu_i, mem_cap, k, l, ub, dp, parent, kind, rep):  # noqa: E741
    """Relax ``dp`` of the ideals ``lo .. hi-1`` (one block) with the stages from the
    sources ``cand`` (pushed ideals of earlier blocks) by the sorted queries of the module
    docstring. Returns the number of entries improved."""
    nt = hi - lo
    ns = cand.shape[0]
    improved = 0
    if ns == 0 or nt == 0:
        return 0
    sord = cand[np.argsort(-mem_i[cand])]
    tord = lo + np.argsort(-mem_i[lo:hi])
    kap = np.empty(ns)
    for b in range(l + 1):
        for a in range(1, k + 1):
            for q in range(ns):
                kap[q] = dp[sord[q], a - 1, b] + e[sord[q]]
            rank_order = np.argsort(kap)
            rank = np.empty(ns, dtype=np.int64)
            rank[rank_order] = np.arange(ns)
            kap_sorted = kap[rank_order]
            dmin_v = np.full(ns + 1, np.inf)  # over reversed ranks: suffix minimum of dp
            dmin_i = np.full(ns + 1, -1, dtype=np.int64)
            emax_v = np.full(ns + 1, -np.inf)  # prefix maximum of E
            emax_i = np.full(ns + 1, -1, dtype=np.int64)
            sp = 0
            for t in range(nt):
                jj = tord[t]
                need = mem_i[jj] - mem_cap
                while sp < ns and mem_i[sord[sp]] >= need:
                    s = sord[sp]
                    d = dp[s, a - 1, b]
                    if d <= ub:
                        _fen_put(dmin_v, dmin_i, ns - 1 - rank[sp], d, s, 1)
                        _fen_put(emax_v, emax_i, rank[sp], e[s], s, -1)
                    sp += 1
                fj = f[jj]
                pos = np.searchsorted(kap_sorted, fj)  # ranks < pos: kappa < F(J)
                v1, s1 = _fen_best(dmin_v, dmin_i, ns - pos, 1)
                v2, s2 = _fen_best(emax_v, emax_i, pos, -1)
                if s2 >= 0 and fj - v2 < v1:
                    v1, s1 = fj - v2, s2
                if s1 >= 0 and _relax(dp, parent, kind, jj, a, b, v1, s1, 0, ub):
                    rep[jj, a, b] = 1
                    improved += 1
    for b in range(1, l + 1):
        for a in range(k + 1):
            for q in range(ns):
                kap[q] = dp[cand[q], a, b - 1] + cpu_i[cand[q]]
            order = np.argsort(kap)
            kap_sorted = kap[order]
            suf_v = np.full(ns + 1, np.inf)
            suf_i = np.full(ns + 1, -1, dtype=np.int64)
            for q in range(ns - 1, -1, -1):
                s = cand[order[q]]
                d = dp[s, a, b - 1]
                suf_v[q], suf_i[q] = suf_v[q + 1], suf_i[q + 1]
                if d < suf_v[q]:
                    suf_v[q], suf_i[q] = d, s
            pre_v = np.full(ns + 1, -np.inf)
            pre_i = np.full(ns + 1, -1, dtype=np.int64)
            for q in range(ns):
                s = cand[order[q]]
                pre_v[q + 1], pre_i[q + 1] = pre_v[q], pre_i[q]
                if dp[s, a, b - 1] <= ub and cpu_i[s] > pre_v[q + 1]:
                    pre_v[q + 1], pre_i[q + 1] = cpu_i[s], s
            for jj in range(lo, hi):
                cj = cpu_i[jj]
                pos = np.searchsorted(kap_sorted, cj)
                v1, s1 = suf_v[pos], suf_i[pos]
                if pre_i[pos] >= 0 and cj - pre_v[pos] < v1:
                    v1, s1 = cj - pre_v[pos], pre_i[pos]
                if s1 >= 0 and _relax(dp, parent, kind, jj, a, b, v1, s1, 1, ub):
                    improved += 1
    return improved
