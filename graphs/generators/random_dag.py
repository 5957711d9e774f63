"""Random layered DAGs with DNN-like costs (family ``"random-dag"``).

Structure: the forward nodes are cut into ``L = ceil(n_fwd / width)`` non-empty layers
of random width (0.5x..1.5x the mean); every node of layer ``l >= 1`` gets one input from
layer ``l - 1`` and every node of layer ``l < L - 1`` one output into layer ``l + 1`` (so
the depth is exactly ``L``, sources are the first layer and sinks the last), and further
inputs from earlier layers, the layer distance drawn geometrically (mostly adjacent layers,
sometimes skip connections) until there are about ``avg_degree`` edges per node.
Edges always go from a lower to a higher layer, so the graph is a DAG by construction.

Costs (all lognormal, so a few ops dominate as in real profiles):

- compute on ``kinds[0]`` (the accelerator): median ``compute_ms`` ms;
  on ``"cpu"``: that time times a per-node factor drawn from ``cpu_slowdown``; on any other
  kind: times a factor in ``[0.5, 2]``. A fraction ``unsupported_frac`` of the nodes runs
  only on the last kind (ops without an accelerator kernel).
- ``output_bytes``: the node's output tensor, median ``output_bytes`` bytes, a multiple of 4
  (float32); every out-edge carries that tensor (``edge.bytes = output_bytes[src]``).
- ``persistent_bytes``: weights for a fraction ``param_frac`` of the nodes, median
  ``param_bytes``; ``memory = persistent_bytes + output_bytes``.
- edges have no explicit ``cost``: transfer times come from the cluster's link model.

Memory budget: the default medians (256 KiB outputs, 2 MiB weights) give about 2.7 MB
per node on average, i.e. 550 GB for 200k nodes, far more than any cluster preset holds.
So the *default* sizes shrink with ``n``: when the expected total memory
``n * exp(bytes_sigma^2 / 2) * (output_bytes + param_frac * param_bytes)`` would exceed
``memory_budget`` (default 8 GB: half of one 16 GB GPU, so a default graph fits every
``single-host-N`` preset, even ``N = 1``, with room to balance load), the medians left
at their defaults are multiplied by one factor that brings the expected total down to
the budget (``meta["generator"]["memory_scale"]`` records it). Graphs below the budget
(up to about 2,900 nodes) are unchanged; ``output_bytes`` and ``param_bytes`` given
explicitly are used as given; ``memory_budget=None`` turns the scaling off. Edge bytes
are the producers' outputs, so they shrink by the same factor (a large default graph
moves less data per edge).

Training graphs (``training=True``) add a backward node ``v'`` for each of the last
``n // 2`` forward nodes (the first-layer inputs need no gradient first): compute
``1.5x..2.5x`` the forward time on the same kinds, an edge ``(v, v')`` (the stashed
activation), ``(w', v')`` for every forward edge ``(v, w)`` between mirrored nodes (the
gradient flows back), and, with ``colocate_backward``, ``v`` and ``v'`` in one
colocation group (as Tarnawski's ``colorClass``). The graph then has ``n`` nodes in total.
A backward node's out-edges carry different tensors (the gradient with respect to each
input of its forward node), so each has its own ``output`` (1, 2, ... in edge order;
docs/semantics.md 2.1: distinct outputs are sent separately); every other edge carries its source's
one output (0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["random_layered_dag", "DEFAULT_MEMORY_BUDGET"]

DEFAULT_OUTPUT_BYTES = 256 * 1024
DEFAULT_PARAM_BYTES = 2 * 1024 ** 2
DEFAULT_MEMORY_BUDGET = 8e9  # bytes: half of one 16 GB GPU


def _lognormal(rng: np.random.Generator, median: float, sigma: float, size: int) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(size))


def _default_sizes(n: int, output_bytes: float | None, param_bytes: float | None, param_frac: float,
                   sigma: float, budget: float | None) -> tuple[float, float, float]:
    """The medians to draw from: explicit ones as given, defaults scaled by one factor
    (returned third) so that the expected total memory stays within ``budget``."""
    mean = n * math.exp(sigma ** 2 / 2)  # lognormal mean over median, times n
    fixed = mean * ((output_bytes or 0.0) + param_frac * (param_bytes or 0.0))
    free = mean * ((DEFAULT_OUTPUT_BYTES if output_bytes is None else 0.0)
                   + param_frac * (DEFAULT_PARAM_BYTES if param_bytes is None else 0.0))
    scale = 1.0
    if budget is not None and free > 0 and fixed + free > budget:
        scale = max(budget - fixed, 0.0) / free
    ob = max(DEFAULT_OUTPUT_BYTES * scale, 4.0) if output_bytes is None else output_bytes  # >= one float32
    pb = max(DEFAULT_PARAM_BYTES * scale, 4.0) if param_bytes is None else param_bytes
    return ob, pb, scale


def random_layered_dag(n: int, *, seed: int = 0, width: int | None = None, avg_degree: float = 1.5,
                       skip_p: float = 0.6, kinds: Sequence[str] = ("gpu", "cpu"),
                       compute_ms: float = 0.1, compute_sigma: float = 1.2,
                       cpu_slowdown: tuple[float, float] = (5.0, 20.0), unsupported_frac: float = 0.0,
                       output_bytes: float | None = None, param_frac: float = 0.3,
                       param_bytes: float | None = None, bytes_sigma: float = 1.5,
                       training: bool = False, colocate_backward: bool = True,
                       memory_budget: float | None = DEFAULT_MEMORY_BUDGET,
                       name: str | None = None) -> OpGraph:
    """A random layered DAG with DNN-like compute, memory and tensor sizes.

    Parameters
    ----------
    n : int
        Number of nodes (forward plus backward for training graphs).
    seed : int
        Seed of the local ``numpy.random.default_rng``; equal seeds give equal graphs.
    width : int, optional
        Mean number of forward nodes per layer; default ``round(sqrt(n_fwd))``.
    avg_degree : float
        Target forward edges per forward node (duplicates are dropped, so slightly fewer).
    skip_p : float
        Parameter of the geometric layer distance of extra edges (1 = adjacent layers only).
    kinds : sequence of str
        Device kinds with a compute column; ``kinds[0]`` is the reference kind.
    compute_ms, compute_sigma : float
        Median and log-standard deviation of the reference compute time (ms).
    cpu_slowdown : (float, float)
        Range of the per-node factor of the ``"cpu"`` time over the reference time.
    unsupported_frac : float
        Fraction of nodes that run on the last kind only.
    output_bytes, param_frac, param_bytes, bytes_sigma
        Tensor and weight sizes (see the module docstring); ``output_bytes`` and
        ``param_bytes`` default to medians of 256 KiB and 2 MiB, scaled down for large
        ``n`` to fit ``memory_budget``.
    memory_budget : float or None
        Expected total memory (bytes) the *default* sizes may reach (see the module
        docstring); ``None``: no scaling.
    training : bool
        Add a backward pass (see the module docstring).
    colocate_backward : bool
        Put each backward node in its forward partner's colocation group.
    name : str, optional
        Graph name; default ``random-dag-n{n}-s{seed}``.

    Returns
    -------
    OpGraph
        Node ids ``0..n-1`` in a topological order; ``layers`` holds each node's layer;
        ``meta["generator"]`` records the call.

    Examples
    --------
    >>> g = random_layered_dag(1000, seed=3)
    >>> g.n, g.kinds, int(g.level.max()) + 1 <= 40
    (1000, ('gpu', 'cpu'), True)

    Large graphs keep to the memory budget by default:

    >>> big = random_layered_dag(100_000, seed=3)
    >>> float(big.memory.sum()) < 1.1 * DEFAULT_MEMORY_BUDGET, big.meta["generator"]["memory_scale"] < 1
    (True, True)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"random-dag: n must be a positive integer, got {n!r}")
    kinds = tuple(kinds)
    if not kinds or len(set(kinds)) != len(kinds):
        raise InputError(f"random-dag: kinds must be distinct and non-empty, got {kinds}")
    if not avg_degree >= 0 or not 0 < skip_p <= 1 or not 0 <= unsupported_frac <= 1 or not 0 <= param_frac <= 1:
        raise InputError("random-dag: need avg_degree >= 0, 0 < skip_p <= 1 and fractions in [0, 1]")
    if cpu_slowdown[0] <= 0 or cpu_slowdown[1] < cpu_slowdown[0]:
        raise InputError(f"random-dag: cpu_slowdown must be a range (lo, hi) with 0 < lo <= hi, got {cpu_slowdown}")
    n = int(n)
    if memory_budget is not None and not memory_budget > 0:
        raise InputError(f"random-dag: memory_budget must be a positive number of bytes or None, got {memory_budget!r}")
    output_bytes, param_bytes, scale = _default_sizes(n, output_bytes, param_bytes, param_frac, bytes_sigma,
                                                      memory_budget)
    rng = np.random.default_rng(seed)
    n_b = n // 2 if training else 0
    n_f = n - n_b
    width = max(1, round(math.sqrt(n_f))) if width is None else int(width)
    if width < 1:
        raise InputError(f"random-dag: width must be >= 1, got {width}")
    n_layers = max(1, min(n_f, math.ceil(n_f / width)))

    # ---- layers: n_layers non-empty runs of consecutive node indices
    share = np.cumsum(rng.uniform(0.5, 1.5, n_layers))
    ends = np.floor(share / share[-1] * (n_f - n_layers)).astype(np.int64) + np.arange(1, n_layers + 1)
    lstart = np.concatenate(([0], ends[:-1])).astype(np.int64)
    lsize = np.diff(np.concatenate((lstart, [n_f])))
    layer = np.repeat(np.arange(n_layers), lsize)

    # ---- forward edges: one from the previous layer for every non-first-layer node ...
    dst0 = np.arange(lsize[0], n_f, dtype=np.int64)
    prev = layer[dst0] - 1
    src0 = lstart[prev] + (rng.random(dst0.size) * lsize[prev]).astype(np.int64)
    # ... one into the next layer for every node the above left without a successor ...
    lonely = np.ones(n_f, bool)
    lonely[src0] = False
    lonely[lstart[-1]:] = False
    src2 = np.flatnonzero(lonely)
    nxt = layer[src2] + 1
    dst2 = lstart[nxt] + (rng.random(src2.size) * lsize[nxt]).astype(np.int64)
    src0, dst0 = np.concatenate((src0, src2)), np.concatenate((dst0, dst2))
    # ... plus skip edges, the layer distance geometric
    extra = round(avg_degree * n_f) - dst0.size
    if extra > 0 and dst0.size:
        dst1 = rng.integers(lsize[0], n_f, size=extra)
        dist = np.minimum(rng.geometric(skip_p, size=extra), layer[dst1])
        sl = layer[dst1] - dist
        src1 = lstart[sl] + (rng.random(extra) * lsize[sl]).astype(np.int64)
        src0, dst0 = np.concatenate((src0, src1)), np.concatenate((dst0, dst1))
    key = np.unique(src0 * n_f + dst0)
    src, dst = key // n_f, key % n_f

    # ---- forward costs
    nk = len(kinds)
    base = np.clip(_lognormal(rng, compute_ms, compute_sigma, n_f), 1e-4, None)
    compute = np.empty((n_f, nk))
    compute[:, 0] = base
    for j, k in enumerate(kinds[1:], start=1):
        lo, hi = cpu_slowdown if k == "cpu" else (0.5, 2.0)
        compute[:, j] = base * rng.uniform(lo, hi, n_f)
    if nk > 1 and unsupported_frac > 0:
        only_last = rng.random(n_f) < unsupported_frac
        compute[only_last, :-1] = np.nan
    out_b = 4.0 * np.ceil(_lognormal(rng, output_bytes, bytes_sigma, n_f) / 4.0)
    pers_b = np.where(rng.random(n_f) < param_frac,
                      4.0 * np.ceil(_lognormal(rng, param_bytes, bytes_sigma, n_f) / 4.0), 0.0)
    layers = layer
    coloc = None
    labels: list = []
    backward = None
    if n_b:
        # ---- backward pass mirroring the last n_b forward nodes; v' = n_f + (n_f - 1 - v)
        mirrored = np.arange(n_f - n_b, n_f)
        partner = n_f + (n_f - 1 - mirrored)  # decreasing: reversed order keeps ids topological
        mirror_of = np.full(n_f, -1, dtype=np.int64)
        mirror_of[mirrored] = partner
        both = (mirror_of[src] >= 0) & (mirror_of[dst] >= 0)
        b_src = np.concatenate((mirrored, mirror_of[dst[both]]))
        b_dst = np.concatenate((partner, mirror_of[src[both]]))
        b_bytes_of = np.concatenate((mirrored, src[both]))  # the tensor (or its gradient) moved
        order = np.argsort(partner)  # backward nodes by id
        fwd_of_b = mirrored[order]
        factor = rng.uniform(1.5, 2.5, n_b)
        compute = np.vstack((compute, compute[fwd_of_b] * factor[:, None]))
        out_b = np.concatenate((out_b, out_b[fwd_of_b]))
        pers_b = np.concatenate((pers_b, pers_b[fwd_of_b]))
        layers = np.concatenate((layer, 2 * n_layers - 1 - layer[fwd_of_b]))
        edge_bytes = np.concatenate((out_b[src], out_b[b_bytes_of]))
        grad = np.concatenate((np.zeros(src.size, bool), np.ones(b_src.size, bool)))
        src, dst = np.concatenate((src, b_src)), np.concatenate((dst, b_dst))
        backward = np.concatenate((np.zeros(n_f, bool), np.ones(n_b, bool)))
        if colocate_backward:
            coloc = np.full(n, -1, dtype=np.int64)
            coloc[mirrored] = np.arange(n_b)
            coloc[partner] = np.arange(n_b)
            labels = mirrored.tolist()
    else:
        edge_bytes = out_b[src]
        grad = np.zeros(src.size, bool)
    # gradient edges: one output each, numbered 1, 2, ... per source in edge order
    edge_output = np.zeros(src.size, dtype=np.int64)
    if grad.any():
        ge = np.flatnonzero(grad)
        by_src = ge[np.argsort(src[ge], kind="stable")]
        first = np.searchsorted(src[by_src], src[by_src])  # position of each source's first edge
        edge_output[by_src] = np.arange(by_src.size) - first + 1
    meta = {"generator": {"family": "random-dag", "n": n, "seed": seed, "width": width,
                          "avg_degree": avg_degree, "skip_p": skip_p, "training": training,
                          "unsupported_frac": unsupported_frac}}
    if scale < 1.0:  # recorded only when the defaults were scaled (small graphs stay byte-identical)
        meta["generator"].update(memory_budget=memory_budget, memory_scale=scale,
                                 output_bytes=output_bytes, param_bytes=param_bytes)
    return OpGraph(ids=range(n), kinds=kinds, compute=compute, memory=pers_b + out_b,
                   src=src, dst=dst, edge_bytes=edge_bytes, edge_output=edge_output, persistent_bytes=pers_b,
                   output_bytes=out_b,
                   colocation=coloc, colocation_labels=labels, backward=backward,
                   layers=layers.tolist(), name=name or f"random-dag-n{n}-s{seed}", unit="ms", meta=meta)
