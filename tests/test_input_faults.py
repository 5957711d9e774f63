"""Faults in graph data and in what the domain layer reports about it (docs/bad-input.md).

One section per complaint: NaN is not "unsupported"; memory over capacity is flagged;
statistics say what they count; generated graphs fit the cluster they are made for; a
Gantt chart of a large schedule stays capped. Every error asserts the message naming
the node, edge or field at fault; every number is worked out by hand in a comment.
"""

from __future__ import annotations

import itertools
import json
import math
import re

import networkx as nx
import numpy as np
import pytest
from conftest import png_pixels_by_colour

from dnnplace.cli import main
from dnnplace.evaluation.simulate import simulate
from dnnplace.graphs import Cluster, Device, InfeasibleError, InputError, OpGraph, Placement
from dnnplace.graphs.checks import check_instance
from dnnplace.graphs.columns import user_column
from dnnplace.graphs.generators import DEFAULT_MEMORY_BUDGET, random_layered_dag
from dnnplace.graphs.io import load_instance, read_json
from dnnplace.graphs.io.netx import from_networkx
from dnnplace.graphs.presets import cluster_preset
from dnnplace.graphs.stats import graph_stats

NAN = float("nan")


def columnar(**over) -> dict:
    """A native columnar graph a -> b -> c; ``over`` replaces node or edge columns."""
    nodes = {"id": ["a", "b", "c"], "compute": {"gpu": [1.0, 2.0, 3.0], "cpu": [10.0, 20.0, 30.0]},
             "memory": [0, 0, 0]}
    edges = {"src": ["a", "b"], "dst": ["b", "c"], "bytes": [8, 8]}
    for key, val in over.items():
        (edges if key in ("bytes", "cost") else nodes)[key] = val
    return {"format": "dnnplace.graph/1", "name": "g", "nodes": nodes, "edges": edges}


def write(tmp_path, doc, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))  # json writes float("nan") as the literal NaN
    return path


# ---------------------------------------------------------------------------- 1. NaN is not "unsupported"
@pytest.mark.parametrize("column, value, message", [
    ("compute", {"gpu": [1.0, NAN, 3.0], "cpu": [10.0, 20.0, 30.0]},
     r"node 'b': field 'compute.gpu' is NaN; only null .* marks it unsupported"),
    ("memory", [0, 0, NAN], r"node 'c': field 'memory' is missing or NaN: got NaN"),
    ("output_bytes", [0, NAN, 0], r"node 'b': field 'output_bytes' is missing or NaN: got NaN"),
    ("persistent_bytes", [NAN, 0, 0], r"node 'a': field 'persistent_bytes' is missing or NaN: got NaN"),
    ("bytes", [8, NAN], r"edge #1 \('b'->'c'\): field 'bytes' is missing or NaN: got NaN"),
    ("cost", [NAN, None], r"edge #0 \('a'->'b'\): field 'cost' is NaN; only null .* explicit cost"),
])
def test_nan_in_a_columnar_file_names_node_or_edge_and_field(tmp_path, column, value, message):
    with pytest.raises(InputError, match=message):
        load_instance(write(tmp_path, columnar(**{column: value})))


def test_null_still_means_unsupported(tmp_path):
    inst = load_instance(write(tmp_path, columnar(compute={"gpu": [1.0, None, 3.0], "cpu": [10.0, 20.0, 30.0]},
                                                  cost=[None, 0.5])))
    assert inst.graph.supports("gpu").tolist() == [True, False, True]
    assert math.isnan(inst.graph.edge_cost[0]) and inst.graph.edge_cost[1] == 0.5


def test_nan_in_the_record_form(tmp_path):
    doc = {"format": "dnnplace.graph/1", "name": "r",
           "nodes": [{"id": 1, "compute": {"gpu": 1.0}, "memory": 0},
                     {"id": 2, "compute": {"gpu": NAN, "cpu": 4.0}, "memory": 0}],
           "edges": [{"src": 1, "dst": 2, "bytes": 4}]}
    with pytest.raises(InputError, match=r"node 2: field 'compute.gpu' is NaN"):
        load_instance(write(tmp_path, doc))
    doc["nodes"][1]["compute"]["gpu"] = None  # unsupported: fine
    assert load_instance(write(tmp_path, doc)).graph.supports("gpu").tolist() == [True, False]
    doc["edges"][0]["bytes"] = NAN
    with pytest.raises(InputError, match=r"edge #0 \(1->2\): field 'bytes' is missing or NaN"):
        load_instance(write(tmp_path, doc))


def test_literal_nan_in_the_file_text(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(columnar()).replace("[1.0, 2.0, 3.0]", "[1.0, NaN, 3.0]"))
    assert "NaN" in path.read_text()
    with pytest.raises(InputError, match=r"node 'b': field 'compute.gpu' is NaN"):
        load_instance(path)


