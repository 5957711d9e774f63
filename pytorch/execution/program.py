"""The per-device programs of a placed, ordered training step (no torch.distributed here).

A captured step (:class:`~dnnplace.pytorch.capture.fx.Captured`) is one ATen graph whose
operators were merged into the nodes of the :class:`~dnnplace.graphs.OpGraph` that the
placement methods see: every fx node belongs to one graph node (``cap.rep``; views and
``getitem`` belong to their producer). :func:`build_programs` turns a placement and a
per-device order of those graph nodes into one :class:`DeviceProgram` per device:

* **what runs**: each device's graph nodes in the given order; a node's *body* is its fx
  nodes in trace order, so running the bodies in any order that respects the graph runs
  the captured step; an ``apply:`` node (the optimizer update the capture adds per
  parameter) updates its parameter in place from the parameter's gradient;
* **what is sent** (docs/semantics.md 2.1): a tensor goes once to each device that consumes it. The
  unit sent is a *root* value: an fx value that is not a view of another tensor of the
  same graph node (``t``/``view``/``expand``/``detach`` of a root are replayed by the
  receiver, so a tensor and its views cross once). One :class:`Transfer` per (root,
  destination device), with a unique tag, so matched ``isend``/``irecv`` never depend on
  the order in which either side gets to them.
* **how it is sent** (docs/execution.md, "What is sent"): transfers from one device to
  another that are available at the same point go as one message, a :class:`Pack` (one
  ``isend``/``irecv`` of the tensors' bytes concatenated), where that delays no consumer:
  the outputs of one node, and the sends of a run of consecutive *free* nodes, which run no
  operator and wait for nothing (:func:`free_nodes`: parameters, buffers and inputs,
  ``param:*``, ``input:*``), sent together after the run's last node. A node that runs an
  operator is never waited for by another node's tensors: its sends go after it, alone.

Deadlock freedom. A device blocks only to wait for a received value before running the
node that reads it, and sends never block (``isend``). :func:`check_order` verifies that
the device orders together with the graph's edges are acyclic; then every value a device
waits for is produced by a node that precedes it in one global topological order, which
by induction runs, so every wait ends. An order with a cycle is refused before any
process starts, naming two nodes of the cycle. A pack of free nodes' tensors goes after the
run's last node instead of after each producer; the nodes between never block, so the pack
is sent whenever its first producer has run, and the argument holds unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.ops import is_view, require_torch, root_value

__all__ = ["Transfer", "Pack", "DeviceProgram", "build_programs", "check_order", "step_outputs", "grad_values",
           "free_nodes"]


@dataclass(frozen=True)
class Transfer:
    """One tensor (fx value ``value``, produced by graph node ``node``) sent from device
    ``src`` to device ``dst`` under ``tag``; ``shape``/``dtype`` let the receiver allocate."""

    tag: int
    value: str
    node: int
    src: int
    dst: int
    shape: tuple
    dtype: Any
    nbytes: int
    stride: tuple = ()     # the value's strides where it is not contiguous (restored on receipt)


@dataclass(frozen=True)
class Pack:
    """One message: transfers from ``src`` to ``dst`` sent together after node ``after``
    (tensors of one producer, or of a run of free nodes; see the module docstring). With
    several tensors the wire holds their bytes concatenated (``uint8``), in ``transfers``
    order: larger elements first, so every tensor's offset is a multiple of its element size."""

    id: int
    src: int
    dst: int
    after: int
    transfers: tuple[Transfer, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.transfers)


@dataclass
class DeviceProgram:
    """What one device runs: its graph nodes in order, the transfers it sends after each
    node (``sends[node]``) and the transfers it receives (``recvs``), plus, per node, the
    received root values it waits for before starting (``waits[node]``). ``packs_out[node]``
    are the messages it sends after ``node`` and ``packs_in`` those it receives."""

    device: int
    order: list[int]
    sends: dict[int, list[Transfer]] = field(default_factory=dict)
    recvs: list[Transfer] = field(default_factory=list)
    waits: dict[int, list[int]] = field(default_factory=dict)   # node -> tags
    packs_out: dict[int, list[Pack]] = field(default_factory=dict)
    packs_in: list[Pack] = field(default_factory=list)

    @property
    def n_bytes_in(self) -> int:
        return sum(t.nbytes for t in self.recvs)


