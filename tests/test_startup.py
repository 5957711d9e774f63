"""Start-up of ``dnnplace solve G --method dp`` (results/startup.md): the process imports what the
command needs and nothing else; the numba kernels are cached on disk or, where numba finds
no writable cache folder, still compile instead of failing the import.

What the solve-dp process still imports, and why: numpy; the DP's kernels from the
ahead-of-time built extension (heuristics/aot.py), so neither numba, llvmlite nor scipy
(the components the DP graph needs are graphs/components.py). Where that extension cannot
be built (no C compiler) the kernels take numba's JIT path, which imports numba, llvmlite
and, on its first call, ``scipy.linalg``. Timings are in ``benchmarks/bench_startup.py``,
not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

# Whole packages the solve-dp process must not import (optional extras included: a test
# machine with them installed must not see them loaded either).
NOT_IMPORTED = ("networkx", "matplotlib", "pyomo", "highspy", "gurobipy", "pyscipopt", "ortools", "tqdm",
                "torch", "ray", "pymetis", "pandas")
# Project modules only other subcommands need (their parsers are not built for `solve`).
NOT_IMPORTED_OURS = ("dnnplace.graphs.generators", "dnnplace.reproduce", "dnnplace.experiments",
                     "dnnplace.capture_commands", "dnnplace.pytorch.execution", "dnnplace.formulations.solvers.driver",
                     "dnnplace.evaluation.simulate", "dnnplace.evaluation.gantt")

# Run the real entry point (python -m dnnplace) and dump the modules it imported at exit.
_DUMP = ("import atexit, json, os, runpy, sys; "
         "dump = os.environ['DNNPLACE_TEST_MODULES']; "
         "atexit.register(lambda: open(dump, 'w').write(json.dumps(sorted(sys.modules)))); "
         "sys.argv = ['dnnplace'] + sys.argv[1:]; runpy.run_module('dnnplace', run_name='__main__', alter_sys=True)")


def _modules_of(args: list[str], tmp_path) -> tuple[subprocess.CompletedProcess, set[str]]:
    dump = tmp_path / "modules.json"
    env = {**os.environ, "DNNPLACE_TEST_MODULES": str(dump)}
    out = subprocess.run([sys.executable, "-c", _DUMP, *args], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out, set(json.loads(dump.read_text()))


def test_solve_dp_imports_only_what_it_needs(tarnawski_dir, tmp_path):
    graph = tarnawski_dir / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    out, mods = _modules_of(["solve", str(graph), "--method", "dp"], tmp_path)
    assert "17.79" in out.stdout  # Table 1's DP value on this graph: the DP did run
    assert "dnnplace.heuristics.maxload_dp" in mods
    heavy = sorted(m for m in mods if m.split(".")[0] in NOT_IMPORTED)
    assert not heavy, heavy
    from dnnplace.heuristics import aot
    from dnnplace.heuristics.dp_kernel import ideal_sizes

    if aot.load(ideal_sizes) is not None:  # the same cache folder as the process above
        assert not [m for m in mods if m.split(".")[0] in ("numba", "llvmlite", "scipy")]
    ours = sorted(m for m in mods if any(m == p or m.startswith(p + ".") for p in NOT_IMPORTED_OURS))
    assert not ours, ours


def test_parser_for_one_subcommand_still_parses_it():
    from dnnplace.cli import _command_of, build_parser

    assert _command_of(["-v", "solve", "g.json", "--method", "dp"]) == "solve"
    assert _command_of(["--version"]) is None
    args = build_parser("solve").parse_args(["solve", "g.json", "--method", "dp"])
    assert (args.command, args.graph, args.method) == ("solve", "g.json", "dp")
    full = build_parser()  # no command (help, an unknown word): every subcommand with its choices
    assert full.parse_args(["generate", "lstm", "--nodes", "5", "--out", "x.json"]).family == "lstm"


def test_kernels_without_a_writable_cache_folder_compile_instead_of_failing():
    """numba refuses ``cache=True`` for a function whose file it cannot cache next to or
    under a user folder (here: no file at all, as for a read-only install run by a user
    without a writable home); ``cached_njit`` then compiles per process, with a warning."""
    pytest.importorskip("numba")
    from dnnplace.heuristics.jit import cached_njit

    ns: dict = {}
    exec(compile("def plus_one(x):\n    return x + 1\n", "<no file>", "exec"), ns)
    kernel = cached_njit(ns["plus_one"])  # made on its first call
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernel(41) == 42
    assert any("NUMBA_CACHE_DIR" in str(w.message) for w in caught)
