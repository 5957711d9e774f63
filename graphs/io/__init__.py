"""Reading and writing instances and placements; formats are detected from content.

Loaders are pure functions (path -> object); writers write to a temporary file and
rename it, so a failed write never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from dnnplace.graphs.checks import check_instance
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io.fingerprint import graph_fingerprint
from dnnplace.graphs.io.native import instance_from_native, instance_to_native, is_native
from dnnplace.graphs.io.tarnawski import (
    instance_from_tarnawski,
    instance_to_tarnawski,
    is_split,
    is_tarnawski,
    placement_from_split,
    placement_to_split,
)
from dnnplace.graphs.placement import Placement
from dnnplace.graphs.presets import cluster_preset

__all__ = ["jsonable", "read_text", "read_json", "write_json", "write_atomic", "write_figure",
           "load_instance", "save_instance", "load_placement",
           "placement_from_doc", "placement_to_split", "result_cluster", "instance_for_placement", "graph_fingerprint",
           "check_result_doc", "check_same_graph", "result_order", "result_priorities", "read_cluster"]


_COMPRESSED = {b"\x1f\x8b": ("gzip", "gunzip -c"), b"BZh": ("bzip2", "bunzip2 -c"), b"\xfd7zXZ\x00": ("xz", "unxz -c"),
               b"\x28\xb5\x2f\xfd": ("zstd", "unzstd -c"), b"PK\x03\x04": ("zip", "unzip -p")}


def read_text(path: str | os.PathLike) -> str:
    """A text input file as UTF-8 (a byte-order mark is dropped); one-line
    :class:`InputError` messages name the file when it is missing, unreadable, compressed
    (gzip, bzip2, xz, zstd, zip: said so, with the command that unpacks it) or not UTF-8
    (the first bad byte, its line, and how to convert a Latin-1 file)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{p}: is a folder, not a file") from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    for magic, (kind, tool) in _COMPRESSED.items():
        if data.startswith(magic):
            raise InputError(f"{p}: is a {kind}-compressed file, not text; unpack it first "
                             f"({tool} {p} > unpacked{p.suffix})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{p}: not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, offset {exc.start}); "
                         f"save it as UTF-8 (a Latin-1 file: iconv -f latin1 -t utf-8 {p})") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def read_json(path: str | os.PathLike) -> Any:
    """Parse a JSON file (:func:`read_text`); a missing, truncated, compressed, non-UTF-8
    or too deeply nested file gets a one-line :class:`InputError`."""
    p = Path(path)
    text = read_text(p)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " (file truncated?)" if exc.pos >= len(text.rstrip()) - 1 else ""
        raise InputError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}{hint}") from None
    except ValueError as exc:  # an integer of more than 4300 digits (Python's conversion limit)
        raise InputError(f"{p}: an absurd number: {_one_line(exc).split(';')[0]}") from None
    except RecursionError:
        raise InputError(f"{p}: JSON nested too deeply (arrays or objects inside each other more than about "
                         f"{sys.getrecursionlimit()} levels)") from None


def jsonable(x: Any) -> Any:
    """``x`` with numpy scalars made Python numbers, tuples made lists, keys made
    strings and non-finite floats made ``None`` (JSON has no NaN or infinity).

    >>> jsonable({1: (float("nan"), np.float64(2.5))})
    {'1': [None, 2.5]}
    """
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_atomic(path: str | os.PathLike, write: Callable[[IO], Any], *, binary: bool = False) -> Path:
    """The one atomic writer: ``write(fh)`` fills a temporary file in ``path``'s folder,
    which is then renamed over ``path``. A reader never sees half a file, and a write that
    fails (a full disk, an interrupt) leaves neither a partial file nor the folders it
    created (folders are made only for a file that is written). Every file the framework
    writes goes through here: JSON (:func:`write_json`), tables
    (:func:`dnnplace.tables.write_table`), plots (:func:`write_figure`)."""
    p = Path(path)
    made = [d for d in (p.parent, *p.parent.parents) if not d.exists()]  # deepest first
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as exc:
        _remove_empty(made)
        raise InputError(f"{p}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, p)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        _remove_empty(made)
        if isinstance(exc, OSError) and exc.errno is not None and not exc.filename:  # name the file (a full disk)
            raise OSError(exc.errno, exc.strerror or str(exc), str(p)) from exc
        raise
    return p


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) where empty: a failed write leaves no folder it made."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


