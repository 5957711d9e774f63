"""The executor runs placed, ordered training steps across processes and matches an eager step.

Six models (tests/exec_models.py, loaded as FILE.py:FACTORY: the path a user's model
takes) x plans from four methods (HEFT, DPOS, Celeritas, Pesto), one device, and random
placements with random valid orders; each model's plans share one set of processes.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch") if not os.environ.get("DNNPLACE_REQUIRE_TORCH") else __import__("torch")

from dnnplace.graphs.errors import InputError  # noqa: E402
from dnnplace.pytorch.execution.launch import ExecutionError, Plan, execute  # noqa: E402
from dnnplace.pytorch.execution.program import build_programs, check_order  # noqa: E402
from dnnplace.pytorch.execution.worker import ModelSpec, load, trace_step  # noqa: E402

MODELS_FILE = str(Path(__file__).with_name("exec_models.py"))
SPECS = {  # name -> (factory, inputs)
    "mlp": ("mlp", ("32x64",)),
    "cnn": ("cnn", ("8x3x16x16",)),
    "lstm": ("lstm", ("8x4x16",)),
    "transformer": ("transformer", ("4x8x32",)),
    "inception": ("inception", ("4x16x12x12",)),
    "towers": ("two_towers", ("16x64",)),
}
METHODS = {"heft": {}, "dpos": {}, "celeritas": {}, "pesto": {"coarsen_to": 20}}
DEVICES = ["cpu0", "cpu1"]


def spec(name: str, **kw) -> ModelSpec:
    factory, inputs = SPECS[name]
    if name == "towers":
        kw.setdefault("params", {"width": 64})
    return ModelSpec(spec=f"{MODELS_FILE}:{factory}", inputs=inputs, loss="cross_entropy", **kw)


def traced(ms: ModelSpec):
    net, inputs, loss_fn = load(ms)
    return trace_step(ms, net, inputs, loss_fn)


def random_plan(cap, rng: np.random.Generator) -> Plan:
    """Every colocation group (a parameter, its gradient producer, its update) on one random
    device, other nodes on random devices; start times: a random topological order."""
    n = cap.n
    dev = rng.integers(0, 2, n)
    for g in np.unique(cap.colocation[cap.colocation >= 0]):
        dev[cap.colocation == g] = rng.integers(0, 2)
    indeg = np.bincount(cap.dst, minlength=n)
    succ = [[] for _ in range(n)]
    for s, d in zip(cap.src.tolist(), cap.dst.tolist()):
        succ[s].append(d)
    ready, start = [v for v in range(n) if indeg[v] == 0], {}
    while ready:
        v = ready.pop(int(rng.integers(len(ready))))
        start[cap.ids[v]] = float(len(start))
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    assert len(start) == n
    return Plan({v: DEVICES[int(d)] for v, d in zip(cap.ids, dev)}, start)


@pytest.fixture(scope="module")
def two_gpu_cluster():
    from dnnplace.graphs.cluster import Cluster
    return Cluster.from_links(Cluster.single_host(2, with_cpu=False).devices, default={"beta0": 0.01, "beta1": 1e-7})


def plans_for(name: str, cluster) -> list[tuple[str, Plan]]:
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.instance import Instance
    from dnnplace.methods.base import SolveRequest
    from dnnplace.pytorch.capture import capture
    from dnnplace.registry import solve
    ms = spec(name)
    net, inputs, loss_fn = load(ms, device="meta")
    inst = capture(net, inputs, loss_fn, name=name)
    inst = Instance(inst.graph, cluster, inst.source)
    names = cluster.names
    out = []
    for method, params in METHODS.items():
        res = solve(inst, method, SolveRequest("makespan", solver=SolverOptions(time_limit=5), params=dict(params)))
        assert res.status in ("optimal", "feasible"), (name, method, res.status, res.message)
        pl = {v: {d: DEVICES[i] for i, d in enumerate(names)}[dname] for v, dname in res.placement.items()}
        out.append((method, Plan(pl, res.start)))
    return out


@pytest.mark.parametrize("name", list(SPECS))
def test_distributed_step_equals_eager_step(name, two_gpu_cluster):
    """Loss and every gradient of each plan equal an eager single-process step, and the
    loss after one optimizer update equals the eager second step's."""
    ms = spec(name)
    cap = traced(ms)
    rng = np.random.default_rng(len(name))
    plans = [("one device", Plan({v: "cpu0" for v in cap.ids}))]
    plans += plans_for(name, two_gpu_cluster)
    plans += [(f"random {k}", random_plan(cap, rng)) for k in range(2)]
    measured = execute(ms, [p for _, p in plans], DEVICES, steps=2, warmup=0, timeout_s=120)
    assert len(measured) == len(plans) == 7
    crossing = 0
    for (label, _), m in zip(plans, measured):
        assert m.matches_reference, (name, label, m.max_abs_grad_diff, m.loss, m.reference_loss)
        assert m.n_grads_checked == sum(1 for k in cap.arg_kinds if k == "param")
        assert m.n_losses_checked == 2  # the loss after one optimizer update too
        assert m.max_abs_grad_diff <= 1e-4
        crossing += m.transfers
    assert measured[0].transfers == 0
    assert crossing > 10  # the random plans cross devices many times


