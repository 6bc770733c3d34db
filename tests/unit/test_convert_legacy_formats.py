"""Legacy Office (LibreOffice, xlrd), archives, TNEF and S/MIME on real files from other projects' test suites.

``tests/fixtures/formats/legacy/MANIFEST.tsv``: one test per clause, each file converted once through the
router (:func:`ki.convert.router.convert_bytes`) in the isolated conversion workers, as the pipeline does.
LibreOffice is a real component here: CI installs it (``.ci/install_libreoffice.sh``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ki.config.settings import KiConfig
from ki.convert.embedded import MAX_NESTING, NESTING_SEP, extract_embedded, may_embed
from ki.convert.model import StructuredDocument
from ki.convert.router import convert_bytes
from ki.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "legacy"
pytestmark = pytest.mark.timeout(300)


def _convert(data: bytes, name: str) -> StructuredDocument:
    return convert_bytes(data, name, KiConfig())


MANIFEST = Manifest("", _convert, root=FIXTURES)


def _children(path: Path, doc: StructuredDocument) -> dict[str, StructuredDocument | UnsupportedDocument]:
    out: dict[str, StructuredDocument | UnsupportedDocument] = {}
    for part in extract_embedded(doc.format, path.read_bytes(), path.name):
        try:
            out[part.name] = _convert(part.data, part.name)
        except UnsupportedDocument as exc:
            out[part.name] = exc
    return out


def _names(path: Path, doc: StructuredDocument) -> list[str]:
    return [p.name for p in extract_embedded(doc.format, path.read_bytes(), path.name)]


def check_clause(path: Path, clause: str) -> None:
    result = MANIFEST.result(path)
    if clause.startswith("quarantined"):
        words = clause.split()
        assert isinstance(result, UnsupportedDocument), f"converted, not quarantined: {result.text[:200]!r}"
        assert result.reason == words[1], (result.reason, str(result))
        if "naming" in words:
            assert words[-1] in str(result)
        return
    doc = document(result)
    if clause.startswith("text contains"):
        assert quoted(clause) in doc.text
    elif clause.startswith("text lacks"):
        assert quoted(clause) not in doc.text
    elif clause.startswith("deleted contains"):
        assert any(quoted(clause) in p.text for p in doc.textual_parts() if p.kind == "deleted")
    elif clause.startswith("comment contains"):
        assert any(quoted(clause) in c.text for c in doc.comments)
    elif clause.startswith("converted_to"):
        assert doc.metadata["converted_by"] == "libreoffice" and doc.metadata["converted_to"] == clause.split()[1]
    elif clause.startswith("sheets"):
        assert doc.metadata["sheets"] == [s.strip() for s in clause.split(" ", 1)[1].split("|")]
    elif clause.startswith("title"):
        assert doc.title == quoted(clause)
    elif clause.startswith("signer"):
        signer = clause.split(" ", 1)[1]
        assert any(signer in (s["signer"], s["email"]) for s in doc.metadata["signature"]), doc.metadata
        assert all(s["signing_time"] for s in doc.metadata["signature"])
    elif clause.startswith("embedded count"):
        assert len(_names(path, doc)) == int(clause.split()[-1])
    elif clause.startswith("embedded:"):
        assert _names(path, doc) == [n.strip() for n in clause.split(":", 1)[1].split("|")]
    elif clause.startswith("child"):
        child = _children(path, doc)[clause.split('"')[1]]
        assert isinstance(child, StructuredDocument), child
        assert clause.rsplit('"', 2)[1] in child.text
    elif clause.startswith("refused"):
        _, member, reason = clause.split()
        assert {"path": member, "reason": reason} in [{k: r[k] for k in ("path", "reason")}
                                                      for r in doc.metadata["refused"]]
        assert f"{member}: refused, {reason}" in doc.text
        assert member not in _names(path, doc)
    elif clause == "nesting bounded":
        deep = NESTING_SEP.join([path.name] * (MAX_NESTING + 1))
        assert may_embed(doc.model_dump(mode="json"), NESTING_SEP.join([path.name] * MAX_NESTING))
        assert not may_embed(doc.model_dump(mode="json"), deep)
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(rel: str, clause: str) -> None:
    check_clause(FIXTURES / rel, clause)


def test_every_clause_is_interpreted() -> None:
    MANIFEST.assert_interpreted(("quarantined", "text contains", "text lacks", "deleted contains", "comment contains",
                                 "converted_to", "sheets", "title", "signer", "embedded count", "embedded:", "child ",
                                 "refused", "nesting bounded"), min_rows=29)


# ---------------------------------------------------------------------------- LibreOffice's life cycle


def _soffice_pids() -> set[int]:
    import psutil

    return {p.pid for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("soffice")}


def _wait_gone(pids: set[int], seconds: float = 15.0) -> set[int]:
    import time

    import psutil

    deadline = time.monotonic() + seconds
    alive = {p for p in pids if psutil.pid_exists(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = {p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}
    return alive


def test_libreoffice_past_its_time_is_killed_with_its_group(tmp_path):
    from ki.convert.soffice import convert_file, find_soffice

    program = find_soffice("soffice")
    assert program, "LibreOffice is not installed (.ci/install_libreoffice.sh)"
    before = _soffice_pids()
    source = tmp_path / "in" / "document.doc"
    source.parent.mkdir()
    source.write_bytes((FIXTURES / "tika_testWORD_2006ml.doc").read_bytes())
    (tmp_path / "out").mkdir()
    with pytest.raises(UnsupportedDocument) as info:
        convert_file(program, source, "docx", tmp_path / "out", timeout_seconds=0.5)
    assert info.value.reason == "too_large" and info.value.details == {"limit_seconds": 0.5}
    assert _wait_gone(_soffice_pids() - before) == set()
    assert not list((tmp_path / "out").iterdir())  # nothing half-written is taken for a result


def test_a_killed_worker_takes_its_libreoffice_with_it():
    """The worker's wall-clock budget (2 s) ends before LibreOffice's own limit: the pool kills the worker and
    PR_SET_PDEATHSIG kills LibreOffice, so no soffice.bin is left behind."""
    import threading

    from ki.convert import isolation
    from ki.convert.soffice import find_soffice

    before = _soffice_pids()
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            seen.update(_soffice_pids() - before)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    pool = isolation.WorkerPool(isolation.Budget(memory_mb=1536, seconds=2))
    try:
        with pytest.raises(UnsupportedDocument) as info:
            pool.run("ki.convert.legacy:convert_legacy", (FIXTURES / "tika_testWORD_2006ml.doc").read_bytes(),
                     "slow.doc", soffice=find_soffice("soffice"), timeout_seconds=600)
    finally:
        pool.close()
        done.set()
        watcher.join()
    assert info.value.reason == "too_large" and info.value.details["limit_seconds"] == 2
    assert seen, "LibreOffice never ran: the test proves nothing"
    assert _wait_gone(seen) == set()
