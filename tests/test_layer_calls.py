"""Layers split into their calls (``layer_labels(..., calls=True)``, the ``contract-calls``
transform): an RNN cell called at every time step is one captured layer that is not
contiguous, so the layer graph leaves it ungrouped; split by call, every group is
contiguous per part, one per call."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import numpy as np
import pytest
from conftest import REPO

from dnnplace.cli import main
from dnnplace.graphs import OpGraph
from dnnplace.graphs.transforms.layers import layer_labels


def unrolled_rnn(steps: int) -> OpGraph:
    """A decoder cell fed back through a projection layer at every step (as GNMT's decoder
    through its attention), forward and backward: the cell's calls have the projection's
    operators between them."""
    ids, layers, bw, edges = [], [], [], []

    def node(name: str, layer: str, backward: bool = False) -> str:
        ids.append(name)
        layers.append(layer)
        bw.append(backward)
        return name
    w = node("w", "cell")
    prev = node("x", "input")
    for t in range(steps):
        mm, act = node(f"mm{t}", "cell"), node(f"act{t}", "cell")
        proj = node(f"proj{t}", "proj")
        edges += [(prev, mm), (w, mm), (mm, act), (act, proj)]
        prev = proj
    grad = node("loss", "loss")
    edges.append((prev, grad))
    for t in reversed(range(steps)):   # the backward part mirrors the forward one
        gp, ga, gm = node(f"d_proj{t}", "proj", True), node(f"d_act{t}", "cell", True), node(f"d_mm{t}", "cell", True)
        edges += [(grad, gp), (gp, ga), (ga, gm), (f"proj{t}", gp), (f"act{t}", ga), (f"mm{t}", gm)]
        grad = gm
    gw = node("d_w", "cell", True)
    edges += [(f"d_mm{t}", gw) for t in range(steps)]
    n = len(ids)
    return OpGraph.from_ids(ids, edges, kinds=["gpu"], compute=[[1.0]] * n, memory=[0] * n,
                            layers=layers, backward=bw)


def _contiguous_in_part(g: OpGraph, group: np.ndarray, part: np.ndarray, lay: list) -> bool:
    """No operator with a layer outside ``group`` on a path between two of its operators
    inside the part (networkx, independent of the bitsets under test)."""
    d = nx.DiGraph()
    d.add_nodes_from(np.flatnonzero(part).tolist())
    d.add_edges_from((int(u), int(v)) for u, v in zip(g.src, g.dst) if part[u] and part[v])
    members = set(np.intersect1d(group, np.flatnonzero(part)).tolist())
    down = set().union(*(nx.descendants(d, m) for m in members)) if members else set()
    up = set().union(*(nx.ancestors(d, m) for m in members)) if members else set()
    return not any(lay[x] is not None for x in (down & up) - members)


def test_a_fed_back_cell_splits_into_one_group_per_call():
    g = unrolled_rnn(4)
    lab0, rule0 = layer_labels(g)
    assert "'cell'" in rule0 and "left ungrouped" in rule0
    lab, rule = layer_labels(g, calls=True)
    assert "split into" in rule
    ix = g.index
    for t in range(4):   # forward and backward of step t: one group
        assert len({lab[ix[f"mm{t}"]], lab[ix[f"act{t}"]], lab[ix[f"d_act{t}"]], lab[ix[f"d_mm{t}"]]}) == 1
    assert len({lab[ix[f"mm{t}"]] for t in range(4)}) == 4
    assert lab[ix["w"]] == lab[ix["mm0"]]   # the parameter goes with the first call
    # the projection has the cell between its calls as well: split alike
    assert "'proj'" in rule0 and len({lab[ix[f"proj{t}"]] for t in range(4)}) == 4
    assert all(lab[ix[f"proj{t}"]] == lab[ix[f"d_proj{t}"]] for t in range(4))


def test_call_groups_are_contiguous_on_random_graphs():
    """Random DAGs (training ones with a backward part) with random layer ids: every group
    ``calls=True`` makes holds operators of one layer and is contiguous per part."""
    rng = np.random.default_rng(7)
    split = checked = 0
    for trial in range(100):
        n = int(rng.integers(8, 30))
        training = trial % 2 == 0
        bw = np.zeros(n, bool)
        if training:
            bw[n // 2:] = True
        edges = [(u, v) for u, v in itertools.combinations(range(n), 2) if rng.random() < 0.15]
        lay = [None if rng.random() < 0.15 else f"L{int(rng.integers(0, 4))}" for _ in range(n)]
        g = OpGraph.from_ids(list(range(n)), edges, kinds=["gpu"], compute=[[1.0]] * n, memory=[0] * n,
                             layers=lay, backward=bw)
        lab, rule = layer_labels(g, calls=True)
        split += "split into" in rule
        parts = [~bw, bw] if training else [np.ones(n, bool)]
        for k in np.unique(lab):
            group = np.flatnonzero(lab == k)
            if group.size < 2:
                continue
            assert len({lay[i] for i in group}) == 1 and lay[group[0]] is not None
            assert all(_contiguous_in_part(g, group, pt, lay) for pt in parts), (trial, group.tolist())
            checked += 1
    assert split >= 50 and checked >= 300, (split, checked)


def test_solve_rnnlm_by_call_is_proved_by_the_dp(tmp_path, capsys):
    """The captured RNNLM's cells are not contiguous (2,624 groups by layer, the DP gives up);
    by call, 229 groups, and the DP proves the layer graph's optimum at once."""
    out = tmp_path / "r.json"
    rc = main(["solve", str(REPO / "graphs" / "workloads" / "captured" / "rnnlm-2x2048.json"), "--cluster",
               "single-host-4-nvlink", "--problem", "maxload", "--method", "dp", "--transform", "contract-calls",
               "--time-limit", "120", "--out", str(out)])   # solve's limit counts from the process's start,
    # up to a minute back: in a long test process 60 s would be spent before the DP starts
    text = capsys.readouterr().out
    assert rc == 0 and "independent evaluation" in text and "agrees with the method" in text, text
    res = json.loads(out.read_text())
    assert res["status"] == "optimal", (res["status"], res["termination"], res["message"], res["extra"].get("memory"))
    assert res["objective"] == pytest.approx(90.91, abs=0.01)
    assert res["extra"]["transform"]["groups"] <= 230 and res["extra"]["transform"]["nodes"] == 2634
