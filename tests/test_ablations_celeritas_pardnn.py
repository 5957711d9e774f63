"""The graphs of results/celeritas/tensor-holography-ablation.md and results/pardnn/speedup/wrn-ccr-ablation.md
(:mod:`dnnplace.graphs.generators.convnets`): their structure, their CCR against the papers' (Celeritas Table 2,
PARDNN Table 5), and the tables' causes quoting what the ablations measured."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

from dnnplace.graphs.errors import InputError
from dnnplace.graphs.generators import generate

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def th(monkeypatch):
    """benchmarks/bench_celeritas_holography.py (the repository root on the path, as the harness runs it)."""
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.bench_celeritas_holography")


@pytest.fixture
def wrn(monkeypatch):
    """benchmarks/bench_pardnn_wrn_ccr.py."""
    monkeypatch.syspath_prepend(str(REPO))
    return importlib.import_module("benchmarks.bench_pardnn_wrn_ccr")


def _forward_core(g):
    """The forward operators (no parameters, gradients, updates or bookkeeping nodes)."""
    roles, types = np.asarray(g.roles), np.asarray(g.op_types)
    return (roles == "compute") & ~g.backward & ~np.isin(types, ("const", "identity"))


def test_conv_chain_is_a_30_layer_chain_of_table2s_node_count(th):
    g = generate(**th.VARIANTS["conv-chain roofline"])
    types = np.asarray(g.op_types)
    core = _forward_core(g)
    assert g.n == 3810  # Celeritas Table 2
    convs = np.flatnonzero(types == "conv")
    assert convs.size == 30 and sorted(g.layers[v] for v in convs) == list(range(30))
    # a chain: every forward operator but the loss feeds exactly one forward operator, every one but the input
    # reads exactly one
    out_fwd = np.bincount(g.src[core[g.src] & core[g.dst]], minlength=g.n)[core]
    in_fwd = np.bincount(g.dst[core[g.src] & core[g.dst]], minlength=g.n)[core]
    assert core.sum() == 30 * 3 - 1 + 2  # conv, bias, relu per layer (no relu on the last), input, loss
    assert (out_fwd == 1).sum() == core.sum() - 1 and (in_fwd == 1).sum() == core.sum() - 1
    # training: a gradient per forward operator, a parameter and an update per conv and bias, all colocated
    roles = np.asarray(g.roles)
    counted = 0
    for v in np.flatnonzero(types == "conv"):
        group = np.flatnonzero(g.colocation == g.colocation[v])
        assert sorted(roles[group]) == ["apply", "compute", "grad", "param"]
        counted += 1
    assert counted == 30 and (roles == "grad").sum() == core.sum() and (roles == "apply").sum() == 60
    # an activation is batch 32 x 24 channels x 384 x 384 float32
    assert g.output_bytes[convs[1]] == 32 * 24 * 384 * 384 * 4
    # zero-indegree sources: Celeritas Sec. 5 counts about 1,300 of 3,810 in the paper's graph
    sources = int((np.bincount(g.dst, minlength=g.n) == 0).sum())
    assert 1000 <= sources <= 2000


def test_conv_chain_variants_ccr(th):
    """The scaled variant's CCR (Eq. 1 on 4 PCIe GPUs, Table 2's function) is Table 2's 49.147; the function is
    Table 2's: it gives the stand-in's recorded CCR."""
    assert th.cluster_ccr(generate(**th.VARIANTS["conv-chain ccr-49"])) == pytest.approx(49.147, rel=0.05)
    assert th.cluster_ccr(generate(**th.VARIANTS["conv-chain roofline"])) < 49.147 * 0.95
    stand_in = {"family": "random-dag", "n": 3810, "seed": 4, "training": True, "kinds": ["gpu"], "width": 120,
                "output_bytes": 28.96e6, "param_bytes": 2097152}
    recorded = next(line for line in (REPO / "results/celeritas/table2.csv").read_text().splitlines()
                    if line.startswith("Tensor Holography,"))
    assert th.cluster_ccr(generate(**stand_in)) == pytest.approx(float(recorded.split(",")[9]), rel=1e-9)


def test_wide_resnet_is_wrn_610_14_with_pardnns_parameter_count(wrn):
    g = generate(**wrn.VARIANTS["WRN-610-14 roofline"])
    types = np.asarray(g.op_types)
    meta = g.meta["generator"]
    assert meta["depth"] == 610 and meta["params"] == pytest.approx(1.91e9, rel=0.01)  # PARDNN Table 3
    adds = np.flatnonzero(types == "add")
    assert adds.size == 3 * 101  # one per residual unit
    fan_in = np.bincount(g.dst[_forward_core(g)[g.src]], minlength=g.n)
    assert (fan_in[adds] == 2).all()  # the unit's branch and its shortcut
    assert (types == "conv").sum() == 1 + 3 * 101 * 2 + 3  # stem, two per unit, three 1x1 shortcuts


def test_wide_resnet_variant_ccr_is_table5s_on_every_gpu_count(wrn):
    from dnnplace.experiments.config import load
    from dnnplace.experiments.pardnn import _cluster, _pardnn_ccr

    cfg = load("pardnn-speedup", module="pardnn")
    g = generate(**wrn.VARIANTS["WRN-610-14 CCR 13.02"])
    checked = 0
    for k in cfg.gpus:
        assert _pardnn_ccr(g, _cluster(cfg, k)) == pytest.approx(13.02, rel=0.05)
        checked += 1
    assert checked == 3


@pytest.mark.parametrize("family, kwargs, field", [
    ("conv-chain", {"layers": 0}, "layers"), ("conv-chain", {"n": 10}, "n=10"),
    ("wide-resnet", {"units": 1, "widen": 1, "height": 8, "width": 8, "n": 5}, "n=5"),
    ("wide-resnet", {"widen": 2.5}, "widen")])
def test_bad_sizes_name_the_field(family, kwargs, field):
    with pytest.raises(InputError, match=field):
        generate(family, **kwargs)


def test_table_causes_quote_the_ablations():
    """Every number the Tensor Holography and WRN causes quote is in the ablation file they cite (or, for the
    stand-in's transfer volumes, the README they cite)."""
    from dnnplace.experiments.celeritas_tables import MEASURED_CAUSE
    from dnnplace.experiments.pardnn import ABLATED

    checked = 0
    for cause, cited, also in ((MEASURED_CAUSE["Tensor Holography"], "results/celeritas/tensor-holography-ablation.md",
                                "results/celeritas/README.md"),
                               (ABLATED["WRN"], "results/pardnn/speedup/wrn-ccr-ablation.md", None)):
        assert cited in cause
        text = (REPO / cited).read_text() + ((REPO / also).read_text() if also else "")
        for number in re.findall(r"\d+\.\d+", cause):
            assert number in text, (number, cited)
            checked += 1
    assert checked >= 10
