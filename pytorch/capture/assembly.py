"""Wiring captured blocks into one graph: :class:`Block`, :class:`Call` and :func:`assemble`.

A :class:`Block` is a captured block as arrays with its ports; a :class:`Call` one instance
of it, reading its inputs from earlier calls' outputs or from model inputs. :func:`assemble`
copies every call's body with numpy and wires forward sources, cotangents (input gradients
accumulated by ``add`` nodes, or seeds) and the gradients of shared parameters, as
described in :mod:`dnnplace.pytorch.capture.tiling`, which builds the calls of a tiled stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph

__all__ = ["Block", "Call", "assemble"]


@dataclass(frozen=True)
class Block:
    """A captured block as arrays: its :class:`OpGraph` (ports included) and port indices.

    ``acc[j]`` is the ``(K,)`` compute row of one gradient-accumulation ``add`` of output
    ``j``'s shape (None: accumulation costs nothing, e.g. a hand-made block).
    """

    graph: OpGraph
    x: tuple
    g: tuple
    y: tuple
    gx: tuple
    flops: float = 0.0
    acc: tuple | None = None
    param_acc: dict | None = None

    @cached_property
    def params(self) -> list[tuple[int, int, int]]:
        """``(param, apply, grad producer or -1)`` per parameter node."""
        g = self.graph
        roles = g.roles or []
        out = []
        for p in (v for v, r in enumerate(roles) if r == "param"):
            a = next(int(v) for v in g.successors(p) if roles[v] == "apply")
            gi = next((int(u) for u in g.predecessors(a) if roles[u] == "grad"), -1)
            out.append((p, a, gi))
        return out

    @cached_property
    def body(self) -> np.ndarray:
        """Indices of the nodes every tile repeats (all but the x/g placeholders)."""
        keep = np.ones(self.graph.n, dtype=bool)
        keep[[p for p in (*self.x, *self.g) if p >= 0]] = False
        return np.flatnonzero(keep)


@dataclass(frozen=True)
class Call:
    """One instance of ``block`` in an assembled graph. ``inputs[i]`` is the source of the
    block's input ``i``: ``(call index, output j)`` of an earlier call or a string naming a
    model input (calls naming the same string share its node). ``prefix`` names the
    instance: node ids ``<prefix>/<id>``, layers ``<prefix>.<layer>``. ``share``: the index
    of an earlier call whose parameters this one uses, matched by position (the steps of
    one LSTM layer): its param and apply nodes are not copied, its parameter gradients are
    accumulated into the owner's apply nodes."""

    block: Block
    inputs: tuple
    prefix: str = ""
    share: int | None = None


def _layout(b: Block, lite: bool) -> tuple[np.ndarray, np.ndarray]:
    """Body nodes of a call (``lite``: without param and apply nodes) and the map block
    node -> position in that body (-1 if not copied)."""
    body = b.body
    if lite:
        shared = [v for pa in b.params for v in pa[:2]]
        body = body[~np.isin(body, shared)]
    loc = np.full(b.graph.n, -1, dtype=np.int64)
    loc[body] = np.arange(body.size)
    return body, loc


def _join(prefix: str, sep: str, value: str) -> str:
    return f"{prefix}{sep}{value}" if prefix and value else (value or prefix)


def assemble(calls: Sequence[Call], *, name: str = "assembled") -> OpGraph:
    """One graph of block instances wired as autograd would trace them (see
    :mod:`dnnplace.pytorch.capture.tiling`).

    Calls of the same :class:`Block` object are copied together with numpy, so a graph of
    many instances of few blocks (a 96-layer stack, a 16 x 1024 LSTM grid) takes seconds.
    ``meta["assembled"]`` records the calls' FLOP sum and the added nodes.
    """
    calls = list(calls)
    if not calls:
        raise InputError("assemble: no calls")
    a = _Assembly(calls)
    fsrc, readers = a.forward_sources()
    gsrc = a.cotangent_sources(readers)
    a.shared_gradients()
    return a.graph(*a.edges(fsrc, gsrc), name=name)


