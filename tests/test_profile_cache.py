"""The measured-cost profile cache (docs/execution.md, "Profile cache"): its key covers the
model's content, and ``dnnplace capture`` says whether the costs were measured or read back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

if os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1":
    import torch  # CI installs the extra: a missing torch must fail, not skip
else:
    torch = pytest.importorskip("torch")

from dnnplace.cli import main  # noqa: E402
from dnnplace.pytorch.capture import costs  # noqa: E402
from dnnplace.pytorch.capture.costs import Measured, cache_path, model_origin  # noqa: E402
from dnnplace.pytorch.capture.fx import trace  # noqa: E402
from dnnplace.pytorch.capture.named_losses import LOSSES  # noqa: E402

MODELS = Path(__file__).with_name("exec_models.py")


def _traced(width=16, batch=4, dtype=torch.float32, loss="sum", optimizer="adam", origin=None):
    with torch.device("meta"):
        net = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 4)).to(dtype)
        x = torch.randn(batch, 8, dtype=dtype)
    cap = trace(net, (x,), LOSSES[loss], optimizer=optimizer)
    if origin is not None:
        cap.meta["origin"] = origin
    return cap


def _key(cap, model=None, root="cache") -> str:
    model = model or Measured()
    return cache_path("m", cap, model._cache_device(), root).name


def test_the_key_changes_with_every_part_and_only_then(tmp_path, monkeypatch):
    src = tmp_path / "net.py"
    src.write_text("def net(width=16):\n    pass\n")
    spec = f"{src}:net"
    base = _key(_traced(origin=model_origin(spec, {"width": 16})))
    assert base == _key(_traced(origin=model_origin(spec, {"width": 16}))), "nothing changed, the key must not"

    def edited_source():
        src.write_text("def net(width=16):\n    return None\n")
        try:
            return _key(_traced(origin=model_origin(spec, {"width": 16})))
        finally:
            src.write_text("def net(width=16):\n    pass\n")

    def faked(obj, attr, value):
        def key():
            with monkeypatch.context() as mp:
                mp.setattr(obj, attr, value)
                return _key(_traced(origin=model_origin(spec, {"width": 16})))
        return key

    changes = {
        "source text": edited_source,
        "factory args": lambda: _key(_traced(origin=model_origin(spec, {"width": 17}))),
        "parameter shapes": lambda: _key(_traced(width=32, origin=model_origin(spec, {"width": 16}))),
        "input shape": lambda: _key(_traced(batch=5, origin=model_origin(spec, {"width": 16}))),
        "dtype": lambda: _key(_traced(dtype=torch.float64, origin=model_origin(spec, {"width": 16}))),
        "loss": lambda: _key(_traced(loss="mse", origin=model_origin(spec, {"width": 16}))),
        "optimizer": lambda: _key(_traced(optimizer="sgd", origin=model_origin(spec, {"width": 16}))),
        "torch version": faked(torch, "__version__", "0.0.1"),
        "CPU model": faked(costs, "cpu_model", lambda: "Imaginary CPU 9000"),
        "threads": lambda: _key(_traced(origin=model_origin(spec, {"width": 16})), Measured(threads=2)),
        "zoo entry vs file": lambda: _key(_traced(origin=model_origin("lenet-5", {"width": 16}))),
    }
    keys = {part: change() for part, change in changes.items()}
    assert len(keys) == 11
    same = [part for part, k in keys.items() if k == base]
    assert not same, f"the cache key ignores: {same}"
    assert len(set(keys.values())) == len(keys), "two different changes gave one key"
    assert _key(_traced(origin=model_origin(spec, {"width": 16}))) == base, "restored: the same key again"


def test_capture_says_measured_then_from_the_cache_and_fresh_costs_measures(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DNNPLACE_PROFILE_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "tiny.py"
    shutil.copy(MODELS, model)
    out = tmp_path / "g.json"
    argv = ["capture", f"{model}:mlp", "--input", "4x8", "--param", "features=8", "--param", "width=16",
            "--cost", "measured:cpu", "--out", str(out)]

    def costs_line(*extra):
        assert main(argv + list(extra)) == 0
        lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("costs:")]
        assert len(lines) == 1, lines
        return lines[0]

    first = costs_line()
    files = list((tmp_path / "cache").glob("*.json"))
    assert first.startswith("costs: measured, written to ") and len(files) == 1 and str(files[0]) in first
    assert costs_line() == f"costs: from the cache {files[0]} (--fresh-costs re-measures)"
    before = files[0].stat().st_mtime_ns
    assert costs_line("--fresh-costs") == first
    assert files[0].stat().st_mtime_ns != before, "--fresh-costs overwrites the entry"
    # the model edited (a factory argument): measured again, into a second entry
    argv[argv.index("width=16")] = "width=12"
    assert costs_line().startswith("costs: measured, written to ")
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
    # roofline costs are not measured: no line
    assert main(argv[:argv.index("--cost")] + ["--out", str(out)]) == 0
    assert "costs:" not in capsys.readouterr().out
