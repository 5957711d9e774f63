"""Plain-text output of the ``dnnplace`` subcommands (:mod:`dnnplace.commands`): lines on
stdout, warnings on stderr, numbers and byte counts in words, aligned tables, and the
per-device table of an evaluation.

>>> print(text_table(["device", "nodes", "busy"], [["gpu0", 1200, 3.14159], ["cpu", 3, None]]))
device  nodes  busy
------  -----  ----
gpu0    1,200  3.14
cpu         3     -
>>> fmt_bytes(2.5e9), fmt_num(1e-5), fmt_num(True)
('2.50 GB', '1e-05', 'yes')
"""

from __future__ import annotations

import math
import sys
from typing import Any

__all__ = ["say", "warn", "fmt_num", "fmt_bytes", "text_table", "device_table", "print_evaluation"]


def say(text: str = "") -> None:
    """One line on stdout."""
    print(text, file=sys.stdout)


def fmt_num(v: Any, digits: int = 2) -> str:
    """A number for a person: ``-`` for none, yes/no, thousands separators, ``digits``
    decimals (general format for very large or small values)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf"
        if v != 0 and (abs(v) >= 1e7 or abs(v) < 10 ** -digits):
            return f"{v:.{digits + 2}g}"
        return f"{v:,.{digits}f}"
    return str(v)


def fmt_bytes(v: float | None) -> str:
    """A byte count in B/KB/MB/GB (powers of 1000); ``unbounded`` for none or infinity."""
    if v is None or (isinstance(v, float) and math.isinf(v)):
        return "unbounded"
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(v) >= f:
            return f"{v / f:.2f} {unit}"
    return f"{v:.0f} B"


def text_table(header: list[str], rows: list[list[Any]]) -> str:
    """An aligned table: first column left, the others right, numbers through :func:`fmt_num`."""
    cells = [[str(c) for c in header]] + [[c if isinstance(c, str) else fmt_num(c) for c in r] for r in rows]
    widths = [max(len(r[j]) for r in cells) for j in range(len(header))]
    lines = []
    for i, r in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[j]) if j == 0 else c.rjust(widths[j]) for j, c in enumerate(r)))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def warn(text: str) -> None:
    """A ``dnnplace: warning:`` line on stderr."""
    print(f"dnnplace: warning: {text}", file=sys.stderr)


def device_table(placement, details: dict[str, Any]) -> str:
    """Per used device: its node count and the evaluation's per-device ``details``
    (memory columns as byte counts), subgraphs and memory against capacity where given."""
    import numpy as np

    cl = placement.cluster
    counts = np.bincount(placement.device, minlength=cl.size)
    per_dev = details.get("devices") or {}
    memory = details.get("memory") or {}
    subgraphs = details.get("subgraphs") or {}
    cols: list[str] = []
    for d in per_dev.values():
        for k in d:
            if k not in cols and k not in ("nodes",):
                cols.append(k)
    header = ["device", "nodes", *cols]
    if subgraphs:
        header.append("subgraphs")
    if memory:
        header += ["memory", "capacity"]
    rows = []
    for i, name in enumerate(cl.names):
        if counts[i] == 0:
            continue
        row: list[Any] = [name, int(counts[i])]
        vals = per_dev.get(name, {})
        row += [("unknown" if c == "peak_memory" and vals.get(c) is None else fmt_bytes(vals.get(c)))
                if "memory" in c else vals.get(c) for c in cols]
        if subgraphs:
            row.append(subgraphs.get(name, "-"))
        if memory:
            row += [fmt_bytes(memory.get(name)), fmt_bytes(float(cl.memory[i]))]
        rows.append(row)
    return text_table(header, rows)


def print_evaluation(ev, placement) -> None:
    """An :class:`~dnnplace.evaluation.evaluate.Evaluation` on stdout: objective, feasibility,
    violations and the device table."""
    unit = ev.details.get("unit", placement.graph.unit)
    extra = ""
    if ev.problem == "maxload":
        extra = f" ({ev.details.get('objective_variant')}, contiguity {ev.details.get('contiguity')})"
    elif ev.problem == "makespan":
        extra = f" (policy {ev.details.get('policy')}, congestion {'on' if ev.details.get('congestion') else 'off'})"
    say(f"{ev.problem}{extra}: {fmt_num(ev.objective)} {unit}")
    say(f"feasible: {'yes' if ev.feasible else 'no'}")
    for v in ev.violations:
        say(f"  violation: {v}")
    say()
    say(device_table(placement, ev.details))
