"""The model zoo: published parameter counts, output shapes, a gradient for every
parameter, blocks, export, and bad input.

Parameter counts are exact where the architecture paper (or its released model) fixes
them; they are counted on the ``meta`` device, so no weights are allocated."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dnnplace.graphs.errors import InputError
from dnnplace.pytorch.capture.zoo import TILEABLE, ZOO, block, build, entry

torch = pytest.importorskip("torch")

# name -> (parameters, what the number is)
PUBLISHED = {
    "lenet-5": (61_706, "LeNet-5 with dense C3 (LeCun et al. 1998: ~60k with sparse C3)"),
    "alexnet": (60_965_224, "AlexNet with grouped conv2/4/5 (Krizhevsky et al. 2012: 60M)"),
    "vgg-19": (143_667_240, "VGG-19, configuration E (Simonyan & Zisserman 2015: 144M)"),
    "resnet-50": (25_557_032, "ResNet-50 (He et al. 2016: 25.6M)"),
    "resnet-200": (64_673_832, "ResNet-200 bottleneck (3, 24, 36, 3) (He et al. 2016b: 64.7M)"),
    "inception-v3": (27_161_264, "Inception-V3 with the auxiliary classifier (27.2M; 23.8M without)"),
    # BERT: encoder without pooler 108,891,648 / 334,092,288 plus an untied MLM head
    "bert-base": (108_891_648 + 24_063_546, "BERT-base encoder (110M incl. pooler) + untied MLM head"),
    "bert-large": (334_092_288 + 32_336_698, "BERT-large encoder (335M incl. pooler) + untied MLM head"),
    # GPT-2: tied counts 124,439,808 / 1,557,611,200 plus the untied head, hidden x vocab
    "gpt2": (124_439_808 + 768 * 50257, "GPT-2 small (124M tied) + untied LM head"),
    "gpt2-xl": (1_557_611_200 + 1600 * 50257, "GPT-2 XL (1.5B tied) + untied LM head"),
    "nasnet-4x44": (5_289_978, "NASNet-A Mobile 4 @ 1056 (Zoph et al. 2018: 5.3M)"),
}
APPROX = {  # published figures given to one or two digits: name -> (millions, relative tolerance)
    "nasnet-6x168": (88.9, 0.01),  # NASNet-A Large 6 @ 4032, 88.9M (with its auxiliary head)
    # Vaswani Table 3: base 65M, big 213M with shared embeddings; untied adds 2 x vocab x d_model
    "transformer-big": (213 + 2 * 37000 * 1024 / 1e6, 0.01),
    "transformer-base": (65 + 2 * 37000 * 512 / 1e6, 0.025),
}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny CPU runs: intra-op threads only contend on a shared machine (100x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_listing_needs_no_build():
    assert len(ZOO) >= 30
    assert {e.family for e in ZOO.values()} >= {"resnet", "inception", "vgg", "alexnet", "lenet", "bert", "gpt2",
                                                "transformer", "nmt", "gnmt", "rnnlm", "nasnet"}
    # the papers' variants (Pesto Sec. 5.1, FastT Table 1, Celeritas Sec. 6.1) are one name each
    for name in ("rnnlm-2x2048", "rnnlm-4x2048", "rnnlm-16x1024", "nmt-2x1024", "nmt-4x1024", "nmt-4x2048",
                 "transformer-10l-8h-1024", "transformer-12l-8h-1024", "transformer-6l-16h-2048",
                 "transformer-12l-16h-2048", "nasnet-4x212", "nasnet-6x148", "nasnet-6x168", "gnmt-4",
                 "resnet-200", "vgg-19", "inception-v3", "bert-large", "alexnet", "lenet-5"):
        assert name in ZOO, name
    assert ZOO["rnnlm-16x1024"].defaults["batch"] == 128 and ZOO["nasnet-4x212"].defaults["batch"] == 32


def test_listing_without_torch():
    """With torch unimportable the zoo still lists; building names the extra to install."""
    code = textwrap.dedent("""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ImportError("no torch")
        sys.meta_path.insert(0, NoTorch())
        from dnnplace.pytorch.capture import zoo
        from dnnplace.graphs.errors import InputError
        print(len(zoo.ZOO))
        try:
            zoo.build("resnet-50")
        except InputError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == str(len(ZOO)) and "pip install 'dnnplace[torch]'" in out[1]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name):
    model, _, _ = build(name)
    assert next(model.parameters()).device.type == "meta"
    assert n_params(model) == PUBLISHED[name][0], PUBLISHED[name][1]


