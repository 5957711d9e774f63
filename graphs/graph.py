"""The operator graph: an array-backed DAG with profiled costs (docs/semantics.md 1).

Nodes are indexed ``0 .. n-1`` in the order they were given; the user-facing node ids
(ints or strings, e.g. Tarnawski's ``id``) are kept in :attr:`OpGraph.ids` and looked up
by their string form, so ``5`` and ``"5"`` name the same node. Every per-node field is a
numpy array of length ``n`` and every per-edge field one of length ``m``; adjacency is
kept as CSR (``out_ptr/out_nbr/out_eid`` and the mirror for in-edges) and the
topological order is computed once, level by level with numpy, so a 200k-node graph is
built and sorted in well under a second.

Compute times live in an ``(n, K)`` matrix whose columns are device *kinds*
(``graph.kinds``, e.g. ``("acc", "cpu")``); ``NaN`` means the node cannot run on that
kind (device affinity). All times are in ``graph.unit`` (Tarnawski inputs use ms).

``NaN`` is the *internal* encoding of "unsupported" only. In user data (graph files,
networkx attributes) "unsupported" is written ``null`` / ``None`` (or the kind is left
out), and a NaN is an error: a corrupt profile must not silently move a node to another
device. The readers draw that line with :func:`~dnnplace.graphs.columns.user_column`; code that builds an
:class:`OpGraph` from untrusted numbers should pass them through it too.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import attrgetter
from typing import Any

import numpy as np

from dnnplace.graphs.adjacency import csr, kahn_levels
from dnnplace.graphs.columns import float_array
from dnnplace.graphs.errors import CycleError, InputError

__all__ = ["OpGraph", "ROLES", "MAX_VALUE"]

ROLES = ("param", "grad", "apply", "compute")

MAX_VALUE = 1e300
"""The largest compute time, memory, byte count or edge cost a graph may hold. Every
consumer (the bounds, the evaluator, the simulator, the methods) adds such values over
nodes, paths and devices; at most ``1e300`` each, a sum over even ``10**8`` of them stays
below the 64-bit float limit (``1.8e308``) instead of overflowing to ``inf``, so a value
this large is refused where the graph is built, naming the node or edge and the field."""


def _csr_part(triple: str, k: int, doc: str) -> property:
    """Read-only property: entry ``k`` (row pointer, neighbour or edge id) of the cached
    CSR triple in attribute ``triple`` (``"_out"`` or ``"_in"``)."""
    get = attrgetter(triple)

    def part(self: OpGraph) -> np.ndarray:
        return get(self)[k]

    return property(part, doc=doc)


@dataclass(frozen=True, eq=False)
class OpGraph:
    """A DNN operator graph ``G = (V, E)`` with per-kind compute times (docs/semantics.md 1).

    Parameters
    ----------
    ids : sequence of hashable
        User-facing node ids, unique by their string form.
    kinds : sequence of str
        Device kinds that have a compute column (``"gpu"``, ``"cpu"``, ``"acc"`` ...).
    compute : array (n, len(kinds))
        Processing time of each node on each kind; ``NaN`` = unsupported there.
    memory : array (n,)
        Static footprint in bytes (Pesto's constraint (8), Tarnawski's ``size``).
    src, dst : array (m,)
        Edge end points as node *indices*.
    edge_bytes : array (m,), optional
        Tensor size in bytes (default 0).
    edge_cost : array (m,), optional
        Explicit transfer time overriding the link model; ``NaN`` = use the link model.
    persistent_bytes, output_bytes : array (n,), optional
        Inputs of PARDNN's dynamic memory model (Eq. 2); default 0.
    colocation : array (n,) of int, optional
        Colocation group code per node, ``-1`` for none; ``colocation_labels[code]`` is
        the label as read from the file.
    backward : array (n,) of bool, optional
        Training graphs: node belongs to the backward pass.
    names, op_types, layers : sequences, optional
        Descriptive per-node fields.
    roles : sequence of str, optional
        Training-graph role of each node (:data:`ROLES`: ``param`` holds a parameter,
        ``grad`` produces a gradient, ``apply`` updates a parameter, ``compute`` anything
        else), for FastT's data-parallel builder and PARDNN's memory classes.
    edge_batch_scaled : array (m,) of bool, optional
        Whether an edge's bytes grow with the batch (``BatchModel``, docs/heuristics.md 0);
        default true, false for parameter and gradient tensors.
    edge_output : array (m,) of int, optional
        Which output of its source node an edge carries (default 0 for every edge).
        Edges of one source that carry the same output carry the same tensor, which the
        simulator sends once to each device that consumes it (docs/semantics.md 2.1, "What is
        sent"). :meth:`with_` resets it to 0 when the edges change and it is not given.
    """

    ids: tuple
    kinds: tuple[str, ...]
    compute: np.ndarray
    memory: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_bytes: np.ndarray | None = None
    edge_cost: np.ndarray | None = None
    persistent_bytes: np.ndarray | None = None
    output_bytes: np.ndarray | None = None
    colocation: np.ndarray | None = None
    colocation_labels: tuple = ()
    backward: np.ndarray | None = None
    names: tuple | None = None
    op_types: tuple | None = None
    layers: tuple | None = None
    roles: tuple | None = None
    edge_batch_scaled: np.ndarray | None = None
    edge_output: np.ndarray | None = None
    name: str = "graph"
    unit: str = "ms"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = tuple(self.ids)
        n = len(ids)
        set_ = object.__setattr__
        set_(self, "ids", ids)
        set_(self, "kinds", tuple(self.kinds))
        compute = np.asarray(self.compute, dtype=np.float64).reshape(n, len(self.kinds))
        set_(self, "compute", compute)
        set_(self, "memory", float_array(self.memory, n, "node field 'memory'"))
        src = np.asarray(self.src, dtype=np.int64).ravel()
        dst = np.asarray(self.dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise InputError("edges: src and dst have different lengths")
        set_(self, "src", src)
        set_(self, "dst", dst)
        m = src.shape[0]
        set_(self, "edge_bytes", float_array(self.edge_bytes, m, "edge field 'bytes'", 0.0))
        set_(self, "edge_cost", float_array(self.edge_cost, m, "edge field 'cost'", np.nan))
        set_(self, "persistent_bytes",
             float_array(self.persistent_bytes, n, "node field 'persistent_bytes'", 0.0))
        set_(self, "output_bytes", float_array(self.output_bytes, n, "node field 'output_bytes'", 0.0))
        coloc = (np.full(n, -1, dtype=np.int64) if self.colocation is None
                 else np.asarray(self.colocation, dtype=np.int64).ravel())
        set_(self, "colocation", coloc)
        labels = tuple(self.colocation_labels)
        if not labels and coloc.size and coloc.max() >= 0:
            labels = tuple(range(int(coloc.max()) + 1))  # codes given without labels name themselves
        set_(self, "colocation_labels", labels)
        bw = (np.zeros(n, dtype=bool) if self.backward is None
              else np.asarray(self.backward, dtype=bool).ravel())
        set_(self, "backward", bw)
        for key in ("names", "op_types", "layers", "roles"):
            val = getattr(self, key)
            if val is not None:
                set_(self, key, tuple(val))
        set_(self, "edge_batch_scaled", np.ones(m, dtype=bool) if self.edge_batch_scaled is None
             else np.asarray(self.edge_batch_scaled, dtype=bool).ravel())
        set_(self, "edge_output", np.zeros(m, dtype=np.int64) if self.edge_output is None
             else np.asarray(self.edge_output, dtype=np.int64).ravel())
        self._check()

    # ------------------------------------------------------------------ validation
    def _node(self, i: int) -> str:
        nm = self.names[i] if self.names is not None and self.names[i] not in (None, "") else None
        return f"node {self.ids[i]!r}" + (f" ({nm})" if nm and str(nm) != str(self.ids[i]) else "")

    def _edge(self, e: int) -> str:
        return f"edge {self.ids[self.src[e]]!r}->{self.ids[self.dst[e]]!r}"

    @staticmethod
    def _check_max(arr: np.ndarray, key: str, what) -> None:
        """No value of ``arr`` past :data:`MAX_VALUE` (``what(j)`` names entry ``j``)."""
        big = arr > MAX_VALUE
        if big.any():
            j = int(np.flatnonzero(big)[0])
            raise InputError(f"{what(j)}: field {key!r} is {arr[j]:g}, past the largest value accepted "
                             f"({MAX_VALUE:g}: sums over the graph must stay finite)")

    def _check(self) -> None:
        n, m = self.n, self.m
        if len(self.index) != n:
            seen: set[str] = set()
            for i in self.ids:
                if str(i) in seen:
                    raise InputError(f"duplicate node id {i!r}")
                seen.add(str(i))
        if len(set(self.kinds)) != len(self.kinds):
            raise InputError(f"duplicate device kind in {self.kinds}")
        for key in ("colocation", "backward", "persistent_bytes", "output_bytes"):
            if getattr(self, key).shape[0] != n:
                raise InputError(f"node field {key!r}: expected {n} values")
        for key in ("names", "op_types", "layers", "roles"):
            val = getattr(self, key)
            if val is not None and len(val) != n:
                raise InputError(f"node field {key!r}: expected {n} values, got {len(val)}")
        if self.roles is not None and not set(self.roles) <= set(ROLES):
            i = next(i for i, r in enumerate(self.roles) if r not in ROLES)
            raise InputError(f"{self._node(i)}: field 'role' must be one of {list(ROLES)}, got {self.roles[i]!r}")
        if self.edge_batch_scaled.shape[0] != m:
            raise InputError(f"edge field 'batch_scaled': expected {m} values")
        if self.edge_output.shape[0] != m:
            raise InputError(f"edge field 'output': expected {m} values, got {self.edge_output.shape[0]}")
        if m and self.edge_output.min() < 0:
            j = int(np.flatnonzero(self.edge_output < 0)[0])
            raise InputError(f"{self._edge(j)}: field 'output' must be an integer >= 0, got {self.edge_output[j]}")
        if m and (self.src.min() < 0 or self.dst.min() < 0 or self.src.max() >= n or self.dst.max() >= n):
            bad = int(np.flatnonzero((self.src < 0) | (self.src >= n) | (self.dst < 0) | (self.dst >= n))[0])
            raise InputError(f"edge #{bad}: endpoint index out of range 0..{n - 1}")
        comp = self.compute
        if np.any(comp < 0):
            i, k = np.argwhere(comp < 0)[0]
            raise InputError(f"{self._node(i)}: negative compute time {comp[i, k]} for kind {self.kinds[k]!r}")
        if np.any(np.isinf(comp)):
            i, k = np.argwhere(np.isinf(comp))[0]
            raise InputError(f"{self._node(i)}: infinite compute time for kind {self.kinds[k]!r}"
                             " (leave the kind out to mark it unsupported)")
        if np.any(comp > MAX_VALUE):
            i, k = np.argwhere(comp > MAX_VALUE)[0]
            raise InputError(f"{self._node(i)}: field 'compute.{self.kinds[k]}' is {comp[i, k]:g}, past the "
                             f"largest value accepted ({MAX_VALUE:g}: sums over the graph must stay finite)")
        if n and self.kinds:
            unsupported = np.all(np.isnan(comp), axis=1)
            if unsupported.any():
                i = int(np.flatnonzero(unsupported)[0])
                raise InputError(f"{self._node(i)}: no compute time for any device kind "
                                 f"{list(self.kinds)} (missing cost)")
        elif n:
            raise InputError("graph declares no device kinds with compute times")
        for key, arr, what in (("memory", self.memory, self._node),
                               ("persistent_bytes", self.persistent_bytes, self._node),
                               ("output_bytes", self.output_bytes, self._node),
                               ("bytes", self.edge_bytes, self._edge)):
            bad = ~(np.isfinite(arr) & (arr >= 0))  # NaN, infinities and negatives
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                raise InputError(f"{what(j)}: field {key!r} must be a finite number >= 0, got {arr[j]}")
            self._check_max(arr, key, what)
        bad = (self.edge_cost < 0) | np.isinf(self.edge_cost)  # NaN = no explicit cost
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InputError(f"{self._edge(j)}: field 'cost' must be a finite number >= 0, got {self.edge_cost[j]}")
        self._check_max(self.edge_cost, "cost", self._edge)
        coloc = self.colocation
        if coloc.size and (coloc.max() >= len(self.colocation_labels) or coloc.min() < -1):
            raise InputError(f"colocation codes must lie in -1..{len(self.colocation_labels) - 1}")
        _ = self.topo_order  # raises CycleError

    # ------------------------------------------------------------------ sizes and ids
    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.ids)

    @property
    def m(self) -> int:
        """Number of edges."""
        return int(self.src.shape[0])

    @cached_property
    def index(self) -> dict[str, int]:
        """Map from ``str(node id)`` to node index."""
        return {str(v): i for i, v in enumerate(self.ids)}

    def index_of(self, node_id: Hashable) -> int:
        """Index of a node id (an int id may be given as its string and vice versa)."""
        try:
            return self.index[str(node_id)]
        except KeyError:
            raise InputError(f"unknown node {node_id!r} (graph {self.name!r} has {self.n} nodes)") from None

    def kind_index(self, kind: str) -> int:
        """Column of ``kind`` in :attr:`compute`, or -1 if no node declares it."""
        try:
            return self.kinds.index(kind)
        except ValueError:
            return -1

    def supports(self, kind: str) -> np.ndarray:
        """Boolean mask of nodes that can run on devices of ``kind``."""
        k = self.kind_index(kind)
        if k < 0:
            return np.zeros(self.n, dtype=bool)
        return ~np.isnan(self.compute[:, k])

    # ------------------------------------------------------------------ adjacency
    @cached_property
    def _out(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return csr(self.src, self.dst, self.n)

    @cached_property
    def _in(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return csr(self.dst, self.src, self.n)

    out_ptr = _csr_part("_out", 0, "CSR row pointer of out-edges (length n+1).")
    out_nbr = _csr_part("_out", 1, "Successor of each CSR out-entry.")
    out_eid = _csr_part("_out", 2, "Edge id of each CSR out-entry.")
    in_ptr = _csr_part("_in", 0, "CSR row pointer of in-edges (length n+1).")
    in_nbr = _csr_part("_in", 1, "Predecessor of each CSR in-entry.")
    in_eid = _csr_part("_in", 2, "Edge id of each CSR in-entry.")

    def successors(self, i: int) -> np.ndarray:
        """Indices of the successors of node index ``i``."""
        return self.out_nbr[self.out_ptr[i]:self.out_ptr[i + 1]]

    def predecessors(self, i: int) -> np.ndarray:
        """Indices of the predecessors of node index ``i``."""
        return self.in_nbr[self.in_ptr[i]:self.in_ptr[i + 1]]

    @cached_property
    def _topo(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, level) by :func:`~dnnplace.graphs.adjacency.kahn_levels`; a cycle is an error."""
        order, level = kahn_levels(self.n, self.dst, self.out_ptr, self.out_nbr)
        if order.size < self.n:
            raise CycleError(f"graph {self.name!r} has a cycle: {' -> '.join(map(repr, self._find_cycle(level)))}")
        return order, level

    def _find_cycle(self, level: np.ndarray) -> list:
        """Walk predecessors among unsorted nodes until one repeats; return the cycle ids."""
        left = level < 0
        v = int(np.flatnonzero(left)[0])
        seen: dict[int, int] = {}
        path: list[int] = []
        while v not in seen:
            seen[v] = len(path)
            path.append(v)
            preds = self.predecessors(v)
            v = int(preds[left[preds]][0])
        cyc = path[seen[v]:][::-1]
        return [self.ids[i] for i in cyc + [cyc[0]]]

    @property
    def topo_order(self) -> np.ndarray:
        """A topological order (level by level, by index within a level)."""
        return self._topo[0]

    @property
    def level(self) -> np.ndarray:
        """Depth of each node: the number of edges on the longest path from a source."""
        return self._topo[1]

    @cached_property
    def topo_position(self) -> np.ndarray:
        """Position of each node in :attr:`topo_order`."""
        pos = np.empty(self.n, dtype=np.int64)
        pos[self.topo_order] = np.arange(self.n)
        return pos

    # ------------------------------------------------------------------ derived data
    @property
    def is_training(self) -> bool:
        """True when some node is marked as part of the backward pass."""
        return bool(self.backward.any())

    def node_cost(self) -> np.ndarray:
        """Tarnawski's per-node transfer cost ``c_u``: the largest explicit cost of u's
        out-edges (0 for sinks or when no edge carries an explicit cost)."""
        c = np.zeros(self.n)
        ok = ~np.isnan(self.edge_cost)
        np.maximum.at(c, self.src[ok], self.edge_cost[ok])
        return c

    def with_(self, **changes: Any) -> OpGraph:
        """A copy with some fields replaced (the graph itself is never mutated).

        New edges (``src`` or ``dst`` given) without an ``edge_output`` carry output 0."""
        if ("src" in changes or "dst" in changes) and "edge_output" not in changes:
            changes["edge_output"] = None
        return replace(self, **changes)

    @classmethod
    def from_ids(cls, ids: Sequence[Hashable], edges: Iterable[tuple[Hashable, Hashable]], **fields: Any) -> OpGraph:
        """Build from node ids and ``(source id, target id)`` pairs, naming dangling ends."""
        index = {str(v): i for i, v in enumerate(ids)}
        src, dst = [], []
        for j, (u, v) in enumerate(edges):
            for end, name in ((u, "source"), (v, "target")):
                if str(end) not in index:
                    raise InputError(f"edge #{j} ({u!r}->{v!r}): {name} {end!r} is not a node")
            src.append(index[str(u)])
            dst.append(index[str(v)])
        return cls(ids=ids, src=np.array(src, dtype=np.int64), dst=np.array(dst, dtype=np.int64), **fields)

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, n={self.n}, m={self.m}, kinds={self.kinds})"
