"""Tests of the discrete-event simulator (docs/semantics.md 2.1, 3) and its Gantt plot.

Hand cases draw the DAG as ``name(duration)@device`` and give the reason for every
expected number; property tests run seeded random DAGs through every policy and check
each schedule with the independent :func:`validate_schedule`.
"""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from conftest import png_pixels_by_colour
from hypothesis import given, settings
from hypothesis import strategies as st

from dnnplace.evaluation.simulate import POLICIES, SimResult, bottom_level, simulate, validate_schedule
from dnnplace.graphs import Cluster, Device, InputError, OpGraph, Placement, Schedule


# ---------------------------------------------------------------------------- helpers
def cluster(d: int, *, beta0: float = 0.0, beta1: float = 0.0) -> Cluster:
    """``d`` identical GPUs; every link takes ``beta0 + beta1 * bytes``."""
    devs = [Device(f"gpu{i}", "gpu") for i in range(d)]
    return Cluster.from_links(devs, default={"beta0": beta0, "beta1": beta1})


def graph(ids, edges, times, **fields) -> OpGraph:
    """GPU-only graph from ids, ``(u, v)`` pairs and one time per node."""
    fields.setdefault("memory", [0.0] * len(ids))
    return OpGraph.from_ids(list(ids), edges, kinds=["gpu"], compute=[[t] for t in times], **fields)


def run(g: OpGraph, cl: Cluster, dev, **kw) -> SimResult:
    """Simulate and assert the independent validator accepts the schedule."""
    pl = Placement(g, cl, dev)
    r = simulate(pl, **kw)
    assert validate_schedule(r.schedule, transfers=r, congestion=r.congestion) == []
    return r


def starts(r: SimResult) -> dict:
    return {str(i): s for i, s in zip(r.placement.graph.ids, r.start.tolist(), strict=True)}


# ---------------------------------------------------------------------------- (a) chain
def test_chain_on_one_device():
    # a(1) -> b(2) -> c(3), all on gpu0: runs back to back, makespan 1 + 2 + 3 = 6.
    g = graph("abc", [("a", "b"), ("b", "c")], [1, 2, 3])
    r = run(g, cluster(2, beta0=5.0), [0, 0, 0])
    assert r.makespan == 6.0
    assert starts(r) == {"a": 0.0, "b": 1.0, "c": 3.0}
    assert r.n_transfers == 0 and r.link_count.sum() == 0
    assert r.busy.tolist() == [6.0, 0.0]


# ---------------------------------------------------------------------------- (b) transfer
def test_two_devices_with_a_transfer():
    # a(1)@gpu0 -> b(2)@gpu1, 8 bytes; link time 0.5 + 0.25 * 8 = 2.5.
    # a runs [0,1), the transfer [1,3.5), b [3.5,5.5): makespan 5.5.
    g = graph("ab", [("a", "b")], [1, 2], edge_bytes=[8.0])
    r = run(g, cluster(2, beta0=0.5, beta1=0.25), [0, 1])
    assert r.makespan == 5.5
    assert starts(r) == {"a": 0.0, "b": 3.5}
    assert (r.xfer_start.tolist(), r.xfer_finish.tolist()) == ([1.0], [3.5])
    assert (r.xfer_src_dev.tolist(), r.xfer_dst_dev.tolist()) == ([0], [1])
    assert r.link_bytes[0, 1] == 8.0 and r.link_busy[0, 1] == 2.5 and r.link_count[0, 1] == 1
    assert r.link_count.sum() == 1
    d = json.loads(json.dumps(r.to_dict(trace=True)))
    assert d["links"] == {"gpu0->gpu1": {"transfers": 1, "bytes": 8.0, "busy": 2.5}}
    assert d["devices"]["gpu1"]["busy"] == 2.0 and d["makespan"] == 5.5
    assert d["trace_transfers"][0]["edge"] == ["a", "b"] and len(d["nodes"]) == 2
    assert "nodes" not in r.to_dict()


def test_explicit_edge_cost_overrides_link_model():
    # a(1)@gpu0 -> b(1)@gpu1 with explicit cost 4 (beta ignored): makespan 1 + 4 + 1 = 6.
    g = graph("ab", [("a", "b")], [1, 1], edge_cost=[4.0], edge_bytes=[100.0])
    assert run(g, cluster(2, beta0=0.5, beta1=1.0), [0, 1]).makespan == 6.0


def test_op_overhead_is_added_to_every_node():
    # a(1)@gpu0 -> b(2)@gpu1, link 0.5; per-operator overhead 0.5 on gpu0, 0.25 on gpu1:
    # a [0, 1.5), transfer [1.5, 2), b [2, 4.25): makespan 4.25 (without overheads 3.5).
    g = graph("ab", [("a", "b")], [1, 2])
    devs = [Device("gpu0", "gpu", op_overhead=0.5), Device("gpu1", "gpu", op_overhead=0.25)]
    cl = Cluster.from_links(devs, default={"beta0": 0.5})
    r = run(g, cl, [0, 1])
    assert r.makespan == 4.25 and starts(r) == {"a": 0.0, "b": 2.0}
    assert r.busy.tolist() == [1.5, 2.25]
    assert run(g, cluster(2, beta0=0.5), [0, 1]).makespan == 3.5
    # the lower bound counts it: each node's least time over the devices, a 1 + 0.25 and
    # b 2 + 0.25, on the critical path: 3.5 (without overheads 3)
    from dnnplace.evaluation.bounds import makespan_lower_bound

    assert makespan_lower_bound(g, cl) == 3.5 and makespan_lower_bound(g, cluster(2)) == 3.0
    with pytest.raises(InputError, match="op_overhead"):
        Device("gpu0", "gpu", op_overhead=-1.0)


