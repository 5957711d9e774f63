"""Per-message costs (docs/semantics.md 2.1, per-message costs): the sender's
``send_overhead`` per transfer a node sends, the receiver's ``recv_overhead`` per transfer
on its first destination node, in the simulator and in the independent check."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.evaluation.sim_costs import build_transfers, message_overheads
from dnnplace.evaluation.simulate import simulate, validate_schedule
from dnnplace.graphs import Cluster, Device, InputError, OpGraph, Placement
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.graphs.io.native import cluster_from_dict, cluster_to_dict


def two_cpus(send: float, recv: float, beta0: float = 0.5) -> Cluster:
    devs = [Device(f"cpu{i}", "cpu", send_overhead=send, recv_overhead=recv) for i in range(2)]
    return Cluster.from_links(devs, default={"beta0": beta0})


def test_a_message_costs_its_sender_and_its_first_receiver_device_time():
    # a(1) on cpu0 feeds b(1), c(1) on cpu1: one message (one tensor, one destination device).
    # a posts it: [0, 1 + 0.5); the link 0.5: arrives at 2.0; b takes it in: [2.0, 3.25); c [3.25, 4.25)
    g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["cpu"], compute=[[1.0]] * 3, memory=[0] * 3)
    pl = Placement(g, two_cpus(0.5, 0.25), [0, 1, 1])
    r = simulate(pl)
    assert r.start.tolist() == [0.0, 2.0, 3.25] and r.makespan == 4.25
    assert r.busy.tolist() == [1.5, 2.25]
    assert validate_schedule(r.schedule, transfers=r) == []
    # per edge, two messages: a pays twice, b and c once each; the link carries them one after the other
    e = simulate(pl, transfer_mode="per_edge")
    assert e.schedule.finish.tolist() == [2.0, 3.75, 5.0] and validate_schedule(e.schedule, transfers=e) == []
    # a schedule that leaves the message costs out is refused by the check, naming the node
    plain = simulate(Placement(g, two_cpus(0.0, 0.0), [0, 1, 1]))
    bad = validate_schedule(type(plain.schedule)(pl, plain.schedule.start, plain.schedule.finish), transfers=plain)
    assert any("node 'a'" in m and "takes 1.5" in m for m in bad)


def test_random_placements_simulate_valid_and_no_shorter_in_the_same_order():
    rng = np.random.default_rng(7)
    checked = 0
    for seed in range(12):
        g = random_layered_dag(30, seed=seed)
        kinds = g.kinds
        devs = [Device(f"d{i}", kinds[0], send_overhead=0.3, recv_overhead=0.2) for i in range(3)]
        cl = Cluster.from_links(devs, default={"beta0": 0.1, "beta1": 1e-9})
        plain = Cluster.from_links([Device(f"d{i}", kinds[0]) for i in range(3)], default={"beta0": 0.1, "beta1": 1e-9})
        dev = rng.integers(0, 3, g.n)
        for mode in ("per_destination", "per_edge"):
            pl = Placement(g, cl, dev)
            r = simulate(pl, transfer_mode=mode)
            assert validate_schedule(r.schedule, transfers=r) == []
            tx = build_transfers(pl, mode == "per_destination")
            assert r.n_transfers == tx.edge.shape[0]
            # busy time = compute + 0.3 per message sent + 0.2 per message received
            base = simulate(Placement(g, plain, dev), transfer_mode=mode)
            sent = np.bincount(tx.src_dev, minlength=3)
            got = np.bincount(tx.dst_dev, minlength=3)
            assert np.allclose(r.busy, base.busy + 0.3 * sent + 0.2 * got)
            assert message_overheads(pl, tx).sum() == pytest.approx(0.5 * tx.edge.shape[0])
            # the same device order with dearer messages never finishes earlier
            order = base.schedule.priorities()
            slow = simulate(pl, transfer_mode=mode, policy="order", priorities=order)
            fast = simulate(Placement(g, plain, dev), transfer_mode=mode, policy="order", priorities=order)
            assert slow.makespan >= fast.makespan - 1e-9
            checked += 1
    assert checked == 24


def test_message_costs_round_trip_and_bad_values_name_the_field():
    cl = two_cpus(0.125, 0.0625)
    doc = cluster_to_dict(cl)
    assert doc["devices"][0]["send_overhead"] == 0.125 and doc["devices"][1]["recv_overhead"] == 0.0625
    back = cluster_from_dict(doc)
    assert back.send_overhead.tolist() == [0.125, 0.125] and back.recv_overhead.tolist() == [0.0625, 0.0625]
    assert back.message_time(np.array([0]), np.array([1])).tolist() == [0.1875]
    top = cluster_from_dict({"devices": [{"name": "a", "kind": "cpu"}, {"name": "b", "kind": "cpu",
                                                                         "recv_overhead": 1.0}],
                             "recv_overhead": 0.5})
    assert top.recv_overhead.tolist() == [0.5, 1.0]
    with pytest.raises(InputError, match="device 'a': send_overhead must be a finite number >= 0"):
        Device("a", "cpu", send_overhead=-1.0)
    with pytest.raises(InputError, match="recv_overhead"):
        cluster_from_dict({"devices": [{"name": "a", "kind": "cpu", "recv_overhead": "fast"}]})
