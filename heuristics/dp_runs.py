"""The runs of the exact max-load DP's table (Tarnawski et al. Sec. 5.1.1): pushing the
sources in timed chunks, the bound-pruned threshold runs, and the lower bound of a table
cut short by the time limit. The recurrence itself is in :mod:`dnnplace.heuristics.dp_kernel`,
the bounds in :mod:`dnnplace.heuristics.dp_bounds`, the driver in
:mod:`dnnplace.heuristics.maxload_dp`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.heuristics.dp_bounds import knapsack_bound, state_caps
from dnnplace.heuristics.dp_kernel import ideal_sizes, new_tables, run_dp_pruned
from dnnplace.heuristics.dp_segments import cross_into
from dnnplace.heuristics.ideals import DPGraph, IdealLattice

__all__ = ["Prepared", "run_table", "threshold_runs", "reset_tables", "prefix_lower_bound", "FIRST_SHARE"]

FIRST_SHARE = 1 / 3
"""Share of the time left that :func:`threshold_runs` gives its first run, at the achievable value."""

POST_PASSES = 4
"""The runs stop this many passes over the lattice's covers (timed once) before the deadline:
the time :func:`prefix_lower_bound` of a table cut short takes after them."""

RISING_FIRST_STEPS = 4
"""When the bound is this few steps below the achievable value, :func:`threshold_runs`
starts with the rising runs (no first run)."""


@dataclass
class Prepared:
    """The DP graph, its ideals and the kernel's arrays (built by :func:`~dnnplace.heuristics.dp_prepare.prepare`)."""

    h: DPGraph
    lattice: IdealLattice
    arrays: dict[str, Any]