@pytest.mark.parametrize("where, key, message", [
    ("nodes", "fpgaLatency", r"field 'fpgaLatency' must be a finite number, got nan"),
    ("nodes", "cpuLatency", r"field 'cpuLatency' must be a finite number, got nan"),
    ("nodes", "size", r"field 'size' must be a finite number, got nan"),
    ("edges", "cost", r"edge #2 .*field 'cost' must be a finite number, got nan"),
    ("edges", "size", r"edge #2 .*field 'size' must be a finite number, got nan"),
])
def test_nan_in_a_tarnawski_input(tarnawski_dir, tmp_path, where, key, message):
    doc = read_json(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json")
    rec = doc[where][2]
    rec[key] = NAN
    if where == "nodes":
        message = rf"node {rec['id']!r}: " + message
    with pytest.raises(InputError, match=message):
        load_instance(write(tmp_path, doc))


def test_nan_through_networkx():
    dg = nx.DiGraph()
    dg.add_node("a", compute={"gpu": 1.0}, memory=0)
    dg.add_node("b", compute={"gpu": NAN, "cpu": 3.0}, memory=0)
    dg.add_edge("a", "b", bytes=4)
    with pytest.raises(InputError, match=r"node 'b': field 'compute.gpu' is NaN"):
        from_networkx(dg)
    dg.nodes["b"]["compute"]["gpu"] = None  # unsupported
    assert from_networkx(dg).supports("gpu").tolist() == [True, False]
    dg.nodes["a"]["memory"] = NAN
    with pytest.raises(InputError, match=r"node 'a': field 'memory' is missing or NaN"):
        from_networkx(dg)
    dg.nodes["a"]["memory"] = 0
    dg.edges["a", "b"]["bytes"] = NAN
    with pytest.raises(InputError, match=r"edge 'a'->'b': field 'bytes' is missing or NaN"):
        from_networkx(dg)
    del dg.nodes["a"]["memory"]
    with pytest.raises(InputError, match=r"node 'a': field 'memory' is missing \(null\)"):
        from_networkx(dg)


def test_graph_built_in_code():
    # NaN in the compute matrix is the internal "unsupported" (contraction relies on it);
    # memory and bytes are checked by OpGraph itself; user numbers go through user_column
    g = OpGraph(ids="ab", kinds=["gpu", "cpu"], compute=[[1.0, 2.0], [NAN, 2.0]], memory=[0, 0], src=[0], dst=[1])
    assert g.supports("gpu").tolist() == [True, False]
    with pytest.raises(InputError, match=r"node 'b': field 'memory' must be a finite number >= 0, got nan"):
        OpGraph(ids="ab", kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, NAN], src=[0], dst=[1])
    with pytest.raises(InputError, match=r"edge 'a'->'b': field 'bytes' must be a finite number >= 0, got nan"):
        OpGraph(ids="ab", kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[1], edge_bytes=[NAN])
    with pytest.raises(InputError, match=r"op 7: field 'compute.tpu' is NaN"):
        user_column([1.0, NAN], field="compute.tpu", nullable=True, owner=lambda i: f"op {i + 6}")
    assert np.isnan(user_column([1.0, None], field="x", nullable=True)[1])


def test_cli_exit_2_on_nan_with_the_culprit_on_stderr(tmp_path, capsys):
    path = write(tmp_path, columnar(compute={"gpu": [1.0, NAN, 3.0], "cpu": [10.0, 20.0, 30.0]}))
    out_file = tmp_path / "r.json"
    code = main(["solve", str(path), "--problem", "makespan", "--method", "greedy", "--cluster",
                 "single-host-2-nvlink", "--out", str(out_file)])
    out, err = capsys.readouterr()
    assert code == 2 and not out_file.exists()
    assert err.strip().count("\n") == 0 and "node 'b': field 'compute.gpu' is NaN" in err


# ---------------------------------------------------------------------------- empty graphs
@pytest.mark.parametrize("form", ["columns", "records"])
def test_empty_graph_is_one_clear_error_in_both_forms(tmp_path, form):
    nodes = {"id": [], "compute": {"gpu": []}, "memory": []} if form == "columns" else []
    edges = {"src": [], "dst": []} if form == "columns" else []
    doc = {"format": "dnnplace.graph/1", "name": "void", "nodes": nodes, "edges": edges}
    with pytest.raises(InputError, match=r"graph 'void' has no nodes"):
        load_instance(write(tmp_path, doc))


