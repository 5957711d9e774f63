"""Simple baselines that make the pipeline real end to end.

- ``single``: everything on one accelerator (unsupported nodes on the first CPU).
- ``greedy``: Tarnawski et al. Sec. 7: contract colocation classes and the strongly
  connected components that arise (Appendix B), fix a topological order, fill each
  accelerator in turn with as many nodes as fit in its memory, the rest on the CPU.
- ``expert``: a given split file (``params["split"]``), or the bundled human-expert
  split of a Tarnawski workload (training graphs fall back to the inference split,
  extended to backward nodes through ``colorClass``).
- ``layer-split``: Pesto's layer-wise expert for RNN models (Sec. 5.2): the model's
  layers split evenly over the accelerators in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.orders import topological_order
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.transforms.contract import acyclic_labels, colocation_labels, quotient

__all__ = ["single_device", "greedy_fill", "layer_split", "latency_starts"]


def _accelerators(cluster: Cluster) -> np.ndarray:
    """The non-CPU devices; on a CPU-only cluster (``local-cpu-N``) every device."""
    accs = np.array([i for i, k in enumerate(cluster.kinds) if k != "cpu"], dtype=np.int64)
    return accs if accs.size else np.arange(cluster.size, dtype=np.int64)


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


def greedy_fill(graph: OpGraph, cluster: Cluster, *, order: str | Callable[[OpGraph], np.ndarray] = "dfs"
                ) -> Placement:
    """Tarnawski Sec. 7 greedy: fill accelerators along a topological order of the
    colocation-contracted graph, each up to its memory; the rest goes to the CPU.

    ``order`` names the topological order (:mod:`dnnplace.graphs.orders`), or is a function
    that returns one of the contracted graph it is given (``ValueError`` if what it returns
    is not a topological order of it); the paper does not say which order it fixes, and the
    latencies of Table 4 depend on it (results/tarnawski-table4/tiebreak-ablation.md).
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
    for grp in _order_of(coarse, order).tolist():
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


def _order_of(coarse: OpGraph, order: str | Callable[[OpGraph], np.ndarray]) -> np.ndarray:
    """The topological order ``order`` names, or returns, of ``coarse``."""
    if isinstance(order, str):
        return topological_order(coarse, order)
    seq = np.asarray(order(coarse), dtype=np.int64)
    pos = np.full(coarse.n, -1, dtype=np.int64)
    if seq.shape == (coarse.n,) and ((seq >= 0) & (seq < coarse.n)).all():
        pos[seq] = np.arange(coarse.n)
    if (pos < 0).any() or (pos[coarse.src] >= pos[coarse.dst]).any():
        raise ValueError(f"order {getattr(order, '__name__', order)!r} returned no topological order of the "
                         f"{coarse.n} contracted nodes")
    return seq


def _layer_ranks(graph: OpGraph) -> tuple[np.ndarray, int]:
    """Rank ``0 .. L-1`` (input side to output side) of the layer of each node, ``-1``
    where the node has none of its own; and ``L``. See :func:`layer_split`."""
    raw = [None if x is None or x == "" else x for x in graph.layers]
    ints = [x for x in raw if x is not None]
    if not ints:
        raise InputError(f"graph {graph.name!r} has no layer ids; the layer-wise split needs them")
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in ints):
        n_layers = max(1, int(max(ints)))
        return np.array([-1 if x is None else min(max(int(x), 0), n_layers - 1) for x in raw],
                        dtype=np.int64), n_layers
    roles = graph.roles or ("compute",) * graph.n
    param = np.array([r == "param" for r in roles])
    layers = {x for x, is_p in zip(raw, param) if is_p and x is not None} or set(ints)
    # program order where the node order is topological (captured graphs), else by level
    pos = np.arange(graph.n) if (graph.src < graph.dst).all() else graph.topo_position
    first: dict = {}  # label -> (first forward non-parameter position, first position)
    for i, x in enumerate(raw):
        if x in layers:
            fwd = pos[i] if not (graph.backward[i] or param[i]) else graph.n
            a, b = first.get(x, (graph.n, graph.n))
            first[x] = (min(a, fwd), min(b, pos[i]))
    rank = {x: r for r, x in enumerate(sorted(first, key=first.__getitem__))}
    return np.array([rank.get(x, -1) for x in raw], dtype=np.int64), len(rank)


