r"""Pesto's makespan model (Hafeez et al., Middleware 2021, Sec. 3.2.2) in OR-Tools CP-SAT:
the second exact engine beside the Pyomo MIP of :mod:`dnnplace.formulations.pesto_ip`
(optional extra ``dnnplace[cpsat]``: ``pip install ortools``).

Same problem, same semantics (docs/semantics.md 2.1, links in any order as Pesto's (7)), stated with
CP-SAT's scheduling constraints instead of big-M disjunctions:

- placement :math:`x_{id} \in \{0,1\}`, :math:`\sum_d x_{id} = 1` over the allowed devices
  (affinity, memory, colocation: :func:`~dnnplace.formulations.pesto_precompute.prepare`);
- start :math:`S_i`, completion :math:`C_i = S_i + \sum_d p_{id} x_{id}` (2), and for every
  allowed :math:`(i, d)` an *optional interval* :math:`[S_i, S_i + p_{id})` present iff
  :math:`x_{id}`; ``NoOverlap`` per device replaces (4)/(10);
- every edge :math:`e = (i, j)`: :math:`S_j \ge C_i`; where its ends may be apart, for
  every pair of devices :math:`a \ne b` the literal :math:`y_{eab} = x_{ia} \wedge x_{jb}`
  (5) and, without congestion, :math:`S_j \ge C_i + t_{eab}` if :math:`y_{eab}` (1), (6);
  with congestion a transfer start :math:`T_e \ge C_i`, :math:`S_j \ge T_e + t_{eab}` if
  :math:`y_{eab}`, and an optional interval :math:`[T_e, T_e + t_{eab})` present iff
  :math:`y_{eab}` on the directed link :math:`(a, b)`, whose intervals are in one
  ``NoOverlap`` (7); a zero-length transfer therefore never waits for its link here
  (the MIP orders it like any other);
- per-message costs (docs/semantics.md 2.1; only where ``cluster.has_message_costs``,
  else the model is exactly the one without them): the MIP's (2'),
  :math:`C_i = S_i + \sum_d p_{id} x_{id} + \mu_i` with :math:`\mu_i` the sender's
  overhead times :math:`y_{eab}` for :math:`a \ne b` over the crossing out-edges and the
  receiver's over the crossing in-edges (the literals above: no new ones), and the
  device intervals :math:`[S_i, C_i)` of variable length; the load cut counts them too;
- memory (8) :math:`\sum_i m_i x_{id} \le M_d` (fractional bytes rounded up, capacities
  down, so every solution fits; the bound is then dropped as below), colocation
  :math:`x_{id} = x_{rd}`, the optional load cut :math:`C_{\max} \ge \sum_i p_{id} x_{id}`,
  and the same symmetry breaking as the MIP (a device of an identical class is used
  only after the previous one was, in topological order of first use), stated with a
  running "used so far" literal per device instead of the MIP's prefix sums;
- minimise :math:`C_{\max} \ge C_i` (3), :math:`C_{\max} \le U` (a feasible schedule's
  makespan, as the MIP's horizon).

CP-SAT needs integers: every time is multiplied by ``scale``, the smallest power of ten
(up to :math:`10^6`) that makes every duration and the horizon integral. When none does
(real profiles), ``scale`` maps the horizon to about :math:`10^8` units and every
duration and transfer time is rounded *down*: the integer model is then a relaxation
(the scaled schedule of any true one, each time rounded down, satisfies it, since
:math:`\lfloor a + b \rfloor \ge \lfloor a \rfloor + \lfloor b \rfloor`), so CP-SAT's
bound divided by ``scale`` is a lower bound of the true problem (before 2026-11-27, times
were rounded to the nearest unit and the bound dropped; results/pesto/time-to-1pct.md). Its objective is not a true
makespan: its schedule is a valid set of device and link orders, which the pipeline
replays with the true durations (at most one unit per task on a path above it, where
every transfer lasts at least one unit: one rounded to zero never waits for its link); an
"optimal" answer is reported as ``feasible``.

Windows and bounds (``comm_windows``; results/pesto/time-to-1pct.md): every start is at least its head and
:math:`C_{\max} \ge C_i + q_i`, with the larger of the heads and tails of the integer
durations (:func:`~dnnplace.formulations.pesto_precompute.heads_tails`) and those of
:func:`~dnnplace.formulations.pesto_precompute.strong_heads_tails` (transfer-aware,
energetic) scaled and rounded down; :math:`C_{\max} \ge \lfloor scale \cdot LB \rfloor`
with :math:`LB` the :func:`~dnnplace.evaluation.bounds.makespan_lower_bound` of the
instance; and a redundant ``Cumulative`` of capacity :math:`|D|` over the mandatory
intervals :math:`[S_i, S_i + \underline p_i)` (at most one op per device at a time),
whose energetic reasoning the per-device optional intervals lack. All hold for the
rounded-down image of every true schedule (for tails,
:math:`\lfloor a - b \rfloor \le \lfloor a \rfloor - \lfloor b \rfloor`), so the bound
stays valid. The horizon gets ``n + m`` units of slack, so the hint (the warm start's
orders replayed with integer durations, every start at least its head) always fits.

Like the MIP it counts one transfer per edge (the simulator's ``transfer_mode="per_edge"``);
under the default mode, a tensor sent once to each consuming device, its optimum is an
upper bound of its replay and its bound no bound of the problem, which
:func:`~dnnplace.formulations.multilevel.pesto.pesto` accounts for.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from dnnplace.evaluation.bounds import makespan_lower_bound
from dnnplace.formulations.device_symmetry import identical_device_classes
from dnnplace.formulations.pesto_cpsat_solve import CpsatTimes, solve_cpsat_model
from dnnplace.formulations.pesto_precompute import PestoOptions, edge_messages, heads_tails, message_time, prepare
from dnnplace.formulations.pesto_solution import replay_orders
from dnnplace.formulations.solvers.options import SolverOptions
from dnnplace.formulations.solvers.outcome import SolveOutcome, Termination
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.runtime.deadline import NO_DEADLINE, Deadline, TimeLimitReached, capped

__all__ = ["solve_pesto_cpsat", "time_scale", "CpsatTimes", "available"]


def available() -> bool:
    """Whether OR-Tools is installed (the optional extra ``dnnplace[cpsat]``)."""
    import importlib.util

    return importlib.util.find_spec("ortools") is not None


def time_scale(values: np.ndarray, horizon: float, *, max_power: int = 6,
               inexact_power: int | None = None) -> tuple[float, bool]:
    """``(scale, exact)``: the smallest ``10**k`` (``k <= max_power``) with every finite
    value and the horizon integral after scaling (``exact``), else a scale putting the
    horizon at about ``10**inexact_power`` units (default ``max_power``).

    >>> time_scale(np.array([0.5, 2.25, 3.0]), 12.0)
    (100.0, True)
    >>> time_scale(np.array([1 / 3]), 2.0)[1]
    False
    """
    v = np.append(np.asarray(values, dtype=np.float64).ravel(), horizon)
    v = v[np.isfinite(v)]
    for k in range(max_power + 1):
        s = 10.0 ** k
        if np.all(np.abs(v * s - np.round(v * s)) <= 1e-9 * np.maximum(1.0, np.abs(v * s))):
            return s, True
    power = max_power if inexact_power is None else inexact_power
    return 10.0 ** max(0, round(power - math.log10(max(horizon, 1e-12)))), False


def solve_pesto_cpsat(graph: OpGraph, cluster: Cluster, *, horizon: float, options: PestoOptions | None = None,
                      solver: SolverOptions | None = None,
                      warm_start: tuple[np.ndarray, np.ndarray, dict] | None = None,
                      deadline: Deadline | None = None,
                      messages: np.ndarray | None = None) -> tuple[SolveOutcome, CpsatTimes | None]:
    """Build and solve the CP-SAT model (module docstring; parameters as
    :func:`_build_cpsat`); return the outcome and, when there is a solution, its
    schedule. Past ``deadline`` during the build the outcome is ``no_solution`` with
    termination ``time_limit``; the search gets at most what the deadline leaves."""
    deadline = deadline or NO_DEADLINE
    t0 = time.perf_counter()
    try:
        with deadline.guard("the CP-SAT model build"):
            args = _build_cpsat(graph, cluster, horizon=horizon, options=options, solver=solver,
                                warm_start=warm_start, messages=messages)
    except TimeLimitReached as exc:
        return SolveOutcome("no_solution", Termination.TIME_LIMIT, solver="cpsat", message=str(exc),
                            build_seconds=time.perf_counter() - t0), None
    sopts = args[2]
    args = (*args[:2], dataclasses.replace(sopts, time_limit=capped(sopts.time_limit, deadline)), *args[3:])
    return solve_cpsat_model(*args)


def _build_cpsat(graph: OpGraph, cluster: Cluster, *, horizon: float, options: PestoOptions | None = None,
                 solver: SolverOptions | None = None,
                 warm_start: tuple[np.ndarray, np.ndarray, dict] | None = None,
                 messages: np.ndarray | None = None) -> tuple:
    """Build the CP-SAT model: the arguments of :func:`_solve`.

    Parameters
    ----------
    graph, cluster
        The (possibly coarse) instance.
    horizon : float
        Makespan of a feasible schedule (upper bound of every time).
    options : PestoOptions
        Constraint families, as for the MIP.
    solver : SolverOptions
        ``time_limit``, ``threads`` (CP-SAT workers, default 1), ``rel_gap``, ``seed``;
        of ``solver_options`` only ``"cpsat_parameters"`` is read: a dict of CP-SAT
        parameters by their names, applied last, lists extending repeated fields (e.g.
        ``{"subsolvers": ["objective_lb_search"]}``: the full-problem worker searches for
        lower bounds while the other runs the neighbourhood searches; the other keys are
        the MIP backends').
    warm_start : (device, start, {edge: transfer start}), optional
        A feasible schedule, given to CP-SAT as a solution hint.
    messages : array of float, optional
        Per edge, the messages it stands for when it crosses devices (as for the MIP,
        :func:`~dnnplace.formulations.pesto_precompute.edge_messages`).
    """
    from ortools.sat.python import cp_model

    options = options or PestoOptions()
    solver = solver or SolverOptions(time_limit=60.0, threads=1)
    if not (horizon > 0 and math.isfinite(horizon)):
        raise InputError(f"horizon must be a positive finite makespan, got {horizon}")
    t0 = time.perf_counter()
    data = prepare(graph, cluster, options, horizon * (1 + 1e-9) + 1e-9, messages)
    g, cl, n, D = graph, cluster, graph.n, cluster.size
    src, dst = g.src.tolist(), g.dst.tolist()
    tt = np.full((g.m, D, D), np.nan)
    for a in range(D):
        for b in range(D):
            if a != b:
                tt[:, a, b] = cl.transfer_time(np.full(g.m, a), np.full(g.m, b), g.edge_bytes, g.edge_cost)
    msg = cl.has_message_costs and g.m > 0
    w = edge_messages(g, messages)
    sw, rw = w[:, None] * cl.send_overhead[None, :], w[:, None] * cl.recv_overhead[None, :]  # (m, D)
    times = [data.p.ravel(), tt.ravel()] + ([sw.ravel(), rw.ravel()] if msg else [])
    scale, exact = time_scale(np.concatenate(times), horizon, inexact_power=8)
    rnd = np.round if exact else np.floor  # rounded down: a relaxation (module docstring)
    P = np.where(np.isnan(data.p), -1, rnd(data.p * scale)).astype(np.int64)
    TT = np.where(np.isnan(tt), 0, rnd(tt * scale)).astype(np.int64)
    SW, RW = rnd(sw * scale).astype(np.int64), rnd(rw * scale).astype(np.int64)  # per message: send, receive
    U = int(math.ceil(horizon * scale - 1e-9)) + n + g.m  # slack: the hint always fits
    pmin_int = np.array([min(int(P[i, d]) for d in data.allowed[i]) for i in range(n)], dtype=np.float64)
    head, tail = heads_tails(g, pmin_int)
    lb = 0
    if options.comm_windows:  # data.head/tail: strong heads and tails (pesto_precompute.prepare)
        head = np.maximum(head, np.floor(data.head * scale))
        tail = np.maximum(tail, np.floor(data.tail * scale))
        lb = min(U, int(math.floor(makespan_lower_bound(g, cl) * scale)))

    m = cp_model.CpModel()
    x = {(i, d): m.NewBoolVar(f"x_{i}_{d}") for i in range(n) for d in data.allowed[i]}
    S = [m.NewIntVar(int(head[i]), max(int(head[i]), U - int(tail[i]) - int(pmin_int[i])), f"S_{i}") for i in range(n)]
    C = [m.NewIntVar(int(head[i] + pmin_int[i]), max(int(head[i] + pmin_int[i]), U - int(tail[i])), f"C_{i}")
         for i in range(n)]
    cmax = m.NewIntVar(lb, U, "cmax")
    cross = set(data.cross_edges)
    # ops whose messages may cost them time: their length C_i - S_i is a variable (2')
    busy = _message_spans(g, data, SW, RW, P) if msg else {}
    on_device: list[list] = [[] for _ in range(D)]
    for i in range(n):
        m.AddExactlyOne(x[i, d] for d in data.allowed[i])
        if i in busy:
            busy[i] = m.NewIntVar(int(pmin_int[i]), busy[i], f"L_{i}")
            m.Add(C[i] == S[i] + busy[i])
        else:
            m.Add(C[i] == S[i] + sum(int(P[i, d]) * x[i, d] for d in data.allowed[i]))
        for d in data.allowed[i]:
            if i in busy:
                on_device[d].append(m.NewOptionalIntervalVar(S[i], busy[i], C[i], x[i, d], f"run_{i}_{d}"))
            else:
                on_device[d].append(m.NewOptionalFixedSizeIntervalVar(S[i], int(P[i, d]), x[i, d], f"run_{i}_{d}"))
        m.Add(cmax >= C[i] + int(tail[i]))
    for d in range(D):
        if len(on_device[d]) > 1:
            m.AddNoOverlap(on_device[d])

    on_link: dict[tuple[int, int], list] = {}
    T = {}
    y = {}
    for e in range(g.m):
        i, j = src[e], dst[e]
        m.Add(S[j] >= C[i])
        if e not in cross:
            continue
        if options.congestion:
            T[e] = m.NewIntVar(0, U, f"T_{e}")
            m.Add(T[e] >= C[i])
        for a in data.allowed[i]:
            for b in data.allowed[j]:
                if a == b:
                    continue
                lit = m.NewBoolVar(f"y_{e}_{a}_{b}")
                y[e, a, b] = lit
                m.AddImplication(lit, x[i, a])
                m.AddImplication(lit, x[j, b])
                m.AddBoolOr([x[i, a].Not(), x[j, b].Not(), lit])
                t = int(TT[e, a, b])
                if options.congestion:
                    m.Add(S[j] >= T[e] + t).OnlyEnforceIf(lit)
                    on_link.setdefault((a, b), []).append(
                        m.NewOptionalFixedSizeIntervalVar(T[e], t, lit, f"xfer_{e}_{a}_{b}"))
                else:
                    m.Add(S[j] >= C[i] + t).OnlyEnforceIf(lit)
    for ivs in on_link.values():
        if len(ivs) > 1:
            m.AddNoOverlap(ivs)
    mu = _message_terms(g, y, SW, RW) if msg else {}
    for i, length in busy.items():
        m.Add(length == sum(int(P[i, d]) * x[i, d] for d in data.allowed[i]) + sum(mu.get(i, [])))

    bound_ok = True
    if options.memory:
        # bytes up, capacities down: every solution fits; with fractional bytes (not with
        # a fractional capacity alone) the model is stricter than the instance, so its
        # bound is dropped
        mem = np.ceil(g.memory).astype(np.int64)
        for d in range(D):
            ops = [i for i in range(n) if d in data.allowed[i]]
            cap = cl.memory[d]
            if math.isfinite(cap) and int(mem[ops].sum()) > cap:
                bound_ok = bound_ok and bool(np.all(mem[ops] == g.memory[ops]))  # integer sums: <= cap iff <= floor
                m.Add(sum(int(mem[i]) * x[i, d] for i in ops) <= int(math.floor(cap)))
    if options.colocation:
        for i in range(n):
            r = int(data.group_leader[i])
            if r != i:
                for d in data.allowed[i]:
                    m.Add(x[i, d] == x[r, d])
    if options.load_cuts:
        for d in range(D):
            terms = [int(P[i, d]) * x[i, d] for i in range(n) if d in data.allowed[i]]
            if terms and msg:  # the device's messages (2')
                terms += [int(SW[e, a]) * lit for (e, a, b), lit in y.items() if a == d and SW[e, a] > 0]
                terms += [int(RW[e, b]) * lit for (e, a, b), lit in y.items() if b == d and RW[e, b] > 0]
            if terms:
                m.Add(cmax >= sum(terms))
    if options.symmetry:
        _add_symmetry(m, g, cl, data.allowed, x)
    if options.comm_windows:
        _add_all_devices(m, S, pmin_int, data)
    m.Minimize(cmax)

    if warm_start is not None:
        dev = np.asarray(warm_start[0], dtype=np.int64)
        c = dev[g.src] != dev[g.dst]
        MU = np.bincount(g.src[c], weights=SW[c, dev[g.src[c]]], minlength=n) \
            + np.bincount(g.dst[c], weights=RW[c, dev[g.dst[c]]], minlength=n) if msg else np.zeros(n)
        S_h, T_h = _integer_hint(g, dev, np.asarray(warm_start[1], dtype=np.float64), warm_start[2],
                                 data.p + message_time(g, cl, dev, w)[:, None], tt, P + MU.astype(np.int64)[:, None],
                                 TT, options.congestion, head)
        for (i, d), lit in x.items():
            m.AddHint(lit, int(dev[i] == d))
        for i in range(n):
            m.AddHint(S[i], int(S_h[i]))
        for e, var in T.items():
            m.AddHint(var, int(T_h.get(e, S_h[src[e]] + P[src[e], dev[src[e]]])))
    build = time.perf_counter() - t0
    return (m, cp_model, solver, scale, (exact, bound_ok), build, warm_start is not None, g, cl, x, S, C, T, TT)


def _message_spans(g: OpGraph, data, SW: np.ndarray, RW: np.ndarray, P: np.ndarray) -> dict[int, int]:
    """The ops whose messages may cost them time, each with the most its length can be
    (its slowest device plus every crossing edge at its dearest send or receive)."""
    hi = {}
    for e in data.cross_edges:
        i, j = int(g.src[e]), int(g.dst[e])
        s_max = max(int(SW[e, a]) for a in data.allowed[i])
        r_max = max(int(RW[e, b]) for b in data.allowed[j])
        if s_max > 0:
            hi[i] = hi.get(i, 0) + s_max
        if r_max > 0:
            hi[j] = hi.get(j, 0) + r_max
    return {i: extra + max(int(P[i, d]) for d in data.allowed[i]) for i, extra in hi.items()}


def _message_terms(g: OpGraph, y: dict, SW: np.ndarray, RW: np.ndarray) -> dict[int, list]:
    r"""Per op, the terms of :math:`\mu_i` (2'): ``y[e, a, b]`` (``a != b``) weighted by the
    send overhead of ``a`` on ``e``'s source, by the receive overhead of ``b`` on its target."""
    mu: dict[int, list] = {}
    for (e, a, b), lit in y.items():
        if SW[e, a] > 0:
            mu.setdefault(int(g.src[e]), []).append(int(SW[e, a]) * lit)
        if RW[e, b] > 0:
            mu.setdefault(int(g.dst[e]), []).append(int(RW[e, b]) * lit)
    return mu


def _integer_hint(g: OpGraph, dev: np.ndarray, st: np.ndarray, xs: dict, p: np.ndarray, tt: np.ndarray,
                  P: np.ndarray, TT: np.ndarray, congestion: bool,
                  head: np.ndarray) -> tuple[list[int], dict[int, int]]:
    """The warm start as a complete solution of the integer model: its device and link
    orders replayed with the integer durations ``P`` and ``TT``
    (:func:`~dnnplace.formulations.pesto_solution.replay_orders`), every task as early as
    those orders, precedence and the node's integer ``head`` allow (so rounding never
    makes the hint infeasible and CP-SAT starts from it). Returns node starts and
    transfer starts (crossing edges)."""
    n, a, b = g.n, dev[g.src], dev[g.dst]
    cross = a != b
    e_all = np.arange(g.m)
    return replay_orders(g, dev, st, st + p[np.arange(n), dev], xs, np.where(cross, tt[e_all, a, b], 0.0),
                         P[np.arange(n), dev].astype(np.int64), np.where(cross, TT[e_all, a, b], 0).astype(np.int64),
                         congestion, head.astype(np.int64))


def _add_all_devices(m, S: list, pmin_int: np.ndarray, data) -> None:
    r"""Redundant: at most :math:`m` ops run at once, :math:`m` the devices that can run
    some op, each op busy at least :math:`[S_i, S_i + \underline p_i)` (a cumulative of
    mandatory intervals, whose energetic reasoning the per-device optional ones lack)."""
    cap = len({d for a in data.allowed for d in a})
    if cap >= data.graph.n or cap < 2:
        return
    ivs = [m.NewFixedSizeIntervalVar(S[i], int(pmin_int[i]), f"busy_{i}") for i in range(len(S)) if pmin_int[i] > 0]
    m.AddCumulative(ivs, [1] * len(ivs), cap)


def _add_symmetry(m, g: OpGraph, cl: Cluster, allowed: list, x: dict) -> None:
    """Device ``d_j`` of an identical class is used only after ``d_{j-1}`` was (in
    topological order): ``x[v_k, d_j] <= used[k, d_{j-1}]``, with ``used`` the running
    OR of ``x[v_l, d]`` over ``l < k``."""
    for cls in identical_device_classes(cl):
        members = [v for v in g.topo_order.tolist() if cls[0] in allowed[v]]
        used = {d: None for d in cls}  # literal "d used by an earlier member" (None: not yet possible)
        for v in members:
            for jj in range(1, len(cls)):
                d, prev = cls[jj], cls[jj - 1]
                if (v, d) in x:
                    if used[prev] is None:
                        m.Add(x[v, d] == 0)
                    else:
                        m.AddImplication(x[v, d], used[prev])
            for d in cls:
                if (v, d) not in x:
                    continue
                nxt = m.NewBoolVar("")
                if used[d] is None:
                    m.Add(nxt == x[v, d])
                else:
                    m.AddMaxEquality(nxt, [used[d], x[v, d]])
                used[d] = nxt