def test_empty_tarnawski_input_and_networkx_graph(tmp_path, capsys):
    doc = {"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [], "edges": []}
    with pytest.raises(InputError, match=r"graph 'void' has no nodes"):
        load_instance(write(tmp_path, doc, "void.json"))
    with pytest.raises(InputError, match=r"graph 'graph' has no nodes"):
        from_networkx(nx.DiGraph())
    # on the command line: exit 2, never "objective 0.00"
    path = write(tmp_path, {"format": "dnnplace.graph/1", "name": "void",
                            "nodes": {"id": [], "compute": {"gpu": []}, "memory": []}, "edges": {"src": [], "dst": []}})
    code = main(["solve", str(path), "--problem", "makespan", "--method", "greedy",
                 "--cluster", "single-host-1-nvlink"])
    _, err = capsys.readouterr()
    assert code == 2 and "graph 'void' has no nodes" in err


# ---------------------------------------------------------------------------- 2. memory over capacity
def two_on_one(mem=(900.0, 900.0), cap=1000.0, **fields) -> Placement:
    """a -> b, both on gpu0 of capacity ``cap``."""
    g = OpGraph(ids="ab", kinds=["gpu"], compute=[[1.0], [1.0]], memory=list(mem), src=[0], dst=[1], **fields)
    cl = Cluster.from_links([Device("gpu0", "gpu", cap), Device("gpu1", "gpu", cap)])
    return Placement(g, cl, [0, 0])


def test_simulate_flags_a_device_over_capacity():
    # 900 + 900 = 1.8 KB of static memory on a 1 KB device: 800 B (80%) too much (the
    # graph gives no tensor sizes, so the dynamic peak is unknown: None, not 0)
    r = simulate(two_on_one())
    assert r.memory_overflow == [{"device": "gpu0", "capacity": 1000.0, "static_memory": 1800.0,
                                  "static_over": 800.0, "peak_memory": None, "peak_over": None}]
    assert r.memory_violations() == ["device gpu0: static memory 1.80 KB exceeds its capacity 1.00 KB "
                                     "by 800 B (80.0% over)"]
    d = r.to_dict()
    assert d["memory_violations"] == r.memory_violations()
    assert d["devices"]["gpu0"]["static_memory_over"] == 800.0 and d["devices"]["gpu0"]["memory_capacity"] == 1000.0
    assert d["devices"]["gpu1"]["static_memory_over"] == 0.0 and d["devices"]["gpu1"]["peak_memory_over"] is None
    r = simulate(two_on_one(edge_bytes=[50.0]))  # with tensor sizes the peak is known and fits
    assert r.memory_overflow[0]["peak_memory"] == 50.0 and r.memory_overflow[0]["peak_over"] == 0.0


def test_simulate_flags_a_dynamic_peak_over_capacity():
    # static 100 + 100 fits; but a's 700-byte output lives while b (output 500) runs:
    # peak 700 + 500 = 1200 > 1000
    r = simulate(two_on_one(mem=(100, 100), output_bytes=[700.0, 500.0]))
    (o,) = r.memory_overflow
    assert o["static_over"] == 0.0 and o["peak_memory"] == 1200.0 and o["peak_over"] == 200.0
    assert r.memory_violations() == ["device gpu0: dynamic peak memory 1.20 KB exceeds its capacity 1.00 KB "
                                     "by 200 B (20.0% over)"]
    assert simulate(two_on_one(mem=(100, 100), cap=2000.0, output_bytes=[700.0, 500.0])).memory_overflow == []


def test_cli_simulate_json_names_the_device_over_capacity(tmp_path, capsys):
    doc = columnar(memory=[900, 900, 0])
    doc["cluster"] = {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 1000}, {"name": "cpu0", "kind": "cpu"}]}
    graph, placement, sim = write(tmp_path, doc), tmp_path / "p.json", tmp_path / "sim.json"
    placement.write_text(json.dumps({"a": "gpu0", "b": "gpu0", "c": "gpu0"}))
    assert main(["simulate", str(graph), str(placement), "--out", str(sim)]) == 0
    capsys.readouterr()
    assert read_json(sim)["memory_violations"] == ["device gpu0: static memory 1.80 KB exceeds its capacity "
                                                   "1.00 KB by 800 B (80.0% over)"]


def test_peak_memory_of_a_tarnawski_workload_is_not_a_confident_zero(tarnawski_dir):
    inst = load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/resnet50_inference.json")
    g = inst.graph
    assert not g.output_bytes.any() and g.edge_bytes.any()
    cpu = inst.cluster.index_of("cpu0")
    r = simulate(Placement(g, inst.cluster, np.full(g.n, cpu)))
    # estimated from edge bytes: at least the largest tensor sent, at most all of them
    assert r.peak_memory_source == "edge_bytes"
    assert g.edge_bytes.max() <= r.peak_memory[cpu] <= g.edge_bytes.sum()
    assert r.to_dict()["peak_memory_source"] == "edge_bytes"
    # a graph with no tensor sizes at all: unknown, not 0
    bare = simulate(two_on_one(mem=(1, 1)))
    assert bare.peak_memory_source is None and bare.to_dict()["devices"]["gpu0"]["peak_memory"] is None


def test_check_instance_fails_when_nodes_fit_one_by_one_but_not_together():
    # three GPU-only nodes of 600 B, one 1 KB GPU plus an unbounded CPU: each fits, the
    # total is "fine" (the CPU is unbounded), but only 1 KB can hold GPU-only nodes
    g = OpGraph(ids="abc", kinds=["gpu"], compute=[[1.0]] * 3, memory=[600] * 3, src=[0, 1], dst=[1, 2])
    cl = Cluster.single_host(1, gpu_memory=1000.0)
    with pytest.raises(InfeasibleError, match=r"only on kind\(s\) \['gpu'\] \(3 node.*1,800 bytes in total, more than "
                                              r"the 1 device\(s\) of that kind .* \(1,000 bytes\) by 800 bytes"):
        check_instance(g, cl)
    # the same nodes able to run on the CPU: feasible, and not rejected
    check_instance(g.with_(kinds=("gpu", "cpu"), compute=np.ones((3, 2))), cl)


def test_check_instance_counts_colocation_groups_whole():
    # a (gpu, cpu) and b (gpu only) must share a device: the group (2 x 600 B) can run
    # on a GPU only; with c (gpu or cpu) free to go to the CPU, 1.2 KB on 1 KB GPUs x 1
    g = OpGraph(ids="abc", kinds=["gpu", "cpu"], compute=[[1.0, 1.0], [1.0, NAN], [1.0, 1.0]],
                memory=[600, 600, 600], src=[0, 1], dst=[1, 2], colocation=[0, 0, -1], colocation_labels=["ab"])
    with pytest.raises(InfeasibleError, match=r"more than the largest device able to hold it"):
        check_instance(g, Cluster.single_host(2, gpu_memory=1000.0))  # step 3: the group fits no single GPU
    ok = Cluster.single_host(1, gpu_memory=1200.0)
    check_instance(g, ok)
    two = g.with_(colocation=[0, 0, 1], colocation_labels=["ab", "c"], compute=np.array([[1, 1], [1, NAN], [1, NAN]]))
    with pytest.raises(InfeasibleError, match=r"only on kind\(s\) \['gpu'\].*1,800 bytes in total"):
        check_instance(two, ok)  # now c needs a GPU too: 1.8 KB on one 1.2 KB GPU


