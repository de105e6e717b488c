"""Every ``docs/NAME.md §N.M`` that code cites names a section that exists in docs/.

Code states its contracts and cites the facts it relies on (formats, protocols, RocketMQ's
rules) from the repository's own docs, so a reader can follow every citation. This walks
store/, tools/ and tests/ for citations and checks each against the headings of the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# "docs/format.md §3.3", "docs/protocol.md §2.2-2.6", "docs/client.md §2, §3" (and a line
# break between the file and the section).
CITATION = re.compile(r"docs/(\w+)\.md\s+((?:§\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:,\s*)?)+)")
SECTION = re.compile(r"§(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def _sections(doc: str) -> set[str]:
    return set(HEADING.findall((DOCS / f"{doc}.md").read_text(encoding="utf-8")))


def _citations() -> list[tuple[str, str, str]]:
    """(file:line, doc, section) for every section cited in the code and the tests."""
    found = []
    for top in ("store", "tools", "tests"):
        for path in sorted((REPO / top).rglob("*.py")):
            if "node_modules" in path.parts or path == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            for m in CITATION.finditer(text):
                where = f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}"
                for first, last in SECTION.findall(m.group(2)):
                    found += [(where, m.group(1), s) for s in (first, last) if s]
    return found


def test_the_code_cites_the_docs() -> None:
    docs = {doc for _where, doc, _s in _citations()}
    assert {"format", "protocol", "store", "client", "design"} <= docs


@pytest.mark.parametrize(("where", "doc", "section"), _citations())
def test_every_cited_section_exists(where: str, doc: str, section: str) -> None:
    assert (DOCS / f"{doc}.md").is_file(), f"{where}: docs/{doc}.md does not exist"
    assert section in _sections(doc), f"{where}: docs/{doc}.md has no section {section}"


def test_a_missing_section_is_caught() -> None:
    assert "9.9" not in _sections("format")
    text = "see docs/format.md §9.9 and docs/store.md §1.2-1.4, §5"
    cited = [SECTION.findall(m.group(2)) for m in CITATION.finditer(text)]
    assert cited == [[("9.9", "")], [("1.2", "1.4"), ("5", "")]]
