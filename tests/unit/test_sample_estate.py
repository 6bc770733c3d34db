"""The sample estate (samples/estate) is what samples/make_sample.py writes, byte for byte, and holds what
the README promises: DOCX with tracked changes and comments, e-mails with attachments, PDFs with a text
layer, scans without one, invented parties on ``.example`` domains only (issue 21, bullet 1).

Cost: one generation (~2 s: two pages rasterised), reading 29 small files.
"""

from __future__ import annotations

import email
import re
import zipfile
from email import policy

import pypdfium2 as pdfium
import pytest

from tests.helpers.paths import REPO_ROOT

SAMPLES = REPO_ROOT / "samples"
ESTATE = SAMPLES / "estate"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    import runpy

    out = tmp_path_factory.mktemp("sample") / "estate"
    make_sample = runpy.run_path(str(SAMPLES / "make_sample.py"), run_name="make_sample")
    assert make_sample["write"](out) == len(files_of(out))
    return out


def files_of(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_committed_estate_is_exactly_what_the_generator_writes(generated):
    committed, fresh = files_of(ESTATE), files_of(generated)
    assert sorted(committed) == sorted(fresh)
    changed = [rel for rel in committed if committed[rel] != fresh[rel]]
    assert not changed, f"regenerate with `python samples/make_sample.py`: {changed}"


def test_the_generator_is_deterministic(generated, tmp_path):
    import runpy

    make_sample = runpy.run_path(str(SAMPLES / "make_sample.py"), run_name="make_sample")
    make_sample["write"](tmp_path / "again")
    assert files_of(tmp_path / "again") == files_of(generated)


def _pdf_text(data: bytes) -> str:
    doc = pdfium.PdfDocument(data)
    try:
        return "".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
    finally:
        doc.close()


def test_the_estate_has_every_kind_of_file_the_readme_names():
    files = files_of(ESTATE)
    assert 25 <= len(files) <= 60
    tracked = commented = 0
    for rel, data in files.items():
        if rel.endswith(".docx"):
            with zipfile.ZipFile(__import__("io").BytesIO(data)) as z:
                body = z.read("word/document.xml").decode()
                tracked += "<w:ins " in body and "<w:del " in body
                commented += "word/comments.xml" in z.namelist()
    assert tracked >= 4 and commented >= 3
    mails = [email.message_from_bytes(d, policy=policy.default) for r, d in files.items() if r.endswith(".eml")]
    with_attachments = [m for m in mails if any(True for _ in m.iter_attachments())]
    assert len(mails) >= 5 and len(with_attachments) >= 4
    assert any(r.endswith(".mbox") for r in files)
    pdfs = {r: _pdf_text(d) for r, d in files.items() if r.endswith(".pdf")}
    scans = [r for r, text in pdfs.items() if not text.strip()]
    assert len(scans) == 2 and all("Scan" in r for r in scans)
    assert sum(1 for text in pdfs.values() if len(text) > 100) >= 8


def test_every_address_is_on_an_example_domain():
    text = b"\n".join(files_of(ESTATE).values()).decode("latin-1")
    domains = set(re.findall(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)", text))
    assert domains and all(d.endswith(".example") for d in domains), sorted(domains)
