"""``dnnplace execute --torchrun``: one process per device of the plan, started by torchrun
(docs/execution.md, "Past one host"); its refusals before any work (docs/bad-input.md,
"Execute under torchrun")."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch") if not os.environ.get("DNNPLACE_REQUIRE_TORCH") else __import__("torch")

from test_execution import MODELS_FILE, random_plan, spec, traced  # noqa: E402

from dnnplace.cli import main  # noqa: E402

MODEL = f"{MODELS_FILE}:mlp"
FLAGS = ["--input", "32x64", "--loss", "cross_entropy"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory) -> Path:
    """A random two-device plan (placement and start times) of the MLP's training step."""
    cap = traced(spec("mlp"))
    plan = random_plan(cap, np.random.default_rng(3))
    assert len(set(plan.placement.values())) == 2
    path = tmp_path_factory.mktemp("torchrun") / "r.json"
    path.write_text(json.dumps({"placement": dict(plan.placement), "start": dict(plan.start)}))
    return path


def refused(capfd, argv: list[str], out: Path) -> str:
    """``dnnplace ARGV``: exit 2, one stderr line, nothing on stdout, no output file; that line."""
    capfd.readouterr()
    rc = main([str(a) for a in argv])
    got = capfd.readouterr()
    lines = got.err.strip().splitlines()
    assert rc == 2 and got.out == "" and len(lines) == 1, (rc, got.out, got.err[-3000:])
    assert lines[0].startswith("dnnplace: error: ") and not out.exists()
    return lines[0]


def torchrun_vars(monkeypatch, rank: int, world: int) -> None:
    for k, v in {"RANK": rank, "WORLD_SIZE": world, "MASTER_ADDR": "localhost", "MASTER_PORT": 1,
                 "TORCHELASTIC_RUN_ID": "t"}.items():
        monkeypatch.setenv(k, str(v))


def test_torchrun_refusals_before_any_work(monkeypatch, capfd, tmp_path):
    """World size against the plan's devices, --torchrun outside torchrun, torchrun without
    --torchrun, --torchrun with --cuda or --pipeline: each one line, exit 2, before the model
    is traced (the plan's node ids are not even the model's) or a rendezvous is contacted."""
    out = tmp_path / "run.json"
    plan_file = tmp_path / "r.json"
    plan_file.write_text(json.dumps({"a": "cpu0", "b": "cpu1", "c": "cpu1"}))
    base = ["execute", MODEL, plan_file, *FLAGS, "--out", out]
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(k, raising=False)
    line = refused(capfd, [*base, "--torchrun"], out)
    assert "--torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: start the command with torchrun" in line
    torchrun_vars(monkeypatch, 0, 3)
    line = refused(capfd, [*base, "--torchrun"], out)
    assert "torchrun started 3 process(es) (WORLD_SIZE 3), but the plan in" in line
    assert "uses 2 device(s) (cpu0, cpu1)" in line and "--nproc-per-node = 2" in line
    line = refused(capfd, base, out)
    assert "started by torchrun (RANK 0, WORLD_SIZE 3): pass --torchrun" in line
    for flag in ("--cuda", "--pipeline"):
        line = refused(capfd, [*base, "--torchrun", flag], out)
        assert f"leave out {flag}" in line
    torchrun_vars(monkeypatch, 3, 2)
    assert "RANK 3 is not below WORLD_SIZE 2" in refused(capfd, [*base, "--torchrun"], out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_torchrun_nodes_run_a_two_device_plan(plan_file, tmp_path):
    """Two torchrun invocations on this host, each a "node" of one process (c10d rendezvous),
    run the two-device plan: rank 0 writes the run, which equals the eager step; the other
    prints nothing and exits 0."""
    out = tmp_path / "run.json"
    port = free_port()
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")}
    procs = [subprocess.Popen([torchrun, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                               "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", "dnnplace-test",
                               "--node-rank", str(node), "-m", "dnnplace", "execute", MODEL, str(plan_file),
                               *FLAGS, "--steps", "2", "--warmup", "1", "--timeout", "120", "--torchrun",
                               "--out", str(out)],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (0, 1)]
    try:
        done = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (so, se) in zip(procs, done):
        assert p.returncode == 0, (so, se[-3000:])
    doc = json.loads(out.read_text())
    assert doc["matches_reference"] is True and doc["losses_checked"] == 3 and doc["grads_checked"] > 0
    assert doc["devices"] == ["cpu0", "cpu1"] and doc["message_count"] > 0
    printed = [so for so, _ in done]
    assert sum("matches the eager step: yes" in so for so in printed) == 1
    assert sorted(len(so) > 0 for so in printed) == [False, True]