# ---------------------------------------------------------------------------- (c) congestion
#        a(1)@gpu0
#       /        \        both transfers cost 2 on link gpu0->gpu1, released at t=1
#   c(1)@gpu1   d(1)@gpu1
# (c and d read different outputs of a -- two tensors, two transfers -- unless said
# otherwise; by default a's out-edges carry one tensor, sent once to gpu1)
FORK = dict(ids="acd", edges=[("a", "c"), ("a", "d")], times=[1, 1, 1])


def test_congestion_serialises_transfers_on_a_link():
    # two outputs of a, congestion: a->c on the link [1,3) (lower edge id first),
    # a->d [3,5); c [3,4), d [5,6): makespan 6.
    g = graph(FORK["ids"], FORK["edges"], FORK["times"], edge_cost=[2.0, 2.0], edge_output=[0, 1])
    r = run(g, cluster(2), [0, 1, 1], congestion=True)
    assert r.makespan == 6.0
    assert r.xfer_start.tolist() == [1.0, 3.0] and r.xfer_finish.tolist() == [3.0, 5.0]
    assert starts(r) == {"a": 0.0, "c": 3.0, "d": 5.0}
    assert r.link_busy[0, 1] == 4.0 and r.link_count[0, 1] == 2


def test_no_congestion_overlaps_transfers():
    # two outputs, no congestion: both transfers [1,3); c [3,4), d [4,5) on gpu1: makespan 5.
    g = graph(FORK["ids"], FORK["edges"], FORK["times"], edge_cost=[2.0, 2.0], edge_output=[0, 1])
    r = run(g, cluster(2), [0, 1, 1], congestion=False)
    assert r.makespan == 5.0
    assert r.xfer_start.tolist() == [1.0, 1.0] and r.xfer_finish.tolist() == [3.0, 3.0]
    # the overlapping transfers are a violation when judged with congestion
    bad = validate_schedule(r.schedule, transfers=r, congestion=True)
    assert len(bad) == 1 and "link gpu0->gpu1" in bad[0]


def test_a_tensor_goes_once_to_each_consuming_device():
    # the default (docs/semantics.md 2.1): a's one output goes to gpu1 once, [1,3), and feeds both c
    # and d: c [3,4), d [4,5): makespan 5, one transfer of 2 on the link.
    g = graph(FORK["ids"], FORK["edges"], FORK["times"], edge_cost=[2.0, 2.0])
    r = run(g, cluster(2), [0, 1, 1])
    assert r.transfer_mode == "per_destination" and r.dedup_transfers
    assert r.makespan == 5.0 and r.n_transfers == 1 and r.xfer_edge.tolist() == [0]
    assert starts(r) == {"a": 0.0, "c": 3.0, "d": 4.0}
    assert r.link_busy[0, 1] == 2.0 and r.link_count[0, 1] == 1
    assert r.to_dict()["transfer_mode"] == "per_destination" and r.to_dict()["transfers"] == 1
    # d's edge is carried by the transfer of edge 0, which validate_schedule accepts
    assert validate_schedule(r.schedule, transfers=r) == []
    # per edge (Pesto's accounting, a named option): two transfers queue on the link,
    # [1,3) and [3,5); c [3,4), d [5,6): makespan 6
    e = run(g, cluster(2), [0, 1, 1], transfer_mode="per_edge")
    assert (e.makespan, e.n_transfers, e.transfer_mode) == (6.0, 2, "per_edge")
    assert e.xfer_start.tolist() == [1.0, 3.0]
    # two consumers on two other devices: one copy each, in both modes
    g3 = graph("acd", FORK["edges"], FORK["times"], edge_cost=[2.0, 2.0])
    assert run(g3, cluster(3), [0, 1, 2]).n_transfers == 2
    # the older boolean spelling selects the modes; contradicting it is an error
    assert simulate(Placement(g, cluster(2), [0, 1, 1]), dedup_transfers=False).makespan == 6.0
    with pytest.raises(InputError, match="contradicts"):
        simulate(Placement(g, cluster(2), [0, 1, 1]), transfer_mode="per_edge", dedup_transfers=True)
    with pytest.raises(InputError, match="unknown transfer mode"):
        simulate(Placement(g, cluster(2), [0, 1, 1]), transfer_mode="per_tensor")


