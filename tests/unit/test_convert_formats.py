"""Spreadsheets, presentations, OpenDocument, password-protected files, photos and TIFF scans, on real files.

Each file of ``tests/fixtures/formats`` comes from a public test suite (Apache Tika, python-pptx; see its
README) with the phrases that project's own tests assert; every MANIFEST clause is one test. Files go through
the router (:func:`ki.adapters.convert.router.convert_bytes`) as the convert stage sends them, in this process.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ki.adapters.convert.embedded import extract_embedded
from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.router import convert_bytes
from ki.config.settings import KiConfig
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats"


def _config() -> KiConfig:
    config = KiConfig()
    config.pipeline.convert.isolate = False
    return config


def _convert(data: bytes, name: str) -> StructuredDocument:
    return convert_bytes(data, name, _config())


MANIFEST = Manifest("", _convert, root=FIXTURES)


def _part(doc: StructuredDocument, key: str) -> str:
    if key not in doc.parts:
        pytest.fail(f"no part {key!r}; parts: {sorted(doc.parts)}")
    return doc.parts[key]


def _kind(doc: StructuredDocument, kind: str) -> str:
    return "\n".join(p.text for p in doc.textual_parts() if p.kind == kind)


def _quarantine(path: Path) -> UnsupportedDocument:
    result = MANIFEST.result(path)
    assert isinstance(result, UnsupportedDocument), f"converted, not quarantined: {result.text[:200]!r}"
    return result


def check_clause(path: Path, clause: str) -> None:  # noqa: C901 - one branch per clause kind
    if clause.startswith("quarantine:"):
        assert _quarantine(path).reason == clause.split(":", 1)[1].strip()
        return
    if clause.startswith("message "):
        message = str(_quarantine(path))
        assert (quoted(clause) in message) == clause.startswith("message contains"), message
        return
    doc = document(MANIFEST.result(path))
    if clause.startswith("text contains"):
        assert quoted(clause) in doc.text
    elif clause.startswith("searchable contains"):
        assert any(quoted(clause) in p.text for p in doc.textual_parts())
    elif clause.startswith("text lacks"):
        assert quoted(clause) not in doc.text
    elif clause.startswith("searchable lacks"):
        assert not any(quoted(clause) in p.text for p in doc.textual_parts())
    elif clause == "body empty":
        assert not doc.text.strip()
    elif clause.startswith("part kind"):
        kind = clause.split()[2]
        assert quoted(clause) in _kind(doc, kind)
    elif clause.startswith("part "):
        key = clause[len("part "):clause.index(" contains")]
        assert quoted(clause) in _part(doc, key)
    elif clause.startswith("no part "):
        assert clause[len("no part "):] not in doc.parts
    elif clause.startswith("count "):
        m = re.fullmatch(r'count "(.*)" in (text|part (.+)): (\d+)', clause)
        assert m, clause
        where = doc.text if m.group(2) == "text" else _part(doc, m.group(3))
        assert where.count(m.group(1)) == int(m.group(4))
    elif clause.startswith("comment contains"):
        assert any(quoted(clause) in c.text for c in doc.comments), [c.text for c in doc.comments]
    elif clause.startswith("comment author:"):
        assert quoted(clause) in [c.author for c in doc.comments]
    elif clause.startswith("revision "):
        kind = clause.split()[1]
        assert (kind, quoted(clause)) in [(r.kind, r.text) for r in doc.revisions]
    elif clause.startswith("deleted contains"):
        assert quoted(clause) in _kind(doc, "deleted")
    elif clause.startswith("title:"):
        assert doc.title == quoted(clause)
    elif clause.startswith("hidden sheet:"):
        assert quoted(clause) in doc.metadata["hidden_sheets"]
        assert f"Sheet: {quoted(clause)} (hidden)" in doc.text
    elif clause.startswith("sheet count:"):
        assert len(doc.metadata["sheets"]) == int(clause.split(":")[1])
    elif clause.startswith("sheets:"):
        assert doc.metadata["sheets"] == [s.strip() for s in clause.split(":", 1)[1].split("|")]
    elif clause.startswith("pages:"):
        assert doc.pages == int(clause.split(":")[1])
    elif clause.startswith("page "):
        number = int(clause.split()[1])
        assert quoted(clause) in doc.text.split("\f")[number - 1]
    elif clause.startswith("embedded:"):
        names = [n.strip() for n in clause.split(":", 1)[1].split("|")]
        assert doc.parts["embedded_name"].split("\n") == names
    elif clause.startswith("child"):
        name = clause.split('"')[1]
        kids = {p.name: p for p in extract_embedded(doc.format, path.read_bytes(), path.name)}
        child = convert_bytes(kids[name].data, name, _config())
        assert clause.rsplit('"', 2)[1] in child.text
    else:
        raise AssertionError(f"no check for the clause {clause!r}")


def test_every_clause_is_interpreted() -> None:
    MANIFEST.assert_interpreted(("quarantine:", "message ", "text contains", "text lacks", "searchable contains",
                                 "body empty", "part ", "searchable lacks",
                                 "no part ", "count ", "comment contains", "comment author:", "revision ",
                                 "deleted contains", "title:", "hidden sheet:", "sheet count:", "sheets:",
                                 "pages:", "page ", "embedded:", "child "), min_rows=35)


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(rel: str, clause: str) -> None:
    check_clause(FIXTURES / rel, clause)


def test_sheets_and_slides_are_indexed_as_their_own_parts_not_twice() -> None:
    doc = document(MANIFEST.result(FIXTURES / "tika_testPPT.pptx"))
    parts = doc.textual_parts()
    assert [p.key for p in parts] == ["slide:1", "slide:2", "slide:3"]
    assert {p.kind for p in parts} == {"slide"}
    assert doc.text.startswith("Slide 1: Attachment Test\nAttachment Test\nRajiv")
    sheets = document(MANIFEST.result(FIXTURES / "tika_testComment.xlsx")).textual_parts()
    assert [(p.kind, p.key) for p in sheets] == [("sheet", "sheet:Sheet1"), ("comment", "comment:Sheet1!A1")]
