"""Every results section the package or the README cites by title exists (issue 56).

The code and the README point at measurements as ``benchmarks/RESULTS.md, "Title"``;
the title must begin a section (or subsection) heading of the current page or of a
dated record under
``benchmarks/results/`` (which the current page's index lists)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# RESULTS.md (in backquotes or not), an optional comma or parenthesis, then "Title";
# text of comments and docstrings is joined first, so a title may wrap
CITATION = re.compile(r'RESULTS(?:\.md)?`{0,2}[,:]?\s*\(?"([^"]+)"')


def _joined(text):
    """Lines joined with their comment markers and indentation gone."""
    return re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)


def _headings():
    pages = [ROOT / "benchmarks" / "RESULTS.md",
             *sorted((ROOT / "benchmarks" / "results").glob("*.md"))]
    return [" ".join(line.lstrip("#").split()) for page in pages
            for line in page.read_text().splitlines() if line.startswith(("## ", "### "))]


def _citations():
    sources = [*sorted((ROOT / "saspa_dask").rglob("*.py")), ROOT / "README.md",
               *sorted((ROOT / "docs").glob("*.md"))]
    for path in sources:
        for title in CITATION.findall(_joined(path.read_text())):
            yield path.relative_to(ROOT), " ".join(title.split())


def test_every_cited_results_section_exists():
    headings = _headings()
    cited = list(_citations())
    assert len(cited) > 20  # the pattern finds the citations (it is not vacuous)
    missing = [(str(path), title) for path, title in cited
               if not any(h.startswith(title) for h in headings)]
    assert missing == [], missing


def test_the_results_page_is_short_and_indexes_its_records():
    page = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert len(page.splitlines()) < 400
    for record in (ROOT / "benchmarks" / "results").glob("*.md"):
        assert f"results/{record.name}" in page, record.name
        for line in record.read_text().splitlines():
            if line.startswith("## "):
                assert f"- {line[3:].strip()}" in page, line