def check_order(n: int, src: np.ndarray, dst: np.ndarray, device: np.ndarray,
                orders: Sequence[Sequence[int]], ids: Sequence[str]) -> None:
    """Raise :class:`InputError` unless the per-device orders cover every node once and,
    with the graph's edges, form an acyclic relation (so the step cannot deadlock)."""
    seen = np.zeros(n, dtype=np.int64)
    for d, order in enumerate(orders):
        for v in order:
            if device[v] != d:
                raise InputError(f"node {ids[v]!r} is ordered on device {d} but placed on device {device[v]}")
            seen[v] += 1
    if (seen != 1).any():
        v = int(np.flatnonzero(seen != 1)[0])
        raise InputError(f"node {ids[v]!r} appears {int(seen[v])} times in the device orders")
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, dtype=np.int64)
    for s, t in zip(src.tolist(), dst.tolist()):
        succ[s].append(t)
        indeg[t] += 1
    for order in orders:
        for a, b in zip(order[:-1], order[1:]):
            succ[a].append(b)
            indeg[b] += 1
    stack = [v for v in range(n) if indeg[v] == 0]
    done = 0
    while stack:
        v = stack.pop()
        done += 1
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    if done < n:
        stuck = np.flatnonzero(indeg > 0)
        names = ", ".join(repr(ids[v]) for v in stuck[:3])
        raise InputError(f"the device orders contradict the graph (a cycle through {names}"
                         f"{' ...' if len(stuck) > 3 else ''}): the step would deadlock")


def build_programs(cap: Any, device: np.ndarray, orders: Sequence[Sequence[int]]) -> list[DeviceProgram]:
    """One :class:`DeviceProgram` per device of ``orders`` (see the module docstring).

    ``device[v]`` is the device index of graph node ``v`` (``cap.ids`` order) and
    ``orders[d]`` the nodes of device ``d`` in the order it runs them.
    """
    torch = require_torch()
    n = cap.n
    device = np.asarray(device, dtype=np.int64)
    if device.shape != (n,):
        raise InputError(f"the placement has {device.shape[0]} nodes, the captured step {n}")
    check_order(n, cap.src, cap.dst, device, orders, cap.ids)
    for p, a in cap.apply_of.items():
        if device[p] != device[a]:
            raise InputError(f"{cap.ids[a]!r} is on device {device[a]} but its parameter {cap.ids[p]!r} on device "
                             f"{device[p]}: the executor updates a parameter where it lives (keep the colocation "
                             "group together)")
    rep = cap.rep
    progs = [DeviceProgram(device=d, order=list(o)) for d, o in enumerate(orders)]
    by_key: dict[tuple[str, int], Transfer] = {}

    def need(consumer: int, value_node: Any) -> None:
        """Graph node ``consumer`` reads fx value ``value_node``."""
        prod = rep.get(value_node.name, -1)
        if value_node.op == "get_attr" or prod < 0:
            return  # constants and producer-less views are on every device
        a, b = int(device[prod]), int(device[consumer])
        if a == b:
            return
        root = root_value(value_node, rep)
        val = root.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise InputError(f"operator {cap.ids[consumer]!r} on device {b} reads {root.name!r} "
                             f"({type(val).__name__}, not a tensor) from device {a}: only tensors can be sent")
        key = (root.name, b)
        t = by_key.get(key)
        if t is None:
            t = Transfer(tag=len(by_key), value=root.name, node=prod, src=a, dst=b, shape=tuple(val.shape),
                         dtype=val.dtype, nbytes=int(val.numel() * val.element_size()),
                         stride=() if val.is_contiguous() else tuple(val.stride()))
            by_key[key] = t
            progs[a].sends.setdefault(prod, []).append(t)
            progs[b].recvs.append(t)
        waits = progs[b].waits.setdefault(consumer, [])
        if t.tag not in waits:
            waits.append(t.tag)

    for nd in cap.gm.graph.nodes:
        if nd.op != "call_function":
            continue
        c = rep.get(nd.name, -1)
        if c < 0 or is_view(nd):
            continue  # views run where their value is needed (lazily, see the worker)
        for u in nd.all_input_nodes:
            for base in _view_sources(u, rep):
                need(c, base)
    # apply nodes read the parameter's gradient (an output of the joint graph)
    grads = grad_values(cap)
    for p, a in cap.apply_of.items():
        if grads.get(p) is not None:
            need(a, grads[p])
    _pack(progs, free_nodes(cap))
    return progs