@pytest.mark.parametrize("name", sorted(APPROX))
def test_approximate_parameter_counts(name):
    millions, rel = APPROX[name]
    model, _, _ = build(name)
    assert n_params(model) / 1e6 == pytest.approx(millions, rel=rel)


def test_parameter_count_relations():
    """Without its auxiliary classifier Inception-V3 has 23,834,568 parameters; BERT-large's
    encoder is the 335M of the paper less its pooler; a decoder of our Transformer has one
    attention more than an encoder layer."""
    assert n_params(build("inception-v3", aux=False)[0]) == 23_834_568
    bert = build("bert-large")[0]
    assert n_params(bert) - n_params(bert.mlm) == 335_141_888 - (1024 * 1024 + 1024)
    enc, _ = block("transformer-base")
    dec, _ = block("transformer-base", part="decoder")
    assert n_params(dec) - n_params(enc) == 4 * (512 * 512 + 512) + 2 * 512


# every model at its default widths on meta, fewer layers / steps / cells (a meta run costs
# per operator, not per FLOP); the full sizes run in the slow test below
FORWARD_OVERRIDES = {"rnnlm": {"seq": 4}, "nmt": {"seq": 4}, "gnmt": {"seq": 4}, "nasnet": {"cells": 1},
                     "resnet": {"stages": (1, 2, 2, 1)}, "bert": {"layers": 2}, "gpt2": {"layers": 2, "seq": 64},
                     "transformer": {"layers": 2}}


def _expected_shape(e, params) -> tuple:
    if e.family in ("bert", "gpt2", "transformer", "rnnlm", "nmt", "gnmt"):
        return (params["batch"], params["seq"], params["vocab"])
    return (params["batch"], params["classes"])


@pytest.mark.parametrize("name", sorted(ZOO))
def test_meta_forward_shapes(name):
    _forward_shapes(name, FORWARD_OVERRIDES.get(entry(name).family, {}))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ZOO))
def test_meta_forward_shapes_full_size(name):
    _forward_shapes(name, {})


def _forward_shapes(name, over):
    e = entry(name)
    model, inputs, loss_fn = build(name, **over)
    params = {**e.defaults, **over}
    out = model(*inputs)
    main = out[0] if isinstance(out, tuple) else out
    assert main.device.type == "meta" and tuple(main.shape) == _expected_shape(e, params)
    if isinstance(out, tuple):  # Inception's auxiliary logits
        assert tuple(out[1].shape) == tuple(main.shape)
    assert loss_fn(out, *inputs).shape == ()


