r"""Compiled move kernels of ``latency-ls``: descent and perturbation over contiguous splits.

A split is a device per node; nodes move in *units* (colocation classes, given as a CSR
``unit_ptr``/``unit_nodes``), and every candidate split is scored by
:func:`dnnplace.heuristics.latency_score.score_split` (``inf`` rejects a split whose
unit graph has a cycle). Memory is booked per accelerator slot as moves are taken.

- :func:`descend`: first-improvement descent over unit moves (to the CPU pool, to a
  device holding a graph neighbour, or to an empty accelerator) and merges of whole
  accelerators, then, optionally, ejection pairs (a unit onto a full accelerator and a
  boundary unit of it out elsewhere); a move is taken when it lowers ``(latency, sum of
  finish times)`` lexicographically by more than the relative tolerance :data:`EPS`;
- :func:`perturb`: random feasible unit moves (the kick of the iterated local search).

The search that drives them is :func:`dnnplace.heuristics.latency_search.latency_search`.
"""

from __future__ import annotations

import numpy as np

from dnnplace.heuristics.jit import cached_njit
from dnnplace.heuristics.latency_score import score_split

__all__ = ["EPS", "descend", "perturb"]

EPS = 1e-9
"""Relative tolerance of an improvement (latency and the sum of finish times)."""


@cached_njit
def _apply(x, b, dev, unit_ptr, unit_nodes):
    """Put every node of unit ``x`` on device ``b``."""
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        dev[unit_nodes[q]] = b


@cached_njit
def _better(val, sec, cur, cursec):
    """Whether ``(val, sec)`` beats ``(cur, cursec)`` lexicographically by more than :data:`EPS` (relative)."""
    tol = EPS * max(1.0, abs(cur))
    if val < cur - tol:
        return True
    return val <= cur + tol and sec < cursec - EPS * max(1.0, abs(cursec))


@cached_njit
def _neighbour_devices(x, v, ptr, nbr, dev, ok, mark, out, cnt):
    """Append to ``out[cnt:]`` the devices of the neighbours ``nbr[ptr[v]:ptr[v + 1]]`` of
    node ``v`` that are not marked yet and may hold unit ``x`` (marking them); returns
    the new count."""
    for r in range(ptr[v], ptr[v + 1]):
        d = dev[nbr[r]]
        if not mark[d] and ok[x, d]:
            mark[d] = True
            out[cnt] = d
            cnt += 1
    return cnt


@cached_njit
def _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok, used, mark,
             out):
    """Candidate devices for unit ``x`` (written to ``out``; returns their count)."""
    a = dev[unit_nodes[unit_ptr[x]]]
    cnt = 0
    for d in range(mark.shape[0]):
        mark[d] = False
    mark[a] = True
    if pool >= 0 and ok[x, pool] and not mark[pool]:
        mark[pool] = True
        out[cnt] = pool
        cnt += 1
    for q in range(unit_ptr[x], unit_ptr[x + 1]):
        v = unit_nodes[q]
        cnt = _neighbour_devices(x, v, in_ptr, in_nbr, dev, ok, mark, out, cnt)
        cnt = _neighbour_devices(x, v, out_ptr, out_nbr, dev, ok, mark, out, cnt)
    for i in range(accs.shape[0]):  # empty accelerators open a new subgraph
        d = accs[i]
        if used[acc_idx[d]] == 0 and not mark[d] and ok[x, d]:
            mark[d] = True
            out[cnt] = d
            cnt += 1
    return cnt


@cached_njit
def _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc):
    """Memory and node count on every accelerator slot."""
    mem = np.zeros(n_acc)
    used = np.zeros(n_acc, dtype=np.int64)
    for v in range(dev.shape[0]):
        a = acc_idx[dev[v]]
        if a >= 0:
            used[a] += 1
    for x in range(unit_ptr.shape[0] - 1):
        a = acc_idx[dev[unit_nodes[unit_ptr[x]]]]
        if a >= 0:
            mem[a] += umem[x]
    return mem, used


