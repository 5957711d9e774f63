"""The user's own models (dnnplace.pytorch.capture.models.load_model and ``dnnplace capture
FILE.py:FACTORY``): a model file and a package module captured through the CLI and the Python
API, the (model, inputs, loss_fn) form, --input/--loss overriding, seeded real builds, the
named losses, and one named InputError per kind of bad input."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

if os.environ.get("DNNPLACE_REQUIRE_TORCH") == "1":
    import torch  # CI installs the extra: a missing torch must fail, not skip
else:
    torch = pytest.importorskip("torch")

from dnnplace.cli import main  # noqa: E402
from dnnplace.graphs.errors import InputError  # noqa: E402
from dnnplace.graphs.io import load_instance  # noqa: E402
from dnnplace.pytorch.capture import capture  # noqa: E402
from dnnplace.pytorch.capture.models import LOSSES, load_model, parse_input  # noqa: E402

MLP = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(8, hidden)
        self.fc2 = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def full():
    model = Net()
    x = torch.randn(3, 8)
    return model, (x,), lambda out, x: out.square().mean()


def not_a_model():
    return 42


def tuple_of_junk():
    return 42, (torch.zeros(2, 8),), None


def broken():
    raise RuntimeError("boom in the factory")


def needs_values():
    # reading a value fails on the meta device: built on the CPU instead
    scale = float(torch.ones(1).item())
    return Net(hidden=int(4 * scale))


class Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).sum(dim=1)  # a 4-D input gives a 3-D output


NOT_CALLABLE = 3
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "mymodel.py"
    path.write_text(textwrap.dedent(MLP))
    return path


def _reference_graph(hidden=16, batch=4, loss=LOSSES["cross_entropy"]):
    """The same MLP built in the test: the graph a user file must give."""
    with torch.device("meta"):
        net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))
        x = torch.empty(batch, 8)
    return capture(net, (x,), loss).graph


def test_cli_captures_a_model_file(model_file, tmp_path, capsys):
    out = tmp_path / "net.json"
    assert main(["capture", f"{model_file}:Net", "--input", "4x8", "--loss", "cross_entropy",
                 "--out", str(out)]) == 0
    assert "mymodel-Net" in capsys.readouterr().out
    g = load_instance(out).graph
    ref = _reference_graph()
    assert (g.n, g.m) == (ref.n, ref.m) and g.n > 10
    assert sorted(g.op_types) == sorted(ref.op_types)
    roles = list(g.roles)
    assert roles.count("param") == 4 and roles.count("apply") == 4 and "grad" in roles
    assert int(g.backward.sum()) > 0 and g.meta["batch"] == 4
    assert g.meta["capture"]["inputs"] == [[[4, 8], "torch.float32"]]


def test_python_api_gives_the_cli_graph(model_file):
    model, inputs, loss_fn = load_model(f"{model_file}:Net", inputs=["4x8"], loss="cross_entropy")
    assert isinstance(model, torch.nn.Module) and model.training
    assert next(model.parameters()).device.type == "meta" and inputs[0].device.type == "meta"
    assert loss_fn is LOSSES["cross_entropy"]
    g = capture(model, inputs, loss_fn).graph
    ref = _reference_graph()
    assert (g.n, g.m, sorted(g.op_types)) == (ref.n, ref.m, sorted(ref.op_types))
    # the file's module is not left in sys.modules, nor its folder on sys.path
    assert not [m for m in sys.modules if m.startswith("_dnnplace_user_")]
    assert str(model_file.parent) not in sys.path


@pytest.fixture
def package_on_path(tmp_path, monkeypatch):
    pkg = tmp_path / "dnnplace_test_usernets"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mlp.py").write_text(textwrap.dedent(MLP))
    (pkg / "bad.py").write_text("import dnnplace_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg.name
    for name in [m for m in sys.modules if m.startswith(pkg.name)]:
        del sys.modules[name]


def test_package_module_factory_with_params(package_on_path):
    model, inputs, loss_fn = load_model(f"{package_on_path}.mlp:Net", inputs=["5x8"], params={"hidden": 32})
    assert tuple(model.fc1.weight.shape) == (32, 8) and tuple(inputs[0].shape) == (5, 8)
    assert loss_fn is LOSSES["sum"]  # the default
    g = capture(model, inputs, loss_fn).graph
    assert list(g.roles).count("param") == 4


def test_factory_tuple_form_and_overrides(model_file, tmp_path):
    spec = f"{model_file}:full"
    model, inputs, loss_fn = load_model(spec)
    assert tuple(inputs[0].shape) == (3, 8) and loss_fn not in LOSSES.values()
    assert inputs[0].device.type == "meta"  # built under the meta device
    # --input and --loss override the factory's own
    _, inputs2, loss2 = load_model(spec, inputs=["6x8"], loss="mse")
    assert tuple(inputs2[0].shape) == (6, 8) and loss2 is LOSSES["mse"]
    # through the CLI without --input: the factory's inputs and loss
    out = tmp_path / "full.json"
    assert main(["capture", spec, "--out", str(out)]) == 0
    g = load_instance(out).graph
    assert g.meta["batch"] == 3 and "mean" in g.op_types and "pow" in g.op_types


def test_real_builds_are_seeded_and_identical(model_file):
    spec = f"{model_file}:Net"
    state = torch.random.get_rng_state()
    a = load_model(spec, inputs=["4x8", "4x3:int64:7", "2x2:bool"], device="cpu")
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator is left alone
    torch.rand(7)  # a later call (or another process) starts from another global state
    b = load_model(spec, inputs=["4x8", "4x3:int64:7", "2x2:bool"], device="cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the documented contract: built under torch.manual_seed(0)
        assert torch.equal(a[0].fc1.weight, torch.nn.Linear(8, 16).weight)
    pa, pb = dict(a[0].named_parameters()), dict(b[0].named_parameters())
    assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    assert all(torch.equal(x, y) for x, y in zip(a[1], b[1], strict=True))
    assert a[1][0].dtype == torch.float32 and a[1][1].dtype == torch.int64 and a[1][2].dtype == torch.bool
    assert int(a[1][1].min()) >= 0 and int(a[1][1].max()) < 7
    assert a[0].fc1.weight.device.type == "cpu" and a[0].fc1.weight.abs().sum() > 0
    # the tuple form's own inputs are seeded too
    assert torch.equal(load_model(f"{model_file}:full", device="cpu")[1][0],
                       load_model(f"{model_file}:full", device="cpu")[1][0])
    # integers default to [0, 2), safe as a class label or token id of any model
    x = parse_input("64x64:int32", device="cpu")
    assert x.dtype == torch.int32 and set(x.unique().tolist()) == {0, 1}
    assert parse_input("2x2:float16").dtype == torch.float16 and parse_input("2x2:bfloat16").dtype == torch.bfloat16


def test_zoo_names_resolve_with_overrides():
    from dnnplace.pytorch.capture.zoo.losses import classification_loss
    model, inputs, loss_fn = load_model("lenet-5", batch=2, params={"width": 0.5})
    assert tuple(inputs[0].shape) == (2, 1, 32, 32) and loss_fn is classification_loss
    _, inputs, loss_fn = load_model("lenet-5", inputs=["3x1x32x32"], loss="mse")
    assert tuple(inputs[0].shape) == (3, 1, 32, 32) and loss_fn is LOSSES["mse"]
    # real zoo builds are seeded too: weights and the zoo's own inputs
    a = load_model("lenet-5", batch=2, device="cpu", params={"width": 0.5})
    torch.rand(7)
    b = load_model("lenet-5", batch=2, device="cpu", params={"width": 0.5})
    assert all(torch.equal(p, q) for p, q in zip(a[0].parameters(), b[0].parameters(), strict=True))
    assert torch.equal(a[1][0], b[1][0]) and a[1][0].device.type == "cpu"


def test_meta_build_falls_back_to_cpu(model_file):
    model, _, _ = load_model(f"{model_file}:needs_values", inputs=["2x8"])
    assert tuple(model.fc1.weight.shape) == (4, 8) and model.fc1.weight.device.type == "cpu"


def test_losses():
    y = torch.arange(6.0).reshape(2, 3)
    assert LOSSES["sum"](y).item() == 15.0
    assert LOSSES["sum"]((y, [y * 2], {"k": torch.ones(2, dtype=torch.long)})).item() == 45.0
    assert LOSSES["mse"](y).item() == pytest.approx((y ** 2).mean().item())
    ce = LOSSES["cross_entropy"](y)
    assert ce.item() == pytest.approx(torch.nn.functional.cross_entropy(y, torch.zeros(2, dtype=torch.long)).item())
    with pytest.raises(InputError, match=r"cross_entropy.*2-D.*\[2, 3, 1\]"):
        LOSSES["cross_entropy"](y[..., None])
    with pytest.raises(InputError, match="cross_entropy.*tuple"):
        LOSSES["cross_entropy"]((y, y))
    with pytest.raises(InputError, match="no floating point tensor"):
        LOSSES["sum"](torch.ones(2, dtype=torch.long))


@pytest.mark.parametrize("spec, kwargs, match", [
    ("{dir}/missing.py:Net", {"inputs": ["2x8"]}, r"model file '.*missing\.py' not found"),
    ("dnnplace_no_such_package.nets:Net", {"inputs": ["2x8"]},
     "module 'dnnplace_no_such_package.nets' is not importable"),
    ("{file}:Nett", {"inputs": ["2x8"]}, r"has no factory 'Nett'; it defines: .*Net"),
    ("{file}:NOT_CALLABLE", {"inputs": ["2x8"]}, "'NOT_CALLABLE' .* is an int, not a callable factory"),
    ("{file}:not_a_model", {"inputs": ["2x8"]}, "the factory returned an int; it must return an nn.Module"),
    ("{file}:tuple_of_junk", {}, "the factory's model is an int, not a torch.nn.Module"),
    ("{file}:broken", {"inputs": ["2x8"]}, "the factory raised RuntimeError: boom in the factory"),
    ("{file}:Net", {"inputs": ["2x8x"]}, "input '2x8x': malformed shape"),
    ("{file}:Net", {"inputs": ["2x8:float17"]}, "input '2x8:float17': unknown dtype 'float17'"),
    ("{file}:Net", {"inputs": ["2x8:float32:5"]}, "HIGH applies to integer dtypes only"),
    ("{file}:Net", {"inputs": ["2x8"], "loss": "hinge"}, "unknown loss 'hinge'; use one of: sum, mse, cross_entropy"),
    ("{file}:Net", {}, "the factory returns only a model; give its example inputs"),
    ("{file}:Net", {"inputs": ["2x8"], "batch": 4}, "batch apply to zoo models only"),
    ("{file}", {"inputs": ["2x8"]}, r"name the factory .*mymodel\.py:FACTORY"),
    ("resnet-51", {}, "unknown zoo model 'resnet-51'.*FILE.py:FACTORY"),
])
def test_bad_input_names_the_culprit(model_file, spec, kwargs, match):
    spec = spec.format(dir=model_file.parent, file=model_file)
    with pytest.raises(InputError, match=match):
        load_model(spec, **kwargs)


def test_module_with_a_missing_dependency_is_named(package_on_path):
    with pytest.raises(InputError, match="module .*bad' failed: No module named 'dnnplace_no_such_dependency'"):
        load_model(f"{package_on_path}.bad:Net", inputs=["2x8"])


def test_file_with_an_error_is_named(tmp_path):
    path = tmp_path / "typo.py"
    path.write_text("def Net(:\n")
    with pytest.raises(InputError, match=r"typo\.py' failed: SyntaxError"):
        load_model(f"{path}:Net", inputs=["2x8"])
    assert not [m for m in sys.modules if m.startswith("_dnnplace_user_typo")]


def test_file_imports_its_neighbours(tmp_path):
    (tmp_path / "dnnplace_test_layers.py").write_text("import torch\nWIDTH = 6\n")
    (tmp_path / "net.py").write_text(textwrap.dedent("""
        import torch
        from dnnplace_test_layers import WIDTH

        def make():
            return torch.nn.Linear(WIDTH, 2)
    """))
    try:
        model, _, _ = load_model(f"{tmp_path / 'net.py'}:make", inputs=["2x6"])
    finally:
        sys.modules.pop("dnnplace_test_layers", None)
    assert tuple(model.weight.shape) == (2, 6) and str(tmp_path) not in sys.path


@pytest.mark.parametrize("flags, match", [
    (["--batch", "4"], "--batch apply to zoo models only"),
    (["--tiled", "--layers", "2"], "--layers, --tiled apply to zoo models only"),
    (["--seq", "8"], "--seq apply to zoo models only"),
])
def test_cli_refuses_zoo_flags_for_user_models(model_file, tmp_path, capsys, flags, match):
    out = tmp_path / "g.json"
    assert main(["capture", f"{model_file}:Net", "--input", "4x8", *flags, "--out", str(out)]) == 2
    assert match in capsys.readouterr().err and not out.exists()


def test_cli_names_a_loss_that_does_not_fit(model_file, tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["capture", f"{model_file}:Seq", "--input", "2x3x4x8", "--loss", "cross_entropy",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "cross_entropy" in err and "[2, 4, 8]" in err and not out.exists()
    assert main(["capture", "lenet-5", "--batch", "2", "--input", "2x1x32x32", "--out", str(out)]) == 2
    assert "leave out --batch" in capsys.readouterr().err
