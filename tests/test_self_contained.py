"""The repository stands alone: what its code and docs cite is in its own ``docs/``.

Every tracked text file (``git ls-files``; the generated ``results/`` and the copied
``graphs/workloads/`` aside) is scanned for

* citations of documents the repository does not hold: the outside ``SPEC``, ``HEURISTICS.md``,
  ``SOLVERS.md``, ``STYLE.md``, anything under ``../shared`` or the papers kept there
  (``papers/<name>.md``); each one fails, named by ``file:line``;
* citations of the project's own docs (``docs/semantics.md 2.1``, ``docs/heuristics.md P6``,
  ``docs/backends.md, "Solver facts"``, or a bare ``semantics.md 2.1`` naming a file of
  ``docs/``): the file must exist, a numbered section or a decision label must be a heading
  (or the first cell of a table row) of that file, and a quoted section name a heading of it.

No source, doc, config or CI script (``.py``, ``.md``, ``.toml``, ``.ci/run``; ``results/``
aside: a dated run record may name what it was) cites an issue number or a work session
("issue N", "session N"): such a label says why or since when only to whoever kept the work
log; the text cites a docs section, a paper, a results file or a date instead.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SKIP_PREFIXES = ("results/", "graphs/workloads/")
SELF = "tests/test_self_contained.py"

#: citations of documents outside the repository
OUTSIDE = re.compile(
    r"\bSPEC\b"                                        # the outside problem spec ("SPEC 2.1", "(SPEC)")
    r"|\b(?:SPEC|HEURISTICS|SOLVERS|STYLE)\.md\b"      # the outside notes, by file name
    r"|\bHEURISTICS\s+(?:section\s+)?[APC]?\d"         # "HEURISTICS P9", "HEURISTICS 1.2"
    r"|\.\./shared\b|/work/shared\b"                   # the folder itself
    r"|(?<![\w/.-])papers/[\w.-]+\.md\b")             # the papers kept beside it (the repo has no papers/)

#: an issue number or a work session cited by number
WORK_LOG_LABEL = re.compile(r"\b[Ii]ssues? \d+\b|\b[Ss]ession \d+\b")
#: folders a walk of a checkout without git leaves out: the environment, git's own, what git
#: ignores (caches, builds, scratch), the dated run records and the copied workloads
WALK_SKIP = {".venv", ".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".benchmarks", ".hypothesis",
             "build", "dist", "scratch"}
WALK_SKIP_PREFIXES = ("results/", "graphs/workloads/")

#: a section label: ``2.1``, ``0``, or a decision label of a table (``A7``, ``C12``, ``P6``)
_LABEL = r"(?:\d+(?:\.\d+)*|[A-Z]\d+)(?![\w.]*\w)"
#: ``docs/x.md`` (or bare ``x.md``), optionally closed by backticks, then optionally a
#: section: labels (``2.3, 5``; ``section 0``; ``P8``) or a quoted heading (``, "Solver facts"``)
CITATION = re.compile(
    r"(?<![\w/.-])(?P<prefix>docs/)?(?P<name>[A-Za-z0-9_-]+)\.md`*"
    r"(?:(?:,?\s+(?:sections?\s+|§\s*)?(?P<labels>" + _LABEL + r"(?:\s*,\s*" + _LABEL + r")*))"
    r"|(?:,?\s+\"(?P<quoted>[^\"\n]+)\"))?")


def _tracked_text_files() -> list[tuple[str, str]]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = []
    for rel in out.decode().split("\0"):
        if not rel or rel == SELF or rel.startswith(SKIP_PREFIXES):
            continue
        path = REPO / rel
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        files.append((rel, data.decode("utf-8", errors="replace")))
    return files


def _source_files() -> list[str]:
    """Relative paths of the repository's sources, docs, configs and CI script (``.py``, ``.md``,
    ``.toml``, ``.ci/run``) outside ``results/``: those git tracks, and new ones it does not
    ignore (``git ls-files``), else, without git, a walk of the checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
        listed = [rel for rel in out.decode().split("\0") if rel and not rel.startswith("results/")]
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for root, dirs, names in os.walk(REPO):
            here = Path(root).relative_to(REPO).as_posix()
            here = "" if here == "." else here + "/"
            dirs[:] = [d for d in dirs if d not in WALK_SKIP and not d.endswith(".egg-info")
                       and not (here + d + "/").startswith(WALK_SKIP_PREFIXES)]
            listed += [here + name for name in names]
    return sorted({rel for rel in listed if (rel.endswith((".py", ".md", ".toml")) or rel == ".ci/run")
                   and (REPO / rel).is_file()})


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _headings(name: str) -> tuple[set[str], list[str]]:
    """Labels (heading numbers and table-row decision labels) and heading texts of docs/name.md."""
    labels: set[str] = set()
    titles: list[str] = []
    for line in (DOCS / f"{name}.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#+\s+(.*)", line)
        if heading:
            title = heading.group(1).strip()
            titles.append(title.lower())
            number = re.match(r"§?\s*((?:\d+(?:\.\d+)*)|[A-Z]\d+)\b", title)
            if number:
                labels.add(number.group(1).rstrip("."))
            continue
        row = re.match(r"\|\s*\**([A-Z]\d+)\**\s*\|", line)
        if row:
            labels.add(row.group(1))
    return labels, titles