def test_wrong_order_is_refused_before_running():
    ms = spec("mlp")
    cap = traced(ms)
    dev = np.zeros(cap.n, dtype=np.int64)
    order = list(range(cap.n))
    order[0], order[-1] = order[-1], order[0]  # an apply node before its parameter's gradient exists
    with pytest.raises(InputError, match="deadlock"):
        check_order(cap.n, cap.src, cap.dst, dev, [order], cap.ids)
    with pytest.raises(InputError, match="appears 0 times"):
        check_order(cap.n, cap.src, cap.dst, dev, [order[:-1]], cap.ids)


class _LocalDist:
    """torch.distributed stand-in for one process whose received buffers are never filled."""

    class _Work:
        def wait(self):
            return True

    def barrier(self):
        pass

    def irecv(self, buf, src, tag):
        return self._Work()

    def isend(self, val, dst, tag):
        return self._Work()


def test_missing_transfer_is_caught():
    """A device whose program lost a transfer fails naming the value, instead of computing
    with garbage."""
    from dnnplace.pytorch.execution.device_step import DeviceStep
    from dnnplace.pytorch.execution.worker import bind_step
    ms = spec("mlp")
    net, inputs, loss_fn = load(ms)
    cap = trace_step(ms, net, inputs, loss_fn)
    rng = np.random.default_rng(3)
    plan = random_plan(cap, rng)
    ranks = np.array([DEVICES.index(plan.placement[v]) for v in cap.ids])
    orders = [[v for v in sorted(range(cap.n), key=lambda v: plan.start[cap.ids[v]]) if ranks[v] == d]
              for d in range(2)]
    progs = build_programs(cap, ranks, orders)
    target = next(d for d in range(2) if progs[d].recvs)
    prog = progs[target]
    victim = next(iter(prog.waits))
    dropped = prog.waits.pop(victim)
    assert dropped
    step = DeviceStep(cap, prog, bind_step(cap, net, inputs), [0, 1], ms)
    with pytest.raises(RuntimeError, match="a transfer is missing"):
        step.run(_LocalDist(), record=False)


def test_stuck_step_times_out():
    ms = spec("mlp")
    cap = traced(ms)
    with pytest.raises(ExecutionError, match="did not finish within"):
        execute(ms, [Plan({v: "cpu0" for v in cap.ids})], DEVICES, steps=1, warmup=0, timeout_s=0.2)


def test_unknown_node_and_device_named():
    ms = spec("mlp")
    cap = traced(ms)
    pl = {v: "cpu0" for v in cap.ids}
    with pytest.raises(InputError, match="cpu7"):
        execute(ms, [Plan({**pl, cap.ids[3]: "cpu7"})], DEVICES, steps=1)
    with pytest.raises(InputError, match="'nope'"):
        execute(ms, [Plan({**pl, "nope": "cpu0"})], DEVICES, steps=1)


