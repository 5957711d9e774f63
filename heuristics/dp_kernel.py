"""The numba kernel of the max-load DP over ideals (Tarnawski et al. Sec. 5.1.1).

Push formulation: ideals are processed by increasing size; from every ideal ``I'`` a
depth-first walk over the cover relation visits each superset ideal ``I`` once, adding
one DP node at a time to ``S = I \\ I'`` and updating ``acc(S)``/``cpu(S)`` in O(degree)
(compute, memory and the per-node transfer terms of docs/semantics.md 2.2 are kept incrementally),
then relaxes ``dp[I][k'][l']`` with ``max(dp[I'][k'-1][l'], acc(S))`` and
``max(dp[I'][k'][l'-1], cpu(S))``.

Pruning (exact): compute and memory only grow along the walk, and a device's load is at
least its compute, so once both the accelerator and the CPU compute of ``S`` exceed an
upper bound ``ub`` on the optimum (the DPL value), no superset can be part of an
optimal split and the walk backtracks. Sources whose every ``dp`` entry exceeds ``ub``
are skipped.
"""

from __future__ import annotations

import numpy as np

from dnnplace.heuristics.jit import cached_njit

__all__ = ["run_dp", "run_dp_pruned", "new_tables", "ideal_sizes"]


@cached_njit
def _term_value(t, in_s, owner, cost, ntarget, cnt):
    """Transfer term of original node t for the current S (docs/semantics.md 2.2): out-cost when its
    DP node is in S and some target DP node is not; in-cost when it is outside and some
    target is inside."""
    if in_s[owner[t]]:
        return cost[t] if cnt[t] < ntarget[t] else 0.0
    return cost[t] if cnt[t] > 0 else 0.0


@cached_njit
def _toggle(x, add, in_s, owner, cost, ntarget, cnt, own_ptr, own_term, tgt_ptr, tgt_term):
    """Add (or remove) DP node x to S; return the change of the transfer cost."""
    delta = 0.0
    for q in range(own_ptr[x], own_ptr[x + 1]):
        t = own_term[q]
        delta -= _term_value(t, in_s, owner, cost, ntarget, cnt)
    in_s[x] = add
    for q in range(own_ptr[x], own_ptr[x + 1]):
        t = own_term[q]
        delta += _term_value(t, in_s, owner, cost, ntarget, cnt)
    for q in range(tgt_ptr[x], tgt_ptr[x + 1]):
        t = tgt_term[q]
        delta -= _term_value(t, in_s, owner, cost, ntarget, cnt)
        if add:
            cnt[t] += 1
        else:
            cnt[t] -= 1
        delta += _term_value(t, in_s, owner, cost, ntarget, cnt)
    return delta


@cached_njit
def _sums(sign, acc, cpu, mm, ww, bad, cbad, x, acc_c, cpu_c, mem, wgt, acc_ok_node, cpu_ok_node):
    """The walk's running sums with DP node ``x`` added (``sign`` 1) or taken away (-1):
    accelerator and CPU time, memory, weights, and the counts of nodes that cannot run on
    an accelerator / a CPU."""
    if sign > 0:
        acc += acc_c[x]
        cpu += cpu_c[x]
        mm += mem[x]
        ww += wgt[x]
    else:
        acc -= acc_c[x]
        cpu -= cpu_c[x]
        mm -= mem[x]
        ww -= wgt[x]
    if not acc_ok_node[x]:
        bad += sign
    if not cpu_ok_node[x]:
        cbad += sign
    return acc, cpu, mm, ww, bad, cbad


