"""Other max-load optimal splits from a finished table of the exact DP (Tarnawski et al.
Sec. 5.1.1): how ties between optimal predecessors are broken.

The recurrence takes a minimum, and max-load optima are rarely unique: at a state ``(J, a, b)``
(ideal ``J`` on ``a`` accelerators and ``b`` CPUs, value ``v = dp[J][a][b]``) every ideal
``I' < J`` with ``max(dp[I'][a-1][b], acc(J \\ I')) = v`` (or the CPU analogue) is an argmin.
The kernel (:mod:`dnnplace.heuristics.dp_kernel`) keeps the first source in ideal order that
reaches the minimum; another implementation of the same DP may keep another one, and the
split it decodes then has the same max-load but, scored for latency (Table 4), another
latency. :func:`tied_splits` decodes the table again by other rules:

- ``earliest``: the tied predecessor of smallest ideal index (ideals are indexed by size, so
  the earliest cut: the largest last stage). This is the kernel's own choice where sums are
  exact (integer costs) and the stages across the cuts of :mod:`dnnplace.heuristics.dp_segments`
  are off (``segments=False``; those come from sorted queries in another order); otherwise the
  two may differ in ties that only rounding separates;
- ``latest``: the one of largest index (the latest cut);
- ``random:SEED``: one drawn uniformly at each state (``numpy.random.default_rng(SEED)``);
- ``uniform:SEED``: a chain drawn uniformly from all tied chains (each predecessor with the
  share of the chains through it, counted by :func:`chain_count`'s recursion), where
  ``random`` favours states with few predecessors.

By default the ties are those of the DP (the argmins of each state, as any tie-break of the
recurrence returns them). Prefixed ``any-`` (``any-random:3``), a predecessor only needs
every stage at most the optimum: every max-load optimal split with nonempty stages is then
reachable, including those no argmin rule returns.

Loads are those of the kernel (docs/semantics.md 2.2): an accelerator stage's compute plus
its transfers (or their maximum, ``overlap``), infinite past the memory or on a node the
accelerator cannot run; a CPU stage's compute. Training graphs (backward contiguity, Sec. 5.3)
and replicated stages are not handled.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dnnplace.graphs.errors import InputError
from dnnplace.heuristics.dp_kernel import ideal_sizes

__all__ = ["tied_splits", "chain_count", "parse_rule", "TOL"]

TOL = 1e-9
"""Relative tolerance of a tie: the table's sums and these differ in rounding only."""


def parse_rule(rule: str) -> tuple[bool, str, int | None]:
    """``(any optimal split, earliest|latest|random, seed)`` of a rule name; ``InputError`` if none.

    >>> parse_rule("any-random:3")
    (True, 'random', 3)
    """
    anyopt = rule.startswith("any-")
    base, _, seed = rule.removeprefix("any-").partition(":")
    if base in ("earliest", "latest") and not seed:
        return anyopt, base, None
    if base in ("random", "uniform") and seed.isdigit():
        return anyopt, base, int(seed)
    raise InputError(f"unknown tie-break {rule!r}; use first, earliest, latest, random:SEED or uniform:SEED, "
                     "each but first optionally prefixed any-")


class _Stages:
    """Per-ideal sums and the loads of ``J \\ I`` for sub-ideals ``I`` of ``J``."""

    def __init__(self, prep, overlap: bool):
        a, lat = prep.arrays, prep.lattice
        self.a, self.lat, self.overlap = a, lat, overlap
        cp, cn, ct = lat.cover_ptr, lat.cover_node, lat.cover_to

        def total(w):
            return ideal_sizes(cp, cn, ct, np.ascontiguousarray(w, dtype=np.float64), lat.size)[1]

        self.acc, self.cpu, self.mem = total(a["acc_c"]), total(a["cpu_c"]), total(a["mem"])
        self.acc_bad, self.cpu_bad = total(~a["acc_ok_node"]), total(~a["cpu_ok_node"])
        n_terms = a["ntarget"].size
        rows = np.repeat(np.arange(lat.n_nodes), np.diff(a["tgt_ptr"]))
        self.targets = sp.csr_matrix((np.ones(rows.size), (rows, a["tgt_term"])), shape=(lat.n_nodes, n_terms))

    def _comm(self, sets: np.ndarray) -> np.ndarray:
        """Transfer time of each row's set (bitset words) of DP nodes."""
        n = self.lat.n_nodes
        s = np.unpackbits(np.ascontiguousarray(sets).view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)
        cnt = np.asarray(self.targets.T.dot(s.T.astype(np.float64))).T  # targets of each term inside the set
        own = s[:, self.a["owner"]]
        paid = (own & (cnt < self.a["ntarget"])) | (~own & (cnt > 0))
        return paid.astype(np.float64) @ self.a["cost"]

    def predecessors(self, dp: np.ndarray, j: int, acc_n: int, cpu_n: int, cap: float) -> list[tuple[int, int]]:
        """``(I, kind)`` (0 accelerator, 1 CPU) for every proper sub-ideal ``I`` of ``j`` whose
        last stage ``J \\ I`` on a device of that kind, and whose prefix on the devices left,
        both stay within ``cap``, in order of ``I``."""
        member = self.lat.member
        sub = np.flatnonzero(~(member & ~member[j]).any(axis=1))
        sub = sub[sub != j]
        out: list[tuple[int, int]] = []
        if acc_n > 0:
            c = sub[(dp[sub, acc_n - 1, cpu_n] <= cap) & (self.acc_bad[j] - self.acc_bad[sub] < 0.5)
                    & (self.mem[j] - self.mem[sub] <= self.a["mem_cap"]) & (self.acc[j] - self.acc[sub] <= cap)]
            if c.size:
                comm = self._comm(member[c] ^ member[j])
                work = self.acc[j] - self.acc[c]
                load = np.maximum(work, comm) if self.overlap else work + comm
                out += [(int(i), 0) for i in c[load <= cap]]
        if cpu_n > 0:
            c = sub[(dp[sub, acc_n, cpu_n - 1] <= cap) & (self.cpu_bad[j] - self.cpu_bad[sub] < 0.5)
                    & (self.cpu[j] - self.cpu[sub] <= cap)]
            out += [(int(i), 1) for i in c]
        return sorted(out)


