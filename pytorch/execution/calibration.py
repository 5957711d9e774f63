"""Fit the simulator's cost model from executed steps' timelines (docs/execution.md, Calibration).

An executed run (``dnnplace execute --out RUN.json``, :class:`~dnnplace.pytorch.execution.launch.Measured`)
records, for its median step, every operator's interval on its device (``ops``: the
operator alone, between ``run_node``'s start and end), every operator's median duration
over the measured steps (``op_median_ms``) and every message (``messages``): when its
sender began preparing it and when ``isend`` returned (``send_start_ms``,
``send_end_ms``), when its receiver began waiting for it, stopped waiting and had it
unpacked (``wait_start_ms``, ``wait_end_ms``, ``ready_ms``). From these :func:`fit` measures,
per device and per directed link, the parameters of docs/semantics.md 2.1:

* ``send_overhead[a]`` -- the mean of ``send_end - send_start`` over the messages ``a`` sent
  (means, not medians: the costs add up over a step, rare long posts included); a pack of
  ``k`` tensors (one message) counts as ``k`` messages of ``1/k`` of its costs each, since the
  simulator charges a message per tensor;
* ``recv_overhead[b]`` -- the mean over the messages ``b`` received of the unpacking
  ``ready - wait_end`` plus, for a message that had arrived before the wait (not blocked),
  the wait itself;
* the link ``(a, b)``: a receiver blocked in ``wait`` (longer than :data:`BLOCKED_MS`) stops
  waiting when the message arrives, so ``wait_end - departure`` samples the link's time,
  where a message departs when its producer has posted all its ``k`` messages, taken as
  the first post's start plus ``k`` typical (median) posts of that device (the simulator
  releases a node's transfers at its end, which includes the posting; ``send_end`` itself
  can come after the message arrived, when gloo's thread sent it while the sender's main
  thread was descheduled, docs/execution.md, Message timeline);
  ``beta0 + beta1 * bytes`` is fitted to those samples by least squares (``beta0, beta1 >= 0``);
  a blocked receiver's wake-up is part of ``beta0``, as it delays only a receiver that waits;
* the per-operator and per-message overheads: what a device's step spends outside operators,
  messages and waits, ``gap_d = end_d - sum(ops) - sum(send costs) - sum(recv costs) - sum(blocked
  waits)`` (the executor's loop, the interpreter, the bookkeeping of each message), where
  ``end_d`` is the device's last operator or message end since the step's start, fitted over
  every device of every run as ``gap_d = a * ops_d + b * sent_d + c * received_d`` (messages
  counted as packs; non-negative least squares): ``a`` is every device's per-operator
  overhead, ``b`` and ``c`` join the send and receive costs per message. A step with
  messages leaves more unexplained time per operator than a step without (results/execution/calibration/README.md):
  charged per operator alone, that per-message share would make one-device steps replay long
  and many-message steps short;
* with the graph's profiled compute times ``c_v`` (``measured:cpu``): ``m_v = s_d c_v + i_d``
  fitted to the measured operator times ``m_v`` by least squares (``s_d > 0``, ``i_d >= 0``),
  which sets the device's ``speed = 1 / s_d`` and adds ``i_d`` to its ``op_overhead``.

Devices and links without samples take the median of those of the same kind that have
them (a one-device run calibrates every device of that kind's operators). :func:`replay`
simulates a run's own placement and order on its measured operator times and the
calibrated messages and links: the check that the model explains the measurement
(docs/execution.md, Calibration).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InputError

__all__ = ["BLOCKED_MS", "RunTrace", "Calibration", "read_run", "fit", "link_samples", "calibrated_cluster", "replay",
           "simulate_run", "link_fit", "links_queue", "replays"]

BLOCKED_MS = 0.05
"""A receiver that waited longer than this (ms) for a message was blocked: the message
arrived during the wait."""


@dataclass(frozen=True)
class RunTrace:
    """The parts of one executed run that calibration reads (times in ms since the step's start)."""

    ops: list[dict]
    messages: list[dict]
    op_ms: dict[str, float]
    step_ms: float
    placement: dict[str, str]
    start: dict[str, float] | None
    source: str = "run"
    recorded_ms: float | None = None   # the recorded step's own time (``ops``, ``messages``); None: ``step_ms``

    @property
    def replay_target_ms(self) -> float:
        """What a replay reproduces: the recorded step's time (``recorded_step_ms``, the
        median step's), else the median step."""
        return self.step_ms if self.recorded_ms is None else self.recorded_ms


def read_run(doc: Mapping[str, Any], source: str = "run") -> RunTrace:
    """A :class:`RunTrace` from an executed run's record (``dnnplace execute --out``), or an
    :class:`InputError` naming the missing field."""
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: expected an executed run's JSON object (dnnplace execute --out)")
    for key in ("ops", "messages", "measured_step_ms"):
        if key not in doc:
            hint = " (runs recorded before message timelines: execute the plan again)" if key == "messages" else ""
            raise InputError(f"{source}: no {key!r} field: not an executed run's record{hint}")
    plan = doc.get("plan") if isinstance(doc.get("plan"), Mapping) else {}
    placement = {str(k): v for k, v in (plan.get("placement") or {o["node"]: o["device"] for o in doc["ops"]}).items()}
    op_ms = {str(k): float(v) for k, v in (doc.get("op_median_ms") or {}).items()}
    if not op_ms:
        op_ms = {o["node"]: float(o["end_ms"]) - float(o["start_ms"]) for o in doc["ops"]}
    start = plan.get("start")
    return RunTrace(ops=[{**o, "node": str(o["node"])} for o in doc["ops"]], messages=_shares(doc["messages"]),
                    op_ms=op_ms, step_ms=float(doc["measured_step_ms"]), placement=placement,
                    start={str(k): float(v) for k, v in start.items()} if isinstance(start, Mapping) else None,
                    source=source,
                    recorded_ms=float(doc["recorded_step_ms"]) if doc.get("recorded_step_ms") is not None else None)


def _shares(rows: Sequence[Mapping]) -> list[dict]:
    """The message rows with each tensor's ``share`` of its pack (docs/execution.md, What is
    sent: the tensors of one pack travel as one message and share its times) and the pack's
    bytes (``pack_bytes``): a pack's costs are split evenly over its tensors, as the simulator
    charges a message per tensor sent; rows without ``pack`` are messages of their own."""
    size: dict = {}
    for r in rows:
        if "pack" in r:
            n, b = size.get(r["pack"], (0, 0))
            size[r["pack"]] = (n + 1, b + int(r["bytes"]))
    out = []
    for r in rows:
        n, b = size.get(r.get("pack"), (1, int(r["bytes"])))
        out.append({**r, "share": 1.0 / n, "pack_bytes": b})
    return out


def link_fit(nbytes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """``(beta0, beta1)`` of ``time = beta0 + beta1 * bytes`` by least squares with both
    coefficients >= 0 (one size: ``beta1 = 0`` and ``beta0`` the median time).

    >>> link_fit([0, 1000, 2000], [1.0, 2.0, 3.0])
    (1.0, 0.001)
    """
    x = np.asarray(nbytes, dtype=np.float64)
    y = np.asarray(times, dtype=np.float64)
    if x.size == 0:
        raise InputError("link_fit: no samples")
    if np.ptp(x) == 0:
        return max(float(np.median(y)), 0.0), 0.0
    b1, b0 = np.polyfit(x, y, 1)
    if b1 < 0:
        return max(float(np.median(y)), 0.0), 0.0
    if b0 < 0:
        b1 = float(max(np.dot(x, y) / np.dot(x, x), 0.0))
        return 0.0, round(b1, 15)
    return round(float(b0), 12), round(float(b1), 15)


def _op_fit(costs: Sequence[float], measured: Sequence[float]) -> tuple[float, float]:
    """``(s, i)`` of ``measured = s * cost + i`` by least squares, ``s > 0`` and ``i >= 0``."""
    c = np.asarray(costs, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    if c.size >= 3 and np.ptp(c) > 0:
        s, i = np.polyfit(c, m, 1)
        if s > 0 and i >= 0:
            return float(s), float(i)
    s = float(m.sum() / c.sum()) if c.sum() > 0 else 1.0
    return (s if s > 0 else 1.0), 0.0


@dataclass
class Calibration:
    """What :func:`fit` measured: per device and per directed link (ms, bytes), with the
    sample counts behind each figure."""

    send_overhead: dict[str, float] = field(default_factory=dict)
    recv_overhead: dict[str, float] = field(default_factory=dict)
    op_gap: dict[str, float] = field(default_factory=dict)
    op_scale: dict[str, float] = field(default_factory=dict)
    op_intercept: dict[str, float] = field(default_factory=dict)
    links: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"send_overhead_ms": self.send_overhead, "recv_overhead_ms": self.recv_overhead,
                "op_gap_ms": self.op_gap, "op_scale": self.op_scale, "op_intercept_ms": self.op_intercept,
                "links": [{"src": a, "dst": b, "beta0_ms": b0, "beta1_ms_per_byte": b1}
                          for (a, b), (b0, b1) in sorted(self.links.items())],
                "samples": self.samples}


def _producers(run: RunTrace) -> list[str | None]:
    """The node that sent each message: the last operator on its source device that ended
    before the message's preparation began."""
    by_dev: dict[str, list[tuple[float, str]]] = {}
    for o in run.ops:
        by_dev.setdefault(o["device"], []).append((float(o["end_ms"]), o["node"]))
    ends = {d: (np.array([e for e, _ in sorted(v)]), [n for _, n in sorted(v)]) for d, v in by_dev.items()}
    out = []
    for msg in run.messages:
        times, nodes = ends.get(msg["src"], (np.empty(0), []))
        k = int(np.searchsorted(times, float(msg["send_start_ms"]) + 1e-9, side="right")) - 1
        out.append(nodes[k] if k >= 0 else None)
    return out


def link_samples(run: RunTrace) -> list[tuple[str, str, float, float]]:
    """``(sender, receiver, bytes, ms)`` per message whose receiver was blocked (longer
    than :data:`BLOCKED_MS`): the time from the message's departure (its producer's
    first post plus as many typical posts of that device as it posts tensors, see the
    module docstring) to the end of the receiver's wait, one sample per message (a pack
    once, with the pack's bytes)."""
    producer = _producers(run)
    posts: dict[str, list[float]] = {}
    first_post: dict[tuple[str, str | None], list[float]] = {}
    for msg, p in zip(run.messages, producer):
        posts.setdefault(msg["src"], []).append(float(msg["send_end_ms"]) - float(msg["send_start_ms"]))
        f = first_post.setdefault((msg["src"], p), [np.inf, 0.0])
        f[0] = min(f[0], float(msg["send_start_ms"]))
        f[1] += msg.get("share", 1.0)
    typical = {d: statistics.median(v) for d, v in posts.items()}
    departs = {key: t + count * typical[key[0]] for key, (t, count) in first_post.items()}
    seen: set = set()
    out = []
    for msg, p in zip(run.messages, producer):
        pack = (msg["src"], msg["dst"], msg.get("pack", id(msg)))
        if float(msg["wait_end_ms"]) - float(msg["wait_start_ms"]) > BLOCKED_MS and pack not in seen:
            seen.add(pack)
            out.append((msg["src"], msg["dst"], float(msg.get("pack_bytes", msg["bytes"])),
                        float(msg["wait_end_ms"]) - departs[(msg["src"], p)]))
    return out


def fit(runs: Sequence[RunTrace], costs: Sequence[Mapping[str, float] | None] = ()) -> Calibration:
    """Fit the per-device and per-link figures (see the module docstring) over ``runs``;
    ``costs[k]`` (optional) are run ``k``'s graph's profiled compute times by node id."""
    send: dict[str, list[float]] = {}
    recv: dict[str, list[float]] = {}
    transit: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    gaps: list[tuple[float, float, float, float]] = []   # per run and device: gap, operators, packs sent, received
    shares: dict[str, tuple[list[float], list[float]]] = {}   # per device: shares of tensors sent, received
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for k, run in enumerate(runs):
        for a, b, nbytes, ms in link_samples(run):
            xs, ys = transit.setdefault((a, b), ([], []))
            xs.append(nbytes)
            ys.append(ms)
        packs_out: dict[str, float] = {}
        packs_in: dict[str, float] = {}
        spent: dict[str, float] = {}
        last: dict[str, float] = {}
        for msg in run.messages:
            a, b = msg["src"], msg["dst"]
            share = msg.get("share", 1.0)
            wait = float(msg["wait_end_ms"]) - float(msg["wait_start_ms"])
            blocked = wait > BLOCKED_MS
            s = share * (float(msg["send_end_ms"]) - float(msg["send_start_ms"]))
            r = share * (float(msg["ready_ms"]) - float(msg["wait_end_ms"]) + (0.0 if blocked else wait))
            wait *= share
            send.setdefault(a, []).append(s)
            recv.setdefault(b, []).append(r)
            shares.setdefault(a, ([], []))[0].append(share)
            shares.setdefault(b, ([], []))[1].append(share)
            packs_out[a] = packs_out.get(a, 0.0) + share
            packs_in[b] = packs_in.get(b, 0.0) + share
            spent[a] = spent.get(a, 0.0) + s
            spent[b] = spent.get(b, 0.0) + r + (wait if blocked else 0.0)
            last[a] = max(last.get(a, -np.inf), float(msg["send_end_ms"]))
        by_dev: dict[str, list[dict]] = {}
        for o in run.ops:
            by_dev.setdefault(o["device"], []).append(o)
        for d, ops in by_dev.items():
            end = max(max(float(o["end_ms"]) for o in ops), last.get(d, -np.inf))
            busy = sum(float(o["end_ms"]) - float(o["start_ms"]) for o in ops)
            gaps.append((max(end - busy - spent.get(d, 0.0), 0.0),   # every device starts with the step (0)
                         float(len(ops)), packs_out.get(d, 0.0), packs_in.get(d, 0.0)))
        cost = costs[k] if k < len(costs) else None
        if cost:
            for v, m in run.op_ms.items():
                c = cost.get(v)
                if c is not None and np.isfinite(c):
                    cs, ms = pairs.setdefault(run.placement.get(v, ""), ([], []))
                    cs.append(float(c))
                    ms.append(float(m))
    cal = Calibration()
    per_op, per_sent, per_received = _gap_fit(gaps)
    # a pack of k tensors is k messages of share 1/k to the simulator (see the send costs)
    cal.send_overhead = {d: statistics.fmean(v) + per_sent * statistics.fmean(shares[d][0])
                         for d, v in sorted(send.items())}
    cal.recv_overhead = {d: statistics.fmean(v) + per_received * statistics.fmean(shares[d][1])
                         for d, v in sorted(recv.items())}
    cal.op_gap = {d: per_op for d in sorted({o["device"] for run in runs for o in run.ops})}
    for d, (cs, ms) in sorted(pairs.items()):
        cal.op_scale[d], cal.op_intercept[d] = _op_fit(cs, ms)
    cal.links = {ab: link_fit(xs, ys) for ab, (xs, ys) in sorted(transit.items())}
    cal.samples = {"runs": len(runs), "messages": sum(len(r.messages) for r in runs),
                   "blocked": sum(len(xs) for xs, _ in transit.values()),
                   "operators": sum(len(r.ops) for r in runs)}
    return cal


def _gap_fit(gaps: Sequence[tuple[float, float, float, float]]) -> tuple[float, float, float]:
    """``(a, b, c) >= 0`` minimising ``sum (gap - a * ops - b * sent - c * received)^2`` over
    ``gaps`` (rows ``(gap, ops, packs sent, packs received)``, see :func:`fit`).

    >>> [round(x, 6) for x in _gap_fit([(1.0, 100, 0, 0), (3.0, 100, 20, 20), (2.0, 50, 30, 0)])]
    [0.01, 0.05, 0.05]
    """
    if not gaps:
        return 0.0, 0.0, 0.0
    from scipy.optimize import nnls
    rows = np.array(gaps, dtype=np.float64)
    coef = nnls(rows[:, 1:], rows[:, 0])[0]
    return float(coef[0]), float(coef[1]), float(coef[2])


def _pooled(values: Mapping[str, float], name: str, kind: str, kinds: Mapping[str, str], default: float) -> float:
    """The device's own figure, else the median over devices of its kind that have one."""
    if name in values:
        return float(values[name])
    same = [v for d, v in values.items() if kinds.get(d) == kind]
    return float(statistics.median(same)) if same else default


def calibrated_cluster(base: Cluster, cal: Calibration, *, replay: bool = False,
                       congestion: bool | None = None) -> Cluster:
    """``base`` with the calibrated figures (devices and links the runs did not reach take
    those of their kind): per-message costs and link times always; ``speed`` and
    ``op_overhead`` from the operator fit for predictions on profiled costs, or
    (``replay``) ``speed = 1`` and only the measured gap as ``op_overhead``, for a graph
    whose compute times are the run's measured ones (:func:`replay`). ``congestion``
    (given): whether the links queue, kept as ``meta["congestion"]``
    (:attr:`~dnnplace.graphs.cluster.Cluster.default_congestion`)."""
    kinds = dict(zip(base.names, base.kinds))
    devs = []
    for d in base.devices:
        scale = 1.0 if replay else _pooled(cal.op_scale, d.name, d.kind, kinds, 1.0)
        over = _pooled(cal.op_gap, d.name, d.kind, kinds, d.op_overhead)
        if not replay:
            over += _pooled(cal.op_intercept, d.name, d.kind, kinds, 0.0)
        devs.append(Device(d.name, d.kind, d.memory, speed=1.0 / scale, op_overhead=over,
                           send_overhead=_pooled(cal.send_overhead, d.name, d.kind, kinds, d.send_overhead),
                           recv_overhead=_pooled(cal.recv_overhead, d.name, d.kind, kinds, d.recv_overhead)))
    b0, b1 = base.beta0.copy(), base.beta1.copy()
    if cal.links:
        pool0 = statistics.median(v[0] for v in cal.links.values())
        pool1 = statistics.median(v[1] for v in cal.links.values())
        for a in range(base.size):
            for b in range(base.size):
                if a != b:
                    b0[a, b], b1[a, b] = cal.links.get((base.names[a], base.names[b]), (pool0, pool1))
    meta = {**base.meta, "calibration": cal.to_dict(), **({} if congestion is None else {"congestion": congestion})}
    return Cluster(tuple(devs), b0, b1, base.cost_factor.copy(), name=f"{base.name}-calibrated", meta=meta,
                   ports=base.ports)


def simulate_run(graph: Any, cluster: Cluster, run: RunTrace, *, congestion: bool = True) -> Any:
    """The simulator's step of ``run``'s own placement and device order on ``graph``'s
    compute times and ``cluster`` (a :class:`~dnnplace.evaluation.simulate.SimResult`):
    the prediction of a run. ``congestion``: one message at a time per link (gloo sends a
    pair of processes' messages over one connection)."""
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.placement import Placement
    ids = [str(v) for v in graph.ids]   # node ids as a JSON record keys them
    missing = next((v for v in ids if v not in run.placement), None)
    if missing is not None:
        raise InputError(f"{run.source}: its plan does not place node {missing!r} of the graph (another model's run?)")
    pl = Placement(graph, cluster, [cluster.index_of(run.placement[v]) for v in ids])
    order = run.start or {o["node"]: float(o["start_ms"]) for o in run.ops}
    return simulate(pl, policy="order", priorities=np.array([float(order[v]) for v in ids]), congestion=congestion)


def replay(graph: Any, cluster: Cluster, run: RunTrace, *, congestion: bool = True) -> Any:
    """:func:`simulate_run` on the operator times of the run's recorded step (``ops``, the
    median step, whose messages :func:`fit` reads too; ``op_median_ms`` for an operator
    the step has no row of) as compute; ``cluster`` as ``calibrated_cluster(..., replay=True)``
    makes it. The step's own times, not the medians over the steps: a replay reproduces
    one step, and an operator's time varies from step to step as much as the step does
    (docs/execution.md, Calibration)."""
    ids = [str(v) for v in graph.ids]
    own = {o["node"]: float(o["end_ms"]) - float(o["start_ms"]) for o in run.ops}
    missing = next((v for v in ids if v not in own and v not in run.op_ms), None)
    if missing is not None:
        raise InputError(f"{run.source}: no measured time for node {missing!r} of the graph (another model's run?)")
    measured = np.array([own[v] if v in own else run.op_ms[v] for v in ids], dtype=np.float64)
    g = graph.with_(compute=np.repeat(measured[:, None], len(graph.kinds), axis=1))
    return simulate_run(g, cluster, run, congestion=congestion)


def replays(graph: Any, base: Cluster, cal: Calibration, run: RunTrace) -> dict[str, float]:
    """``run`` replayed (:func:`replay`) on ``base`` calibrated by ``cal``, with one transfer at a
    time per link (``replayed_ms``) and with overlapping transfers (``replayed_ms_overlap``):
    the two link models :func:`links_queue` chooses between."""
    cluster = calibrated_cluster(base, cal, replay=True)
    return {key: float(replay(graph, cluster, run, congestion=queue).makespan)
            for queue, key in ((True, "replayed_ms"), (False, "replayed_ms_overlap"))}


def links_queue(rows: list[dict]) -> bool:
    """Whether the runs' transfers queued on their links: the link model (one transfer at
    a time per link, or overlapping transfers) whose replays have the smaller median |error|
    against the steps they replay (``recorded_ms``, else ``measured_ms``; queues where no run
    was replayed)."""
    err = {q: [abs(r[k] / r.get("recorded_ms", r["measured_ms"]) - 1) for r in rows if r.get(k) is not None]
           for q, k in ((True, "replayed_ms"), (False, "replayed_ms_overlap"))}
    if not err[True]:
        return True
    return statistics.median(err[True]) <= statistics.median(err[False])
