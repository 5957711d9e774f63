"""FastT's DP baseline with the variables on the host CPU (``dp-baseline --param variables=cpu``,
TF-slim's placement) and the ablation benchmark built on it
(results/fastt/fastt-scaling/dp-baseline-ablation.md)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from dnnplace.graphs import Cluster, OpGraph
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.instance import Instance
from dnnplace.registry import SolveRequest, run_method

NAN = math.nan
ROOT = Path(__file__).resolve().parents[1]


def _training(kinds=("gpu", "cpu")) -> OpGraph:
    """``w (param) -> f -> g (grad) -> u (apply)``, ``w -> u``; the parameter colocated with its
    gradient and update, as a captured PyTorch graph has them; CPU costs on ``w`` and ``u`` only."""
    cost = {"w": [0.0, 0.0], "f": [4.0, NAN], "g": [2.0, NAN], "u": [1.0, 3.0]}
    return OpGraph.from_ids("wfgu", [("w", "f"), ("f", "g"), ("g", "u"), ("w", "u")], kinds=list(kinds),
                            compute=[cost[v][:len(kinds)] for v in "wfgu"], memory=[8e6, 1, 1, 0],
                            edge_bytes=[8e6, 4e6, 8e6, 8e6], roles=["param", "compute", "grad", "apply"],
                            colocation=[0, -1, 0, 0], colocation_labels=("w",), name="train", meta={"batch": 8})


def _dp(g: OpGraph, k: int, variables: str, *, cpu: bool = True):
    inst = Instance(g, Cluster.single_host(k, with_cpu=cpu), "train")
    res, p = run_method(inst, "dp-baseline", SolveRequest(problem="makespan", params={"variables": variables}))
    return res, {p.graph.ids[i]: p.cluster.devices[d].name for i, d in enumerate(p.device.tolist())}


@pytest.mark.parametrize("k", [1, 2])
def test_variables_on_cpu_put_parameters_sums_and_updates_on_the_host(k):
    res, at = _dp(_training(), k, "cpu")
    gpu0, _ = _dp(_training(), k, "gpu0")
    assert res.status == gpu0.status == "feasible" and res.extra["variables"] == "cpu"
    shared = {"w", "u"} | ({"u/addn0"} if k > 1 else set())
    assert {v for v, d in at.items() if d == "cpu0"} == shared
    replicas = [v for v in at if v not in shared]
    assert len(replicas) == (2 if k == 1 else 2 * k + k)  # f, g per replica (+ the weight reads)
    assert all(at[v] == (f"gpu{v.split('@r')[1][0]}" if "@r" in v else "gpu0") for v in replicas)
    # the weights and gradients now cross PCIe and the update runs 3x slower on the CPU
    assert res.objective > gpu0.objective


def test_variables_on_cpu_need_a_cpu_device_and_cpu_costs():
    with pytest.raises(InputError, match="option 'variables': cluster .* has no cpu device"):
        _dp(_training(), 2, "cpu", cpu=False)
    with pytest.raises(InputError, match="option 'variables': node 'w' has no 'cpu' compute cost"):
        _dp(_training(("gpu",)), 2, "cpu")
    with pytest.raises(InputError, match="variables"):
        _dp(_training(), 2, "host")


def test_ablation_benchmark_writes_both_baselines_side_by_side(tmp_path):
    out = tmp_path / "ablation.md"
    run = subprocess.run([sys.executable, "-m", "benchmarks", "fastt-dp-baseline", "--models", "lenet", "--gpus", "2",
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    ours = ("| strong | lenet |", "| weak | lenet |")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith(ours)]
    assert len(rows) == 2 + 4  # a speed-up row per scaling, rows at 1 and 2 GPUs per scaling
    assert "--gpus 1 2`" in text and "variables=cpu" in text
    one = [r for r in rows if r[2] == "1"]
    assert len(one) == 2 and all(float(r[3]) > float(r[4]) > float(r[5]) for r in one)  # GPU 0 > CPU > slow CPU
