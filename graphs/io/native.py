"""The framework's native, versioned graph JSON (``format: "dnnplace.graph/1"``).

Column-oriented so that a 200k-node graph loads in a fraction of a second::

    {"format": "dnnplace.graph/1", "name": "g", "unit": "ms", "kinds": ["gpu", "cpu"],
     "nodes": {"id": [...], "compute": {"gpu": [0.8, null, ...], "cpu": [...]},
               "memory": [...], "persistent_bytes": [...], "output_bytes": [...],
               "colocation": [label or null, ...], "backward": [bool, ...],
               "name": [...], "op_type": [...], "layer": [...], "role": [...]},
     "edges": {"src": [id, ...], "dst": [id, ...], "bytes": [...], "cost": [num or null],
               "batch_scaled": [bool, ...], "output": [int, ...]},
     "cluster": {"name": ..., "devices": [{"name", "kind", "memory", "speed", "op_overhead",
                                     "send_overhead", "recv_overhead"}],
                 "beta0": [[...]], "beta1": [[...]], "cost_factor": [[...]], "meta": {},
                 "ports": "per_link" or "shared"},
     "meta": {}}

``null`` in a compute column means "cannot run on this kind"; ``null`` memory of a
device means unbounded. ``NaN`` (which Python's JSON parser accepts) is an error
everywhere, naming the node or edge and the field: only ``null`` marks a value absent.
A graph without nodes is an error too (``graph 'g' has no nodes``), in both forms.
Only ``id``, ``compute`` and ``memory`` are required per node, only ``src``/``dst`` per
edge. Captured training graphs (:mod:`dnnplace.pytorch.capture`) also carry, per node,
``op_type`` (the ATen op), ``layer`` (the module path), ``backward`` and ``role``
(``param``/``grad``/``apply``/``compute``), and per edge ``batch_scaled`` (whether its
bytes grow with the batch; default true); all are optional and round-trip. Per edge,
``output`` (an integer >= 0, default 0) names which output of the source node the edge
carries: edges of one source with the same output carry one tensor, sent once to each
device that consumes it (docs/semantics.md 2.1). For
hand-written files, ``nodes`` and ``edges`` may also be lists of records
(``{"id": 1, "compute": {"gpu": 0.8}, "memory": 0}``, ``{"src": 1, "dst": 2, "bytes": 4096}``);
a record's ``compute`` maps kinds to times like the column (a bare number is an error: it
names no kind). ``backward`` and ``batch_scaled`` are JSON booleans (``"yes"``, ``1`` are
errors naming the node or edge), and ``format`` must be :data:`FORMAT` exactly: another
version (``dnnplace.graph/2``) is an error, not read as this one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster, Device, check_device_count
from dnnplace.graphs.columns import user_column
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance

__all__ = ["FORMAT", "is_native", "instance_from_native", "instance_to_native",
           "cluster_from_dict", "cluster_to_dict"]

FORMAT = "dnnplace.graph/1"


def is_native(doc: Any) -> bool:
    """True for a native graph document."""
    return isinstance(doc, dict) and str(doc.get("format", "")).startswith("dnnplace.graph/")


def _check_format(doc: dict, where: str) -> None:
    """Only :data:`FORMAT` is read: a later version's fields may mean something else (a
    document built in code may leave ``format`` out)."""
    if "format" in doc and doc["format"] != FORMAT:
        raise InputError(f"{where}: format {doc.get('format')!r} is not one this dnnplace reads (it reads "
                         f"{FORMAT!r}); convert the file, or use the dnnplace that wrote it")


def _column(values: Any, n: int, field: str, allow_null: bool = False, owner=None,
            null_means: str = "absent") -> np.ndarray:
    """A float column; ``owner(i)`` names the node or edge of entry ``i`` in errors.
    ``null`` is allowed only where ``allow_null``; ``NaN`` never (see
    :func:`dnnplace.graphs.columns.user_column`)."""
    return user_column(values, field=field, owner=owner, nullable=allow_null, n=n, null_means=null_means)


_NO_COST = "without an explicit cost (the link model applies)"


def _output_column(values: Any, m: int, owner) -> np.ndarray:
    """The edges' ``output`` column: integers >= 0 (``null`` = 0), the edge named in errors."""
    if not isinstance(values, list) or len(values) != m:
        raise InputError(f"edge field 'output': expected a list of {m} integers")
    out = np.zeros(m, dtype=np.int64)
    for j, x in enumerate(values):
        if x is None:
            continue
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise InputError(f"{owner(j)}: field 'output' must be an integer >= 0, got {x!r}")
        out[j] = x
    return out


