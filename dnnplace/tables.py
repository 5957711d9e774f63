"""The one table writer: a Markdown table for people and a CSV beside it for programs.

Every table the framework writes (an experiment's ``table.md``/``table.csv``, a
reproduction's ``results/<name>.md``/``.csv``) goes through :func:`write_table`, atomically
(:func:`dnnplace.graphs.io.write_atomic`: a reader never sees half a table, a full disk
leaves no partial file).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Column", "write_table", "write_text", "fixed", "percent", "csv_cell"]


@dataclass(frozen=True)
class Column:
    """``key`` of the row dicts; ``header`` in the Markdown table (default the key);
    ``fmt`` formats a value for Markdown (the CSV keeps the raw value); numbers are
    right-aligned."""

    key: str
    header: str | None = None
    fmt: Any = None
    numeric: bool = False

    def cell(self, value: Any) -> str:
        if value is None or value == "":
            return ""
        if self.fmt is not None:
            return self.fmt(value)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.2f}"
        return str(value)


def fixed(digits: int) -> Callable[[float], str]:
    """A :class:`Column` format: ``digits`` decimals (``fixed(3)(1.5) == "1.500"``)."""
    return lambda x: f"{x:.{digits}f}"


def percent(digits: int, *, signed: bool = False) -> Callable[[float], str]:
    """A :class:`Column` format for a fraction: ``percent(1)(0.1234) == "12.3%"``;
    ``signed`` always shows the sign (``"+12.3%"``)."""
    sign = "+" if signed else ""
    return lambda x: f"{100 * x:{sign}.{digits}f}%"


def csv_cell(text: str, empty: Any = "") -> Any:
    """A cell of a table CSV read back as written: a whole number, else a float, else the
    text; an empty cell is ``empty``.

    >>> csv_cell("3"), csv_cell("2.5"), csv_cell("m-SCT"), csv_cell("", None)
    (3, 2.5, 'm-SCT', None)
    """
    if text == "":
        return empty
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`dnnplace.graphs.io.write_atomic`: no
    partial file, no empty folder on a failed write)."""
    from dnnplace.graphs.io import write_atomic

    return write_atomic(path, lambda fh: fh.write(text))


def write_table(stem: str | os.PathLike, title: str, columns: Sequence[Column], rows: Sequence[dict[str, Any]], *,
                preamble: Sequence[str] = (), footer: Sequence[str] = ()) -> Path:
    """Write ``<stem>.md`` (title, preamble paragraphs, table, footer lines) and
    ``<stem>.csv`` (the raw values, one column per :class:`Column`); return the ``.md``.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> md = write_table(d / "t", "Demo", [Column("name"), Column("x", numeric=True)], [{"name": "a", "x": 1.5}])
    >>> print(md.read_text())
    # Demo
    <BLANKLINE>
    | name | x |
    |---|---:|
    | a | 1.50 |
    <BLANKLINE>
    >>> (d / "t.csv").read_text().splitlines()
    ['name,x', 'a,1.5']
    """
    stem = Path(stem)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in columns])
    for r in rows:
        w.writerow(["" if r.get(c.key) is None else r.get(c.key) for c in columns])
    write_text(stem.with_suffix(".csv"), buf.getvalue())
    md = [f"# {title}", ""]
    for p in preamble:
        md += [p, ""]
    md.append("| " + " | ".join(c.header or c.key for c in columns) + " |")
    md.append("|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|")
    for r in rows:
        md.append("| " + " | ".join(c.cell(r.get(c.key)).replace("|", "\\|") for c in columns) + " |")
    if footer:
        md += ["", *footer]
    return write_text(stem.with_suffix(".md"), "\n".join(md) + "\n")
