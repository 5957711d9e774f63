"""The rows a benchmark writes: JSON-lines files (one row per finished item, so a rerun
resumes) and Markdown table lines."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["append_jsonl", "write_jsonl", "read_jsonl", "fmt", "md_header", "md_row"]


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


def pack_runs(runs: Path, dest: Path, drop: tuple[str, ...] = ("start", "link_priorities")) -> None:
    """Write the records of ``runs`` (JSON lines) to ``dest`` gzip-compressed without the keys
    ``drop`` (the schedules no table reads), then remove ``runs``."""
    import gzip

    with Path(runs).open("rb") as src, gzip.open(dest, "wb") as dst:
        for line in src:
            rec = json.loads(line)
            for key in drop:
                rec.pop(key, None)
            dst.write((json.dumps(rec) + "\n").encode())
    Path(runs).unlink()


def fmt(x: float | None, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals, ``-`` for ``None``."""
    return "-" if x is None else f"{x:.{digits}f}"


def md_header(columns: list[str], align: str | list[str] = "---") -> str:
    """A Markdown table's header and rule lines (``align``: one rule for all, or one per column)."""
    rules = [align] * len(columns) if isinstance(align, str) else align
    return "| " + " | ".join(columns) + " |\n|" + "|".join(rules) + "|"


def md_row(cells: list) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"