def write_figure(fig: Any, path: str | os.PathLike, **savefig: Any) -> Path:
    """A matplotlib figure as a PNG at ``path``, atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda fh: fig.savefig(fh, format="png", **savefig), binary=True)


def write_json(path: str | os.PathLike, doc: Any, indent: int | None = 1) -> Path:
    """Write :func:`jsonable` ``doc`` atomically (:func:`write_atomic`)."""
    doc = jsonable(doc)

    def dump(fh: IO) -> None:
        json.dump(doc, fh, indent=indent, allow_nan=False)
        fh.write("\n")

    return write_atomic(path, dump)


def load_instance(path: str | os.PathLike, cluster: str | None = None) -> Instance:
    """Load a native or Tarnawski graph file (detected from its fields); ``cluster``, a
    preset name (:func:`dnnplace.graphs.presets.cluster_preset`), replaces or supplies
    the file's cluster."""
    doc = read_json(path)
    name = Path(path).stem
    if is_native(doc):
        inst = instance_from_native(doc, source=str(path))
    elif is_tarnawski(doc):
        inst = instance_from_tarnawski(doc, name=name, source=str(path))
    else:
        raise InputError(f"{path}: neither a native graph (no 'format' field) nor a Tarnawski input "
                         "(no 'maxSizePerFPGA'/'maxFPGAs'/'maxCPUs' field, no 'cpuLatency' in its nodes)")
    if cluster:
        inst = Instance(inst.graph, read_cluster(cluster, inst.graph), inst.source)
    return inst


def read_cluster(name: str, graph) -> Any:
    """:func:`cluster_preset`, noting the preset's name in ``meta["preset"]`` (a result
    records the name instead of the whole cluster); a JSON file (``dnnplace profile-links
    --out``, or a graph file with a ``cluster`` section) is read as a cluster."""
    import dataclasses

    if str(name).endswith(".json") or Path(name).is_file():
        from dnnplace.graphs.io.native import cluster_from_dict

        doc = read_json(name)
        if isinstance(doc, dict) and isinstance(doc.get("cluster"), dict) and "devices" not in doc:
            doc = doc["cluster"]  # a graph file's cluster
        try:
            return cluster_from_dict(doc)
        except InputError as exc:
            raise InputError(f"--cluster {name}: not a cluster file ({exc})") from None
    cl = cluster_preset(name, graph)
    return dataclasses.replace(cl, meta={**cl.meta, "preset": str(name).strip()})


def result_cluster(doc: Any, graph, source: str = "result") -> Any:
    """The cluster a result JSON was solved on (its ``cluster`` field: a preset name or a
    cluster object), or ``None`` when it records none."""
    from dnnplace.graphs.io.native import cluster_from_dict

    rec = doc.get("cluster") if isinstance(doc, dict) else None
    if rec is None:
        return None
    if isinstance(rec, str):
        return read_cluster(rec, graph)
    if isinstance(rec, dict):
        try:
            return cluster_from_dict(rec)
        except InputError as exc:
            raise InputError(f"{source}: its 'cluster': {exc}") from None
    raise InputError(f"{source}: 'cluster' must be a preset name or a cluster object, got {type(rec).__name__}")


def instance_for_placement(graph_path: str | os.PathLike, cluster: str | None, doc: Any,
                           source: str = "placement") -> Instance:
    """The instance to score a placement file on: the graph file with ``cluster`` (a
    preset, ``--cluster``) if given, else the cluster the result was solved on (its
    ``cluster`` field), else the graph file's own."""
    inst = load_instance(graph_path, cluster)
    if cluster:
        return inst
    cl = result_cluster(doc, inst.graph, source)
    return inst if cl is None else Instance(inst.graph, cl, inst.source)


def prepare_instance(path: str | os.PathLike, cluster: str | None = None) -> Instance:
    """The one preparation before a solve: :func:`load_instance`, then the feasibility
    checks (:func:`dnnplace.graphs.checks.check_instance`: a cluster exists, every node
    has a device, memory can fit), each failure a named :class:`InputError`."""
    inst = load_instance(path, cluster)
    check_instance(inst.graph, inst.require_cluster())
    return inst


def save_instance(inst: Instance, path: str | os.PathLike, fmt: str = "native") -> Path:
    """Write an instance as ``native`` or ``tarnawski`` JSON."""
    if fmt == "native":
        return write_json(path, instance_to_native(inst), indent=None)
    if fmt == "tarnawski":
        return write_json(path, instance_to_tarnawski(inst))
    raise InputError(f"unknown graph format {fmt!r}; use 'native' or 'tarnawski'")


