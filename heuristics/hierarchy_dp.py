r"""Max-load DP on a hierarchy of servers of GPUs, level by level (Tarnawski App. C.3).

Model: :mod:`dnnplace.graphs.hierarchy` (GPU loads as in the flat model, plus each
server's network interface ``net_s = rho * comm(S_s)``, ``S_s`` the nodes of server
``s``). The pipeline visits the servers one after another, so the servers hold
consecutive *blocks* ``J \ J'`` of a chain of ideals, and inside a block the GPUs hold
consecutive stages (PipeDream's hierarchical planner). Two levels:

- GPU level, for every pair of ideals ``J' <= J`` (the paper's ``O(I)`` factor: a DP
  rooted at every ideal ``J'``, :func:`dnnplace.heuristics.dp_kernel.run_dp` with
  ``dp[J'] = 0``)::

      inner[J'][J] = best max-load of J \ J' split over the G GPUs of one server

- server level::

      outer[s][J] = min_{J' <= J} max(outer[s-1][J'], inner[J'][J], rho * comm(J \ J'))

  with ``outer[0][{}] = 0``; the answer is ``outer[S][V]`` (servers may stay empty).

Exact for splits whose device quotient is acyclic and whose servers can be ordered
(the server quotient is acyclic too): a topological order of the servers with each
server's devices in a topological order inside it is a pipeline order with every
server's devices consecutive, and conversely. Time and memory grow with the square of
the number of ideals (``max_ideals``, default 3000): meant for layer graphs.

>>> from dnnplace.graphs import OpGraph
>>> from dnnplace.graphs.hierarchy import hierarchical_cluster
>>> from dnnplace.graphs.instance import Instance
>>> g = OpGraph(ids=range(4), kinds=("acc",), compute=[[4]] * 4, memory=[0] * 4, src=[0, 1, 2],
...             dst=[1, 2, 3], edge_cost=[1, 1, 1])
>>> res = hierarchical_dp(Instance(g, hierarchical_cluster((2, 2), inter_factor=2.0)))
>>> res.value  # one node per GPU: 4 + in 1 + out 1; the network between the servers: 2 * (1 + 1)
6.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.hierarchy import server_of
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.dp_kernel import new_tables, run_dp
from dnnplace.heuristics.dp_prepare import prepare
from dnnplace.heuristics.maxload_dp import maxload_dp

__all__ = ["HierarchyResult", "hierarchical_dp"]


@dataclass
class HierarchyResult:
    """The split (every server's GPUs in pipeline order), its max-load, the blocks."""

    placement: Placement | None
    value: float
    ideals: int
    blocks: list[tuple[int, int]]


def _inner_from(prep, root: int, g_count: int, ub: float):
    a, lat = prep.arrays, prep.lattice
    dp, parent, kind, rep, stamp = new_tables(lat.size, g_count, 0)
    dp[0] = np.inf
    dp[root] = 0.0
    run_dp(lat.size, lat.cover_ptr, lat.cover_node, lat.cover_to, a["acc_c"], a["acc_ok_node"], a["cpu_c"],
           a["cpu_ok_node"], a["mem"], a["mem_cap"], a["owner"], a["cost"], a["ntarget"], a["own_ptr"],
           a["own_term"], a["tgt_ptr"], a["tgt_term"], a["ideal_ok"], a["bmask"], a["desc"], a["anc"],
           a["check_bw"], g_count, 0, float(ub), False, dp, parent, kind, rep, stamp, root, 1 << 62,
           a["wgt"], 0.0, 1)
    return dp, parent


def _block_comm(prep, member: np.ndarray, root: int) -> np.ndarray:
    """``comm(J \\ root)`` for every ideal ``J`` (docs/semantics.md 2.2 transfers of the set, once
    per node and direction), and ``inf`` where ``root`` is not a subset of ``J``."""
    a = prep.arrays
    sub = ~(member[root][None, :] & ~member).any(axis=1)
    s = member & ~member[root][None, :]
    owner_in = s[:, a["owner"]]
    tgt = np.zeros((s.shape[1], a["owner"].size))
    for x in range(s.shape[1]):
        tgt[x, a["tgt_term"][a["tgt_ptr"][x]:a["tgt_ptr"][x + 1]]] = 1.0
    cnt = s.astype(float) @ tgt
    pays = (owner_in & (cnt < a["ntarget"][None, :])) | (~owner_in & (cnt > 0))
    out = pays.astype(float) @ a["cost"]
    out[~sub] = np.inf
    return out


def hierarchical_dp(inst: Instance, *, max_ideals: int = 3000) -> HierarchyResult:
    """Optimal split of ``inst`` over a hierarchical cluster (see the module docstring)."""
    cl = inst.require_cluster()
    srv = server_of(cl)
    if srv is None:
        raise InputError("hierarchical_dp needs a cluster with a hierarchy (graphs.hierarchy.hierarchical_cluster)")
    if any(k == "cpu" for k in cl.kinds):
        raise InputError("hierarchical_dp places on GPUs only; the hierarchy has CPU devices")
    servers = [list(s) for s in cl.meta["hierarchy"]["servers"]]
    if any(not s for s in servers):
        raise InputError("hierarchy: a server without GPUs (empty level)")
    g_count = len(servers[0])
    if any(len(s) != g_count for s in servers):
        raise InputError("hierarchical_dp needs servers with the same number of GPUs")
    rho = float(cl.meta["hierarchy"]["inter_factor"])
    one = Cluster.tarnawski(g_count, 0, float(cl.memory[servers[0][0]]), acc_kind=cl.kinds[0])
    prep = prepare(Instance(inst.graph, one, inst.source), linear=False, max_ideals=max_ideals)
    lat = prep.lattice
    n_i = lat.size
    member = np.unpackbits(lat.member.view(np.uint8), axis=1, bitorder="little")[:, :lat.n_nodes].astype(bool)
    # an achievable value: the flat DP over all GPUs, stages in chain order = servers consecutive
    flat = maxload_dp(Instance(inst.graph, Cluster.tarnawski(cl.size, 0, float(cl.memory[0]),
                                                               acc_kind=cl.kinds[0]), inst.source))
    ub = np.inf
    if flat.placement is not None:
        ub = maxload(Placement(inst.graph, cl, flat.placement.device), contiguity="both").objective
    ub_slack = ub * (1 + 1e-9) + 1e-12 if np.isfinite(ub) else np.inf
    inner = np.full((n_i, n_i), np.inf)
    net = np.full((n_i, n_i), np.inf)
    for r in range(n_i):
        dp, _ = _inner_from(prep, r, g_count, ub_slack)
        inner[r] = dp[:, g_count, 0]
        net[r] = rho * _block_comm(prep, member, r)
    outer = np.full((len(servers) + 1, n_i), np.inf)
    arg = np.zeros((len(servers) + 1, n_i), dtype=np.int64)
    outer[0, 0] = 0.0
    for s in range(1, len(servers) + 1):
        cand = np.maximum(np.maximum(outer[s - 1][:, None], inner), net)  # (root, J)
        arg[s] = cand.argmin(axis=0)
        outer[s] = cand[arg[s], np.arange(n_i)]
    value = float(outer[-1, -1])
    if not np.isfinite(value):
        return HierarchyResult(None, value, n_i, [])
    # decode: blocks from the last server back, then each block's GPU chain
    blocks, j = [], n_i - 1
    for s in range(len(servers), 0, -1):
        r = int(arg[s, j])
        blocks.append((r, j))
        j = r
    blocks.reverse()
    dev_of_dp = np.full(prep.h.n, -1, dtype=np.int64)
    for (r, j), gpus in zip(blocks, servers):
        _, parent = _inner_from(prep, r, g_count, ub_slack)
        cur, kk, gi = j, g_count, 0
        while cur != r:
            prev = int(parent[cur, kk, 0])
            nodes = np.flatnonzero(member[cur] & ~member[prev])
            dev_of_dp[nodes] = gpus[gi]
            gi += 1
            kk -= 1
            cur = prev
    return HierarchyResult(Placement(inst.graph, cl, dev_of_dp[prep.h.group]), value, n_i, blocks)
