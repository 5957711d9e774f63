"""Module docstrings state what a module does and why; measured figures (times, gaps) live in
the dated pages of results/, where a rerun updates them, and a docstring points there.

A figure is a number with a unit of time or a percentage (``12 s``, ``0.25 ms``, ``3 %``)
outside double backquotes (code, examples); design values a module defines are listed in
``DESIGN_VALUES`` with the file that defines them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("runtime", "graphs", "evaluation", "heuristics", "formulations", "pytorch", "dnnplace")
FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:s|ms|%)(?!\w)")
CODE = re.compile(r"``.*?``", re.S)
# (file, figure): values the module sets by design, not measurements
DESIGN_VALUES = {
    ("dnnplace/compare.py", "10 %"), ("dnnplace/compare.py", "1 %"), ("dnnplace/compare.py", "0.01 %"),
    ("graphs/stats.py", "0.01 ms"),
}


def figures_in_module_docstrings() -> tuple[int, list[str]]:
    """(modules read, each ``file: figure`` found that is not a design value)."""
    seen, found = 0, []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            seen += 1
            doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
            rel = path.relative_to(REPO).as_posix()
            for m in FIGURE.finditer(CODE.sub("", doc)):
                if (rel, m.group()) not in DESIGN_VALUES:
                    found.append(f"{rel}: {m.group()!r}")
    return seen, found


def test_module_docstrings_carry_no_measured_figures():
    seen, found = figures_in_module_docstrings()
    assert not found, "measured figures belong in results/ (a dated heading), not in docstrings:\n" + "\n".join(found)
    assert seen >= 150, seen


def test_the_figure_pattern_sees_times_and_gaps():
    text = "one round ran 119 s; 0.25 ms; gaps 2.8-65 %; within 3 % of; ``12s/60s`` is code; O(n log n)"
    found = [m.group() for m in FIGURE.finditer(CODE.sub("", text))]
    assert found == ["119 s", "0.25 ms", "2.8-65 %", "3 %"], found