def test_outputs_are_sent_separately():
    # a has two outputs: a->c carries output 0, a->d and a->e output 1 (c, d, e on gpu1;
    # link time 2 each). Two transfers: output 0 [1,3), output 1 [3,5); c [3,4),
    # d [5,6), e [6,7): makespan 7 (per edge: three transfers, e waits until 7: 8).
    g = graph("acde", [("a", "c"), ("a", "d"), ("a", "e")], [1, 1, 1, 1], edge_cost=[2.0] * 3,
              edge_output=[0, 1, 1])
    r = run(g, cluster(2), [0, 1, 1, 1])
    assert r.n_transfers == 2 and r.xfer_edge.tolist() == [0, 1] and r.makespan == 7.0
    assert run(g, cluster(2), [0, 1, 1, 1], transfer_mode="per_edge").makespan == 8.0
    assert r.link_priorities().tolist() == [0.0, 1.0, 1.0]


def test_dedup_uses_the_longest_edge():
    # a(1)@gpu0 -> c, d on gpu1 with costs 1 and 3: the shared transfer lasts 3
    # (edge a->d is the representative): c, d start at 4 and 5; makespan 6.
    g = graph(FORK["ids"], FORK["edges"], FORK["times"], edge_cost=[1.0, 3.0])
    r = run(g, cluster(2), [0, 1, 1])
    assert r.xfer_edge.tolist() == [1] and r.xfer_finish.tolist() == [4.0]
    assert r.makespan == 6.0


def test_node_waits_for_its_latest_arrival_local_or_remote():
    # a(1)@gpu0 -> c(1)@gpu1 over a link of 1 (arrives at 2); b@gpu1 -> c locally (arrives
    # when b finishes): c starts at the later of the two arrivals.
    for b_time, c_start in ((3.0, 3.0), (1.0, 2.0)):
        g = graph("abc", [("a", "c"), ("b", "c")], [1, b_time, 1])
        assert starts(run(g, cluster(2, beta0=1.0), [0, 1, 1]))["c"] == c_start
    # two parallel edges a->c, per edge: one transfer each, queued on gpu0->gpu1 ([1,2),
    # [2,3)) with congestion, overlapping without; by default a single transfer [1,2)
    # carries both (one output).
    g = graph("ac", [("a", "c"), ("a", "c")], [1, 1])
    assert starts(run(g, cluster(2, beta0=1.0), [0, 1], transfer_mode="per_edge"))["c"] == 3.0
    assert starts(run(g, cluster(2, beta0=1.0), [0, 1], congestion=False, transfer_mode="per_edge"))["c"] == 2.0
    r = run(g, cluster(2, beta0=1.0), [0, 1])
    assert starts(r)["c"] == 2.0 and r.n_transfers == 1


# ---------------------------------------------------------------------------- (d) policies
#            s(1)@gpu0
#        /      |      \          all transfers free (beta = 0)
#   x(3)@gpu0 y(1)@gpu0 w(2)@gpu0
#               |
#             z(5)@gpu1
# gpu0 runs x, y, w in some order after s; makespan = max(7, end(y) + 5).
POLICY_CASE = dict(ids="sxywz", edges=[("s", "x"), ("s", "y"), ("s", "w"), ("y", "z")],
                   times=[1, 3, 1, 2, 5], dev=[0, 0, 0, 0, 1])


def _policy_case(**kw) -> SimResult:
    c = POLICY_CASE
    return run(graph(c["ids"], c["edges"], c["times"]), cluster(2), c["dev"], **kw)


def test_fifo_ties_by_topological_position():
    # x, y, w all ready at 1; FIFO ties by topo position: x [1,4), y [4,5), w [5,7);
    # z [5,10): makespan 10.
    r = _policy_case(policy="fifo")
    assert r.makespan == 10.0
    assert starts(r) == {"s": 0.0, "x": 1.0, "y": 4.0, "w": 5.0, "z": 5.0}


def test_critical_path_runs_the_longest_tail_first():
    # bottom levels: z 5, y 6, x 3, w 2, s 7: y [1,2), x [2,5), w [5,7); z [2,7): makespan 7.
    r = _policy_case(policy="critical_path")
    assert bottom_level(r.placement).tolist() == [7.0, 3.0, 6.0, 2.0, 5.0]
    assert r.makespan == 7.0
    assert starts(r) == {"s": 0.0, "y": 1.0, "x": 2.0, "w": 5.0, "z": 2.0}


def test_priority_follows_the_given_values():
    # priorities w < x < y: w [1,3), x [3,6), y [6,7); z [7,12): makespan 12.
    r = _policy_case(policy="priority", priorities=[0, 2, 3, 1, 4])
    assert r.makespan == 12.0
    assert starts(r) == {"s": 0.0, "w": 1.0, "x": 3.0, "y": 6.0, "z": 7.0}


def test_fifo_uses_ready_time_before_topological_position():
    #   L(10)@gpu0   A(1)@gpu1 -> B(1)@gpu1 -> C(1)@gpu0      E(5)@gpu2 -> D(1)@gpu0
    # D precedes C topologically (level 1 vs 2) but C is ready at 2 and D at 5, so when
    # gpu0 frees at 10 FIFO runs C [10,11) then D [11,12).
    g = graph("LABCED", [("A", "B"), ("B", "C"), ("E", "D")], [10, 1, 1, 1, 5, 1])
    r = run(g, cluster(3), [0, 1, 1, 0, 2, 0], policy="fifo")
    assert g.topo_position[g.index_of("D")] < g.topo_position[g.index_of("C")]
    assert starts(r)["C"] == 10.0 and starts(r)["D"] == 11.0 and r.makespan == 12.0


