"""Every kind of bad input gets a one-line error that names the culprit."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from dnnplace.graphs.checks import check_instance
from dnnplace.graphs.cluster import Cluster, Device
from dnnplace.graphs.errors import CycleError, InfeasibleError, InputError
from dnnplace.graphs.graph import OpGraph
from dnnplace.graphs.instance import Instance
from dnnplace.graphs.io import load_instance, load_placement, read_json, write_json


def native(nodes, edges, cluster=None):
    doc = {"format": "dnnplace.graph/1", "name": "bad", "nodes": nodes, "edges": edges}
    if cluster is not None:
        doc["cluster"] = cluster
    return doc


def node(i, gpu=1.0, cpu=2.0, memory=0.0, **extra):
    comp = {k: v for k, v in (("gpu", gpu), ("cpu", cpu)) if v is not None}
    return {"id": i, "compute": comp, "memory": memory, **extra}


def load_doc(tmp_path, doc, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load_instance(path)


CLUSTER = {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 100}, {"name": "cpu0", "kind": "cpu"}]}


# ---------------------------------------------------------------------------- graph structure
def test_cycle_is_listed(tmp_path):
    #   s -> a -> b -> c -> a   (the cycle a, b, c)
    doc = native([node(x) for x in "sabc"],
                 [{"src": u, "dst": v} for u, v in ("sa", "ab", "bc", "ca")])
    with pytest.raises(CycleError, match=r"cycle: '(a|b|c)' -> '(a|b|c)' -> '(a|b|c)' -> '(a|b|c)'"):
        load_doc(tmp_path, doc)


def test_self_loop_is_a_cycle():
    with pytest.raises(CycleError, match="'x' -> 'x'"):
        OpGraph.from_ids(["x"], [("x", "x")], kinds=["gpu"], compute=[[1.0]], memory=[0])


def test_dangling_edge_id(tmp_path):
    doc = native([node("a"), node("b")], [{"src": "a", "dst": "zz"}])
    with pytest.raises(InputError, match="target 'zz' is not a node"):
        load_doc(tmp_path, doc)


def test_duplicate_node_ids(tmp_path):
    doc = native([node("a"), node("b"), node("a")], [])
    with pytest.raises(InputError, match="duplicate node id 'a'"):
        load_doc(tmp_path, doc)


def test_missing_compute_cost(tmp_path):
    doc = native([node("a"), node("b", gpu=None, cpu=None)], [])
    with pytest.raises(InputError, match=r"node 'b'.*no compute time for any device kind"):
        load_doc(tmp_path, doc)


def test_negative_compute_cost(tmp_path):
    doc = native([node("a"), node("b", cpu=-3.0)], [])
    with pytest.raises(InputError, match=r"node 'b'.*negative compute time -3.0 for kind 'cpu'"):
        load_doc(tmp_path, doc)


def test_missing_memory(tmp_path):
    doc = native([node("a"), {"id": "b", "compute": {"gpu": 1.0}}], [])
    with pytest.raises(InputError, match=r"node 'b': field 'memory' is missing"):
        load_doc(tmp_path, doc)


def test_nan_memory(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(native([node("a"), node("b", memory=float("nan"))], [])))  # JSON NaN
    with pytest.raises(InputError, match=r"node 'b': field 'memory' is missing or NaN"):
        load_instance(path)


def test_negative_size_in_graph():
    with pytest.raises(InputError, match=r"node 'b'.*'output_bytes' must be a finite number >= 0, got -1"):
        OpGraph(ids=["a", "b"], kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[], dst=[],
                output_bytes=[0, -1])


def test_tarnawski_nan_latency(tarnawski_dir, tmp_path):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    doc["nodes"][3]["cpuLatency"] = float("nan")
    with pytest.raises(InputError, match=rf"node {doc['nodes'][3]['id']!r}: field 'cpuLatency' must be a finite"):
        load_doc(tmp_path, doc)


def test_tarnawski_missing_latency(tarnawski_dir, tmp_path):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    del doc["nodes"][5]["cpuLatency"]
    with pytest.raises(InputError, match=rf"node {doc['nodes'][5]['id']!r}: missing field 'cpuLatency'"):
        load_doc(tmp_path, doc)


def test_tarnawski_negative_size(tarnawski_dir, tmp_path):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    doc["nodes"][2]["size"] = -5
    with pytest.raises(InputError, match=rf"node {doc['nodes'][2]['id']!r}: field 'size' must be >= 0"):
        load_doc(tmp_path, doc)


def test_edge_negative_bytes(tmp_path):
    doc = native([node("a"), node("b")], [{"src": "a", "dst": "b", "bytes": -8}])
    with pytest.raises(InputError, match=r"edge 'a'->'b': field 'bytes' must be a finite number >= 0, got -8"):
        load_doc(tmp_path, doc)


def test_edge_negative_cost(tmp_path):
    doc = native([node("a"), node("b")], [{"src": "a", "dst": "b", "cost": -0.5}])
    with pytest.raises(InputError, match=r"edge 'a'->'b': field 'cost' must be a finite number >= 0, got -0.5"):
        load_doc(tmp_path, doc)


def test_edge_nan_bytes_names_the_edge(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(native([node("a"), node("b")], [{"src": "a", "dst": "b", "bytes": float("nan")}])))
    with pytest.raises(InputError, match=r"edge #0 \('a'->'b'\): field 'bytes' is missing or NaN"):
        load_instance(path)


# ---------------------------------------------------------------------------- feasibility (checks.py)
def small_graph(memory=(10, 10, 10), gpu=(1.0, 1.0, 1.0), coloc=None):
    #   a -> b -> c
    return OpGraph(ids=["a", "b", "c"], kinds=["gpu", "cpu"],
                   compute=np.column_stack([gpu, [5.0, 5.0, 5.0]]), memory=list(memory),
                   src=[0, 1], dst=[1, 2], colocation=coloc, colocation_labels=["grp"] if coloc else ())


def gpus(*mem):
    return Cluster.from_links([Device(f"gpu{i}", "gpu", m) for i, m in enumerate(mem)])


def test_check_instance_passes():
    assert check_instance(small_graph(), gpus(20, 20)) is None


def test_node_no_device_supports():
    g = small_graph(gpu=(1.0, np.nan, 1.0))  # b runs on the CPU only
    with pytest.raises(InfeasibleError, match=r"node 'b' runs only on kinds \['cpu'\].*kinds \['gpu'\]"):
        check_instance(g, gpus(100))


def test_node_too_large_for_every_device():
    with pytest.raises(InfeasibleError, match=r"node 'c' needs 50 bytes.*\['gpu'\]: 30 bytes"):
        check_instance(small_graph(memory=(1, 1, 50)), gpus(30, 30))


def test_colocation_group_fits_no_device():
    g = small_graph(memory=(15, 15, 1), coloc=[0, 0, -1])
    with pytest.raises(InfeasibleError, match=r"colocation group 'grp' \(2 nodes: 'a', 'b'\) needs 30 bytes.*20 bytes"):
        check_instance(g, gpus(20, 20, 20))


def test_colocation_group_without_common_kind():
    # a runs on gpu and cpu, b on cpu only, c on gpu only; b and c must share a device
    g = OpGraph(ids=["a", "b", "c"], kinds=["gpu", "cpu"],
                compute=[[1.0, 2.0], [np.nan, 2.0], [1.0, np.nan]], memory=[0, 0, 0], src=[0, 0], dst=[1, 2],
                colocation=[-1, 0, 0], colocation_labels=["bc"])
    cl = Cluster.single_host(1)
    with pytest.raises(InfeasibleError, match=r"colocation group 'bc' .* no device kind that all its members support"):
        check_instance(g, cl)


def test_total_memory_larger_than_cluster():
    with pytest.raises(InfeasibleError, match=r"total memory 30 bytes exceeds .* 25 bytes by 5 bytes \(20.0% over\)"):
        check_instance(small_graph(), gpus(15, 10))


def test_total_memory_counts_only_allowed_devices(tarnawski_dir):
    inst = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    cap = inst.cluster.memory[0]
    g = inst.graph.with_(memory=np.full(inst.graph.n, cap / 8))  # 32 nodes: 4 accelerators' worth
    g = g.with_(compute=np.column_stack([np.nan_to_num(g.compute[:, 0], nan=1.0), g.compute[:, 1]]))
    check_instance(g, Cluster.tarnawski(6, 0, cap))
    # the same six accelerators, but the instance may use one of them only
    limited = Cluster.tarnawski(6, 0, cap)
    limited.meta["device_limit"] = {"acc": 1, "cpu": 0}
    with pytest.raises(InfeasibleError, match=r"exceeds .* by .* \(300.0% over\)"):
        check_instance(g, limited)


# ---------------------------------------------------------------------------- placements
@pytest.fixture
def tiny(tmp_path):
    return load_doc(tmp_path, native([node("a"), node("b")], [{"src": "a", "dst": "b"}], CLUSTER))


def test_placement_unknown_node(tiny, tmp_path):
    path = write_json(tmp_path / "p.json", {"placement": {"a": "gpu0", "b": "cpu0", "zz": "gpu0"}})
    with pytest.raises(InputError, match="unknown node 'zz'"):
        load_placement(path, tiny)


def test_placement_unknown_device(tiny, tmp_path):
    path = write_json(tmp_path / "p.json", {"a": "gpu0", "b": "tpu7"})
    with pytest.raises(InputError, match=r"unknown device 'tpu7'.*\['gpu0', 'cpu0'\]"):
        load_placement(path, tiny)


def test_placement_leaving_a_node_out(tiny, tmp_path):
    path = write_json(tmp_path / "p.json", {"a": "gpu0"})
    with pytest.raises(InputError, match=r"1 node\(s\) unplaced, e.g. \['b'\]"):
        load_placement(path, tiny)


def test_split_unknown_node(tarnawski_dir, tmp_path):
    inst = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    split = read_json(tarnawski_dir / "human-experts/bert24_inference_expert.json")
    split["fpgas"][0]["nodes"].append(987654)
    path = write_json(tmp_path / "split.json", split)
    with pytest.raises(InputError, match="unknown node 987654"):
        load_placement(path, inst)


# ---------------------------------------------------------------------------- files
def test_truncated_json(tmp_path, tarnawski_dir):
    text = (tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json").read_text()
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(InputError, match=r"cut.json: invalid JSON at line \d+ column \d+.*\(file truncated\?\)"):
        load_instance(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_instance(tmp_path / "nope.json")


@pytest.mark.parametrize("field", ["maxSizePerFPGA", "maxFPGAs", "maxCPUs", "edges"])
def test_tarnawski_missing_top_level_field(tarnawski_dir, tmp_path, field):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    del doc[field]
    with pytest.raises(InputError, match=f"missing top-level field '{field}'"):
        load_doc(tmp_path, doc)


def test_unknown_format(tmp_path):
    with pytest.raises(InputError, match="neither a native graph"):
        load_doc(tmp_path, {"hello": 1})


def test_write_json_parent_is_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(InputError, match="cannot write"):
        write_json(blocker / "out.json", {"a": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    assert blocker.read_text() == "not a directory"


def test_write_json_failure_keeps_old_file(tmp_path):
    path = write_json(tmp_path / "out.json", {"v": 1})
    with pytest.raises(TypeError):
        write_json(path, {"v": object()})  # not JSON-serialisable: fails mid-write
    assert read_json(path) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


def test_instance_without_cluster_cannot_take_a_placement(tmp_path):
    inst = Instance(OpGraph(ids=["a"], kinds=["gpu"], compute=[[1.0]], memory=[0], src=[], dst=[]))
    path = write_json(tmp_path / "p.json", {"a": "gpu0"})
    with pytest.raises(InputError, match="no cluster given"):
        load_placement(path, inst)


def test_doc_copy_is_untouched_by_loading(tarnawski_dir, tmp_path):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    before = copy.deepcopy(doc)
    from dnnplace.graphs.io.tarnawski import instance_from_tarnawski
    instance_from_tarnawski(doc)
    assert doc == before