CUDA = torch.cuda.is_available()


def test_cpu_only_operator_refused_on_a_gpu():
    """The transformer's CPU trace picks the CPU-only fused attention: a plan putting it on a
    GPU is refused before anything runs, naming node, operator and device; on a CPU it runs."""
    from dnnplace.pytorch.execution.launch import check_gpu_ops
    ms = spec("transformer")
    cap = traced(ms)
    msg = r"runs aten\._scaled_dot_product_flash_attention_for_cpu\.default.*on cpu0 \(cuda:0\)"
    with pytest.raises(InputError, match=msg):
        check_gpu_ops(cap, ["cuda:0"] * cap.n, DEVICES, [0], [0] * cap.n)
    check_gpu_ops(cap, ["cpu"] * cap.n, DEVICES, [0], [0] * cap.n)
    if CUDA:
        with pytest.raises(InputError, match=msg):
            execute(ms, [Plan({v: "cpu0" for v in cap.ids})], DEVICES, steps=1, torch_devices={"cpu0": "cuda:0"})


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", [n for n in SPECS if n != "transformer"])
def test_cuda_step_equals_eager_step(name):
    """With ``cpu0`` on the GPU: the whole step there, and random placements over the GPU and
    a CPU process (transfers through host memory), equal the eager step on the GPU."""
    ms = spec(name)
    cap = traced(ms)
    rng = np.random.default_rng(len(name))
    plans = [Plan({v: "cpu0" for v in cap.ids})] + [random_plan(cap, rng) for _ in range(2)]
    measured = execute(ms, plans, DEVICES, steps=2, warmup=1, timeout_s=120, torch_devices={"cpu0": "cuda:0"})
    assert len(measured) == 3
    for k, m in enumerate(measured):
        assert m.matches_reference, (name, k, m.max_abs_grad_diff, m.loss, m.reference_loss)
        assert m.n_grads_checked == sum(1 for kd in cap.arg_kinds if kd == "param")
        assert m.torch_devices["cpu0"] == "cuda:0" and m.peak_cuda_bytes["cpu0"] > 0
    assert measured[0].transfers == 0 and measured[1].transfers + measured[2].transfers > 10
    assert all(m.torch_devices.get("cpu1", "cpu") == "cpu" for m in measured)


def test_gpu_requests_checked():
    """A GPU the host lacks, a device name the cluster lacks, two devices on one GPU, a
    device string that is no torch device, and --cuda on a cluster without GPUs: each named."""
    from dnnplace.execute_command import gpu_map
    from dnnplace.pytorch.execution.launch import cuda_devices
    have = torch.cuda.device_count() if CUDA else 0
    assert cuda_devices(DEVICES, {}) == ["cpu", "cpu"]
    with pytest.raises(InputError, match=f"'cpu1' is to run on cuda:{have}, but this host has {have}"):
        cuda_devices(DEVICES, {"cpu1": f"cuda:{have}"})
    with pytest.raises(InputError, match="'gpu3'"):
        cuda_devices(DEVICES, {"gpu3": "cuda:0"})
    with pytest.raises(InputError, match="'tpu:0' is neither"):
        cuda_devices(DEVICES, {"cpu0": "tpu:0"})
    if CUDA:
        with pytest.raises(InputError, match="would share cuda:0"):
            cuda_devices(DEVICES, {"cpu0": "cuda:0", "cpu1": "cuda:0"})
    assert gpu_map(["gpu0", "gpu1", "cpu0"], ["gpu", "gpu", "cpu"]) == {"gpu0": "cuda:0", "gpu1": "cuda:1"}
    with pytest.raises(InputError, match="no GPU devices"):
        gpu_map(DEVICES, ["cpu", "cpu"])