@cached_njit
def _bw_contiguous(path, depth, bmask, desc, anc, words):
    """Is the set of backward original nodes carried by the DP nodes on the path
    contiguous in the backward graph (no outside node both below and above it)?"""
    bset = np.zeros(words, dtype=np.uint64)
    for d in range(1, depth + 1):
        x = path[d]
        for w in range(words):
            bset[w] |= bmask[x, w]
    down = np.zeros(words, dtype=np.uint64)
    up = np.zeros(words, dtype=np.uint64)
    for w in range(words):
        b = bset[w]
        while b:
            low = b & (~b + np.uint64(1))
            bit = 0
            tmp = low
            while tmp > np.uint64(1):
                tmp >>= np.uint64(1)
                bit += 1
            v = w * 64 + bit
            for w2 in range(words):
                down[w2] |= desc[v, w2]
                up[w2] |= anc[v, w2]
            b ^= low
    for w in range(words):
        if down[w] & up[w] & ~bset[w]:
            return False
    return True


def new_tables(n_ideals: int, k: int, l: int) -> tuple[np.ndarray, ...]:  # noqa: E741
    """``(dp, parent, kind, rep, stamp)`` for :func:`run_dp`: ``dp[0] = 0`` (the empty
    ideal), every other entry ``inf``; 14 bytes per entry plus 8 per ideal."""
    dp = np.full((n_ideals, k + 1, l + 1), np.inf)
    dp[0, :, :] = 0.0
    return (dp, np.full((n_ideals, k + 1, l + 1), -1, dtype=np.int32),
            np.zeros((n_ideals, k + 1, l + 1), dtype=np.int8), np.ones((n_ideals, k + 1, l + 1), dtype=np.int8),
            np.full(n_ideals, -1, dtype=np.int64))


@cached_njit
def run_dp(n_ideals, cover_ptr, cover_node, cover_to, acc_c, acc_ok_node, cpu_c, cpu_ok_node, mem, mem_cap,
           owner, cost, ntarget, own_ptr, own_term, tgt_ptr, tgt_term,
           ideal_ok, bmask, desc, anc, check_bw, k, l, ub, overlap,  # noqa: E741 (the paper's k, l)
           dp, parent, kind, rep, stamp, src_lo, max_pairs, wgt, sync, rmax):
    """:func:`run_dp_pruned` without the rest bound (every source with an entry ``<= ub``
    is pushed)."""
    return run_dp_pruned(n_ideals, cover_ptr, cover_node, cover_to, acc_c, acc_ok_node, cpu_c, cpu_ok_node, mem,
                         mem_cap, owner, cost, ntarget, own_ptr, own_term, tgt_ptr, tgt_term, ideal_ok, bmask, desc,
                         anc, check_bw, k, l, ub, overlap, dp, parent, kind, rep, stamp, src_lo, max_pairs, wgt,
                         sync, rmax, False, np.zeros(1), np.zeros((1, 1)), n_ideals,
                         np.zeros(acc_c.shape[0], dtype=np.bool_))


