"""Tarnawski et al.'s JSON inputs and expert splits (docs/semantics.md 4), read and written back.

Input file: ``{maxSizePerFPGA, maxFPGAs, maxCPUs, nodes: [{id, supportedOnFpga,
cpuLatency, fpgaLatency, isBackwardNode, colorClass?, size, name?, layerId?}],
edges: [{sourceId, destId, cost, size?}]}``. It maps onto the framework's model as:
kinds ``("acc", "cpu")``; ``fpgaLatency`` is the ``acc`` time (absent when
``supportedOnFpga`` is 0); ``size`` is the node's ``memory``; ``colorClass`` its
colocation group; an edge's ``cost`` its explicit transfer time and ``size`` its bytes;
the cluster is :meth:`dnnplace.graphs.cluster.Cluster.tarnawski` ``(maxFPGAs, maxCPUs,
maxSizePerFPGA)``. Fields the model has no slot for are kept in ``graph.meta`` so that
writing the instance back gives the same JSON document.

Split file: ``{"cpus": [{"nodes": [...]}], "fpgas": [{"nodes": [...]}]}``; FPGA slot
``i`` is device ``acc{i}`` and CPU slot ``i`` is ``cpu{i}``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import MAX_DEVICES, Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.placement import Placement

__all__ = ["is_tarnawski", "is_split", "instance_from_tarnawski", "instance_to_tarnawski",
           "placement_from_split", "placement_to_split"]

_NODE_KEYS = ("id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode", "colorClass",
              "size", "name", "layerId")
_EDGE_KEYS = ("sourceId", "destId", "cost", "size")


def is_tarnawski(doc: Any) -> bool:
    """True for a Tarnawski input document (recognised by any of its top-level fields or
    its node fields, so that a file missing one field gets an error naming that field)."""
    if not isinstance(doc, dict) or "format" in doc:
        return False
    if any(k in doc for k in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs")):
        return True
    nodes = doc.get("nodes")
    return (isinstance(nodes, list) and bool(nodes) and isinstance(nodes[0], dict)
            and any(k in nodes[0] for k in ("supportedOnFpga", "cpuLatency", "fpgaLatency")))


def is_split(doc: Any) -> bool:
    """True for a Tarnawski split document."""
    return isinstance(doc, dict) and "fpgas" in doc and "nodes" not in doc


def _num(rec: dict, key: str, where: str) -> float:
    if key not in rec:
        raise InputError(f"{where}: missing field {key!r}")
    val = rec[key]
    if isinstance(val, int) and not isinstance(val, bool) and abs(val) > 1e308:  # 10**400: absurd, not inf
        raise InputError(f"{where}: field {key!r} is a {len(str(abs(val)))}-digit number, too large for a 64-bit "
                         "float")
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
        raise InputError(f"{where}: field {key!r} must be a finite number, got {val!r}")
    if val < 0:
        raise InputError(f"{where}: field {key!r} must be >= 0, got {val!r}")
    return float(val)


def _flag(rec: dict, key: str, where: str, default: bool | None = None) -> bool:
    if key not in rec:
        if default is None:
            raise InputError(f"{where}: missing field {key!r}")
        return default
    val = rec[key]
    if val not in (0, 1):  # also accepts True/False
        raise InputError(f"{where}: field {key!r} must be 0/1 or a boolean, got {val!r}")
    return bool(val)


def _spellings(recs: list, keys: tuple) -> dict:
    """``{key: {"int": [positions], "bool": [positions]}}`` of values not spelled as the
    writer's default (floats for numbers, ints for flags)."""
    out: dict = {}
    for key in keys:
        ints = [j for j, r in enumerate(recs) if type(r.get(key)) is int]
        bools = [j for j, r in enumerate(recs) if type(r.get(key)) is bool]
        if ints or bools:
            out[key] = {"int": ints, "bool": bools}
    return out


