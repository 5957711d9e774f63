"""Every kind of bad input gets a one-line error that names the culprit."""

from __future__ import annotations

import copy
import gzip
import json
import re
import sys
from pathlib import Path

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


# ---------------------------------------------------------------------------- the command line
# Every kind of bad input in docs/bad-input.md: the command exits 2 with exactly the one
# line the table gives, nothing on stdout, no output file. The table and KINDS must agree
# (test_the_bad_input_table_in_the_docs_is_this_list), so the docs list what is tested.
DOCS_TABLE = Path(__file__).resolve().parents[1] / "docs" / "bad-input.md"
GOOD = native([node("a", cpu=None, memory=10), node("b", cpu=None, memory=10)],
              [{"src": "a", "dst": "b", "bytes": 100}],
              {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 1000},
                           {"name": "gpu1", "kind": "gpu", "memory": 1000}],
               "links": [{"src": "gpu0", "dst": "gpu1", "beta0": 0.01, "beta1": 1e-6}]})
GOOD_TEXT = json.dumps(GOOD)
SOLVE = ["solve", "g.json", "--problem", "makespan", "--method", "heft"]
CONFIG = 'name = "c"\nout_dir = "out"\n[grid]\ngraphs = "g.json"\nproblems = "makespan"\nmethods = "heft"\n'


