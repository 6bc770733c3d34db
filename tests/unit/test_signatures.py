"""Error signatures (issue 18 item 2): the same fault across files is one signature, a different fault another.

Messages are the shapes ki's stages and the libraries under them really produce (OSError texts,
Docling and gateway HTTP faults, zip/pdf parser errors, the stale-claim text). Pure functions: < 1 s.
"""

from __future__ import annotations

import pytest

from ki.store.signatures import error_signature, normalise_message, record_signature, signature_text


@pytest.mark.parametrize(("message", "expected"), [
    ("[Errno 2] No such file or directory: '/srv/share/Mandate/2021-0060/Brief.docx'",
     "[Errno <n>] No such file or directory: <q>"),
    ("[Errno 13] Permission denied: /srv/share/Akten/x.msg", "[Errno <n>] Permission denied: <path>"),
    (r"cannot read \\fileserver\akten\2020\Vertrag.docx (sharing violation)",
     "cannot read <path> (sharing violation)"),
    (r"Zugriff verweigert: C:\Akten\2020\Vertrag Müller.docx", "Zugriff verweigert: <path>"),
    ("Docling Serve answered HTTP 503 after 30.5 s (http://localhost:5001/v1/convert/file)",
     "Docling Serve answered HTTP 503 after <n> s (<url>)"),
    ("gateway: status code 429 for model gpt-4o (request id req_8f9a0b1c2d3e4f)",
     "gateway: status code 429 for model gpt-4o (request id <id>)"),
    ("document 7f3a9c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b has 12 pages over the limit 10",
     "document <uuid> has <n> pages over the limit <n>"),
    ("content hash 9e107d9d372bb6826bd81d3542a419d6 does not match", "content hash <hex> does not match"),
    ("File is not a zip file", "File is not a zip file"),
    ("mail from anna.schmidt@kanzlei-example.de has no body", "mail from <email> has no body"),
    ("Failed to load document (PDFium: Data format error) in Eingang/kaputt.pdf",
     "Failed to load document (PDFium: Data format error) in <path>"),
    ("  two\n  lines\tof text  ", "two lines of text"),
    (None, ""),
])
def test_normalise_message(message, expected):
    assert normalise_message(message) == expected


def test_same_fault_across_files_is_one_signature():
    paths = ["/srv/a/Brief 1.docx", "/srv/b/c/Vertrag.docx", "/tmp/x.docx"]
    sigs = {error_signature("BadZipFile", "corrupt", f"File {p!r} is not a zip file (offset {i * 77})")
            for i, p in enumerate(paths)}
    assert len(sigs) == 1
    assert len(next(iter(sigs))) == 16


def test_different_faults_are_different_signatures():
    base = error_signature("DoclingError", "conversion_failed", "Docling Serve answered HTTP 503 after 3 s")
    assert base != error_signature("DoclingError", "conversion_failed", "Docling Serve answered HTTP 401 after 3 s")
    assert base != error_signature("DoclingError", None, "Docling Serve answered HTTP 503 after 3 s")
    assert base != error_signature("TimeoutError", "conversion_failed", "Docling Serve answered HTTP 503 after 3 s")
    assert base != error_signature("DoclingError", "conversion_failed", "Docling Serve refused the upload")


def test_long_messages_are_cut_and_record_signature():
    assert len(normalise_message("word " * 1000)) == 300
    record = {"class": "ValueError", "reason": "corrupt", "message": "bad byte at 12"}
    assert record_signature(record) == error_signature("ValueError", "corrupt", "bad byte at 99")
    assert record_signature({"reason": "waiting_for_previous_stage"}) is None
    assert record_signature(None) is None
    assert signature_text("ValueError", None, "bad byte at 12") == "ValueError |  | bad byte at <n>"