# tiny real variants: every parameter must receive a gradient from the loss
TINY = {
    "lenet-5": {"batch": 2},
    "alexnet": {"batch": 2, "width": 1 / 16, "image": 67, "classes": 10},
    "vgg-19": {"batch": 2, "width": 1 / 16, "image": 32, "classes": 10},
    "resnet-50": {"batch": 2, "width": 1 / 16, "image": 32, "classes": 10},
    "inception-v3": {"batch": 2, "width": 1 / 16, "classes": 10},  # the auxiliary head needs 299x299
    "bert-large": {"batch": 2, "seq": 8, "layers": 2, "hidden": 32, "heads": 4, "ffn": 64, "vocab": 50,
                   "positions": 16},
    "gpt2": {"batch": 2, "seq": 8, "layers": 2, "hidden": 32, "heads": 4, "vocab": 50, "positions": 16},
    "transformer-6l-16h-2048": {"batch": 2, "seq": 6, "layers": 2, "hidden": 32, "heads": 4, "ffn": 64,
                                "vocab": 50},
    "rnnlm-2x2048": {"batch": 2, "seq": 5, "hidden": 16, "vocab": 40},
    "nmt-2x1024": {"batch": 2, "seq": 5, "hidden": 16, "vocab": 40},
    "gnmt-4": {"batch": 2, "seq": 5, "hidden": 16, "vocab": 40},
    "nasnet-6x168": {"batch": 2, "cells": 1, "filters": 8, "image": 32, "stem_multiplier": 1, "classes": 10},
}


def test_tiny_variants_cover_every_family():
    assert {entry(n).family for n in TINY} == {e.family for e in ZOO.values()}


@pytest.mark.parametrize("name", sorted(TINY))
def test_every_parameter_gets_a_gradient(name):
    torch.manual_seed(0)
    model, inputs, loss_fn = build(name, device="cpu", **TINY[name])
    loss = loss_fn(model(*inputs), *inputs)
    assert math.isfinite(loss.item()) and loss.item() > 0
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    nonzero = sum(int(p.grad.abs().sum() > 0) for p in model.parameters())
    assert nonzero >= 0.9 * len(list(model.parameters()))


BLOCKS = [("bert-large", {}), ("gpt2", {}), ("transformer-big", {"part": "encoder"}),
          ("transformer-big", {"part": "decoder"}), ("rnnlm-16x1024", {"part": "step"}),
          ("rnnlm-16x1024", {"part": "layer", "seq": 3}), ("nmt", {}), ("gnmt-4", {"part": "step"}),
          ("nasnet-6x168", {"part": "normal"}), ("nasnet-6x168", {"part": "reduction"})]


@pytest.mark.parametrize(("name", "over"), BLOCKS)
def test_blocks(name, over):
    """A block's parameters are exactly one repeating unit of the full model."""
    module, inputs = block(name, **over)
    out = module(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    e = ZOO[name] if name in ZOO else next(x for x in ZOO.values() if x.family == name)
    p = e.defaults
    part = over.get("part")
    if e.family in ("bert", "gpt2", "transformer"):
        assert outs[0].shape == inputs[0].shape
        model = build(e.name)[0]
        layers = model.decoder if part == "decoder" else model.encoder if part else model.layers
        assert n_params(module) == n_params(layers[0])
    elif e.family == "nasnet":
        f = p["filters"]
        assert outs[0].shape[1] == (6 * f if part == "normal" else 8 * f)
    else:
        h = p["hidden"]
        assert [tuple(o.shape) for o in outs][-2:] == [(p["batch"], h), (p["batch"], h)]
        assert n_params(module) == 8 * h * h + 8 * h
    assert e.family in TILEABLE


def test_nasnet_cells_and_wiring():
    """3 stacks of N normal cells, 2 stem and 2 body reductions; the cell after a body
    reduction takes that reduction's prev input (Zoph et al. Fig. 2; skips the reduction)."""
    model = build("nasnet-6x168")[0]
    kinds = [type(c).__name__[0] for c in model.cells]
    assert "".join(kinds) == "RR" + "N" * 6 + "R" + "N" * 6 + "R" + "N" * 6
    red = 8  # index of the first body reduction among the cells; outputs are offset by one (stem)
    assert model.wiring[red + 1] == (red + 1, model.wiring[red][1])


def test_dtype_and_overrides():
    model, inputs, _ = build("lenet-5", batch=3, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16 and inputs[0].shape[0] == 3
    model, inputs, _ = build("rnnlm-2x2048", seq=7, layers=3)
    assert tuple(inputs[0].shape) == (128, 7) and len(model.layers) == 3


def test_bad_input():
    with pytest.raises(InputError, match=r"unknown zoo model 'resnet-51'; the zoo: alexnet, bert-base"):
        build("resnet-51")
    with pytest.raises(InputError, match=r"'vgg-19' has no parameter 'seq'"):
        build("vgg-19", seq=4)
    with pytest.raises(InputError, match=r"has no parameter 'hiden'; it takes: .*hidden"):
        build("bert-base", hiden=8)
    with pytest.raises(InputError, match=r"'resnet-50' \(resnet\) has no repeating block; tileable families"):
        block("resnet-50")
    with pytest.raises(InputError, match=r"unknown zoo model or family 'lstm'"):
        block("lstm")
    with pytest.raises(InputError, match=r"part 'middle' is not 'normal' or 'reduction'"):
        block("nasnet", part="middle")
    with pytest.raises(InputError, match=r"seq 2048 exceeds the model's 1024 positions"):
        build("gpt2", seq=2048)
    with pytest.raises(InputError, match=r"hidden size 100 is not a multiple of heads 16"):
        build("bert-large", hidden=100)
    with pytest.raises(InputError, match=r"not a floating point torch dtype"):
        build("lenet-5", dtype="int8")


EXPORT_FAST = ["lenet-5", "gpt2", "rnnlm-2x2048"]


def _export(name):
    model, inputs, _ = build(name, **TINY[name])
    ep = torch.export.export(model, inputs)
    return sum(n.op == "call_function" for n in ep.graph.nodes)


@pytest.mark.parametrize("name", EXPORT_FAST)
def test_export_small_variants(name):
    assert _export(name) > 10


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(TINY) - set(EXPORT_FAST)))
def test_export_small_variants_slow(name):
    assert _export(name) > 10


