"""The inputs of the exact max-load DP and of DPL (Tarnawski et al. Sec. 5.1, App. B): the
preprocessed DP graph, its ideal lattice and the arrays the kernels read
(:func:`prepare`), built once per run by :func:`dnnplace.heuristics.maxload_dp.maxload_dp`
(and per server level by :mod:`dnnplace.heuristics.hierarchy_dp`).

Per DP node: accelerator and CPU compute, whether each kind can run it, memory and
replication weight. Per *transfer term* (an original node with an out-edge to another DP
node): its owner DP node, its cost ``c_u`` and the DP nodes it reaches, indexed both ways,
so the kernel adds a term to a device's load once per node and direction. Where the DP
graph has narrow cut nodes, the per-ideal arrays of the cross-cut queries
(:mod:`dnnplace.heuristics.dp_segments`).
"""

from __future__ import annotations

import time

import numpy as np

from dnnplace.graphs.instance import Instance
from dnnplace.graphs.replication import node_weights
from dnnplace.heuristics.dp_backward import backward_contiguity
from dnnplace.heuristics.dp_memory import bytes_per_ideal
from dnnplace.heuristics.dp_runs import Prepared
from dnnplace.heuristics.dp_segments import narrow_cuts, segment_arrays
from dnnplace.heuristics.ideals import TooManyIdeals, build_dp_graph, enumerate_ideals, linearize
from dnnplace.heuristics.transfer_costs import dp_devices, node_transfer_cost
from dnnplace.runtime.memory import stop_requested
from dnnplace.runtime.termination import Termination

__all__ = ["prepare", "SMALL_LATTICE"]


def prepare(inst: Instance, *, linear: bool, trivial: bool = True, max_ideals: int = 6_000_000,
             deadline: float | None = None, segments: bool = True, max_bytes: float | None = None,
             order: str = "dfs") -> Prepared:
    """The DP graph ``H`` of ``inst`` (Appendix B), its ideals (with ``linear``: those of DPL's
    path of the topological order ``order``, Sec. 5.1.2) and the kernel's per-node and
    per-transfer-term arrays, plus the cross-cut arrays where ``segments`` apply; raises
    :class:`~dnnplace.heuristics.ideals.TooManyIdeals` past ``max_ideals``, ``max_bytes`` or
    ``deadline``."""
    g, cl = inst.graph, inst.require_cluster()
    accs, cpus = dp_devices(cl)
    h = build_dp_graph(g, trivial=trivial)
    grp = h.group
    comp = cl.compute_matrix(g)
    acc_t = comp[:, accs[0]] if accs.size else np.full(g.n, np.nan)
    cpu_t = comp[:, cpus[0]] if cpus.size else np.full(g.n, np.nan)
    acc_ok = np.bincount(grp, weights=np.isnan(acc_t).astype(float), minlength=h.n) == 0
    cpu_ok = np.bincount(grp, weights=np.isnan(cpu_t).astype(float), minlength=h.n) == 0
    acc_c = np.bincount(grp, weights=np.nan_to_num(acc_t), minlength=h.n)
    cpu_c = np.bincount(grp, weights=np.nan_to_num(cpu_t), minlength=h.n)
    mem = np.bincount(grp, weights=g.memory, minlength=h.n)
    wgt = np.bincount(grp, weights=node_weights(g), minlength=h.n)
    # one transfer term per original node with an out-edge to another DP node
    c = node_transfer_cost(g, cl)
    gs, gd = grp[g.src], grp[g.dst]
    cross = gs != gd
    pairs = np.unique(np.stack([g.src[cross], gd[cross]], axis=1), axis=0) if cross.any() \
        else np.empty((0, 2), np.int64)
    owners_u, term_of = np.unique(pairs[:, 0], return_inverse=True)
    owner = grp[owners_u].astype(np.int64)
    cost = c[owners_u]
    ntarget = np.bincount(term_of, minlength=owners_u.size).astype(np.int64)
    own_order = np.argsort(owner, kind="stable")
    own_ptr = np.zeros(h.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=h.n), out=own_ptr[1:])
    src, dst = h.src, h.dst
    if linear:   # DPL: the path of a topological order, the narrow one weighing each DP node by its transfers
        ps, pd = linearize(h.n, src, dst, order, np.bincount(owner, weights=cost, minlength=h.n))
        src, dst = np.concatenate([src, ps]), np.concatenate([dst, pd])
    lattice = enumerate_ideals(h.n, src, dst, max_ideals=max_ideals, deadline=deadline, max_bytes=max_bytes,
                               bytes_per_ideal=bytes_per_ideal(g, int(accs.size), int(cpus.size)))
    _check(deadline, lattice.size, "the ideals' arrays")
    tgt = pairs[:, 1]
    tgt_order = np.argsort(tgt, kind="stable")
    tgt_ptr = np.zeros(h.n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tgt, minlength=h.n), out=tgt_ptr[1:])
    arrays = dict(acc_c=acc_c, acc_ok_node=acc_ok, cpu_c=cpu_c, cpu_ok_node=cpu_ok, mem=mem, wgt=wgt,
                  mem_cap=float(cl.memory[accs[0]]) if accs.size else 0.0,
                  owner=owner, cost=cost, ntarget=ntarget, own_ptr=own_ptr, own_term=own_order.astype(np.int64),
                  tgt_ptr=tgt_ptr, tgt_term=term_of[tgt_order].astype(np.int64),
                  **backward_contiguity(g, grp, h.n, lattice),
                  k=int(accs.size), l=int(cpus.size), accs=accs, cpus=cpus)
    if segments and not linear:
        _check(deadline, lattice.size, "the backward-contiguity sets")
        arrays.update(_blocks(h, lattice, arrays, pairs, term_of))
    return Prepared(h, lattice, arrays)