@cached_njit
def _account(x, a, b, acc_idx, unit_ptr, umem, mem, used):
    """Book the move of unit ``x`` from device ``a`` to device ``b`` in ``mem``/``used``."""
    size = unit_ptr[x + 1] - unit_ptr[x]
    ia = acc_idx[a]
    ib = acc_idx[b]
    if ia >= 0:
        mem[ia] -= umem[x]
        used[ia] -= size
    if ib >= 0:
        mem[ib] += umem[x]
        used[ib] += size


@cached_njit
def descend(dev, order, unit_ptr, unit_nodes, umem, ok, cap, acc_idx, accs, pool, in_ptr, in_nbr, out_ptr,
            out_nbr, out_eid, comp, cin, cout, work, unit_dev_buf, max_evals, eject):
    """First-improvement descent over unit moves and merges (then, with ``eject``,
    ejection pairs once those are exhausted); returns (latency, sec, evals).

    ``dev`` (a valid split) is improved in place; ``order`` is the sweep order of the
    units, ``unit_dev_buf`` a work array of one entry per unit, and the descent stops,
    with a valid split, once ``max_evals`` score evaluations are spent (checked before
    each unit's moves: a time budget holds within one unit). ``sec`` is the sum of
    finish times.
    """
    unit, dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue = work
    n_acc = accs.shape[0]
    n_dev = cap.shape[0]
    mem, used = _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc)
    cur, cursec = score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin,
                              indeg, uptr, uadj, stamp, tmp, queue)
    evals = 1
    mark = np.zeros(n_dev, dtype=np.bool_)
    cand = np.empty(n_dev, dtype=np.int64)
    improved = True
    while improved and evals < max_evals:
        improved = False
        for i in range(order.shape[0]):
            if evals >= max_evals:
                break
            x = order[i]
            a = dev[unit_nodes[unit_ptr[x]]]
            k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok,
                         used, mark, cand)
            for j in range(k):
                b = cand[j]
                ib = acc_idx[b]
                if ib >= 0 and mem[ib] + umem[x] > cap[b] * (1 + 1e-12):
                    continue
                _apply(x, b, dev, unit_ptr, unit_nodes)
                val, sec = score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur,
                                       start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                evals += 1
                if _better(val, sec, cur, cursec):
                    cur, cursec = val, sec
                    _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
                    improved = True
                    break
                _apply(x, a, dev, unit_ptr, unit_nodes)
        # merges: all of accelerator a onto accelerator b, or onto the pool
        for ia in range(n_acc):
            if used[ia] == 0:
                continue
            a = accs[ia]
            for jb in range(-1, n_acc):
                if jb == ia:
                    continue
                if jb >= 0:
                    b = accs[jb]
                    if used[jb] == 0 or mem[jb] + mem[ia] > cap[b] * (1 + 1e-12):
                        continue
                else:
                    b = pool
                    if b < 0:
                        continue
                feasible = True
                nunits = 0
                for x in range(unit_ptr.shape[0] - 1):
                    if dev[unit_nodes[unit_ptr[x]]] == a:
                        unit_dev_buf[nunits] = x
                        nunits += 1
                        if not ok[x, b]:
                            feasible = False
                if not feasible:
                    continue
                for t in range(nunits):
                    _apply(unit_dev_buf[t], b, dev, unit_ptr, unit_nodes)
                val, sec = score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur,
                                       start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                evals += 1
                if _better(val, sec, cur, cursec):
                    cur, cursec = val, sec
                    if jb >= 0:
                        mem[jb] += mem[ia]
                        used[jb] += used[ia]
                    mem[ia] = 0.0
                    used[ia] = 0
                    improved = True
                    break
                for t in range(nunits):
                    _apply(unit_dev_buf[t], a, dev, unit_ptr, unit_nodes)
        if improved or not eject or evals >= max_evals:
            continue
        # ejection: x onto a full accelerator b, and a boundary unit y of b out to another device
        cand2 = np.empty(n_dev, dtype=np.int64)
        for i in range(order.shape[0]):
            if evals >= max_evals:
                break
            x = order[i]
            a = dev[unit_nodes[unit_ptr[x]]]
            ia = acc_idx[a]
            k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok,
                         used, mark, cand)
            for j in range(k):
                b = cand[j]
                ib = acc_idx[b]
                if ib < 0 or mem[ib] + umem[x] <= cap[b] * (1 + 1e-12):
                    continue  # plain moves were tried above
                _apply(x, b, dev, unit_ptr, unit_nodes)
                found = False
                for y in range(unit_ptr.shape[0] - 1):
                    if y == x or dev[unit_nodes[unit_ptr[y]]] != b:
                        continue
                    if mem[ib] + umem[x] - umem[y] > cap[b] * (1 + 1e-12):
                        continue
                    boundary = False
                    for q in range(unit_ptr[y], unit_ptr[y + 1]):
                        v = unit_nodes[q]
                        for r in range(in_ptr[v], in_ptr[v + 1]):
                            if dev[in_nbr[r]] != b:
                                boundary = True
                        for r in range(out_ptr[v], out_ptr[v + 1]):
                            if dev[out_nbr[r]] != b:
                                boundary = True
                    if not boundary:
                        continue
                    k2 = _targets(y, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs,
                                  pool, ok, used, mark, cand2)
                    for j2 in range(k2):
                        c = cand2[j2]
                        ic = acc_idx[c]
                        if ic >= 0:
                            mc = mem[ic] + umem[y] - (umem[x] if ic == ia else 0.0)
                            if mc > cap[c] * (1 + 1e-12):
                                continue
                        _apply(y, c, dev, unit_ptr, unit_nodes)
                        val, sec = score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit,
                                               dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue)
                        evals += 1
                        if _better(val, sec, cur, cursec):
                            cur, cursec = val, sec
                            _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
                            _account(y, b, c, acc_idx, unit_ptr, umem, mem, used)
                            found = True
                            break
                        _apply(y, b, dev, unit_ptr, unit_nodes)
                    if found:
                        break
                if found:
                    improved = True
                    break
                _apply(x, a, dev, unit_ptr, unit_nodes)
    return cur, cursec, evals


