"""E-mail threading cues (pure): subjects, reply prefixes and quoted-reply headers.

Spec: insertion-pipeline.md "Relate" (CommunicationThread membership from Message-ID /
In-Reply-To / References) and case R01 (bracketed message ids are ids like any other).
A reply that lost its In-Reply-To and References headers is joined to its thread by its
quoted header ("Am 16.12.2024 um 16:18 schrieb Name <addr>:") or, failing that, by its
normalised subject within the same matter.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ki.relate.dates import DATE_PATTERN, parse_match

REPLY_PREFIX = re.compile(r"^\s*((re|aw|wg|fw|fwd|antw|sv|vs)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
QUOTE_HEADER = re.compile(
    r"^(?:am|on)\s+(?P<date>.+?),?\s+(?:um|at)\s+(?P<time>\d{1,2}:\d{2}),?\s+(?:schrieb\s+)?(?P<who>.*?)"
    r"<(?P<addr>[^<>\s]+@[^<>\s]+)>\s*(?:schrieb|wrote)?\s*:?\s*$",
    re.IGNORECASE,
)


def subject_key(subject: str | None) -> str:
    """The subject without reply/forward prefixes, case-folded and whitespace-collapsed."""
    s = REPLY_PREFIX.sub("", subject or "")
    return " ".join(s.split()).casefold()


def is_reply_subject(subject: str | None) -> bool:
    """``AW:``, ``RE:``, ``WG:``, ``Fwd:``… in front of the subject."""
    return bool(REPLY_PREFIX.match(subject or ""))


def quoted_header(text: str) -> tuple[dt.date, str, str] | None:
    """The first quoted-reply header of ``text``: (date, ``HH:MM``, sender address lower-case), or None."""
    for line in (text or "").splitlines():
        m = QUOTE_HEADER.match(line.strip())
        if not m:
            continue
        dm = DATE_PATTERN.search(m.group("date"))
        day = parse_match(dm) if dm else None
        if day is None:
            continue
        hh, mm = m.group("time").split(":")
        return day, f"{int(hh):02d}:{mm}", m.group("addr").lower()
    return None


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