def _bool_column(values: Any, count: int, field: str, owner) -> list[bool] | None:
    """A column of JSON booleans (``backward``, ``batch_scaled``); ``"yes"``, ``1`` or
    ``null`` are errors naming the entry (``owner(i)``) and the field."""
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != count:
        raise InputError(f"field {field!r}: expected a list of {count} booleans (true or false)")
    for j, x in enumerate(values):
        if not isinstance(x, bool):
            what = f"a string {x!r}" if isinstance(x, str) else "null" if x is None else f"{x!r}"
            raise InputError(f"{owner(j)}: field {field!r} must be true or false, got {what}")
    return values

# values of optional node fields that a record leaves out (memory has none: it is required)
_RECORD_DEFAULTS = {"backward": False, "persistent_bytes": 0.0, "output_bytes": 0.0, "role": "compute"}


def _records_to_columns(nodes: list, edges: list) -> tuple[dict, dict]:
    kinds: list[str] = []
    for j, rec in enumerate(nodes):
        if not isinstance(rec, dict) or "id" not in rec:
            raise InputError(f"nodes[{j}]: missing field 'id'")
        comp = rec.get("compute")
        if comp is not None and not isinstance(comp, dict):
            what = "a number" if isinstance(comp, (int, float)) and not isinstance(comp, bool) else \
                f"a {type(comp).__name__}"
            raise InputError(f"node {rec['id']!r}: field 'compute' must map device kinds to times, e.g. "
                             f"{{\"gpu\": {comp!r}}} (null for a kind it cannot run on), got {what} {comp!r}")
        for k in (comp or {}):
            if k not in kinds:
                kinds.append(k)
    cols: dict[str, Any] = {"id": [], "compute": {k: [] for k in kinds}}
    opt = ("memory", "persistent_bytes", "output_bytes", "colocation", "backward", "name", "op_type", "layer",
           "role")
    present = {k for rec in nodes for k in rec if k in opt}
    for k in present:
        cols[k] = []
    for rec in nodes:
        cols["id"].append(rec["id"])
        for k in kinds:
            cols["compute"][k].append((rec.get("compute") or {}).get(k))
        for k in present:
            cols[k].append(rec.get(k, _RECORD_DEFAULTS.get(k)))
    ecols: dict[str, list] = {"src": [], "dst": []}
    eopt = {k for rec in edges for k in rec if k in ("bytes", "cost", "batch_scaled", "output")}
    for k in eopt:
        ecols[k] = []
    for j, rec in enumerate(edges):
        if not isinstance(rec, dict) or "src" not in rec or "dst" not in rec:
            raise InputError(f"edges[{j}]: needs 'src' and 'dst'")
        ecols["src"].append(rec["src"])
        ecols["dst"].append(rec["dst"])
        for k in eopt:
            ecols[k].append(rec.get(k, {"bytes": 0.0, "batch_scaled": True, "output": 0}.get(k)))
    return cols, ecols


_OVERHEADS = ("op_overhead", "send_overhead", "recv_overhead")
"""A device's per-operator and per-message costs: each a device field, or one value for
every device at the cluster's top level (a device's own value wins)."""


