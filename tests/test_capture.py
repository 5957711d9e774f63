"""Capture of PyTorch models (dnnplace.pytorch.capture): FLOPs equal PyTorch's own counter,
views merged, storage bytes, roles and colocation, training structure, solvable graphs,
tiling sizes, link fits and measured CPU costs."""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1":
    import torch  # CI installs the extra: a missing torch must fail, not skip
else:
    torch = pytest.importorskip("torch")

from dnnplace.graphs.errors import InputError  # noqa: E402
from dnnplace.graphs.io.native import instance_from_native, instance_to_native  # noqa: E402
from dnnplace.pytorch.capture import capture  # noqa: E402
from dnnplace.pytorch.capture.costs import Measured, cost_model  # noqa: E402
from dnnplace.pytorch.capture.fx import trace  # noqa: E402
from dnnplace.pytorch.capture.links import fit_profile  # noqa: E402
from dnnplace.pytorch.capture.tiling import Block, capture_block, tile  # noqa: E402


class Tiny(torch.nn.Module):
    """conv -> bn -> relu -> flatten (a view) -> linear; an expand view in the loss."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def tiny(device="meta"):
    with torch.device(device):
        torch.manual_seed(0)
        return Tiny(), (torch.randn(2, 3, 8, 8),)


def loss_fn(out, x):
    return torch.nn.functional.cross_entropy(out, torch.zeros(out.shape[0], dtype=torch.long, device=out.device))


@pytest.fixture(scope="module")
def tiny_graph():
    m, x = tiny()
    return capture(m, x, loss_fn, name="tiny").graph


def torch_flops(model, inputs, training=True):
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        out = model(*inputs)
        if training:
            loss_fn(out, *inputs).backward()
    return fc.get_total_flops()


def test_flops_equal_flop_counter_mode():
    m, x = tiny()
    cap = trace(m, x, loss_fn)
    cost_model("roofline:v100").times(cap)
    assert cap.meta["flops"] == torch_flops(m, x) > 0
    cap = trace(m, x, loss_fn, training=False)
    cost_model("roofline:v100").times(cap)
    assert cap.meta["flops"] == torch_flops(m.eval(), x, training=False) > 0


def test_views_and_getitem_merged(tiny_graph):
    views = {"view", "t", "expand", "detach", "getitem", "alias", "permute", "_unsafe_view", "transpose"}
    assert not views & set(tiny_graph.op_types)
    assert "convolution" in tiny_graph.op_types and "convolution_backward" in tiny_graph.op_types


def test_bytes_use_storage_size(tiny_graph):
    g = tiny_graph
    i = g.index_of("convolution")
    assert g.output_bytes[i] == 2 * 4 * 8 * 8 * 4  # float32 (2, 4, 8, 8)
    w = g.index_of("param:conv.weight")
    assert g.persistent_bytes[w] == 4 * 3 * 3 * 3 * 4 and g.output_bytes[w] == 0
    # the loss's backward seed is an expanded scalar: its edge bytes are its storage (4 B),
    # never the logical size of the expanded (2, 10) view
    assert g.edge_bytes.max() <= max(g.output_bytes.max(), g.persistent_bytes.max())
    from dnnplace.pytorch.capture.ops import storage_bytes
    big = torch.empty(1, device="meta").expand(1000, 1000)
    assert storage_bytes(big) == 4


def test_roles_and_param_grad_colocation(tiny_graph):
    g = tiny_graph
    roles = np.array(g.roles)
    params = np.flatnonzero(roles == "param")
    assert len(params) == 6 and (roles == "apply").sum() == 6 and (roles == "grad").sum() >= 3
    for p in params:
        a = g.index_of("apply:" + g.ids[p].split(":", 1)[1])
        assert g.colocation[p] >= 0 and g.colocation[a] == g.colocation[p]
        grads = [u for u in g.predecessors(a) if g.roles[u] == "grad"]
        assert len(grads) == 1 and g.colocation[grads[0]] == g.colocation[p]
        assert g.persistent_bytes[a] == 2 * g.persistent_bytes[p]  # Adam state
    scaled = dict(zip(zip(g.src.tolist(), g.dst.tolist()), g.edge_batch_scaled.tolist()))
    assert not any(scaled[(p, int(v))] for p in params for v in g.successors(p))


def test_training_graph_has_backward_and_loss(tiny_graph):
    g = tiny_graph
    loss = g.index_of(g.meta["loss"])
    assert g.op_types[loss] == "nll_loss_forward" and not g.backward[loss]
    assert g.backward.sum() > g.n / 3
    assert g.layers[g.index_of("convolution")] == "conv"
    assert g.layers[g.index_of("convolution_backward")] == "conv"
    assert g.meta["cost"]["model"] == "roofline:v100"


def test_graph_round_trips_and_solves(tiny_graph):
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.registry import SolveRequest, solve
    doc = instance_to_native(Instance(tiny_graph))
    g2 = instance_from_native(doc).graph
    assert g2.roles == tiny_graph.roles and g2.op_types == tiny_graph.op_types
    assert g2.layers == tiny_graph.layers
    assert np.array_equal(g2.edge_batch_scaled, tiny_graph.edge_batch_scaled)
    assert np.array_equal(g2.backward, tiny_graph.backward)
    inst = Instance(g2, cluster_preset("single-host-2-nvlink", g2))
    res = solve(inst, "heft", SolveRequest(problem="makespan"))
    assert res.status in ("feasible", "optimal") and res.objective > 0
    assert res.objective >= tiny_graph.compute[:, 0].sum() / 2 - 1e-9


def test_inference_graph_has_no_backward():
    m, x = tiny()
    g = capture(m, x, training=False, name="inf").graph
    assert not g.backward.any() and "apply" not in g.roles and "grad" not in g.roles


def test_export_failure_names_op():
    class Bad(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow does not export
                return x * 2
            return x

    with pytest.raises(InputError, match="does not export"):
        capture(Bad(), (torch.randn(3),), training=False)


def test_tiling_repeats_block_exactly():
    lin = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())
    with torch.device("meta"):
        lin = lin.to("meta")
        x = torch.randn(4, 16)
    b = capture_block(lin, (x,), name="mlp")
    assert len(b.x) == len(b.y) == len(b.gx) == 1 and b.gx[0] >= 0
    for reps in (1, 3, 50):
        g = tile(b, reps)
        assert g.n == reps * len(b.body) + 2  # one input node, one seed node
        assert g.meta["tiled"]["flops"] == reps * b.flops
        assert np.isclose(g.compute.sum(), reps * b.graph.compute[b.body].sum())
        assert g.topo_order.size == g.n  # acyclic
    # hand-made block: forward f and backward b chain across tiles
    from dnnplace.graphs.graph import OpGraph
    h = OpGraph(ids=["x", "g", "f", "b"], kinds=("gpu",), compute=np.ones((4, 1)), memory=np.zeros(4),
                src=[0, 1, 0], dst=[2, 3, 3], backward=[False, False, False, True])
    t = tile(Block(h, x=(0,), g=(1,), y=(2,), gx=(3,)), 3)
    edges = {(t.ids[s], t.ids[d]) for s, d in zip(t.src, t.dst)}
    assert ("t0/f", "t1/f") in edges and ("t2/b", "t1/b") in edges and ("t1/f", "t2/b") in edges
    assert ("seed/t2/g0", "t2/b") in edges and ("input/t0/x0", "t0/f") in edges


def test_link_fit_recovers_known_parameters():
    rng = np.random.default_rng(0)
    sizes = np.geomspace(1e3, 1e8, 12)
    checked = 0
    for beta0, bw in ((5e-6, 12e9), (2e-5, 25e9), (1e-6, 300e9)):
        secs = (beta0 + sizes / bw) * (1 + 0.01 * rng.standard_normal(sizes.size))
        p = fit_profile("x", sizes, secs)
        assert abs(p.fit.beta0 - beta0) / beta0 < 0.05
        assert abs(1 / p.fit.beta1 - bw) / bw < 0.05
        assert np.abs(p.residuals).max() < 0.05
        checked += 1
    assert checked == 3


def test_two_cost_models_give_two_columns():
    """``roofline:h100+measured:cpu``: one compute column per kind, each equal to
    the single-model capture's column; the kinds must differ."""
    from dnnplace.pytorch.capture.costs import SPECS, Roofline, cost_models
    m, x = tiny()
    both = capture(m, x, loss_fn, cost="roofline:h100+measured:cpu", name="tiny").graph
    assert both.kinds == ("gpu", "cpu") and both.compute.shape == (both.n, 2)
    alone = capture(m, x, loss_fn, cost="roofline:h100", name="tiny").graph
    assert np.array_equal(both.compute[:, 0], alone.compute[:, 0])
    assert both.compute[both.index_of("convolution"), 1] > 0
    assert set(both.meta["cost"]["columns"]) == {"gpu", "cpu"}
    assert [c.kind for c in cost_models(Roofline(SPECS["h100"], kind="cpu"))] == ["cpu"]
    with pytest.raises(InputError, match="two columns of kind 'gpu'"):
        cost_models("roofline:v100+measured:cuda")


