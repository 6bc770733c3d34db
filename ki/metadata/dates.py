"""The date a document states for itself (``doc_date``), falling back to the file's mtime. Pure.

Spec: insertion-pipeline.md "Extract metadata" ("doc_date (from content, falling back to file
mtime)"). What a document's own date is, strongest first:

1. an e-mail's ``Date`` header, as the local date of the sender (``… 23:30 +0100`` stays that day);
2. a labelled date near the top: a draft stamp (``Stand: 06.03.2023``, ``DRAFT 1 – 8 November 2023``,
   ``EXECUTION VERSION – …``), ``Abruf vom`` (register extracts), ``Rechnungsdatum`` / ``Invoice date``,
   ``Datum`` / ``Date``, ``Verkündet am``;
3. a place-and-date line (``Hannover, den 16.12.2024``, ``London, 3 November 2023``) — the letter
   date, or a signature date at the end;
4. a labelled date anywhere (``Stand: 16.02.2021`` at the foot of a brochure);
5. the file's modification time (UTC date).

Dates that a text merely cites (``Rechnung vom 08.07.2024``, ``beginnt am 15.05.2023``) are never used.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

MONTHS = {
    "januar": 1, "jänner": 1, "january": 1, "jan": 1, "februar": 2, "february": 2, "feb": 2, "märz": 3, "maerz": 3,
    "march": 3, "mar": 3, "april": 4, "apr": 4, "mai": 5, "may": 5, "juni": 6, "june": 6, "jun": 6, "juli": 7,
    "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sept": 9, "sep": 9, "oktober": 10, "october": 10,
    "okt": 10, "oct": 10, "november": 11, "nov": 11, "dezember": 12, "december": 12, "dez": 12, "dec": 12,
}
_MONTH = "(?i:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
DATE = (rf"(?:\d{{1,2}}\.\s?\d{{1,2}}\.\s?(?:19|20)\d{{2}}|\d{{1,2}}\.?\s+{_MONTH}\.?\s+(?:19|20)\d{{2}}|"
        rf"{_MONTH}\.?\s+\d{{1,2}},?\s+(?:19|20)\d{{2}}|(?:19|20)\d{{2}}-\d{{2}}-\d{{2}})")
LABELLED = re.compile(
    rf"(?:(?i:Stand|Abruf\s+vom|Rechnungsdatum|Invoice\s+date|Verkündet\s+am|as\s+of)\s*:?|"
    rf"(?m:^)\s*(?i:Datum|Date)\s*:|(?m:^)\s*(?:ENTWURF|DRAFT|Entwurf|Draft)\s*v?\d*\s*[–-]|"
    rf"(?m:^)\s*(?:EXECUTION\s+VERSION|Execution\s+Version|Fassung\s+zur\s+Unterzeichnung|Endfassung|"
    rf"FINAL(?:\s+VERSION)?)\s*[–-]|\b(?i:version)\b)\s*(?:vom\s+)?(?P<date>{DATE})")
PLACE_DATE = re.compile(rf"(?m)^[ \t]*[A-ZÄÖÜ][\wäöüß.\- ]{{1,40}},[ \t]+(?:den[ \t]+|the[ \t]+)?"
                        rf"(?P<date>{DATE})[ \t]*$")
PIPE_DATE = re.compile(rf"(?m)\|[ \t]*(?P<date>{DATE})[ \t]*$")
MEETING_DATE = re.compile(rf"(?i:Sitzung|Verhandlung|Versammlung|Termin|hearing|meeting)[^\n]{{0,80}}?"
                          rf"\b(?:am|on|vom)\s+(?P<date>{DATE})")
TITLE_VOM = re.compile(rf"(?:vom|dated|of)\s+(?P<date>{DATE})")
DATE_LINE = re.compile(rf"(?m)^[ \t]*(?P<date>{DATE})[ \t]*$")
#: How much of the top of a document counts as its head (characters).
HEAD_CHARS = 1500


def parse_date(value: str) -> dt.date | None:
    """``06.03.2023``, ``8 November 2023``, ``8. März 2023``, ``November 8, 2023``, ``2023-11-08`` → date."""
    s = " ".join(value.replace("\u00a0", " ").split()).strip(" .,")
    try:
        m = re.fullmatch(r"(\d{1,2})\.\s?(\d{1,2})\.\s?(\d{4})", s)
        if m:
            return dt.date(int(m.group(3)), int(m.group(2)), int(m.group(1)))
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", s)
        if m:
            return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = re.fullmatch(rf"(\d{{1,2}})\.?\s+({_MONTH})\.?\s+(\d{{4}})", s, re.IGNORECASE)
        if m:
            return dt.date(int(m.group(3)), MONTHS[m.group(2).lower()], int(m.group(1)))
        m = re.fullmatch(rf"({_MONTH})\.?\s+(\d{{1,2}}),?\s+(\d{{4}})", s, re.IGNORECASE)
        if m:
            return dt.date(int(m.group(3)), MONTHS[m.group(1).lower()], int(m.group(2)))
    except ValueError:
        return None
    return None


def _mail_date(mail: dict[str, Any] | None) -> dt.date | None:
    raw = (mail or {}).get("date")
    if not raw:
        return None
    try:
        return dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00")).date()
    except ValueError:
        return None


def _first(pattern: re.Pattern[str], text: str) -> dt.date | None:
    for m in pattern.finditer(text):
        found = parse_date(m.group("date"))
        if found is not None:
            return found
    return None


def document_date(body: dict[str, Any], mtime_ns: int | None) -> tuple[dt.date | None, str | None]:
    """(doc_date, source) for a ``structured_json`` body; source is ``mail``, ``label``, ``place_date``,
    ``pipe_date``, ``meeting``, ``title``, ``date_line``, ``label_anywhere``, ``mtime`` or None (nothing)."""
    found = _mail_date(body.get("mail"))
    if found is not None:
        return found, "mail"
    text = body.get("text") or ""
    head = text[:HEAD_CHARS]
    title_lines = "\n".join([ln for ln in text.splitlines() if ln.strip()][:3])
    for pattern, source, where in ((LABELLED, "label", head), (PLACE_DATE, "place_date", head),
                                   (PIPE_DATE, "pipe_date", head), (MEETING_DATE, "meeting", head),
                                   (TITLE_VOM, "title", title_lines), (DATE_LINE, "date_line", head),
                                   (PLACE_DATE, "place_date", text), (LABELLED, "label_anywhere", text)):
        found = _first(pattern, where)
        if found is not None:
            return found, source
    if mtime_ns:
        return dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC).date(), "mtime"
    return None, None