def _captured(name, **over):
    from dnnplace.pytorch.capture import capture

    model, inputs, loss_fn = build(name, **over)
    return capture(model, inputs, loss_fn, name=name).graph, len(list(model.parameters()))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet-50", "rnnlm-2x2048", "nasnet-4x44"])
def test_capture_zoo_models(name):
    """Full-size training graphs: one param and one optimizer-apply node per parameter
    tensor, gradients (a batch norm's weight and bias gradients come from one backward
    operator, so there can be fewer grad nodes than tensors), forward and backward."""
    g, tensors = _captured(name)
    roles = {r: int((np.asarray(g.roles) == r).sum()) for r in ("param", "grad", "apply", "compute")}
    print(f"\n{name}: {g.n} nodes, {g.m} edges, {int(g.backward.sum())} backward, {roles}")
    assert roles["param"] == roles["apply"] == tensors
    assert 0 < roles["grad"] <= tensors
    assert 0 < int(g.backward.sum()) < g.n


@pytest.mark.slow
@pytest.mark.parametrize(("name", "key", "tiny"), [
    ("rnnlm-2x2048", "seq", {"batch": 2, "hidden": 16, "vocab": 40}),
    ("nmt-2x1024", "seq", {"batch": 2, "hidden": 16, "vocab": 40}),
    ("gpt2", "layers", {"batch": 2, "seq": 8, "hidden": 32, "heads": 4, "vocab": 50}),
    ("nasnet-4x44", "cells", {"batch": 2, "filters": 8, "image": 32, "stem_multiplier": 1, "classes": 10})])
def test_captured_size_grows_by_one_unit_per_step(name, key, tiny):
    """Unrolled steps, layers and cells are separate operators: each extra one adds the
    same number of nodes (an LSTM step, a Transformer layer; three NASNet cells, one per
    stack). From 3 on: with 2 steps the first step's zero state and the shifted loss make
    a boundary case."""
    sizes = [_captured(name, **tiny, **{key: k})[0].n for k in (3, 4, 5)]
    assert sizes[1] - sizes[0] == sizes[2] - sizes[1] > 0, sizes
