"""What the relate rules read off one converted file (pure).

:class:`FileFacts` is built from a ``structured_json`` artifact body plus the source object's
path, mtime and content hash; everything else (draft stamp, own dates, annex label, name stem,
rendition) is derived from those, so the same facts come out whichever worker computes them.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ki.config.reference_patterns import formats_for
from ki.config.settings import TextWindowConfig
from ki.core.text_window import TextWindow, normalised_digest, windowed_body
from ki.domain.relate import file_names
from ki.domain.relate.dates import dates_in, dates_in_name

_WINDOW = TextWindowConfig()

#: Word-revision kinds that change content (formatting-only revisions do not make a redline).
CONTENT_REVISIONS = frozenset({"ins", "del", "moveFrom", "moveTo", "para_ins", "para_del", "row_ins", "row_del",
                               "cell_ins", "cell_del"})

#: Draft stamps: "ENTWURF v2 – Stand: 06.03.2023 – Änderungen gegenüber Entwurf v1 vom … markiert",
#: "DRAFT 3 – 24 May 2022 – subject to contract – marked against Draft 2 dated 16 May 2022",
#: "Fassung zur Unterzeichnung – Stand: …", "EXECUTION VERSION – …".
STAMP = re.compile(
    r"^\s*(?:(?P<draft>entwurf|draft)\s*v?(?P<no>\d+)?|(?P<final>fassung zur unterzeichnung|execution version|"
    r"endfassung|final version))\b",
    re.IGNORECASE,
)
AGAINST = re.compile(r"(?:gegenüber|against)\s+(?:entwurf|draft)\s*v?(?P<no>\d+)", re.IGNORECASE)

#: Annex labels at the top of a file or in its name: "Anlage K1", "Anlage 2", "Schedule 4", "Exhibit A",
#: "Appendix 1", "Bijlage 3", "Productie 2", "Annexe 1", "Pièce n° 4".
ANNEX_WORDS = r"anlage|anhang|annex|annexe|appendix|exhibit|schedule|enclosure|bijlage|productie|pièce"
ANNEX_LABEL = re.compile(rf"\b({ANNEX_WORDS})\s+(?:n[°o]\.?\s*)?([A-Z]{{0,2}}\s?\d{{1,3}}[a-z]?|[A-Z])\b",
                         re.IGNORECASE)

#: An annex's words for the document it belongs to: "referred to in the lease", "annexed to the agreement",
#: "behorende bij de huurovereenkomst", "zum Mietvertrag", "annexée au contrat".
ANNEX_OF_CUE = re.compile(r"\b(?:referred to in|annexed to|attached to|appended to|scheduled to|forming part of|"
                          r"behorende? bij|gehecht aan|als bijlage bij|zum|zur|annex[ée]e? [àa]u?)\s+"
                          r"(?:the|this|that|de|het|dem|der|den|l[ea']|du)?\s*([^,.;()]{3,60})", re.IGNORECASE)

#: Words that make a name or title an agreement's (Dutch/German compounds: ``vaststellingsovereenkomst``).
AGREEMENT_WORDS = re.compile(r"\b(?:agreement|contract|lease|deed)\b|overeenkomst|vertrag|vereinbarung|\bcontrat\b|"
                             r"\bconvention\b", re.IGNORECASE)

#: Name words that say which rendition/stage a file is (ordered: later stages rank higher).
SIGNED_WORDS = re.compile(r"unterzeichnet|unterschrieben|signed|executed|countersigned|gegengezeichnet|getekend|"
                          r"ondertekend", re.IGNORECASE)
FILED_WORDS = re.compile(r"eingereicht|filed", re.IGNORECASE)
FINAL_WORDS = re.compile(r"endfassung|final|reinschrift|execution[\s_]version|clean", re.IGNORECASE)
DRAFT_WORDS = re.compile(r"entwurf|draft", re.IGNORECASE)
#: Tokens dropped from a file name to get the document's stem.
NAME_NOISE = re.compile(
    r"\b(?:entwurf|draft|concept|v\d{1,3}|version\s?\d*|versie\s?\d*|final|endfassung|reinschrift|clean|redline|"
    r"marked|compare|comparison|blackline|execution|"
    r"mit änderungen|änderungsmodus|änderungen|unterzeichnet|unterschrieben|signed|executed|fully|countersigned|"
    r"gegengezeichnet|eingereicht|filed|execution|kopie|copy|scan|korrigiert|corrected|von|of)\b",
    re.IGNORECASE,
)
WORD = re.compile(r"[0-9A-Za-zÄÖÜäöüß]+")
#: Labels in front of a file's own date.
DATE_LABEL = (r"(rechnungsdatum|invoice date|datum|date|dated|date received|received|datum ontvangst|ontvangen|"
              r"abruf vom|stand|held on|"
              r"(entwurf|draft|fassung zur unterzeichnung|execution version)[^:]{0,12}[–:-])\s*:?")


#: Formulas that give the document's own date whatever follows it: "THIS AGREEMENT is dated 4th March 2024",
#: "Getekend te Amsterdam op 8 april 2024", "Heden, 20 maart 2023, op verzoek van …", "DEFINITIEVE VERSIE – …".
OWN_DATE_HEAD = re.compile(
    r"(?:heden|today|(?:this|these)\s+[^\d,:]{2,40}?\s+(?:is\s+|are\s+)?(?:dated|made\s+on)|"
    r"(?:getekend|ondertekend|signed|unterzeichnet|sign[ée])\s+(?:te|at|in|à)\s+[^\d,:]{1,40}?\s+(?:op|on|am|le)|"
    r"(?:definitieve\s+versie|definitief|concept(?:\s+v?\d+)?|final\s+version|version\s+finale)\s*[–:-])\s*,?",
    re.IGNORECASE)


@dataclass(frozen=True)
class Stamp:
    """A draft stamp: ``kind`` draft/final, draft ``number``, its ``date``, and the draft it is marked against."""

    kind: str
    number: int | None
    date: dt.date | None
    against_number: int | None
    against_date: dt.date | None


@dataclass
class FileFacts:
    """One file as the relate rules see it.

    Attributes:
        ref: the handle the file is cited by (``F<source_object_id>`` in the pipeline).
        path: path relative to the source root (``/``-separated); an embedded object's path ends
            in `` » name``.
        format: ``docx``, ``pdf``, ``eml``, ...
        title: the converter's title (first heading / subject).
        text: the accepted text.
        original_text: for a file with tracked changes, the text before them.
        revision_kinds: kinds of the tracked changes (``ins``, ``del``, ``rPrChange``...).
        mail: ``{message_id, in_reply_to, references, subject, date, sender, attachments}`` or None.
        mtime: modification time (UTC) or None.
        content_hash: sha256 hex.
        embedded: an attachment / mbox message (``parent_id`` set).
        matter: the matter reference the file is assigned to (None: unassigned).
        reference_patterns: the firm's configured matter-reference formats (``firm.matter_reference_patterns``):
            a name's number they match is the matter's reference, never a DMS document number.
        text_digest: SHA-1 of the whitespace-normalised *whole* text (``text`` may be a window of it).
        window: the bound applied to ``text`` (:meth:`ki.core.text_window.TextWindow.as_dict`).
    """

    ref: str
    path: str
    format: str
    title: str
    text: str
    original_text: str | None = None
    revision_kinds: tuple[str, ...] = ()
    mail: dict[str, Any] | None = None
    mtime: dt.datetime | None = None
    content_hash: str = ""
    embedded: bool = False
    matter: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    reference_patterns: tuple[str, ...] = ()
    text_digest: str = ""
    window: dict[str, Any] | None = None

    @classmethod
    def from_artifact(cls, *, ref: str, path: str, body: dict[str, Any], mtime_ns: int | None = None,
                      content_hash: str = "", embedded: bool = False, matter: str | None = None,
                      reference_patterns: tuple[str, ...] = (), head_chars: int = _WINDOW.head_chars,
                      tail_chars: int = _WINDOW.tail_chars, windowed: tuple[TextWindow, str] | None = None
                      ) -> FileFacts:
        """Build facts from a ``structured_json`` body (see :class:`ki.adapters.convert.model.StructuredDocument`).

        The rules read a bounded window of a huge text (``head_chars`` + ``tail_chars``, by default
        ``pipeline.text_window``'s defaults; :func:`ki.core.text_window.windowed_body`): ``text`` and
        ``original_text`` are windows, ``text_digest`` is of the whole text, ``window`` the bound.
        ``windowed``: (bound, whole text's digest) when ``body["text"]`` already is that window
        (:func:`ki.domain.relate.policy.read_whole` of a huge file reads only the window's pages)."""
        if windowed is None:
            digest = normalised_digest(body.get("text"))
            body, bound = windowed_body(body, head_chars=head_chars, tail_chars=tail_chars)
        else:
            bound, digest = windowed
        mail = body.get("mail")
        if mail:
            sender = mail.get("sender") or {}
            mail = {"message_id": mail.get("message_id"), "in_reply_to": mail.get("in_reply_to"),
                    "references": list(mail.get("references") or []), "subject": mail.get("subject"),
                    "date": mail.get("date"), "sender": (sender.get("address") or "").lower(),
                    "sender_name": sender.get("name") or "",
                    "attachments": list(mail.get("attachments") or [])}
        mtime = dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC) if mtime_ns else None
        return cls(ref=ref, path=path, format=body.get("format") or "", title=body.get("title") or "",
                   text=body.get("text") or "", original_text=body.get("original_text"),
                   revision_kinds=tuple(r.get("kind", "") for r in body.get("revisions") or []), mail=mail,
                   mtime=mtime, content_hash=content_hash, embedded=embedded, matter=matter,
                   reference_patterns=tuple(reference_patterns), text_digest=digest, window=bound.as_dict())

    # -- names -------------------------------------------------------------------------------------

    @cached_property
    def name(self) -> str:
        """The file name (for an embedded object: the part's own name)."""
        return self.path.rsplit(" » ", 1)[-1].rsplit("/", 1)[-1]

    @cached_property
    def folder(self) -> str:
        """The folder path (for an embedded object: its container's folder)."""
        base = self.path.split(" » ", 1)[0]
        return base.rsplit("/", 1)[0] if "/" in base else ""

    @cached_property
    def stem(self) -> str:
        """The file name without extension."""
        return self.name.rsplit(".", 1)[0] if "." in self.name else self.name

    @cached_property
    def has_copy_marker(self) -> bool:
        """``- Kopie``, ``(1)``, ``Copy of``, ``- Copy (2)``...: a name a copy gets."""
        return file_names.has_copy_marker(self.stem)

    @cached_property
    def dms(self) -> file_names.DmsNumber | None:
        """The DMS document number (and version) in the name (``7990945.3 - …``, ``#4811234v3``), if any."""
        return file_names.dms_number(self.stem, self._references)

    @cached_property
    def _references(self) -> file_names.References | None:
        return formats_for(self.reference_patterns) if self.reference_patterns else None

    @cached_property
    def compare(self) -> file_names.Compare | None:
        """What the file compares when it is a compare document (Litera, Workshare), else None."""
        return file_names.compare_of(self.stem, self.lines[:10])

    @cached_property
    def name_version(self) -> int | None:
        """The version the name states: a compare's modified version, the DMS version, ``v<k>``; else None."""
        if self.compare is not None and self.compare.to_version is not None:
            return self.compare.to_version
        return file_names.name_version(self.stem, self._references)

    @cached_property
    def name_key(self) -> str:
        """The name reduced to the document it names: dates, version/stage words and copy markers dropped.

        ``2023-03-13 Mietvertrag Endfassung (2)`` → ``mietvertrag``; ``SPA_v3 (compare)`` → ``spa``;
        ``7990945.3 - Master Services Agreement`` → ``master services agreement``; a compare document reduces to
        the name of the version it shows (``Comparison of v2 to v3 - SPA`` → ``spa``).
        """
        stem = self.stem
        if self.compare is not None and self.compare.modified:
            stem = self.compare.modified.rsplit(".", 1)[0] if re.search(r"\.\w{2,4}$", self.compare.modified) \
                else self.compare.modified
            stem = stem if re.search(r"[A-Za-zÄÖÜäöü]{3}", re.sub(r"\bv\d+\b", "", stem)) else self.stem
        s = file_names.COPY_MARKERS.sub(" ", file_names.strip_dms(stem))
        s = file_names.COMPARE_WORDS.sub(" ", s)
        s = re.sub(r"\(\d{8}-\d{4}\)", " ", s)
        s = re.sub(r"\d{4}-\d{2}-\d{2}(?:\s\d{4})?|\d{1,2}\.\d{1,2}\.\d{4}", " ", s)
        s = s.replace("_", " ")
        s = NAME_NOISE.sub(" ", s)
        s = re.sub(r"[()\[\]\-–]+", " ", s)
        return " ".join(w.lower() for w in WORD.findall(s))

    # -- content -----------------------------------------------------------------------------------

    @cached_property
    def lines(self) -> list[str]:
        """Non-empty, stripped lines of the text."""
        return [ln.strip() for ln in self.text.splitlines() if ln.strip()]

    @cached_property
    def stamp(self) -> Stamp | None:
        """The draft stamp in the first line, if any."""
        first = self.lines[0] if self.lines else ""
        m = STAMP.match(first)
        if not m:
            return None
        dates = [d for _, _, d in dates_in(first)]
        against = AGAINST.search(first)
        own = dates[0] if dates else None
        prev = dates[1] if against and len(dates) > 1 else None
        return Stamp(kind="draft" if m.group("draft") else "final",
                     number=int(m.group("no")) if m.group("no") else None, date=own,
                     against_number=int(against.group("no")) if against else None, against_date=prev)

    @cached_property
    def is_redline(self) -> bool:
        """A file with content-changing tracked revisions, or a compare document (a redline rendition)."""
        return any(k in CONTENT_REVISIONS for k in self.revision_kinds) or self.compare is not None

    @cached_property
    def is_email(self) -> bool:
        """An e-mail message."""
        return self.mail is not None or self.format in ("eml", "msg")

    @cached_property
    def annex_label(self) -> str | None:
        """``anlage k1`` / ``anlage 2`` / ``schedule 4`` when the file *is* an annex (label on top or in the name)."""
        for ln in self.lines[:2]:
            m = ANNEX_LABEL.match(ln)
            if m:
                return f"{m.group(1).lower()} {m.group(2).replace(' ', '').lower()}"
        m = ANNEX_LABEL.match(self.lines[-1]) if len(self.lines) > 2 else None
        if m and re.fullmatch(r"\s*(?:[–:-]\s*[^\d.]{0,60})?", self.lines[-1][m.end():]):
            # a closing caption: "SCHEDULE 2 – COMPANY SEARCH", "BIJLAGE 2"
            return f"{m.group(1).lower()} {m.group(2).replace(' ', '').lower()}"
        stem = file_names.strip_dms(self.stem)
        m = ANNEX_LABEL.search(stem)
        if m and (m.start() == 0 or re.match(r"^[\d\-\s–_]+$", stem[: m.start()])):
            return f"{m.group(1).lower()} {m.group(2).replace(' ', '').lower()}"
        return None

    @cached_property
    def annex_of_words(self) -> tuple[str, ...]:
        """For an annex, the naming words of the document its own text says it belongs to ("Plan of the Premises
        referred to in the lease between …" → ``("lease",)``, "behorende bij de huurovereenkomst" →
        ``("huurovereenkomst",)``); else ``()``."""
        if not self.annex_label:
            return ()
        for ln in self.lines[:12]:
            m = ANNEX_OF_CUE.search(ln)
            if m:
                words = [w.lower() for w in WORD.findall(m.group(1)) if len(w) >= 4]
                return tuple(words[:2])
        return ()

    @cached_property
    def is_agreement_like(self) -> bool:
        """The name or title calls the file an agreement (``Settlement Agreement``, ``Lease``, ``Huurovereenkomst``,
        ``Mietvertrag``, ``Deed of …``) — what an annex nobody cites may belong to (read from a listing)."""
        return bool(AGREEMENT_WORDS.search(f"{self.title} {self.name_key}"))

    @cached_property
    def rendition(self) -> str | None:
        """``redline``, ``signed``, ``filed``, ``final``, ``draft`` or None (from revisions, name and stamp)."""
        if self.is_redline:
            return "redline"
        if FILED_WORDS.search(self.stem):
            return "filed"
        if SIGNED_WORDS.search(self.stem) or re.search(r"\n_{6,}", self.text):
            return "signed" if self.format == "pdf" or SIGNED_WORDS.search(self.stem) else "final"
        if self.stamp is not None:
            return "draft" if self.stamp.kind == "draft" else "final"
        if FINAL_WORDS.search(self.stem):
            return "final"
        if DRAFT_WORDS.search(self.stem):
            return "draft"
        return None

    @cached_property
    def stage_rank(self) -> int:
        """0 draft/redline, 1 final, 2 signed/filed (unknown counts as draft)."""
        return {"signed": 2, "filed": 2, "final": 1}.get(self.rendition or "", 0)

    @cached_property
    def text_dates(self) -> set[dt.date]:
        """Dates the text gives as the file's own: the draft stamp, date lines ("Hannover, 02.02.2023",
        "Köln, den …"), labelled dates ("Rechnungsdatum:", "Invoice date:", "Abruf vom", "Stand:").

        A date cited *from* another document ("… vom 02.02.2023" inside a sentence, "marked against
        Draft 1 dated …") is not one of them.
        """
        out: set[dt.date] = set()
        if self.stamp is not None and self.stamp.date:
            out.add(self.stamp.date)
        for ln in self.lines:
            found = dates_in(ln)
            if not found:
                continue
            start, end, d = found[0]
            head, tail = ln[:start], ln[end:]
            if OWN_DATE_HEAD.fullmatch(head.strip()):
                out.add(d)
                continue
            if not re.fullmatch(r"\s*(\d{1,2}:\d{2}(\s*uhr)?)?\s*\.?\s*", tail, re.IGNORECASE):
                continue
            if re.fullmatch(r"\s*([^\d,:]{2,40},\s*(den\s+)?)?", head) or \
                    re.fullmatch(DATE_LABEL, head.strip(), re.IGNORECASE):
                out.add(d)
        if self.mail and self.mail.get("date"):
            try:
                out.add(dt.datetime.fromisoformat(str(self.mail["date"])).date())
            except ValueError:
                pass
        return out

    @cached_property
    def own_dates(self) -> set[dt.date]:
        """:attr:`text_dates` plus dates in the file name and the modification date."""
        out = set(self.text_dates)
        out.update(dates_in_name(self.name))
        if self.mtime is not None:
            out.add(self.mtime.date())
        return out

    @cached_property
    def version_date(self) -> dt.date | None:
        """The date that orders this file among its document's versions."""
        if self.stamp is not None and self.stamp.date:
            return self.stamp.date
        named = dates_in_name(self.name)
        if named:
            return max(named)
        if self.rendition in ("signed", "filed"):
            tail = [d for ln in self.lines[-12:] for _, _, d in dates_in(ln)]
            if tail:
                return max(tail)
        if self.mtime is not None:
            return self.mtime.date()
        return None

    @cached_property
    def is_letter_like(self) -> bool:
        """A letter: a salutation ("Sehr geehrte…", "Dear …") near the top."""
        return any(re.match(r"(sehr geehrte|dear|liebe[rs]?\b|geachte|beste\b|madame|monsieur|ch[eè]re?\b)", ln,
                            re.IGNORECASE) for ln in self.lines[:25])

    @cached_property
    def depth(self) -> int:
        """Folder depth of the path (``a/b/c.pdf`` → 2)."""
        return self.path.split(" » ", 1)[0].count("/")

    @cached_property
    def heading_words(self) -> set[str]:
        """Lower-case words of the title and the name (what the file calls itself)."""
        words: set[str] = set()
        for s in [self.title, self.stem.replace("_", " ")]:
            words.update(w.lower() for w in WORD.findall(s or "") if len(w) >= 3)
        return words