def _feasible_by_brute_force(g: OpGraph, cl: Cluster) -> bool:
    comp = cl.compute_matrix(g)
    for dev in itertools.product(range(cl.size), repeat=g.n):
        dev = np.array(dev)
        if np.isnan(comp[np.arange(g.n), dev]).any():
            continue
        grouped = g.colocation >= 0
        if any(len(set(dev[g.colocation == c].tolist())) > 1 for c in np.unique(g.colocation[grouped])):
            continue
        if np.all(np.bincount(dev, weights=g.memory, minlength=cl.size) <= cl.memory):
            return True
    return False


def test_check_instance_never_rejects_a_feasible_instance():
    """check_instance is a necessary condition: on 150 seeded tiny instances (3 kinds,
    random affinities, colocation groups and capacities) it passes every instance that
    brute force can place, and it does reject some of the others with the new step."""
    outcomes = {"feasible": 0, "kind-set rejections": 0}
    for seed in range(150):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 7))
        comp = rng.uniform(1, 2, (n, 3))
        comp[rng.random((n, 3)) < 0.5] = NAN
        comp[np.isnan(comp).all(axis=1), 2] = 1.0
        coloc = np.where(rng.random(n) < 0.3, rng.integers(0, 2, n), -1)
        g = OpGraph(ids=range(n), kinds=["gpu", "tpu", "cpu"], compute=comp,
                    memory=rng.integers(1, 10, n).astype(float), src=[], dst=[], colocation=coloc)
        kinds = ["gpu", "tpu", "cpu"] + list(rng.choice(["gpu", "tpu", "cpu"], size=int(rng.integers(0, 2))))
        cl = Cluster.from_links([Device(f"d{i}", str(k), float(rng.integers(9, 20))) for i, k in enumerate(kinds)])
        try:
            check_instance(g, cl)
            verdict = "pass"
        except InfeasibleError as exc:
            verdict = str(exc)
        if _feasible_by_brute_force(g, cl):
            assert verdict == "pass", (seed, verdict)
            outcomes["feasible"] += 1
        elif "that can run only on kind(s)" in verdict:
            outcomes["kind-set rejections"] += 1
    assert outcomes["feasible"] >= 80 and outcomes["kind-set rejections"] >= 15, outcomes  # measured 109, 21


# ---------------------------------------------------------------------------- 3. statistics say what they count
def test_stats_label_what_the_critical_path_counts():
    # a(2) -> b(3) -> c(4), edge costs 1 and 6: work 9; compute-only path 9;
    # with transfers 2+1+3+6+4 = 16 > work (transfers are not work);
    # CCR = mean edge (7/2) / mean node (9/3) = 3.5 / 3
    g = OpGraph(ids="abc", kinds=["gpu"], compute=[[2.0], [3.0], [4.0]], memory=[0] * 3, src=[0, 1], dst=[1, 2],
                edge_cost=[1.0, 6.0])
    s = graph_stats(g)
    assert s["work"] == 9 and s["critical_path_compute"] == 9 and s["critical_path_with_transfers"] == 16
    assert s["critical_path_compute"] <= s["work"]
    assert s["ccr"] == pytest.approx(3.5 / 3) and s["ccr_link_model"] == "explicit edge costs"


def test_ccr_of_a_graph_with_bytes_only_uses_a_stated_link():
    # a(1) -> b(1) carrying 25 MB: reference NVLink 0.01 ms + 25e6 / 25e9 s = 1.01 ms;
    # CCR = 1.01 / mean node 1 = 1.01 (it used to be 0: no explicit cost, no cluster)
    g = OpGraph(ids="ab", kinds=["gpu"], compute=[[1.0], [1.0]], memory=[0, 0], src=[0], dst=[1], edge_bytes=[25e6])
    s = graph_stats(g)
    assert s["ccr"] == pytest.approx(1.01) and s["ccr_link_model"].startswith("reference NVLink 0.01 ms")
    assert s["critical_path_with_transfers"] == pytest.approx(3.01) and s["critical_path_compute"] == 2
    # on a PCIe cluster (0.02 ms + bytes / 12 GB/s between GPUs): 0.02 + 25e6 / 12e9 * 1e3 ms
    pcie = Cluster.single_host(2, interconnect="pcie", with_cpu=False)
    s = graph_stats(g, cluster=pcie)
    assert s["ccr"] == pytest.approx(0.02 + 25e6 / 12e9 * 1e3) and "2x-gpu-pcie" in s["ccr_link_model"]
    # a unit with no reference link: unknown, not 0
    s = graph_stats(g.with_(unit="cycles"))
    assert s["ccr"] is None and s["critical_path_with_transfers"] is None and "unknown" in s["ccr_link_model"]


