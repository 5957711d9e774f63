"""Why PARDNN Table 4's superlinear batch scaling does not show on our Word-RNN stand-in, measured.

PARDNN Table 4 scales the batch 4-16x over ideal data parallelism (Qararyah et al.; not
reproduced here: results/pardnn/README.md).

The stand-in (``pardnn-models.toml``: the rnnlm-2x2048 layer block captured at batch 64 and
128, tiled to the paper's node count) is placed whole on one 32 GB GPU (method ``single``)
and its fifo schedule simulated with congestion. Printed per batch: the static sum, the
dynamic peak (PARDNN's memory model) with the per-step weight-gradient partials
accumulated one by one (PyTorch autograd, what the capture records) and with every partial
of a parameter kept live until one sum (TensorFlow's default ``AddN`` aggregation,
emulated by an edge from each partial to the parameter's gradient); and the outputs that do
not grow with the batch (equal at both captures).

With a batch-independent floor ``F`` of the dynamic peak and ``a`` bytes per sample, one GPU
of capacity ``C`` holds ``(C - F) / a`` samples and ``K`` GPUs (the floor spread, as PARDNN
spreads the parameters) about ``(K C - F) / a``, i.e. ``(K C - F) / (K (C - F))`` times ideal
data parallelism. The paper's 16 / 512 on 1 / 2 GPUs needs ``F / C`` of about 0.97; ours is
printed.

    .venv/bin/python -m benchmarks pardnn-table4          # about a minute (two captures)
"""

from __future__ import annotations

import argparse

import numpy as np


def _addn(g, partials: np.ndarray, target: np.ndarray):
    """``g`` with an edge from every partial to its parameter's gradient node (zero time)."""
    k = partials.size
    return g.with_(src=np.concatenate([g.src, partials]), dst=np.concatenate([g.dst, target[partials]]),
                   edge_bytes=np.concatenate([g.edge_bytes, g.output_bytes[partials]]),
                   edge_cost=np.concatenate([g.edge_cost, np.full(k, np.nan)]),
                   edge_batch_scaled=np.concatenate([g.edge_batch_scaled, np.zeros(k, dtype=bool)]),
                   edge_output=np.concatenate([g.edge_output, np.zeros(k, dtype=np.int64)]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args) -> None:
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.experiments.pardnn import _models, batch_profiles
    from dnnplace.graphs.batch_model import BatchModel
    from dnnplace.graphs.cluster import Cluster
    from dnnplace.graphs.placement import Placement

    models = _models("pardnn-speedup")  # its models: pardnn-models.toml
    m = next(x for x in models if x.name == "Word-RNN")
    prof = batch_profiles(m)
    if prof is None:
        raise SystemExit("needs torch (the captured block)")
    (b1, g1), (b2, g2) = prof.items()
    const = np.isclose(g1.output_bytes, g2.output_bytes) & (g2.output_bytes > 0)
    print(f"Word-RNN stand-in: {g2.n} nodes; outputs that do not grow with the batch: {int(const.sum())} of "
          f"{int((g2.output_bytes > 0).sum())}, {g2.output_bytes[const].sum() / 1e9:.1f} of "
          f"{g2.output_bytes.sum() / 1e9:.1f} GB at batch {b2}")
    roles = np.asarray(g2.roles, dtype=object)
    target = np.full(g2.n, -1)
    for v in np.argsort(-g2.topo_position).tolist():  # the gradient node each batch-independent chain reaches
        if not const[v]:
            continue
        if roles[v] == "grad":
            target[v] = v
            continue
        succ = g2.out_nbr[g2.out_ptr[v]:g2.out_ptr[v + 1]]
        hit = succ[(target[succ] >= 0) & const[succ]]
        if hit.size:
            target[v] = target[hit[0]]
    ops = np.asarray(g2.op_types, dtype=object)
    partials = np.flatnonzero((target >= 0) & (target != np.arange(g2.n)) & np.isin(ops, ("mm", "sum")))
    print(f"per-step weight-gradient partials: {partials.size}, {g2.output_bytes[partials].sum() / 1e9:.1f} GB")
    cl = Cluster.single_host(1, with_cpu=False, gpu_memory=32e9)
    models_ = {"accumulated (capture)": (BatchModel(b2, profiles=prof), g2),
               "AddN (TensorFlow)": (BatchModel(b2, profiles={b1: _addn(g1, partials, target),
                                                                b2: _addn(g2, partials, target)}),
                                     _addn(g2, partials, target))}
    floor = {}
    for name, (bm, base) in models_.items():
        for b in (1, 16, 1024):
            g = bm.at(base, b)
            peak = float(np.asarray(simulate(Placement(g, cl, np.zeros(g.n, dtype=np.int64)), policy="fifo",
                                             congestion=True).peak_memory)[0])
            floor.setdefault(name, peak)
            print(f"  {name:22s} batch {b:5d}: static {g.memory.sum() / 1e9:6.1f} GB, dynamic peak "
                  f"{peak / 1e9:6.2f} GB")
    C = 32e9
    for name, f in floor.items():
        ratio = (2 * C - f) / (2 * (C - f))
        print(f"  {name}: F / C = {f / C:.3f}: 2 GPUs hold about {ratio:.2f}x ideal DP (paper 16x: F / C ~ 0.97)")
