"""The ``structured_json`` artifact: what every converter returns.

Spec: insertion-pipeline.md "Parse (convert)": one Artifact(kind="structured_json")
per content hash holding text, metadata, revisions and comments. Every string in
it must encode to UTF-8 (no lone surrogates) so it inserts into PostgreSQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

RevisionKind = Literal[
    "ins",
    "del",
    "moveFrom",
    "moveTo",
    "para_ins",
    "para_del",
    "para_moveFrom",
    "para_moveTo",
    "row_ins",
    "row_del",
    "cell_ins",
    "cell_del",
    "rPrChange",
    "pPrChange",
    "other_format",
]


def clean_text(value: str) -> str:
    """Replace lone surrogates (e.g. ``\\udcc3`` from surrogateescape) so ``value`` encodes to UTF-8.

    Surrogate escapes of raw bytes are re-decoded as UTF-8 first (RFC 6532 headers,
    case R04), then anything still unencodable becomes U+FFFD. NUL bytes are dropped
    (PostgreSQL text refuses them).
    """
    if not value:
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            value = value.encode("utf-8", "surrogateescape").decode("utf-8")
        except UnicodeError:
            value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            value = value.encode("utf-8", "replace").decode("utf-8")
    return value.replace("\x00", "")


class Revision(BaseModel):
    """One tracked change (w:ins, w:del, a move half, a paragraph/row/cell or formatting revision)."""

    kind: RevisionKind
    text: str = ""
    author: str | None = None
    date: datetime | None = None
    revision_id: str | None = None
    part: str = "document"  # document, header1, footnotes, ...
    paragraph: int | None = None  # index of the paragraph in the accepted view of its part
    container: str | None = None  # e.g. "hyperlink:rId10", "sdt", "txbx"
    move_name: str | None = None  # pairs moveFrom with moveTo

    _clean = field_validator("text", "author", mode="before")(lambda v: clean_text(v) if isinstance(v, str) else v)


class Comment(BaseModel):
    """A DOCX comment with its thread and resolved state."""

    comment_id: str
    author: str | None = None
    date: datetime | None = None
    text: str = ""
    anchor_text: str | None = None
    parent_id: str | None = None
    resolved: bool = False

    _clean = field_validator("text", "author", "anchor_text", mode="before")(
        lambda v: clean_text(v) if isinstance(v, str) else v
    )


class Address(BaseModel):
    """A mail participant."""

    name: str = ""
    address: str = ""

    _clean = field_validator("name", "address", mode="before")(lambda v: clean_text(v) if isinstance(v, str) else v)


class MailMeta(BaseModel):
    """Headers of an RFC 822 message (normalised ids without the outer angle brackets)."""

    message_id: str | None = None
    in_reply_to: str | None = None
    references: list[str] = Field(default_factory=list)
    subject: str | None = None
    sender: Address | None = None
    to: list[Address] = Field(default_factory=list)
    cc: list[Address] = Field(default_factory=list)
    bcc: list[Address] = Field(default_factory=list)
    reply_to: list[Address] = Field(default_factory=list)
    date: datetime | None = None
    content_type: str | None = None
    attachments: list[str] = Field(default_factory=list)
    defects: list[str] = Field(default_factory=list)


class StructuredDocument(BaseModel):
    """The converted document (``structured_json`` artifact body).

    Attributes:
        text: the accepted ("final") view that is chunked and indexed.
        original_text: for documents with revisions, the view before them; else None.
        format: ``txt``, ``eml``, ``docx``, ``pdf``, ...
        converter / converter_version: who produced it (idempotency evidence).
        encoding: detected text encoding, for text-like formats.
        pages: page count for paged formats.
        parts: extra named text parts keyed ``kind`` or ``kind:qualifier`` (:data:`PART_KINDS`, e.g.
            ``footnote``, ``header:1``, ``chart:2``, ``annotation:p3``; legacy ``footnotes`` / ``endnotes``
            mean ``footnote`` / ``endnote``). Read them through :meth:`textual_parts`.
        warnings: non-fatal defects (dangling relationship, header parse defects, ...).
        metadata: free-form converter facts (counts of tables, sdt, flags such as ``encrypted``).
        body_parts: for a document made of sections (a workbook's sheets, a deck's slides), the ``parts`` keys
            whose texts, in order, make up ``text``: the index chunks those parts (so a hit names its sheet or
            slide) and not ``text`` a second time; ``text`` stays the whole for the stages that read a body.
    """

    text: str
    original_text: str | None = None
    format: str
    converter: str
    converter_version: str = "1"
    title: str | None = None
    encoding: str | None = None
    pages: int | None = None
    parts: dict[str, str] = Field(default_factory=dict)
    revisions: list[Revision] = Field(default_factory=list)
    comments: list[Comment] = Field(default_factory=list)
    mail: MailMeta | None = None
    warnings: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    body_parts: list[str] = Field(default_factory=list)

    _clean = field_validator("text", "original_text", "title", mode="before")(
        lambda v: clean_text(v) if isinstance(v, str) else v
    )

    def textual_parts(self) -> list[TextualPart]:
        """Every textual part the index stage chunks, the body first (spec: insertion-pipeline.md "Index":
        everything in a file is findable, the hit says where).

        Order: ``body`` (when it has text and is not made of ``body_parts``), then ``parts`` in their order,
        comments (with their anchor),
        tracked deletions (one part per document part they were struck from: in the body, the lines before the
        changes that hold the struck words), then the mail headers the body does not show (Bcc, Reply-To) and
        the attachment names. Empty parts are left out. Returns
        :class:`TextualPart` values; raises nothing.
        """
        return _textual_parts(self)


#: The kinds of text a document holds (the ``kind`` of :class:`TextualPart` and of every indexed chunk).
#: ``body`` is the accepted view (``text``); ``comment`` and ``deleted`` (tracked deletions) are read from
#: ``comments`` / ``revisions``; ``attachment_name`` and ``mail_header`` from ``mail``; the others are keys of
#: ``parts``. A ``parts`` key of a kind not listed here is indexed as ``other`` (nothing is dropped).
PART_KINDS = ("body", "comment", "footnote", "endnote", "header", "footer", "textbox", "annotation", "form_field",
              "chart", "smartart", "embedded_name", "attachment_name", "mail_header", "deleted", "sheet", "slide",
              "notes", "image_info", "other")
#: Legacy ``parts`` keys and the kind they stand for.
LEGACY_PART_KEYS = {"footnotes": "footnote", "endnotes": "endnote", "headers": "header", "footers": "footer",
                    "comments": "comment", "textboxes": "textbox", "annotations": "annotation"}
#: Revision kinds whose text is struck from the accepted view (a move's source reappears as its target).
DELETED_REVISIONS = frozenset({"del", "para_del", "row_del", "cell_del"})
_KEY = re.compile(r"^\s*([A-Za-z_]+)\s*(?::\s*(.*?))?\s*$")


@dataclass(frozen=True)
class TextualPart:
    """One textual part of a document, as the index stage chunks it.

    Attributes:
        kind: one of :data:`PART_KINDS`.
        key: where it came from: ``body``, the ``parts`` key as written (``header:1``, ``footnotes``),
            ``comment:<comment_id>``, ``deleted`` / ``deleted:<part>`` (deletions in a header, a note …),
            ``attachment_name``, ``mail_header``.
        text: the part's text (never empty or whitespace only).
        anchor: for a comment, the text it is anchored to (None when unknown); else None.
        author: the comment's or the deletions' author when known (several deleters: None).
    """

    kind: str
    key: str
    text: str
    anchor: str | None = None
    author: str | None = None


def part_kind(key: str) -> str:
    """The kind a ``parts`` key stands for: ``header:1`` → ``header``, ``footnotes`` → ``footnote``, an unknown
    or malformed key → ``other``."""
    m = _KEY.match(key or "")
    if not m:
        return "other"
    kind = m.group(1).lower()
    kind = LEGACY_PART_KEYS.get(kind, kind)
    return kind if kind in PART_KINDS and kind not in ("body", "comment", "deleted") else "other"


def _deleted_parts(doc: StructuredDocument) -> list[TextualPart]:
    """Struck text, one part per document part it was struck from. In the body, the lines of the view before
    the changes (``original_text``) that hold a deletion and are not in the accepted view — the struck words
    in their sentence, so a struck clause is found by its words; elsewhere (and for deletions no such line
    holds) the deleted runs themselves."""
    deleted: dict[str, list[Revision]] = {}
    for r in doc.revisions:
        if r.kind in DELETED_REVISIONS and r.text.strip():
            deleted.setdefault(r.part or "document", []).append(r)
    out: list[TextualPart] = []
    for part, revs in deleted.items():
        authors = {r.author for r in revs}
        lines: list[str] = []
        rest = revs
        if part == "document" and doc.original_text:
            accepted = {ln.strip() for ln in doc.text.splitlines()}
            changed = [ln.strip() for ln in doc.original_text.splitlines() if ln.strip() and ln.strip() not in accepted]
            held = [ln for ln in changed if any(r.text.strip() in ln for r in revs)]
            lines = list(dict.fromkeys(held))
            rest = [r for r in revs if not any(r.text.strip() in ln for ln in lines)]
        lines += [r.text.strip() for r in rest]
        out.append(TextualPart("deleted", "deleted" if part == "document" else f"deleted:{part}", "\n".join(lines),
                               author=next(iter(authors)) if len(authors) == 1 else None))
    return out


def _textual_parts(doc: StructuredDocument) -> list[TextualPart]:
    out: list[TextualPart] = []
    if doc.text.strip() and not any(key in doc.parts for key in doc.body_parts):
        out.append(TextualPart("body", "body", doc.text))
    for key, value in doc.parts.items():
        if isinstance(value, str) and value.strip():
            out.append(TextualPart(part_kind(key), key, clean_text(value)))
    for c in doc.comments:
        if c.text.strip():
            anchor = " ".join(c.anchor_text.split()) if c.anchor_text and c.anchor_text.strip() else None
            out.append(TextualPart("comment", f"comment:{c.comment_id}", c.text, anchor=anchor, author=c.author))
    out.extend(_deleted_parts(doc))
    if doc.mail is not None:
        # Subject, From, To, Cc and Date open the body already; these are the headers it does not show.
        lines = [f"{label}: {', '.join(f'{a.name} <{a.address}>' if a.name else a.address for a in addrs)}"
                 for label, addrs in (("Bcc", doc.mail.bcc), ("Reply-To", doc.mail.reply_to)) if addrs]
        if lines:
            out.append(TextualPart("mail_header", "mail_header", "\n".join(lines)))
        names = [n for n in doc.mail.attachments if n and n.strip()]
        if names:
            out.append(TextualPart("attachment_name", "attachment_name", "\n".join(names)))
    return out
