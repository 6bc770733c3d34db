"""Legacy Office (LibreOffice, xlrd), archives, TNEF and S/MIME on real files from other projects' test suites.

``tests/fixtures/formats/legacy/MANIFEST.tsv``: one test per clause, each file converted once through the
router (:func:`ki.adapters.convert.router.convert_bytes`) in the isolated conversion workers, as the pipeline does.
LibreOffice is a real component here: CI installs it (``.ci/install_libreoffice.sh``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from ki.adapters.convert.embedded import MAX_NESTING, NESTING_SEP, extract_embedded, may_embed
from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.router import convert_bytes
from ki.config.settings import KiConfig
from ki.core.errors import UnsupportedDocument
from tests.helpers.loopback import LoopbackServer, QuietHandler
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


class _HeldImages(LoopbackServer):
    """A loopback server that never answers: each request is held until the server stops; ``asked`` is set at
    the first one."""

    thread_name = "held-images"

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()

    def handler_class(self) -> type[QuietHandler]:
        outer = self

        class Handler(QuietHandler):
            def _hold(self) -> None:
                outer.asked.set()
                outer.pause(3600)

            do_GET = do_HEAD = do_OPTIONS = do_PROPFIND = _hold  # noqa: N815 - http.server API

        return Handler


def _held_document(url: str, images: int = 12) -> bytes:
    """A flat ODT whose ``images`` pictures are linked from ``url``. LibreOffice fetches each while loading the
    document and waits for the answer up to its own network timeout (seconds per picture, a wall-clock wait no
    machine's speed shortens): it cannot finish converting this file for ``images`` × that timeout, and the
    server's ``asked`` says when it reached the first fetch."""
    frames = "".join(
        f'<text:p>Picture {n} <draw:frame svg:width="2cm" svg:height="2cm" text:anchor-type="as-char">'
        f'<draw:image xlink:href="{url}/picture{n}.png" xlink:type="simple" xlink:show="embed" '
        f'xlink:actuate="onLoad"/></draw:frame></text:p>' for n in range(images))
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
            'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" '
            'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2" '
            'office:mimetype="application/vnd.oasis.opendocument.text">'
            f"<office:body><office:text>{frames}</office:text></office:body></office:document>").encode()


def _own_soffice() -> set[int]:
    """The LibreOffice processes below this test process (its workers' children), not other runs' ones."""
    import psutil

    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name().startswith("soffice"):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def test_libreoffice_past_its_time_is_killed_with_its_group(tmp_path):
    """LibreOffice's own limit (0.5 s) ends a conversion that cannot finish (its pictures are held): the process
    group is killed and nothing half-written is taken for a result."""
    from ki.adapters.convert.soffice import convert_file, find_soffice

    program = find_soffice("soffice")
    assert program, "LibreOffice is not installed (.ci/install_libreoffice.sh)"
    source = tmp_path / "in" / "held.fodt"
    source.parent.mkdir()
    (tmp_path / "out").mkdir()
    with _HeldImages() as server:
        source.write_bytes(_held_document(server.url))
        with pytest.raises(UnsupportedDocument) as info:
            convert_file(program, source, "docx", tmp_path / "out", timeout_seconds=0.5)
        assert _own_soffice() == set()  # killed before the call returned, while its pictures were still held
    assert info.value.reason == "too_large" and info.value.details == {"limit_seconds": 0.5}
    assert not list((tmp_path / "out").iterdir())  # nothing half-written is taken for a result


def test_a_killed_worker_takes_its_libreoffice_with_it(monkeypatch):
    """The worker's wall-clock budget (3 s) ends before LibreOffice's own limit: the pool kills the worker and
    PR_SET_PDEATHSIG kills LibreOffice, so no soffice.bin is left behind.

    Held at a known point, not raced: LibreOffice converts a document whose linked pictures a loopback server
    never serves, so it cannot finish; the pool asks ``renew`` at once (the claim renewal it calls while it
    waits for the file), and ``renew`` returns only once LibreOffice has asked for a picture — the budget, long
    spent by then, kills the worker while LibreOffice is inside that fetch. LibreOffice is then watched die while
    the server still holds its pictures, so nothing but the worker's death can end it. The worker is started by a
    first, plain-text file, so no renewal falls into its start-up (the held file is not sent yet then)."""
    from ki.adapters.convert import isolation
    from ki.adapters.convert.soffice import find_soffice

    monkeypatch.setattr(isolation, "RENEW_SECONDS", 0.05)
    held: set[int] = set()
    with _HeldImages() as server:

        def renew() -> bool:
            assert server.asked.wait(120), "LibreOffice never fetched the linked pictures"
            held.update(_own_soffice())
            return True

        pool = isolation.WorkerPool(isolation.Budget(memory_mb=1536, seconds=3))
        try:
            assert pool.run("ki.adapters.convert.text:convert_text", b"warm", "warm.txt").text == "warm"
            with pytest.raises(UnsupportedDocument) as info:
                pool.run("ki.adapters.convert.legacy:convert_legacy", _held_document(server.url), "held.fodt",
                         renew=renew, soffice=find_soffice("soffice"), timeout_seconds=600)
        finally:
            pool.close()
        assert info.value.reason == "too_large" and info.value.details["limit_seconds"] == 3
        assert held, "no LibreOffice was running at the hold point: the test proves nothing"
        # while its pictures are still held (it could not end by itself): only the worker's death ends it
        assert _wait_gone(held) == set()


# ---------------------------------------------------------------------------- a zip bomb, built here


def test_zip_bomb_member_is_refused_and_its_sibling_kept():
    """A 64 MiB member of zeros deflates ~1000×: refused ``too_large`` by name; the small sibling is a child.
    A member whose header understates its size is never inflated past it: its checksum then fails (``corrupt``)."""
    import io
    import struct
    import zipfile

    from ki.adapters.convert.archive import MAX_RATIO, convert_zip, read_members

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