def cluster_from_dict(doc: dict) -> Cluster:
    """A cluster from its JSON form (``links`` records or full ``beta0``/``beta1`` matrices)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("devices"), list):
        raise InputError("cluster: needs a 'devices' list")
    check_device_count(len(doc["devices"]), "cluster")  # before its D x D link arrays are built
    from dnnplace.graphs.io.numbers import check_cluster_numbers

    check_cluster_numbers(doc)  # "16GB", 10**400, an infinite link cost: one line naming the device or link
    devs = []
    for j, d in enumerate(doc["devices"]):
        if not isinstance(d, dict) or "name" not in d or "kind" not in d:
            raise InputError(f"cluster.devices[{j}]: needs 'name' and 'kind'")
        mem = d.get("memory")
        devs.append(Device(str(d["name"]), str(d["kind"]), math.inf if mem is None else float(mem),
                           float(d.get("speed", 1.0)),
                           *(float(d.get(k, doc.get(k, 0.0))) for k in _OVERHEADS)))
    meta = dict(doc.get("meta", {}))
    name = doc.get("name", "cluster")
    ports = str(doc.get("ports", "per_link"))
    if "beta0" in doc:
        dd = len(devs)
        arrs = {k: np.asarray(doc.get(k, np.ones((dd, dd)) if k == "cost_factor" else np.zeros((dd, dd))),
                              dtype=np.float64) for k in ("beta0", "beta1", "cost_factor")}
        return Cluster(tuple(devs), name=name, meta=meta, ports=ports, **arrs)
    return Cluster.from_links(devs, doc.get("links", []), doc.get("default_link"), name=name, meta=meta,
                              ports=ports)


def cluster_to_dict(cl: Cluster) -> dict:
    """JSON form of a cluster (full link matrices)."""
    return {
        "name": cl.name,
        "devices": [{"name": d.name, "kind": d.kind, "memory": None if math.isinf(d.memory) else d.memory,
                     "speed": d.speed, **{k: getattr(d, k) for k in _OVERHEADS if getattr(d, k)}}
                    for d in cl.devices],
        "beta0": cl.beta0.tolist(), "beta1": cl.beta1.tolist(), "cost_factor": cl.cost_factor.tolist(),
        "meta": cl.meta, **({"ports": cl.ports} if cl.ports != "per_link" else {}),
    }


def instance_from_native(doc: dict, source: str | None = None) -> Instance:
    """Build an :class:`Instance` from a parsed native document."""
    where = source or "graph"
    _check_format(doc, where)
    nodes, edges = doc.get("nodes"), doc.get("edges", {"src": [], "dst": []})
    if nodes is None:
        raise InputError(f"{where}: missing field 'nodes'")
    if (isinstance(nodes, list) and not nodes) or (isinstance(nodes, dict) and isinstance(nodes.get("id"), list)
                                                   and not nodes["id"]):
        raise InputError(f"{where}: graph {str(doc.get('name', 'graph'))!r} has no nodes")
    if isinstance(nodes, list):
        nodes, edges = _records_to_columns(nodes, edges if isinstance(edges, list) else [])
    if not isinstance(nodes, dict) or "id" not in nodes:
        raise InputError(f"{where}: 'nodes' needs an 'id' column")
    ids = nodes["id"]
    n = len(ids)
    comp = nodes.get("compute")
    if not isinstance(comp, dict) or not comp:
        raise InputError(f"{where}: 'nodes.compute' must map device kinds to columns of times")
    kinds = list(doc.get("kinds") or comp.keys())
    for k in comp:
        if k not in kinds:
            kinds.append(k)
    def node(i: int) -> str:
        return f"node {ids[i]!r}"

    compute = np.column_stack([_column(comp.get(k, [None] * n), n, f"compute.{k}", allow_null=True, owner=node,
                                       null_means=f"unsupported (cannot run on kind {k!r})")
                               for k in kinds]) if n else np.zeros((0, len(kinds)))
    if "memory" not in nodes:
        raise InputError(f"{where}: missing node field 'memory'")
    opt = {k: _column(nodes[k], n, k, owner=node) for k in ("persistent_bytes", "output_bytes") if k in nodes}
    labels: list = []
    coloc = None
    if "colocation" in nodes:
        raw = nodes["colocation"]
        labels = sorted({c for c in raw if c is not None}, key=lambda c: (str(type(c)), c))
        code = {c: j for j, c in enumerate(labels)}
        coloc = np.array([-1 if c is None else code[c] for c in raw], dtype=np.int64)
    if not isinstance(edges, dict) or "src" not in edges or "dst" not in edges:
        raise InputError(f"{where}: 'edges' needs 'src' and 'dst' columns")
    m = len(edges["src"])
    if len(edges["dst"]) != m:
        raise InputError(f"{where}: edges 'src' and 'dst' have different lengths ({m} and {len(edges['dst'])})")

    def edge(j: int) -> str:
        return f"edge #{j} ({edges['src'][j]!r}->{edges['dst'][j]!r})"

    graph = OpGraph.from_ids(
        ids, zip(edges["src"], edges["dst"], strict=True), kinds=tuple(kinds), compute=compute,
        memory=_column(nodes["memory"], n, "memory", owner=node),
        edge_bytes=_column(edges["bytes"], m, "bytes", owner=edge) if "bytes" in edges else None,
        edge_cost=_column(edges["cost"], m, "cost", allow_null=True, owner=edge, null_means=_NO_COST)
        if "cost" in edges else None,
        colocation=coloc, colocation_labels=labels,
        backward=_bool_column(nodes.get("backward"), n, "backward", node), names=nodes.get("name"),
        op_types=nodes.get("op_type"), layers=nodes.get("layer"), roles=nodes.get("role"),
        edge_batch_scaled=_bool_column(edges.get("batch_scaled"), m, "batch_scaled", edge),
        edge_output=_output_column(edges["output"], m, edge) if "output" in edges else None,
        name=str(doc.get("name", "graph")),
        unit=str(doc.get("unit", "ms")),
        meta=dict(doc.get("meta", {})), **opt)
    cluster = cluster_from_dict(doc["cluster"]) if doc.get("cluster") is not None else None
    return Instance(graph, cluster, source)


def _nullable(arr: np.ndarray) -> list:
    return [None if math.isnan(x) else x for x in arr.tolist()]


def instance_to_native(inst: Instance) -> dict:
    """The native JSON document of an instance."""
    g = inst.graph
    nodes: dict[str, Any] = {
        "id": list(g.ids),
        "compute": {k: _nullable(g.compute[:, j]) for j, k in enumerate(g.kinds)},
        "memory": g.memory.tolist(),
    }
    if g.persistent_bytes.any():
        nodes["persistent_bytes"] = g.persistent_bytes.tolist()
    if g.output_bytes.any():
        nodes["output_bytes"] = g.output_bytes.tolist()
    if (g.colocation >= 0).any():
        nodes["colocation"] = [None if c < 0 else g.colocation_labels[c] for c in g.colocation.tolist()]
    if g.backward.any():
        nodes["backward"] = g.backward.tolist()
    for key, val in (("name", g.names), ("op_type", g.op_types), ("layer", g.layers), ("role", g.roles)):
        if val is not None:
            nodes[key] = list(val)
    edges: dict[str, Any] = {"src": [g.ids[i] for i in g.src.tolist()], "dst": [g.ids[i] for i in g.dst.tolist()],
                             "bytes": g.edge_bytes.tolist()}
    if not np.isnan(g.edge_cost).all():
        edges["cost"] = _nullable(g.edge_cost)
    if not g.edge_batch_scaled.all():
        edges["batch_scaled"] = g.edge_batch_scaled.tolist()
    if g.edge_output.any():
        edges["output"] = g.edge_output.tolist()
    doc: dict[str, Any] = {"format": FORMAT, "name": g.name, "unit": g.unit, "kinds": list(g.kinds),
                           "nodes": nodes, "edges": edges}
    if inst.cluster is not None:
        doc["cluster"] = cluster_to_dict(inst.cluster)
    meta = {k: v for k, v in g.meta.items() if k != "tarnawski"}
    if meta:
        doc["meta"] = meta
    return doc
