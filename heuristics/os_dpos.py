"""FastT's OS-DPOS (Yi et al., Middleware'20, Alg. 2, Sec. 5.2) on top of DPOS
(:mod:`dnnplace.heuristics.fastt`).

OS-DPOS (Alg. 2, Sec. 5.2) splits ops on the critical path of the DPOS schedule (the
longest path under the placed costs, A5) that have a split rule
(:mod:`dnnplace.graphs.transforms.op_split`), heaviest first: each is tried along every dimension its
rule allows and into ``n in parts`` pieces (default ``2..K``, A3), DPOS is rerun on each
split graph (A4), the best is kept if it lowers the makespan, and the loop stops at the
first candidate whose best split does not help (A2: candidates without a rule are
filtered out first). A time budget returns the best state found.

The start strategy ``S`` (Alg. 2 passes it to every DPOS call; FastT activates a new
strategy only when its estimated iteration time beats the current one, Sec. 4) enters as
an *incumbent*: ``incumbent`` is ``S``'s value under the same ``score`` (e.g. the
data-parallel deployment's makespan under the model the planner plans on), ``FT_old``
starts at the smaller of it and DPOS's value, a split is accepted only when it beats
both, and ``OSDPOSResult.incumbent_kept`` says that ``S`` was never beaten (the caller then
deploys ``S``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.levels import critical_path
from dnnplace.graphs.transforms.op_split import SplitRules, split_operation, splittable_ops
from dnnplace.heuristics.fastt import FastTSchedule, dpos

__all__ = ["OSDPOSResult", "os_dpos", "placed_critical_path"]


@dataclass(frozen=True, eq=False)
class OSDPOSResult:
    """OS-DPOS's best state: the DPOS schedule of the split graph ``schedule.graph``, the
    accepted splits ``(op id, dimension, parts)``, the starting DPOS estimate, the number
    of DPOS trials, the seconds to the first accepted split (``None``: none), whether
    the time budget ran out, the candidates listed and the final ``score`` (the value
    splits had to lower: the planner's estimate unless a ``score`` was given); with an
    ``incumbent``, whether it was never beaten (``incumbent_kept``: ``score`` is then the
    incumbent's value and ``schedule`` the best DPOS schedule found)."""

    schedule: FastTSchedule
    splits: tuple[tuple[str, str, int], ...]
    dpos_estimate: float
    trials: int
    seconds: float
    time_to_first_improvement: float | None
    timed_out: bool
    candidates: tuple[str, ...]
    score: float
    incumbent_kept: bool = False

    @property
    def graph(self) -> OpGraph:
        return self.schedule.graph

    @property
    def planner_estimate(self) -> float:
        return self.schedule.planner_estimate


def placed_critical_path(s: FastTSchedule) -> np.ndarray:
    """The longest path under the placed costs: ``w(v, S(v))`` per node (the planner's,
    with the messages it takes in) and ``comm(u, v, S(u), S(v))`` per edge (Alg. 2 line 4,
    A5), with the message's own cost ``send_overhead + recv_overhead`` where the cluster
    has per-message costs (docs/semantics.md 2.1)."""
    g, p = s.graph, s.placement
    w = s.finish - s.start
    cl = p.cluster
    a, b = p.device[g.src], p.device[g.dst]
    c = cl.transfer_time(a, b, g.edge_bytes, g.edge_cost)
    if cl.has_message_costs:
        c = c + cl.message_time(a, b)
    return critical_path(g, kind=w, comm=c)[1]


def os_dpos(graph: OpGraph, cluster: Cluster, *, rules: Mapping[str, Iterable[str]] | None = None,
            parts: Sequence[int] | None = None, recompute_cp: bool = False, max_candidates: int | None = None,
            kappa: float | None = None, aux_cost_per_byte: float = 0.0, time_limit: float | None = None,
            nominal: str = "max", on_oom: str = "best_effort",
            score: Callable[[FastTSchedule], float] | None = None, congestion: bool = False,
            transfer_mode: str = "per_destination", incumbent: float | None = None) -> OSDPOSResult:
    """FastT's OS-DPOS (Alg. 2): DPOS, then split critical-path ops while it helps.

    Parameters
    ----------
    rules : mapping op type -> dimensions, optional
        Split rules (default :data:`~dnnplace.graphs.transforms.op_split.SPLIT_RULES`; ``"*"`` for
        every op type). An unknown dimension is an :class:`InputError`.
    parts : sequence of int, optional
        Part counts to try (default ``2..K``, ``K`` the devices that run the op).
    recompute_cp : bool
        After an accepted split, recompute the critical path and its candidates
        (skipping ops already tried); the paper keeps the first list.
    max_candidates : int, optional
        Try at most this many candidates.
    kappa : float, optional
        Per-part kernel overhead; default 5 µs in ``graph.unit``
        (:class:`~dnnplace.graphs.batch_model.BatchModel`).
    aux_cost_per_byte : float
        Time per byte of the aux split/concat nodes (0: views).
    time_limit : float, optional
        Seconds; the best state so far is returned when it runs out.
    score : callable, optional
        The makespan a split must lower: default the planner's estimate (the paper's
        ``T``); e.g. a simulation with link congestion, which the planner ignores.
    congestion, transfer_mode
        Run DPOS with its congestion-aware planner in that transfer mode (:func:`dpos`).
    incumbent : float, optional
        The start strategy's value under ``score`` (module docstring): splits must beat
        it too; ``None``: no start strategy (the paper's Alg. 2 from DPOS alone).

    Examples
    --------
    ``a -> b -> c`` with a heavy ``b`` on two GPUs with free links: ``b`` is split in two.

    >>> from dnnplace.graphs import Cluster, OpGraph
    >>> g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0], [8.0], [1.0]], memory=[0] * 3,
    ...             src=[0, 1], dst=[1, 2], op_types=["Relu", "Conv2D", "Relu"])
    >>> cl = Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices)
    >>> r = os_dpos(g, cl, kappa=0.5)
    >>> r.dpos_estimate, r.planner_estimate, r.splits
    (10.0, 6.5, (('b', 'batch', 2),))
    """
    from dnnplace.graphs.batch_model import BatchModel

    t0 = time.perf_counter()
    rules_ = SplitRules(rules)
    if parts is not None:
        bad = [k for k in parts if int(k) < 2]
        if bad:
            raise InputError(f"OS-DPOS parts: every part count must be >= 2, got {bad[0]}")
    kap = BatchModel(1).floor(graph) if kappa is None else float(kappa)
    best = dpos(graph, cluster, nominal=nominal, on_oom=on_oom, congestion=congestion, transfer_mode=transfer_mode)
    value = score if score is not None else (lambda sched: sched.planner_estimate)
    first = best.planner_estimate
    best_value = value(best)
    kept = incumbent is not None and float(incumbent) <= best_value
    if kept:
        best_value = float(incumbent)
    trials, t_first, timed_out = 1, None, False
    tried: set[str] = set()
    accepted: list[tuple[str, str, int]] = []
    runs_on = ~np.isnan(cluster.compute_matrix(graph))

    def over() -> bool:
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    def candidates(s: FastTSchedule) -> list[str]:
        g = s.graph
        cp = [v for v in placed_critical_path(s).tolist() if str(g.ids[v]) not in tried]
        cp = splittable_ops(g, rules_, cp)
        dur = s.finish - s.start
        cp.sort(key=lambda v: (-dur[v], g.topo_position[v]))
        return [str(g.ids[v]) for v in cp]

    queue = candidates(best)
    listed = list(queue)
    if max_candidates is not None:
        queue = queue[:max_candidates]
    while queue and not timed_out:
        op = queue.pop(0)
        tried.add(op)
        g = best.graph
        v = g.index_of(op)
        o = graph.index_of(op) if op in graph.index else None
        k_dev = int(runs_on[o].sum()) if o is not None else cluster.size
        if k_dev < 2:
            continue  # "never split ops that only one device can run"
        counts = sorted({int(k) for k in parts}) if parts is not None else list(range(2, k_dev + 1))
        found = None
        for n in counts:
            for dim in rules_.of(g, v):
                if over():
                    timed_out = True
                    break
                s = dpos(split_operation(g, v, dim, n, kappa=kap, aux_cost_per_byte=aux_cost_per_byte), cluster,
                         nominal=nominal, on_oom=on_oom, congestion=congestion, transfer_mode=transfer_mode)
                trials += 1
                v_s = value(s)
                if found is None or v_s < found[3] - 1e-12:
                    found = (s, dim, n, v_s)
            if timed_out:
                break
        if found is not None and found[3] < best_value - 1e-12 * max(1.0, abs(best_value)):
            best, best_value, kept = found[0], found[3], False
            accepted.append((op, found[1], found[2]))
            if t_first is None:
                t_first = time.perf_counter() - t0
            if recompute_cp:
                queue = candidates(best)
                listed.extend(q for q in queue if q not in listed)
        elif not timed_out:
            break  # the paper's rule: stop at the first candidate whose best split does not help
    return OSDPOSResult(best, tuple(accepted), first, trials, time.perf_counter() - t0, t_first, timed_out,
                        tuple(listed), best_value, kept)
