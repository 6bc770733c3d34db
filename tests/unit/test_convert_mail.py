"""ki.adapters.convert.mail against every ``eml/`` row of the real corpus MANIFEST, cases R01/R02/R04, built edge cases.

Each MANIFEST clause becomes one test (``check_clause`` interprets it; an unknown clause
fails ``test_every_clause_is_interpreted``). Not table-driven:

* the ``.mbox`` row (``messages:``/``thread:`` clauses) is checked by
  ``test_split_mbox_thread`` through :func:`split_mbox`;
* ``from raw latin-1 contains "x"`` describes the raw From bytes; it is checked as
  "the decoded sender name contains x".
"""

from __future__ import annotations

import re
import time
from email.message import EmailMessage
from pathlib import Path

import pytest

from ki.adapters.convert.mail import (
    MAX_HEADER_CHARS,
    convert_mail,
    decode_encoded_words,
    parse_addresses,
    split_mbox,
)
from ki.adapters.convert.model import Address, MailMeta, StructuredDocument
from ki.core.errors import UnsupportedDocument
from tests.helpers.manifest import Manifest, document, quoted, split_clauses

FOLDER = "eml"
MBOX = "eml/tika_complex.mbox"
_SURROGATES = re.compile("[\udc80-\udcff]")
_NAME_ADDR = re.compile(r'^"((?:\\.|[^"\\])*)"\s*<([^<>]*)>$')
MANIFEST = Manifest(FOLDER, convert_mail, exclude=frozenset({MBOX}))


def _doc(result: StructuredDocument | UnsupportedDocument) -> StructuredDocument:
    doc = document(result)
    assert doc.mail is not None
    return doc


def _address(spec: str) -> Address:
    """``"Name" <addr>`` (backslash escapes allowed) as an :class:`Address`."""
    match = _NAME_ADDR.match(spec.strip())
    assert match, f"cannot read address spec {spec!r}"
    return Address(name=re.sub(r"\\(.)", r"\1", match.group(1)), address=match.group(2))


def _none_or(value: str) -> str | None:
    return None if value == "none" else value


def check_clause(result: StructuredDocument | UnsupportedDocument, clause: str) -> None:
    """Assert one MANIFEST clause against a conversion result (document or quarantine)."""
    key, _, value = clause.partition(":")
    key, value = key.strip(), value.strip()
    if key == "quarantine":
        assert isinstance(result, UnsupportedDocument), "expected a quarantine"
        assert result.reason == value
        return
    if key == "content-type" and isinstance(result, UnsupportedDocument):
        assert result.details["content_type"] == value  # quarantined mail still names its type
        return
    doc = _doc(result)
    mail = doc.mail
    if key in ("subject", "decoded subject"):
        assert mail.subject == (None if value == "none" else quoted(value))
    elif clause.startswith("subject contains"):
        assert quoted(clause) in mail.subject
    elif clause.startswith("subject length >="):
        assert len(mail.subject) >= int(clause.rsplit(">=", 1)[1])
    elif clause.startswith(("body contains", "text contains")):
        assert quoted(clause) in doc.text
    elif key == "attachments":
        assert mail.attachments == [a.strip() for a in value.split("|")]
    elif key == "attachment count":
        assert len(mail.attachments) == int(value)
    elif key == "defects":
        assert value == "none" and mail.defects == []
    elif clause.startswith("defects include"):
        assert clause.split()[-1] in mail.defects
    elif key == "from":
        assert mail.sender == (None if value == "none" else _address(value))
    elif key == "from addresses":
        assert doc.metadata["from_addresses"] == int(value)
    elif clause.startswith("from raw latin-1 contains"):
        assert quoted(clause) in mail.sender.name
    elif key == "cc":
        assert mail.cc == [_address(a) for a in value.split(" | ")]
    elif key == "message-id":
        assert mail.message_id == _none_or(value.strip("<>"))
    elif key == "in-reply-to":
        assert mail.in_reply_to == _none_or(value.strip("<>"))
    elif key == "references":
        assert len(mail.references) == int(value)
    elif key == "content-type":
        assert mail.content_type == value
    elif key == "parts":
        assert doc.metadata["parts"] == int(value)
    elif clause.startswith("parts >="):
        assert doc.metadata["parts"] >= int(clause.rsplit(">=", 1)[1])
    elif key == "body charset":
        assert doc.metadata["body_charset"] == value.lower()
    elif key == "bom":
        assert doc.metadata["bom"] == _none_or(value)
    else:
        pytest.fail(f"uninterpreted clause {clause!r}")