def test_cli_capture_solve_execute(tmp_path, capfd):
    """The researcher's path on this host: capture with measured:cpu costs, solve on
    local-cpu-2, execute with --out and --gantt; the run file has the promised fields, and
    the live per-step lines show the JSON's step times (one statistic: docs/execution.md,
    Timing)."""
    import json
    import re

    from dnnplace.cli import main
    model = f"{MODELS_FILE}:mlp"
    g, res, run, png = (str(tmp_path / f) for f in ("g.json", "r.json", "run.json", "run.png"))
    assert main(["capture", model, "--input", "32x64", "--loss", "cross_entropy", "--cost", "measured:cpu",
                 "--out", g]) == 0
    assert main(["solve", g, "--cluster", "local-cpu-2", "--problem", "makespan", "--method", "heft",
                 "--out", res]) == 0
    assert main(["execute", model, res, "--input", "32x64", "--loss", "cross_entropy",  # the result's cluster
                 "--steps", "2", "--warmup", "1", "--out", run, "--gantt", png]) == 0
    doc = json.loads(Path(run).read_text())
    for key in ("measured_step_ms", "measured_min_ms", "measured_max_ms", "predicted_step_ms", "matches_reference",
                "max_abs_grad_diff", "ops", "peak_rss_bytes", "eager_step_ms"):
        assert key in doc, key
    assert doc["matches_reference"] is True and doc["losses_checked"] == 3
    assert doc["measured_min_ms"] <= doc["measured_step_ms"] <= doc["measured_max_ms"]
    assert doc["predicted_step_ms"] > 0
    result = json.loads(Path(res).read_text())
    placed, ranks = result["placement"], result["priorities"]
    assert {o["node"] for o in doc["ops"]} == set(placed) and len(doc["ops"]) == len(placed)
    assert doc["plan"]["start"] == ranks   # each device ran the result's dispatch order (docs/execution.md)
    for dev in set(placed.values()):
        ran = [o["node"] for o in sorted(doc["ops"], key=lambda o: o["start_ms"]) if placed[o["node"]] == dev]
        assert [ranks[v] for v in ran] == sorted(ranks[v] for v in ran), dev
    assert all(o["end_ms"] >= o["start_ms"] >= 0 for o in doc["ops"])
    assert Path(png).stat().st_size > 10_000
    got = capfd.readouterr()
    assert "matches the eager step: yes" in got.out
    live = re.findall(r"^plan 1/1 step \d+/3: ([0-9.]+) ms$", got.err, re.M)   # warm-up lines excluded
    assert live == [f"{t:.2f}" for t in doc["measured_steps_ms"]] and len(live) == 2, (live, got.err[-2000:])
    assert f"median of 2; min {doc['measured_min_ms']:.3f}" in got.out


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_simulator_sends_what_the_executor_sends(name, two_gpu_cluster):
    """On random two-device placements of a training step, the simulator's per-destination
    transfers (one per source output and consuming device, docs/semantics.md 2.1) carry the
    executor's sends (one per root tensor and consuming device): the same bytes from each
    producer to each device. The executor may send more messages: an operator with several
    outputs read by one consumer (batch norm's saved statistics) is one edge, one transfer in
    the simulator, one message per tensor in the executor. Two known differences keep the
    LSTM and Transformer models out (docs/execution.md, "What the simulator does not follow"):
    a consumer of a view (a time step's slice) is charged the view's bytes, the executor
    sends the whole root tensor; edges of one multi-output operator that carry overlapping
    sets of its outputs are charged each, the executor sends each tensor once."""
    from dnnplace.evaluation.simulate import simulate
    from dnnplace.graphs.placement import Placement
    from dnnplace.pytorch.capture import capture

    ms = spec(name)
    cap = traced(ms)
    net, inputs, loss_fn = load(ms, device="meta")
    g = capture(net, inputs, loss_fn, name=name).graph
    assert list(g.ids) == list(cap.ids)
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(5):
        plan = random_plan(cap, rng)
        dev = np.array([DEVICES.index(plan.placement[v]) for v in cap.ids])
        orders = [sorted(np.flatnonzero(dev == d).tolist(), key=lambda v: plan.start[cap.ids[v]]) for d in range(2)]
        sent: dict[tuple[int, int], float] = {}
        sends = [t for p in build_programs(cap, dev, orders) for t in p.recvs]
        for tr in sends:
            sent[(tr.node, tr.dst)] = sent.get((tr.node, tr.dst), 0.0) + tr.nbytes
        carried: dict[tuple[int, int, int], float] = {}  # (source, output, device) -> bytes
        for j, (s, d) in enumerate(zip(g.src.tolist(), g.dst.tolist())):
            if dev[s] != dev[d]:
                carried[(s, int(g.edge_output[j]), int(dev[d]))] = float(g.edge_bytes[j])
        simulated: dict[tuple[int, int], float] = {}
        for (s, _o, b), nbytes in carried.items():
            simulated[(s, b)] = simulated.get((s, b), 0.0) + nbytes
        res = simulate(Placement(g, two_gpu_cluster, dev), congestion=False)
        assert res.n_transfers == len(carried) <= len(sends)
        assert simulated.keys() == sent.keys(), (name, set(simulated) ^ set(sent))
        for k, nbytes in sent.items():
            assert simulated[k] == pytest.approx(nbytes, rel=1e-9), (name, cap.ids[k[0]], simulated[k], nbytes)
        compared += len(sends)
    assert compared >= 20, compared


