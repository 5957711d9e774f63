"""Calibration from execution timelines (pytorch/execution/calibration.py): synthetic runs
made by the simulator from known figures are fitted back to those figures, replayed to
their own step time, and predicted from profiled costs."""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.evaluation.sim_costs import build_transfers
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs import Cluster, Device, InputError, Placement
from dnnplace.graphs.generators.random_dag import random_layered_dag
from dnnplace.pytorch.execution.calibration import (
    RunTrace,
    calibrated_cluster,
    fit,
    link_fit,
    link_samples,
    read_run,
    replay,
)

# "posting" is a message's cost the sender's timeline does not show (the executor's bookkeeping
# before ``isend``): the fit finds it in the device's unexplained time, per message sent
TRUE = {"send": 0.3, "posting": 0.04, "recv": 0.2, "gap": 0.05, "beta0": 0.8, "beta1": 2e-6, "scale": 1.25,
        "intercept": 0.01}


def true_cluster(n: int = 2) -> Cluster:
    devs = [Device(f"cpu{i}", "cpu", op_overhead=TRUE["gap"],
                   send_overhead=TRUE["send"] + TRUE["posting"],
                   recv_overhead=TRUE["recv"]) for i in range(n)]
    return Cluster.from_links(devs, default={"beta0": TRUE["beta0"], "beta1": TRUE["beta1"]})


def synthetic_run(graph, cluster: Cluster, device: np.ndarray, measured: np.ndarray) -> tuple[RunTrace, float]:
    """What the executor would record of the simulated step: each node's slot holds its
    messages' unpacking (the latest-arriving first, blocked when the device idled for it),
    the gap, the operator and its sends."""
    g = graph.with_(compute=measured[:, None])
    pl = Placement(g, cluster, device)
    sim = simulate(pl, policy="order", priorities=g.topo_position.astype(float), congestion=False)
    tx = build_transfers(pl, dedup=True)
    start, fin = sim.schedule.start, sim.schedule.finish
    names = cluster.names
    ids = [str(v) for v in g.ids]   # as a JSON record keys them
    firsts = [int(g.topo_order[min(g.topo_position[tx.dst_nodes[tx.dst_ptr[x]:tx.dst_ptr[x + 1]]])])
              for x in range(len(tx.edge))]
    sends = {u: [x for x in range(len(tx.edge)) if tx.src_node[x] == u] for u in range(g.n)}
    prev_finish = {}
    for d in range(cluster.size):
        nodes = sorted((v for v in range(g.n) if device[v] == d), key=lambda v: start[v])
        for a, b in zip([None] + nodes, nodes):
            prev_finish[b] = 0.0 if a is None else fin[a]
    ops, msgs = [], {}
    for v in range(g.n):
        mine = sorted((x for x in range(len(tx.edge)) if firsts[x] == v), key=lambda x: -sim.xfer_finish[x])
        t = start[v]
        for j, x in enumerate(mine):
            blocked = j == 0 and start[v] > prev_finish[v] + 1e-12
            wait_start = prev_finish[v] if blocked else t
            msgs.setdefault(x, {}).update({"tag": x, "src": names[tx.src_dev[x]], "dst": names[tx.dst_dev[x]],
                       "bytes": int(g.edge_bytes[tx.edge[x]]), "consumer": ids[v],
                       "wait_start_ms": wait_start, "wait_end_ms": t, "ready_ms": t + TRUE["recv"]})
            t += TRUE["recv"]
        t += TRUE["gap"]
        ops.append({"node": ids[v], "device": names[device[v]], "start_ms": t, "end_ms": t + measured[v]})
        t += measured[v]
        for x in sends[v]:
            t += TRUE["posting"]
            msgs.setdefault(x, {}).update(send_start_ms=t, send_end_ms=t + TRUE["send"])
            t += TRUE["send"]
        assert t == pytest.approx(fin[v])
    run = RunTrace(ops=ops, messages=[msgs[x] for x in sorted(msgs)], op_ms=dict(zip(ids, measured.tolist())),
                   step_ms=float(sim.makespan), placement={ids[v]: names[device[v]] for v in range(g.n)},
                   start=dict(zip(ids, start.tolist())))
    return run, float(sim.makespan)