def test_stats_of_bundled_and_generated_graphs(tarnawski_dir):
    s = graph_stats(load_instance(tarnawski_dir / "throughput-inputs/LayerGraphs/bert24_inference.json").graph)
    assert s["critical_path_compute"] <= s["work"] < s["critical_path_with_transfers"]  # 92.41 <= 92.41 < 92.51
    g = random_layered_dag(2000, seed=1)
    assert g.edge_bytes.sum() > 1e9 and np.isnan(g.edge_cost).all()
    assert graph_stats(g)["ccr"] > 0.01


# ---------------------------------------------------------------------------- 4. generator defaults
def test_default_200k_graph_fits_single_host_8_nvlink():
    g = random_layered_dag(200_000, seed=0)
    cl = cluster_preset("single-host-8-nvlink", g)
    gpus = cl.devices_of_kind("gpu")
    gpu_memory = float(cl.memory[gpus].sum())  # 8 x 16 GB = 128 GB
    total = float(g.memory.sum())
    assert total <= 1.05 * DEFAULT_MEMORY_BUDGET <= 0.1 * gpu_memory  # about 8 GB of 128 GB
    assert float(g.memory.max()) < cl.memory[gpus].min()
    assert g.meta["generator"]["memory_scale"] < 0.02  # 550 GB of defaults scaled to 8 GB
    # GPU-only nodes fit the GPUs together (what used to push 155k nodes to the CPU)
    check_instance(g.with_(kinds=("gpu",), compute=g.compute[:, :1]), cl)


def test_generator_keeps_explicit_sizes_and_small_graphs():
    small = random_layered_dag(1000, seed=4)
    assert "memory_scale" not in small.meta["generator"]  # below the budget: as before
    np.testing.assert_array_equal(small.memory, random_layered_dag(1000, seed=4, memory_budget=None).memory)
    # explicit medians are used as given, however large the graph
    given = random_layered_dag(20_000, seed=4, output_bytes=256 * 1024, param_bytes=2 * 1024 ** 2)
    unscaled = random_layered_dag(20_000, seed=4, memory_budget=None)
    np.testing.assert_array_equal(given.memory, unscaled.memory)
    assert float(unscaled.memory.sum()) > 40e9  # ~2.7 MB a node
    assert float(random_layered_dag(20_000, seed=4, memory_budget=2e9).memory.sum()) < 2.2e9
    with pytest.raises(InputError, match="memory_budget must be a positive number"):
        random_layered_dag(10, memory_budget=0)