def _respell(rec: dict, j: int, types: dict) -> None:
    for key, where in types.items():
        if key not in rec:
            continue
        if j in where["bool"]:
            rec[key] = bool(rec[key])
        elif j in where["int"] and float(rec[key]).is_integer():
            rec[key] = int(rec[key])


def instance_from_tarnawski(doc: dict, name: str = "graph", source: str | None = None) -> Instance:
    """Build an :class:`Instance` from a parsed Tarnawski input document."""
    for key in ("maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges"):
        if key not in doc:
            raise InputError(f"{source or name}: missing top-level field {key!r}")
    nodes, edges = doc["nodes"], doc["edges"]
    if not isinstance(nodes, list) or not isinstance(edges, list):
        raise InputError(f"{source or name}: 'nodes' and 'edges' must be lists of records")
    if not nodes:
        raise InputError(f"{source or name}: graph {name!r} has no nodes")
    n = len(nodes)
    ids, compute, memory, backward, coloc_raw = [], np.full((n, 2), np.nan), np.zeros(n), np.zeros(n, bool), []
    names, layers, unsupported_acc, extra = [], [], {}, {}
    for i, rec in enumerate(nodes):
        if not isinstance(rec, dict) or "id" not in rec:
            raise InputError(f"nodes[{i}]: missing field 'id'")
        where = f"node {rec['id']!r}"
        ids.append(rec["id"])
        supported = _flag(rec, "supportedOnFpga", where)
        acc = _num(rec, "fpgaLatency", where) if "fpgaLatency" in rec or supported else None
        if supported:
            compute[i, 0] = acc
        elif "fpgaLatency" in rec:
            unsupported_acc[i] = rec["fpgaLatency"]
        compute[i, 1] = _num(rec, "cpuLatency", where)
        memory[i] = _num(rec, "size", where)
        backward[i] = _flag(rec, "isBackwardNode", where, default=False)
        coloc_raw.append(rec.get("colorClass"))
        names.append(rec.get("name"))
        layers.append(rec.get("layerId"))
        for key in rec.keys() - set(_NODE_KEYS):
            extra.setdefault(key, {})[i] = rec[key]
    labels = sorted({c for c in coloc_raw if c is not None}, key=lambda c: (str(type(c)), c))
    code = {c: j for j, c in enumerate(labels)}
    coloc = np.array([code[c] if c is not None else -1 for c in coloc_raw], dtype=np.int64)
    idx = {str(v): i for i, v in enumerate(ids)}
    m = len(edges)
    src, dst, cost, nbytes = np.zeros(m, np.int64), np.zeros(m, np.int64), np.zeros(m), np.zeros(m)
    has_size = np.ones(m, bool)
    for j, rec in enumerate(edges):
        where = f"edge #{j} ({rec.get('sourceId')!r}->{rec.get('destId')!r})"
        for key, arr in (("sourceId", src), ("destId", dst)):
            if key not in rec:
                raise InputError(f"{where}: missing field {key!r}")
            if str(rec[key]) not in idx:
                raise InputError(f"{where}: {key} {rec[key]!r} is not a node")
            arr[j] = idx[str(rec[key])]
        cost[j] = _num(rec, "cost", where)
        if "size" in rec:
            nbytes[j] = _num(rec, "size", where)
        else:
            has_size[j] = False
    meta = {"tarnawski": {
        "top": {k: v for k, v in doc.items() if k not in ("nodes", "edges")},
        "node_keys": [[k for k in rec.keys() if k in _NODE_KEYS] for rec in nodes],
        # JSON number and flag spellings per value (0 vs 0.0, 1 vs true), so that writing
        # back gives a document identical in types as well as in values
        "node_types": _spellings(nodes, ("supportedOnFpga", "isBackwardNode", "cpuLatency",
                                         "fpgaLatency", "size")),
        "edge_types": _spellings(edges, ("cost", "size")),
        "unsupported_acc": unsupported_acc,
        "node_extra": extra,
        "edge_has_size": None if has_size.all() else has_size.tolist(),
    }}
    graph = OpGraph(ids=ids, kinds=("acc", "cpu"), compute=compute, memory=memory, src=src, dst=dst,
                    edge_bytes=nbytes, edge_cost=cost, colocation=coloc, colocation_labels=labels,
                    backward=backward, names=names, layers=layers, name=name, unit="ms", meta=meta)
    n_acc, n_cpu = doc["maxFPGAs"], doc["maxCPUs"]
    for key, val in (("maxFPGAs", n_acc), ("maxCPUs", n_cpu)):
        if isinstance(val, bool) or not isinstance(val, (int, float)) or val < 0 or int(val) != val:
            raise InputError(f"{source or name}: {key} must be a non-negative integer, got {val!r}")
        if val > MAX_DEVICES:  # a cluster of D devices holds D x D link arrays
            shown = val if val < 1e12 else f"a {len(str(int(val)))}-digit number"
            raise InputError(f"{source or name}: {key} is {shown}; at most {MAX_DEVICES} devices are supported")
    cluster = Cluster.tarnawski(int(n_acc), int(n_cpu), _num(doc, "maxSizePerFPGA", source or name))
    return Instance(graph, cluster, source)