def _colocate(graph: OpGraph, rank: np.ndarray) -> None:
    """Every ranked colocation group takes the smallest rank of its ranked forward
    members (else of its ranked members), in place."""
    grp = graph.colocation
    if not (grp >= 0).any():
        return
    big = np.iinfo(np.int64).max
    for members in (rank >= 0) & ~graph.backward & (grp >= 0), (rank >= 0) & (grp >= 0):
        best = np.full(len(graph.colocation_labels), big, dtype=np.int64)
        np.minimum.at(best, grp[members], rank[members])
        hit = (grp >= 0) & (best[np.maximum(grp, 0)] < big)
        rank[hit] = best[grp[hit]]


def _fill_ranks(graph: OpGraph, rank: np.ndarray) -> None:
    """Give every node of rank ``-1`` one, in place, by the rules of :func:`layer_split`."""
    _colocate(graph, rank)
    bw, order = graph.backward, graph.topo_order.tolist()
    lo = np.full(graph.n, -1, dtype=np.int64)  # backward: deepest layer among its nearest ranked backward successors
    for v in order[::-1]:
        if bw[v] and rank[v] < 0:
            succ = graph.out_nbr[graph.out_ptr[v]:graph.out_ptr[v + 1]]
            succ = succ[bw[succ]]
            if succ.size:
                lo[v] = np.where(rank[succ] >= 0, rank[succ], lo[succ]).max()
    for v in order:
        if rank[v] < 0:
            pred = graph.in_nbr[graph.in_ptr[v]:graph.in_ptr[v + 1]]
            pred = pred[rank[pred] >= 0]
            fwd, back = pred[~bw[pred]], pred[bw[pred]]
            hint = int(rank[fwd].max()) if fwd.size else -1
            if bw[v]:
                hi = int(rank[back].min()) if back.size else -1
                hint = max(hint, int(lo[v]))
                hint = hi if hint < 0 else (min(hint, hi) if hi >= 0 else hint)
            rank[v] = hint
    for v in order[::-1]:
        if rank[v] < 0:
            succ = graph.out_nbr[graph.out_ptr[v]:graph.out_ptr[v + 1]]
            succ = succ[rank[succ] >= 0]
            if succ.size:
                rank[v] = rank[succ].min()
    rank[rank < 0] = 0
    _colocate(graph, rank)