def free_nodes(cap: Any) -> set[int]:
    """Graph nodes that run no operator: every fx node of theirs is a placeholder or a view
    (parameters, buffers, inputs), and no ``apply:`` update. Their sends may wait for the
    next such node's (module docstring) at no cost to any consumer."""
    from dnnplace.pytorch.capture.ops import is_view
    busy = set(cap.apply_of.values())
    for nd in cap.gm.graph.nodes:
        v = cap.rep.get(nd.name, -1)
        if v >= 0 and nd.op == "call_function" and not is_view(nd):
            busy.add(v)
    return set(range(cap.n)) - busy


def _pack(progs: list[DeviceProgram], free: set[int]) -> None:
    """Group each device's sends into :class:`Pack` messages: one per destination for each
    node, or for each run of consecutive free nodes that wait for nothing (sent after the
    run's last node, before the next node that runs an operator or waits)."""
    ids = 0
    for prog in progs:
        groups: list[list[int]] = [[]]
        for v in prog.order:
            if v in free and not prog.waits.get(v):
                groups[-1].append(v)
            else:   # a node that computes or waits: its own message(s), nothing joins it
                groups += [[v], []]
        for group in groups:
            if not group:
                continue
            by_dst: dict[int, list[Transfer]] = {}
            for v in group:
                for t in prog.sends.get(v, ()):
                    by_dst.setdefault(t.dst, []).append(t)
            for dst, ts in sorted(by_dst.items()):
                ts.sort(key=lambda t: -t.dtype.itemsize)   # stable: larger elements first (aligned offsets)
                p = Pack(id=ids, src=prog.device, dst=dst, after=group[-1], transfers=tuple(ts))
                ids += 1
                prog.packs_out.setdefault(group[-1], []).append(p)
                progs[dst].packs_in.append(p)


def step_outputs(cap: Any) -> tuple[Any, list[Any]]:
    """The fx nodes of the joint graph's outputs: the loss and, per parameter placeholder
    (in ``cap.arg_kinds`` order), its gradient (``None`` where the loss does not reach it)."""
    out = next(nd for nd in cap.gm.graph.nodes if nd.op == "output")
    flat = list(out.args[0])
    n_params = cap.arg_kinds.count("param")
    return flat[0], flat[len(flat) - n_params:]


def grad_values(cap: Any) -> dict[int, Any]:
    """Graph node of each parameter -> the fx node of its gradient (or ``None``)."""
    _, grads = step_outputs(cap)
    params = [nd for nd in cap.gm.graph.nodes if nd.op == "placeholder"][:len(grads)]
    return {cap.rep[nd.name]: g for nd, g in zip(params, grads)}


def _view_sources(u: Any, rep: dict[str, int]) -> list[Any]:
    """The values a consumer really needs to read ``u``: ``u`` itself, unless ``u`` is a
    view without a graph node (``rep == -1``), whose own inputs are then read."""
    if rep.get(u.name, -1) >= 0 or u.op != "call_function":
        return [u]
    out = []
    for w in u.all_input_nodes:
        out.extend(_view_sources(w, rep))
    return out