def instance_to_tarnawski(inst: Instance) -> dict:
    """The Tarnawski JSON document of an instance (inverse of :func:`instance_from_tarnawski`)."""
    g, cl = inst.graph, inst.require_cluster()
    acc_k = g.kind_index("acc")
    cpu_k = g.kind_index("cpu")
    if cpu_k < 0:
        raise InputError(f"graph {g.name!r} has no 'cpu' compute column; Tarnawski files need cpuLatency")
    tmeta = g.meta.get("tarnawski", {})
    limit = cl.meta.get("device_limit", {})
    accs = cl.devices_of_kind("acc")
    top = dict(tmeta.get("top", {}))
    cap = float(cl.memory[accs[0]]) if accs.size else float(top.get("maxSizePerFPGA", 0.0))
    if not (isinstance(top.get("maxSizePerFPGA"), int) and cap == top["maxSizePerFPGA"]):
        top["maxSizePerFPGA"] = cap
    top["maxFPGAs"] = int(limit.get("acc", accs.size))
    top["maxCPUs"] = int(limit.get("cpu", cl.devices_of_kind("cpu").size))
    key_orders = tmeta.get("node_keys")
    unsupported = {int(k): v for k, v in tmeta.get("unsupported_acc", {}).items()}
    extra = tmeta.get("node_extra", {})
    node_types = {k: {"int": set(v["int"]), "bool": set(v["bool"])} for k, v in tmeta.get("node_types", {}).items()}
    edge_types = {k: {"int": set(v["int"]), "bool": set(v["bool"])} for k, v in tmeta.get("edge_types", {}).items()}
    nodes = []
    for i in range(g.n):
        acc = g.compute[i, acc_k] if acc_k >= 0 else math.nan
        rec: dict[str, Any] = {
            "id": g.ids[i],
            "supportedOnFpga": int(not math.isnan(acc)),
            "cpuLatency": float(g.compute[i, cpu_k]),
            "fpgaLatency": unsupported.get(i, 0.0) if math.isnan(acc) else float(acc),
            "isBackwardNode": int(g.backward[i]),
            "size": float(g.memory[i]),
        }
        _respell(rec, i, node_types)
        if g.colocation[i] >= 0:
            rec["colorClass"] = g.colocation_labels[g.colocation[i]]
        if g.names is not None and g.names[i] is not None:
            rec["name"] = g.names[i]
        if g.layers is not None and g.layers[i] is not None:
            rec["layerId"] = g.layers[i]
        if key_orders is not None and len(key_orders) == g.n:
            order = key_orders[i]
            rec = {k: rec[k] for k in order if k in rec} | {k: v for k, v in rec.items() if k not in order}
            if "isBackwardNode" not in order and not g.backward[i]:
                del rec["isBackwardNode"]  # optional field, absent from the source file
        for key, vals in extra.items():
            if i in vals or str(i) in vals:
                rec[key] = vals.get(i, vals.get(str(i)))
        nodes.append(rec)
    has_size = tmeta.get("edge_has_size")
    cost = g.edge_cost
    if np.isnan(cost).any():
        raise InputError(f"graph {g.name!r}: Tarnawski files need an explicit cost on every edge")
    edges = []
    for j in range(g.m):
        rec = {"sourceId": g.ids[g.src[j]], "destId": g.ids[g.dst[j]], "cost": float(cost[j])}
        if has_size is None or has_size[j]:
            rec["size"] = float(g.edge_bytes[j])
        _respell(rec, j, edge_types)
        edges.append(rec)
    return {**top, "nodes": nodes, "edges": edges}


