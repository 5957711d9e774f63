"""The executor's message timeline (docs/execution.md, "Message timeline") and interleaved
plans: every message of the median step recorded once per destination with its bytes and
its sender and receiver times on the one host clock; plans run round-robin equal the eager
steps as plans run one after the other do."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch") if not os.environ.get("DNNPLACE_REQUIRE_TORCH") else __import__("torch")

from test_execution import DEVICES, random_plan, spec, traced  # noqa: E402

from dnnplace.pytorch.execution.launch import Plan, execute  # noqa: E402
from dnnplace.pytorch.execution.program import build_programs, free_nodes  # noqa: E402


def _expected(cap, plan: Plan) -> dict[tuple[str, str], tuple[int, str]]:
    """(fx value, destination device) -> (bytes, producing node) of every non-empty transfer."""
    dev = np.array([DEVICES.index(plan.placement[v]) for v in cap.ids])
    orders = [sorted(np.flatnonzero(dev == d).tolist(), key=lambda v: plan.start[cap.ids[v]]) for d in range(2)]
    return {(t.value, DEVICES[t.dst]): (t.nbytes, cap.ids[t.node]) for p in build_programs(cap, dev, orders)
            for t in p.recvs if t.nbytes}


def _check(cap, plans: list[Plan], runs: list, losses: int) -> int:
    """Every message of each run's median step against its plan's transfers; the number of
    messages checked."""
    checked = 0
    assert len(runs) == len(plans)
    for plan, m in zip(plans, runs):
        assert m.matches_reference, (m.max_abs_grad_diff, m.loss, m.reference_loss)
        assert m.n_losses_checked == losses
        want = _expected(cap, plan)
        got = {(r["value"], r["dst"]): r["bytes"] for r in m.messages}
        assert len(m.messages) == len(got) == len(want) > 3
        assert got == {k: b for k, (b, _) in want.items()}
        d = m.to_dict()
        assert d["messages"] == m.messages and set(d["op_median_ms"]) == set(cap.ids)
        # one message per pack: its rows share the sender's and the receiver's times
        packs: dict[int, list[dict]] = {}
        for r in m.messages:
            packs.setdefault(r["pack"], []).append(r)
        assert d["message_count"] == m.n_messages == len(packs) < m.transfers
        for rows in packs.values():
            keys = ("src", "dst", "send_start_ms", "send_end_ms", "wait_start_ms", "wait_end_ms", "ready_ms")
            assert all(all(r[k] == rows[0][k] for k in keys) for r in rows), rows
        assert all(x >= 0 for x in m.op_median_ms.values())
        op = {o["node"]: o for o in m.ops}
        for r in m.messages:
            assert r["src"] != r["dst"] and plan.placement[r["consumer"]] == r["dst"]
            assert 0 <= r["send_start_ms"] <= r["send_end_ms"], r
            assert r["wait_start_ms"] <= r["wait_end_ms"] <= r["ready_ms"], r
            # a message cannot arrive before its sender started on it; isend may return after
            # the receiver's wait ended (gloo sends from its own thread: docs/execution.md)
            assert r["send_start_ms"] <= r["wait_end_ms"], r
            # the consumer waited before it started; the send followed the producer's end
            assert r["ready_ms"] <= op[r["consumer"]]["start_ms"], r
            assert op[want[r["value"], r["dst"]][1]]["end_ms"] <= r["send_start_ms"], r
            checked += 1
    return checked


def test_messages_of_interleaved_plans():
    """Two random two-device plans of the MLP run interleaved: each message of the median
    step once per (value, destination) with the transfer's bytes, the sender's times
    ordered, the receiver's wait before the value is ready, the sender started before the
    wait ended (one clock); the op medians cover every node; both plans equal the eager
    steps."""
    ms = spec("mlp")
    cap = traced(ms)
    rng = np.random.default_rng(5)
    plans = [random_plan(cap, rng) for _ in range(2)]
    runs = execute(ms, plans, DEVICES, steps=2, warmup=1, timeout_s=120, interleave=True)
    assert _check(cap, plans, runs, losses=3) == sum(len(_expected(cap, p)) for p in plans)


@pytest.mark.slow
def test_messages_and_reference_of_sequential_and_interleaved_cnn_plans():
    """The CNN (BatchNorm: buffers sent as copies, several outputs per operator) on two
    random plans, run plan after plan and interleaved: both runs' messages as above, both
    equal to the eager steps."""
    ms = spec("cnn")
    cap = traced(ms)
    rng = np.random.default_rng(11)
    plans = [random_plan(cap, rng) for _ in range(2)]
    checked = 0
    for interleave in (False, True):
        runs = execute(ms, plans, DEVICES, steps=3, warmup=1, timeout_s=120, interleave=interleave)
        checked += _check(cap, plans, runs, losses=4)
    assert checked == 2 * sum(len(_expected(cap, p)) for p in plans)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_packs_hold_only_tensors_ready_at_the_same_point(name):
    """On random two-device plans (no processes), every transfer travels in exactly one pack
    of its own source and destination; a pack with one producer is sent right after it; a
    pack of several producers holds only free nodes' tensors (no operator: parameters,
    buffers, inputs) and every node of the sender's order from the first of them to the one
    it is sent after is free and waits for nothing (docs/execution.md, "What is sent"), so
    no consumer waits longer; larger elements come first (aligned offsets). Packs merge
    tensors on these plans: fewer messages than transfers, some packs of several nodes."""
    cap = traced(spec(name))
    free = free_nodes(cap)
    assert free and all(cap.ids[v].split(":")[0] in ("param", "buffer", "input") for v in free)
    rng = np.random.default_rng(2)
    n_transfers = n_packs = merged = 0
    for _ in range(6):
        plan = random_plan(cap, rng)
        dev = np.array([DEVICES.index(plan.placement[v]) for v in cap.ids])
        orders = [sorted(np.flatnonzero(dev == d).tolist(), key=lambda v: plan.start[cap.ids[v]]) for d in range(2)]
        progs = build_programs(cap, dev, orders)
        carried = [t.tag for p in progs for pk in p.packs_in for t in pk.transfers]
        assert sorted(carried) == sorted(t.tag for p in progs for t in p.recvs)
        for prog in progs:
            pos = {v: i for i, v in enumerate(prog.order)}
            for after, packs in prog.packs_out.items():
                for pk in packs:
                    assert pk.after == after and pk.src == prog.device != pk.dst
                    assert all(t.src == pk.src and t.dst == pk.dst for t in pk.transfers)
                    sizes = [t.dtype.itemsize for t in pk.transfers]
                    assert sizes == sorted(sizes, reverse=True)
                    nodes = {t.node for t in pk.transfers}
                    if nodes == {after}:
                        continue
                    first = min(pos[v] for v in nodes)
                    run = prog.order[first:pos[after] + 1]
                    assert all(v in free and not prog.waits.get(v) for v in run), [cap.ids[v] for v in run]
                    merged += 1
            n_packs += len(prog.packs_in)
        n_transfers += len(carried)
    assert merged > 0 and n_packs < n_transfers, (merged, n_packs, n_transfers)