# ---------------------------------------------------------------------------- (e) strict order
#   a(3)@gpu1 -> b(1)@gpu0        c(2)@gpu0 (independent)
# priorities b=0 < c=1 on gpu0.
ORDER_CASE = dict(ids="abc", edges=[("a", "b")], times=[3, 1, 2], dev=[1, 0, 0], prio=[0, 0, 1])


def test_order_waits_where_priority_does_not():
    c = ORDER_CASE
    g = graph(c["ids"], c["edges"], c["times"])
    # non-delay 'priority': only c is ready at 0: c [0,2), b [3,4): makespan 4.
    r = run(g, cluster(2), c["dev"], policy="priority", priorities=c["prio"])
    assert r.makespan == 4.0 and starts(r) == {"a": 0.0, "b": 3.0, "c": 0.0}
    # strict 'order': gpu0 waits for b: b [3,4), c [4,6): makespan 6.
    r = run(g, cluster(2), c["dev"], policy="order", priorities=c["prio"])
    assert r.makespan == 6.0 and starts(r) == {"a": 0.0, "b": 3.0, "c": 4.0}


def test_order_replays_a_schedule():
    # replaying the critical-path schedule's per-device order reproduces it exactly
    r = _policy_case(policy="critical_path")
    again = _policy_case(policy="order", priorities=r.schedule.priorities())
    assert np.array_equal(again.start, r.start) and again.makespan == 7.0


def test_order_replays_zero_duration_starts_in_dispatch_sequence():
    # p and q (parameters: zero duration) on gpu0 both start at 0 and feed gpu1 over one
    # link: p's tensor takes 3, q's 0.03. The critical path sends q first (y, 5, has the
    # longer tail): y [0.03, 5.03), x [5.03, 6.03). Ranking equal starts by topological
    # position would send p first and replay y [3.03, 8.03), x [8.03, 9.03).
    g = graph("pqxy", [("p", "x"), ("q", "y")], [0, 0, 1, 5], edge_bytes=[100.0, 1.0])
    r = run(g, cluster(2, beta1=0.03), [0, 0, 1, 1], policy="critical_path")
    assert r.makespan == pytest.approx(6.03)
    pr = r.schedule.priorities()
    assert pr[1] < pr[0]  # q before p, as dispatched
    again = run(g, cluster(2, beta1=0.03), [0, 0, 1, 1], policy="order", priorities=pr)
    assert np.array_equal(again.start, r.start)
    by_topology = Schedule(r.placement, r.start, r.finish).priorities()  # no dispatch sequence
    assert run(g, cluster(2, beta1=0.03), [0, 0, 1, 1], policy="order",
               priorities=by_topology).makespan == pytest.approx(9.03)


def test_order_replays_every_non_delay_schedule_exactly():
    # random DAGs with a third of their nodes of zero duration, random placements on three
    # GPUs with costly links: replaying any non-delay policy's schedule under "order"
    # gives the same start of every node
    rng = np.random.default_rng(7)
    checked = ties = 0
    for _ in range(60):
        n = int(rng.integers(6, 25))
        edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.2]
        times = np.where(rng.random(n) < 0.33, 0.0, rng.uniform(0.1, 2.0, n)).tolist()
        g = graph(range(n), edges, times, edge_bytes=rng.uniform(1, 50, len(edges)).tolist())
        cl = cluster(3, beta0=0.1, beta1=0.02)
        dev = rng.integers(0, 3, n)
        for policy in ("fifo", "critical_path"):
            r = run(g, cl, dev, policy=policy)
            again = run(g, cl, dev, policy="order", priorities=r.schedule.priorities())
            assert np.array_equal(again.start, r.start), policy
            old = Schedule(r.placement, r.start, r.finish).priorities()
            ties += int(not np.array_equal(run(g, cl, dev, policy="order", priorities=old).start, r.start))
            checked += 1
    assert checked == 120
    assert ties >= 1  # equal starts ranked without the sequence replay differently at least once


def test_order_deadlock_on_one_device_names_device_and_node():
    # a -> b on gpu0, but the order puts b first: b can never start.
    g = graph("ab", [("a", "b")], [1, 1])
    with pytest.raises(InputError, match=r"device 'gpu0'.*node 'b'"):
        simulate(Placement(g, cluster(1), [0, 0]), policy="order", priorities=[1, 0])


def test_order_deadlock_across_devices():
    #   a@gpu1 -> b@gpu0      c@gpu0 -> d@gpu1
    # gpu0 order: b, c; gpu1 order: d, a  -> b waits a waits d waits c waits b.
    g = graph("abcd", [("a", "b"), ("c", "d")], [1, 1, 1, 1])
    with pytest.raises(InputError, match=r"device 'gpu0' must run node 'b'.*node 'a'.*'gpu1'"):
        simulate(Placement(g, cluster(2), [1, 0, 0, 1]), policy="order", priorities=[1, 0, 1, 0])