def run_table(prep: Prepared, ub: float, overlap: bool, deadline: float | None,
              tables: tuple[np.ndarray, ...] | None = None, rest: np.ndarray | None = None,
              caps: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Push the sources in chunks of about 0.25 s (by a budget of ideal pairs, adapted
    to the measured rate) until all are done or ``deadline`` (a ``perf_counter`` time)
    passes; with ``rest``/``caps`` the kernel skips sources that no split of max-load
    ``<= ub`` passes through (:mod:`dnnplace.heuristics.dp_bounds`). ``tables`` (from
    :func:`new_tables`) are reset and reused. Returns ``(dp, parent, kind, rep, pairs
    visited, sources done)``."""
    a, lat = prep.arrays, prep.lattice
    if tables is None:
        tables = new_tables(lat.size, a["k"], a["l"])
    else:
        reset_tables(tables)
    dp, parent, kind, rep, stamp = tables
    prune = rest is not None
    rest = np.zeros(1) if rest is None else rest
    caps = np.zeros((1, 1)) if caps is None else caps
    seg = a.get("seg")
    stop = a["stop"] if seg is not None else np.zeros(a["acc_c"].size, dtype=np.bool_)
    starts = seg["starts"] if seg is not None else np.array([0, lat.size], dtype=np.int64)
    visited, done, budget = 0, 0, 100_000
    t, chunk = time.perf_counter(), 0
    while done < lat.size - 1:
        hi = int(starts[np.searchsorted(starts, done, side="right")])  # the next block's first ideal
        pairs, done = run_dp_pruned(
            lat.size, lat.cover_ptr, lat.cover_node, lat.cover_to, a["acc_c"], a["acc_ok_node"], a["cpu_c"],
            a["cpu_ok_node"], a["mem"], a["mem_cap"], a["owner"], a["cost"], a["ntarget"], a["own_ptr"],
            a["own_term"], a["tgt_ptr"], a["tgt_term"], a["ideal_ok"], a["bmask"], a["desc"], a["anc"],
            a["check_bw"], a["k"], a["l"], float(ub), overlap, dp, parent, kind, rep, stamp, done, budget - chunk,
            a["wgt"], float(a.get("sync", 0.0)), int(a.get("rmax", 1)), prune, rest, caps, hi, stop)
        visited, chunk = visited + pairs, chunk + pairs
        if seg is not None and done == hi < lat.size:  # every source before the block is pushed
            _cross(seg, a, int(np.searchsorted(starts, hi)), float(ub), dp, parent, kind, rep, stamp)
        now = time.perf_counter()
        if chunk < budget and now - t < 0.25:  # a block border inside the chunk: go on
            continue
        if deadline is not None and now > deadline:
            break
        if chunk and now > t:
            budget = int(min(max(chunk * 0.25 / (now - t), 10_000), 1e9))
        t, chunk = now, 0
    return dp, parent, kind, rep, visited, done


def threshold_runs(prep: Prepared, lo: float, hi: float, overlap: bool, deadline: float | None,
                   step: float = 0.01, first_share: float | None = None) -> tuple[tuple, float, float, int, bool]:
    """The exact DP as a sequence of decisions "is the optimum at most ``T``?" for
    ``T = lo (1 + step)`` (``lo`` the bound proven so far) up to ``hi`` (an achievable max-load),
    each a run of the kernel that skips every source no split of max-load ``<= T``
    passes through (:mod:`dnnplace.heuristics.dp_bounds`). A run that ends with
    ``dp[-1] <= T`` holds the optimum (every split of max-load ``<= T`` was searched); one
    that ends above proves the optimum ``> T``, which becomes ``lo``. ``lo`` starts at the
    larger of the caller's bound and :func:`~dnnplace.heuristics.dp_bounds.knapsack_bound`.

    A first run at ``T = hi`` comes before them: it is the unpruned DP with the skips added,
    so it holds the optimum in one run wherever the plain DP would finish (on the Table 1
    graphs the rising runs from a far bound took 20x as long); only where it has not
    finished within ``first_share`` of the time left (default :data:`FIRST_SHARE`; ``0``: no
    first run) do the rising runs take the rest. Where the bound is at most
    :data:`RISING_FIRST_STEPS` steps below ``hi``, the rising runs come alone: the last one
    is at most one step above the optimum and the run at ``hi`` may cost far more (the
    cost of a run grows steeply with ``T``: results/dp-scale.md has a network proven optimal
    by rising runs alone and not within the limit with a first run at ``hi``).

    Returns ``(last run's :func:`run_table` tuple with the pairs of all runs, proven lower bound,
    last T, runs, whether a first run came)``; the last run stopped early when the deadline
    passed (less :data:`POST_PASSES` passes over the covers)."""
    a, lat = prep.arrays, prep.lattice
    acc_c = np.where(a["acc_ok_node"], a["acc_c"], 0.0)
    cpu_ok = a["cpu_ok_node"] & (a["l"] > 0)
    lo = max(lo, knapsack_bound(acc_c, a["cpu_c"], cpu_ok, a["k"], a["l"]))
    t_sizes = time.perf_counter()
    _, work = ideal_sizes(lat.cover_ptr, lat.cover_node, lat.cover_to, acc_c, lat.size)
    rest = acc_c.sum() - work
    if deadline is not None:  # leave the lower bound of a cut table its time (one such pass and the tables')
        deadline -= POST_PASSES * (time.perf_counter() - t_sizes)
    tables = new_tables(lat.size, a["k"], a["l"])
    share = FIRST_SHARE if first_share is None else first_share
    if lo > 0 and hi <= lo * (1 + step) ** RISING_FIRST_STEPS:
        share = 0.0
    visited, runs = 0, 0
    if share > 0:
        now = time.perf_counter()
        first = None if deadline is None else now + share * max(deadline - now, 0.0)
        out = run_table(prep, hi, overlap, first, tables, rest, state_caps(acc_c, a["cpu_c"], cpu_ok, a["k"], a["l"],
                                                                           hi))
        if out[5] >= lat.size - 1 or (deadline is not None and time.perf_counter() >= deadline):
            return out, lo, hi, 1, True
        visited, runs = out[4], 1
    while True:
        t = min(hi, lo * (1 + step)) if lo > 0 else hi
        caps = state_caps(acc_c, a["cpu_c"], cpu_ok, a["k"], a["l"], t)
        out = run_table(prep, t, overlap, deadline, tables, rest, caps)
        visited, runs = visited + out[4], runs + 1
        if out[5] < lat.size - 1 or out[0][-1, a["k"], a["l"]] <= t or t >= hi:
            return (*out[:4], visited, out[5]), lo, t, runs, share > 0
        lo = t


def _cross(seg: dict, a: dict, block: int, ub: float, dp, parent, kind, rep, stamp) -> None:
    """The stages into ``block`` from the pushed sources of earlier blocks
    (:func:`~dnnplace.heuristics.dp_segments.cross_into`); sources whose every stage into
    the block costs more than ``ub`` (by (**): ``F(J) - E(I)`` and the CPU time) are left out."""
    lo, hi = int(seg["starts"][block]), int(seg["starts"][block + 1])
    e, cpu = seg["E"][:lo], seg["cpu_i"][:lo]
    pushed = stamp[:lo] == np.arange(lo)
    reach = e >= seg["F"][lo:hi].min() - ub
    if a["l"] > 0:
        reach |= cpu >= seg["cpu_i"][lo:hi].min() - ub
    cand = np.flatnonzero(pushed & reach).astype(np.int64)
    cross_into(lo, hi, cand, seg["E"], seg["F"], seg["mem_i"], seg["cpu_i"], float(a["mem_cap"]), a["k"], a["l"],
               ub, dp, parent, kind, rep)


def reset_tables(tables: tuple[np.ndarray, ...]) -> None:
    """Back to :func:`new_tables`' state, in place."""
    dp, parent, kind, rep, stamp = tables
    dp.fill(np.inf)
    dp[0] = 0.0
    parent.fill(-1)
    kind.fill(0)
    rep.fill(1)
    stamp.fill(-1)


def prefix_lower_bound(prep: Prepared, dp: np.ndarray, done: int) -> float:
    """A lower bound on the optimum from a DP stopped after ``done`` sources.

    Ideals come in order of size, so every ideal of size at most ``L`` (the size of
    ideal ``done + 1`` less one) has its exact entries. On an optimal chain of ideals let
    ``I`` be the last one of size ``<= L``, split over ``a`` accelerators and ``b``
    CPUs: the optimum is at least ``dp[I][a][b]``; at least the load of the next stage,
    which holds ``>= L + 1 - |I|`` DP nodes (its work divided by the largest
    replication factor, Appendix C.2), so at least the sum ``P`` of that many
    smallest per-node minimum times, and at least the least work of an ideal of size
    ``L + 1`` less the work of ``I``; and at least the minimum work outside ``I``
    spread over the ``k + l - a - b`` devices left. The bound is the minimum of the
    largest of the three over all such ``(I, a, b)`` (entries above the pruning bound
    are never on an optimal chain, so their ``inf`` is harmless).
    """
    a, lat = prep.arrays, prep.lattice
    k, l = a["k"], a["l"]  # noqa: E741 (the paper's k, l)
    both = np.stack([np.where(a["acc_ok_node"] & (k > 0), a["acc_c"], np.inf),
                     np.where(a["cpu_ok_node"] & (l > 0), a["cpu_c"], np.inf)], axis=1)
    w = both.min(axis=1)
    if not np.isfinite(w).all():
        return float("inf")
    size, work = ideal_sizes(lat.cover_ptr, lat.cover_node, lat.cover_to, w, lat.size)
    cut = size[done + 1] - 1 if done + 1 < lat.size else lat.n_nodes
    m = int(np.searchsorted(size[: done + 1], cut, side="right"))  # ideals of size <= cut
    prefix = np.concatenate([[0.0], np.cumsum(np.sort(w))])
    # the next chain ideal J has size >= cut + 1, so work(J) >= the least work of an ideal
    # of size cut + 1 (work grows along inclusion), and the stage J \ I has work(J) - work(I)
    next_work = work[size == cut + 1].min(initial=np.inf) if cut + 1 <= lat.n_nodes else np.inf
    stage = np.maximum(prefix[np.clip(cut + 1 - size[:m], 0, w.size)], next_work - work[:m]) / a.get("rmax", 1)
    left = (k + l) - np.add.outer(np.arange(k + 1), np.arange(l + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = (w.sum() - work[:m])[:, None, None] / np.where(left > 0, left, np.nan)[None]
    cand = np.maximum(np.maximum(dp[:m], stage[:, None, None]), rest)
    cand[:, left <= 0] = np.inf
    return float(np.nan_to_num(cand, nan=np.inf).min(initial=np.inf))