@pytest.mark.parametrize(("rel", "clause"), MANIFEST.cases())
def test_manifest_clause(real_corpus: Path, rel: str, clause: str) -> None:
    check_clause(MANIFEST.result(real_corpus / rel), clause)


def test_every_clause_is_interpreted(real_corpus: Path) -> None:
    rows = MANIFEST.rows()
    assert len(rows) >= 30, "eml/ rows missing from MANIFEST.tsv"
    result = StructuredDocument(text="", format="eml", converter="x", mail=MailMeta())
    for row in rows:
        for clause in split_clauses(row["expected"]):
            try:
                check_clause(result, clause)
            except pytest.fail.Exception as exc:
                assert "uninterpreted" not in str(exc), f"{row['path']}: {exc}"
            except (AssertionError, AttributeError, TypeError, KeyError):
                pass  # interpreted; the empty document just does not satisfy it


def test_every_row_is_utf8_safe(real_corpus: Path) -> None:
    for row in MANIFEST.rows():
        result = MANIFEST.result(real_corpus / row["path"])
        if isinstance(result, UnsupportedDocument):
            assert "quarantine:" in row["expected"], f"{row['path']}: {result.reason} {result}"
            continue
        assert (result.format, result.converter) == ("eml", "ki.mail")
        dumped = result.model_dump_json()
        dumped.encode("utf-8")
        assert not _SURROGATES.search(dumped), row["path"]
        assert result.text.endswith("\n") and "\r" not in result.text


@pytest.mark.parametrize("name", ["flanker_enclosed-endless.eml", "flanker_long-header.eml"])
def test_hostile_mail_is_bounded(real_corpus: Path, name: str) -> None:
    data = (real_corpus / "eml" / name).read_bytes()
    started = time.perf_counter()
    doc = convert_mail(data, name)
    assert time.perf_counter() - started < 5.0
    assert len(doc.mail.subject) <= MAX_HEADER_CHARS and len(doc.text) < 200_000