# ---------------------------------------------------------------------------- (f) memory
def test_peak_memory_on_one_device():
    # a(1) -> b(1) -> c(1) on gpu0; output bytes 10, 20, 5; a holds 100 persistent bytes.
    # a's output lives [0,2) (until b finishes), b's [1,3), c's [2,3):
    # live outputs 10 on [0,1), 30 on [1,2), 25 on [2,3) -> peak 100 + 30 = 130.
    g = graph("abc", [("a", "b"), ("b", "c")], [1, 1, 1], memory=[7.0, 8.0, 9.0],
              output_bytes=[10.0, 20.0, 5.0], persistent_bytes=[100.0, 0.0, 0.0])
    r = run(g, cluster(2), [0, 0, 0])
    assert r.peak_memory.tolist() == [130.0, 0.0]
    assert r.static_memory.tolist() == [24.0, 0.0]


def test_peak_memory_with_a_received_tensor():
    #   a(1)@gpu0 -> b(1)@gpu1 -> c(1)@gpu1, transfer time 1; outputs a 10, b 20, c 5.
    # gpu0: a's output [0,2) (until its transfer [1,2) finishes) -> peak 10.
    # gpu1: received copy of a [1,3) (transfer start .. b finishes), b's output [2,4),
    #       c's [3,4): 10 on [1,2), 30 on [2,3), 25 on [3,4) -> peak 30.
    g = graph("abc", [("a", "b"), ("b", "c")], [1, 1, 1], output_bytes=[10.0, 20.0, 5.0])
    r = run(g, cluster(2, beta0=1.0), [0, 1, 1])
    assert r.peak_memory.tolist() == [10.0, 30.0]


# ---------------------------------------------------------------------------- errors
def test_unsupported_device_is_rejected_before_simulating():
    g = OpGraph.from_ids(["a", "b"], [("a", "b")], kinds=["gpu", "cpu"],
                         compute=[[1.0, 2.0], [np.nan, 3.0]], memory=[0, 0])
    cl = Cluster.single_host(1)  # gpu0, cpu0
    with pytest.raises(InputError, match=r"node 'b'.*device 'gpu0'"):
        simulate(Placement(g, cl, [1, 0]))


def test_bad_arguments():
    g = graph("ab", [("a", "b")], [1, 1])
    pl = Placement(g, cluster(1), [0, 0])
    with pytest.raises(InputError, match="unknown simulation policy"):
        simulate(pl, policy="lifo")
    with pytest.raises(InputError, match="needs a 'priorities'"):
        simulate(pl, policy="order")
    with pytest.raises(InputError, match="expected 2 values"):
        simulate(pl, policy="priority", priorities=[0])
    with pytest.raises(InputError, match="does not use 'priorities'"):
        simulate(pl, policy="fifo", priorities=[0, 1])


def test_public_names_stay_importable_from_simulate():
    """The simulator's parts live in their own modules; ``dnnplace.evaluation.simulate``
    re-exports the same objects."""
    import dnnplace.evaluation.simulate as sim
    from dnnplace.evaluation import schedule_checks, sim_policies, sim_result

    assert sim.__all__ == ["SimResult", "simulate", "validate_schedule", "bottom_level", "POLICIES", "TRANSFER_MODES",
                           "DEFAULT_TRANSFER_MODE", "transfer_semantics", "current_transfer_mode"]
    assert sim.TRANSFER_MODES == ("per_destination", "per_edge") and sim.DEFAULT_TRANSFER_MODE == "per_destination"
    assert sim.SimResult is sim_result.SimResult
    assert sim.validate_schedule is schedule_checks.validate_schedule
    assert sim.bottom_level is sim_policies.bottom_level
    assert sim.POLICIES is sim_policies.POLICIES == ("fifo", "critical_path", "priority", "order")


def test_validator_reports_tampered_schedules():
    # a(1)@gpu0 -> b(2)@gpu1 with transfer 1; c(1)@gpu1 independent.
    g = graph("abc", [("a", "b")], [1, 2, 1])
    r = run(g, cluster(2, beta0=1.0), [0, 1, 1])
    pl = r.placement
    early = Schedule(pl, np.array([0.0, 1.0, 0.0]), np.array([1.0, 3.0, 1.0]))
    msgs = validate_schedule(early)  # b starts before its input can arrive at 2
    assert len(msgs) == 1 and "before the transfer" in msgs[0]
    overlap = Schedule(pl, np.array([0.0, 2.0, 2.5]), np.array([1.0, 4.0, 3.5]))
    msgs = validate_schedule(overlap)
    assert len(msgs) == 1 and "overlaps" in msgs[0] and "gpu1" in msgs[0]
    wrong = Schedule(pl, np.array([0.0, 2.0, 0.0]), np.array([1.0, 5.0, 1.0]))
    assert "takes 2" in validate_schedule(wrong)[0]
    missing = validate_schedule(r.schedule, transfers={"edge": [], "start": [], "finish": []})
    assert len(missing) == 1 and "no transfer carries it" in missing[0]


