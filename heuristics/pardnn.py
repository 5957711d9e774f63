"""PARDNN: graph slicing, LFLAM mapping and dynamic-memory heuristics
(Qararyah et al., Parallel Computing 2021).

:func:`pardnn` runs the whole method on the ``K`` target devices (the GPUs of one host,
:func:`~dnnplace.heuristics.pardnn_slicing.target_devices`):

1. Step 1, stage I: slicing into ``K`` primary and many secondary linear clusters
   (Alg. 1, :mod:`~dnnplace.heuristics.pardnn_slicing`), with nominal (mean) costs;
   with heuristic II, a dominant first primary is cut into chunks for the shortest
   primaries (:func:`~dnnplace.heuristics.pardnn_memory.chunk_critical_path`);
2. Step 1, stage II: LFLAM mapping of the secondaries onto the primaries (Alg. 2, Eq. 1,
   :mod:`~dnnplace.heuristics.pardnn_mapping`); primary ``p`` runs on target ``p``;
3. nodes no target can run go to the host (the first CPU that runs them; the authors'
   ``place_cpu_nodes``), colocation groups follow their largest-memory member (their
   ``collocate()``: reference ops follow their variable,
   :func:`~dnnplace.heuristics.memory.repair_colocation`);
4. Step 2 (:mod:`~dnnplace.heuristics.pardnn_memory`): heuristic II balances residual
   memory (Eq. 5); heuristic I emulates the FIFO runtime and moves nodes until the
   dynamic peak (Eq. 2) is at most ``(1 - margin) * cap`` on every device, or fails.

PARDNN outputs a placement only ("the order of execution decision is left to the
runtime"): the framework scores it with the simulator's ``fifo`` policy, TensorFlow's
executor. Its memory model is the *dynamic* peak; ``status`` is ``memory_infeasible``
when the returned placement's emulated peak exceeds a device's full capacity (the best
placement found is returned with its peak per device, never a silent violation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.evaluation.sim_result import fmt_bytes
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.memory import repair_colocation
from dnnplace.heuristics.pardnn_mapping import CCR_THRESHOLD, lflam
from dnnplace.heuristics.pardnn_memory import MARGIN, balance_residuals, chunk_critical_path, memory_heuristic_i
from dnnplace.heuristics.pardnn_slicing import slice_graph, target_costs, target_devices
from dnnplace.heuristics.pardnn_tracker import track

__all__ = ["PardnnResult", "pardnn", "MEMORY_HEURISTICS", "place_on_host"]

MEMORY_HEURISTICS = ("none", "I", "II", "II+I")


@dataclass(frozen=True, eq=False)
class PardnnResult:
    """A placement, ``status`` (``feasible`` or ``memory_infeasible``), a message and
    what each step did (``extra``, JSON-ready)."""

    placement: Placement
    status: str
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def place_on_host(graph: OpGraph, cluster: Cluster, device: np.ndarray) -> tuple[np.ndarray, int]:
    """Nodes whose device cannot run them go to the first CPU that can (else the first
    device that can); ``(device, nodes moved)``."""
    device = np.asarray(device, dtype=np.int64).copy()
    comp = cluster.compute_matrix(graph)
    bad = np.flatnonzero(np.isnan(comp[np.arange(graph.n), device]))
    if bad.size == 0:
        return device, 0
    pref = sorted(range(cluster.size), key=lambda d: (cluster.kinds[d] != "cpu", d))
    for v in bad.tolist():
        ok = [d for d in pref if not np.isnan(comp[v, d])]
        if not ok:
            raise InputError(f"{graph._node(v)}: no device of cluster {cluster.name!r} can run it")
        device[v] = ok[0]
    return device, int(bad.size)


def pardnn(graph: OpGraph, cluster: Cluster, *, memory: str = "I", margin: float = MARGIN,
           lookahead: bool = True, rule_c: str = "each", ccr_threshold: float = CCR_THRESHOLD,
           emulator_congestion: bool = False, time_limit: float | None = None) -> PardnnResult:
    """Place ``graph`` on ``cluster`` with PARDNN (see the module docstring).

    Parameters
    ----------
    memory : {"none", "I", "II", "II+I"}
        Step 2: no memory handling, heuristic I (emulation; guarantees the limit when it
        succeeds), heuristic II (balancing; CP chunking before mapping, residual
        balancing after), or II then I.
    margin : float
        Share of each device's memory kept free (Sec. 4: 10 %); heuristics target
        ``(1 - margin) * cap``.
    lookahead : bool
        Locality-first lookahead before level-aware balancing (Alg. 2 lines 5-7).
    rule_c : {"each", "sum"}
        Condition (c) of the lookahead (``docs/heuristics.md`` P6).
    ccr_threshold : float
        CCR from which maximally-communicating clusters are mapped by locality.
    emulator_congestion : bool
        Emulate with link congestion (default off: the paper's emulator).
    time_limit : float, optional
        Seconds for heuristic I's re-emulation loop; when it runs out the best placement
        so far is returned.

    Examples
    --------
    A chain on two GPUs stays on one (its critical path is the whole graph):

    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("b", "c")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0], [1.0]], memory=[0] * 3, edge_bytes=[1e6] * 2)
    >>> r = pardnn(g, Cluster.single_host(2, with_cpu=False))
    >>> r.placement.device.tolist(), r.status
    ([0, 0, 0], 'feasible')
    """
    if memory not in MEMORY_HEURISTICS:
        raise InputError(f"PARDNN memory heuristic {memory!r}: expected one of {', '.join(MEMORY_HEURISTICS)}")
    if not 0.0 <= margin < 1.0:
        raise InputError(f"PARDNN margin must lie in [0, 1), got {margin}")
    t0 = time.perf_counter()
    targets = target_devices(graph, cluster)
    w, c = target_costs(graph, cluster, targets)
    cap = cluster.memory
    cap_eff = (1.0 - margin) * cap
    extra: dict[str, Any] = {"memory_heuristic": memory, "margin": margin,
                             "targets": [cluster.names[d] for d in targets]}
    sl = slice_graph(graph, w, c, targets.size)
    extra["primaries"] = [int(p.size) for p in sl.primaries]
    extra["secondaries"] = len(sl.secondaries)
    extra["slicing_seconds"] = time.perf_counter() - t0
    if memory in ("II", "II+I"):
        sl, extra["cp_chunked"] = chunk_critical_path(sl, graph, float(cap_eff[targets].min()))
    t1 = time.perf_counter()
    ccr = float(c.sum() / w.sum()) if w.sum() > 0 else 0.0
    mp = lflam(graph, w, c, sl, ccr=ccr, ccr_threshold=ccr_threshold, rule_c=rule_c, lookahead=lookahead)
    extra.update(ccr=ccr, lookahead_mapped=mp.lookahead_mapped, lookahead_passes=mp.lookahead_passes,
                 balanced=mp.balanced, mapping_seconds=time.perf_counter() - t1)
    device = targets[mp.primary_of]
    device, extra["host_nodes"] = place_on_host(graph, cluster, device)
    device, extra["colocation_repairs"] = repair_colocation(graph, device)
    device, _ = place_on_host(graph, cluster, device)  # a group led by a host-only member
    t2 = time.perf_counter()
    if memory in ("II", "II+I"):
        device, extra["residual_moves"] = balance_residuals(graph, cluster, device, targets)
    peak = None
    if memory in ("I", "II+I"):
        deadline = None if time_limit is None else t0 + time_limit
        device, out = memory_heuristic_i(graph, cluster, device, cap_eff, w=w, c=c, targets=targets,
                                         congestion=emulator_congestion, deadline=deadline)
        peak = out.peak
        extra.update(memory_i_success=out.success, moved_units=out.moved_units, moved_nodes=out.moved_nodes,
                     moved_share=out.moved_nodes / max(graph.n, 1), emulations=out.emulations,
                     memory_i_timed_out=out.timed_out)
    if peak is None:
        peak = track(simulate(Placement(graph, cluster, device), policy="fifo",
                              congestion=emulator_congestion)).peak
    extra["memory_seconds"] = time.perf_counter() - t2
    extra["emulated_peak"] = {cluster.names[d]: float(peak[d]) for d in range(cluster.size)}
    over = np.flatnonzero(peak > cap * (1 + 1e-12))
    status, message = "feasible", ""
    if over.size:
        status = "memory_infeasible"
        message = "emulated dynamic peak over capacity: " + "; ".join(
            f"{cluster.names[d]} {fmt_bytes(peak[d])} > {fmt_bytes(cap[d])}" for d in over.tolist())
    elif (peak > cap_eff * (1 + 1e-12)).any():
        message = f"within capacity but not within the {100 * margin:g}% margin on " + ", ".join(
            cluster.names[d] for d in np.flatnonzero(peak > cap_eff * (1 + 1e-12)).tolist())
    return PardnnResult(Placement(graph, cluster, device), status, message, extra)
