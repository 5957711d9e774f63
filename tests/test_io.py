"""Round trips of every reader/writer pair, and the expert splits of Tarnawski et al."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dnnplace.graphs.cluster import Cluster
from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import random_layered_dag
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance, load_placement, read_json, save_instance, write_json
from dnnplace.graphs.io.native import instance_from_native, instance_to_native
from dnnplace.graphs.io.netx import from_networkx, to_networkx
from dnnplace.graphs.io.tarnawski import instance_to_tarnawski


def input_files(root):
    files = sorted(root.glob("*-inputs/*/*.json"))
    assert len(files) == 24, f"expected the 24 bundled Tarnawski inputs under {root}, found {len(files)}"
    return files


def assert_same_graph(a: OpGraph, b: OpGraph, *, labels: bool = True) -> None:
    assert [str(x) for x in a.ids] == [str(x) for x in b.ids]
    assert a.kinds == b.kinds
    np.testing.assert_array_equal(a.compute, b.compute)  # NaN == NaN here
    for key in ("memory", "src", "dst", "edge_bytes", "edge_cost", "edge_output", "persistent_bytes",
                "output_bytes", "backward"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    lab = [None if c < 0 else a.colocation_labels[c] for c in a.colocation]
    lbb = [None if c < 0 else b.colocation_labels[c] for c in b.colocation]
    assert lab == lbb
    if labels:
        np.testing.assert_array_equal(a.colocation, b.colocation)
    assert a.names == b.names and a.layers == b.layers and a.op_types == b.op_types


def assert_same_cluster(a: Cluster, b: Cluster) -> None:
    assert a.devices == b.devices and a.ports == b.ports
    for key in ("beta0", "beta1", "cost_factor"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert a.meta == b.meta


# ---------------------------------------------------------------------------- Tarnawski
def test_tarnawski_round_trip_every_bundled_input(tarnawski_dir, tmp_path):
    """read -> instance_to_tarnawski -> the same document, down to 0 vs 0.0 and key order;
    written to disk and read again -> the same arrays."""
    for path in input_files(tarnawski_dir):
        doc = read_json(path)
        inst = load_instance(path)
        back = instance_to_tarnawski(inst)
        assert json.dumps(back) == json.dumps(doc), path
        out = save_instance(inst, tmp_path / path.name, fmt="tarnawski")
        assert json.dumps(read_json(out)) == json.dumps(doc), path
        again = load_instance(out)
        assert_same_graph(inst.graph, again.graph)
        assert_same_cluster(inst.cluster, again.cluster)


def test_tarnawski_instance_fields(tarnawski_dir):
    inst = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_training.json")
    g, cl = inst.graph, inst.cluster
    assert (g.n, g.m, g.kinds) == (64, 110, ("acc", "cpu"))
    assert g.is_training and g.backward.sum() == 32
    assert cl.meta["device_limit"] == {"acc": 6, "cpu": 1}
    assert cl.devices_of_kind("acc").size == 6 and cl.devices_of_kind("cpu").size == 1


# ---------------------------------------------------------------------------- native
def test_native_columnar_round_trip_of_a_tarnawski_instance(tarnawski_dir, tmp_path):
    inst = load_instance(tarnawski_dir / "throughput-inputs/OperatorGraphs/bert_l-3_training.json")
    out = save_instance(inst, tmp_path / "g.json")
    doc = read_json(out)
    assert doc["format"] == "dnnplace.graph/1" and isinstance(doc["nodes"], dict)
    again = load_instance(out)
    assert_same_graph(inst.graph, again.graph)
    assert_same_cluster(inst.cluster, again.cluster)


def test_native_columnar_round_trip_with_dynamic_memory_fields(tmp_path):
    g = random_layered_dag(300, seed=4, training=True, unsupported_frac=0.1)
    assert g.edge_output.max() >= 2  # a gradient node's outputs are numbered
    inst = Instance(g, Cluster.single_host(2, gpu_memory=1e12))
    again = load_instance(save_instance(inst, tmp_path / "g.json"))
    assert_same_graph(g, again.graph)
    assert_same_cluster(inst.cluster, again.cluster)
    assert again.graph.meta == g.meta  # generator record survives


def test_native_records_form(tmp_path):
    #   a --> b --> c     (b runs on the CPU only; c has no explicit edge cost)
    doc = {"format": "dnnplace.graph/1", "name": "tiny", "unit": "ms",
           "nodes": [{"id": "a", "compute": {"gpu": 1.0, "cpu": 4.0}, "memory": 10, "colocation": "g1"},
                     {"id": "b", "compute": {"cpu": 2.0}, "memory": 20, "output_bytes": 8, "backward": True},
                     {"id": "c", "compute": {"gpu": 0.5, "cpu": 1.5}, "memory": 0, "colocation": "g1"}],
           "edges": [{"src": "a", "dst": "b", "bytes": 4096, "cost": 0.25}, {"src": "b", "dst": "c"}],
           "cluster": {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 100}, {"name": "cpu0", "kind": "cpu"}],
                       "links": [{"src": "gpu0", "dst": "cpu0", "beta0": 0.01, "beta1": 1e-6}]}}
    path = write_json(tmp_path / "tiny.json", doc)
    inst = load_instance(path)
    g = inst.graph
    assert g.ids == ("a", "b", "c") and g.kinds == ("gpu", "cpu")
    assert math.isnan(g.compute[1, 0]) and g.compute[1, 1] == 2.0
    assert g.memory.tolist() == [10, 20, 0] and g.output_bytes.tolist() == [0, 8, 0]
    assert g.backward.tolist() == [False, True, False]
    assert g.colocation[0] == g.colocation[2] >= 0 and g.colocation[1] == -1
    assert g.edge_bytes.tolist() == [4096, 0] and g.edge_cost[0] == 0.25 and math.isnan(g.edge_cost[1])
    assert inst.cluster.beta0[0, 1] == 0.01 and inst.cluster.beta0[1, 0] == 0.0
    assert math.isinf(inst.cluster.memory[1])
    # records in -> columns out -> same instance
    again = instance_from_native(json.loads(json.dumps(instance_to_native(inst))))
    assert_same_graph(g, again.graph)
    assert_same_cluster(inst.cluster, again.cluster)


def test_edge_outputs_and_op_overheads_round_trip():
    #   a --> b, a --> c carry a's output 0, a --> d its output 1; every gpu op costs 0.5
    #   more (cluster default), the cpu's op 0.25 (its own field)
    doc = {"format": "dnnplace.graph/1",
           "nodes": [{"id": v, "compute": {"gpu": 1, "cpu": 2}, "memory": 0} for v in "abcd"],
           "edges": [{"src": "a", "dst": "b"}, {"src": "a", "dst": "c", "output": 0},
                     {"src": "a", "dst": "d", "output": 1}],
           "cluster": {"op_overhead": 0.5, "devices": [{"name": "gpu0", "kind": "gpu"},
                                                       {"name": "cpu0", "kind": "cpu", "op_overhead": 0.25}]}}
    inst = instance_from_native(doc)
    assert inst.graph.edge_output.tolist() == [0, 0, 1]
    assert inst.cluster.op_overhead.tolist() == [0.5, 0.25]
    assert inst.cluster.compute_matrix(inst.graph)[0].tolist() == [1.5, 2.25]
    out = instance_to_native(inst)
    assert out["edges"]["output"] == [0, 0, 1]
    assert [d.get("op_overhead") for d in out["cluster"]["devices"]] == [0.5, 0.25]
    again = instance_from_native(json.loads(json.dumps(out)))
    assert_same_graph(inst.graph, again.graph)
    assert_same_cluster(inst.cluster, again.cluster)
    # absent when zero, so existing files are written as before
    plain = instance_to_native(Instance(inst.graph.with_(edge_output=None), Cluster.single_host(1)))
    assert "output" not in plain["edges"] and all("op_overhead" not in d for d in plain["cluster"]["devices"])
    for bad in (-1, 1.5, "x"):
        doc["edges"][2]["output"] = bad
        with pytest.raises(InputError, match="field 'output' must be an integer >= 0"):
            instance_from_native(doc)


# ---------------------------------------------------------------------------- networkx
def test_networkx_round_trip():
    g = random_layered_dag(200, seed=7, training=True, unsupported_frac=0.2)
    dg = to_networkx(g)
    assert dg.number_of_nodes() == g.n and dg.number_of_edges() == g.m
    back = from_networkx(dg, name=g.name)
    # nodes keep their order; edges come back grouped by source, so compare as sets
    assert back.ids == g.ids
    np.testing.assert_array_equal(back.compute, g.compute)
    for key in ("memory", "persistent_bytes", "output_bytes", "backward"):
        np.testing.assert_array_equal(getattr(back, key), getattr(g, key), err_msg=key)
    assert back.layers == g.layers

    def edges(x):
        return {(int(s), int(d), float(b)) for s, d, b in zip(x.src, x.dst, x.edge_bytes, strict=True)}

    assert edges(back) == edges(g)
    lab = [None if c < 0 else g.colocation_labels[c] for c in g.colocation]
    assert [None if c < 0 else back.colocation_labels[c] for c in back.colocation] == lab


def test_networkx_round_trip_keeps_explicit_costs(tarnawski_dir):
    g = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/gnmt_training.json").graph
    back = from_networkx(to_networkx(g))
    def edges(x):
        return {(int(s), int(d)): (b, c) for s, d, b, c in zip(x.src, x.dst, x.edge_bytes, x.edge_cost, strict=True)}

    assert edges(back) == edges(g)
    assert back.names == g.names and back.backward.tolist() == g.backward.tolist()


# ---------------------------------------------------------------------------- expert splits
SPLITS = [  # (split, input it is read onto); the CNN training graphs reuse the inference split
    ("bert24_inference_expert.json", "throughput-inputs/LayerGraphs/bert24_inference.json"),
    ("bert24_training_expert.json", "throughput-inputs/LayerGraphs/bert24_training.json"),
    ("gnmt_inference_expert.json", "throughput-inputs/LayerGraphs/gnmt_inference.json"),
    ("gnmt_training_expert.json", "throughput-inputs/LayerGraphs/gnmt_training.json"),
    ("resnet50_inference_expert.json", "throughput-inputs/LayerGraphs/resnet50_inference.json"),
    ("resnet50_inference_expert.json", "throughput-inputs/LayerGraphs/resnet50_training.json"),
    ("inceptionv3_inference_expert.json", "throughput-inputs/LayerGraphs/inceptionv3_inference.json"),
    ("inceptionv3_inference_expert.json", "throughput-inputs/LayerGraphs/inceptionv3_training.json"),
]


@pytest.mark.parametrize(("split", "graph"), SPLITS, ids=[g.split("/")[-1] for _, g in SPLITS])
def test_expert_split(tarnawski_dir, split, graph):
    inst = load_instance(tarnawski_dir / graph)
    doc = read_json(tarnawski_dir / "human-experts" / split)
    p = load_placement(tarnawski_dir / "human-experts" / split, inst)
    g, names = inst.graph, p.cluster.names
    # every node the split names sits where the split says
    for prefix, key in (("acc", "fpgas"), ("cpu", "cpus")):
        for s, slot in enumerate(doc.get(key, [])):
            for node in slot["nodes"]:
                assert names[p.device[g.index_of(node)]] == f"{prefix}{s}"
    named = {str(v) for key in ("fpgas", "cpus") for slot in doc.get(key, []) for v in slot["nodes"]}
    if "training" in graph and "inference" in split:
        # the training extension: the split covers the forward nodes only, and every
        # backward node lands on its forward partner's device (same colorClass)
        assert named == {str(g.ids[i]) for i in np.flatnonzero(~g.backward)}
        for i in np.flatnonzero(g.backward):
            c = g.colocation[i]
            partners = np.flatnonzero((g.colocation == c) & ~g.backward)
            assert c >= 0 and partners.size >= 1
            assert p.device[i] == p.device[partners[0]], g.ids[i]
    else:
        assert named == {str(v) for v in g.ids}


def test_split_with_more_fpgas_than_allowed(tarnawski_dir):
    """BERT-24's expert split uses 6 accelerators; the latency instance allows 5."""
    inst = load_instance(tarnawski_dir / "latency-inputs/LayerGraphs/bert24_inference.json")
    assert inst.cluster.meta["device_limit"]["acc"] == 5
    p = load_placement(tarnawski_dir / "human-experts/bert24_inference_expert.json", inst)
    assert p.cluster.devices_of_kind("acc").size == 6
    assert p.cluster.meta["device_limit"]["acc"] == 5
    assert {p.cluster.names[d] for d in p.used_devices()} >= {f"acc{i}" for i in range(6)}
    assert p.cluster.memory[0] == inst.cluster.memory[0]