# ---------------------------------------------------------------------------- properties
def random_case(seed: int):
    """A seeded random DAG (<= 12 nodes, edges i -> j only for i < j, so acyclic),
    1-3 GPUs with a random linear link model, a random placement; some durations and
    transfer times are zero on purpose (ties and zero-length events)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 13))
    d = int(rng.integers(1, 4))
    iu, ju = np.triu_indices(n, k=1)
    keep = rng.random(iu.size) < rng.uniform(0.1, 0.5)
    times = rng.integers(0, 6, size=n).astype(float)
    g = OpGraph(ids=range(n), kinds=("gpu",), compute=times[:, None], memory=rng.integers(0, 9, n),
                src=iu[keep], dst=ju[keep], edge_bytes=rng.integers(0, 4, int(keep.sum())).astype(float),
                output_bytes=rng.integers(0, 5, n).astype(float),
                persistent_bytes=rng.integers(0, 3, n).astype(float))
    cl = cluster(d, beta0=float(rng.integers(0, 3)), beta1=float(rng.integers(0, 2)))
    return Placement(g, cl, rng.integers(0, d, n)), rng


def order_deadlocks(pl: Placement, prio) -> bool:
    """Independent of the simulator: a strict per-device order deadlocks exactly when
    the DAG's edges plus each device's consecutive-order edges close a cycle (link
    queues are first come first served, so they add no waits of their own)."""
    g = pl.graph
    G = nx.DiGraph()
    G.add_nodes_from(range(g.n))
    G.add_edges_from(zip(g.src.tolist(), g.dst.tolist()))
    for d in np.unique(pl.device).tolist():
        seq = np.flatnonzero(pl.device == d)
        seq = seq[np.argsort(np.asarray(prio)[seq], kind="stable")]
        G.add_edges_from(zip(seq[:-1].tolist(), seq[1:].tolist()))
    return not nx.is_directed_acyclic_graph(G)


SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=80, deadline=None)
@given(seed=SEEDS, policy=st.sampled_from(POLICIES), congestion=st.booleans(), dedup=st.booleans())
def test_every_schedule_is_valid_and_above_lower_bounds(seed, policy, congestion, dedup):
    pl, rng = random_case(seed)
    # 'order'/'priority' get random priorities; a random 'order' may deadlock, which
    # must then be reported as InputError, never as a silent partial schedule.
    prio = rng.permutation(pl.graph.n) if policy in ("priority", "order") else None
    try:
        r = simulate(pl, policy=policy, priorities=prio, congestion=congestion, dedup_transfers=dedup)
    except InputError as exc:
        # only a real deadlock may be reported (about 60% of random orders are one)
        assert policy == "order" and "deadlocks" in str(exc)
        assert order_deadlocks(pl, prio)
        return
    if policy == "order":
        assert not order_deadlocks(pl, prio)
    assert validate_schedule(r.schedule, transfers=r, congestion=congestion) == []
    eps = 1e-9
    if not dedup:  # with dedup a tensor's single transfer may be longer than an edge's own
        assert r.makespan >= bottom_level(pl).max(initial=0.0) - eps
    assert r.makespan >= r.busy.max() - eps
    assert np.all(r.peak_memory >= np.bincount(pl.device, weights=pl.graph.persistent_bytes,
                                               minlength=pl.cluster.size) - eps)
    assert r.link_count.sum() == r.n_transfers


@settings(max_examples=80, deadline=None)
@given(seed=SEEDS, dedup=st.booleans())
def test_congestion_never_shortens_a_fixed_order(seed, dedup):
    # Property: under policy 'order' with the same per-device order, congestion=True
    # gives a makespan >= congestion=False. Why it holds: with the device orders fixed,
    # every start is max(finish of the device's previous node, arrival of each input);
    # congestion only delays a transfer's start beyond its release, and max/+ are
    # monotone, so by induction over the events every time is no earlier. (Under the
    # greedy policies the *order* may change, so Graham-type anomalies can make the
    # congested run shorter; we do not assert anything there.)
    pl, _ = random_case(seed)
    base = simulate(pl, policy="fifo", congestion=False, dedup_transfers=dedup)
    prio = base.schedule.priorities()  # a realised schedule's order never deadlocks
    free = simulate(pl, policy="order", priorities=prio, congestion=False, dedup_transfers=dedup)
    busy = simulate(pl, policy="order", priorities=prio, congestion=True, dedup_transfers=dedup)
    assert busy.makespan >= free.makespan - 1e-9
    assert np.all(busy.start >= free.start - 1e-9)
    # replaying a fifo schedule's per-device order reproduces it exactly, both ways
    assert np.array_equal(free.start, base.start)
    base_c = simulate(pl, policy="fifo", congestion=True, dedup_transfers=dedup)
    replay_c = simulate(pl, policy="order", priorities=base_c.schedule.priorities(), congestion=True,
                        dedup_transfers=dedup)
    assert np.array_equal(replay_c.start, base_c.start)
    for r in (free, busy):
        assert validate_schedule(r.schedule, transfers=r, congestion=r.congestion) == []


# ---------------------------------------------------------------------------- link ports
def _ported(d: int, ports: str, beta0: float = 2.0) -> Cluster:
    """``d`` GPUs, every transfer ``beta0``; ``ports`` per link or shared per device."""
    return Cluster.from_links([Device(f"gpu{i}", "gpu") for i in range(d)], default={"beta0": beta0}, ports=ports)


def test_shared_ports_serialise_a_device_s_transfers():
    # egress: a(1)@gpu0 feeds b@gpu1 and c@gpu2 (1 each), transfers of 2. Per link they
    # overlap: [1,3) both, b, c [3,4): 4. Shared: gpu0's egress port carries one at a
    # time, a->b [1,3) (lower edge id), a->c [3,5); c [5,6): 6.
    g = graph("abc", [("a", "b"), ("a", "c")], [1, 1, 1])
    per, sh = run(g, _ported(3, "per_link"), [0, 1, 2]), run(g, _ported(3, "shared"), [0, 1, 2])
    assert (per.makespan, sh.makespan) == (4.0, 6.0)
    assert per.xfer_start.tolist() == [1.0, 1.0] and sh.xfer_start.tolist() == [1.0, 3.0]
    # ingress: p@gpu0 and q@gpu1 both feed r@gpu2: per link [1,3) both, r [3,4): 4;
    # shared, gpu2's ingress port: p->r [1,3), q->r [3,5); r [5,6): 6
    g = graph("pqr", [("p", "r"), ("q", "r")], [1, 1, 1])
    assert run(g, _ported(3, "per_link"), [0, 1, 2]).makespan == 4.0
    assert run(g, _ported(3, "shared"), [0, 1, 2]).xfer_start.tolist() == [1.0, 3.0]
    assert run(g, _ported(3, "shared"), [0, 1, 2]).makespan == 6.0
    # full duplex: a@gpu0 -> b@gpu1 and c@gpu1 -> d@gpu0 use different ports: 4 both ways
    g = graph("abcd", [("a", "b"), ("c", "d")], [1, 1, 1, 1])
    duplex = [run(g, _ported(2, ports), [0, 1, 1, 0]).makespan for ports in ("shared", "per_link")]
    assert duplex == [4.0, 4.0]
    # without congestion ports do not matter
    g = graph("abc", [("a", "b"), ("a", "c")], [1, 1, 1])
    assert run(g, _ported(3, "shared"), [0, 1, 2], congestion=False).makespan == 4.0


def test_shared_ports_are_checked_and_ordered():
    g = graph("abc", [("a", "b"), ("a", "c")], [1, 1, 1])
    per = run(g, _ported(3, "per_link"), [0, 1, 2])
    # the per-link schedule is invalid where the ports are shared
    bad = validate_schedule(Schedule(Placement(g, _ported(3, "shared"), [0, 1, 2]), per.start, per.finish),
                            transfers=per, congestion=True)
    assert len(bad) == 1 and "port gpu0 (out)" in bad[0] and "overlaps" in bad[0]
    # a port order: a->c first on gpu0's egress: a->c [1,3), c [3,4); a->b [3,5), b [5,6)
    pl = Placement(g, _ported(3, "shared"), [0, 1, 2])
    r = simulate(pl, policy="order", priorities=[0, 1, 2], link_priorities=[1, 0])
    assert r.xfer_start.tolist() == [3.0, 1.0] and r.start.tolist() == [0.0, 5.0, 3.0]
    assert validate_schedule(r.schedule, transfers=r) == []
    # a port order against precedence: a@gpu0 -> b@gpu1 -> c@gpu0 -> d@gpu2; gpu0's egress
    # port serving c->d before a->b waits on b, which waits on a->b: a deadlock (per link
    # the two transfers use different links and the same order replays)
    g = graph("abcd", [("a", "b"), ("b", "c"), ("c", "d")], [1, 1, 1, 1])
    lp = [1, 0, 0]
    ok = simulate(Placement(g, _ported(3, "per_link"), [0, 1, 0, 2]), policy="order", priorities=[0, 1, 2, 3],
                  link_priorities=lp)
    assert ok.makespan == 10.0
    with pytest.raises(InputError, match=r"deadlocks.*on port gpu0 \(out\).*edge 'c'->'d'"):
        simulate(Placement(g, _ported(3, "shared"), [0, 1, 0, 2]), policy="order", priorities=[0, 1, 2, 3],
                 link_priorities=lp)


def test_shared_port_replays_reproduce_fcfs():
    """A FCFS run on shared ports, replayed in its own device and port orders, gives the
    same schedule bit for bit (100 random fan-out graphs x 2 transfer modes), and the
    ports never shorten it against per-link queues with the same orders."""
    checked = slower = 0
    for seed in range(100):
        pl = fanout_case(seed)
        cl = pl.cluster
        sh = Placement(pl.graph, Cluster(cl.devices, cl.beta0, cl.beta1, cl.cost_factor, ports="shared"), pl.device)
        for mode in ("per_destination", "per_edge"):
            r = simulate(sh, policy="fifo", transfer_mode=mode)
            assert validate_schedule(r.schedule, transfers=r) == []
            rep = simulate(sh, policy="order", priorities=r.schedule.priorities(), link_priorities=r.link_priorities(),
                           transfer_mode=mode)
            assert np.array_equal(rep.start, r.start) and np.array_equal(rep.xfer_start, r.xfer_start)
            per_link = simulate(pl, policy="order", priorities=r.schedule.priorities(),
                                link_priorities=r.link_priorities(), transfer_mode=mode)
            assert rep.makespan >= per_link.makespan - 1e-9
            slower += rep.makespan > per_link.makespan + 1e-9
            checked += 1
    assert checked == 200 and slower >= 100, slower  # measured: 118 of 200 longer on shared ports


def test_pcie_presets_share_ports():
    from dnnplace.graphs.io.native import cluster_from_dict, cluster_to_dict

    pcie, nvlink = Cluster.single_host(4, interconnect="pcie"), Cluster.single_host(4)
    assert (pcie.ports, nvlink.ports) == ("shared", "per_link")
    assert cluster_from_dict(cluster_to_dict(pcie)).ports == "shared"
    assert "ports" not in cluster_to_dict(nvlink)
    with pytest.raises(InputError, match="unknown ports"):
        Cluster.from_links([Device("g", "gpu")], ports="bus")


def fanout_case(seed: int) -> Placement:
    """A seeded random DAG (4-24 nodes, edges i -> j for i < j) whose nodes have one or
    two outputs; each edge carries one output of its source and that output's bytes
    (docs/semantics.md 2.1: edges of one output carry the same bytes), 2-4 GPUs, a random placement."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 25))
    d = int(rng.integers(2, 5))
    iu, ju = np.triu_indices(n, k=1)
    keep = rng.random(iu.size) < rng.uniform(0.15, 0.5)
    src, dst = iu[keep], ju[keep]
    n_out = rng.integers(1, 3, size=n)
    out = rng.integers(0, n_out[src]) if src.size else np.zeros(0, dtype=np.int64)
    sizes = rng.integers(0, 5, size=(n, 2)).astype(float)
    g = OpGraph(ids=range(n), kinds=("gpu",), compute=rng.integers(0, 6, size=(n, 1)).astype(float),
                memory=np.zeros(n), src=src, dst=dst, edge_bytes=sizes[src, out], edge_output=out)
    cl = cluster(d, beta0=float(rng.integers(0, 3)), beta1=float(rng.choice([0.5, 1.0])))
    return Placement(g, cl, rng.integers(0, d, n))