class _Assembly:
    """The state of one :func:`assemble`: every call's body nodes (``lay``: body and the map
    block node -> body position) at ``offset[k]``, then the added nodes ``extra`` (model
    inputs, seeds, accumulation adds), the accumulation edges and the role fixes of
    shared parameters' gradient producers."""

    def __init__(self, calls: list[Call]):
        kinds = calls[0].block.graph.kinds
        for k, c in enumerate(calls):
            if c.block.graph.kinds != kinds:
                raise InputError(f"assemble: block {c.block.graph.name!r} has kinds {c.block.graph.kinds}, "
                                 f"not {kinds}")
            if c.share is not None and not (0 <= c.share < k and calls[c.share].share is None and
                                            len(calls[c.share].block.params) == len(c.block.params)):
                raise InputError(f"assemble: call {k} ({c.prefix!r}) shares parameters with call {c.share}, which "
                                 "is not an earlier owner call of the same block")
        self.calls, self.kinds = calls, kinds
        self.owners = {c.share for c in calls if c.share is not None}
        layouts = {}
        for c in calls:
            key = (id(c.block), c.share is not None)
            if key not in layouts:
                layouts[key] = _layout(c.block, key[1])
        self.lay = [layouts[(id(c.block), c.share is not None)] for c in calls]
        self.offset = np.zeros(len(calls) + 1, dtype=np.int64)
        for k in range(len(calls)):
            self.offset[k + 1] = self.offset[k] + self.lay[k][0].size
        self.n_body = int(self.offset[-1])
        self.extra: list[tuple] = []  # (id, compute row or None, output bytes, backward, op type, layer)
        self.ext_of: dict[str, int] = {}
        self.acc_edges: list[tuple[int, int, float]] = []
        self.fixes: list[tuple[int, str, int]] = []  # (node, role, colocation of node or -1)
        self.pidx = {id(c.block): {v: (i, w) for i, pa in enumerate(c.block.params) for w, v in enumerate(pa[:2])}
                     for c in calls if c.share is not None}

    def new_node(self, label, row, out_bytes, backward, op, layer) -> int:
        self.extra.append((label, row, out_bytes, backward, op, layer))
        return self.n_body + len(self.extra) - 1

    def glob(self, k: int, v: int) -> int:
        """The assembled node of block node ``v`` of call ``k`` (a sharing call's param and
        apply nodes are its owner's)."""
        i = self.lay[k][1][v]
        if i >= 0:
            return int(self.offset[k] + i)
        o = self.calls[k].share
        idx, which = self.pidx[id(self.calls[k].block)][v]
        return self.glob(o, self.calls[o].block.params[idx][which])

    def accumulate(self, grads: list[int], row, nbytes: float, label: str, layer: str) -> int:
        src = grads[0]
        for other in grads[1:]:  # autograd's accumulation: k - 1 adds for k gradients
            a = self.new_node(f"{label}_{len(self.extra)}", row, nbytes, True, "add", layer)
            self.acc_edges.extend([(src, a, nbytes), (other, a, nbytes)])
            src = a
        return src

    def forward_sources(self) -> tuple[list[list[int]], dict[tuple[int, int], list[tuple[int, int]]]]:
        """The global producer feeding every (call, input), and the readers of every
        (call, output j)."""
        calls = self.calls
        readers: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (call, output j) -> [(call, input i)]
        fsrc: list[list[int]] = []
        for k, c in enumerate(calls):
            if len(c.inputs) != len(c.block.x):
                raise InputError(f"assemble: call {k} ({c.prefix!r}) gives {len(c.inputs)} inputs to a block with "
                                 f"{len(c.block.x)}")
            row = []
            for i, s in enumerate(c.inputs):
                if isinstance(s, str):
                    if s not in self.ext_of:
                        self.ext_of[s] = self.new_node(s, None, float(c.block.graph.output_bytes[c.block.x[i]]),
                                                       False, "input", "")
                    row.append(self.ext_of[s])
                    continue
                k0, j = s
                if not (0 <= k0 < k and 0 <= j < len(calls[k0].block.y)):
                    raise InputError(f"assemble: call {k} ({c.prefix!r}) input {i} reads {s}, not an output of an "
                                     "earlier call")
                row.append(self.glob(k0, calls[k0].block.y[j]))
                readers.setdefault((k0, j), []).append((k, i))
            fsrc.append(row)
        return fsrc, readers

    def cotangent_sources(self, readers: dict[tuple[int, int], list[tuple[int, int]]]) -> dict[tuple[int, int], int]:
        """The cotangent of every (call, output j) that has a g port: its readers' input
        gradients accumulated, or a seed node."""
        calls = self.calls
        gsrc: dict[tuple[int, int], int] = {}
        for k, c in enumerate(calls):
            b = c.block
            for j, gp in enumerate(b.g):
                if gp < 0:
                    continue
                rd = readers.get((k, j), [])
                grads = [self.glob(k2, calls[k2].block.gx[i]) for k2, i in rd if calls[k2].block.gx[i] >= 0]
                nbytes = float(b.graph.output_bytes[gp])
                if not grads:
                    if rd:
                        raise InputError(f"assemble: output {j} of call {k} ({c.prefix!r}) expects a cotangent but "
                                         "none of its readers takes a gradient; capture the block without it")
                    grads = [self.new_node(_join("seed", "/", _join(c.prefix, "/", f"g{j}")), None, nbytes, True,
                                           "input", "")]
                row = b.acc[j] if b.acc is not None and b.acc[j] is not None else np.zeros(len(self.kinds))
                layer = _join(c.prefix, ".", b.graph.layers[b.y[j]] if b.graph.layers else "")
                gsrc[(k, j)] = self.accumulate(grads, row, nbytes, _join(c.prefix, "/", f"accumulate{j}"), layer)
        return gsrc

    def shared_gradients(self) -> None:
        """Shared parameters: every sharing call's gradient accumulated into the owner's apply."""
        calls = self.calls
        for k0 in sorted(self.owners):
            c0 = calls[k0]
            b = c0.block
            group = [k0] + [k for k, c in enumerate(calls) if c.share == k0]
            for idx, (p, a, gi) in enumerate(b.params):
                if gi < 0:
                    continue
                grads = [self.glob(k, calls[k].block.params[idx][2]) for k in group
                         if calls[k].block.params[idx][2] >= 0]
                pb = float(b.graph.persistent_bytes[p])
                row = b.param_acc.get(p) if b.param_acc else None
                row = row if row is not None else np.zeros(len(self.kinds))
                final = self.accumulate(grads, row, pb, _join(c0.prefix, "/", f"accumulate:{b.graph.ids[p]}"),
                                        _join(c0.prefix, ".", b.graph.layers[p] if b.graph.layers else ""))
                self.acc_edges.append((final, self.glob(k0, a), pb))
                self.fixes.extend((v, "compute", -1) for v in grads)
                self.fixes.append((final, "grad", self.glob(k0, p)))

    def edges(self, fsrc: list[list[int]], gsrc: dict[tuple[int, int], int]) -> tuple[list, list, list]:
        """Edge parts: inside every call, then from sources to port consumers, then the
        accumulation edges (copied per group of calls of one block)."""
        calls = self.calls
        src_l, dst_l, eb_l = [], [], []
        groups: dict[tuple, list[int]] = {}
        for k, c in enumerate(calls):
            groups.setdefault((id(c.block), c.share is not None, k in self.owners), []).append(k)
        for (_, lite, owner), ks_list in groups.items():
            ks = np.array(ks_list, dtype=np.int64)
            b = calls[ks_list[0]].block
            g, loc = b.graph, self.lay[ks_list[0]][1]
            params = [pa[0] for pa in b.params]
            applies = np.array([pa[1] for pa in b.params], dtype=np.int64)
            ports = np.array([p for p in (*b.x, *b.g) if p >= 0] + (params if lite else []), dtype=np.int64)
            roles = np.array(g.roles) if g.roles else np.full(g.n, "compute")
            drop = np.isin(g.dst, applies) & ((roles[g.src] == "grad") if owner else lite)
            inner = ~(np.isin(g.src, ports) | np.isin(g.dst, ports) | drop)
            off = self.offset[ks][:, None]
            src_l.append((loc[g.src[inner]][None, :] + off).ravel())
            dst_l.append((loc[g.dst[inner]][None, :] + off).ravel())
            eb_l.append(np.tile(g.edge_bytes[inner], ks.size))
            wired = [(b.x[i], np.array([fsrc[k][i] for k in ks], dtype=np.int64)) for i in range(len(b.x))]
            wired += [(gp, np.array([gsrc[(int(k), j)] for k in ks], dtype=np.int64)) for j, gp in enumerate(b.g)
                      if gp >= 0]
            if lite:
                wired += [(p, np.array([self.glob(int(k), p) for k in ks], dtype=np.int64)) for p in params]
            for port, sources in wired:
                e = g.out_eid[g.out_ptr[port]:g.out_ptr[port + 1]]
                e = e[(loc[g.dst[e]] >= 0) & ~drop[e]]
                src_l.append(np.repeat(sources, e.size))
                dst_l.append((loc[g.dst[e]][None, :] + off).ravel())
                eb_l.append(np.tile(g.edge_bytes[e], ks.size))
        if self.acc_edges:
            src_l.append(np.array([a for a, _, _ in self.acc_edges], dtype=np.int64))
            dst_l.append(np.array([d for _, d, _ in self.acc_edges], dtype=np.int64))
            eb_l.append(np.array([x for _, _, x in self.acc_edges], dtype=np.float64))
        return src_l, dst_l, eb_l

    def graph(self, src_l: list, dst_l: list, eb_l: list, *, name: str) -> OpGraph:
        """The assembled graph: call bodies in call order, then the added nodes; parallel
        edges merged as the capture does (bytes summed, capped at the producer's bytes)."""
        calls, lay, extra = self.calls, self.lay, self.extra

        def per_call(get):
            return [get(c.block)[lay[k][0]] for k, c in enumerate(calls)]

        n_extra = len(extra)
        k_n = len(self.kinds)
        out_b = np.concatenate(per_call(lambda b: b.graph.output_bytes) + [np.array([e[2] for e in extra])])
        pers = np.concatenate(per_call(lambda b: b.graph.persistent_bytes) + [np.zeros(n_extra)])
        comp = np.vstack(per_call(lambda b: b.graph.compute)
                         + [np.array([e[1] if e[1] is not None else np.zeros(k_n) for e in extra])
                            .reshape(n_extra, k_n)])
        mem = np.concatenate(per_call(lambda b: b.graph.memory) + [np.array([e[2] for e in extra])])
        bwd = np.concatenate(per_call(lambda b: b.graph.backward) + [np.array([e[3] for e in extra], dtype=bool)])
        coloc_parts, ngrp = [], 0
        for k, c in enumerate(calls):
            col = c.block.graph.colocation[lay[k][0]]
            coloc_parts.append(np.where(col >= 0, col + ngrp, -1))
            ngrp += int(col.max()) + 1 if col.size and col.max() >= 0 else 0
        coloc = np.concatenate(coloc_parts + [np.full(n_extra, -1, dtype=np.int64)])

        def strings(attr, fmt, default):
            out = []
            for k, c in enumerate(calls):
                vals = getattr(c.block.graph, attr)
                out += [fmt(c.prefix, vals[v] if vals else default) for v in lay[k][0]]
            return out

        ids = strings("ids", lambda p, v: _join(p, "/", str(v)), "") + [e[0] for e in extra]
        layers = strings("layers", lambda p, v: _join(p, ".", v), "") + [e[5] for e in extra]
        op_types = strings("op_types", lambda p, v: v, "op") + [e[4] for e in extra]
        roles = strings("roles", lambda p, v: v, "compute") + ["compute"] * n_extra
        for v, role, like in self.fixes:
            roles[v] = role
            coloc[v] = coloc[like] if like >= 0 else -1
        used, coloc_c = np.unique(coloc[coloc >= 0], return_inverse=True)
        coloc[coloc >= 0] = coloc_c
        src, dst, eb = np.concatenate(src_l), np.concatenate(dst_l), np.concatenate(eb_l)
        n = self.n_body + n_extra
        key, inv = np.unique(src * n + dst, return_inverse=True)
        src, dst = key // n, key % n
        eb = np.minimum(np.bincount(inv, weights=eb, minlength=key.size), np.maximum(out_b[src], pers[src]))
        roles_a = np.array(roles)
        batch_scaled = ~((roles_a[src] == "param") | (roles_a[dst] == "apply"))
        first = calls[0].block.graph
        return OpGraph(ids=ids, kinds=self.kinds, compute=comp, memory=mem, src=src, dst=dst, edge_bytes=eb,
                       edge_batch_scaled=batch_scaled, persistent_bytes=pers, output_bytes=out_b, colocation=coloc,
                       colocation_labels=tuple(range(used.size)), backward=bwd, names=ids, op_types=op_types,
                       layers=layers, roles=roles, name=name, unit=first.unit,
                       meta={"assembled": {"calls": len(calls), "blocks": len({id(c.block) for c in calls}),
                                           "flops": float(sum(c.block.flops for c in calls)),
                                           "added_nodes": n_extra,
                                           "accumulations": sum(e[4] == "add" for e in extra)},
                             "cost": first.meta.get("cost", {})})