def _scan():
    docs = {p.stem for p in DOCS.glob("*.md")}
    headings = {name: _headings(name) for name in docs}
    outside: list[str] = []
    broken: list[str] = []
    files = _tracked_text_files()
    checked = 0
    for rel, text in files:
        for m in OUTSIDE.finditer(text):
            outside.append(f"{rel}:{_line(text, m.start())}: {m.group(0)!r}")
        for m in CITATION.finditer(text):
            name = m.group("name")
            if m.group("prefix") is None:
                at_root = (REPO / f"{name}.md").exists() and not rel.startswith("docs/")
                if name not in docs or at_root:
                    continue  # a bare name that is not a doc of docs/ (README.md, CHANGELOG.md, ...)
            where = f"{rel}:{_line(text, m.start())}: {m.group(0).strip()!r}"
            checked += 1
            if name not in docs:
                broken.append(f"{where}: no docs/{name}.md")
                continue
            labels, titles = headings[name]
            for label in re.findall(_LABEL, m.group("labels") or ""):
                if label not in labels:
                    broken.append(f"{where}: docs/{name}.md has no section {label}")
            quoted = m.group("quoted")
            if quoted and not any(quoted.lower() in t for t in titles):
                broken.append(f"{where}: docs/{name}.md has no heading {quoted!r}")
    return files, checked, outside, broken


def test_no_citation_of_outside_documents():
    files, _, outside, _ = _scan()
    assert len(files) > 100, f"only {len(files)} tracked files scanned"
    assert not outside, "citations of documents outside the repository:\n" + "\n".join(outside)


def test_doc_citations_resolve():
    _, checked, _, broken = _scan()
    assert checked >= 80, f"only {checked} citations of docs/ found: the scan is broken"
    assert not broken, "citations of the project's docs that do not resolve:\n" + "\n".join(broken)


def test_no_file_cites_an_issue_number():
    files = _source_files()
    offenders = []
    for rel in files:
        text = (REPO / rel).read_text(encoding="utf-8", errors="replace")
        offenders += [f"{rel}:{_line(text, m.start())}: {m.group(0)!r}" for m in WORK_LOG_LABEL.finditer(text)]
    assert len(files) > 100, f"only {len(files)} files checked: the listing is broken"
    assert not offenders, ("issue numbers or work sessions cited (cite a docs section, a paper, a results file "
                           "or a date instead):\n" + "\n".join(offenders))