# ---------------------------------------------------------------------------- 5. Gantt of a large schedule
def test_large_gantt_caps_its_bars_and_its_legend_matches(tmp_path):
    from dnnplace.evaluation.gantt import _BACKWARD, _FORWARD, _XFER, gantt_layout, plot_gantt

    n = 20_000
    g = random_layered_dag(n, seed=2, kinds=("gpu",), training=True)
    cl = Cluster.single_host(4, with_cpu=False)
    layers = np.asarray(g.layers)
    r = simulate(Placement(g, cl, layers * 4 // (layers.max() + 1)))
    lay = gantt_layout(r, max_bars=100, max_links=3)
    dev_rows = [row for row in lay.rows if row.kind == "dev"]
    assert sum(row.items for row in dev_rows) == n and lay.merged_nodes >= n - 4 * 100
    for row in lay.rows:  # 100 single bars, plus at most 100 merged intervals per colour
        assert row.n_bars <= 100 * (1 + len(row.colours)), (row.label, row.n_bars)
    assert [row.kind for row in lay.rows].count("link") <= 3 and len(lay.rows) <= 4 + 3 + 1
    assert lay.n_bars < 2_500
    assert {c for _, c in lay.legend} == set().union(*(row.colours for row in lay.rows))
    out = plot_gantt(r, tmp_path / "big.png", max_bars=100, max_links=3)
    px = png_pixels_by_colour(out, min_width=1000, min_height=200)
    for colour in (_FORWARD, _BACKWARD, _XFER):  # every legend colour shows as real area
        assert px.get(colour.upper(), 0) > 2_000, colour
    # rows hidden by max_rows take their colours out of the legend
    only = gantt_layout(r, max_rows=1)
    assert [lab for lab, _ in only.legend] == ["forward"] and only.hidden_rows > 0


def test_gantt_labels_only_wide_bars():
    from dnnplace.evaluation.gantt import gantt_layout

    # one 100-ms node among 50 of 0.01 ms: only the long one can hold its name
    n = 51
    times = np.r_[[100.0], np.full(n - 1, 0.01)]
    g = OpGraph(ids=range(n), kinds=["gpu"], compute=times[:, None], memory=np.zeros(n),
                src=np.arange(n - 1), dst=np.arange(1, n), names=["long_conv"] + [f"op{i}" for i in range(1, n)])
    r = simulate(Placement(g, Cluster.single_host(1, with_cpu=False), np.zeros(n, dtype=int)))
    (row,) = gantt_layout(r).rows
    assert [text for _, text in row.labels] == ["long_conv"]
    assert row.labels[0][0] == pytest.approx(50.0)  # centred on the bar


def test_default_lstm_of_200k_nodes_fits_too():
    from dnnplace.graphs.generators import generate
    from dnnplace.graphs.generators.lstm import _memory_model

    # the memory model the default batch is chosen with is exact (checked on a small grid)
    small = generate("lstm", layers=3, steps=5, hidden=32, batch=4, vocab=50, embed=16)
    per_batch, fixed = _memory_model(3, 5, 32, 16, 50, True, 4.0)
    assert float(small.memory.sum()) == per_batch * 4 + fixed
    # 200k nodes: ~9,091 steps; batch 128 would need ~490 GB, so the default batch shrinks
    per_batch, fixed = _memory_model(2, 9091, 2048, 2048, 10000, True, 4.0)
    assert per_batch * 128 + fixed > 450e9
    assert generate("lstm", n=2000).meta["generator"]["batch"] == 128  # small: unchanged
    assert generate("lstm", n=20_000, batch=128).meta["generator"]["batch"] == 128  # explicit: as given
    g = generate("lstm", n=20_000)
    assert g.meta["generator"]["batch"] < 128 and float(g.memory.sum()) <= DEFAULT_MEMORY_BUDGET


# ---------------------------------------------------------------------------- the same, as a person runs it
def _run(*args, cwd) -> tuple[int, str, str]:
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "dnnplace", *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def test_data_faults_in_a_subprocess(tmp_path):
    """Each data fault above through the real command line: exit code, streams,
    no file where the input is bad, the culprit named."""
    out_file = tmp_path / "r.json"
    # NaN compute: exit 2, one line on stderr naming node and field, nothing on stdout, no file
    nan = write(tmp_path, columnar(compute={"gpu": [1.0, NAN, 3.0], "cpu": [10.0, 20.0, 30.0]}), "nan.json")
    code, out, err = _run("solve", nan, "--problem", "makespan", "--method", "heft", "--cluster",
                          "single-host-2-nvlink", "--out", out_file, cwd=tmp_path)
    assert (code, out, err.count("\n")) == (2, "", 1) and "node 'b': field 'compute.gpu' is NaN" in err
    assert not out_file.exists()
    # an empty graph: exit 2, never "objective 0.00"
    void = write(tmp_path, {"format": "dnnplace.graph/1", "name": "void", "nodes": [], "edges": []}, "void.json")
    code, out, err = _run("solve", void, "--problem", "makespan", "--method", "greedy", "--cluster",
                          "single-host-1-nvlink", "--out", out_file, cwd=tmp_path)
    assert (code, out, err.count("\n")) == (2, "", 1) and err.startswith("dnnplace: error: ")
    assert "graph 'void' has no nodes" in err
    assert not out_file.exists()
    # memory over capacity: the simulation runs (exit 0) and says which device, by how much
    doc = columnar(memory=[900, 900, 0])
    doc["cluster"] = {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 1000}, {"name": "cpu0", "kind": "cpu"}]}
    graph, placement = write(tmp_path, doc, "over.json"), tmp_path / "p.json"
    placement.write_text(json.dumps({"a": "gpu0", "b": "gpu0", "c": "gpu0"}))
    code, out, _ = _run("simulate", graph, placement, cwd=tmp_path)
    assert code == 0 and "over capacity: device gpu0: static memory 1.80 KB exceeds its capacity 1.00 KB" in out
    # info: nodes that fit one by one but not together on the GPUs they need
    doc = columnar(memory=[600, 600, 600], compute={"gpu": [1.0, 1.0, 1.0]})
    doc["cluster"] = {"devices": [{"name": "gpu0", "kind": "gpu", "memory": 1000}, {"name": "cpu0", "kind": "cpu"}]}
    code, out, _ = _run("info", write(tmp_path, doc, "tight.json"), cwd=tmp_path)
    check = next(line for line in out.splitlines() if line.startswith("feasibility check:"))
    assert code == 0 and check != "feasibility check: ok" and "1,800 bytes in total" in check
    # the critical path says what it counts and never exceeds the work without transfers
    code, out, _ = _run("info", write(tmp_path, columnar(), "plain.json"), cwd=tmp_path)
    rows = dict(line.split(None, 1) for line in out.splitlines()[2:] if line and not line.startswith("-"))
    assert code == 0 and rows["work"].strip() == rows["critical_path_compute"].strip() == "6.00 ms"


# ---------------------------------------------------------------------------- 10. flags, configs, presets and files
# Beyond the one-line kinds of tests/test_bad_input.py (KINDS): each field and preset the
# readers refuse, and the values they must still accept (docs/bad-input.md, "Flags,
# configs, presets and files").
@pytest.mark.parametrize("column, value, message", [
    ("memory", [0, 1e301, 0], r"node 'b': field 'memory' is 1e\+301, past the largest value accepted \(1e\+300"),
    ("output_bytes", [0, 0, 1e308], r"node 'c': field 'output_bytes' is 1e\+308, past the largest value"),
    ("persistent_bytes", [2e300, 0, 0], r"node 'a': field 'persistent_bytes' is 2e\+300, past the largest"),
    ("bytes", [8, 1e305], r"edge 'b'->'c': field 'bytes' is 1e\+305, past the largest value accepted"),
    ("cost", [1.5e300, None], r"edge 'a'->'b': field 'cost' is 1.5e\+300, past the largest value accepted"),
    ("compute", {"gpu": [1.0, 2.0, 3.0], "cpu": [10.0, 1e308, 30.0]},
     r"node 'b': field 'compute.cpu' is 1e\+308, past the largest value accepted"),
])
def test_values_whose_sums_overflow_are_refused_naming_node_and_field(tmp_path, column, value, message):
    with pytest.raises(InputError, match=message):
        load_instance(write(tmp_path, columnar(**{column: value})))