def test_sending_each_tensor_once_never_delays_a_replay():
    """docs/semantics.md 2.1: a schedule built per edge replays under the default mode (one transfer
    per (source, output, destination device)) at no later time, given the same device
    orders and, with congestion, the same link orders. 100 random fan-out graphs x 2
    policies x congestion on/off = 400 replays, each validated; every node starts no
    later and no replay has more transfers. Why it holds: with all orders fixed every
    start is a longest path; merging a tensor's transfers to one device keeps the first
    one's place on the link (the lowest rank) with the same duration, and every path
    through the merged task maps to a path at least as long through the link chain of
    the per-edge schedule."""
    runs = shorter = fewer = 0
    for seed in range(100):
        pl = fanout_case(seed)
        for policy in ("fifo", "critical_path"):
            for congestion in (True, False):
                per = simulate(pl, policy=policy, congestion=congestion, transfer_mode="per_edge")
                lp = per.link_priorities() if congestion else None
                once = simulate(pl, policy="order", priorities=per.schedule.priorities(), congestion=congestion,
                                link_priorities=lp)
                assert once.transfer_mode == "per_destination"
                assert validate_schedule(once.schedule, transfers=once, congestion=congestion) == []
                assert np.all(once.start <= per.start + 1e-9), (seed, policy, congestion)
                assert once.makespan <= per.makespan + 1e-9
                assert once.n_transfers <= per.n_transfers
                runs += 1
                shorter += once.makespan < per.makespan - 1e-9
                fewer += once.n_transfers < per.n_transfers
    # measured: 114 of the 400 replays end earlier and 332 send fewer transfers
    assert runs == 400 and shorter >= 100 and fewer >= 300, (shorter, fewer)