def _write_then_abort(rank: int, out_dir: str) -> None:
    """A worker that writes its measurements, then (rank 0) aborts as gloo's teardown can."""
    import json
    torch.save([{"rank": rank}], os.path.join(out_dir, f"outputs-{rank}.pt"))
    with open(os.path.join(out_dir, f"times-{rank}.json"), "w") as f:
        json.dump({"rank": rank, "jobs": []}, f)
    if rank == 0:   # as after the workers' last barrier: every rank has written
        import time
        while not os.path.exists(os.path.join(out_dir, "times-1.json")):
            time.sleep(0.01)
        time.sleep(0.2)
        os.abort()


def _abort_before_writing(rank: int, out_dir: str) -> None:
    if rank == 0:
        os.abort()
    _write_then_abort(rank, out_dir)


def test_an_abort_after_every_worker_wrote_loses_nothing(tmp_path, capfd):
    """A worker killed by a signal (SIGABRT, "terminate called without an active exception"
    in gloo's teardown) after every rank wrote its measurements: the run is kept, with a
    warning; killed before its rank wrote: an ExecutionError naming the signal."""
    import torch.multiprocessing as mp

    from dnnplace.pytorch.execution.launch import _written, run_processes
    done = tmp_path / "done"
    done.mkdir()
    run_processes(mp, str(done), 2, 60, fn=_write_then_abort, written=lambda: _written(str(done), 2))
    err = capfd.readouterr().err
    assert "SIGABRT" in err and "the run is complete" in err, err
    assert _written(str(done), 2)
    torn = tmp_path / "torn"
    torn.mkdir()
    with pytest.raises(ExecutionError, match="a worker exited: .*SIGABRT"):
        run_processes(mp, str(torn), 2, 60, fn=_abort_before_writing, written=lambda: _written(str(torn), 2))


@pytest.mark.parametrize("name", ["cnn", "lstm"])
def test_the_overhead_pairs_eager_and_executor_steps_of_the_same_work(name):
    """``interleaved_overhead``: as many pairs as asked, each side a real step, and both sides
    take the same steps (every step's loss equal: BatchNorm's buffers and Adam's state each
    side's own), so the ratio compares the same work."""
    from dnnplace.pytorch.execution.overhead import interleaved_overhead
    o = interleaved_overhead(spec(name), steps=4, warmup=1)
    s = o.summary()
    assert len(o.eager_ms) == len(o.executor_ms) == s["pairs"] == 4
    assert min(o.eager_ms) > 0 and min(o.executor_ms) > 0 and s["ratio"] > 0
    assert s["max_loss_diff"] <= 1e-4, s