@cached_njit
def run_dp_pruned(n_ideals, cover_ptr, cover_node, cover_to, acc_c, acc_ok_node, cpu_c, cpu_ok_node, mem, mem_cap,
                  owner, cost, ntarget, own_ptr, own_term, tgt_ptr, tgt_term,
                  ideal_ok, bmask, desc, anc, check_bw, k, l, ub, overlap,  # noqa: E741 (the paper's k, l)
                  dp, parent, kind, rep, stamp, src_lo, max_pairs, wgt, sync, rmax, prune, rest, cap, src_hi, stop):
    """Push the sources from ``src_lo`` on into the DP table (from :func:`new_tables`;
    ``dp`` has shape ``(n_ideals, k+1, l+1)``, ``parent``/``kind`` the argmin ideal and
    device kind, 0 accelerator, 1 CPU) until all are done or ``max_pairs`` ideal pairs
    were visited (a source's walk is never cut: it visits each superset at most once).
    Returns ``(pairs visited, next source)``. Sources are ideals in order of size, so
    after pushing every source below ``s``, the entries of every ideal ``j <= s`` are
    final (all its subsets came earlier): the caller can stop between chunks and still
    hold exact prefix values.

    Replication (Appendix C.2, ``rmax > 1``): a stage may also run on ``r <= rmax``
    accelerators, at ``acc(S)/r`` plus (or, for ``overlap``, at least) the all-reduce
    ``(r-1)/r * W(S) * sync`` of its weights ``W(S)`` (``wgt`` per DP node, summed along
    the walk like memory); ``rep[j, a, b]`` records the ``r`` of the last stage. The walk
    is pruned once ``acc(S) / rmax`` and the CPU time both exceed ``ub``.

    With ``prune``, a source is also skipped when each of its states ``(a, b)`` (other
    than all devices used) has ``dp > ub`` or a rest ``rest[src]`` (accelerator time
    outside the ideal) above ``cap[a, b]`` (:mod:`dnnplace.heuristics.dp_bounds`, (*)): no
    split of max-load ``<= ub`` passes through it. Skipping whole sources keeps every
    ``dp[j]`` non-increasing in both counts, which the loops' early breaks rely on, and
    every value in the table achievable; every split of max-load ``<= ub`` is still
    found, so a final ``dp[-1] <= ub`` is the optimum.

    Sources stop before ``src_hi``, and a walk never adds a DP node marked in ``stop``:
    with the cut nodes of :mod:`dnnplace.heuristics.dp_segments` marked, each walk stays
    inside its block and the stages into later blocks come from
    :func:`~dnnplace.heuristics.dp_segments.cross_into`."""
    inf = np.inf
    n_nodes = acc_c.shape[0]
    in_s = np.zeros(n_nodes, dtype=np.bool_)
    cnt = np.zeros(owner.shape[0], dtype=np.int64)
    stack_i = np.zeros(n_nodes + 2, dtype=np.int64)
    stack_p = np.zeros(n_nodes + 2, dtype=np.int64)
    path = np.zeros(n_nodes + 2, dtype=np.int64)
    words = bmask.shape[1]
    visited = 0
    src = src_lo - 1
    while src + 1 < min(n_ideals - 1, src_hi) and visited < max_pairs:
        src += 1
        best = inf
        for a in range(k + 1):
            for b in range(l + 1):
                if dp[src, a, b] < best:
                    best = dp[src, a, b]
        if best > ub:
            continue
        if prune:
            alive = False
            for a in range(k + 1):
                for b in range(l + 1):
                    if (a < k or b < l) and dp[src, a, b] <= ub and rest[src] <= cap[a, b]:
                        alive = True
            if not alive:
                continue
        stamp[src] = src
        depth = 0
        stack_i[0] = src
        stack_p[0] = cover_ptr[src]
        acc = 0.0
        cpu = 0.0
        mm = 0.0
        ww = 0.0
        bad = 0
        cbad = 0
        comm = 0.0
        while depth >= 0:
            i = stack_i[depth]
            p = stack_p[depth]
            if p < cover_ptr[i + 1]:
                stack_p[depth] = p + 1
                j = cover_to[p]
                x = cover_node[p]
                if stamp[j] == src or stop[x]:
                    continue
                stamp[j] = src
                # the bound test first, on the sums alone: the transfer terms are only
                # updated for a set the walk keeps
                acc2, cpu2, mm2, ww2, bad2, cbad2 = _sums(1, acc, cpu, mm, ww, bad, cbad, x, acc_c, cpu_c, mem, wgt,
                                                          acc_ok_node, cpu_ok_node)
                acc_feasible = bad2 == 0 and mm2 <= mem_cap
                acc_lb = acc2 / rmax if acc_feasible else inf
                cpu_load = cpu2 if cbad2 == 0 else inf
                if acc_lb > ub and cpu_load > ub:
                    continue
                acc, cpu, mm, ww, bad, cbad = acc2, cpu2, mm2, ww2, bad2, cbad2
                comm += _toggle(x, True, in_s, owner, cost, ntarget, cnt, own_ptr, own_term, tgt_ptr, tgt_term)
                visited += 1
                depth += 1
                stack_i[depth] = j
                stack_p[depth] = cover_ptr[j]
                path[depth] = x
                if acc_feasible:
                    acc_load = max(acc, comm) if overlap else acc + comm
                else:
                    acc_load = inf
                checked = 0  # 0 unknown, 1 contiguous, 2 not
                if not check_bw or (ideal_ok[src] and ideal_ok[j]):
                    checked = 1
                if acc_load <= ub:
                    # dp[j] is non-increasing in both counts at all times (a min of
                    # non-increasing candidates), so once acc_load >= dp[j, a, b] no
                    # larger a can improve: break
                    for b in range(l + 1):
                        for a in range(1, k + 1):
                            if acc_load >= dp[j, a, b]:
                                break
                            c = dp[src, a - 1, b]
                            if acc_load > c:
                                c = acc_load
                            if c < dp[j, a, b]:
                                if checked == 0:
                                    checked = 1 if _bw_contiguous(path, depth, bmask, desc, anc, words) else 2
                                if checked == 2:
                                    break
                                dp[j, a, b] = c
                                parent[j, a, b] = src
                                kind[j, a, b] = 0
                                rep[j, a, b] = 1
                        if checked == 2:
                            break
                if acc_feasible and checked != 2:
                    for r in range(2, min(rmax, k) + 1):
                        sync_t = (r - 1) / r * ww * sync
                        lr = max(acc_load / r, sync_t) if overlap else acc_load / r + sync_t
                        if lr > ub:
                            continue
                        for b in range(l + 1):
                            for a in range(r, k + 1):
                                c = dp[src, a - r, b]
                                if lr > c:
                                    c = lr
                                if c < dp[j, a, b]:
                                    if checked == 0:
                                        checked = 1 if _bw_contiguous(path, depth, bmask, desc, anc, words) else 2
                                    if checked == 2:
                                        break
                                    dp[j, a, b] = c
                                    parent[j, a, b] = src
                                    kind[j, a, b] = 0
                                    rep[j, a, b] = r
                            if checked == 2:
                                break
                        if checked == 2:
                            break
                if cpu_load <= ub and checked != 2:
                    for a in range(k + 1):
                        for b in range(1, l + 1):
                            if cpu_load >= dp[j, a, b]:
                                break
                            c = dp[src, a, b - 1]
                            if cpu_load > c:
                                c = cpu_load
                            if c < dp[j, a, b]:
                                if checked == 0:
                                    checked = 1 if _bw_contiguous(path, depth, bmask, desc, anc, words) else 2
                                if checked == 2:
                                    break
                                dp[j, a, b] = c
                                parent[j, a, b] = src
                                kind[j, a, b] = 1
                        if checked == 2:
                            break
            else:
                if depth > 0:
                    x = path[depth]
                    comm += _toggle(x, False, in_s, owner, cost, ntarget, cnt, own_ptr, own_term, tgt_ptr,
                                    tgt_term)
                    acc, cpu, mm, ww, bad, cbad = _sums(-1, acc, cpu, mm, ww, bad, cbad, x, acc_c, cpu_c, mem, wgt,
                                                    acc_ok_node, cpu_ok_node)
                depth -= 1
    return visited, src + 1


@cached_njit
def ideal_sizes(cover_ptr, cover_node, cover_to, weight, upto):
    """Size and total ``weight`` of the ideals ``0 .. upto-1`` (each first reached from
    a smaller ideal along the cover relation)."""
    size = np.full(upto, -1, dtype=np.int64)
    work = np.zeros(upto)
    size[0] = 0
    for i in range(upto):
        for p in range(cover_ptr[i], cover_ptr[i + 1]):
            j = cover_to[p]
            if j < upto and size[j] < 0:
                size[j] = size[i] + 1
                work[j] = work[i] + weight[cover_node[p]]
    return size, work