def test_the_fit_recovers_known_figures_replays_and_predicts_exactly():
    rng = np.random.default_rng(3)
    checked = 0
    runs, costs, graphs = [], [], []
    for seed in range(4):
        g = random_layered_dag(40, seed=seed, kinds=("cpu",), compute_ms=1.0, output_bytes=2e5)
        profiled = g.compute[:, 0]
        measured = TRUE["scale"] * profiled + TRUE["intercept"]
        device = rng.integers(0, 2, g.n)
        run, step = synthetic_run(g, true_cluster(), device, measured)
        runs.append(run)
        costs.append(dict(zip(map(str, g.ids), profiled.tolist())))
        graphs.append((g, step))
    cal = fit(runs, costs)
    assert cal.samples["blocked"] >= 10
    for d in ("cpu0", "cpu1"):
        assert cal.send_overhead[d] == pytest.approx(TRUE["send"] + TRUE["posting"])
        assert cal.recv_overhead[d] == pytest.approx(TRUE["recv"])
        assert cal.op_gap[d] == pytest.approx(TRUE["gap"])
        assert cal.op_scale[d] == pytest.approx(TRUE["scale"])
        assert cal.op_intercept[d] == pytest.approx(TRUE["intercept"], abs=1e-9)
    for b0, b1 in cal.links.values():
        assert b0 == pytest.approx(TRUE["beta0"]) and b1 == pytest.approx(TRUE["beta1"])
    base = Cluster.from_links([Device("cpu0", "cpu"), Device("cpu1", "cpu")])
    for run, (g, step) in zip(runs, graphs):
        replayed = replay(g, calibrated_cluster(base, cal, replay=True), run, congestion=False)
        assert replayed.makespan == pytest.approx(step)
        pl = Placement(g, calibrated_cluster(base, cal), [int(run.placement[str(v)][-1]) for v in g.ids])
        order = np.array([run.start[str(v)] for v in g.ids])
        assert simulate(pl, policy="order", priorities=order, congestion=False).makespan == pytest.approx(step)
        checked += 1
    assert checked == 4


def test_devices_without_samples_take_their_kinds_figures():
    cal = fit([RunTrace(ops=[{"node": "a", "device": "cpu0", "start_ms": 0.0, "end_ms": 1.0}], messages=[],
                        op_ms={"a": 1.0}, step_ms=1.2, placement={"a": "cpu0"}, start=None)], [{"a": 0.5}])
    base = Cluster.from_links([Device("cpu0", "cpu"), Device("cpu1", "cpu"), Device("gpu0", "gpu")])
    cl = calibrated_cluster(base, cal)
    assert cl.speed.tolist() == [0.5, 0.5, 1.0] and cl.meta["calibration"]["samples"]["runs"] == 1


def test_the_link_model_is_the_one_whose_replays_fit_better():
    from dnnplace.pytorch.execution.calibration import links_queue
    rows = [{"measured_ms": 10.0, "replayed_ms": 14.0, "replayed_ms_overlap": 10.5},
            {"measured_ms": 20.0, "replayed_ms": 20.0, "replayed_ms_overlap": 19.0},
            {"measured_ms": 5.0, "replayed_ms": 9.0, "replayed_ms_overlap": 5.0}]
    assert links_queue(rows) is False and links_queue(rows[1:2]) is True and links_queue([]) is True


def test_link_fit_and_bad_records():
    assert link_fit([100, 100], [0.5, 0.7]) == (0.6, 0.0)
    assert link_fit([0, 10], [1.0, 0.5]) == (0.75, 0.0)   # a negative slope: the median
    with pytest.raises(InputError, match="no 'messages' field.*execute the plan again"):
        read_run({"ops": [], "measured_step_ms": 1.0}, "old.json")
    with pytest.raises(InputError, match="no 'ops' field"):
        read_run({"messages": []}, "x.json")


