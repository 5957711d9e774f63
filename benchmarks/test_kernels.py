"""pytest-benchmark micro-benchmarks of the hot paths (not part of the test suite).

    .venv/bin/pytest benchmarks/test_kernels.py --benchmark-only
    .venv/bin/pytest benchmarks/test_kernels.py --benchmark-only --benchmark-autosave   # keep a baseline
    .venv/bin/pytest benchmarks/test_kernels.py --benchmark-only --benchmark-compare    # against the last one

Kernels: the exact max-load DP over ideals on a bundled Tarnawski layer graph (ResNet-50
inference, 242 ideals; the numba kernel compiled before timing), the evaluator
(``validate``, ``maxload``) and the simulator (fifo with congestion, and the strict
``order`` replay) on a generated 5,000-node layered DAG with a random placement on 4
NVLink GPUs, and list scheduling (HEFT, m-TOPO) on a 3,000-node DAG. The plain ``pytest``
run collects ``tests/`` only (``testpaths`` in ``pyproject.toml``); the whole-program
benchmarks are ``python -m benchmarks NAME``.
"""

from __future__ import annotations

import numpy as np
import pytest

from dnnplace.data import tarnawski_dir
from dnnplace.evaluation.evaluate import maxload, validate
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.list_scheduling import ALGORITHMS
from dnnplace.heuristics.maxload_dp import maxload_dp

pytest.importorskip("pytest_benchmark")


@pytest.fixture(scope="module")
def layer_graph():
    inst = load_instance(tarnawski_dir() / "throughput-inputs" / "LayerGraphs" / "resnet50_inference.json")
    maxload_dp(inst)  # compile (or load) the numba kernel outside the timing
    return inst


@pytest.fixture(scope="module")
def placement() -> Placement:
    g = random_layered_dag(5000, seed=0, kinds=("gpu",))
    cl = Cluster.single_host(4, with_cpu=False)
    return Placement(g, cl, np.random.default_rng(0).integers(0, cl.size, g.n))


@pytest.fixture(scope="module")
def dag():
    return random_layered_dag(3000, seed=1, kinds=("gpu",), training=True), Cluster.single_host(4, with_cpu=False)


def test_maxload_dp(benchmark, layer_graph):
    res = benchmark(maxload_dp, layer_graph)
    assert res.ideals == 242 and res.value > 0


def test_validate(benchmark, placement):
    benchmark(validate, placement, contiguity="all")


def test_maxload(benchmark, placement):
    ev = benchmark(maxload, placement)
    assert ev.objective > 0


def test_simulate_fifo_congestion(benchmark, placement):
    res = benchmark(simulate, placement, policy="fifo", congestion=True)
    assert res.makespan > 0


def test_simulate_order(benchmark, placement):
    prio = simulate(placement, policy="fifo", congestion=True).schedule.priorities()
    res = benchmark(simulate, placement, policy="order", priorities=prio, congestion=True)
    assert res.makespan > 0


@pytest.mark.parametrize("algorithm", ["heft", "m-topo"])
def test_list_scheduling(benchmark, dag, algorithm):
    g, cl = dag
    benchmark.pedantic(ALGORITHMS[algorithm], args=(g, cl), rounds=3, iterations=1, warmup_rounds=1)
