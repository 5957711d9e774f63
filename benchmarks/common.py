"""What the benchmarks share: the options several of them take (declared once here), paths,
JSON-lines rows, timing and table helpers.

A benchmark asks for shared options with their defaults in its ``add_arguments``::

    add_shared(parser, time_limit=60.0, out=REPO / "results" / "pesto" / "vcycle.md", seed=0)

Each option's flag, type and meaning are fixed here; the benchmark gives the default
(and, through ``help=``, a more specific help text where it needs one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
"""The repository root (benchmarks read bundled workloads and write under ``results/``)."""
RESULTS = REPO / "results"


class _CommaList(argparse.Action):
    """``--models a,b c`` -> ``["a", "b", "c"]`` (commas and spaces both separate)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [x for v in values for x in str(v).split(",") if x])


SHARED: dict[str, tuple[str, dict[str, Any]]] = {
    "out": ("--out", {"type": Path, "help": "where the table or rows are written"}),
    "rows": ("--rows", {"type": Path, "help": "append one JSON row per finished item to this file"}),
    "quick": ("--quick", {"action": "store_true", "help": "a smaller setting that finishes quickly"}),
    "fresh": ("--fresh", {"action": "store_true", "help": "start over instead of resuming from stored rows"}),
    "time_limit": ("--time-limit", {"type": float, "help": "seconds per solve"}),
    "seed": ("--seed", {"type": int, "help": "random seed"}),
    "steps": ("--steps", {"type": int, "help": "measured steps per run"}),
    "only": ("--only", {"nargs": "+", "help": "run only the rows whose name contains one of these"}),
    "sizes": ("--sizes", {"type": int, "nargs": "+", "help": "graph sizes (nodes)"}),
    "gpus": ("--gpus", {"type": int, "nargs": "+", "help": "GPU counts"}),
    "models": ("--models", {"nargs": "+", "action": _CommaList, "help": "model names (commas or spaces)"}),
    "nodes": ("--nodes", {"type": int, "help": "nodes of the generated graph"}),
    "devices": ("--devices", {"type": int, "help": "number of devices (GPUs)"}),
}
"""Options several benchmarks take: name -> (flag, argparse keywords without the default)."""


def add_shared(parser: argparse.ArgumentParser, help: dict[str, str] | None = None, **defaults: Any) -> None:
    """Add the shared options named by ``defaults`` (keyword = option name in :data:`SHARED`,
    value = its default) to ``parser``; ``help`` overrides their help texts."""
    for name, default in defaults.items():
        flag, kw = SHARED[name]
        kw = dict(kw)
        if help and name in help:
            kw["help"] = help[name]
        if kw.get("action") != "store_true":
            kw["default"] = default
            if default is not None:
                kw["help"] += f" (default: {_shown(default)})".replace("%", "%%")
        parser.add_argument(flag, **kw)


def _shown(default: Any) -> str:
    """A default as a user would type it: paths relative to the repository, lists space-separated."""
    if isinstance(default, list | tuple):
        return " ".join(map(_shown, default))
    if isinstance(default, Path) and default.is_relative_to(REPO):
        return str(default.relative_to(REPO))
    return str(default)


def selected(name: str, only: list[str] | None) -> bool:
    """Whether ``--only`` lets ``name`` run (no ``--only``: everything)."""
    return not only or any(s in name for s in only)


def load_average() -> float:
    """The 1-minute load average (``nan`` where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return float("nan")


def machine_load() -> str:
    """``load average 1.2 on 2 CPUs`` (``load unknown`` where there is none)."""
    try:
        return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    except (AttributeError, OSError):
        return "load unknown"


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


@contextlib.contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the wall seconds of the block."""
    t = [0.0]
    t0 = time.perf_counter()
    try:
        yield t
    finally:
        t[0] = time.perf_counter() - t0


def timed(label: str, rows: list, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, appending ``(label, wall seconds)`` to ``rows``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    rows.append((label, time.perf_counter() - t0))
    return out


def append_jsonl(path: Path | str, row: dict, **dumps) -> None:
    """Append ``row`` as one JSON line to ``path`` (its folder created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(row, **dumps) + "\n")


def write_jsonl(path: Path | str, rows: list[dict], **dumps) -> None:
    Path(path).write_text("".join(json.dumps(r, **dumps) + "\n" for r in rows))


def read_jsonl(path: Path | str) -> list[dict]:
    """The rows of a JSON-lines file (blank lines skipped)."""
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def fmt(x: float | None, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals, ``-`` for ``None``."""
    return "-" if x is None else f"{x:.{digits}f}"


def md_header(columns: list[str], align: str | list[str] = "---") -> str:
    """A Markdown table's header and rule lines (``align``: one rule for all, or one per column)."""
    rules = [align] * len(columns) if isinstance(align, str) else align
    return "| " + " | ".join(columns) + " |\n|" + "|".join(rules) + "|"


def md_row(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"
