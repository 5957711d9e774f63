"""Discrete-event simulation of a placed operator graph (docs/semantics.md 2.1 and 3).

:func:`simulate` executes a :class:`~dnnplace.graphs.placement.Placement` the way a DL runtime
would and returns a :class:`SimResult`: the start and finish of every node, every
inter-device transfer, the makespan, per-device busy time, per-link traffic and the
static and dynamic (peak-over-time) memory per device. :func:`validate_schedule`
re-checks any schedule (simulated, or decoded from a solver) without sharing the
simulator's code path.

Execution model
---------------
* A device runs one node at a time without preemption; node ``i`` takes
  ``cluster.compute_matrix(graph)[i, dev(i)]`` time units (``graph.unit``): its kind's
  compute time divided by the device's ``speed``, plus the device's ``op_overhead`` (a
  per-operator launch cost, default 0, to be fitted from measured executions), plus
  the per-message costs of the transfers it sends and takes in (the devices'
  ``send_overhead`` and ``recv_overhead``, docs/semantics.md 2.1, per-message costs;
  :func:`~dnnplace.evaluation.sim_costs.message_overheads`).
* What is sent (docs/semantics.md 2.1, ``transfer_mode``). By default (``"per_destination"``) a
  tensor goes once to each device that consumes it, as frameworks run it: the edges
  ``(u, v)`` with ``dev(u) = a`` and ``dev(v) = b != a`` that carry the same output of
  ``u`` (the edge field ``output``, default 0: a node's out-edges carry one tensor
  unless the graph says otherwise) become *one transfer task* of
  ``cluster.transfer_time(a, b, bytes, cost)`` on the directed link ``(a, b)``,
  released when ``u`` completes. Edges of one output carry the same bytes; where a
  graph gives them different bytes or explicit costs the task takes the longest of its
  edges (ties: the lowest edge id, reported as ``xfer_edge``). ``"per_edge"`` makes
  every cross-device edge its own transfer task (Pesto's DAG augmentation, Sec. 3.2.2;
  the accounting of Pesto's ILP). ``v`` may start once all its predecessors have
  completed and every transfer carrying one of its in-edges has completed. Replayed in
  the same device and link orders (``policy="order"`` with ``link_priorities``, or
  without congestion) a schedule never gets longer when the per-edge transfers of one
  tensor are merged: the merged task takes the place of the first of them on its link
  and lasts as long as each (same bytes), so a schedule built per edge (Pesto's ILP)
  replays under the default at no more than its per-edge makespan. First come first
  served links and the non-delay policies give no such guarantee (list-scheduling
  anomalies), though fewer transfers rarely hurt.
* ``congestion=True``: a directed link carries one transfer at a time, first come first
  served by release time (ties: the source's topological position, then edge id),
  non-preemptive -- the FCFS link queue of Pesto Sec. 3.2 / 3.2.2. Where the cluster's
  devices share their ports (``cluster.ports == "shared"``: PCIe, host bridges; the
  ``single-host-N-pcie`` presets) a transfer ``a -> b`` occupies ``a``'s egress port and
  ``b``'s ingress port instead, so a device sends one tensor at a time and receives one
  at a time (full duplex), first come first served on both ports; ``"per_link"`` (the
  default, NVLink presets) keeps one queue per directed pair. ``congestion=False``:
  transfers overlap freely (``finish = release + duration``), the classic
  congestion-free DAG-scheduling assumption (Pesto's ablation, Fig. 5).

Device policies (all but ``"order"`` are *non-delay*: an idle device never waits while
one of its nodes is ready):

``"fifo"``
    TensorFlow's default ready queue (also what PARDNN's scheduler emulator assumes,
    PARDNN Sec. 3.2.2): the node that became ready earliest first; ties by topological
    position.
``"critical_path"``
    the ready node with the largest bottom level first; the bottom level is the longest
    path to a sink counting node times on their placed devices and the (uncongested)
    transfer times of cross-device edges. Ties by topological position.
``"priority"``
    list scheduling by ``priorities``: the ready node with the lowest value first
    (ties by topological position).
``"order"``
    strict per-device order: each device runs its nodes exactly in increasing
    ``priorities`` (ties by topological position), waiting for the next one even if
    others are ready. This replays a solver's per-device sequence
    (:meth:`dnnplace.graphs.placement.Schedule.priorities`); an order that deadlocks against
    precedence raises :class:`~dnnplace.graphs.errors.InputError`.

Link orders (``link_priorities``, policy ``"order"`` only)
    One number per edge; with ``congestion=True`` every directed link serves its
    transfer tasks strictly in increasing value (ties by the source's topological
    position, then edge id) instead of first come first served: a transfer starts at
    the earliest time at which its source has completed, the link is free and every
    transfer ranked before it on that link has been carried. Edges whose ends share a
    device are ignored (their value may be ``NaN``); every crossing edge needs a finite
    value. A deduplicated transfer (the default ``transfer_mode``) takes the lowest
    value of the edges it stands for. With both orders given the simulation is the earliest
    (semi-active) schedule that follows them: each task starts as soon as its
    predecessors in the graph, on its device and on its link allow. This is the
    semantics of Pesto's ILP, whose constraint (7) orders the transfers of each link
    (one transfer per edge, no deduplication); replaying an ILP schedule's device and
    link orders therefore gives a makespan no larger than the ILP's, in either transfer
    mode (merging the per-edge transfers of one tensor never delays anything). An order that
    deadlocks (a cycle through precedence, device order and link order) raises
    :class:`~dnnplace.graphs.errors.InputError`. Without ``link_priorities`` links are
    FCFS exactly as above; without congestion transfers overlap and a link order has
    no effect. :meth:`SimResult.link_priorities` gives the link order a simulation
    followed, so replaying a simulation's own orders reproduces it. With shared ports
    the same values order each port: a transfer waits for every transfer ranked before
    it on its egress and on its ingress port.

Events at the same time are processed together before devices pick their next node
(completions first, then nodes becoming ready), so ties never depend on heap internals.
The event loop is a plain ``heapq`` loop over Python lists built once from the graph's
CSR arrays; a 200k-node, 300k-edge graph on 8 devices simulates in about a second
(``python -m benchmarks foundation``).

Where the parts live (all names below stay importable from this module):

* :mod:`dnnplace.evaluation.sim_result` -- :class:`SimResult`, the outcome and its JSON form;
* :mod:`dnnplace.evaluation.sim_costs` -- node durations, per-edge link times, transfer
  tasks (with deduplication) and per-link totals;
* :mod:`dnnplace.evaluation.sim_policies` -- ``POLICIES``, :func:`bottom_level`, priority
  checks, dispatch orders and the ``"order"`` deadlock diagnosis;
* :mod:`dnnplace.evaluation.sim_events` -- the event loop (link congestion included);
* :mod:`dnnplace.evaluation.sim_memory` -- static and dynamic peak memory per device;
* :mod:`dnnplace.evaluation.schedule_checks` -- :func:`validate_schedule`;
* :mod:`dnnplace.evaluation.link_orders` -- device and link orders read off a schedule's
  times, and a link order's JSON form in result records.

References
----------
.. [Pesto] U. U. Hafeez, X. Sun, A. Gandhi, Z. Liu. "Towards optimal placement and
   scheduling of DNN operations with Pesto." Middleware 2021, Sec. 3.1, 3.2.2.
.. [PARDNN] F. Qararyah, M. Wahib, D. Dikbayir, M. E. Belviranli, D. Unat. "A
   computational-graph partitioning method for training memory-constrained DNNs."
   Parallel Computing 2021, Sec. 3.2.2, Eq. (2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dnnplace.evaluation.schedule_checks import validate_schedule
from dnnplace.evaluation.sim_costs import (
    DEFAULT_TRANSFER_MODE,
    TRANSFER_MODES,
    build_transfers,
    check_transfer_mode,
    current_transfer_mode,
    link_totals,
    placed_durations,
    transfer_semantics,
)
from dnnplace.evaluation.sim_events import run_events
from dnnplace.evaluation.sim_memory import peak_memory, static_memory, tensor_sizes
from dnnplace.evaluation.sim_policies import (
    POLICIES,
    bottom_level,
    check_link_priorities,
    check_policy,
    dispatch_order,
    link_sequences,
)
from dnnplace.evaluation.sim_result import SimResult
from dnnplace.graphs.placement import Placement, Schedule

__all__ = ["SimResult", "simulate", "validate_schedule", "bottom_level", "POLICIES", "TRANSFER_MODES",
           "DEFAULT_TRANSFER_MODE", "transfer_semantics", "current_transfer_mode"]


def simulate(placement: Placement, *, policy: str = "fifo", priorities: Any = None,
             congestion: bool = True, transfer_mode: str | None = None, link_priorities: Any = None,
             dedup_transfers: bool | None = None) -> SimResult:
    """Discrete-event execution of a placement (docs/semantics.md 2.1, 3).

    Parameters
    ----------
    placement : Placement
        Graph, cluster and the device of every node.
    policy : {"fifo", "critical_path", "priority", "order"}
        How a device picks its next node (see the module docstring).
    priorities : array (n,), optional
        Required by ``"priority"`` (lowest first among ready nodes) and ``"order"``
        (strict per-device sequence by increasing value); rejected by the others.
        ``Schedule.priorities()`` turns any schedule into such an array.
    congestion : bool
        One transfer at a time per directed link, FCFS by release time (Pesto Sec.
        3.2.2); ``False`` lets transfers overlap.
    transfer_mode : {"per_destination", "per_edge"}, optional
        What is sent (docs/semantics.md 2.1): ``"per_destination"`` one transfer per (source node,
        output, destination device); ``"per_edge"`` one per cross-device edge (Pesto's
        accounting). See the module docstring. ``None`` (default):
        :func:`~dnnplace.evaluation.sim_costs.current_transfer_mode`, which is
        ``"per_destination"`` outside a
        :func:`~dnnplace.evaluation.sim_costs.transfer_semantics` block.
    link_priorities : array (m,), optional
        With ``policy="order"`` and ``congestion``: the order in which each directed
        link serves its transfers, one value per edge (lowest first; see "Link orders"
        in the module docstring). ``None`` (default): FCFS links.
        ``SimResult.link_priorities()`` turns any simulation into such an array.
    dedup_transfers : bool, optional
        The older spelling of ``transfer_mode``: ``True`` is ``"per_destination"``,
        ``False`` ``"per_edge"`` (an error when it contradicts ``transfer_mode``).

    Returns
    -------
    SimResult
        Makespan, node start/finish, transfers, per-device busy time, per-link traffic
        and memory. ``peak_memory[d]`` follows PARDNN Eq. (2): the ``persistent_bytes``
        of every node on ``d`` are live all step; the ``output_bytes`` of a node ``u``
        on ``d`` are live from ``u``'s start until its last consumer on ``d`` finishes
        and its last outgoing transfer finishes (at least until ``u`` finishes); a
        tensor received on ``d`` (``output_bytes`` of its remote producer ``u``, one
        copy per (``u``, ``d``) in either transfer mode) is live from
        the start of its first transfer to ``d`` until ``u``'s last consumer on ``d``
        finishes. Intervals are half-open ``[begin, end)``, so a tensor freed at ``t``
        and one allocated at ``t`` do not overlap. A graph without ``output_bytes``
        (the Tarnawski inputs) takes each node's largest out-edge ``bytes`` as its
        output tensor (``peak_memory_source == "edge_bytes"``); one without either has
        an unknown peak (``None``). Devices whose static footprint or peak exceeds
        their capacity are listed by ``SimResult.memory_overflow`` and
        ``SimResult.memory_violations()``.

    Raises
    ------
    InputError
        Unknown policy, missing or malformed ``priorities`` or ``link_priorities``
        (or link priorities with a policy other than ``"order"``), a node placed on a
        device kind it does not support, or (``"order"``) an order that deadlocks.

    Examples
    --------
    Two nodes on two GPUs joined by a 0.5-time-unit transfer:

    >>> from dnnplace.graphs import Cluster, OpGraph, Placement
    >>> g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [2.0]], memory=[0, 0])
    >>> c = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices,
    ...                        default={"beta0": 0.5})
    >>> r = simulate(Placement(g, c, [0, 1]))
    >>> r.makespan, r.xfer_start.tolist(), r.start.tolist()
    (3.5, [1.0], [0.0, 1.5])

    One tensor, two consumers on the other GPU: it is sent once (one transfer), or,
    per edge, twice over the same link, and ``c`` (0.25) waits for the second copy:

    >>> g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["gpu"],
    ...                      compute=[[1.0], [0.25], [0.25]], memory=[0, 0, 0])
    >>> pl = Placement(g, c, [0, 1, 1])
    >>> r, e = simulate(pl), simulate(pl, transfer_mode="per_edge")
    >>> (r.n_transfers, r.makespan), (e.n_transfers, e.makespan)
    ((1, 2.0), (2, 2.25))

    A link order: ``a`` (1) feeds ``b`` and ``c`` on the other GPU over one link, two
    different outputs (transfers of 0.5 and 2); ``b`` (10) runs first there. FCFS
    sends the long transfer first (lower edge id): ``b`` runs [3.5, 13.5), ``c`` after
    it; serving ``a->b`` first starts ``b`` at 1.5:

    >>> g = OpGraph.from_ids("abc", [("a", "c"), ("a", "b")], kinds=["gpu"],
    ...                      compute=[[1.0], [10.0], [1.0]], memory=[0, 0, 0],
    ...                      edge_cost=[2.0, 0.5], edge_output=[0, 1])
    >>> pl = Placement(g, c, [0, 1, 1])
    >>> simulate(pl, policy="order", priorities=[0, 1, 2]).makespan
    14.5
    >>> simulate(pl, policy="order", priorities=[0, 1, 2], link_priorities=[1, 0]).makespan
    12.5
    """
    g = placement.graph
    mode = check_transfer_mode(transfer_mode, dedup_transfers)
    dedup = mode == "per_destination"
    prio = check_policy(policy, priorities, g.n)
    lprio = check_link_priorities(placement, policy, link_priorities)
    tx = build_transfers(placement, dedup)
    dur = placed_durations(placement, tx)
    by_rank = dispatch_order(placement, policy, prio)
    lseq = link_sequences(placement, tx, lprio, dedup) if lprio is not None and congestion else None
    start, fin, xs, xf, sequence = run_events(placement, dur, tx, by_rank, policy=policy, congestion=congestion,
                                              link_seq=lseq)
    busy = np.bincount(placement.device, weights=dur, minlength=placement.cluster.size).astype(np.float64)
    link_busy, link_bytes, link_count = link_totals(placement, tx)
    return SimResult(
        makespan=float(fin.max()) if g.n else 0.0, schedule=Schedule(placement, start, fin, sequence), busy=busy,
        link_bytes=link_bytes, link_busy=link_busy, link_count=link_count,
        xfer_edge=tx.edge.astype(np.int64), xfer_src_dev=tx.src_dev.astype(np.int64),
        xfer_dst_dev=tx.dst_dev.astype(np.int64), xfer_start=xs, xfer_finish=xf,
        static_memory=static_memory(placement),
        peak_memory=peak_memory(placement, start, fin, tx.src_node, tx.dst_dev, xs, xf),
        policy=policy, congestion=bool(congestion), transfer_mode=mode,
        peak_memory_source=tensor_sizes(g)[1],
        link_order=("given" if lseq is not None else "fcfs") if congestion else "overlap")
