"""The benchmark harness (``python -m benchmarks``): every ``benchmarks/bench_<name>.py``
follows the convention (one-line docstring summary, ``add_arguments``, ``run``, no main
of its own), the harness lists them all, and a small setting runs end to end."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def _harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def package():
    sys.path.insert(0, str(ROOT))
    try:
        import benchmarks
        yield benchmarks
    finally:
        sys.path.remove(str(ROOT))


def test_there_are_benchmarks():
    assert len(FILES) >= 21


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_convention(path: Path):
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree)
    assert doc and doc.splitlines()[0].strip(), "a module docstring whose first line describes the benchmark"
    assert len(doc.splitlines()) == 1 or not doc.splitlines()[1].strip(), "first line: a one-line description"
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert [a.arg for a in functions["add_arguments"].args.args] == ["parser"]
    assert len(functions["run"].args.args) == 1
    assert "main" not in functions
    guards = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert not guards, "the harness is the one entry point"


def test_modules_build_their_parsers(package):
    from benchmarks.__main__ import parser_for

    names = package.benchmarks()
    assert sorted(names.values()) == [p.stem for p in FILES]
    for name, module in names.items():
        mod = package.load(name)
        assert callable(mod.run) and mod.__doc__.startswith(package.description(module))
        assert isinstance(parser_for(name), argparse.ArgumentParser)


def test_listing_names_every_benchmark():
    out = _harness()
    assert out.returncode == 0, out.stderr
    assert f"{len(FILES)} benchmarks" in out.stdout
    listed = [ln.split()[0] for ln in out.stdout.splitlines() if ln.startswith("  ") and ln.split()
              and not ln.startswith("   ")]
    assert listed == [p.stem.removeprefix("bench_").replace("_", "-") for p in FILES]
    assert _harness("--help").stdout == out.stdout


def test_unknown_benchmark():
    out = _harness("no-such-benchmark")
    assert out.returncode == 2 and "no benchmark" in out.stderr


def test_one_benchmark_help_and_underscores():
    out = _harness("list_scheduling", "--help")
    assert out.returncode == 0, out.stderr
    assert "python -m benchmarks list-scheduling" in out.stdout and "--sizes" in out.stdout


def test_foundation_end_to_end():
    out = _harness("foundation", "--nodes", "1500", "--devices", "2", "--seed", "1")
    assert out.returncode == 0, out.stderr
    assert "graph: 1500 nodes" in out.stdout and "| chain: load+validate+maxload+simulate" in out.stdout
