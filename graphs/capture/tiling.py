"""Giant training graphs by tiling one captured block (a Transformer layer, an LSTM step,
a NASNet cell) with numpy: a 200k-operator graph in seconds instead of hours of capture.

:func:`capture_block` traces one block's joint graph with respect to its parameters *and*
its inputs, given a cotangent per output (``grad_inputs`` in :func:`~.fx.trace`). Its
ports are the input placeholders ``x_i``, the cotangent placeholders ``g_j``, the output
producers ``y_j`` and the input-gradient producers ``gx_i``. :func:`tile` repeats the
block body (every node but the ``x``/``g`` placeholders) ``repeats`` times and wires
tile ``t`` to tile ``t - 1`` by ``wiring[i]``, the source of block input ``i``:

* ``("out", j)``: output ``j`` of the previous tile (a layer stack: ``x <- y``; an LSTM
  step: ``h, c <- h, c``). Forward: ``y_j(t-1) -> consumers of x_i(t)``; backward:
  ``gx_i(t) -> consumers of g_j(t-1)``.
* ``("in", j)``: the value that fed input ``j`` of the previous tile (NASNet's cell
  reads the previous two cells' outputs: ``(x, x_prev) <- (y, x)``).
* ``None``: a fresh external input node per tile (the per-step token of an LSTM step).

Tile 0's chained inputs read external input nodes, and the last tile's cotangents come
from one seed node per output, so the tiled graph has exactly
``repeats * body + externals`` nodes and ``repeats`` times the block's FLOPs. Node ids
are ``t<k>/<block id>``; layers ``t<k>/<block layer>``; colocation groups are per tile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Block", "capture_block", "tile", "default_wiring"]


@dataclass(frozen=True)
class Block:
    """A captured block as arrays: its :class:`OpGraph` (ports included) and port indices."""

    graph: OpGraph
    x: tuple
    g: tuple
    y: tuple
    gx: tuple
    flops: float = 0.0

    @property
    def body(self) -> np.ndarray:
        """Indices of the nodes every tile repeats (all but the x/g placeholders)."""
        keep = np.ones(self.graph.n, dtype=bool)
        keep[list(self.x) + list(self.g)] = False
        return np.flatnonzero(keep)


def capture_block(module, inputs: Sequence, *, cost="roofline:v100", optimizer: str = "adam",
                  name: str = "block") -> Block:
    """Trace one block's joint forward+backward graph with input gradients, with costs."""
    from dnnplace.graphs.capture.costs import cost_model
    from dnnplace.graphs.capture.fx import to_graph, trace
    cm = cost_model(cost)
    cap = trace(module, tuple(inputs), None, training=True, optimizer=optimizer, grad_inputs=True)
    times = cm.times(cap, model=module, inputs=tuple(inputs), key=name)
    g = to_graph(cap, times, kind=cm.kind, name=name, cost_meta=cm.describe())
    p = cap.ports
    return Block(g, tuple(p["x"]), tuple(p["g"]), tuple(p["y"]), tuple(p["gx"]), float(cap.meta.get("flops", 0.0)))


def default_wiring(block: Block, family: str | None = None) -> tuple:
    """NASNet ``(x, x_prev) <- (y, x)``; as many inputs as outputs: ``x_i <- y_i``; one
    more input than outputs (an LSTM step ``(x, h, c) -> (h, c)``): ``x_0`` external,
    ``x_i <- y_{i-1}``."""
    nx, ny = len(block.x), len(block.y)
    if family == "nasnet" and nx == 2 and ny == 1:
        return (("out", 0), ("in", 0))
    if nx == ny:
        return tuple(("out", i) for i in range(nx))
    if nx == ny + 1:
        return (None, *(("out", i) for i in range(ny)))
    raise InputError(f"block with {nx} inputs and {ny} outputs: give the wiring explicitly")


