"""Which files a relate decision reads: the relate rules' candidate test as data (pure).

Spec: insertion-pipeline.md "Relate" (decisions are made over the files of the matter; relations
to a file that classifies later are established when it classifies) and order independence (every
derived fact a function of the estate, not of the order). The rules policy
(:class:`ki.domain.relate.policy.RelateRulesPolicy`) opens, among the files of the matter, exactly those
:meth:`Wants.reads` accepts; the same :class:`Wants`, stored when a file's relate starts, lets a
file that classifies into the matter *later* tell whether it would have been read — and so
whether that earlier decision must be taken again (:mod:`ki.domain.relate.basis`).

A file is read when it has bytes the decision already holds (identical copies, named messages,
own attachments), is a message the headers name, or — by its listing (path, title, format) — is
a message of the same subject, an attachment named by the message, a file of the same document
name or title, a file the text cites by name or by a word of its title, any letter-like file for
a reply citation ("Ihr Schreiben vom …"), or, for an annex, a file that calls itself like its
label or cites the label in its text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ki.domain.relate.cues import citations, words_match
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.threads import parent_ids, subject_key

SEARCH_WORD = re.compile(r"[0-9a-zäöüß]+")


def search_score(query: str, *, title: str | None, rel_path: str, phrase_hit: bool) -> float:
    """The ``search_documents`` score of one file (0: not a result).

    2 per query word (≥ 3 letters) in the title, 1 per word in the file name (for an embedded file:
    everything after the last ``/``), 3 when the text holds the query as a phrase; an empty query
    scores every file 1.
    """
    q = query.strip()
    if not q:
        return 1.0
    words = {w for w in SEARCH_WORD.findall(q.casefold()) if len(w) >= 3}
    title_words = set(SEARCH_WORD.findall((title or "").casefold()))
    name_words = set(SEARCH_WORD.findall(rel_path.rsplit("/", 1)[-1].casefold()))
    return 2.0 * len(words & title_words) + len(words & name_words) + (3.0 if phrase_hit else 0.0)


def listed_facts(listed: dict[str, Any]) -> FileFacts:
    """The facts a listing gives of a file (``path``, ``title``, ``format``, ``content_hash``; no text)."""
    return FileFacts(ref="", path=listed["path"], format=listed.get("format") or "", title=listed.get("title") or "",
                     text="", content_hash=listed.get("content_hash") or "")


def _norm(title: str | None) -> str:
    return " ".join((title or "").lower().split())


@dataclass(frozen=True)
class Wants:
    """What one file's relate decision reads (see module doc).

    Attributes:
        hashes: content hashes already held (the file's own, its copies', named messages', attachments').
        message_ids: the message ids its headers name, and its own (copies of the same message).
        is_email / subject_key / attachments: for an e-mail, its subject without prefixes and attachment names.
        name_key / title: the document name its file name reduces to, and its title (normalised).
        cite_files / cite_words / reply: file names and naming words it cites; a reply citation.
        annex_label: ``anlage k1`` when the file is an annex, else None.
    """

    hashes: frozenset[str]
    message_ids: frozenset[str]
    is_email: bool
    subject_key: str
    attachments: frozenset[str]
    name_key: str
    title: str
    cite_files: frozenset[str]
    cite_words: frozenset[str]
    reply: bool
    annex_label: str | None

    @classmethod
    def of(cls, me: FileFacts, *, hashes: set[str] | frozenset[str] = frozenset()) -> Wants:
        """The wants of ``me``; ``hashes``: content hashes of the files the payload names besides it."""
        mail = me.mail or {}
        cites = citations(me)
        own = mail.get("message_id")
        return cls(
            hashes=frozenset({h for h in {me.content_hash, *hashes} if h}),
            message_ids=frozenset(i for i in [*parent_ids(me.mail), own] if i),
            is_email=me.is_email, subject_key=subject_key(mail.get("subject")),
            attachments=frozenset(mail.get("attachments") or []), name_key=me.name_key, title=_norm(me.title),
            cite_files=frozenset([*(c.filename for c in cites if c.filename),
                                  *([me.compare.original] if me.compare and me.compare.original else [])]),
            cite_words=frozenset([*(w for c in cites for w in c.words), *me.annex_of_words]),
            reply=any(c.reply for c in cites),
            annex_label=me.annex_label)

    def as_json(self) -> dict[str, Any]:
        """A JSON object (sets as sorted lists)."""
        return {k: sorted(v) if isinstance(v, frozenset) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Wants:
        """Inverse of :meth:`as_json`."""
        sets = {"hashes", "message_ids", "attachments", "cite_files", "cite_words"}
        return cls(**{k: frozenset(v) if k in sets else v for k, v in data.items()})

    def by_listing(self, other: FileFacts, *, held_hashes: set[str] | frozenset[str] = frozenset()) -> bool:
        """Whether a listed file (path, title, format, content hash) is worth opening."""
        if other.content_hash and other.content_hash in (self.hashes | held_hashes):
            return True
        if other.is_email:
            return self.is_email and subject_key(other.title) == self.subject_key
        if self.is_email:
            if other.name in self.attachments:
                return True
        elif (self.name_key and other.name_key == self.name_key) or (self.title and _norm(other.title) == self.title):
            return True
        if other.name in self.cite_files or self.reply:
            return True
        if self.annex_label and other.is_agreement_like:  # an annex nobody cites belongs to the matter's agreement
            return True
        return any(words_match(w, h) for w in self.cite_words for h in other.heading_words)

    def by_label(self, other: FileFacts, text: str) -> bool:
        """For an annex: the file is a ``search_documents(annex label)`` result (its name, title or text)."""
        if not self.annex_label:
            return False
        phrase = self.annex_label.lower() in (text or "").lower()
        return search_score(self.annex_label, title=other.title, rel_path=other.path, phrase_hit=phrase) > 0

    def reads(self, other: FileFacts, *, text: str, message_id: str | None) -> bool:
        """Whether the decision reads ``other`` (a file of the same matter with its text and Message-ID)."""
        if message_id and message_id in self.message_ids:
            return True
        return self.by_listing(other) or self.by_label(other, text)
