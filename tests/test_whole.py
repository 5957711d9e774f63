"""Whole-model training graphs assembled from captured parts (dnnplace.pytorch.capture.zoo.parts)
equal a direct capture of the same model, and the ``dnnplace capture`` command."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

if os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1":
    import torch  # CI installs the extra: a missing torch must fail, not skip
else:
    torch = pytest.importorskip("torch")

from dnnplace.cli import main  # noqa: E402
from dnnplace.graphs.io import load_instance  # noqa: E402
from dnnplace.pytorch.capture import capture  # noqa: E402
from dnnplace.pytorch.capture.zoo import ZOO, build  # noqa: E402
from dnnplace.pytorch.capture.zoo.parts import whole_model  # noqa: E402

TINY = {
    "bert-base": {"batch": 2, "seq": 8, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 50, "positions": 16,
                  "layers": 3},
    "rnnlm-2x2048": {"batch": 2, "seq": 4, "hidden": 16, "vocab": 40, "layers": 3},
    "gpt2": {"batch": 2, "seq": 8, "hidden": 32, "heads": 4, "vocab": 50, "positions": 16, "layers": 3},
    "nasnet-4x44": {"batch": 2, "filters": 8, "image": 32, "stem_multiplier": 1, "classes": 10, "cells": 2},
}


def _summary(g, flops):
    colo = g.colocation[g.colocation >= 0]
    return {"nodes": g.n, "edges": g.m, "flops": flops, "edge_bytes": float(g.edge_bytes.sum()),
            "output_bytes": float(g.output_bytes.sum()), "persistent_bytes": float(g.persistent_bytes.sum()),
            "memory": float(g.memory.sum()), "backward": int(g.backward.sum()), "groups": len(set(colo.tolist())),
            "group_sizes": sorted(Counter(colo.tolist()).values()), "roles": Counter(g.roles),
            "op_types": Counter(g.op_types), "in_degrees": sorted(np.bincount(g.dst, minlength=g.n).tolist())}


def _check_equal(name):
    kw = TINY[name]
    tiled = whole_model(name, **kw)
    model, inputs, loss = build(name, **kw)
    direct = capture(model, inputs, loss, name=name).graph
    a = _summary(tiled, tiled.meta["assembled"]["flops"])
    b = _summary(direct, direct.meta["capture"]["flops"])
    assert a == b  # every count, FLOPs and byte total exactly
    assert np.isclose(tiled.compute.sum(), direct.compute.sum(), rtol=1e-12)
    assert tiled.topo_order.size == tiled.n
    return tiled


def test_bert_assembled_equals_direct_capture():
    g = _check_equal("bert-base")
    assert g.meta["assembled"]["parts"] == 3  # embeddings, one layer captured once, head


def test_rnnlm_grid_equals_direct_capture():
    """A 3 x 4 LSTM grid: steps share their layer's parameters (gradients accumulated over
    the steps into one apply node per tensor) and h feeds the next step and the next layer."""
    g = _check_equal("rnnlm-2x2048")
    assert g.meta["assembled"]["accumulations"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "nasnet-4x44"])
def test_more_families_equal_direct_capture(name):
    _check_equal(name)


# ---------------------------------------------------------------------------- CLI
@pytest.mark.slow
def test_capture_cli_writes_graph(tmp_path, capsys):
    args = ["capture", "bert-base", "--batch", "2", "--seq", "8", "--layers", "2"]
    args += [f"--param={k}={v}" for k, v in (("hidden", 32), ("heads", 4), ("ffn", 64), ("vocab", 50))]
    assert main([*args, "--out", str(tmp_path / "g.json")]) == 0
    direct = load_instance(tmp_path / "g.json").graph
    assert "nodes" in capsys.readouterr().out and direct.n > 100
    assert main([*args, "--tiled", "--out", str(tmp_path / "t.json")]) == 0
    tiled = load_instance(tmp_path / "t.json").graph
    assert (tiled.n, tiled.m) == (direct.n, direct.m)


def test_capture_cli_unknown_model_lists_zoo(tmp_path, capsys):
    assert main(["capture", "resnet-51", "--out", str(tmp_path / "g.json")]) == 2
    err = capsys.readouterr().err
    assert "unknown zoo model 'resnet-51'" in err and all(name in err for name in ZOO)


def test_capture_cli_without_torch_names_the_extra(tmp_path, capsys, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert main(["capture", "resnet-50", "--out", str(tmp_path / "g.json")]) == 2
    assert "pip install 'dnnplace[torch]'" in capsys.readouterr().err
    assert not (tmp_path / "g.json").exists()


def test_capture_cli_tiled_refuses_other_families(tmp_path, capsys):
    assert main(["capture", "resnet-50", "--tiled", "--out", str(tmp_path / "g.json")]) == 2
    assert "no whole-model program" in capsys.readouterr().err


# ---------------------------------------------------------------------------- batch profiles
def test_capture_cli_batches_feed_batch_model(tmp_path):
    from dnnplace.graphs.batch_model import BatchModel, check_profiles
    from dnnplace.graphs.errors import InputError
    args = ["capture", "bert-base", "--seq", "8", "--layers", "1", "--batches", "2,4",
            "--out", str(tmp_path / "g.json")]
    args += [f"--param={k}={v}" for k, v in (("hidden", 32), ("heads", 4), ("ffn", 64), ("vocab", 50))]
    assert main(args) == 0
    prof = {b: load_instance(tmp_path / f"g-b{b}.json").graph for b in (2, 4)}
    assert prof[2].meta["batch"] == 2 and prof[4].meta["batch"] == 4
    bm = BatchModel(2, profiles=prof)
    mid = bm.time(prof[2], 3)
    assert np.allclose(mid, (prof[2].compute + prof[4].compute) / 2)
    assert prof[4].edge_bytes.sum() > prof[2].edge_bytes.sum()  # activations grow with the batch
    # a different graph is refused, naming the node that differs
    with torch.device("meta"):
        net, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    other = capture(net, (x,), lambda out, x: out.sum()).graph
    with pytest.raises(InputError, match="profile at batch 8"):
        check_profiles({2: prof[2], 8: other})