def test_measured_costs_on_cpu(tmp_path):
    m, x = tiny()
    cm = Measured(device="cpu", repeats=2, cache_dir=str(tmp_path))
    g = capture(m, x, loss_fn, cost=cm, name="tiny").graph
    assert g.meta["cost"]["model"] == "measured" and not g.meta["cost"]["hit"]
    conv = g.index_of("convolution")
    assert g.compute[conv, 0] > 0
    assert np.all(g.compute[[i for i, r in enumerate(g.roles) if r == "param"], 0] == 0)
    # the cached profile is reused
    cm2 = Measured(device="cpu", repeats=2, cache_dir=str(tmp_path))
    g2 = capture(m, x, loss_fn, cost=cm2, name="tiny").graph
    assert g2.meta["cost"]["hit"] and np.array_equal(g2.compute, g.compute)
    # calibrated: per-op efficiencies from the cached run, applied to the V100 roofline
    from dnnplace.pytorch.capture.costs import SPECS, Calibrated
    cal = Calibrated(SPECS["v100"], Measured(device="cpu", cache_dir=str(tmp_path), repeats=2))
    g3 = capture(m, x, loss_fn, cost=cal, name="tiny").graph
    assert g3.meta["cost"]["model"] == "calibrated:v100" and "convolution" in g3.meta["cost"]["efficiency"]
