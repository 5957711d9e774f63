"""results/coverage.md: every table and figure of the five papers, reproduced or not, and why.

The page holds one section per paper with one row per table and per figure (plus text claims
that carry verdicts, ``Sec. ...``); each row has a status (reproduced / partly / not attempted),
a reason where it is not attempted, links that exist, tests that exist, and verdict counts
that equal those of the tables it links (dnnplace.experiments.verdicts.tally; a table shared
by several rows has its counts split between them).
"""

from __future__ import annotations

import re
from pathlib import Path

from dnnplace.experiments import verdicts as V

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
PAGE = RESULTS / "coverage.md"
STATUSES = ("reproduced", "partly", "not attempted")
# the tables and figures of each paper, numbered as in its text (shared papers folder)
PAPERS = {"Pesto": (3, 8), "Tarnawski et al.": (4, 10), "FastT": (6, 5), "Celeritas": (5, 6), "PARDNN": (6, 9)}
TEXT_CLAIMS = {"Pesto": ["Sec. 5.3"]}
HEADER = ["item", "the paper's content", "status", "ours", "our verdict counts", "rows covered, or the reason"]
EXACT = re.compile(r"(\d+) of (\d+) exact cells match")
EXACT_IN_TABLE = re.compile(r"Exact cells matching the paper to its printed precision: (\d+) of (\d+) run\.")
TEST_REF = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _sections(text: str) -> dict[str, list[dict[str, str]]]:
    """Paper -> its coverage rows (dicts keyed by HEADER)."""
    out: dict[str, list[dict[str, str]]] = {}
    paper, header = None, None
    for line in text.splitlines():
        if line.startswith("## "):
            paper, header = line[3:].strip(), None
            out[paper] = []
        elif paper and line.startswith("|"):
            cells = _cells(line)
            if header is None:
                header = cells
                assert header == HEADER, (paper, header)
            elif not set(line.replace("|", "").strip()) <= set("-: "):
                assert len(cells) == len(HEADER), (paper, line)
                out[paper].append(dict(zip(HEADER, cells)))
    return out


def _links(cell: str) -> list[Path]:
    return [(RESULTS / target.split("#")[0]).resolve() for target in re.findall(r"\]\(([^)]+)\)", cell)]


def _counts(cell: str) -> tuple[dict[str, int], tuple[int, int]]:
    """Verdict kinds and exact cells stated in a row's count cell."""
    kinds = dict.fromkeys(V.KINDS, 0)
    exact = (0, 0)
    if cell == "-":
        return kinds, exact
    for item in cell.split(", "):
        if m := EXACT.fullmatch(item):
            exact = (exact[0] + int(m[1]), exact[1] + int(m[2]))
            continue
        m = re.fullmatch(r"(\d+) (.+)", item)
        assert m and m[2] in V.KINDS, f"not a verdict count: {item!r}"
        kinds[m[2]] += int(m[1])
    return kinds, exact


def test_every_table_and_figure_of_each_paper_has_one_row_with_a_status():
    rows = _sections(PAGE.read_text())
    assert list(rows) == list(PAPERS)
    checked = 0
    for paper, (tables, figures) in PAPERS.items():
        items = [r["item"] for r in rows[paper]]
        expected = [f"Table {i}" for i in range(1, tables + 1)] + [f"Fig. {i}" for i in range(1, figures + 1)]
        assert [i for i in items if not i.startswith("Sec. ")] == expected, paper
        assert [i for i in items if i.startswith("Sec. ")] == TEXT_CLAIMS.get(paper, []), paper
        assert len(rows[paper]) == tables + figures + len(TEXT_CLAIMS.get(paper, [])), paper
        for r in rows[paper]:
            where = f"{paper} {r['item']}"
            assert r["status"] in STATUSES, where
            assert r["the paper's content"] not in ("", "-"), where
            if r["status"] != "reproduced":  # which rows (partly) or why not (not attempted)
                assert len(r["rows covered, or the reason"]) > 15, where
            if r["status"] != "not attempted":
                assert _links(r["ours"]) or TEST_REF.search(r["ours"]), where
            else:
                assert r["our verdict counts"] == "-", where
            checked += 1
    assert checked == 62 + 1


