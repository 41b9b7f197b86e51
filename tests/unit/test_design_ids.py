"""Comments, docstrings, tests and docs cite only what this repository defines.

A requirement id (a letter of the P, S, L or B family, a hyphen, a number) must be defined in
docs/design.md, one line each. Design notes that were kept beside the repository, not in it, may not be
cited at all: a reader of a checkout cannot open them. SDK and CLI behaviours are cited by a section of
docs/sdk-notes.md, and every such anchor must name a heading that exists.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
TREES = ("flower", "tests", "bench", "docs")
TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ".html", ".js", ".css", ".sh", ".cfg", ".yml"}
DESIGN = ROOT / "docs" / "design.md"
SDK_NOTES = ROOT / "docs" / "sdk-notes.md"

ID = re.compile(r"\b[PSLB]-\d+\b")
DEFINITION = re.compile(r"^- \*\*([PSLB]-\d+)\*\* (.+)$", re.MULTILINE)
# Citations of documents outside the repository: the two fact files, the spec, the inventory of the
# earlier implementation and its fact ids, section signs of those files, and the folder they live in.
OUTSIDE = re.compile(
    r"SDK-FACTS|DBOS-FACTS|INVENTORY|SPEC\.md|\bSPEC (?:§|[PSLB]-\d)|\bF-\d+\b"
    r"|§\s?\d|§[A-Z]{1,2}\b|shared/design"
)
SDK_ANCHORS = re.compile(r"sdk-notes\.md(#[a-z0-9-]+(?:(?:, | and |/)#[a-z0-9-]+)*)")
LOCAL_ANCHOR = re.compile(r"\]\(#([a-z0-9-]+)\)")


def _files() -> list[Path]:
    found = [ROOT / "README.md"]
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                found.append(path)
    return [p for p in found if p.resolve() != Path(__file__).resolve()]


def _lines(pattern: re.Pattern[str]) -> list[tuple[str, int, str]]:
    """(file, line number, match) for every match of `pattern` in the scanned files."""
    hits = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            hits += [(str(path.relative_to(ROOT)), number, m.group(0)) for m in pattern.finditer(line)]
    return hits


def _defined() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in DEFINITION.finditer(DESIGN.read_text(encoding="utf-8"))}


def _slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def test_the_scan_sees_the_trees_and_finds_ids() -> None:
    files = {str(p.relative_to(ROOT)) for p in _files()}
    assert {"README.md", "flower/texts.py", "docs/design.md", "bench/glance.py"} <= files
    assert "flower/walls/glance/judge.py" in {f for f, _, _ in _lines(ID)}


def test_every_cited_id_is_defined_in_docs_design() -> None:
    defined = _defined()
    missing = sorted({f"{hit} ({where}:{line})" for where, line, hit in _lines(ID) if hit not in defined})
    assert not missing, "ids cited but not defined in docs/design.md:\n" + "\n".join(missing)


def test_each_id_is_defined_once_and_says_something() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    counts = Counter(m.group(1) for m in DEFINITION.finditer(text))
    assert counts and max(counts.values()) == 1, [i for i, n in counts.items() if n > 1]
    short = [i for i, body in _defined().items() if len(body) < 60 or " — " not in body]
    assert not short, f"definitions without a decision and a place: {short}"


@pytest.mark.parametrize(
    ("family", "size"), [("P", 5), ("S", 26), ("L", 15), ("B", 15)], ids=["P", "S", "L", "B"]
)
def test_each_family_is_numbered_without_gaps(family: str, size: int) -> None:
    numbers = sorted(int(i.split("-")[1]) for i in _defined() if i.startswith(family))
    assert numbers == list(range(1, size + 1))


def test_no_file_cites_a_document_outside_the_repository() -> None:
    hits = [f"{where}:{line}: {hit}" for where, line, hit in _lines(OUTSIDE)]
    assert not hits, "citations of documents outside the repository:\n" + "\n".join(hits)


def test_every_cited_sdk_notes_section_exists() -> None:
    text = SDK_NOTES.read_text(encoding="utf-8")
    headings = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}
    assert {"hook-inputs", "denials", "session-stores", "found-by-flowers-tests"} <= headings
    cited = [
        (where, line, anchor)
        for where, line, hit in _lines(SDK_ANCHORS)
        for anchor in re.findall(r"#([a-z0-9-]+)", hit)
    ]
    cited += [("docs/sdk-notes.md", 0, a) for a in LOCAL_ANCHOR.findall(text)]
    dangling = [f"{where}:{line}: #{anchor}" for where, line, anchor in cited if anchor not in headings]
    assert not dangling, "anchors with no heading in docs/sdk-notes.md:\n" + "\n".join(dangling)