@cached_njit
def perturb(dev, units, targets_pick, unit_ptr, unit_nodes, umem, ok, cap, acc_idx, accs, pool, in_ptr, in_nbr,
            out_ptr, out_nbr, out_eid, comp, cin, cout, work):
    """Apply random feasible unit moves: unit ``units[i]`` to its candidate number
    ``targets_pick[i] % count``; a move that breaks memory is skipped, one that breaks
    acyclicity is undone. ``dev`` is changed in place; returns the number of moves made."""
    unit, dur, start, fin, indeg, uptr, uadj, stamp, tmp, queue = work
    n_acc = accs.shape[0]
    n_dev = cap.shape[0]
    mem, used = _usage(dev, acc_idx, unit_ptr, unit_nodes, umem, n_acc)
    mark = np.zeros(n_dev, dtype=np.bool_)
    cand = np.empty(n_dev, dtype=np.int64)
    moved = 0
    for i in range(units.shape[0]):
        x = units[i]
        a = dev[unit_nodes[unit_ptr[x]]]
        k = _targets(x, dev, unit_ptr, unit_nodes, in_ptr, in_nbr, out_ptr, out_nbr, acc_idx, accs, pool, ok, used,
                     mark, cand)
        if k == 0:
            continue
        b = cand[targets_pick[i] % k]
        ib = acc_idx[b]
        if ib >= 0 and mem[ib] + umem[x] > cap[b] * (1 + 1e-12):
            continue
        _apply(x, b, dev, unit_ptr, unit_nodes)
        val, _ = score_split(dev, acc_idx, n_acc, comp, cin, cout, out_ptr, out_nbr, out_eid, unit, dur, start, fin,
                             indeg, uptr, uadj, stamp, tmp, queue)
        if val == np.inf:
            _apply(x, a, dev, unit_ptr, unit_nodes)
            continue
        _account(x, a, b, acc_idx, unit_ptr, umem, mem, used)
        moved += 1
    return moved