SMALL_LATTICE = 1 << 16
"""A lattice of at most this many ideals goes through each phase in milliseconds: past the
deadline, it still goes on to the table's first chunk (as a time limit of 0 does)."""


def _check(deadline: float | None, count: int, before: str) -> None:
    """Past ``deadline`` (a ``perf_counter`` time), or past the run's memory limit (the watchdog's
    stop, :func:`~dnnplace.runtime.memory.stop_requested`): stop the preparation of a lattice of
    ``count`` ideals (more than :data:`SMALL_LATTICE`) before ``before``."""
    if count <= SMALL_LATTICE:
        return
    if stop_requested():
        raise TooManyIdeals(f"memory limit before {before} ({count} ideals); use DPL instead", count=count,
                            reason=Termination.MEMORY_LIMIT)
    if deadline is not None and time.perf_counter() > deadline:
        raise TooManyIdeals(f"time limit before {before} ({count} ideals); use DPL instead", count=count,
                            reason=Termination.TIME_LIMIT)


def _blocks(h, lattice, arrays: dict, pairs: np.ndarray, term_of: np.ndarray) -> dict:
    """The cut nodes of the DP graph and the per-ideal arrays of the cross-block queries
    (:mod:`dnnplace.heuristics.dp_segments`), or nothing where the conditions fail.
    ``pairs``: (original node, target DP node) of every transfer term's edge, ``term_of``
    its term."""
    if arrays["check_bw"] or not arrays["acc_ok_node"].all() \
            or (arrays["l"] > 0 and not arrays["cpu_ok_node"].all()):
        return {}
    cut = narrow_cuts(h.n, h.src, h.dst, also=np.stack([arrays["owner"][term_of], pairs[:, 1]], axis=1))
    if cut is None:
        return {}
    term_ptr = np.zeros(arrays["ntarget"].size + 1, dtype=np.int64)
    np.cumsum(arrays["ntarget"], out=term_ptr[1:])
    by_term = np.argsort(term_of, kind="stable")
    seg = segment_arrays(cut, lattice, {**arrays, "term_ptr": term_ptr,
                                        "term_node": pairs[by_term, 1].astype(np.int64)})
    return {"seg": seg, "stop": cut}
