"""The stages of a pipelined max-load split: which devices are stages and in what order
(:func:`stage_order`), and the ``torch.fx`` stage modules cut from the model's forward graph
(:func:`build_stages`, returning :class:`Stages`). :mod:`~dnnplace.pytorch.execution.pipeline` runs
them; its docstring states the rules (stages, stage modules, parameters)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dnnplace.graphs.errors import InputError

__all__ = ["Stages", "build_stages", "stage_order"]


@dataclass
class Stages:
    """The stage modules of a placement (see :mod:`~dnnplace.pytorch.execution.pipeline`)."""

    devices: list[str]                 # stage -> device name
    modules: list[Any]                 # stage -> torch.fx.GraphModule (forward of the stage)
    params: list[dict[str, str]]       # stage -> {module attribute: model parameter name}
    nodes: list[list[str]]             # stage -> graph node ids it holds
    recv: list[list[str]]              # stage -> fx values it receives (stage 0: the model inputs)
    recv_bytes: list[int]              # bytes received per micro-batch (the traced inputs' shapes)

    @property
    def n(self) -> int:
        return len(self.devices)

    def summary(self) -> list[dict]:
        return [{"stage": s, "device": self.devices[s], "nodes": len(self.nodes[s]),
                 "params": sorted(self.params[s].values()), "received": len(self.recv[s]) if s else 0,
                 "received_bytes": self.recv_bytes[s] if s else 0} for s in range(self.n)]


def stage_order(ids: Sequence[str], src: Sequence[int], dst: Sequence[int], placement: Mapping[str, str],
                device_names: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """Devices that hold a node, in pipeline order, and the stage of every node.

    A device's rank is the position of the first node it holds in the graph's trace order
    (a topological order) where a source node is moved just before its first consumer, so
    a parameter or an input does not make its device a stage of its own at the front.
    Ties (devices holding only unconsumed sources) follow ``device_names``.

    Raises :class:`InputError` unless every edge goes from a stage to the same or a later one.
    """
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    has_pred = np.zeros(n, dtype=bool)
    has_pred[np.asarray(dst, dtype=np.int64)] = True
    first_use = np.full(n, np.inf)
    np.minimum.at(first_use, np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.float64))
    move = ~has_pred & np.isfinite(first_use)
    pos[move] = first_use[move] - 0.5
    key: dict[str, float] = {}
    for v, name in enumerate(ids):
        d = placement[name]
        key[d] = min(key.get(d, np.inf), float(pos[v]))
    rank = {d: i for i, d in enumerate(device_names)}
    devices = sorted(key, key=lambda d: (key[d], rank.get(d, len(rank)), d))
    stage_of_dev = {d: s for s, d in enumerate(devices)}
    stage = np.array([stage_of_dev[placement[name]] for name in ids], dtype=np.int64)
    for u, v in sorted(zip(src, dst), key=lambda e: (e[1], e[0])):
        if stage[u] > stage[v]:
            raise InputError(f"not contiguous: node {ids[u]!r} on stage {stage[u]} ({devices[stage[u]]}) feeds "
                             f"node {ids[v]!r} on stage {stage[v]} ({devices[stage[v]]}); a pipeline needs every "
                             "edge to go to the same or a later stage (a contiguous max-load split)")
    return devices, stage


def _check_placement(placement: Mapping[str, str], ids: Sequence[str], device_names: Sequence[str]) -> None:
    known = set(ids)
    unknown = next((v for v in placement if v not in known), None)
    if unknown is not None:
        raise InputError(f"the result places node {unknown!r}, which the model's forward graph does not have "
                         "(--pipeline runs a plan made on a graph captured with --inference, from the same model "
                         "and input shapes; it traces the stages at the micro-batch size)")
    missing = next((v for v in ids if v not in placement), None)
    if missing is not None:
        raise InputError(f"the result does not place node {missing!r} of the model's forward graph")
    if device_names:
        names = set(device_names)
        bad = next((d for d in placement.values() if d not in names), None)
        if bad is not None:
            raise InputError(f"the result places nodes on device {bad!r}, which the cluster does not have")


def build_stages(net: Any, inputs: Sequence[Any], placement: Mapping[str, str],
                 device_names: Sequence[str] = ()) -> Stages:
    """Cut the forward graph of ``net`` into the stage modules of ``placement``.

    ``placement`` maps every node id of the forward graph (``trace(..., training=False)``,
    the graph ``dnnplace capture --inference`` writes) to a device name. The stage modules
    hold ``net``'s own parameters (shared, not copied). See :mod:`~dnnplace.pytorch.execution.pipeline`.

    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> x = torch.randn(6, 4)
    >>> first = {"param:0.weight", "param:0.bias", "input:input0", "addmm", "relu"}
    >>> from dnnplace.pytorch.capture.fx import trace
    >>> ids = trace(net, (x,), training=False).ids
    >>> st = build_stages(net, (x,), {v: "a" if v in first else "b" for v in ids})
    >>> st.devices, [sorted(p.values()) for p in st.params], st.recv[1]
    (['a', 'b'], [['0.bias', '0.weight'], ['2.bias', '2.weight']], ['relu'])
    >>> torch.allclose(st.modules[1](*st.modules[0](x))[0], net(x))
    True
    """
    from dnnplace.pytorch.capture.fx import trace

    cap = trace(net, tuple(inputs), training=False)
    ids = list(cap.ids)
    _check_placement(placement, ids, device_names)
    devices, stage_of = stage_order(ids, cap.src.tolist(), cap.dst.tolist(), placement, device_names)
    cut = _cut(cap, stage_of, devices)
    params = dict(net.named_parameters())
    buffers = dict(net.named_buffers())
    modules, stage_params, stage_nodes, recv_names, recv_bytes = [], [], [], [], []
    for s in range(len(devices)):
        mod, held, incoming, nbytes = _stage_module(s, cut, params, buffers)
        modules.append(mod)
        stage_params.append(held)
        stage_nodes.append([v for i, v in enumerate(ids) if stage_of[i] == s])
        recv_names.append([r.name for r in incoming])
        recv_bytes.append(int(nbytes))
    return Stages(devices=devices, modules=modules, params=stage_params, nodes=stage_nodes, recv=recv_names,
                  recv_bytes=recv_bytes)


@dataclass
class _Cut:
    """Where every value of the traced forward graph lives: each value that crosses as
    itself (a root) has a home stage (``None``: a view or constant, replayed where read),
    and ``carry_in[s]`` lists the roots stage ``s`` receives from the stage before it."""

    gm: Any                            # the traced torch.fx.GraphModule
    nodes: list[Any]                   # its nodes, in order
    kind: dict[Any, str]               # placeholder -> "param", "buffer" or "input"
    pname: dict[Any, str]              # placeholder -> the model's parameter or buffer name
    home: dict[Any, int | None]
    flat_out: list[Any]                # the graph's outputs, flattened
    carry_in: list[list[Any]]
    inputs_ph: list[Any]               # the model inputs' placeholders (stage 0 receives them)


def _cut(cap: Any, stage_of: np.ndarray, devices: Sequence[str]) -> _Cut:
    """The home stage of every value and what each stage receives; :class:`InputError`
    when a value would flow backwards or a stage reads nothing from the ones before it."""
    import torch.fx as fx

    from dnnplace.pytorch.capture.ops import is_view

    n_st = len(devices)
    gm = cap.gm
    nodes = list(gm.graph.nodes)
    order = {nd: i for i, nd in enumerate(nodes)}
    phs = [nd for nd in nodes if nd.op == "placeholder"]
    kind = {nd: k for nd, k in zip(phs, cap.arg_kinds)}
    pname = {nd: (a[6:] if a.startswith("model.") else a) for nd, a in zip(phs, cap.arg_names)}

    # home stage of every value that crosses as itself (a root); None: replayed where read
    home: dict[Any, int | None] = {}
    roots: dict[Any, frozenset] = {}

    def roots_of(nd: Any) -> frozenset:
        if nd not in roots:
            roots[nd] = (frozenset({nd}) if home[nd] is not None else
                         frozenset().union(*(roots_of(a) for a in nd.all_input_nodes)))
        return roots[nd]

    for nd in nodes:
        if nd.op == "placeholder":
            home[nd] = 0 if kind[nd] == "input" else int(stage_of[cap.rep[nd.name]])
        elif nd.op == "call_function" and nd.target is operator.getitem:
            base = roots_of(nd.all_input_nodes[0])   # one tensor of a multi-output op: where it is made
            home[nd] = max((home[r] for r in base), default=None)
        elif nd.op == "call_function" and not is_view(nd) and cap.rep.get(nd.name, -1) >= 0:
            home[nd] = int(stage_of[cap.rep[nd.name]])
        else:
            home[nd] = None                           # views, constants, the output
    out_node = next(nd for nd in nodes if nd.op == "output")
    flat_out = list(out_node.args[0]) if isinstance(out_node.args[0], (tuple, list)) else [out_node.args[0]]

    # which stages read each root
    need: dict[Any, set[int]] = {}
    for nd in nodes:
        if nd.op == "call_function" and home[nd] is not None:
            for a in nd.all_input_nodes:
                for r in roots_of(a):
                    need.setdefault(r, set()).add(home[nd])
    for a in flat_out:
        if isinstance(a, fx.Node):
            for r in roots_of(a):
                need.setdefault(r, set()).add(n_st - 1)
    carry_in: list[list[Any]] = [[] for _ in range(n_st)]
    for r in sorted(need, key=order.__getitem__):
        h = home[r]
        if min(need[r]) < h:   # the edge check above makes this unreachable for graph edges
            raise InputError(f"not contiguous: value {r.name!r} made on stage {h} is read on stage {min(need[r])}")
        for s in range(h + 1, max(need[r]) + 1):
            carry_in[s].append(r)
    for s in range(1, n_st):
        if not carry_in[s]:
            raise InputError(f"stage {s} ({devices[s]}) reads nothing from stages 0..{s - 1}: the split is not a "
                             "pipeline (stage 0 on its own would not reach the loss)")

    inputs_ph = [nd for nd in phs if kind[nd] == "input"]
    return _Cut(gm=gm, nodes=nodes, kind=kind, pname=pname, home=home, flat_out=flat_out, carry_in=carry_in,
                inputs_ph=inputs_ph)


def _stage_module(s: int, cut: _Cut, params: dict[str, Any], buffers: dict[str, Any]) -> tuple[Any, dict, list, int]:
    """Stage ``s``'s ``torch.fx.GraphModule``, the parameters it holds (``{attribute: model
    parameter name}``), the values it receives and their bytes per micro-batch."""
    import torch
    import torch.fx as fx

    from dnnplace.pytorch.execution.stage_fx import StageTracer, contiguous, grad_contiguous, restride

    gm, nodes, kind, pname, home = cut.gm, cut.nodes, cut.kind, cut.pname, cut.home
    n_st = len(cut.carry_in)

    g = fx.Graph(tracer_cls=StageTracer)   # so a pickled stage module is rebuilt with its boundary ops
    root = torch.nn.Module()
    env: dict[Any, Any] = {}
    held: dict[str, str] = {}
    incoming = cut.inputs_ph if s == 0 else cut.carry_in[s]
    nbytes = 0
    for k, r in enumerate(incoming):
        p = g.placeholder(f"in{k}_{r.name}")
        p.meta = dict(r.meta)
        val = r.meta.get("val")
        if s > 0 and isinstance(val, torch.Tensor):
            nbytes += val.numel() * val.element_size()
            if val.is_floating_point() or val.is_complex():
                p = g.call_function(grad_contiguous, (p,))
            if val.dim() and not val.is_contiguous():
                p = g.call_function(restride, (p, tuple(val.stride())))
        env[r] = p

    def value(a: Any, g=g, env=env, root=root, held=held, s=s) -> Any:
        if a in env:
            return env[a]
        if a.op == "placeholder":
            if home[a] != s or kind[a] == "input":
                raise RuntimeError(f"stage {s}: value {a.name!r} is neither held nor received")
            attr = f"p{len(root._parameters)}" if kind[a] == "param" else f"b{len(root._buffers)}"
            tensor = params.get(pname[a]) if kind[a] == "param" else buffers.get(pname[a])
            if tensor is None:
                raise InputError(f"the model has no parameter or buffer {pname[a]!r} of the forward graph")
            if kind[a] == "param":
                root.register_parameter(attr, tensor)
                held[attr] = pname[a]
            else:
                root.register_buffer(attr, tensor)
            env[a] = g.get_attr(attr)
        elif a.op == "get_attr":
            obj = getattr(gm, a.target)
            name = f"c_{a.target.replace('.', '_')}"
            setattr(root, name, obj)
            env[a] = g.get_attr(name)
        else:   # a replayed view, or a node of this stage reached through one
            if home[a] is not None and home[a] != s:
                raise RuntimeError(f"stage {s}: value {a.name!r} of stage {home[a]} was not received")
            env[a] = g.node_copy(a, lambda b: value(b))
        return env[a]

    mine = [nd for nd in nodes if nd.op == "call_function" and home[nd] == s]
    for nd in mine:
        value(nd)
    if s == n_st - 1:
        outs = [value(a) if isinstance(a, fx.Node) else a for a in cut.flat_out]
    else:
        outs = []
        for r in cut.carry_in[s + 1]:
            # every sent tensor made contiguous at run time: the real strides can differ
            # from the trace's (a CPU convolution's output, say); a no-op when they agree
            v = value(r)
            val = r.meta.get("val")
            outs.append(g.call_function(contiguous, (v,)) if isinstance(val, torch.Tensor) else v)
    g.output(tuple(outs))
    g.lint()
    mod = fx.GraphModule(root, g, class_name=f"Stage{s}")
    return mod, held, incoming, nbytes