def _out_edges(g: OpGraph, v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Targets, bytes and batch flags of node ``v``'s out-edges."""
    e = g.out_eid[g.out_ptr[v]:g.out_ptr[v + 1]]
    return g.dst[e], g.edge_bytes[e], g.edge_batch_scaled[e]


def tile(block: Block, repeats: int, *, wiring: Sequence | None = None, family: str | None = None,
         name: str | None = None) -> OpGraph:
    """``repeats`` copies of ``block`` chained by ``wiring`` (see the module docstring).

    >>> import numpy as np
    >>> from dnnplace.graphs.graph import OpGraph
    >>> g = OpGraph(ids=["x", "g", "f", "b"], kinds=("gpu",), compute=np.ones((4, 1)), memory=np.zeros(4),
    ...             src=[0, 1, 0], dst=[2, 3, 3], backward=[False, False, False, True])
    >>> t = tile(Block(g, x=(0,), g=(1,), y=(2,), gx=(3,)), 3)
    >>> t.n, t.m  # 3 * 2 body nodes + input + seed; x feeds f and b (3 tiles x 2), g feeds b (3)
    (8, 9)
    """
    if repeats < 1:
        raise InputError(f"tile: repeats must be >= 1, got {repeats}")
    g = block.graph
    wiring = tuple(wiring) if wiring is not None else default_wiring(block, family)
    if len(wiring) != len(block.x):
        raise InputError(f"tile: wiring has {len(wiring)} entries for {len(block.x)} block inputs")
    body = block.body
    nb = body.size
    new = np.full(g.n, -1, dtype=np.int64)
    new[body] = np.arange(nb)
    ports = set(block.x) | set(block.g)
    inner = ~(np.isin(g.src, list(ports)) | np.isin(g.dst, list(ports)))
    es, ed = new[g.src[inner]], new[g.dst[inner]]
    off = (np.arange(repeats, dtype=np.int64) * nb)[:, None]
    src = [(es[None, :] + off).ravel()]
    dst = [(ed[None, :] + off).ravel()]
    eb = [np.tile(g.edge_bytes[inner], repeats)]
    bs = [np.tile(g.edge_batch_scaled[inner], repeats)]
    ext_ids: list[str] = []
    ext_bwd: list[bool] = []
    n_body = repeats * nb

    def ext(label: str, backward: bool) -> int:
        ext_ids.append(label)
        ext_bwd.append(backward)
        return n_body + len(ext_ids) - 1

    def connect(sources: list[int], port: int, t: int) -> None:
        """Edges from global nodes ``sources`` to the consumers of ``port`` in tile ``t``."""
        tg, by, fl = _out_edges(g, port)
        keep = new[tg] >= 0
        for s in sources:
            src.append(np.full(int(keep.sum()), s, dtype=np.int64))
            dst.append(new[tg[keep]] + t * nb)
            eb.append(by[keep])
            bs.append(fl[keep])

    # forward source of every (tile, input): a global node
    fsrc = np.full((repeats, len(block.x)), -1, dtype=np.int64)
    gsink: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (t, i) -> [(tile, g port j)]
    for t in range(repeats):
        for i, w in enumerate(wiring):
            if w is None or t == 0:
                if w is not None and w[0] == "in" and t > 0:
                    continue
                fsrc[t, i] = ext(f"input/t{t}/x{i}", False)
                gsink[(t, i)] = []
            elif w[0] == "out":
                fsrc[t, i] = new[block.y[w[1]]] + (t - 1) * nb
                gsink[(t, i)] = [(t - 1, w[1])]
            else:
                fsrc[t, i] = fsrc[t - 1, w[1]]
                gsink[(t, i)] = gsink[(t - 1, w[1])]
        for i in range(len(block.x)):
            if fsrc[t, i] < 0:  # ("in", j) at t == 0 handled above; other unresolved: external
                fsrc[t, i] = ext(f"input/t{t}/x{i}", False)
                gsink[(t, i)] = []
            connect([int(fsrc[t, i])], block.x[i], t)
    # cotangents: the last tile's g ports read seed nodes; others read the gx of the tiles
    # whose inputs they fed
    feeders: dict[tuple[int, int], list[int]] = {}
    for (t, i), sinks in gsink.items():
        if block.gx and block.gx[i] >= 0:
            for s in sinks:
                feeders.setdefault(s, []).append(int(new[block.gx[i]] + t * nb))
    for j in range(len(block.g)):
        feeders.setdefault((repeats - 1, j), []).append(ext(f"seed/g{j}", True))
    for (t, j), srcs in feeders.items():
        connect(srcs, block.g[j], t)

    def rep(values, prefix=True):
        vals = [values[v] for v in body]
        return [f"t{t}/{v}" for t in range(repeats) for v in vals] if prefix else vals * repeats

    ids = rep(g.ids) + ext_ids
    k = len(g.kinds)
    comp = np.vstack([np.tile(g.compute[body], (repeats, 1)), np.zeros((len(ext_ids), k))])
    pad = np.zeros(len(ext_ids))
    coloc = g.colocation[body]
    ngrp = int(coloc.max()) + 1 if coloc.size and coloc.max() >= 0 else 0
    tiled_coloc = np.concatenate([np.where(coloc >= 0, coloc + t * ngrp, -1) for t in range(repeats)]
                                 + [np.full(len(ext_ids), -1)])
    layers = [f"t{t}/{lay}" for t in range(repeats) for lay in (g.layers[v] if g.layers else "" for v in body)]
    return OpGraph(
        ids=ids, kinds=g.kinds, compute=comp,
        memory=np.concatenate([np.tile(g.memory[body], repeats), pad]),
        src=np.concatenate(src), dst=np.concatenate(dst), edge_bytes=np.concatenate(eb),
        edge_batch_scaled=np.concatenate(bs),
        persistent_bytes=np.concatenate([np.tile(g.persistent_bytes[body], repeats), pad]),
        output_bytes=np.concatenate([np.tile(g.output_bytes[body], repeats), pad]),
        colocation=tiled_coloc, colocation_labels=tuple(range(ngrp * repeats)),
        backward=np.concatenate([np.tile(g.backward[body], repeats), ext_bwd]).astype(bool),
        names=ids, op_types=(rep(g.op_types, False) if g.op_types else ["op"] * n_body) + ["input"] * len(ext_ids),
        layers=layers + [""] * len(ext_ids),
        roles=(rep(g.roles, False) if g.roles else ["compute"] * n_body) + ["compute"] * len(ext_ids),
        name=name or f"{g.name}-x{repeats}", unit=g.unit,
        meta={"tiled": {"block": g.name, "repeats": repeats, "body_nodes": int(nb),
                        "external_nodes": len(ext_ids), "wiring": [list(w) if w else None for w in wiring],
                        "flops": block.flops * repeats},
              "cost": g.meta.get("cost", {})})
