"""Baselines of Tarnawski et al. Tables 1 and 4: local search, PipeDream, partitioner."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from instances import random_inference

from dnnplace.evaluation.evaluate import maxload
from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.placement import Placement
from dnnplace.heuristics.local_search import local_search
from dnnplace.heuristics.maxload_dp import maxload_dp
from dnnplace.heuristics.partitioner import partition_split
from dnnplace.heuristics.pipedream import branch_labels, pipedream_split
from dnnplace.registry import SolveRequest, solve

REPO = Path(__file__).resolve().parents[1]


def _acc_instance(seed: int) -> Instance:
    """random_inference with every node runnable on the accelerators (local search
    uses accelerators only)."""
    inst = random_inference(seed)
    g = inst.graph
    comp = g.compute.copy()
    comp[np.isnan(comp[:, 0]), 0] = 5.0
    return Instance(g.with_(compute=comp), Cluster.tarnawski(3, 1, 1e9))


@pytest.mark.parametrize("seed", range(8))
def test_local_search_is_a_local_optimum_and_above_the_optimum(seed):
    inst = _acc_instance(seed)
    g, cl = inst.graph, inst.cluster
    p, val, values = local_search(inst, restarts=3, seed=seed)
    assert len(values) == 3 and val == min(values)
    assert maxload(p).objective == pytest.approx(val, rel=1e-12)
    # non-contiguous optimum over the accelerators by exhaustive search
    best = min(maxload(Placement(g, cl, np.array(c))).objective for c in itertools.product(range(3), repeat=g.n))
    assert val >= best - 1e-9
    # no single move to another accelerator improves by more than the 1e-5 threshold
    for v in range(g.n):
        for d in range(3):
            dev = p.device.copy()
            dev[v] = d
            assert maxload(Placement(g, cl, dev)).objective >= val - 1e-5 - 1e-9


def test_local_search_is_seeded():
    inst = _acc_instance(3)
    a = local_search(inst, restarts=2, seed=7)
    b = local_search(inst, restarts=2, seed=7)
    assert np.array_equal(a[0].device, b[0].device) and a[1] == b[1]


def test_branch_labels_contract_a_diamond_and_keep_a_chain():
    # 0 -> {1, 2} -> 3 -> 4: the fork collapses; 3 and 4 stay apart
    g = OpGraph(ids=range(5), kinds=("acc", "cpu"), compute=np.ones((5, 2)), memory=np.zeros(5),
                src=[0, 0, 1, 2, 3], dst=[1, 2, 3, 3, 4])
    lab = branch_labels(g)
    assert lab[0] == lab[1] == lab[2] and len({lab[0], lab[3], lab[4]}) == 3


def test_pipedream_equals_dp_on_a_chain():
    # on a path every contiguous split is a segment split: PipeDream's DP is exact
    rng = np.random.default_rng(0)
    n = 12
    g = OpGraph(ids=range(n), kinds=("acc", "cpu"), compute=np.stack([rng.integers(1, 9, n), 50 * np.ones(n)], 1),
                memory=np.zeros(n), src=np.arange(n - 1), dst=np.arange(1, n), edge_cost=rng.integers(0, 3, n - 1))
    inst = Instance(g, Cluster.tarnawski(3, 1, 1e9))
    p, val = pipedream_split(inst)
    assert val == pytest.approx(maxload_dp(inst).value)
    assert maxload(p, contiguity="both").objective == pytest.approx(val)


@pytest.mark.parametrize("name,paper", [("bert24_inference", 17.79), ("bert24_training", 41.75),
                                        ("resnet50_training", 83.67), ("inceptionv3_inference", 60.42)])
def test_pipedream_matches_table1(tarnawski_dir, name, paper):
    inst = load_instance(tarnawski_dir / f"throughput-inputs/LayerGraphs/{name}.json")
    res = solve(inst, "pipedream", SolveRequest("maxload"))
    assert f"{res.objective:.2f}" == f"{paper:.2f}"
    assert res.evaluation["feasible"]


def test_partitioner_balances_two_chains():
    g = OpGraph(ids=range(4), kinds=("acc", "cpu"), compute=[[1, 1]] * 4, memory=[0] * 4, src=[0, 2], dst=[1, 3],
                edge_cost=[5, 5])
    p = partition_split(Instance(g, Cluster.tarnawski(2, 1, 10)))
    assert maxload(p).objective == 2.0  # each chain whole on one accelerator, no transfer


def test_partitioner_reports_memory_violations():
    # four independent nodes of 3 bytes each, two accelerators of 5 bytes: any balanced
    # 2-way split puts 6 bytes on a device; the evaluator must say so
    g = OpGraph(ids=range(4), kinds=("acc", "cpu"), compute=[[1, 1]] * 4, memory=[3] * 4, src=[], dst=[])
    res = solve(Instance(g, Cluster.tarnawski(2, 1, 5)), "partitioner", SolveRequest("maxload"))
    assert not res.evaluation["feasible"]
    assert any("memory" in v for v in res.evaluation["violations"])
    assert res.objective == 2.0  # scored anyway: reported, not hidden


def test_latency_baselines_paper_row(tarnawski_dir):
    # Table 4, layer BERT-24: greedy 100.22, max-load DP 108.03, Scotch 108.03
    inst = load_instance(tarnawski_dir / "latency-inputs/LayerGraphs/bert24_inference.json")
    assert f"{solve(inst, 'greedy', SolveRequest('latency')).objective:.2f}" == "100.22"
    assert f"{solve(inst, 'dp', SolveRequest('latency')).objective:.2f}" == "108.03"


# ---------------------------------------------------------------- Pesto's layer-wise split
# A training graph whose layers are module names, as captured graphs carry them: the
# weighted layers emb < l0 < l1 < head; "drop" and "loss" hold no parameter (not layers),
# "add" and one backward node have no label; param / grad / apply of each weight form a
# colocation group, and the apply of l0 has no label. "dw_l1" (l1's weight gradient, as
# captured graphs mislabel it) reads l1's input "add" (layer l0) and feeds l1's update.
_FWD = [("in", None, []), ("emb", "emb", ["in", "p_emb"]), ("drop", "drop", ["emb"]),
        ("l0", "l0", ["drop", "p_l0"]), ("add", "", ["l0", "drop"]), ("l1", "l1", ["add", "p_l1"]),
        ("head", "head", ["l1", "p_head"]), ("loss", "loss", ["head"])]
_BWD = [("d_loss", "loss", ["loss"]), ("d_head", "head", ["d_loss", "l1"]), ("d_l1", None, ["d_head", "l1"]),
        ("dw_l1", "drop", ["d_l1", "add"]),
        ("d_add", "drop", ["d_l1", "add"]), ("d_l0", "l0", ["d_add", "drop"]), ("d_emb", "emb", ["d_l0", "in"])]
_WEIGHTS = ("emb", "l0", "l1", "head")


def _string_layer_graph(perm: np.ndarray | None = None) -> OpGraph:
    nodes = [(f"p_{w}", w, [], "param", False, w) for w in _WEIGHTS]
    nodes += [(v, lay, ins, "compute", False, None) for v, lay, ins in _FWD]
    nodes += [(v, lay, ins, "compute", True, None) for v, lay, ins in _BWD]
    grad_of = {"emb": "d_emb", "l0": "d_l0", "l1": "dw_l1", "head": "d_head"}
    nodes += [(f"g_{w}", w, [grad_of[w]], "grad", True, w) for w in _WEIGHTS]
    nodes += [(f"a_{w}", None if w == "l0" else w, [f"g_{w}", f"p_{w}"], "apply", True, w) for w in _WEIGHTS]
    if perm is not None:
        nodes = [nodes[i] for i in perm]
    idx = {v[0]: i for i, v in enumerate(nodes)}
    src = [idx[u] for v in nodes for u in v[2]]
    dst = [idx[v[0]] for v in nodes for _ in v[2]]
    groups = {w: i for i, w in enumerate(_WEIGHTS)}
    return OpGraph(ids=[v[0] for v in nodes], kinds=("gpu",), compute=[[1.0]] * len(nodes),
                   memory=[0] * len(nodes), src=src, dst=dst, layers=[v[1] for v in nodes],
                   roles=[v[3] for v in nodes], backward=[v[4] for v in nodes],
                   colocation=[-1 if v[5] is None else groups[v[5]] for v in nodes],
                   colocation_labels=_WEIGHTS)


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_layer_split_on_module_names(seed):
    from dnnplace.heuristics.baselines import layer_split

    perm = None if seed is None else np.random.default_rng(seed).permutation(27)
    g = _string_layer_graph(perm)
    if seed is not None:
        assert not (g.src < g.dst).all()  # the node order is not topological: level order used
    for k, want in ((2, {"emb": 0, "l0": 0, "l1": 1, "head": 1}), (4, {"emb": 0, "l0": 1, "l1": 2, "head": 3})):
        p = layer_split(g, Cluster.single_host(k, with_cpu=False)).to_mapping()
        dev = {v: int(d.removeprefix("gpu")) for v, d in p.items()}
        for w, d in want.items():  # each weighted layer, its forward, backward, param, grad, apply
            assert {dev[v] for v in (w, f"p_{w}", f"g_{w}", f"a_{w}")} == {d}
        assert dev["d_emb"] == want["emb"] and dev["d_l0"] == want["l0"] and dev["d_head"] == want["head"]
        assert dev["in"] == dev["drop"] == want["emb"]  # source / non-layer label: the layer it feeds / follows
        assert dev["add"] == want["l0"]  # unlabelled: its deepest forward predecessor
        assert dev["loss"] == dev["d_loss"] == want["head"]
        assert dev["d_l1"] == want["l1"]  # unlabelled backward: the forward layer it differentiates
        assert dev["d_add"] == want["l0"]  # non-layer label, backward: its forward input "add"
        assert dev["dw_l1"] == want["l1"]  # ... unless it feeds a later layer's gradient


def test_layer_split_on_a_captured_rnnlm():
    from dnnplace.heuristics.baselines import _layer_ranks, layer_split

    g = load_instance(REPO / "graphs/workloads/captured/rnnlm-2x2048.json").graph
    rank, n_layers = _layer_ranks(g)
    order = sorted({(int(r), g.layers[i]) for i, r in enumerate(rank) if r >= 0})
    assert [lay for _, lay in order] == ["embed", "layers.0.cell", "layers.1.cell", "softmax"] and n_layers == 4
    for k in (2, 4):
        dev = layer_split(g, Cluster.single_host(k, with_cpu=False)).device
        lay_dev = {lay: sorted(set(dev[[i for i in range(g.n) if g.layers[i] == lay]].tolist())) for _, lay in order}
        assert list(lay_dev.values()) == ([[0], [0], [1], [1]] if k == 2 else [[0], [1], [2], [3]])
        # every device a contiguous range of layers; colocation groups whole
        assert np.all(np.diff([d for (d,) in lay_dev.values()]) >= 0)
        if k == 4:  # the two LSTM layers, forward and backward, hold the same memory and work
            mem = np.bincount(dev, weights=g.memory, minlength=4)
            work = np.bincount(dev, weights=g.compute[:, 0], minlength=4)
            assert mem[1] == pytest.approx(mem[2], rel=1e-12) and work[1] == pytest.approx(work[2], rel=1e-9)
        groups = g.colocation[g.colocation >= 0]
        assert len(groups) == 33 and all(len(set(dev[g.colocation == c].tolist())) == 1 for c in set(groups.tolist()))


def test_layer_split_needs_layers():
    from dnnplace.graphs.errors import InputError
    from dnnplace.heuristics.baselines import layer_split

    g = OpGraph(ids=[0, 1], kinds=("gpu",), compute=[[1.0]] * 2, memory=[0, 0], src=[0], dst=[1], layers=[None, ""])
    with pytest.raises(InputError, match="no layer ids"):
        layer_split(g, Cluster.single_host(2, with_cpu=False))