def layer_split(graph: OpGraph, cluster: Cluster) -> Placement:
    """Pesto's layer-wise expert placement for RNN models (Pesto Sec. 5.2).

    The ``L`` model layers are split evenly over the accelerators in order (layer of
    rank ``l`` on accelerator ``(l * k) // L`` of ``k``), so each accelerator holds a
    contiguous range of layers. The layers and their order come from ``graph.layers``:

    - **Integer ids** (the :mod:`dnnplace.graphs.generators.lstm` convention): ``-1``
      below the first model layer, ``0 .. L-1`` the model layers, ``L`` above the last
      (``L`` is the largest id; a graph without an output layer loses its last layer to
      the one below). The input layer (embedding) goes with the first model layer and
      the output layer (projection, softmax, loss) with the last; gradients and weight
      updates carry their forward layer's id, so they go with it.
    - **Labels** (module names of captured graphs: ``embed``, ``layers.0.cell``, ...):
      where the graph marks parameter nodes (role ``param``) the layers are the labels
      that hold a parameter (``drop``, ``loss`` or a container's own ops are not layers:
      the expert splits the model's weighted layers); otherwise every label is one. They
      are ordered by the topological position of their first forward, non-parameter
      node (ties: first node of any kind): the first is the input side. The position is
      the node's index where the node order is topological (captured graphs list their
      operations in execution order, so a Transformer's encoder layers precede its
      decoder layers), else its place in :attr:`OpGraph.topo_order` (level by level).

    A node with no layer (no label, ``""``, or a label that is not a layer) takes one
    from the graph, in this order: (1) its colocation group's (the smallest rank among
    the group's forward members with a layer, else among its members with one); (2) in
    topological order, a forward node: the deepest (largest) rank ``f`` among its forward
    predecessors, the layer whose output it continues (residual adds, dropout, the
    loss); a backward node: the forward layer it differentiates, which lies between the
    layers of the gradients it continues and those it feeds, so ``min(max(f, lo), hi)``
    with ``hi`` the smallest rank among its backward predecessors (the gradient comes
    from that layer or a deeper one) and ``lo`` the deepest among its nearest backward
    successors with a layer (a weight gradient of layer ``l`` reads the activations of
    layer ``l - 1`` but feeds layer ``l``'s parameter update); (3) in reverse topological
    order, the smallest rank among its successors (sources such as initial states);
    (4) rank 0. Colocation groups are then made whole again by rule (1), so a group is
    never split. Memory is not
    considered (the evaluator flags an overflow); a node the chosen accelerator cannot
    run goes to the first CPU.

    Parameters
    ----------
    graph : OpGraph
        A graph with layer ids or labels (``graph.layers``).
    cluster : Cluster
        The accelerators (every non-CPU device, in cluster order) take the layers.

    Returns
    -------
    Placement

    Raises
    ------
    InputError
        The graph has no layer ids; the cluster has no accelerator.

    References
    ----------
    U. U. Hafeez, X. Sun, A. Gandhi, Z. Liu. "Towards optimal placement and scheduling of
    DNN operations with Pesto." Middleware 2021, Sec. 5.2 (the experts' RNN placement).

    Examples
    --------
    A 4-layer LSTM on two GPUs: layers 0-1 (and the embedding) on ``gpu0``, layers 2-3
    (and the projection and loss) on ``gpu1``:

    >>> from dnnplace.graphs import Cluster
    >>> from dnnplace.graphs.generators.lstm import lstm_grid
    >>> g = lstm_grid(layers=4, steps=2, hidden=64, batch=8, vocab=100, training=False, kinds=["gpu"])
    >>> p = layer_split(g, Cluster.single_host(2, with_cpu=False))
    >>> sorted({(lay, p.cluster.names[d]) for lay, d in zip(g.layers, p.device)})
    [(-1, 'gpu0'), (0, 'gpu0'), (1, 'gpu0'), (2, 'gpu1'), (3, 'gpu1'), (4, 'gpu1')]
    """
    if graph.layers is None:
        raise InputError(f"graph {graph.name!r} has no layer ids; the layer-wise split needs them")
    accs = _accelerators(cluster)
    if accs.size == 0:
        raise InputError(f"cluster {cluster.name!r} has no accelerator for the layer-wise split")
    rank, n_layers = _layer_ranks(graph)
    if (rank < 0).any():
        _fill_ranks(graph, rank)
    dev = accs[(rank * accs.size) // n_layers]
    unsupported = np.isnan(cluster.compute_matrix(graph)[np.arange(graph.n), dev])
    if unsupported.any():
        dev[unsupported] = _fallback(graph, cluster)
    return Placement(graph, cluster, dev)


def latency_starts(inst: Instance, *, dp: bool = False,
                   dp_time_limit: float | None = None) -> list[tuple[str, Placement]]:
    """The standard starting splits for latency, as ``(name, placement)``: greedy (Sec. 7),
    with ``dp`` the max-load DP's optimal split (its best split within ``dp_time_limit``
    seconds, where given), and the all-CPU split; a start the instance does not admit (e.g.
    greedy with nowhere to put a node) is left out."""
    from dnnplace.heuristics.maxload_dp import maxload_dp

    g, cl = inst.graph, inst.require_cluster()
    out = []
    try:
        out.append(("greedy", greedy_fill(g, cl)))
    except InputError:
        pass
    if dp:
        try:
            res = maxload_dp(inst, time_limit=dp_time_limit)
            if res.placement is not None:
                out.append(("dp", res.placement))
        except InputError:
            pass
    cpus = cl.devices_of_kind("cpu")
    if cpus.size:
        out.append(("all-cpu", Placement(g, cl, np.full(g.n, cpus[0], dtype=np.int64))))
    return out