def test_the_largest_accepted_values_give_finite_bounds_without_warnings():
    """At the limit (1e300 per value) every lower bound stays finite:
    a -> b -> c with 1e300 each sums to 3e300, far below the float limit 1.8e308."""
    import warnings

    from dnnplace.evaluation import bounds
    from dnnplace.graphs.graph import MAX_VALUE

    g = OpGraph.from_ids("abc", [("a", "b"), ("b", "c")], kinds=["gpu"], compute=[[MAX_VALUE]] * 3,
                         memory=[MAX_VALUE] * 3, edge_bytes=[MAX_VALUE] * 2)
    cl = Cluster.from_links([Device("gpu0", "gpu"), Device("gpu1", "gpu")], default={"beta1": 1e-6})
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow RuntimeWarning fails the test
        for value in (bounds.makespan_lower_bound(g, cl), bounds.maxload_lower_bound(g, cl),
                      bounds.critical_path_lower_bound(g, cl)):
            assert math.isfinite(value) and value >= MAX_VALUE
            checked += 1
    assert checked == 3


def test_backward_and_batch_scaled_are_booleans(tmp_path):
    doc = columnar(backward=[False, 1, True])
    with pytest.raises(InputError, match=r"node 'b': field 'backward' must be true or false, got 1"):
        load_instance(write(tmp_path, doc))
    doc = columnar()
    doc["edges"]["batch_scaled"] = [True, "no"]
    with pytest.raises(InputError, match=r"edge #1 \('b'->'c'\): field 'batch_scaled' must be true or false, "
                                         r"got a string 'no'"):
        load_instance(write(tmp_path, doc))
    doc["edges"]["batch_scaled"] = [True, False]
    doc["nodes"]["backward"] = [False, False, True]
    g = load_instance(write(tmp_path, doc)).graph
    assert g.backward.tolist() == [False, False, True] and g.edge_batch_scaled.tolist() == [True, False]


def test_record_compute_must_name_its_kinds(tmp_path):
    """docs/formats.md gives ``compute`` per device kind in both forms; a bare number names
    no kind, so it is refused rather than read as "every kind" (a CPU time of a GPU kernel
    would be a guess)."""
    nodes = [{"id": "a", "compute": {"gpu": 1.0}, "memory": 0}, {"id": "b", "compute": [1.0], "memory": 0}]
    doc = {"format": "dnnplace.graph/1", "name": "g", "nodes": nodes, "edges": []}
    with pytest.raises(InputError, match=r"node 'b': field 'compute' must map device kinds to times, e\.g\. "
                                         r"\{\"gpu\": \[1\.0\]\} .*got a list \[1\.0\]"):
        load_instance(write(tmp_path, doc))


@pytest.mark.parametrize("fmt", ["dnnplace.graph/2", "dnnplace.graph/", "dnnplace.graph/1.1"])
def test_only_the_format_this_version_writes_is_read(tmp_path, fmt):
    doc = {**columnar(), "format": fmt}
    with pytest.raises(InputError, match=rf"g\.json: format '{re.escape(fmt)}' is not one this dnnplace reads"):
        load_instance(write(tmp_path, doc))


def test_cluster_file_past_the_device_cap_is_refused_before_building(tmp_path):
    doc = columnar()
    doc["cluster"] = {"devices": [{"name": f"gpu{i}", "kind": "gpu"} for i in range(5000)]}
    with pytest.raises(InputError, match=r"^cluster: 5000 devices; at most 4096 devices are supported$"):
        load_instance(write(tmp_path, doc))


@pytest.mark.parametrize("spec, message", [
    ("tarnawski-4096-1-16GB", r"\(4096 accelerators and 1 CPUs\): 4097 devices; at most 4096"),
    ("hierarchy-65x64", r"\(65 servers of 64\): 4160 devices; at most 4096"),
    ("single-host-4096-pcie", r"\(4096 GPUs and cpu0\): 4097 devices; at most 4096"),
    ("local-cpu-" + "9" * 5000, r"a 5000-digit number of devices; at most 4096"),
    ("tarnawski-2-1-1e400", r"cannot read '1e400' as a byte count: 1e400 is past the 64-bit float range"),
    ("local-cpu-2-1e308KB", r"cannot read '1e308KB' .* past the 64-bit float range \(write inf"),
])
def test_presets_past_the_caps(spec, message):
    with pytest.raises(InputError) as exc:
        cluster_preset(spec)
    assert str(exc.value).startswith(f"cluster preset {spec!r}") and re.search(message, str(exc.value)), exc.value


def test_presets_at_the_caps_and_unbounded_memory_still_work(monkeypatch):
    """4096 devices pass the check (the builders are stubbed: a real 4096-device preset takes
    seconds to fill its link arrays); ``inf`` written as such is still unbounded memory."""
    import dnnplace.graphs.hierarchy
    import dnnplace.graphs.presets

    built = []
    monkeypatch.setattr(Cluster, "single_host", classmethod(lambda cls, n, **kw: built.append(n + 1)))
    monkeypatch.setattr(dnnplace.graphs.hierarchy, "hierarchical_cluster", lambda shape, **kw: built.append(shape))
    monkeypatch.setattr(dnnplace.graphs.presets, "local_cpu_cluster", lambda n, **kw: built.append(n))
    cluster_preset("single-host-4095-nvlink")
    cluster_preset("hierarchy-64x64")
    cluster_preset("local-cpu-4096-1GB")
    assert built == [4096, (64, 64), 4096]
    assert math.isinf(cluster_preset("tarnawski-2-1-inf").memory[0])


