"""The benchmark harness: ``python -m benchmarks NAME [options]`` from the repository root.

``python -m benchmarks`` (or ``--help``) lists the benchmarks with their one-line
descriptions; ``python -m benchmarks NAME --help`` prints one benchmark's description and
options. See :mod:`benchmarks` for the convention a ``bench_<name>.py`` follows.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap

from benchmarks import benchmarks, description, load

PROG = "python -m benchmarks"


def listing() -> str:
    names = benchmarks()
    width = max(map(len, names), default=0)
    lines = [f"usage: {PROG} NAME [options]   ({PROG} NAME --help: its options)", "",
             f"{len(names)} benchmarks (benchmarks/bench_<name>.py; '_' or '-' in NAME):"]
    for name, module in names.items():
        desc = textwrap.wrap(description(module), 100 - width) or [""]
        lines.append(f"  {name:<{width}}  {desc[0]}")
        lines += [f"  {'':<{width}}  {d}" for d in desc[1:]]
    lines += ["", "pytest-benchmark micro-benchmarks: .venv/bin/pytest benchmarks/test_kernels.py --benchmark-only"]
    return "\n".join(lines)


def parser_for(name: str) -> argparse.ArgumentParser:
    """The argument parser of benchmark ``name``: its docstring as the description, its
    ``add_arguments`` (which may add shared options through ``options.add_shared``)."""
    module = load(name)
    ap = argparse.ArgumentParser(prog=f"{PROG} {name.replace('_', '-')}", description=module.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name = argv[0]
    if name.replace("_", "-") not in benchmarks():
        print(f"{PROG}: no benchmark {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    args = parser_for(name).parse_args(argv[1:])
    args.command_line = f"{PROG} {shlex.join(argv)}"  # what a benchmark writes as its rerun command
    rc = load(name).run(args)
    return int(rc or 0)


if __name__ == "__main__":  # also keeps processes spawned by a benchmark from rerunning it
    raise SystemExit(main())
