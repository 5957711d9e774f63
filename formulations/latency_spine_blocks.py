"""The blocks of the spine bound (:mod:`dnnplace.formulations.latency_spine`, whose
docstring states the maths): for each block between two cut nodes, the choices that
cross it, ``(P, Q, M)`` per weakly connected component (:class:`_Options`: the exit cost
``X(P)``, the entry cost ``E(Q)``, the middle chain from the path segmentation of each
path's stretch), combined over the components into the crossing tables the spine DP
steps through (:func:`_block`, :func:`_crossing`), or relaxed where a block has too many
choices (:func:`_relaxed`).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from dnnplace.formulations.latency_closure_data import ClosureData

_INF = float("inf")
#: components with more down-closed sets than this are relaxed (module docstring)
MAX_DOWNSETS = 600
#: a block whose choices multiply past this many rows is relaxed like a large component
MAX_PRODUCT = 4_000_000
#: at most this many paths per component are used for the middle chains (any subset is a bound)
MAX_PATHS = 64
#: middle pieces counted per component (more count as ``KCAP``, with the time of any number)
KCAP = 2


def _downsets(pred: list[int], k: int) -> list[int] | None:
    """Every down-closed subset of a ``k``-node DAG (``pred``: bit masks), or ``None`` past
    ``MAX_DOWNSETS``."""
    seen, frontier = {0}, [0]
    while frontier:
        nxt = []
        for D in frontier:
            for v in range(k):
                if not (D >> v) & 1 and pred[v] & ~D == 0:
                    E = D | (1 << v)
                    if E not in seen:
                        seen.add(E)
                        nxt.append(E)
                        if len(seen) > MAX_DOWNSETS:
                            return None
        frontier = nxt
    return sorted(seen)


def _paths(succ: list[int], pred: list[int], k: int) -> list[list[int]]:
    """Up to ``MAX_PATHS`` source-to-sink paths of a small DAG (local indices)."""
    out: list[list[int]] = []
    stack = [[v] for v in range(k) if pred[v] == 0]
    while stack and len(out) < MAX_PATHS:
        p = stack.pop()
        nxt = [w for w in range(k) if (succ[p[-1]] >> w) & 1]
        if not nxt:
            out.append(p)
        stack += [p + [w] for w in nxt]
    return out


def _path_costs(d: ClosureData, nodes: np.ndarray, cin_first: float, cpu_only: bool) -> tuple:
    """Per node of a path its CPU time, and ``piece(x, y)``: the least duration of a piece on
    ``nodes[x:y]`` (``c_in`` of ``nodes[x-1]``, ``cin_first`` for ``x = 0``, + compute +
    ``c_out`` of ``nodes[y-1]``; ``inf`` if a node is unrunnable or ``cpu_only``)."""
    acc, cout = d.p_acc[nodes], d.c_out[nodes]
    cin = np.r_[cin_first, d.c_in[nodes][:-1]] if len(nodes) else np.zeros(0)
    fin = np.isfinite(acc) & (not cpu_only)
    pref = np.r_[0.0, np.cumsum(np.where(fin, acc, 0.0))]
    bad = np.r_[0, np.cumsum(~fin)]

    def piece(x: np.ndarray, y: int) -> np.ndarray:
        return np.where(bad[y] > bad[x], _INF, cin[x] + (pref[y] - pref[x]) + cout[y - 1])
    return d.p_cpu[nodes], piece


def seg_table(d: ClosureData, nodes: np.ndarray, cin_first: float, cpu_only: bool, i: int) -> np.ndarray:
    """``f[y, k]``: least time of ``nodes[i:y]`` on CPU nodes and exactly ``k`` pieces."""
    L = len(nodes)
    cpu, piece = _path_costs(d, nodes, cin_first, cpu_only)
    f = np.full((L + 1, L + 2), _INF)
    f[i, 0] = 0.0
    for y in range(i + 1, L + 1):
        f[y] = f[y - 1] + cpu[y - 1]
        f[y, 1:] = np.minimum(f[y, 1:], (f[i:y, :-1] + piece(np.arange(i, y), y)[:, None]).min(axis=0))
    return f


def _segments(d: ClosureData, nodes: np.ndarray, cin_first: float, mode: str) -> np.ndarray:
    """``seg[k, i, j]``: least time of the path ``nodes[i:j]`` processed by CPU nodes and at
    most ``k`` pieces (:func:`seg_table`): the middle chains. The last row ``k = KCAP`` is
    any number of pieces for ``mode="bound"``, at most ``KCAP`` for ``"split"``; ``"cpu"``:
    no pieces."""
    L = len(nodes)
    seg = np.full((KCAP + 1, L + 1, L + 1), _INF)
    for i in range(L + 1):
        best = np.minimum.accumulate(seg_table(d, nodes, cin_first, mode == "cpu", i), axis=1)
        seg[:, i, i:] = best[i:, :KCAP + 1].T
        if mode == "bound":
            seg[KCAP, i, i:] = best[i:, -1]
    return seg


class _Options:
    """The choices ``(P, Q)`` in one component: per choice the exit cost ``X(P)``, the entry
    cost ``E(Q)``, the middle chain, memory units of ``P`` and ``Q``, whether ``a_{m-1}``
    sends to a node outside ``P`` (``out``) and to a node of ``Q`` (``into``), and whether
    ``P`` / ``Q`` is empty."""

    def __init__(self, d: ClosureData, nodes: np.ndarray, prev: int, nxt: int, unit: float, split: bool):
        g, k = d.g, nodes.size
        self.nodes = nodes
        loc = {int(v): i for i, v in enumerate(nodes.tolist())}
        pred, succ = [0] * k, [0] * k
        fed, to_next = 0, np.zeros(k, dtype=bool)
        for u, w in zip(g.src.tolist(), g.dst.tolist()):
            if u in loc and w in loc:
                succ[loc[u]] |= 1 << loc[w]
                pred[loc[w]] |= 1 << loc[u]
            elif w in loc and u == prev:
                fed |= 1 << loc[w]
            elif u in loc and w == nxt:
                to_next[loc[u]] = True
        downs = _downsets(pred, k)
        self.ok = downs is not None and k <= 62
        if not self.ok:
            return
        D = np.array(downs, dtype=np.int64)
        bit = (D[:, None] >> np.arange(k)) & 1 == 1              # (#downsets, k)
        acc, mem = d.p_acc[nodes], d.mem[nodes]
        succ_a, cin, cout = np.array(succ, dtype=np.int64), d.c_in[nodes], d.c_out[nodes]
        comp_p = np.where(bit, acc, 0.0).sum(axis=1)
        leaves = bit & (((succ_a[None, :] & ~D[:, None]) != 0) | to_next[None, :])
        exit_ = comp_p + np.where(leaves, cout, 0.0).sum(axis=1)
        qbit = ~bit                                               # Q = the complement of a down-set
        Qm = ~D & ((1 << k) - 1)
        feeds = ~qbit & (((succ_a[None, :] & Qm[:, None]) != 0) | to_next[None, :])
        entry = np.where(qbit, acc, 0.0).sum(axis=1) + np.where(feeds, cin, 0.0).sum(axis=1)
        memd = np.where(bit, mem, 0.0).sum(axis=1)
        memq = mem.sum() - memd
        cin_prev = float(d.c_in[prev]) if prev >= 0 else 0.0
        paths = _paths(succ, pred, k)
        self.chain_path = paths[0] if len(paths) == 1 and len(paths[0]) == k else None
        self.cin_prev = cin_prev
        mode = "bound" if not split else "split" if self.chain_path is not None else "cpu"
        segs = [_segments(d, nodes[p], cin_prev, mode) for p in paths]
        cnt = np.stack([bit[:, p].sum(axis=1) for p in paths], axis=1)   # path nodes in each down-set
        iP, iD = np.nonzero((D[:, None] & ~D[None, :]) == 0)     # P subset of D2 (Q = complement of D2)
        # middle pieces (at least; KCAP: or more; split: at most, none where the middle is on the CPU)
        kk = np.arange(1 if split and self.chain_path is None else KCAP + 1)
        chain = np.zeros((kk.size, iP.size))
        for t, s in enumerate(segs):
            chain = np.maximum(chain, s[kk][:, cnt[iP, t], cnt[iD, t]])
        self.pieces = np.repeat(kk, iP.size)
        if self.chain_path is not None:
            _, piece = _path_costs(d, nodes[self.chain_path], 0.0, False)
            L = len(self.chain_path)
            tab = np.full((L + 1, L + 1), _INF)            # tab[i, j]: least piece on a stretch of [i, j)
            for y in range(1, L + 1):
                best = np.minimum.accumulate(piece(np.arange(0, y), y)[::-1])[::-1]   # over x >= i
                for i in range(y):
                    tab[i, y:] = np.minimum(tab[i, y:], best[i])
            part = tab[cnt[iP, 0], cnt[iD, 0]]
        else:
            z = np.where(np.isfinite(acc), acc + cout, _INF)
            part = np.full(iP.size, float(z.min()))
        self.part = np.where(self.pieces > 0, np.tile(part, kk.size), _INF)
        iP, iD, chain = np.tile(iP, kk.size), np.tile(iD, kk.size), chain.ravel()
        self.exit, self.entry, self.chain = exit_[iP], entry[iD], chain
        units = np.ceil if split else np.floor
        self.mp = units(memd[iP] / unit).astype(np.int64)
        self.mq = units(memq[iD] / unit).astype(np.int64)
        self.P, self.D2 = D[iP], D[iD]
        self.out = (fed & ~D[iP]) != 0
        self.into = (fed & Qm[iD]) != 0
        self.p_empty, self.q_empty = D[iP] == 0, D[iD] == (1 << k) - 1


def _pareto(cols: dict, R: int) -> dict:
    """Drop the rows another row with the same memory units and flags beats on both cost
    and chain (exact: a group-wise running minimum by doubling)."""
    key = (((cols["k"] * (R + 1) + cols["mp"]) * (R + 1) + cols["mq"]) * 2 + cols["out"]) * 2 + cols["into"]
    order = np.lexsort((cols["cost"], cols["chain"], key))
    key, cost = key[order], cols["cost"][order]
    run = cost.copy()
    shift = 1
    while shift < run.size:
        same = key[shift:] == key[:-shift]
        run[shift:] = np.where(same, np.minimum(run[shift:], run[:-shift]), run[shift:])
        shift *= 2
    keep = np.ones(run.size, dtype=bool)
    keep[1:] = ~((key[1:] == key[:-1]) & (run[:-1] <= cost[1:]))
    return {c: v[order][keep] for c, v in cols.items()}


def _crossing(comps: list[_Options], case: str, R: int, C: int, pays: tuple, keep: bool,
              pair: tuple | None = None) -> tuple:
    """The choices of a block that cross it: the least ``X(P)`` + chain + ``E(Q)`` + the
    transfers of ``a_{m-1}`` (``pays``: its ``c_out``, ``c_in``, whether an edge
    ``a_{m-1} -> a_m`` pays both) per middle pieces and memory units ``(k, P, Q)``, as a
    ``(C+1, R+1, R+1)`` table, and with ``keep`` the best choice of every cell (columns
    ``cost``, ``chain``, ``mp``, ``mq``, flags ``out``, ``into``, ``k`` and ``idx``, the option
    of every component; ``total``). ``case``: ``pp`` piece to piece, ``pc`` piece to CPU
    (``Q`` empty), ``cp`` (``P`` empty), ``cc`` (both). Middle pieces ``k``: their sum over
    the components (no piece holds nodes of two; the split gives each its own), or with
    ``pair`` (a piece holds nodes of components ``pair``, each with a piece) the most any
    component uses, with each of the pair's chains raised by the other's least part
    (module docstring)."""
    rows = {"cost": np.zeros(1), "chain": np.zeros(1), "mp": np.zeros(1, dtype=np.int64),
            "mq": np.zeros(1, dtype=np.int64), "out": np.zeros(1, dtype=np.int64),
            "into": np.zeros(1, dtype=np.int64), "idx": np.zeros((1, 0), dtype=np.int64),
            "k": np.zeros(1, dtype=np.int64)}
    if pair is not None:
        comps = [comps[pair[0]], comps[pair[1]]] + [o for j, o in enumerate(comps) if j not in pair]
    for i, o in enumerate(comps):
        sel = np.ones(o.exit.size, dtype=bool)
        if pair is not None and i < 2:
            sel &= o.pieces > 0
        if case in ("pc", "cc"):
            sel &= o.q_empty
        if case in ("cp", "cc"):
            sel &= o.p_empty
        cost = np.zeros(int(sel.sum()))
        if case in ("pp", "pc"):
            cost = cost + o.exit[sel]
        if case in ("pp", "cp"):
            cost = cost + o.entry[sel]
        cols = {"cost": cost, "chain": o.chain[sel], "mp": o.mp[sel], "mq": o.mq[sel],
                "out": o.out[sel].astype(np.int64), "into": o.into[sel].astype(np.int64), "idx": np.flatnonzero(sel),
                "k": o.pieces[sel]}
        ok = np.isfinite(cols["cost"]) & np.isfinite(cols["chain"])
        cols = {c: v[ok] for c, v in cols.items()}
        paired = pair is not None and i < 2
        part = o.part[sel][ok] if paired else None
        if not paired:
            cols = _pareto(cols, R)
        if rows["cost"].size * cols["cost"].size > MAX_PRODUCT:
            return None, None
        a, b = (x.ravel() for x in np.meshgrid(np.arange(rows["cost"].size), np.arange(cols["cost"].size),
                                                indexing="ij"))
        names = [c for c in rows if c != "idx" or keep]
        # middle pieces: a piece may hold nodes of several components, so the bound counts the
        # most any one component uses; the split gives every component its own
        prod = {c: (np.c_[rows[c][a], cols[c][b]] if c == "idx" else np.maximum(rows[c][a], cols[c][b])
                    if c == "chain" or (c == "k" and pair is not None) else rows[c][a] | cols[c][b]
                    if c in ("out", "into") else rows[c][a] + cols[c][b]) for c in names}
        if paired and i == 0:
            first_part = part[b]
        if paired and i == 1:
            # a piece holds parts of both: each one's path also passes the other's part
            prod["chain"] = np.maximum(prod["chain"], np.maximum(rows["chain"][a] + part[b],
                                                                  cols["chain"][b] + first_part[a]))
        fit = np.flatnonzero((prod["mp"] <= R) & (prod["mq"] <= R) & (prod["k"] <= C))
        rows = {c: v[fit] for c, v in prod.items()}
        if i < len(comps) - 1 and not (pair is not None and i == 0):
            rows = _pareto(rows, R)
    c_out, c_in, direct = pays
    pays_out = c_out if case in ("pp", "pc") else 0.0
    pays_in = c_in if case in ("pp", "cp") else 0.0
    # a_{m-1}'s transfers, once each; an edge a_{m-1} -> a_m pays both
    rows["total"] = rows["cost"] + rows["chain"] + pays_out * (rows["out"] | direct) + pays_in * (rows["into"] | direct)
    table = np.full((C + 1, R + 1, R + 1), _INF)
    cell = (rows["k"] * (R + 1) + rows["mp"]) * (R + 1) + rows["mq"]
    if not keep:
        np.minimum.at(table.reshape(-1), cell, rows["total"])
        return table, None
    order = np.lexsort((rows["total"], cell))                 # the best choice of every cell
    first = order[np.r_[True, cell[order][1:] != cell[order][:-1]]]
    rows = {c: v[first] for c, v in rows.items()}
    table.reshape(-1)[cell[first]] = rows["total"]
    return table, rows


def _block(d: ClosureData, nodes: np.ndarray, prev: int, nxt: int, unit: float, R: int, split: bool) -> dict | None:
    """The crossing tables of one block (:func:`_crossing`, per case; ``None``: a component
    is too large); the components by their number of choices, most first."""
    C = int(d.stretches)
    if nodes.size:
        sub = csr_matrix((np.ones(d.g.m), (d.g.src, d.g.dst)), shape=(d.g.n, d.g.n))[nodes][:, nodes]
        _, lab = connected_components(sub, directed=True, connection="weak")
        comps = [_Options(d, nodes[lab == c], prev, nxt, unit, split) for c in range(int(lab.max()) + 1)]
    else:
        comps = []
    if not all(o.ok for o in comps):
        return None
    comps.sort(key=lambda o: -o.exit.size)
    direct = prev >= 0 and nxt >= 0 and bool(((d.g.src == prev) & (d.g.dst == nxt)).any())
    pays = (float(d.c_out[prev]) if prev >= 0 else 0.0, float(d.c_in[prev]) if prev >= 0 else 0.0, direct)
    out = {"comps": comps}
    for case in ("pp", "pc", "cp", "cc"):
        out[case], out[case + "_rows"] = _crossing(comps, case, R, C, pays, split)
        if out[case] is None:
            return None
        for pair in ([] if split else [(x, y) for x in range(len(comps)) for y in range(x + 1, len(comps))]):
            t, _ = _crossing(comps, case, R, C, pays, False, pair)
            if t is None:
                return None
            out[case] = np.minimum(out[case], t)
    rnd = np.ceil if split else np.floor
    out["p"] = float(d.p_acc[nodes].sum())
    out["m"] = int(rnd(d.mem[nodes].sum() / unit)) if np.isfinite(d.p_acc[nodes]).all() else R + 1
    return out


def _relaxed(R: int, C: int) -> dict:
    """A block whose crossing costs nothing and needs no memory (a valid relaxation)."""
    t = np.full((C + 1, R + 1, R + 1), _INF)
    t[0, 0, 0] = 0.0
    return {"pp": t, "pc": t, "cp": t, "cc": t, "p": 0.0, "m": 0}
