"""The ahead-of-time compiled DP kernels (heuristics/aot.py; results/startup.md): the same answers as
the JIT path on every call, a stale or corrupt module never loaded, concurrent builders
safe. Where this machine cannot build the extension (no C compiler or no Python headers)
the tests that need it are skipped and say why; where it can, a failed build fails them."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from instances import maxload_tiny_instance

from dnnplace.graphs.io import load_instance
from dnnplace.heuristics import aot
from dnnplace.heuristics.dp_kernel import ideal_sizes
from dnnplace.heuristics.jit import Kernel
from dnnplace.heuristics.maxload_dp import maxload_dp

KERNELS = tuple(k for k in map(aot.kernel_named, aot.SIGNATURES) if k is not None)  # what this checkout has


def _can_build() -> str:
    """Why this machine cannot build the extension, or ``""``."""
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (Python.h)"
    if importlib.util.find_spec("setuptools") is None:
        return "no setuptools (numba.pycc needs it)"
    return ""


def _require_extension() -> None:
    """Load (or build) the extension of this process; skip where the machine cannot build it."""
    if not aot.enabled():
        pytest.skip("DNNPLACE_AOT=0")
    found = aot.load(ideal_sizes) is not None
    why = _can_build()
    if why and not found:
        pytest.skip(f"the AOT kernels cannot be built here ({why}): the DP takes the JIT path; {aot.status()}")
    assert found, f"this machine has a C compiler and Python headers but the AOT build failed: {aot.status()}"


def _same(got, want) -> bool:
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, np.ndarray):
        return isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    return type(got) is type(want) and (got == want or (got != got and want != want))


def _shadow(kernel: Kernel, calls: list):
    """Every call runs the AOT function and, on copies of the arguments, the JIT dispatcher;
    the returns and the arrays the calls write must be equal."""
    aot_fn = aot.load(kernel)
    assert aot_fn is not None, kernel

    def both(*args):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        want = kernel.dispatcher(*copies)
        got = aot_fn(*args)
        assert _same(got, want), (kernel, got, want)
        for i, (a, c) in enumerate(zip(args, copies)):
            if isinstance(a, np.ndarray):
                assert np.array_equal(a, c, equal_nan=True), (kernel, f"argument {i} written differently")
        calls.append(kernel.__name__)
        return got
    return both


def _instances(tarnawski_dir):
    wl = tarnawski_dir / "throughput-inputs" / "LayerGraphs"
    yield from (maxload_tiny_instance(seed, training=seed % 2 == 1) for seed in range(6))
    yield load_instance(wl / "resnet50_inference.json")
    yield load_instance(wl / "bert24_training.json")  # backward contiguity: the bit-set arguments


def test_dp_kernels_aot_and_jit_agree_call_by_call(tarnawski_dir, monkeypatch):
    _require_extension()
    calls: list[str] = []
    for k in KERNELS:
        monkeypatch.setattr(k, "_aot", _shadow(k, calls))
    checked, fell_back = 0, 0
    for inst in _instances(tarnawski_dir):
        jit_before = sum(k.jit_calls for k in KERNELS)
        res = maxload_dp(inst)
        fell_back += sum(k.jit_calls for k in KERNELS) - jit_before  # calls that did not fit the signature
        with monkeypatch.context() as m:  # the whole DP on the JIT path alone
            for k in KERNELS:
                m.setattr(k, "_aot", False)
            ref = maxload_dp(inst)
        assert res.value == ref.value and res.lower_bound == ref.lower_bound
        assert np.array_equal(res.placement.device, ref.placement.device)
        checked += 1
    assert checked == 8
    assert {"ideal_sizes", "run_dp_pruned", "rehash", "bfs_chunk"} <= set(calls), sorted(set(calls))
    assert fell_back == 0  # every call fitted the declared signature (aot.SIGNATURES)


_CALL = ("import sys, numpy as np; from dnnplace.heuristics import aot; "
         "from dnnplace.heuristics.dp_kernel import ideal_sizes; "
         "s, w = ideal_sizes(np.array([0, 1, 2, 2]), np.array([0, 1]), np.array([1, 2]), np.array([1.5, 2.5]), 3); "
         "print(aot.status(), s.tolist(), w.tolist(), 'numba' in sys.modules)")


def _run(cache: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "DNNPLACE_AOT": "1"}
    out = subprocess.run([sys.executable, "-c", _CALL], capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.slow  # two builds of the extension of their own (54 s of the default run on 2 cores)
def test_concurrent_builds_then_a_corrupt_module_is_rebuilt(tmp_path):
    """Three processes start on an empty cache folder at once: one builds, the others wait
    for it and load its module (none sees half a file); then a corrupted module is
    rebuilt, not loaded; the processes never import numba."""
    why = _can_build()
    if why:
        pytest.skip(f"the AOT kernels cannot be built here ({why})")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "DNNPLACE_AOT": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", _CALL], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=900) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    answer = "[0, 1, 2] [0.0, 1.5, 4.0] False"
    assert sorted(o.strip() for o, _ in outs) == [f"built {answer}", f"loaded {answer}", f"loaded {answer}"]
    [so] = (tmp_path / "dnnplace-aot").glob("_dnnplace_aot_*.so")
    assert not [p for p in (tmp_path / "dnnplace-aot").iterdir() if p.name.startswith(".")]  # no temporaries left
    data = bytearray(so.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)  # corrupt the middle
    so.write_bytes(bytes(data))
    assert aot._try_load(so) is None  # the digest beside it no longer matches
    assert _run(tmp_path) == f"built {answer}"
    assert _run(tmp_path) == f"loaded {answer}"
    so.write_bytes(so.read_bytes()[:1000])  # truncated: refused in the same way
    assert aot._try_load(so) is None


def test_stale_module_is_never_named(monkeypatch, tmp_path):
    """The file name holds the hash of the sources, versions and format: any change names
    another file, so an old module is never loaded for new code."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    before = aot.path()
    monkeypatch.setattr(aot, "FORMAT", aot.FORMAT + 1)
    assert aot.path() != before and aot.path().parent == before.parent
    monkeypatch.setattr(aot, "_MODULES", [*aot._MODULES, "dnnplace.heuristics.dp_bounds"])
    assert aot.path() != before


def test_signatures_are_the_callers_types():
    """``fits`` accepts exactly the types numba's JIT compiles the declared signature for."""
    sig = aot.parse_signature("int64[:], uint64[:, :], float64, bool, int64")
    ok = (np.zeros(3, np.int64), np.zeros((2, 2), np.uint64), 1.5, True, 3)
    assert aot.fits(sig, ok)
    assert aot.fits(sig, (ok[0], ok[1], np.float64(1.5), np.bool_(True), np.int64(3)))
    bad = [(np.zeros(3, np.int32),) + ok[1:], (np.zeros((3, 1), np.int64),) + ok[1:],
           (np.zeros(6, np.int64)[::2],) + ok[1:], (ok[0], np.asfortranarray(np.zeros((2, 3), np.uint64))) + ok[2:],
           ok[:2] + (1,) + ok[3:], ok[:3] + (1,) + ok[4:], ok[:4] + (2.0,), ok[:4] + (1 << 70,), ok[:4]]
    ro = np.zeros(3, np.int64)
    ro.flags.writeable = False
    bad.append((ro,) + ok[1:])
    assert not any(aot.fits(sig, b) for b in bad)
    for name, text in aot.SIGNATURES.items():
        assert aot.parse_signature(text), name
    with pytest.raises(ValueError):
        aot.parse_signature("int32")  # scalars: int64, float64, bool only
