"""Forward-backward colocation (TensorFlow's colocate_gradients_with_ops)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dnnplace.data import workloads_dir
from dnnplace.graphs import Cluster, OpGraph
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.io import load_instance
from dnnplace.graphs.transforms.colocate import colocate_gradients, gradient_partners
from dnnplace.heuristics.celeritas import celeritas


def _resnet() -> OpGraph:
    return load_instance(workloads_dir() / "captured" / "resnet-50.json").graph


def test_partners_of_a_hand_built_layer_graph():
    # conv (one forward op in its layer: rule 2), bn (its backward reads the saved stats: rule 1),
    # a two-op gradient chain in "act" (rule 3 for the second op), and a free buffer update
    ids = ["w", "conv", "bn", "stats", "act", "loss", "act_b1", "act_b2", "bn_b", "conv_b", "w/apply", "buf"]
    edges = [("w", "conv"), ("conv", "bn"), ("conv", "stats"), ("bn", "act"), ("act", "loss"), ("loss", "act_b1"),
             ("act", "act_b1"), ("act_b1", "act_b2"), ("act_b2", "bn_b"), ("stats", "bn_b"), ("bn_b", "conv_b"),
             ("w", "conv_b"), ("conv_b", "w/apply"), ("w", "w/apply"), ("stats", "buf")]
    layers = ["conv", "conv", "bn", "bn", "act", "loss", "act", "act", "bn", "conv", "conv", "bn"]
    g = OpGraph.from_ids(ids, edges, kinds=["gpu"], compute=[[1.0]] * 12, memory=[1.0] * 12, layers=layers,
                         backward=[0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
                         roles=["param"] + ["compute"] * 8 + ["grad", "apply", "compute"],
                         colocation=[0] + [-1] * 8 + [0, 0, -1], colocation_labels=["conv.w"])
    p = gradient_partners(g)
    name = {i: x for i, x in enumerate(ids)}
    got = {name[b]: name[int(p[b])] for b in np.flatnonzero(p >= 0)}
    # bn's backward reads stats (the latest forward op of its layer it reads); buf reads stats too
    assert got == {"act_b1": "act", "act_b2": "act", "bn_b": "stats", "conv_b": "conv", "buf": "stats"}
    h = colocate_gradients(g)
    co = h.colocation
    ix = {x: i for i, x in enumerate(ids)}
    assert co[ix["conv"]] == co[ix["conv_b"]] == co[ix["w"]] == co[ix["w/apply"]] >= 0  # merged with w's group
    assert co[ix["act"]] == co[ix["act_b1"]] == co[ix["act_b2"]] >= 0
    assert co[ix["stats"]] == co[ix["bn_b"]] == co[ix["buf"]] >= 0 and co[ix["bn"]] == -1
    assert co[ix["loss"]] == -1 and h.meta["colocate_gradients"] == {"paired": 5, "free": 0, "groups": 3}
    with pytest.raises(InputError, match="layers"):
        gradient_partners(g.with_(layers=None))


def test_captured_resnet_every_gradient_op_joins_its_forward_op():
    g = _resnet()
    p = gradient_partners(g)
    roles = np.asarray(g.roles, dtype=object)
    bwd = g.backward & (roles != "apply")
    free = np.flatnonzero(bwd & (p < 0))
    # only the batch-norm buffer updates (num_batches_tracked: buffer, add_, empty) stay free
    assert {g.op_types[i] for i in free} == {"buffer", "add_", "empty"} and free.size == 159
    assert not g.backward[p[p >= 0]].any()  # partners are forward ops
    kinds = {(g.op_types[b], g.op_types[p[b]]) for b in np.flatnonzero(p >= 0)}
    assert {("convolution_backward", "convolution"), ("native_batch_norm_backward", "native_batch_norm"),
            ("threshold_backward", "relu_")} <= kinds
    h = colocate_gradients(g)
    old, new = g.colocation, h.colocation
    for c in np.unique(old[old >= 0]):  # old groups stay whole
        assert np.unique(new[old == c]).size == 1
    paired = np.flatnonzero(p >= 0)
    assert (new[paired] == new[p[paired]]).all() and (new[paired] >= 0).all()


def test_celeritas_fill_keeps_backward_ops_with_their_forward_ops():
    g = _resnet()
    cl = Cluster.single_host(4, interconnect="pcie", with_cpu=False, gpu_memory=0.35 * float(g.memory.sum()))
    p = gradient_partners(g)
    paired = np.flatnonzero(p >= 0)
    free = celeritas(g, cl).placement.device
    together = celeritas(colocate_gradients(g), cl).placement.device
    assert np.count_nonzero(free[paired] != free[p[paired]]) >= 10  # the fill separates them without colocation
    assert np.count_nonzero(together[paired] != together[p[paired]]) == 0
    assert np.unique(together).size >= 3  # the model still needs three GPUs


def test_celeritas_configs_use_colocation_compute_metis_and_one_memory_share():
    from dnnplace.experiments.celeritas import Config, _specs
    from dnnplace.experiments.instance_files import Variant

    cfg = Config.load("celeritas-table3")
    assert {m.gpu_share for m in cfg.models} == {0.35} and all(m.colocate_gradients for m in cfg.models)
    assert cfg.methods["Metis"] == cfg.methods["Metis (memory too)"] == "metis"
    v = Variant(stem="x", path=Path("x.json"), n=1, gpus=4)
    specs = _specs("table3", cfg, v)
    assert specs["Metis"].params == {"memory": False} and specs["Metis (memory too)"].params == {"memory": True}
    assert specs["Celeritas"].params == {}
