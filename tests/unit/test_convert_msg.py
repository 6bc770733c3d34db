"""Outlook .msg through the mail path: every msg/ row of the real corpus MANIFEST."""

from __future__ import annotations

import re

import pytest

from ki.adapters.convert.embedded import extract_embedded
from ki.adapters.convert.msg import convert_msg
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document

# A PGP payload with no readable body is quarantined like the PGP/MIME .eml of the corpus; the
# clauses of that row ("attachments: …", "body empty") then describe the file, not ki's output.
QUARANTINED = {"msg/unstructured_fake-encrypted.msg": "encrypted"}
# ``message_class raw:`` describes the raw property (trailing NUL); ki stores it stripped.
MANIFEST = Manifest("msg", convert_msg, file_facts=("message_class raw:",), exclude=frozenset(QUARANTINED))


@pytest.mark.parametrize(("path", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus, path, clause):
    doc = document(MANIFEST.result(real_corpus / path))
    mail = doc.mail
    key, _, value = clause.partition(":")
    value = value.strip()
    if clause.startswith("subject startswith"):
        assert doc.title.startswith(re.search(r'"(.*)"', clause).group(1))
    elif key == "subject":
        assert doc.title == value.strip('"')
    elif key == "attachments":
        assert mail.attachments == [a.strip() for a in value.split("|")]
    elif clause.startswith("attachments include"):
        assert clause.split("include", 1)[1].strip() in mail.attachments
    elif key == "attachment count":
        assert doc.metadata["attachment_count"] == int(value)
    elif key == "message-id":
        assert mail.message_id == value.strip("<>")
    elif key == "in-reply-to":
        assert mail.in_reply_to == value.strip("<>")
    elif clause.startswith("body contains"):
        assert re.search(r'"(.*)"', clause).group(1) in doc.text
    elif key == "message_class":
        assert doc.metadata["message_class"] == value
    else:
        raise AssertionError(f"clause not interpreted: {clause}")


@pytest.mark.parametrize(("path", "reason"), sorted(QUARANTINED.items()))
def test_quarantined_rows(real_corpus, path, reason):
    with pytest.raises(UnsupportedDocument) as info:
        convert_msg((real_corpus / path).read_bytes(), path)
    assert info.value.reason == reason


def test_attachments_become_embedded_parts_with_their_bytes(real_corpus):
    data = (real_corpus / "msg" / "docling_msg_with_attachment.msg").read_bytes()
    parts = extract_embedded("msg", data, "x.msg")
    assert [p.name for p in parts] == ["test.txt", "report.pdf"]
    assert parts[1].data.startswith(b"%PDF-")


def test_not_an_outlook_file_is_corrupt():
    with pytest.raises(UnsupportedDocument) as info:
        convert_msg(b"hello, not OLE2", "fake.msg")
    assert info.value.reason == "corrupt"
