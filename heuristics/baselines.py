"""Simple baselines that make the pipeline real end to end.

- ``single``: everything on one accelerator (unsupported nodes on the first CPU).
- ``greedy``: Tarnawski et al. Sec. 7: contract colocation classes and the strongly
  connected components that arise (Appendix B), fix a topological order, fill each
  accelerator in turn with as many nodes as fit in its memory, the rest on the CPU.
- ``expert``: a given split file (``params["split"]``), or the bundled human-expert
  split of a Tarnawski workload (training graphs fall back to the inference split,
  extended to backward nodes through ``colorClass``).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.contract import acyclic_labels, colocation_labels, quotient
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.orders import topological_order
from dnnplace.graphs.placement import Placement

__all__ = ["single_device", "greedy_fill", "latency_starts"]



def _accelerators(cluster: Cluster) -> np.ndarray:
    return np.array([i for i, k in enumerate(cluster.kinds) if k != "cpu"], dtype=np.int64)


def _fallback(graph: OpGraph, cluster: Cluster) -> int:
    """First CPU device, or an error if there is none."""
    cpus = cluster.devices_of_kind("cpu")
    if cpus.size == 0:
        raise InputError(f"cluster {cluster.name!r} has no CPU device for nodes that do not fit or run elsewhere")
    return int(cpus[0])


def single_device(graph: OpGraph, cluster: Cluster) -> Placement:
    """All nodes on the first accelerator; nodes it cannot run go to the first CPU.

    >>> from dnnplace.graphs import OpGraph, Cluster
    >>> g = OpGraph(ids=[0, 1], kinds=("acc", "cpu"), compute=[[1, 2], [float("nan"), 3]],
    ...             memory=[0, 0], src=[0], dst=[1])
    >>> single_device(g, Cluster.tarnawski(2, 1, 10)).to_mapping()
    {'0': 'acc0', '1': 'cpu0'}
    """
    accs = _accelerators(cluster)
    if accs.size == 0:
        return Placement(graph, cluster, np.zeros(graph.n, dtype=np.int64))
    dev = np.full(graph.n, accs[0], dtype=np.int64)
    unsupported = np.isnan(cluster.compute_matrix(graph)[:, accs[0]])
    if unsupported.any():
        dev[unsupported] = _fallback(graph, cluster)
    return Placement(graph, cluster, dev)


def greedy_fill(graph: OpGraph, cluster: Cluster, *, order: str = "dfs") -> Placement:
    """Tarnawski Sec. 7 greedy: fill accelerators along a topological order of the
    colocation-contracted graph, each up to its memory; the rest goes to the CPU.

    ``order`` names the topological order (:mod:`dnnplace.graphs.orders`); the paper does not say
    which one it fixes, and the latencies of Table 4 depend on it (see the README).
    A contracted node that an accelerator cannot run is skipped there (it goes to the
    CPU); when the next node does not fit, the next accelerator starts.
    """
    labels = acyclic_labels(graph, colocation_labels(graph))
    coarse = quotient(graph, labels)
    mem = coarse.memory
    comp = cluster.compute_matrix(graph)
    accs = _accelerators(cluster)
    group_dev = np.full(coarse.n, -1, dtype=np.int64)
    a = 0
    used = 0.0
    for grp in topological_order(coarse, order).tolist():
        while a < accs.size and used + mem[grp] > cluster.memory[accs[a]]:
            a, used = a + 1, 0.0
        if a >= accs.size:
            break
        members = labels == grp
        if np.isnan(comp[members, accs[a]]).any():
            continue
        group_dev[grp] = accs[a]
        used += mem[grp]
    dev = group_dev[labels]
    if (dev < 0).any():
        dev[dev < 0] = _fallback(graph, cluster)
    return Placement(graph, cluster, dev)


def latency_starts(inst: Instance, *, dp: bool = False) -> list[tuple[str, Placement]]:
    """The standard starting splits for latency, as ``(name, placement)``: greedy (Sec. 7),
    with ``dp`` the max-load DP's optimal split, and the all-CPU split; a start the
    instance does not admit (e.g. greedy with nowhere to put a node) is left out."""
    from dnnplace.heuristics.maxload_dp import maxload_dp

    g, cl = inst.graph, inst.require_cluster()
    out = []
    try:
        out.append(("greedy", greedy_fill(g, cl)))
    except InputError:
        pass
    if dp:
        try:
            res = maxload_dp(inst)
            if res.placement is not None:
                out.append(("dp", res.placement))
        except InputError:
            pass
    cpus = cl.devices_of_kind("cpu")
    if cpus.size:
        out.append(("all-cpu", Placement(g, cl, np.full(g.n, cpus[0], dtype=np.int64))))
    return out