def test_the_summary_counts_the_rows():
    text = PAGE.read_text()
    rows = _sections(text)
    summary = {}
    for line in text.split("\n## ")[0].splitlines():
        cells = _cells(line) if line.startswith("| ") else []
        if cells and cells[0] in PAPERS:
            summary[cells[0]] = [int(c) for c in cells[1:]]
    assert list(summary) == list(PAPERS)
    for paper, (tables, figures) in PAPERS.items():
        status = [r["status"] for r in rows[paper] if not r["item"].startswith("Sec. ")]
        assert summary[paper] == [tables + figures] + [status.count(s) for s in STATUSES], paper


def test_every_link_and_named_test_exists():
    text = PAGE.read_text()
    links = _links(text)
    assert len(links) >= 40
    missing = [str(p.relative_to(ROOT)) for p in links if not p.is_file()]
    assert not missing
    refs = TEST_REF.findall(text)
    assert len(refs) == 8
    for path, name in refs:
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), f"{path}::{name}"


def test_verdict_counts_equal_the_linked_tables():
    rows = [r for paper_rows in _sections(PAGE.read_text()).values() for r in paper_rows]
    # rows sharing a linked table form one group; a group's stated counts sum to its tables' counts
    files = [{p for p in _links(r["ours"])} for r in rows]
    group = list(range(len(rows)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i in range(len(rows)):
        for j in range(i):
            if files[i] & files[j]:
                group[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(rows)):
        groups.setdefault(root(i), []).append(i)
    compared = 0
    for members in groups.values():
        stated, exact = dict.fromkeys(V.KINDS, 0), [0, 0]
        for i in members:
            kinds, (n, m) = _counts(rows[i]["our verdict counts"])
            stated = {k: stated[k] + kinds[k] for k in V.KINDS}
            exact = [exact[0] + n, exact[1] + m]
        got, got_exact = dict.fromkeys(V.KINDS, 0), [0, 0]
        for path in set().union(*(files[i] for i in members)):
            text = path.read_text() if path.suffix == ".md" else ""
            got = {k: got[k] + n for k, n in V.tally(text).items()}
            for n, m in EXACT_IN_TABLE.findall(text):
                got_exact = [got_exact[0] + int(n), got_exact[1] + int(m)]
        where = ", ".join(rows[i]["item"] for i in members)
        assert stated == got, where
        assert exact == got_exact, where
        compared += any(got.values()) or any(got_exact)
    assert compared == 15  # groups whose tables hold verdicts or exact cells


def test_results_readme_links_the_page_and_every_counted_table_is_covered():
    readme = (RESULTS / "README.md").read_text()
    assert "](coverage.md)" in readme
    covered = set(_links(PAGE.read_text()))
    counted = [(RESULTS / p).resolve() for ln in readme.splitlines()
               if ln.startswith("- ") and re.search(r"\d+ not comparable$", ln)
               for p in re.findall(r"\]\(([^)]+)\)", ln.rpartition("): ")[0])]
    assert len(counted) == 17
    assert not [str(p.relative_to(ROOT)) for p in counted if p not in covered]


def test_every_not_reproduced_cell_names_its_cause_or_says_it_is_unknown():
    """A reviewer reads a cause beside every ``not reproduced`` cell of the reproduction
    tables: a measured one (with where it was measured) or ``cause unknown``. (The
    execution pages use the verdict words for simulation against measurement, not papers.)"""
    bare, seen = [], 0
    tables = re.compile(r"(table|fig|tarnawski-table)[\w-]*\.md$")
    for page in sorted(p for p in RESULTS.rglob("*.md") if "execution" not in p.parts and tables.match(p.name)):
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if not line.startswith("|"):
                continue
            for cell in _cells(line):
                if cell.startswith(V.NOT_REPRODUCED):
                    seen += 1
                    if not cell.startswith(f"{V.NOT_REPRODUCED}: ") or len(cell) < len(V.NOT_REPRODUCED) + 8:
                        bare.append(f"{page.relative_to(ROOT)}:{n}")
    assert seen >= 40 and not bare, bare
