"""``dnnplace execute`` and ``dnnplace capture`` check what they are given before any work
(docs/bad-input.md, "Execution and capture"): a plan run at another batch or with another
loss than it was captured with, flags out of range, flags that do not go together, a
factory that exits, a batch of 0, an integer input fed to a float layer, torch's own
tracebacks, an interrupted run. Each refusal is exit 2 and one ``dnnplace: error:`` line,
nothing on stdout, no output file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch") if not os.environ.get("DNNPLACE_REQUIRE_TORCH") else __import__("torch")

from dnnplace.cli import main  # noqa: E402

MODEL = f"{Path(__file__).with_name('exec_models.py')}:mlp"


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Path:
    """The MLP captured at batch 32 with loss mse (measured:cpu costs) and HEFT's plan of it
    on local-cpu-2."""
    tmp = tmp_path_factory.mktemp("plan")
    g, res = tmp / "g.json", tmp / "r.json"
    assert main(["capture", MODEL, "--input", "32x64", "--loss", "mse", "--cost", "measured:cpu", "--out",
                 str(g)]) == 0
    assert main(["solve", str(g), "--cluster", "local-cpu-2", "--problem", "makespan", "--method", "heft",
                 "--out", str(res)]) == 0
    return res


def refused(capfd, argv: list[str], *, out: Path | None = None) -> str:
    """Run ``dnnplace ARGV``: exit 2, one stderr line, nothing on stdout; that line."""
    capfd.readouterr()
    rc = main([str(a) for a in argv])
    got = capfd.readouterr()
    lines = got.err.strip().splitlines()
    assert rc == 2 and got.out == "" and len(lines) == 1, (rc, got.out, got.err[-3000:])
    assert lines[0].startswith("dnnplace: error: ")
    assert out is None or not out.exists()
    return lines[0]


def test_execute_refuses_a_plan_captured_at_another_batch(plan, capfd, tmp_path):
    line = refused(capfd, ["execute", MODEL, plan, "--input", "16x64", "--loss", "mse", "--out", tmp_path / "o.json"],
                   out=tmp_path / "o.json")
    assert "32x64:float32" in line and "16x64:float32" in line and "batch 32, not 16" in line, line
    assert "--input 32x64:float32" in line


def test_execute_names_the_loss_the_plan_was_captured_with(plan, capfd):
    line = refused(capfd, ["execute", MODEL, plan, "--input", "32x64"])   # no --loss: sum
    assert "captured with loss 'mse'" in line and "pass --loss mse" in line and "'sum'" in line, line
    line = refused(capfd, ["execute", MODEL, plan, "--input", "32x64", "--loss", "cross_entropy"])
    assert "pass --loss mse" in line, line


def test_zoo_plan_names_the_batch_and_the_zoo_loss(tmp_path, capfd):
    g, res = tmp_path / "g.json", tmp_path / "r.json"
    assert main(["capture", "lenet-5", "--batch", "4", "--cost", "measured:cpu", "--out", str(g)]) == 0
    assert main(["solve", str(g), "--cluster", "local-cpu-2", "--problem", "makespan", "--method", "heft",
                 "--out", str(res)]) == 0
    line = refused(capfd, ["execute", "lenet-5", res, "--batch", "2"])
    assert "batch 4, not 2" in line and "pass --batch 4" in line, line
    line = refused(capfd, ["execute", "lenet-5", res, "--batch", "4", "--loss", "sum"])
    assert "the model's own loss 'classification_loss'" in line and "leave out --loss" in line, line


@pytest.mark.parametrize("flags, named", [
    (["--timeout", "0"], "--timeout 0"), (["--timeout", "-5"], "--timeout -5"), (["--timeout", "nan"], "--timeout nan"),
    (["--lr", "nan"], "--lr nan"), (["--lr", "-1"], "--lr -1"), (["--steps", "0"], "--steps 0"),
    (["--warmup", "-1"], "--warmup -1"), (["--microbatches", "0"], "--microbatches 0"),
    (["--pipeline", "--gantt", "x.png"], "--gantt"),
])
def test_execute_flags_refused_before_any_work(flags, named, capfd, tmp_path):
    """Checked before the result is read: a result file that does not exist is not reached."""
    out = tmp_path / "o.json"
    line = refused(capfd, ["execute", MODEL, tmp_path / "missing.json", "--input", "32x64", *flags, "--out", out],
                   out=out)
    assert named in line and "missing.json" not in line, line


def test_execute_gantt_into_an_unwritable_folder_is_refused_first(plan, capfd, tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a folder")
    line = refused(capfd, ["execute", MODEL, plan, "--input", "32x64", "--loss", "mse", "--gantt",
                           blocker / "run.png"])
    assert "--gantt" in line and "not a folder" in line, line
    if os.geteuid() != 0:   # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        line = refused(capfd, ["execute", MODEL, plan, "--input", "32x64", "--loss", "mse", "--gantt",
                               locked / "run.png"])
        assert "--gantt" in line and "not writable" in line, line


def test_capture_refuses_a_batch_of_zero(capfd, tmp_path):
    out = tmp_path / "g.json"
    line = refused(capfd, ["capture", "lenet-5", "--batch", "0", "--out", out], out=out)
    assert "--batch 0" in line and "positive" in line, line
    line = refused(capfd, ["capture", "lenet-5", "--batches", "4,0", "--out", out])
    assert "--batches '4,0'" in line, line
    assert not list(tmp_path.iterdir())   # not even the batch-4 profile
    from dnnplace.graphs.errors import InputError
    from dnnplace.pytorch.capture import zoo
    with pytest.raises(InputError, match="--batch 0: must be a positive integer"):
        zoo.build("lenet-5", batch=0)


def test_capture_refuses_an_integer_input_into_a_float_layer(capfd, tmp_path):
    out = tmp_path / "g.json"
    line = refused(capfd, ["capture", MODEL, "--input", "32x64:int64", "--out", out], out=out)
    assert "layer '0'" in line and "int64" in line and "float32" in line and "input 0 (32x64:int64)" in line, line


def test_capture_of_a_factory_calling_sys_exit_is_exit_2(capfd, tmp_path):
    model = tmp_path / "quits.py"
    model.write_text("import sys\n\ndef make():\n    sys.exit(3)\n")
    out = tmp_path / "g.json"
    line = refused(capfd, ["capture", f"{model}:make", "--input", "4x8", "--out", out], out=out)
    assert "make" in line and "sys.exit(3)" in line, line
    model.write_text("import sys\nsys.exit(3)\n")   # at import
    line = refused(capfd, ["capture", f"{model}:make", "--input", "4x8", "--out", out], out=out)
    assert "importing" in line and "sys.exit(3)" in line, line


@pytest.mark.parametrize("command", ["capture", "execute"])
def test_shape_errors_are_one_line_without_torch_tracebacks(command, plan, capfd, tmp_path):
    out = tmp_path / "o.json"
    argv = ["capture", MODEL, "--input", "32x65", "--out", out] if command == "capture" else \
        ["execute", MODEL, plan, "--input", "32x65", "--loss", "mse", "--graph", "none.json", "--out", out]
    line = refused(capfd, argv, out=out)
    assert "32x65" in line and "[32, 65]" in line and "does not export" in line, line


def test_tests_keep_profiles_out_of_the_home_folder(profile_cache, plan):
    """tests/conftest.py points DNNPLACE_PROFILE_CACHE at a temporary folder for the whole
    session: the measured capture of ``plan`` wrote its profile there."""
    from dnnplace.pytorch.capture.costs import cache_path
    assert os.environ["DNNPLACE_PROFILE_CACHE"] == str(profile_cache)
    assert not profile_cache.is_relative_to(Path.home() / ".cache")
    assert list(profile_cache.glob("*.json")), "the measured capture wrote no profile there"

    class Cap:
        meta: dict = {}
        gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    assert cache_path("k", Cap(), "cpu").parent == profile_cache


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)   # a shell's background job ignores SIGINT


@pytest.mark.slow
def test_ctrl_c_during_execute_leaks_nothing(plan, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) in the middle of the
    steps: exit 130, no --out, and no leaked-semaphore warning from multiprocessing's
    resource tracker (it prints once every process of the group has gone)."""
    out = tmp_path / "run.json"
    err_path = tmp_path / "stderr.txt"
    with open(tmp_path / "stdout.txt", "w") as fo, open(err_path, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "dnnplace", "execute", MODEL, str(plan), "--input", "32x64",
                                 "--loss", "mse", "--steps", "2000", "--warmup", "0", "--out", str(out)],
                                stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_default_sigint)
        try:
            deadline = time.monotonic() + 240
            while "step 3/" not in err_path.read_text():
                assert proc.poll() is None, err_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "no step ran"
                time.sleep(0.1)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
            while time.monotonic() < deadline:   # the resource tracker is the last to go
                try:
                    os.killpg(proc.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    err = err_path.read_text()
    assert proc.returncode == 130, err[-3000:]
    assert not out.exists() and (tmp_path / "stdout.txt").read_text() == ""
    assert err.rstrip().endswith("dnnplace: interrupted"), err[-3000:]
    assert "leaked" not in err and "resource_tracker" not in err, err[-3000:]


def test_execute_takes_a_cluster_file_for_a_plan_without_its_graph(plan, capfd, tmp_path):
    """A plan with no graph beside it (a ``{node: device}`` map, a tuned file) and
    ``--cluster`` a cluster *file* (as ``tune`` writes it): the devices come from the file
    (it was read as a preset name and refused)."""
    import json

    from dnnplace.graphs.io.native import cluster_to_dict
    from dnnplace.graphs.presets import cluster_preset
    cl = tmp_path / "cluster.json"
    cl.write_text(json.dumps(cluster_to_dict(cluster_preset("local-cpu-2"))))
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps(json.loads(plan.read_text())["placement"]))
    out = tmp_path / "run.json"
    rc = main(["execute", MODEL, str(mapping), "--input", "32x64", "--loss", "mse", "--cluster", str(cl),
               "--steps", "1", "--warmup", "0", "--out", str(out)])
    got = capfd.readouterr()
    assert rc == 0, got.err[-2000:]
    doc = json.loads(out.read_text())
    assert doc["matches_reference"] is True and sorted(doc["devices"]) == ["cpu0", "cpu1"]
