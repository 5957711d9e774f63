"""Compiled breadth-first enumeration of the ideals of a DAG (the lattice the max-load DP
of Tarnawski et al. Sec. 5.1.1 runs over).

Every ideal ``J`` other than the empty set is ``I + {x}`` for an ideal ``I`` and a node
``x`` outside ``I`` whose predecessors all lie in ``I`` (``x`` is *addable* to ``I``).
Processing the ideals in the order they are found (breadth-first, so by size) and adding
every addable node to each yields every ideal once, in order of size, with its cover
relation. The addable nodes of ``J = I + {x}`` are those of ``I`` other than ``x`` plus the
successors of ``x`` whose predecessors all lie in ``J``; they are written when ``J`` is
found, in the order of ``J``'s index, so they *are* ``J``'s slice of ``cover_node``
(``cover_ptr`` grows with the ideals) and ``cover_to`` is filled in when ``J`` is
processed. Ideals are ``words`` 64-bit words of bits, found again through an open-addressing
hash table of their indices; the arrays grow by doubling between calls of the kernel, so
the caller can also check its deadline there (:func:`dnnplace.heuristics.ideals.enumerate_ideals`).
"""

from __future__ import annotations

import numpy as np

from dnnplace.heuristics.jit import cached_njit

__all__ = ["LatticeBuffers", "grow", "grown_nbytes", "bfs_chunk", "rehash"]

@cached_njit
def _slot(member, j, table, mask):
    """First slot of ideal row ``j``'s hash in ``table``."""
    h = np.uint64(0)
    for w in range(member.shape[1]):
        h = (h ^ member[j, w]) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@cached_njit
def rehash(member, count, table):
    """Fill the empty ``table`` (-1 everywhere, size a power of 2) with ideals ``0..count-1``."""
    mask = table.shape[0] - 1
    for j in range(count):
        s = _slot(member, j, table, mask)
        while table[s] >= 0:
            s = (s + 1) & mask
        table[s] = j


@cached_njit
def bfs_chunk(head, count, member, ptr, cover_node, cover_to, table, pred, succ_ptr, succ_idx, max_heads):
    """Process ideals ``head, head+1, ...`` (found: ``count``) until all are processed,
    ``max_heads`` were, or the next one might overflow an array (room for ``n`` new ideals
    and ``n*n`` new covers, the table at most half full). Returns ``(head, count)``."""
    n = pred.shape[0]
    words = member.shape[1]
    mask = table.shape[0] - 1
    done = 0
    while head < count and done < max_heads:
        if count + n + 1 > member.shape[0] or ptr[count] + n * n > cover_node.shape[0] \
                or 2 * (count + n) > table.shape[0]:
            break
        for p in range(ptr[head], ptr[head + 1]):
            x = cover_node[p]
            xw, xb = x >> 6, np.uint64(1) << np.uint64(x & 63)
            j = count  # candidate row: the new ideal written in place, kept only if new
            for w in range(words):
                member[j, w] = member[head, w]
            member[j, xw] |= xb
            s = _slot(member, j, table, mask)
            found = -1
            while table[s] >= 0:
                t = table[s]
                same = True
                for w in range(words):
                    if member[t, w] != member[j, w]:
                        same = False
                        break
                if same:
                    found = t
                    break
                s = (s + 1) & mask
            if found < 0:
                table[s] = j
                q = ptr[j]
                for p2 in range(ptr[head], ptr[head + 1]):
                    y = cover_node[p2]
                    if y != x:
                        cover_node[q] = y
                        q += 1
                for e in range(succ_ptr[x], succ_ptr[x + 1]):
                    y = succ_idx[e]
                    ok = True
                    for w in range(words):
                        if pred[y, w] & ~member[j, w]:
                            ok = False
                            break
                    if ok:
                        cover_node[q] = y
                        q += 1
                ptr[j + 1] = q
                count += 1
                found = j
            cover_to[p] = found
        head += 1
        done += 1
    return head, count