def test_the_command_writes_a_cluster_that_replays_its_runs(tmp_path, capsys):
    import json

    from dnnplace.cli import main
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import read_json, save_instance
    g = random_layered_dag(30, seed=5, kinds=("cpu",), compute_ms=1.0, output_bytes=2e5)
    device = np.random.default_rng(5).integers(0, 2, g.n)
    run, step = synthetic_run(g, true_cluster(), device, g.compute[:, 0].copy())
    save_instance(Instance(g, None, "synthetic"), tmp_path / "g.json")
    doc = {"ops": run.ops, "messages": run.messages, "op_median_ms": run.op_ms, "measured_step_ms": step,
           "plan": {"placement": run.placement, "start": run.start}, "graph": str(tmp_path / "g.json")}
    (tmp_path / "run.json").write_text(json.dumps(doc))
    out = tmp_path / "cal.json"
    assert main(["calibrate", str(tmp_path / "run.json"), "--cluster", "local-cpu-2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "replay |error|" in text and f"wrote {out}" in text
    cal = read_json(out)
    assert [d["send_overhead"] for d in cal["devices"]] == pytest.approx([TRUE["send"] + TRUE["posting"]] * 2)
    assert len(cal["meta"]["calibration"]["runs"]) == 1
    assert cal["meta"]["congestion"] in (True, False)   # the link model its replays chose
    # the output may not be an input; a record without messages is named
    assert main(["calibrate", str(tmp_path / "run.json"), "--out", str(tmp_path / "run.json")]) == 2
    (tmp_path / "old.json").write_text(json.dumps({"ops": [], "measured_step_ms": 1.0}))
    assert main(["calibrate", str(tmp_path / "old.json"), "--cluster", "local-cpu-2", "--out",
                 str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no 'messages' field" in err[-1] and not (tmp_path / "x.json").exists()


def test_a_pack_counts_once_split_over_its_tensors():
    # cpu1 waits from the step's start, so neither device has time outside operators and messages
    msg = {"src": "cpu0", "dst": "cpu1", "send_start_ms": 1.0, "send_end_ms": 1.4, "wait_start_ms": 0.0,
           "wait_end_ms": 3.0, "ready_ms": 3.2, "pack": 7}
    ops = [{"node": "a", "device": "cpu0", "start_ms": 0.0, "end_ms": 1.0},
           {"node": "b", "device": "cpu1", "start_ms": 3.2, "end_ms": 4.0}]
    doc = {"ops": ops, "measured_step_ms": 4.0, "messages": [{**msg, "bytes": 100, "consumer": "b"},
                                                             {**msg, "bytes": 300, "consumer": "b"}]}
    cal = fit([read_run(doc)])
    assert cal.send_overhead["cpu0"] == pytest.approx(0.2) and cal.recv_overhead["cpu1"] == pytest.approx(0.1)
    assert cal.samples["blocked"] == 1 and cal.links[("cpu0", "cpu1")] == (pytest.approx(1.6), 0.0)
    # its one sample: the pack (one message) departs after its first post and one typical post, at
    # 1.4 ms, and the receiver stops waiting at 3.0
    [(a, b, nbytes, ms)] = link_samples(read_run(doc))
    assert (a, b, nbytes, ms) == ("cpu0", "cpu1", 400.0, pytest.approx(1.6))


def test_a_clusters_own_link_model_is_the_default_of_simulate_and_solve():
    import dataclasses

    import dnnplace as api
    from dnnplace.graphs import OpGraph
    # a (1.0) sends two tensors over one link of 1.0 each: queued they arrive at 2 and 3, overlapping both at 2
    g = OpGraph.from_ids("abc", [("a", "b"), ("a", "c")], kinds=["cpu"], compute=[[1.0], [0.0], [0.0]],
                         memory=[0] * 3, edge_output=[0, 1])
    queued = Cluster.from_links([Device("cpu0", "cpu"), Device("cpu1", "cpu")], default={"beta0": 1.0})
    overlap = dataclasses.replace(queued, meta={"congestion": False})
    assert queued.default_congestion and not overlap.default_congestion
    placement = {"a": "cpu0", "b": "cpu1", "c": "cpu1"}
    assert api.simulate(g, placement, cluster=queued).makespan == 3.0
    assert api.simulate(g, placement, cluster=overlap).makespan == 2.0
    assert api.simulate(g, placement, cluster=overlap).congestion is False
    assert api.simulate(g, placement, cluster=overlap, congestion=True).congestion is True
    res = api.solve(g, "heft", cluster=overlap, problem="makespan")
    assert res.options["congestion"] is False