class _Ties:
    """The tied predecessors of the states of a finished table, and the number of tied chains
    from each state down to the empty ideal, both memoised."""

    def __init__(self, prep, dp: np.ndarray, overlap: bool):
        a = prep.arrays
        if a["check_bw"] or a.get("rmax", 1) > 1:
            raise InputError("tie-breaks of the max-load DP are for inference graphs without replicated stages")
        self.opt = float(dp[-1, a["k"], a["l"]])
        if not np.isfinite(self.opt):
            raise ValueError("the DP table has no finite optimum")
        self.dp, self.stages = dp, _Stages(prep, overlap)
        self.preds: dict[tuple[int, int, int, bool], list[tuple[int, int]]] = {}
        self.counts: dict[tuple[int, int, int, bool], int] = {}

    def of(self, j: int, kk: int, ll: int, anyopt: bool) -> list[tuple[int, int]]:
        key = (j, kk, ll, anyopt)
        if key not in self.preds:
            v = self.opt if anyopt else float(self.dp[j, kk, ll])
            self.preds[key] = self.stages.predecessors(self.dp, j, kk, ll, v * (1 + TOL) + 1e-12)
        return self.preds[key]

    @staticmethod
    def after(kk: int, ll: int, kind: int) -> tuple[int, int]:
        return (kk - 1, ll) if kind == 0 else (kk, ll - 1)

    def count(self, j: int, kk: int, ll: int, anyopt: bool) -> int:
        """Tied chains from state ``(j, kk, ll)`` to the empty ideal (each step uses a device,
        so the recursion is at most ``k + l`` deep)."""
        if j == 0:
            return 1
        key = (j, kk, ll, anyopt)
        if key not in self.counts:
            self.counts[key] = sum(self.count(i, *self.after(kk, ll, kind), anyopt) for i, kind in
                                   self.of(j, kk, ll, anyopt))
        return self.counts[key]


def chain_count(prep, dp: np.ndarray, *, any_optimal: bool = False, overlap: bool = False) -> int:
    """How many chains of ideals the finished table ``dp`` decodes into by some tie-break (with
    ``any_optimal``: every chain of nonempty stages within the optimum); each is a split, up to
    which accelerator (CPU) takes which stage."""
    a = prep.arrays
    return _Ties(prep, dp, overlap).count(prep.lattice.size - 1, a["k"], a["l"], any_optimal)


def tied_splits(prep, dp: np.ndarray, rules: list[str], *, overlap: bool = False
                ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The split each rule decodes from the finished table ``dp`` (see the module docstring):
    rule -> device of every DP node (accelerators ``accs[0], accs[1], ...`` from the last
    stage back, as the kernel's decoding); and, for each scope (``argmin``, ``any``) a
    ``uniform`` rule drew from, its number of chains (:func:`chain_count`). ``InputError`` for
    a training graph, replicated stages or an unknown rule; ``ValueError`` if the table holds
    no finite optimum."""
    a, lat = prep.arrays, prep.lattice
    parsed = {r: parse_rule(r) for r in rules}
    ties = _Ties(prep, dp, overlap)
    out = {}
    for rule, (anyopt, base, seed) in parsed.items():
        rng = np.random.default_rng(seed) if seed is not None else None
        dev = np.full(lat.n_nodes, -1, dtype=np.int64)
        cur, kk, ll, ia, ic = lat.size - 1, a["k"], a["l"], 0, 0
        while cur != 0:
            cands = ties.of(cur, kk, ll, anyopt)
            if not cands:
                raise RuntimeError(f"no tied predecessor of ideal {cur} on ({kk}, {ll}) devices")
            if base == "uniform":
                cs = [ties.count(i, *ties.after(kk, ll, kind), anyopt) for i, kind in cands]
                p = np.array([c / sum(cs) for c in cs])  # Python's int division: exact shares of big counts
                pick = cands[int(rng.choice(len(cands), p=p / p.sum()))]
            else:
                pick = cands[0] if base == "earliest" else cands[-1] if base == "latest" \
                    else cands[int(rng.integers(len(cands)))]
            prev, kind = pick
            nodes = np.setdiff1d(lat.nodes(cur), lat.nodes(prev))
            if kind == 0:
                dev[nodes], ia = a["accs"][ia], ia + 1
            else:
                dev[nodes], ic = a["cpus"][ic], ic + 1
            kk, ll = ties.after(kk, ll, kind)
            cur = prev
        out[rule] = dev
    chains = {("any" if anyopt else "argmin"): ties.count(lat.size - 1, a["k"], a["l"], anyopt)
              for anyopt, base, _ in parsed.values() if base == "uniform"}
    return out, chains