class LatticeBuffers:
    """The growing arrays of one enumeration: ideal bitsets, cover CSR, hash table."""

    def __init__(self, n: int, src: np.ndarray, dst: np.ndarray, capacity: int = 1 << 16):
        self.n, self.words = n, max(1, (n + 63) // 64)
        pairs = np.unique(np.stack([src, dst], axis=1), axis=0) if src.size else np.empty((0, 2), np.int64)
        self.pred = np.zeros((n, self.words), dtype=np.uint64)
        for a, b in pairs.tolist():
            self.pred[b, a >> 6] |= np.uint64(1) << np.uint64(a & 63)
        self.succ_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(pairs[:, 0], minlength=n), out=self.succ_ptr[1:])
        self.succ_idx = pairs[:, 1].astype(np.int64).copy()  # sorted by source: unique() sorts
        cap = max(capacity, 2 * n + 2)
        self.member = np.zeros((cap, self.words), dtype=np.uint64)
        self.ptr = np.zeros(cap + 1, dtype=np.int64)
        self.cover_node = np.zeros(max(4 * cap, n * n + n + 1), dtype=np.int64)
        self.cover_to = np.full(self.cover_node.size, -1, dtype=np.int64)
        self.table = np.full(_pow2(2 * cap), -1, dtype=np.int64)
        sources = np.flatnonzero(~self.pred.any(axis=1))
        self.cover_node[: sources.size] = sources
        self.ptr[1] = sources.size
        self.head, self.count = 0, 1
        rehash(self.member, self.count, self.table)

    def step(self, max_heads: int) -> bool:
        """Process up to ``max_heads`` ideals, growing the arrays first where needed;
        ``True`` when every ideal is processed."""
        grow(self)
        self.head, self.count = bfs_chunk(self.head, self.count, self.member, self.ptr, self.cover_node,
                                          self.cover_to, self.table, self.pred, self.succ_ptr, self.succ_idx,
                                          max_heads)
        return self.head >= self.count


def _pow2(x: int) -> int:
    return 1 << max(4, int(x - 1).bit_length())


def _grown(buf: LatticeBuffers) -> tuple[int, int]:
    """``(ideal rows, cover entries)`` the arrays will have after :func:`grow`."""
    n, cap, size = buf.n, buf.member.shape[0], buf.cover_node.size
    if buf.count + n + 1 > cap or 2 * (buf.count + n) > buf.table.size:
        cap *= 2
    if buf.ptr[buf.count] + n * n > size:
        size *= 2
    return cap, size


def grown_nbytes(buf: LatticeBuffers) -> int:
    """Bytes the arrays will hold after :func:`grow` (the next chunk's memory), before it runs."""
    cap, size = _grown(buf)
    return cap * (8 * buf.words + 8) + _pow2(2 * cap) * 8 + size * 16 + buf.pred.nbytes


def grow(buf: LatticeBuffers) -> None:
    """Double what the next chunk might overflow (see :func:`bfs_chunk`). The new parts are
    left uninitialised (every entry is written before it is read), so growing touches only
    the pages copied, not the whole new array."""
    cap, size = _grown(buf)
    if cap > buf.member.shape[0]:
        buf.member = _extended(buf.member, cap)
        buf.ptr = _extended(buf.ptr, cap + 1)
        buf.table = np.full(_pow2(2 * cap), -1, dtype=np.int64)
        rehash(buf.member, buf.count, buf.table)
    if size > buf.cover_node.size:
        buf.cover_node = _extended(buf.cover_node, size)
        buf.cover_to = _extended(buf.cover_to, size)


def _extended(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` with ``rows`` rows, the first ``len(a)`` copied and the rest uninitialised."""
    out = np.empty((rows, *a.shape[1:]), dtype=a.dtype)
    out[: a.shape[0]] = a
    return out
