"""E-mail threading cues (pure): subjects, reply prefixes and quoted-reply headers.

Spec: insertion-pipeline.md "Relate" (CommunicationThread membership from Message-ID / In-Reply-To / References) and
case R01 (bracketed message ids are ids like any other). A reply that lost its In-Reply-To and References headers is
joined to its thread by its quoted header — the one-line form ("Am 16.12.2024 um 16:18 schrieb Name <addr>:", "On 5
July 2022, at 14:31, Name <addr> wrote:") or the block Outlook writes above the quoted message in English, German,
Dutch and French (``From:/Sent:/To:/Subject:``, ``Von:/Gesendet:/An:/Betreff:``,
``Van:/Verzonden:/Aan:/Onderwerp:``, ``De :/Envoyé :/À :/Objet :``) — or, failing that, by its normalised subject
within the same matter. Subject prefixes of replies and forwards may be stacked (``RE: AW: WG:``) and in any of
those languages (``Antw:``, ``Doorst:``, ``TR:``, ``Fwd:``…).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ki.domain.relate.dates import DATE_PATTERN, parse_match

#: Reply and forward prefixes: English, German, Dutch, French, Nordic, Italian, Spanish, Polish.
PREFIX_WORDS = r"re|aw|wg|fw|fwd|antw|doorst|tr|rif|r|sv|vs|vl|odp|rv|enc"
REPLY_PREFIX = re.compile(rf"^\s*(?:(?:{PREFIX_WORDS})\s*(?:\[\d+\]|\(\d+\))?\s*:\s*)+", re.IGNORECASE)
QUOTE_HEADER = re.compile(
    r"^(?:am|on|le|op)\s+(?P<date>.+?),?\s+(?:um|at|à|om)\s+(?P<time>\d{1,2}[:.h]\d{2}),?\s+(?:schrieb\s+)?"
    r"(?P<who>.*?)<(?P<addr>[^<>\s]+@[^<>\s]+)>\s*(?:schrieb|wrote|a écrit|schreef)?\s*:?\s*$",
    re.IGNORECASE,
)
_FROM = re.compile(r"^\s*(?:from|von|van|de|da|fra|från)\s*:\s*(?P<who>\S.*)$", re.IGNORECASE)
_SENT = re.compile(r"^\s*(?:sent|gesendet|verzonden|envoyé|date|datum|inviato|enviado|sendt|skickat)\s*:\s*"
                   r"(?P<when>\S.*)$", re.IGNORECASE)
_SUBJECT = re.compile(r"^\s*(?:subject|betreff|onderwerp|objet|oggetto|asunto|emne|ämne)\s*:\s*(?P<s>.*)$",
                      re.IGNORECASE)
_TIME = re.compile(r"(?<!\d)(\d{1,2})[:.h](\d{2})(?::\d{2})?\s*(?P<ampm>[ap]\.?\s?m\.?)?(?![\d])", re.IGNORECASE)
_ADDRESS = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")


@dataclass(frozen=True)
class QuotedHeader:
    """The header of the message a reply quotes: its date, ``HH:MM`` (None when not written), the sender's
    address (lower case) or display name, and its subject without prefixes (None when not written)."""

    date: dt.date
    hhmm: str | None
    address: str | None
    name: str | None
    subject_key: str | None = None


def subject_key(subject: str | None) -> str:
    """The subject without reply/forward prefixes, case-folded and whitespace-collapsed."""
    s = REPLY_PREFIX.sub("", subject or "")
    return " ".join(s.split()).casefold()


def is_reply_subject(subject: str | None) -> bool:
    """``AW:``, ``RE:``, ``WG:``, ``Antw:``, ``Doorst:``, ``Fwd:``… in front of the subject."""
    return bool(REPLY_PREFIX.match(subject or ""))


def _hhmm(text: str) -> str | None:
    m = _TIME.search(text)
    if not m:
        return None
    hour, minute = int(m.group(1)), m.group(2)
    ampm = (m.group("ampm") or "").replace(".", "").replace(" ", "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    return f"{hour:02d}:{minute}" if hour < 24 else None


def _who(value: str) -> tuple[str | None, str | None]:
    addr = _ADDRESS.search(value)
    name = re.sub(r"\[mailto:[^\]]*\]|<[^>]*>|\"|'", " ", value)
    name = " ".join(_ADDRESS.sub(" ", name).split()).strip(" ,;")
    return (addr.group(0).lower() if addr else None), (name or None)


def _date_of(text: str) -> dt.date | None:
    dm = DATE_PATTERN.search(text)
    return parse_match(dm) if dm else None


def quoted_headers(text: str) -> list[QuotedHeader]:
    """Every quoted-reply header of ``text``, top first (the message replied to comes first)."""
    out: list[QuotedHeader] = []
    lines = [ln.strip().lstrip(">").strip() for ln in (text or "").splitlines()]
    for i, line in enumerate(lines):
        m = QUOTE_HEADER.match(line)
        if m:
            day = _date_of(m.group("date"))
            if day is not None:
                out.append(QuotedHeader(day, _hhmm(m.group("time")), m.group("addr").lower(),
                                        " ".join(m.group("who").split()).strip(" ,\"") or None))
            continue
        fm = _FROM.match(line)
        if not fm:
            continue
        block = lines[i + 1:i + 6]
        sent = next((s for s in (_SENT.match(x) for x in block) if s), None)
        if sent is None:
            continue
        day = _date_of(sent.group("when"))
        if day is None:
            continue
        subject = next((s.group("s") for s in (_SUBJECT.match(x) for x in block) if s), None)
        addr, name = _who(fm.group("who"))
        out.append(QuotedHeader(day, _hhmm(sent.group("when")[sent.group("when").find(str(day.year)):]),
                                addr, name, subject_key(subject) if subject is not None else None))
    return out


def quoted_header(text: str) -> QuotedHeader | None:
    """The first quoted-reply header of ``text`` (see :func:`quoted_headers`), or None."""
    found = quoted_headers(text)
    return found[0] if found else None


def local_stamp(mail: dict[str, Any] | None) -> tuple[dt.date, str] | None:
    """(date, ``HH:MM``) of a message's Date header in the sender's own offset (as a quote header shows it)."""
    if not mail or not mail.get("date"):
        return None
    try:
        when = dt.datetime.fromisoformat(str(mail["date"]))
    except ValueError:
        return None
    return when.date(), f"{when.hour:02d}:{when.minute:02d}"


def parent_ids(mail: dict[str, Any] | None) -> list[str]:
    """The message ids this message replies to, nearest first: In-Reply-To, then References newest first."""
    if not mail:
        return []
    out: list[str] = []
    if mail.get("in_reply_to"):
        out.append(mail["in_reply_to"])
    for ref in reversed(mail.get("references") or []):
        if ref not in out:
            out.append(ref)
    return out
