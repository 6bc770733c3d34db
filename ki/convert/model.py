"""The ``structured_json`` artifact: what every converter returns.

Spec: insertion-pipeline.md "Parse (convert)": one Artifact(kind="structured_json")
per content hash holding text, metadata, revisions and comments. Every string in
it must encode to UTF-8 (no lone surrogates) so it inserts into PostgreSQL.
"""

from __future__ import annotations

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
        parts: extra named text parts (``header``, ``footer``, ``footnotes``, ``endnotes``).
        warnings: non-fatal defects (dangling relationship, header parse defects, ...).
        metadata: free-form converter facts (counts of tables, sdt, flags such as ``encrypted``).
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

    _clean = field_validator("text", "original_text", "title", mode="before")(
        lambda v: clean_text(v) if isinstance(v, str) else v
    )
