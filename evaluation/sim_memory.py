"""Memory accounting of a simulated schedule: static footprint and dynamic peak per device.

:func:`static_memory` is the sum of ``graph.memory`` per device (Pesto's constraint (8));
:func:`peak_memory` sweeps allocation and free events per device to find the peak of
live tensors over time (PARDNN Eq. (2)), vectorised with numpy.

The tensor sizes come from :func:`tensor_sizes`: a node's ``output_bytes`` where the
graph gives any; otherwise (the Tarnawski inputs, which carry a byte count per edge
only) the largest ``bytes`` among the node's out-edges, the tensor it sends, an
estimate (a sink's output counts 0); a graph with neither has an *unknown* dynamic
peak: :func:`peak_memory` then counts the ``persistent_bytes`` only (a lower bound) and
the simulation result reports the peak as unknown (``None`` in JSON), never as 0.

References
----------
.. [PARDNN] F. Qararyah, M. Wahib, D. Dikbayir, M. E. Belviranli, D. Unat. "A
   computational-graph partitioning method for training memory-constrained DNNs."
   Parallel Computing 2021, Sec. 3.2.2, Eq. (2).
"""

from __future__ import annotations

import numpy as np

from dnnplace.graphs.placement import Placement

__all__ = ["static_memory", "peak_memory", "tensor_sizes"]


def static_memory(placement: Placement) -> np.ndarray:
    """Sum of ``graph.memory`` of the nodes on each device (Pesto's constraint (8))."""
    D = placement.cluster.size
    return np.bincount(placement.device, weights=placement.graph.memory, minlength=D).astype(np.float64)


def tensor_sizes(graph) -> tuple[np.ndarray | None, str | None]:
    """Output tensor size per node for the dynamic memory model, and where it came from:
    ``(graph.output_bytes, "output_bytes")`` when any is non-zero; else the largest
    out-edge ``bytes`` per node (``"edge_bytes"``) when any edge carries bytes; else
    ``(None, None)``: the graph says nothing about tensor sizes.

    >>> from dnnplace.graphs import OpGraph
    >>> g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0]] * 3, memory=[0] * 3,
    ...             src=[0, 0, 1], dst=[1, 2, 2], edge_bytes=[8, 4, 6])
    >>> sizes, source = tensor_sizes(g)
    >>> sizes.tolist(), source
    ([8.0, 6.0, 0.0], 'edge_bytes')
    """
    if graph.output_bytes.any():
        return graph.output_bytes, "output_bytes"
    if graph.m and graph.edge_bytes.any():
        out = np.zeros(graph.n)
        np.maximum.at(out, graph.src, graph.edge_bytes)
        return out, "edge_bytes"
    return None, None


def peak_memory(placement: Placement, start: np.ndarray, fin: np.ndarray, xsrc: np.ndarray,
                xdst_dev: np.ndarray, xs: np.ndarray, xf: np.ndarray) -> np.ndarray:
    """Dynamic peak memory per device, PARDNN Eq. (2).

    ``persistent_bytes`` of every node on ``d`` are live all step; the ``output_bytes``
    of a node ``u`` on ``d`` from ``u``'s start until its last consumer on ``d`` and
    its last outgoing transfer finish (at least until ``u`` finishes); a tensor
    received on ``d`` (one copy per (``u``, ``d``)) from the start of its first transfer
    to ``d`` until ``u``'s last consumer on ``d`` finishes. Intervals are half-open, so
    frees at ``t`` come before allocations at ``t``. See
    :func:`dnnplace.evaluation.simulate.simulate`.

    Parameters
    ----------
    placement : Placement
    start, fin : ndarray (n,)
        Node start and finish times.
    xsrc, xdst_dev : ndarray (X,)
        Source node and destination device of each transfer.
    xs, xf : ndarray (X,)
        Transfer start and finish times.

    Returns
    -------
    ndarray (D,)
        The peak per device; only the ``persistent_bytes`` (a lower bound) when the graph
        carries no tensor sizes (:func:`tensor_sizes`).
    """
    g, D = placement.graph, placement.cluster.size
    dev = placement.device
    ob, _ = tensor_sizes(g)
    if ob is None:
        ob = np.zeros(g.n)
    persist = np.bincount(dev, weights=g.persistent_bytes, minlength=D).astype(np.float64)
    # own outputs: [start(u), max(finish u, finish of local consumers, finish of out-transfers))
    end = fin.copy()
    same = dev[g.src] == dev[g.dst]
    np.maximum.at(end, g.src[same], fin[g.dst[same]])
    if xsrc.size:
        np.maximum.at(end, xsrc, xf)
    t_parts = [start, end]
    b_parts = [ob, -ob]
    d_parts = [dev, dev]
    # received tensors: per (u, b): [first transfer start, last consumer of u on b finishes)
    cross = ~same
    if cross.any() and xsrc.size:
        key_e = g.src[cross] * D + dev[g.dst[cross]]
        keys, inv = np.unique(key_e, return_inverse=True)
        r_end = np.full(keys.shape[0], -np.inf)
        np.maximum.at(r_end, inv, fin[g.dst[cross]])
        r_begin = np.full(keys.shape[0], np.inf)
        xkey = xsrc * D + xdst_dev
        np.minimum.at(r_begin, np.searchsorted(keys, xkey), xs)
        u = keys // D
        b = keys % D
        t_parts += [r_begin, r_end]
        b_parts += [ob[u], -ob[u]]
        d_parts += [b, b]
    times = np.concatenate(t_parts)
    delta = np.concatenate(b_parts)
    devs = np.concatenate(d_parts)
    keep = delta != 0
    times, delta, devs = times[keep], delta[keep], devs[keep]
    peak = np.zeros(D)
    if delta.size:
        # frees (delta < 0) before allocations at equal times: half-open intervals
        o = np.lexsort((delta > 0, times, devs))
        delta, devs = delta[o], devs[o]
        cs = np.cumsum(delta)
        first = np.flatnonzero(np.r_[True, devs[1:] != devs[:-1]])
        base = np.r_[0.0, cs][first]  # cumsum before each device's segment
        seg_max = np.maximum.reduceat(cs, first) - base
        peak[devs[first]] = np.maximum(seg_max, 0.0)
    return persist + peak
