"""Contiguous max-load splits of forward models run as pipelines (torch.distributed.pipelining).

The max-load DP splits tests/exec_models.py:mlp (captured with --inference) over two
accelerators; GPipe and 1F1B over 4 micro-batches must give every step's loss and every
parameter gradient of an eager single-process step. Stage modules are also checked in
this process (chained stages equal the model, forward and backward), and bad splits are
refused before any process starts.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch") if not os.environ.get("DNNPLACE_REQUIRE_TORCH") else __import__("torch")

from dnnplace.graphs.errors import InputError  # noqa: E402
from dnnplace.pytorch.capture.fx import trace  # noqa: E402
from dnnplace.pytorch.execution.pipeline import loss_kind, run_pipeline  # noqa: E402
from dnnplace.pytorch.execution.pipeline_stages import build_stages, stage_order  # noqa: E402
from dnnplace.pytorch.execution.worker import ModelSpec, load  # noqa: E402

MODELS_FILE = str(Path(__file__).with_name("exec_models.py"))
MLP = ModelSpec(spec=f"{MODELS_FILE}:mlp", inputs=("32x64",), loss="sum")
N_PARAMS = 6   # three linear layers


def forward_ids(ms: ModelSpec) -> list[str]:
    net, inputs, _ = load(ms)
    return list(trace(net, inputs, training=False).ids)


def by_layer(ids: list[str], first: set[str], a: str = "gpu0", b: str = "gpu1") -> dict[str, str]:
    """Layer 0 (and the input) on ``a``, the rest on ``b``."""
    return {v: a if v in first else b for v in ids}


FIRST = {"input:input0", "param:0.weight", "param:0.bias", "addmm", "relu"}


@pytest.fixture(scope="module")
def dp_result(tmp_path_factory):
    """The max-load DP's split of the MLP's forward graph on tarnawski-2-1-16GB, as a result file."""
    from dnnplace.formulations.solvers.options import SolverOptions
    from dnnplace.graphs.instance import Instance
    from dnnplace.graphs.io import write_json
    from dnnplace.graphs.presets import cluster_preset
    from dnnplace.methods.base import SolveRequest
    from dnnplace.pytorch.capture import capture
    from dnnplace.registry import solve
    net, inputs, loss_fn = load(MLP, device="meta")
    inst = capture(net, inputs, loss_fn, training=False, name="mlp")
    cluster = cluster_preset("tarnawski-2-1-16GB", graph=inst.graph)   # accelerators of the graph's kind
    inst = Instance(inst.graph, cluster, inst.source)
    res = solve(inst, "dp", SolveRequest("maxload", solver=SolverOptions(time_limit=30)))
    assert res.status in ("optimal", "feasible"), res.message
    used = sorted(set(res.placement.values()))
    assert len(used) == 2, res.placement   # a real two-stage split
    tmp = tmp_path_factory.mktemp("pipe")
    path = tmp / "dp.json"
    write_json(path, {"problem": "maxload", "placement": res.placement, "objective": res.objective,
                      "unit": inst.graph.unit})
    return path, res, list(cluster.names)


# ---------------------------------------------------------------------------- in this process
def test_stages_chain_to_the_model_forward_and_backward():
    """Stage modules of the DP-like split, chained in this process: output and gradients
    equal the model's (three stages, with a parameter sent to a later stage and a value
    passed through a middle stage)."""
    net, inputs, loss_fn = load(MLP)
    ids = forward_ids(MLP)
    # layer 0 on a; layer 1's compute on b but its weight on a (sent like an activation);
    # layer 2 on c, which also reads a value from a (layer 2's weight) through b
    pl = {v: "c" for v in ids}
    pl.update({v: "a" for v in FIRST | {"param:2.weight", "param:4.weight"}})
    pl.update({"param:2.bias": "b", "addmm_1": "b", "relu_1": "b"})
    st = build_stages(net, inputs, pl)
    assert st.devices == ["a", "b", "c"]
    assert sorted(st.params[0].values()) == ["0.bias", "0.weight", "2.weight", "4.weight"]
    assert "pvals_5" in st.recv[1] and "pvals_5" in st.recv[2]   # passed through stage b
    x = inputs[0]
    out = x
    vals: tuple = (x,)
    for mod in st.modules:
        vals = mod(*vals)
    out = vals[0]
    ref = net(x)
    assert torch.allclose(out, ref, atol=1e-6)
    loss_fn(out, x).backward()
    ours = {k: p.grad.clone() for k, p in net.named_parameters()}
    net.zero_grad()
    loss_fn(net(x), x).backward()
    assert len(ours) == N_PARAMS
    for k, p in net.named_parameters():
        assert torch.allclose(ours[k], p.grad, atol=1e-5), k


def chain(stages, inputs: tuple) -> tuple[tuple, list]:
    """Run the stage modules one after the other in this process, each first through
    torch.save/torch.load as a stage's process gets it; the outputs and the loaded modules."""
    import io
    vals, mods = tuple(inputs), []
    for mod in stages.modules:
        buf = io.BytesIO()
        torch.save(mod, buf)
        buf.seek(0)
        mods.append(torch.load(buf, weights_only=False))
        vals = mods[-1](*vals)
        assert isinstance(vals, tuple) and vals
    return vals, mods


