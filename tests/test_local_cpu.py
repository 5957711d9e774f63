"""This machine as a cluster: the ``local-cpu-N`` preset, ``profile-links --gloo N``
and its refusal to invent GPUs, ``measured:cpu`` costs on one thread, and every makespan
method on a CPU-only cluster (no method may assume its devices are GPUs)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from dnnplace.formulations.solvers.driver import SolverOptions
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators.lstm import lstm_grid
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.presets import LOCAL_CPU_LINK, cluster_preset, host_memory, local_cpu_cluster
from dnnplace.methods.base import SolveRequest
from dnnplace.registry import methods_for, solve


def test_local_cpu_preset():
    c = cluster_preset("local-cpu-3")
    assert c.names == ("cpu0", "cpu1", "cpu2") and set(c.kinds) == {"cpu"} and c.name == "local-cpu-3"
    assert np.allclose(c.memory, host_memory() / 3) and math.isfinite(host_memory()) and host_memory() > 1e8
    off = ~np.eye(3, dtype=bool)
    # the graphs' unit is ms: beta0 in ms, beta1 in ms per byte
    assert np.allclose(c.beta0[off], LOCAL_CPU_LINK[0] * 1e3) and np.allclose(c.beta1[off], 1e3 / LOCAL_CPU_LINK[1])
    assert np.all(c.cost_factor[off] == 1) and np.all(np.diag(c.beta0) == 0)
    assert 1e-6 < LOCAL_CPU_LINK[0] < 1e-2 and 1e8 < LOCAL_CPU_LINK[1] < 1e11  # measured figures, not zeros
    assert float(cluster_preset("local-cpu-2-1GiB").memory[0]) == 2 ** 30
    g = lstm_grid(layers=1, steps=2, hidden=8, batch=2, vocab=10, kinds=["cpu"], training=False).with_(unit="s")
    assert np.isclose(cluster_preset("local-cpu-2", g).beta0[0, 1], LOCAL_CPU_LINK[0])  # follows graph.unit
    with pytest.raises(InputError, match="at least one"):
        cluster_preset("local-cpu-0")
    # a profiled pair overrides the defaults, in either order
    p = local_cpu_cluster(3, links={(2, 0): (1e-3, 1e9)}, memory=5.0)
    assert np.isclose(p.beta0[0, 2], 1.0) and np.isclose(p.beta0[2, 0], 1.0) and np.isclose(p.beta1[0, 2], 1e-6)
    assert np.isclose(p.beta0[0, 1], LOCAL_CPU_LINK[0] * 1e3) and p.meta["links"] == "profiled"


# ------------------------------------------------------------------ every makespan method on local-cpu-2
@pytest.fixture(scope="module")
def cpu_instance():
    """A small LSTM training graph (layer ids, branches, parameters) whose one compute
    column is ``cpu``, on ``local-cpu-2``."""
    g = lstm_grid(layers=2, steps=3, hidden=1024, batch=32, vocab=1000, kinds=["cpu"], name="lstm-cpu")
    return Instance(g, cluster_preset("local-cpu-2", g), "test:lstm-cpu")


def _request(method, split_path):
    params = {"split": split_path} if method.name == "expert" else {}
    return SolveRequest(problem="makespan", solver=SolverOptions(time_limit=1.0 if method.kind == "ip" else 5.0),
                        params=params)


def test_every_makespan_method_on_a_cpu_only_cluster(cpu_instance, tmp_path):
    """Each registered makespan method returns a placement the evaluator accepts on
    ``local-cpu-2``, never below its own bound; and each deterministic one answers exactly
    as on the same cluster with its devices called ``gpu`` (nothing keys on the kind name).
    Before the fix, ``layer-split`` ("no accelerator") and ``metis`` ("needs at least one
    accelerator") refused the CPU-only cluster."""
    g, cl = cpu_instance.graph, cpu_instance.cluster
    split = tmp_path / "split.json"  # the expert's split: layer parity
    split.write_text(json.dumps({str(i): f"cpu{(lay if isinstance(lay, int) else 0) % 2}"
                                 for i, lay in zip(g.ids, g.layers)}))
    twin = Instance(g.with_(kinds=("gpu",)),
                    Cluster(tuple(Device(d.name, "gpu", d.memory, op_overhead=d.op_overhead) for d in cl.devices),
                            cl.beta0, cl.beta1, cl.cost_factor, name="gpu-twin"), "test:lstm-gpu")
    methods = methods_for("makespan")
    assert len(methods) >= 20
    checked, compared = [], 0
    for m in methods:
        res = solve(cpu_instance, m, _request(m, str(split)))
        assert res.status in ("feasible", "optimal"), (m.name, res.status, res.message)
        assert res.objective is not None and math.isfinite(res.objective), m.name
        assert set(res.placement.values()) <= set(cl.names), m.name
        if res.bound is not None:
            assert res.objective >= res.bound - 1e-9 * max(1.0, abs(res.objective)), (m.name, res.objective,
                                                                                       res.bound)
        if m.kind != "ip":  # the time-limited solvers may stop anywhere
            other = solve(twin, m, _request(m, str(split)))
            assert other.status == res.status and np.isclose(other.objective, res.objective), \
                (m.name, res.objective, other.objective)
            compared += 1
        checked.append(m.name)
    assert {"layer-split", "metis", "heft", "pesto", "dp-baseline"} <= set(checked)
    assert compared >= len(methods) - 1


# ------------------------------------------------------------------ profile-links
def _no_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_profile_links_refuses_gpus_that_are_not_there(tmp_path, monkeypatch, capsys):
    from dnnplace.cli import main
    _no_gpu(monkeypatch)
    out = tmp_path / "c.json"
    for argv in (["profile-links", "--out", str(out)], ["profile-links", "--gpus", "2", "--out", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "0 GPU(s) visible" in err and "--gloo" in err, err
    assert not out.exists()
    assert main(["profile-links", "--gloo", "1", "--out", str(out)]) == 2 and not out.exists()


def test_profile_links_gloo_writes_a_local_cpu_cluster(tmp_path, monkeypatch, capsys):
    """Two real gloo processes (three small sizes, two repeats: a few seconds)."""
    from dnnplace.cli import main
    from dnnplace.graphs.io import read_json
    from dnnplace.graphs.io.native import cluster_from_dict
    _no_gpu(monkeypatch)
    out = tmp_path / "local.json"
    assert main(["profile-links", "--gloo", "2", "--sizes", "1024,65536,1048576", "--repeats", "2",
                 "--out", str(out)]) == 0
    assert "cpu0-cpu1" in capsys.readouterr().out
    c = cluster_from_dict(read_json(out))
    assert c.names == ("cpu0", "cpu1") and c.kinds == ("cpu", "cpu") and c.meta["threads"] == 1
    # (the figures themselves depend on the load: a 2-repeat fit can come out flat, or, under a
    # loaded test run, with a negative intercept that the cluster clips to a latency of 0)
    assert c.beta0[0, 1] == c.beta0[1, 0] >= 0 and c.beta1[0, 1] >= 0 and "cpu0-cpu1" in c.meta["fits"]
    assert c.beta0[0, 1] > 0 or c.beta1[0, 1] > 0   # a message never costs nothing
    # the file is a cluster like the preset: --cluster FILE works for a graph of kind cpu
    g = lstm_grid(layers=1, steps=2, hidden=8, batch=2, vocab=10, kinds=["cpu"], training=False)
    res = solve(Instance(g, c, "t"), "heft", SolveRequest(problem="makespan"))
    assert res.status in ("feasible", "optimal")


# ------------------------------------------------------------------ measured:cpu on one thread
def test_measured_cpu_costs_run_on_one_thread(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from dnnplace.pytorch.capture import capture
    from dnnplace.pytorch.capture.costs import Measured, cost_model
    monkeypatch.setenv("DNNPLACE_PROFILE_CACHE", str(tmp_path))
    seen = []
    real_run = Measured._run

    def spy(self, cap):
        seen.append(torch.get_num_threads())
        return real_run(self, cap)

    monkeypatch.setattr(Measured, "_run", spy)
    with torch.device("meta"):
        net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        x = torch.randn(8, 16)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        g = capture(net, (x,), lambda out, x: out.square().mean(), cost="measured:cpu", name="mlp").graph
        assert torch.get_num_threads() == 2  # restored
        assert seen == [1] and g.kinds == ("cpu",)
        cost = g.meta["cost"]
        assert cost["model"] == "measured" and cost["threads"] == 1 and cost["device"] == "cpu"
        assert cost["repeats"] >= 3 and cost["warmup"] >= 1 and not cost["hit"]
        assert g.compute[:, 0].max() > 0
        # the thread count is part of the cache key: 2 threads is a new profile, 1 thread a hit
        cm2 = cost_model("measured:cpu")
        cm2.threads = 2
        g2 = capture(net, (x,), lambda out, x: out.square().mean(), cost=cm2, name="mlp").graph
        assert seen == [1, 2] and g2.meta["cost"]["threads"] == 2 and not g2.meta["cost"]["hit"]
        g3 = capture(net, (x,), lambda out, x: out.square().mean(), cost="measured:cpu", name="mlp").graph
        assert seen == [1, 2] and g3.meta["cost"]["hit"] and np.array_equal(g3.compute, g.compute)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert cost_model("measured:cuda").kind == "gpu" and cost_model("roofline:v100").kind == "gpu"
    assert os.environ["DNNPLACE_PROFILE_CACHE"] == str(tmp_path)
