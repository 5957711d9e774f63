"""The options several benchmarks take, declared once (:data:`SHARED`), and ``--only``'s rule.

A benchmark asks for shared options with their defaults in its ``add_arguments``::

    add_shared(parser, time_limit=60.0, out=REPO / "results" / "pesto" / "vcycle.md", seed=0)

Each option's flag, type and meaning are fixed here; the benchmark gives the default
(and, through ``help=``, a more specific help text where it needs one).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.paths import REPO

__all__ = ["SHARED", "add_shared", "selected"]


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