# ---------------------------------------------------------------------------- results read back
def _shown(fp: dict[str, Any]) -> str:
    return f"{fp.get('name')!r}: {fp.get('nodes')} nodes, {fp.get('edges')} edges, fingerprint {fp.get('digest')}"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_result_doc(doc: Any, graph, source: str = "result", graph_source: str | None = None) -> None:
    """The fields of a result JSON that reading it back relies on, each failure one
    :class:`InputError` naming ``source`` and the field (a plain ``{node: device}`` map
    or a split file has none of them and passes):

    - ``problem``, where given: one of ``maxload``, ``latency``, ``makespan``;
    - ``start``, where given: a ``{node: number}`` map (a bad value names its node);
    - ``graph_fingerprint``, where given: that of ``graph`` (:func:`graph_fingerprint`);
      a result solved on another graph is refused, naming both. Results without one
      (older files, hand-written placements) are read as before.
    """
    from dnnplace.graphs.instance import PROBLEMS

    if not isinstance(doc, dict) or not isinstance(doc.get("placement"), dict):
        return
    problem = doc.get("problem")
    if problem is not None and problem not in PROBLEMS:
        raise InputError(f"{source}: field 'problem' is {problem!r}; a result solves one of {', '.join(PROBLEMS)}")
    for key in ("start", "priorities"):
        times = doc.get(key)
        if times is None:
            continue
        if not isinstance(times, dict):
            raise InputError(f"{source}: field {key!r} must map node ids to numbers, got {type(times).__name__}")
        for node, t in times.items():
            if not _is_number(t):
                raise InputError(f"{source}: node {node!r}: field {key!r} must be a finite number, got {t!r}")
    want = doc.get("graph_fingerprint")
    if want is None:
        return
    if not isinstance(want, dict):
        raise InputError(f"{source}: field 'graph_fingerprint' must be an object (nodes, edges, digest), got "
                         f"{type(want).__name__}")
    got = graph_fingerprint(graph)
    if any(want.get(k) != got[k] for k in ("nodes", "edges", "digest")):
        raise InputError(f"{source}: the graph {graph_source or ''} ({_shown(got)}) differs from the one it was "
                         f"solved on ({_shown(want)}); give the graph it was solved on")


def result_order(doc: Any) -> dict | None:
    """The map that orders each device's nodes in a result (lowest first), as read, ``None``
    when it has none: its ``priorities`` (the rank of every node in the schedule it was
    scored on) where it has them, else its ``start`` times (equal starts then fall to
    topological position). :func:`result_priorities` checks it against a graph."""
    key = _order_field(doc)
    return None if key is None else doc[key]


def _order_field(doc: Any) -> str | None:
    """Which field of a result orders its devices' nodes (:func:`result_order`)."""
    if isinstance(doc, dict):
        for key in ("priorities", "start"):
            if isinstance(doc.get(key), dict):
                return key
    return None


def result_priorities(doc: Any, graph, source: str = "result") -> np.ndarray | None:
    """The map of :func:`result_order` as one number per node of ``graph`` (lowest first),
    ``None`` when the result has none; a node without a value, or a value that is not a
    finite number, is an :class:`InputError` naming it."""
    key = _order_field(doc)
    if key is None:
        return None
    values = doc[key]
    try:
        return np.array([float(values[str(i)]) for i in graph.ids])
    except KeyError as exc:
        raise InputError(f"{source}: field {key!r} has no value for node {exc.args[0]!r}") from None
    except (TypeError, ValueError):
        bad = next((k, v) for k, v in values.items() if not _is_number(v))
        raise InputError(f"{source}: node {bad[0]!r}: field {key!r} must be a finite number, got {bad[1]!r}") from None


def placement_from_doc(doc: Any, inst: Instance, source: str = "placement") -> Placement:
    """A placement from a result JSON (``placement`` key; its fields checked by
    :func:`check_result_doc` against the instance's graph), a Tarnawski split, or a plain
    ``{node id: device name}`` map."""
    cluster = inst.require_cluster()
    if is_split(doc):
        return placement_from_split(doc, inst)
    graph = inst.graph
    check_result_doc(doc, graph, source, inst.source)
    if isinstance(doc, dict) and isinstance(doc.get("placement"), dict):
        if doc.get("transform") is not None:  # a result for a graph the method built from this one
            from dnnplace.graphs.transforms.replay import graph_of_record

            graph = graph_of_record(doc["transform"], inst.graph, source)
        doc = doc["placement"]
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise InputError(f"{source}: expected a result JSON, a Tarnawski split or a {{node: device}} map")
    return Placement.from_mapping(graph, cluster, doc)


def load_placement(path: str | os.PathLike, inst: Instance) -> Placement:
    """Load any placement file (see :func:`placement_from_doc`) as a placement of the
    instance's own graph (a warm start, a split to evaluate): a result solved on another
    graph (its ``graph_fingerprint``), or on a graph a method built from this one (its
    ``transform``), is refused, one rule for every method that takes a start."""
    p = placement_from_doc(read_json(path), inst, source=str(path))
    check_same_graph(p.graph, inst.graph, str(path))
    return p


def check_same_graph(placed, graph, source: str) -> None:
    """A start or split must place ``graph`` itself: not a graph a method built from it
    (a result's ``transform``), nor another graph (by :func:`graph_fingerprint`)."""
    if placed is graph:
        return
    got, want = graph_fingerprint(placed), graph_fingerprint(graph)
    if any(got[k] != want[k] for k in ("nodes", "edges", "digest")):
        raise InputError(f"{source}: places another graph ({_shown(got)}) than the input ({_shown(want)}); give a "
                         "placement of the input graph")