def _tarnawski_text(tarnawski_dir, old: str, new: str) -> str:
    text = (tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json").read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _graph(old: str, new: str) -> str:
    assert GOOD_TEXT.count(old) == 1, old
    return GOOD_TEXT.replace(old, new)


def _config(line: str, methods: bool = True) -> str:
    return CONFIG.replace('methods = "heft"\n', line + "\n") if not methods else CONFIG + line + "\n"


DEV_MEM = '"memory": 1000}, {"name": "gpu1"'
NODE_MEM = '"memory": 10}, {"id": "b"'
# kind -> (argv, {file: text or bytes or callable(tarnawski_dir)}, the message after "dnnplace: error: ")
KINDS = {
    "config: a string where a boolean goes": (
        ["run", "c.toml"], {"c.toml": _config('congestion = "false"')},
        'c.toml: [grid]: congestion = "false": expected true or false (a TOML boolean, not a string), got a string'),
    "config: a number where a method goes": (
        ["run", "c.toml"], {"c.toml": _config("methods = 5", methods=False)},
        "c.toml: [grid]: methods = 5: expected a method name, got a number"),
    "config: a word where a seed goes": (
        ["run", "c.toml"], {"c.toml": _config('seed = "zero"')},
        'c.toml: [grid]: seed = "zero": expected a whole number from 0 to 2147483647, got a string'),
    "config: a boolean where a seed goes": (
        ["run", "c.toml"], {"c.toml": _config("seed = true")},
        "c.toml: [grid]: seed = true: expected a whole number from 0 to 2147483647, got a boolean"),
    "config: a seed past 32 bits": (
        ["run", "c.toml"], {"c.toml": _config(f"seed = {2 ** 64}")},
        "c.toml: [grid]: seed = 18446744073709551616: expected a whole number from 0 to 2147483647, got a number "
        "past the range"),
    "config: an unknown transform": (
        ["run", "c.toml"], {"c.toml": _config('transform = "nope"')},
        "c.toml: [grid]: transform = \"nope\": unknown graph transform; known: ['contract-calls', 'contract-layers']"),
    "`solve --transform nope`": (
        [*SOLVE, "--transform", "nope"], {"g.json": GOOD_TEXT},
        "unknown graph transform 'nope'; known: ['contract-calls', 'contract-layers']"),
    "config: a warm start that is neither a file nor a method": (
        ["run", "c.toml"], {"c.toml": _config('warm_start = "start.json"')},
        'c.toml: [grid]: warm_start = "start.json": no such file, nor a method name (see `dnnplace methods`)'),
    "config: gzip-compressed": (
        ["run", "c.toml"], {"c.toml": gzip.compress(CONFIG.encode(), mtime=0)},
        "c.toml: is a gzip-compressed file, not text; unpack it first (gunzip -c c.toml > unpacked.toml)"),
    "config: Latin-1 text": (
        ["run", "c.toml"], {"c.toml": (CONFIG + 'description = "caf\u00e9"\n').encode("latin-1")},
        "c.toml: not UTF-8 text (byte 0xe9 at line 7, offset 109); save it as UTF-8 (a Latin-1 file: iconv -f "
        "latin1 -t utf-8 c.toml)"),
    "config: a string where the solver table goes": (
        ["run", "c.toml"], {"c.toml": CONFIG.replace("[grid]\n", '[defaults]\nsolver = "highs"\n[grid]\n')},
        'c.toml: [defaults]: solver = "highs": expected a table of solver settings (e.g. [grid.solver] with solver '
        '= "highs", time_limit = 60), got a string'),
    "config: a string where the params table goes": (
        ["run", "c.toml"], {"c.toml": CONFIG.replace("[grid]\n", '[defaults]\nparams = "x"\n[grid]\n')},
        "c.toml: [defaults]: params = \"x\": expected a table of the method's options (e.g. [grid.params] with "
        "coarsen_to = 100), got a string"),
    "config: a method option as a string": (
        ["run", "c.toml"], {"c.toml": _config('methods = "pesto"\n[grid.params]\ncoarsen_to = "100"', methods=False)},
        'c.toml: [grid.params]: coarsen_to = "100": expected a whole number (a TOML number, not a string), got a '
        "string"),
    "config: an empty name": (
        ["run", "c.toml"], {"c.toml": CONFIG.replace('name = "c"', 'name = ""')},
        "c.toml: name = \"\": must be a non-empty word of letters, digits, '.', '_' or '-' (it names the results "
        "folder)"),
    "graph: gzip-compressed": (
        SOLVE, {"g.json": gzip.compress(GOOD_TEXT.encode(), mtime=0)},
        "g.json: is a gzip-compressed file, not text; unpack it first (gunzip -c g.json > unpacked.json)"),
    "graph: Latin-1 text": (
        SOLVE, {"g.json": GOOD_TEXT.replace('"bad"', '"caf\u00e9"').encode("latin-1")},
        "g.json: not UTF-8 text (byte 0xe9 at line 1, offset 43); save it as UTF-8 (a Latin-1 file: iconv -f "
        "latin1 -t utf-8 g.json)"),
    "graph: nested 100,000 deep": (
        SOLVE, {"g.json": "[" * 100_000 + "]" * 100_000},
        f"g.json: JSON nested too deeply (arrays or objects inside each other more than about "
        f"{sys.getrecursionlimit()} levels)"),
    "graph: a node memory of 10**400": (
        SOLVE, {"g.json": _graph(NODE_MEM, NODE_MEM.replace("10", str(10 ** 400)))},
        "node 'a': field 'memory' is a 401-digit number, too large for a 64-bit float"),
    "graph: a 5000-digit number": (
        SOLVE, {"g.json": _graph(NODE_MEM, NODE_MEM.replace("10", "1" * 5000))},
        "g.json: an absurd number: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 "
        "digits"),
    "graph: a node memory as a string": (
        SOLVE, {"g.json": _graph(NODE_MEM, NODE_MEM.replace("10", '"16GB"'))},
        "node 'a': field 'memory' is not a number: '16GB'"),
    "graph: a bare number where compute times go": (
        SOLVE, {"g.json": _graph('{"id": "a", "compute": {"gpu": 1.0}', '{"id": "a", "compute": 1.0')},
        "node 'a': field 'compute' must map device kinds to times, e.g. {\"gpu\": 1.0} (null for a kind it cannot "
        "run on), got a number 1.0"),
    "graph: an unknown format version": (
        SOLVE, {"g.json": _graph('"dnnplace.graph/1"', '"dnnplace.graph/2"')},
        "g.json: format 'dnnplace.graph/2' is not one this dnnplace reads (it reads 'dnnplace.graph/1'); convert "
        "the file, or use the dnnplace that wrote it"),
    "graph: a string where a boolean goes": (
        SOLVE, {"g.json": _graph(NODE_MEM, NODE_MEM.replace("10}", '10, "backward": "yes"}'))},
        "node 'a': field 'backward' must be true or false, got a string 'yes'"),
    "graph: a compute time of 1e308": (
        SOLVE, {"g.json": _graph('{"id": "a", "compute": {"gpu": 1.0}', '{"id": "a", "compute": {"gpu": 1e308}')},
        "node 'a': field 'compute.gpu' is 1e+308, past the largest value accepted (1e+300: sums over the graph must "
        "stay finite)"),
    "cluster: a device memory as a string": (
        SOLVE, {"g.json": _graph(DEV_MEM, DEV_MEM.replace("1000", '"16GB"'))},
        "cluster device 'gpu0': memory must be a number of bytes (e.g. 16e9; null for unbounded), got a string "
        "'16GB'"),
    "cluster: a device memory of 10**400": (
        SOLVE, {"g.json": _graph(DEV_MEM, DEV_MEM.replace("1000", str(10 ** 400)))},
        "cluster device 'gpu0': memory is a 401-digit number, too large for a 64-bit float"),
    "cluster: an infinite device memory (1e999)": (
        SOLVE, {"g.json": _graph(DEV_MEM, DEV_MEM.replace("1000", "1e999"))},
        "cluster device 'gpu0': memory must be a finite number of bytes (e.g. 16e9; null for unbounded), got inf"),
    "cluster: a boolean device memory": (
        SOLVE, {"g.json": _graph(DEV_MEM, DEV_MEM.replace("1000", "true"))},
        "cluster device 'gpu0': memory must be a number of bytes (e.g. 16e9; null for unbounded), got a bool True"),
    "cluster: a speed as a string": (
        SOLVE, {"g.json": _graph(DEV_MEM, DEV_MEM.replace("1000}", '1000, "speed": "fast"}'))},
        "cluster device 'gpu0': speed must be a number, got a string 'fast'"),
    "cluster: an infinite link cost (1e999)": (
        SOLVE, {"g.json": _graph('"beta1": 1e-06', '"beta1": 1e999')},
        "cluster link gpu0->gpu1: beta1 must be a finite number, got inf"),
    "cluster: an infinite link cost (Infinity)": (
        SOLVE, {"g.json": _graph('"beta0": 0.01', '"beta0": Infinity')},
        "cluster link gpu0->gpu1: beta0 must be a finite number, got inf"),
    "cluster: an infinite link in a matrix": (
        SOLVE, {"g.json": _graph('"links": [{"src": "gpu0", "dst": "gpu1", "beta0": 0.01, "beta1": 1e-06}]',
                                 '"beta0": [[0, 0.01], [0.01, 0]], "beta1": [[0, 1e-06], [1e999, 0]]')},
        "cluster link gpu1->gpu0: beta1 must be a finite number, got inf"),
    "cluster: a link cost as a string": (
        SOLVE, {"g.json": _graph('"beta1": 1e-06', '"beta1": "1us"')},
        "cluster link gpu0->gpu1: beta1 must be a number, got a string '1us'"),
    "cluster: a preset of 99999 GPUs": (
        SOLVE + ["--cluster", "single-host-99999-nvlink"], {"g.json": GOOD_TEXT},
        "cluster preset 'single-host-99999-nvlink' (99999 GPUs and cpu0): 100000 devices; at most 4096 devices are "
        "supported"),
    "cluster: a preset past the device cap": (
        SOLVE + ["--cluster", "local-cpu-5000"], {"g.json": GOOD_TEXT},
        "cluster preset 'local-cpu-5000': 5000 devices; at most 4096 devices are supported"),
    "cluster: a preset memory of 1e999GB": (
        SOLVE + ["--cluster", "single-host-2-nvlink-1e999GB"], {"g.json": GOOD_TEXT},
        "cluster preset 'single-host-2-nvlink-1e999GB': cannot read '1e999GB' as a byte count: 1e999GB is past the "
        "64-bit float range (write inf for unbounded memory)"),
    "Tarnawski input: maxSizePerFPGA of 10**400": (
        ["solve", "t.json", "--method", "greedy"],
        {"t.json": lambda d: _tarnawski_text(d, '"maxSizePerFPGA": 17185374208.0', f'"maxSizePerFPGA": {10 ** 400}')},
        "t.json: field 'maxSizePerFPGA' is a 401-digit number, too large for a 64-bit float"),
    "Tarnawski input: maxFPGAs of 10**400": (
        ["solve", "t.json", "--method", "greedy"],
        {"t.json": lambda d: _tarnawski_text(d, '"maxFPGAs": 6', f'"maxFPGAs": {10 ** 400}')},
        "t.json: maxFPGAs is a 401-digit number; at most 4096 devices are supported"),
    "Tarnawski input: maxFPGAs of 100000": (
        ["solve", "t.json", "--method", "greedy"],
        {"t.json": lambda d: _tarnawski_text(d, '"maxFPGAs": 6', '"maxFPGAs": 100000')},
        "t.json: maxFPGAs is 100000; at most 4096 devices are supported"),
    "--mip-gap of 2": (["solve", "g.json", "--method", "ip", "--mip-gap", "2"], {"g.json": GOOD_TEXT},
                       "--mip-gap 2: must be a relative gap >= 0 and < 1, e.g. 0.01 for 1%"),
    "--mip-gap of 1": (["solve", "g.json", "--method", "ip", "--mip-gap", "1"], {"g.json": GOOD_TEXT},
                       "--mip-gap 1: must be a relative gap >= 0 and < 1, e.g. 0.01 for 1%"),
    "--bound-time-limit of 0": (SOLVE + ["--bound-time-limit", "0"], {"g.json": GOOD_TEXT},
                                "--bound-time-limit 0: must be a positive number of seconds (leave it out for no "
                                "relaxation bound)"),
    "--bound-time-limit of -1": (SOLVE + ["--bound-time-limit", "-1"], {"g.json": GOOD_TEXT},
                                 "--bound-time-limit -1: must be a positive number of seconds (leave it out for no "
                                 "relaxation bound)"),
    "--seed of 2**64": (SOLVE + ["--seed", str(2 ** 64)], {"g.json": GOOD_TEXT},
                        "--seed 18446744073709551616: must be a whole number from 0 to 2147483647 (a 32-bit seed, as "
                        "HiGHS takes it)"),
    "--warm-start naming a missing file": (
        ["solve", "t.json", "--method", "ip", "--warm-start", "start.json"],
        {"t.json": lambda d: _tarnawski_text(d, '"maxFPGAs": 6', '"maxFPGAs": 2')},
        "warm start start.json: no such file (nor a method name)"),
    "--out naming the input graph": (SOLVE + ["--out", "g.json"], {"g.json": GOOD_TEXT},
                                     "--out g.json: is the input graph g.json; writing there would overwrite it "
                                     "(give another file name)"),
}


def _write_files(tmp_path, files, tarnawski_dir):
    for name, content in files.items():
        if callable(content):
            content = content(tarnawski_dir)
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_input_on_the_command_line_is_one_line_naming_the_culprit(kind, tmp_path, monkeypatch, capsys,
                                                                      tarnawski_dir):
    from dnnplace.cli import main

    argv, files, message = KINDS[kind]
    monkeypatch.chdir(tmp_path)
    if "g.json" not in files and any(a == "g.json" for a in argv) or "c.toml" in files:
        files = {"g.json": GOOD_TEXT, **files}
    _write_files(tmp_path, files, tarnawski_dir)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"dnnplace: error: {message}\n", err[-3000:]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, the input unchanged


def test_the_good_inputs_behind_the_bad_ones_work(tmp_path, monkeypatch, capsys):
    """The files the bad kinds are made from are good: the messages come from the fault."""
    from dnnplace.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.json").write_text(GOOD_TEXT)
    (tmp_path / "c.toml").write_text(CONFIG + 'congestion = false\nseed = 3\ntransform = "contract-layers"\n')
    assert main(SOLVE) == 0
    assert main(["run", "c.toml"]) == 0
    recs = [json.loads(x) for x in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert len(recs) == 1 and recs[0]["status"] == "feasible" and recs[0]["run"]["congestion"] is False


def _docs_rows() -> dict[str, str]:
    import re

    rows = {}
    for line in DOCS_TABLE.read_text().splitlines():
        m = re.fullmatch(r"\| (.+?) \| `` (.*) `` \|", line)
        if m:
            rows[m[1].replace("\\|", "|")] = m[2]
    return rows


def test_the_bad_input_table_in_the_docs_is_this_list():
    rows = _docs_rows()
    assert list(rows) == list(KINDS)
    checked = 0
    for kind, (_, _, message) in KINDS.items():
        assert rows[kind] == message, kind
        checked += 1
    assert checked == len(KINDS) >= 30


# ---------------------------------------------------------------------------- the contract rows
def _contract_rows() -> list[tuple[str, str, str, str]]:
    """The rows of docs/bad-input.md's second table: (case, exit, what the user sees, test)."""
    import re

    text = DOCS_TABLE.read_text().split("## What users do:", 1)[1]
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and cells[0] not in ("case", "---"):
            rows.append(tuple(cells))
    return rows


def test_every_contract_row_names_a_test_that_exists():
    import ast

    rows = _contract_rows()
    tests_dir = Path(__file__).resolve().parent
    checked = 0
    for case, code, _, test in rows:
        assert code in ("0", "1", "2", "130"), (case, code)
        m = re.fullmatch(r"`tests/(test_\w+)\.py::(test_\w+)`", test)
        assert m, (case, test)
        tree = ast.parse((tests_dir / f"{m[1]}.py").read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert m[2] in names, (case, test)
        checked += 1
    assert checked == len(rows) >= 1