def stage_grads(stages, mods) -> dict:
    """Gradients of the loaded stage modules by model parameter name."""
    return {stages.params[s][k]: p.grad for s, mod in enumerate(mods) for k, p in mod.named_parameters()
            if p.grad is not None}


def contiguous_split(ids: list[str], src, dst, k: int) -> dict[str, str]:
    """k stages of equal numbers of operators in trace order; sources with their first consumer."""
    comp = [i for i, v in enumerate(ids) if not v.startswith(("param:", "input:", "buffer:"))]
    stage = {i: j * k // len(comp) for j, i in enumerate(comp)}
    for i in range(len(ids)):
        if i not in stage:
            stage[i] = min((stage[int(d)] for s_, d in zip(src, dst) if s_ == i), default=0)
    return {v: f"d{stage[i]}" for i, v in enumerate(ids)}


SPECS = {"mlp": ("32x64",), "cnn": ("8x3x16x16",), "lstm": ("8x4x16",), "transformer": ("4x8x32",),
         "inception": ("4x16x12x12",), "two_towers": ("16x64",)}


@pytest.mark.parametrize("name", list(SPECS))
def test_three_stage_modules_equal_the_model(name):
    """The executor's six test models (batch norm buffers, LSTM cells unrolled, attention,
    parallel branches) cut into three stages: chained stage modules give the model's
    output and, through autograd, every parameter's gradient."""
    ms = ModelSpec(spec=f"{MODELS_FILE}:{name}", inputs=SPECS[name], loss="sum",
                   params={"width": 64} if name == "two_towers" else {})
    net, inputs, loss_fn = load(ms)
    net.eval()
    cap = trace(net, inputs, training=False)
    st = build_stages(net, inputs, contiguous_split(cap.ids, cap.src.tolist(), cap.dst.tolist(), 3))
    assert st.devices == ["d0", "d1", "d2"]
    vals, mods = chain(st, inputs)
    out = vals[0] if len(vals) == 1 else vals
    ref = net(*inputs)
    assert torch.allclose(out, ref, atol=1e-5)
    loss_fn(out, *inputs).backward()
    ours = stage_grads(st, mods)
    loss_fn(ref, *inputs).backward()
    assert len(ours) == len(list(net.parameters())) > 0
    for k, p in net.named_parameters():
        assert torch.allclose(ours[k], p.grad, atol=1e-4), (name, k)
    assert sorted(v for p in st.params for v in p.values()) == sorted(k for k, _ in net.named_parameters())


class Transposed(torch.nn.Module):
    """A non-contiguous value crosses stages (relu keeps its input's transposed strides)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 6)
        self.b = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.a(x).t().relu()          # [6, 4], column-major
        return self.b(y.t().reshape(4, 6)[:, :4])


def test_non_contiguous_values_are_sent_contiguous_and_restrided():
    net = Transposed()
    x = torch.randn(4, 8)
    ids = list(trace(net, (x,), training=False).ids)
    relu = next(v for v in ids if v.startswith("relu"))
    first = {"input:input0", "param:a.weight", "param:a.bias", "addmm", relu}
    st = build_stages(net, (x,), {v: "a" if v in first else "b" for v in ids})
    sent = st.modules[0](x)
    assert len(sent) == 1 and sent[0].is_contiguous()
    assert "restride" in st.modules[1].code and "contiguous" in st.modules[0].code
    assert torch.allclose(chain(st, (x,))[0][0], net(x))


def test_gradients_sent_back_are_contiguous():
    """Inception's branches meet in a concatenation: the gradients of the received
    branch outputs are slices of its gradient. The stage module, as its process loads it,
    still hands them back contiguous (gloo sends contiguous tensors only)."""
    ms = ModelSpec(spec=f"{MODELS_FILE}:inception", inputs=SPECS["inception"], loss="sum")
    net, inputs, _ = load(ms)
    net.eval()
    cap = trace(net, inputs, training=False)
    st = build_stages(net, inputs, contiguous_split(cap.ids, cap.src.tolist(), cap.dst.tolist(), 2))
    _, mods = chain(st, inputs)
    assert "grad_contiguous" in mods[1].code   # kept through torch.save / torch.load
    sent = [t.detach().requires_grad_(t.requires_grad) for t in st.modules[0](*inputs)]
    leaves = [t for t in sent if t.requires_grad]
    assert len(leaves) >= 2
    grads = torch.autograd.grad(mods[1](*sent)[0].sum(), leaves)
    assert all(g.is_contiguous() for g in grads)


def test_non_contiguous_split_is_refused():
    ids = forward_ids(MLP)
    pl = by_layer(ids, FIRST)
    pl["relu_1"] = "gpu0"   # layer 1's activation back on the first device: gpu1 -> gpu0 -> gpu1
    net, inputs, _ = load(MLP)
    with pytest.raises(InputError, match=r"not contiguous: node 'addmm_1' on stage 1 \(gpu1\) feeds node "
                                         r"'relu_1' on stage 0 \(gpu0\)"):
        build_stages(net, inputs, pl)
    with pytest.raises(InputError, match="not contiguous"):   # refused before any process starts
        run_pipeline(MLP, pl, ["gpu0", "gpu1"], microbatches=4)


def test_stage_order_follows_the_first_node_not_the_parameters():
    """Parameters come first in the trace; a device holding the last layer's parameters
    and the first layer's compute is still stage 0 when its first consumer is."""
    ids = ["param:w2", "param:w1", "input:input0", "mm1", "mm2"]
    src, dst = [2, 1, 3, 0], [3, 3, 4, 4]
    pl = {"param:w2": "late", "param:w1": "early", "input:input0": "early", "mm1": "early", "mm2": "late"}
    devices, stage = stage_order(ids, src, dst, pl)
    assert devices == ["early", "late"] and stage.tolist() == [1, 0, 0, 0, 1]


def test_other_refusals():
    ids = forward_ids(MLP)
    pl = by_layer(ids, FIRST)
    with pytest.raises(InputError, match="captured with --inference"):
        run_pipeline(MLP, {**pl, "apply:0.weight": "gpu0"}, ["gpu0", "gpu1"])
    with pytest.raises(InputError, match="does not place node"):
        run_pipeline(MLP, {k: v for k, v in pl.items() if k != "relu"}, ["gpu0", "gpu1"])
    with pytest.raises(InputError, match="must divide the batch size 32"):
        run_pipeline(MLP, pl, ["gpu0", "gpu1"], microbatches=3)
    with pytest.raises(InputError, match="1F1B needs at least as many micro-batches as stages"):
        run_pipeline(MLP, pl, ["gpu0", "gpu1"], microbatches=1, schedule="1f1b")
    with pytest.raises(InputError, match="unknown schedule"):
        run_pipeline(MLP, pl, ["gpu0", "gpu1"], schedule="interleaved")


def test_loss_kinds():
    y = torch.randn(8, 3)
    from dnnplace.pytorch.capture.models import LOSSES
    assert loss_kind(y, (y,), LOSSES["sum"], 4) == "sum"
    assert loss_kind(y, (y,), LOSSES["mse"], 4) == "mean"
    assert loss_kind(y, (y,), LOSSES["cross_entropy"], 2) == "mean"
    with pytest.raises(InputError, match="neither a sum nor a batch mean"):
        loss_kind(y, (y,), lambda o, *x: o.sum() ** 2, 4)


# ---------------------------------------------------------------------------- processes
def test_dp_split_gpipe_through_the_cli(dp_result, tmp_path, capfd):
    """``dnnplace execute --pipeline`` on the DP's split: GPipe, M=4, loss and all six
    gradients equal one process; the JSON has the measurement and the max-load objective."""
    from dnnplace.cli import main
    path, res, _ = dp_result
    out = tmp_path / "run.json"
    rc = main(["execute", f"{MODELS_FILE}:mlp", str(path), "--input", "32x64", "--loss", "sum", "--pipeline",
               "--microbatches", "4", "--schedule", "gpipe", "--steps", "2", "--warmup", "1", "--timeout", "120",
               "--out", str(out)])
    assert rc == 0, capfd.readouterr()
    doc = json.loads(out.read_text())
    assert doc["matches_reference"] is True and doc["grads_checked"] == N_PARAMS and doc["losses_checked"] == 3
    assert doc["max_abs_grad_diff"] <= 1e-4
    assert doc["schedule"] == "gpipe" and doc["microbatches"] == 4 and len(doc["stages"]) == 2
    assert doc["maxload_objective"] == pytest.approx(res.objective)
    assert doc["measured_per_sample_ms"] == pytest.approx(doc["measured_step_ms"] / 32)
    assert doc["measured_step_ms"] > 0
    assert sorted(p for s in doc["stages"] for p in s["params"]) == sorted(
        v.split(":", 1)[1] for v in res.placement if v.startswith("param:"))
    got = capfd.readouterr()
    assert "max-load objective" in got.out and "matches the eager step: yes" in got.out
    assert "not a prediction of the training step" in got.out and doc["maxload_is"].startswith("the forward graph")
    # the live lines show the JSON's step times (docs/execution.md, Timing)
    live = re.findall(r"^pipeline step \d+/3: ([0-9.]+) ms$", got.err, re.M)   # warm-up lines excluded
    assert live == [f"{t:.2f}" for t in doc["measured_steps_ms"]] and len(live) == 2, (live, got.err[-2000:])


def test_dp_split_1f1b_mean_loss(dp_result):
    """1F1B, M=4, a mean-type loss (mse): micro-batch losses weighted 1/M, gradients exact."""
    path, res, names = dp_result
    ms = ModelSpec(spec=MLP.spec, inputs=MLP.inputs, loss="mse")
    m = run_pipeline(ms, res.placement, names, microbatches=4, schedule="1f1b", steps=1, warmup=1, timeout_s=120)
    assert m.loss_kind == "mean"
    assert m.matches_reference, (m.max_abs_grad_diff, m.loss, m.reference_loss)
    assert m.n_grads_checked == N_PARAMS and m.n_losses_checked == 2
    assert m.loss == pytest.approx(m.reference_loss, rel=1e-5)


def test_three_stages_with_a_parameter_sent_on():
    """Three processes, a parameter held by stage 0 and read by stage 2 (passed through
    stage 1), cross-entropy loss, GPipe: loss and gradients equal one process."""
    ids = forward_ids(MLP)
    pl = {v: "c" for v in ids}
    pl.update({v: "a" for v in FIRST | {"param:4.weight"}})
    pl.update({"param:2.weight": "b", "param:2.bias": "b", "addmm_1": "b", "relu_1": "b"})
    ms = ModelSpec(spec=MLP.spec, inputs=MLP.inputs, loss="cross_entropy", optimizer="sgd", lr=0.1)
    m = run_pipeline(ms, pl, microbatches=4, schedule="gpipe", steps=1, warmup=1, timeout_s=120)
    assert [s["device"] for s in m.stages] == ["a", "b", "c"]
    assert m.matches_reference, (m.max_abs_grad_diff, m.loss, m.reference_loss)
    assert m.n_grads_checked == N_PARAMS and m.max_abs_grad_diff <= 1e-4


def test_one_stage_pipeline():
    ids = forward_ids(MLP)
    m = run_pipeline(MLP, {v: "gpu0" for v in ids}, ["gpu0"], microbatches=4, schedule="1f1b", steps=1,
                     warmup=1, timeout_s=120)
    assert len(m.stages) == 1 and m.stages[0]["received"] == 0
    assert m.matches_reference and m.n_grads_checked == N_PARAMS


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SPECS))
def test_six_models_three_stage_pipelines(name):
    """Every executor test model as a three-process GPipe pipeline (cross-entropy, Adam):
    every step's loss and every gradient equal one process."""
    ms = ModelSpec(spec=f"{MODELS_FILE}:{name}", inputs=SPECS[name], loss="cross_entropy",
                   params={"width": 64} if name == "two_towers" else {})
    net, inputs, _ = load(ms)
    cap = trace(net, inputs, training=False)
    pl = contiguous_split(cap.ids, cap.src.tolist(), cap.dst.tolist(), 3)
    m = run_pipeline(ms, pl, microbatches=2, schedule="gpipe", steps=2, warmup=1, timeout_s=180)
    assert m.matches_reference, (name, m.max_abs_grad_diff, m.loss, m.reference_loss)
    assert m.n_grads_checked == len(list(net.parameters())) and m.n_losses_checked == 3