def test_seed_range_is_one_rule_for_flags_and_configs(tmp_path, monkeypatch, capsys):
    """``--seed`` and a config's ``seed``/``[solver] seed``: 0 .. 2**31 - 1 (HiGHS's 32-bit
    ``random_seed``); both ends accepted, one past refused."""
    from dnnplace.config import parse_config
    from dnnplace.formulations.solvers.options import MAX_SEED, SettingError, check_values

    assert MAX_SEED == 2 ** 31 - 1
    check_values({"seed": 0})
    check_values({"seed": MAX_SEED})
    with pytest.raises(SettingError, match=r"seed = 2147483648: must be a whole number from 0 to 2147483647"):
        check_values({"seed": MAX_SEED + 1})
    path = write(tmp_path, columnar())
    cfg = parse_config({"name": "s", "grid": {"graphs": str(path), "methods": "greedy", "seed": [0, MAX_SEED],
                                              "cluster": "tarnawski-2-1-16GB"}})
    assert sorted(s.seed for s in cfg.specs) == [0, MAX_SEED]
    with pytest.raises(InputError, match=r"\[grid\]: seed = 2147483648: expected a whole number from 0 to "
                                         r"2147483647, got a number past the range"):
        parse_config({"name": "s", "grid": {"graphs": str(path), "methods": "greedy", "seed": MAX_SEED + 1}})
    with pytest.raises(InputError, match=r"\[grid\]: seed = -1: .* got a negative number"):
        parse_config({"name": "s", "grid": {"graphs": str(path), "methods": "greedy", "seed": -1}})
    monkeypatch.chdir(tmp_path)
    for seed in (-1, MAX_SEED + 1):
        assert main(["generate", "random-dag", "--nodes", "5", "--seed", str(seed), "--out", "r.json"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == (f"dnnplace: error: --seed {seed}: must be a whole number from 0 to 2147483647 "
                                     "(a 32-bit seed, as HiGHS takes it)\n")
    assert not (tmp_path / "r.json").exists()


def test_bundled_graph_names_resolve_alike_in_configs_and_on_the_command_line(tmp_path):
    """One resolver (dnnplace.data.bundled_graph): ``captured/nasnet-4x44`` with or without
    ``.json``, in a ``dnnplace run`` config, a reproduction config and ``dnnplace solve``."""
    from dnnplace.config import parse_config
    from dnnplace.data import resolve_graph, workloads_dir
    from dnnplace.experiments.config import load

    expected = workloads_dir() / "captured" / "nasnet-4x44.json"
    assert resolve_graph("captured/nasnet-4x44") == str(expected)
    labels = set()
    for name in ("captured/nasnet-4x44", "captured/nasnet-4x44.json", "nasnet-4x44",
                 "graphs/workloads/captured/nasnet-4x44"):
        (spec,) = parse_config({"name": "n", "grid": {"graphs": name, "methods": "heft", "problems": "makespan"}},
                               base=tmp_path).specs
        assert spec.graph == str(expected.resolve())
        labels.add(spec.graph_label)
    assert labels == {"graphs/workloads/captured/nasnet-4x44.json"}  # one run key whichever spelling
    with pytest.raises(InputError, match=r"\[grid\]: graph 'captured/no-such' matches no file"):
        parse_config({"name": "n", "grid": {"graphs": "captured/no-such", "methods": "heft"}}, base=tmp_path)
    from dnnplace.data import experiment_config

    text = experiment_config("pesto-hardware-captured").read_text()
    assert 'graph = "captured/rnnlm-2x2048.json"' in text
    for spelled in ("captured/rnnlm-2x2048", "captured/rnnlm-2x2048.json"):
        cfg_path = tmp_path / "r.toml"
        cfg_path.write_text(text.replace('"captured/rnnlm-2x2048.json"', f'"{spelled}"'))
        assert load(cfg_path).graph == "captured/rnnlm-2x2048.json"
    cfg_path.write_text(text.replace('"captured/rnnlm-2x2048.json"', '"captured/nope"'))
    with pytest.raises(InputError, match=r"r\.toml: graph = 'captured/nope': no bundled workload of that name"):
        load(cfg_path)


def test_reproduction_configs_refuse_an_empty_name_and_string_options(tmp_path):
    from dnnplace.data import experiment_config
    from dnnplace.experiments.config import load

    text = experiment_config("pesto-hardware-captured").read_text()
    path = tmp_path / "r.toml"
    assert text.count('name = "hardware-captured"') == 1
    path.write_text(text.replace('name = "hardware-captured"', 'name = ""'))
    with pytest.raises(InputError, match=r"r\.toml: name = '': must be a non-empty name"):
        load(path)
    path.write_text(text + '\n[methods.stringly]\nmethod = "pesto"\nparams = { coarsen_to = "100" }\n')
    with pytest.raises(InputError, match=r"\[methods\.stringly\] params: coarsen_to = \"100\": expected a whole "
                                         r"number \(a TOML number, not a string\), got a string"):
        load(path)
    path.write_text(text + '\n[methods.numeric]\nmethod = "pesto"\nparams = { coarsen_to = 100 }\n')
    assert load(path).methods["numeric"].params == {"coarsen_to": 100}