def placement_from_split(doc: dict, inst: Instance) -> Placement:
    """Read an expert split onto ``inst``; nodes it omits follow their colocation group.

    Training graphs whose published split covers only the forward (inference) nodes are
    extended this way: a backward node goes where its forward partner (same
    ``colorClass``) is. A split that uses more accelerators or CPUs than the instance
    allows is placed on a wider Tarnawski cluster whose ``device_limit`` keeps the
    instance's counts, so the evaluator scores it and reports the violation.
    """
    g, cl = inst.graph, inst.require_cluster()
    fpgas, cpus = doc.get("fpgas", []), doc.get("cpus", [])
    if not isinstance(fpgas, list) or not isinstance(cpus, list):
        raise InputError("split file: 'fpgas' and 'cpus' must be lists of {'nodes': [...]}")
    n_acc, n_cpu = cl.devices_of_kind("acc").size, cl.devices_of_kind("cpu").size
    if len(fpgas) > n_acc or len(cpus) > n_cpu:
        accs = cl.devices_of_kind("acc")
        mem = float(cl.memory[accs[0]]) if accs.size else math.inf
        wide = Cluster.tarnawski(max(len(fpgas), n_acc), max(len(cpus), n_cpu), mem)
        wide.meta["device_limit"] = dict(cl.meta.get("device_limit", {"acc": n_acc, "cpu": n_cpu}))
        cl = wide
    dev = np.full(g.n, -1, dtype=np.int64)
    for prefix, slots in (("acc", fpgas), ("cpu", cpus)):
        for s, slot in enumerate(slots):
            d = cl.index_of(f"{prefix}{s}")
            for node in slot.get("nodes", []):
                i = g.index_of(node)
                if dev[i] >= 0:
                    raise InputError(f"split places node {node!r} twice ({cl.names[dev[i]]} and {cl.names[d]})")
                dev[i] = d
    missing = dev < 0
    if missing.any():
        group_dev = {}
        for i in np.flatnonzero(~missing & (g.colocation >= 0)):
            group_dev.setdefault(int(g.colocation[i]), int(dev[i]))
        for i in np.flatnonzero(missing):
            dev[i] = group_dev.get(int(g.colocation[i]), -1)
        still = np.flatnonzero(dev < 0)
        if still.size:
            raise InputError(f"split leaves {still.size} node(s) unplaced and they have no placed "
                             f"colocation partner, e.g. node {g.ids[still[0]]!r}")
    return Placement(g, cl, dev)


def placement_to_split(p: Placement, loads: dict[str, float] | None = None) -> dict:
    """A Tarnawski split document for a placement on accelerators (``acc*``) and CPUs."""
    out: dict[str, Any] = {"cpus": [], "fpgas": []}
    for d, dev in enumerate(p.cluster.devices):
        key = {"acc": "fpgas", "cpu": "cpus"}.get(dev.kind)
        if key is None:
            raise InputError(f"device {dev.name!r} of kind {dev.kind!r} has no slot in a Tarnawski split")
        nodes = [p.graph.ids[i] for i in p.nodes_on(d)]
        out[key].append({"load": (loads or {}).get(dev.name, -1), "nodes": nodes})
    out["maxLoad"] = max(loads.values()) if loads else -1
    return out