def test_part_bomb_records_truncation(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/flanker_enclosed-endless.eml"))
    assert doc.metadata["parts_truncated"] and doc.metadata["parts_total"] > 3000
    assert any(d.startswith("parts:") for d in doc.mail.defects)
    assert "dudes... you're kicking ass." in doc.text


def test_long_subject_is_truncated_with_defect(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/flanker_long-header.eml"))
    assert len(doc.mail.subject) == MAX_HEADER_CHARS
    assert doc.mail.subject.startswith("Die heiße Zypernsonne quälte Max und Victoria ja böse auf dem Weg")
    assert any(d.startswith("subject: truncated") for d in doc.mail.defects)


def test_header_block_and_body(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/docling_eml_with_attachment.eml"))
    assert doc.text.startswith("Subject: Email with Attachment\nFrom: Alice Example <alice@example.com>\n")
    assert doc.title == "Email with Attachment"
    html_only = _doc(MANIFEST.result(real_corpus / "eml/tika_testLotusEml.eml"))
    assert html_only.text.endswith("\n\nMessage body\n") and "<html>" not in html_only.text
    signed = _doc(MANIFEST.result(real_corpus / "eml/flanker_signed.eml"))
    assert "a pöstal sign of our times" in signed.text


def test_utf16_whole_file(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/unstructured_fake-email-utf-16.eml"))
    assert doc.encoding == "utf-16-le"
    assert doc.mail.sender == Address(name="Matthew Robinson", address="mrobinson@unstructured.io")
    assert "This is a test email to use for unit tests." in doc.text


def test_base64_encoded_attached_message_is_read(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/tika_testGroupWiseEml.eml"))
    assert "Subject: test2" in doc.text and "TWltZS1" not in doc.text


def test_raw_8bit_headers(real_corpus: Path) -> None:
    doc = _doc(MANIFEST.result(real_corpus / "eml/flanker_mailformed-headers.eml"))
    assert doc.mail.sender.name.startswith("Юникод запрещен")
    latin = _doc(MANIFEST.result(real_corpus / "eml/flanker_from-encoding.eml"))
    assert latin.mail.sender == Address(name="Ingo Lütkebohle", address="ingo@blank.pages.de")


# --------------------------------------------------------------------------- cases R01, R02, R04


def test_r01_bracketed_message_id_and_threading(cases_dir: Path) -> None:
    folder = cases_dir / "R01-msgid-square-brackets"
    docs = {
        n: convert_mail((folder / f).read_bytes(), f)
        for n, f in ((1, "1-root.eml"), (2, "2-reply-odd-msgid.eml"), (3, "3-reply-to-odd.eml"))
    }
    odd = "[a7f3c2].5e91d04b.2c77a.9f1eSMTPIN_ADDED_[b2]@[c9].EUR01.PROD.MAILHOST.TEST"
    assert docs[2].mail.message_id == odd
    assert any(d.startswith("message-id:") for d in docs[2].mail.defects)
    by_id = {d.mail.message_id: n for n, d in docs.items()}
    parent = {n: by_id.get(d.mail.in_reply_to) for n, d in docs.items()}
    assert parent == {1: None, 2: 1, 3: 2}
    assert docs[3].mail.references == ["lease-4b-0001@northwind-legal.example", odd]


def test_r02_subject_with_bad_base64_length(cases_dir: Path) -> None:
    doc = convert_mail((cases_dir / "R02-subject-b64-bad-length/input.eml").read_bytes(), "input.eml")
    assert "Sehr geehrter Herr Keller,\nanbei die Rechnung 2024-0117." in doc.text
    assert doc.mail.subject == "Rechnung Nr. 2024-0117 für Mandant Keller"
    assert any(d.startswith("subject:") for d in doc.mail.defects)


def test_r04_raw_utf8_addresses(cases_dir: Path) -> None:
    doc = convert_mail((cases_dir / "R04-raw-utf8-address-headers/input.eml").read_bytes(), "input.eml")
    assert doc.mail.sender == Address(name="José Núñez", address="jose.nunez@example.test")
    assert doc.mail.cc == [
        Address(name="Zoë Ångström", address="zoe.angstrom@example.test"),
        Address(name="Łukasz Wiśniewski", address="lukasz.w@example.test"),
    ]
    assert doc.mail.subject == "Entwurf: Vergleich Müller ./. Schröder"
    dumped = doc.model_dump_json()
    assert not _SURROGATES.search(dumped) and not _SURROGATES.search(str(doc.model_dump()))
    dumped.encode("utf-8")


# --------------------------------------------------------------------------- mbox


def test_split_mbox_thread(real_corpus: Path) -> None:
    messages = split_mbox((real_corpus / MBOX).read_bytes())
    assert len(messages) == 3
    mails = [convert_mail(m, f"msg{i}").mail for i, m in enumerate(messages, 1)]
    assert all(m.message_id for m in mails)
    assert mails[1].in_reply_to == mails[0].message_id
    assert mails[2].in_reply_to == mails[1].message_id


def test_split_mbox_rules() -> None:
    data = (
        b"From alice@example.com Mon Jun 01 04:28:28 2009\n"
        b"Subject: one\n\nFrom here on a body line\n>From quoted\n\nFrom 10:00 to 12:00 we meet\n\n"
        b"From bob@example.com Tue Jun 02 05:00:00 2009\n"
        b"Subject: two\n\nbody\n"
    )
    one, two = split_mbox(data)
    assert one == b"Subject: one\n\nFrom here on a body line\nFrom quoted\n\nFrom 10:00 to 12:00 we meet\n\n"
    assert two == b"Subject: two\n\nbody\n"
    assert split_mbox(b"Subject: x\n\nno separator\n") == [b"Subject: x\n\nno separator\n"]
    assert split_mbox(b"") == []


# --------------------------------------------------------------------------- built messages


def _message(**headers: str) -> EmailMessage:
    msg = EmailMessage()
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    return msg


def test_smime_enveloped_is_encrypted() -> None:
    data = (
        b"From: a@example.com\r\nTo: b@example.com\r\nSubject: secret\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"\r\n'
        b"Content-Transfer-Encoding: base64\r\n\r\nMIAGCSqGSIb3DQEHA6CAMIACAQAxggE=\r\n"
    )
    with pytest.raises(UnsupportedDocument) as info:
        convert_mail(data, "smime.eml")
    assert info.value.reason == "encrypted"


def test_inline_pgp_is_encrypted() -> None:
    msg = _message(From="a@example.com", Subject="x")
    msg.set_content("-----BEGIN PGP MESSAGE-----\nhQEMA\n-----END PGP MESSAGE-----\n")
    with pytest.raises(UnsupportedDocument) as info:
        convert_mail(msg.as_bytes(), "pgp.eml")
    assert info.value.reason == "encrypted"


@pytest.mark.parametrize("data", [b"", b" \r\n\r\n "])
def test_empty_mail_is_empty(data: bytes) -> None:
    with pytest.raises(UnsupportedDocument) as info:
        convert_mail(data, "empty.eml")
    assert info.value.reason == "empty"


def test_invalid_date_falls_back_to_received() -> None:
    data = (
        b"Received: from a by b; Mon, 04 Mar 2024 09:15:00 +0000\r\n"
        b"Received: from c by a; Mon, 04 Mar 2024 09:14:00 +0000\r\n"
        b"Date: the day after tomorrow\r\nFrom: a@example.com\r\nSubject: s\r\n\r\nbody\r\n"
    )
    doc = convert_mail(data, "date.eml")
    assert "InvalidDateDefect" in doc.mail.defects
    assert doc.mail.date.isoformat() == "2024-03-04T09:15:00+00:00"
    assert doc.metadata["date_source"] == "received"
    no_dates = convert_mail(b"Date: garbage\r\nSubject: s\r\n\r\nbody\r\n", "nodate.eml")
    assert no_dates.mail.date is None


def test_html_alternative_and_charset_mismatch() -> None:
    msg = _message(From="a@example.com", Subject="html")
    msg.set_content(
        "<html><head><style>p{}</style></head><body><p>Sichtbar</p><script>x()</script></body></html>", subtype="html"
    )
    doc = convert_mail(msg.as_bytes(), "html.eml")
    assert doc.text.endswith("\n\nSichtbar\n")
    mismatch = b"Subject: s\r\nContent-Type: text/plain; charset=gb2312\r\n\r\n" + "Grüße".encode() + b"\r\n"
    doc = convert_mail(mismatch, "mismatch.eml")
    assert "Grüße" in doc.text and any(d.startswith("charset_mismatch") for d in doc.mail.defects)


def test_decode_encoded_words() -> None:
    defects: list[str] = []
    # adjacent words joined (a UTF-8 character split across two words survives)
    assert decode_encoded_words("=?utf-8?B?w7w=?= =?utf-8?B?w7w=?=") == "üü"
    assert decode_encoded_words("=?utf-8?Q?=C3?= =?utf-8?Q?=BC?=x") == "üx"
    assert decode_encoded_words("Re: =?iso-8859-1?q?K=F6ln?= und mehr") == "Re: Köln und mehr"
    assert decode_encoded_words("=?x-unknown?Q?caf=C3=A9?=", defects.append) == "café"
    assert defects and "x-unknown" in defects[0]
    assert decode_encoded_words("no words here") == "no words here"


def test_parse_addresses_shapes() -> None:
    assert parse_addresses("team: a@example.com, B <b@example.com>;") == [
        Address(name="", address="a@example.com"),
        Address(name="B", address="b@example.com"),
    ]
    assert parse_addresses("c@example.com (Carol C)") == [Address(name="Carol C", address="c@example.com")]
    assert parse_addresses('"Doe, Jane" <jane@example.com>, x@example.com') == [
        Address(name="Doe, Jane", address="jane@example.com"),
        Address(name="", address="x@example.com"),
    ]
    assert parse_addresses("undisclosed-recipients:;") == []


# ---------------------------------------------------------------------------- issue 20 item 7: charset labels


def _mail(charset: str, body: bytes, subject: bytes = b"s") -> bytes:
    return (b"Subject: " + subject + b"\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=" + charset.encode()
            + b"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n" + body + b"\r\n")


@pytest.mark.parametrize(
    ("label", "text", "codec"),
    [
        ("visual", "חוזה שכירות חתום", "iso8859_8"),  # WHATWG: visual / logical Hebrew labels
        ("iso-8859-8-i", "חוזה שכירות חתום", "iso8859_8"),
        ("logical", "חוזה שכירות חתום", "iso8859_8"),
        ("x-cp1251", "Договор аренды подписан", "cp1251"),
        ("x-mac-cyrillic", "Договор аренды подписан", "mac_cyrillic"),
        ("dos-874", "สัญญาเช่า", "cp874"),
        ('"windows-1250";', "Smlouva o nájmu podepsána", "cp1250"),  # quoted, trailing punctuation
        ("windows1252", "Vertrag über die Miete – unterschrieben", "cp1252"),  # hyphen dropped (typo class)
        ("x-sjis", "賃貸契約書", "cp932"),
    ],
)
def test_labels_python_does_not_know_go_through_the_whatwg_table(label: str, text: str, codec: str) -> None:
    doc = convert_mail(_mail(label, text.encode(codec)), "l.eml")
    assert doc.text.endswith(f"\n\n{text}\n")
    assert not any(d.startswith("charset") for d in doc.mail.defects)


def test_encoded_word_labels_go_through_the_whatwg_table() -> None:
    import base64

    word = base64.b64encode("Договор №7".encode("cp1251")).decode()
    doc = convert_mail(_mail("utf-8", b"x", subject=f"=?x-cp1251?B?{word}?=".encode()), "h.eml")
    assert doc.mail.subject == "Договор №7"


def test_detector_changing_the_script_is_a_defect_and_the_declared_charset_wins() -> None:
    # Hebrew in ISO-8859-8 with one byte the label leaves undefined (0xFF): the declared charset
    # cannot decode strictly; a detector reads the bytes as Cyrillic.
    hebrew = "הסכם השכירות נחתם היום בין הצדדים והשוכר מתחייב לשלם".encode("iso8859_8") + b" \xff"
    doc = convert_mail(_mail("iso-8859-8", hebrew), "h.eml")
    body = doc.text.split("\n\n", 1)[1]
    assert body.startswith("הסכם השכירות נחתם היום")
    mismatch = [d for d in doc.mail.defects if d.startswith("charset_script_mismatch")]
    assert mismatch and "HEBREW" in mismatch[0]


def test_utf8_body_under_a_single_byte_label_is_utf8_with_a_defect() -> None:
    doc = convert_mail(_mail("iso-8859-1", "Grüße aus München".encode()), "u.eml")
    assert doc.text.endswith("\n\nGrüße aus München\n")
    assert any(d.startswith("charset_mismatch") and "UTF-8" in d for d in doc.mail.defects)


def test_unknown_label_is_a_defect_and_detection_decides() -> None:
    doc = convert_mail(_mail("x-no-such-charset", b"plain ascii"), "n.eml")
    assert doc.text.endswith("\n\nplain ascii\n")
    assert "charset_mismatch: declared x-no-such-charset (unknown label)" in doc.mail.defects


# ---------------------------------------------------------------------------- issue 14 item 7b: inline images


def _png(width: int, height: int) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, "PNG")
    return out.getvalue()


def test_inline_images_stay_with_the_mail_and_real_attachments_become_children() -> None:
    from ki.adapters.convert.embedded import extract_embedded

    msg = EmailMessage()
    msg["Subject"] = "Newsletter"
    msg.set_content("See the logo")
    msg.add_alternative('<p><img src="cid:logo@x"> text <img src="cid:spacer@x"></p>', subtype="html")
    html = msg.get_payload()[1]
    html.add_related(_png(300, 80), "image", "png", cid="<logo@x>", filename="logo.png", disposition="attachment")
    html.add_related(_png(400, 1), "image", "png", cid="<spacer@x>", filename="spacer.png")
    msg.add_attachment(_png(10, 10), maintype="image", subtype="png", filename="pixel.png")  # tiny, no cid
    msg.add_attachment(_png(800, 600), maintype="image", subtype="png", filename="scan.png")
    msg.add_attachment(b"%PDF-1.4 contract", maintype="application", subtype="pdf", filename="contract.pdf")
    doc = convert_mail(msg.as_bytes(), "n.eml")
    assert {"logo.png", "spacer.png", "pixel.png", "scan.png", "contract.pdf"} <= set(doc.mail.attachments)
    assert [p.name for p in extract_embedded("eml", msg.as_bytes(), "n.eml")] == ["scan.png", "contract.pdf"]


def test_msg_inline_images_keep_their_content_id(real_corpus: Path) -> None:
    from ki.adapters.convert.embedded import extract_embedded
    from ki.adapters.convert.msg import msg_to_rfc822

    data = (real_corpus / "msg/mail-parser_mail_outlook_1.msg").read_bytes()
    rebuilt = msg_to_rfc822(data, "x.msg")
    assert b"Content-ID: <spacer.gif>" in rebuilt and b"Content-ID: <newsletter.png>" in rebuilt
    assert extract_embedded("msg", data, "x.msg") == []  # five cid-referenced images: the mail's rendering


def test_raw_utf8_attachment_name_is_decoded(real_corpus: Path) -> None:
    from ki.adapters.convert.embedded import extract_embedded

    data = (real_corpus / "eml/flanker_russian-attachment-yahoo.eml").read_bytes()
    (part,) = extract_embedded("eml", data, "r.eml")
    assert part.name.startswith("Картинка с очень, очень длинным")