# ---------------------------------------------------------------------------- gantt
def test_gantt_writes_a_png(tmp_path):
    from dnnplace.evaluation.gantt import _PALETTE, plot_gantt

    c = POLICY_CASE
    g = graph(c["ids"], c["edges"], c["times"], op_types=["in", "conv", "relu", "conv", "fc"])
    r = run(g, cluster(2, beta0=0.5), c["dev"], policy="critical_path")
    out = plot_gantt(r, tmp_path / "sub" / "gantt.png", max_rows=2)
    assert out == tmp_path / "sub" / "gantt.png"
    # two device rows of a 12-inch figure at 110 dpi (measured 1320 x 253 pixels)
    px = png_pixels_by_colour(out, min_width=1000, min_height=200)
    # one palette colour per op type, each bar's area proportional to that type's time on
    # the one 7.5-ms axis: conv (x 3 + w 2) and fc (z 5) 5 ms each, in (s) and relu (y) 1 ms
    areas = sorted(px.get(c.upper(), 0) for c in _PALETTE[:4])
    assert areas[0] > 2_000, areas
    assert areas[2] / areas[0] == pytest.approx(5, rel=0.1) and areas[3] / areas[1] == pytest.approx(5, rel=0.1)
    assert areas[1] / areas[0] == pytest.approx(1, rel=0.05) and areas[3] / areas[2] == pytest.approx(1, rel=0.05)
