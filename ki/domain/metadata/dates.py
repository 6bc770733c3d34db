"""The date a document states for itself (``doc_date``), falling back to the file's mtime. Pure.

(In the pipeline the file and folder names come between the content and the mtime:
:func:`ki.domain.metadata.path_dates.dated`.)

Spec: insertion-pipeline.md "Extract metadata" ("doc_date (from content, falling back to file
mtime)"). The document's own date comes before the dates it cites; strongest first:

1. an e-mail's ``Date`` header, as the local date of the sender (``… 23:30 +0100`` stays that day);
2. a labelled date near the top: a draft stamp (``Stand: 06.03.2023``, ``KH Draft (3): 16 June 2022``,
   ``DRAFT 1 – 8 November 2023``, ``CONCEPT 2 – 5 juli 2022``, ``Concept d.d. 05-07-2022``), an
   execution line (``EXECUTION VERSION – …``, ``THIS AGREEMENT is dated 9th May 2022``, ``Getekend te
   Amsterdam op …``), ``Abruf vom`` / ``Extract produced on`` (register extracts), ``Invoice date`` /
   ``Rechnungsdatum``, ``Datum`` / ``Date`` / ``Dated``, ``Verkündet am`` / ``uitgesproken op``, ``Heden,``;
3. a place-and-date line (``Hannover, den 16.12.2024``, ``London, 3 November 2023``, ``Bruxelles, le 5
   juillet 2022``) — the letter date, or a signature date at the end;
4. a meeting's date (``held on``, ``Sitzung am``, ``gehouden op``), a date in the title lines, a line
   holding only a date;
5. the same labels and lines anywhere (``Dated 5th July 2022`` at the foot of a pleading);
6. the file's modification time (UTC date).

Dates a text merely cites (``your letter dated 5 July 2022``, ``Rechnung vom 08.07.2024``, ``marked
against draft of 6 June``, ``overeenkomst van 31 maart 2023``) are never used. Month names in German,
English, Dutch and French (with abbreviations), English ordinals (``5th July 2022``, ``July 5th, 2022``),
numeric dates with ``.``, ``/`` or ``-`` read by ``date_order`` (``dmy``/``mdy``: ``firm.date_order``;
unset: ``mdy`` only for a text that writes its dates the American way, ``July 5, 2022``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

MONTHS = {
    # German / English
    "januar": 1, "jänner": 1, "january": 1, "jan": 1, "februar": 2, "february": 2, "feb": 2, "märz": 3, "maerz": 3,
    "march": 3, "mar": 3, "mär": 3, "april": 4, "apr": 4, "mai": 5, "may": 5, "juni": 6, "june": 6, "jun": 6,
    "juli": 7, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sept": 9, "sep": 9, "oktober": 10,
    "october": 10, "okt": 10, "oct": 10, "november": 11, "nov": 11, "dezember": 12, "december": 12, "dez": 12,
    "dec": 12,
    # Dutch
    "januari": 1, "februari": 2, "maart": 3, "mrt": 3, "mei": 5, "augustus": 8,
    # French
    "janvier": 1, "janv": 1, "février": 2, "fevrier": 2, "févr": 2, "fév": 2, "mars": 3, "avril": 4, "avr": 4,
    "juin": 6, "juillet": 7, "juil": 7, "août": 8, "aout": 8, "septembre": 9, "octobre": 10, "novembre": 11,
    "décembre": 12, "decembre": 12, "déc": 12,
}
_MONTH = "(?i:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + ")"
_ORD = r"(?:st|nd|rd|th|er|e)?"
_YEAR = r"(?:19|20)\d{2}"
#: One date expression (numeric with . / -, ISO, day-month-year, month-day-year).
DATE = (rf"(?:\d{{1,2}}[./-]\s?\d{{1,2}}[./-]\s?{_YEAR}(?!\d)|{_YEAR}-\d{{2}}-\d{{2}}|"
        rf"\d{{1,2}}{_ORD}\.?\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}|{_MONTH}\.?\s+\d{{1,2}}{_ORD},?\s+{_YEAR})")
_STAMP_WORDS = (r"(?:ENTWURF|Entwurf|DRAFT|Draft|CONCEPT|Concept|VERSIE|Versie|VERSION|Version|PROJET|Projet)")
LABELLED = re.compile(
    rf"(?:(?i:Stand|Abruf\s+vom|Rechnungsdatum|Invoice\s+date|Date\s+of\s+(?:invoice|notice|extract|report)|"
    rf"Verkündet\s+am|uitgesproken\s+op|as\s+of|Extract\s+produced\s+on|Uittreksel\s+vervaardigd\s+op|"
    rf"Report\s+date|Datum\s+rapport|Plan\s+date|Datum\s+tekening|Circulation\s+date|Comparison\s+run|"
    rf"Vergeleken\s+op|Date\s+received|Factuurdatum|Declaratiedatum|Date\s+de\s+la\s+facture|"
    rf"(?:last\s+)?updated(?:\s+on)?|bijgewerkt\s+op|aktualisiert\s+am|mis\s+à\s+jour\s+le)\s*:?|"
    rf"(?m:^)\s*(?i:Datum|Date|Dated|Dat[ée]|Le|Heden,?)\s*:?|(?i:\bis\s+dated|\bis\s+made\s+on|"
    rf"\bmade\s+on|\bop\s+heden|\b(?:getekend|ondertekend|unterzeichnet|signed|sign[ée])\s+(?:op|am|on|le))|"
    rf"(?m:^)\s*[A-ZÄÖÜ][A-ZÄÖÜ ]{{2,40}}\s[–-]\s*|"
    rf"(?i:getekend|ondertekend|unterzeichnet|signed)\s+(?:te|in|at|à)\s+[^\n,]{{1,40}}?\s+(?:op|am|on|le)|(?m:^)\s*(?:[A-Z]{{1,4}}\s+)?{_STAMP_WORDS}\s*(?:\(\d+\)|v?\d+)?\s*(?:d\.d\.)?\s*[–:(-]?|"
    rf"(?m:^)\s*(?:EXECUTION\s+VERSION|Execution\s+Version|Fassung\s+zur\s+Unterzeichnung|Endfassung|"
    rf"DEFINITIEVE\s+VERSIE|Definitieve\s+versie|FINAL(?:\s+VERSION)?)\s*[–:-]|\b(?i:version)\b)"
    rf"\s*(?:vom\s+|van\s+|du\s+|den\s+)?(?P<date>{DATE})")
PLACE_DATE = re.compile(rf"(?m)^[ \t]*[A-ZÄÖÜÉ][\wäöüßéèëï.,\- ]{{1,40}},[ \t]+(?:den[ \t]+|the[ \t]+|le[ \t]+)?"
                        rf"(?P<date>{DATE})[ \t]*$")
PIPE_DATE = re.compile(rf"(?m)\|[ \t]*(?P<date>{DATE})[ \t]*$")
MEETING_DATE = re.compile(rf"(?i:Sitzung|Verhandlung|Versammlung|Termin|meeting|vergadering|réunion)[^\n]{{0,80}}?"
                          rf"\b(?:am|on|vom|op|du)\s+(?P<date>{DATE})|(?i:\bheld\s+on|\bgehouden\s+op|"
                          rf"\btenue\s+le)\s+(?P<date2>{DATE})")
TITLE_VOM = re.compile(rf"(?:vom|dated|of|van|du)\s+(?P<date>{DATE})")
DATE_LINE = re.compile(rf"(?m)^[ \t]*(?P<date>{DATE})[ \t]*$")
#: An American way of writing a date ("July 5, 2022"): numeric dates of that text read month first.
US_STYLE = re.compile(rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,\s+{_YEAR}")
#: How much of the top of a document counts as its head (characters).
HEAD_CHARS = 1500


def parse_date(value: str, order: str = "dmy") -> dt.date | None:
    """``06.03.2023``, ``06/03/2023``, ``6-3-2023`` (read by ``order``, ``dmy`` or ``mdy``, unless a part is over
    12), ``8 November 2023``, ``8. März 2023``, ``5th July 2022``, ``5 juli 2022``, ``1er juillet 2022``,
    ``November 8, 2023``, ``July 5th, 2022``, ``2023-11-08`` → date; None when it is no valid date."""
    s = " ".join(value.replace("\u00a0", " ").split()).strip(" .,")
    try:
        m = re.fullmatch(r"(\d{1,2})[./-]\s?(\d{1,2})[./-]\s?(\d{4})", s)
        if m:
            a, b, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
            day, month = (b, a) if order == "mdy" else (a, b)
            if month > 12 >= day:  # 13/06/2022 read month first is still 13 June
                day, month = month, day
            return dt.date(y, month, day)
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", s)
        if m:
            return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        m = re.fullmatch(rf"(\d{{1,2}}){_ORD}\.?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})", s, re.IGNORECASE)
        if m:
            return dt.date(int(m.group(3)), MONTHS[m.group(2).lower()], int(m.group(1)))
        m = re.fullmatch(rf"({_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})", s, re.IGNORECASE)
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


def _first(pattern: re.Pattern[str], text: str, order: str) -> dt.date | None:
    for m in pattern.finditer(text):
        raw = m.group("date") if m.group("date") else m.groupdict().get("date2")
        found = parse_date(raw, order) if raw else None
        if found is not None:
            return found
    return None


def date_order_of(text: str, configured: str | None) -> str:
    """``configured`` when set, else ``mdy`` for a text that writes ``July 5, 2022`` and never ``5 July 2022``."""
    if configured in ("dmy", "mdy"):
        return configured
    if US_STYLE.search(text) and not re.search(rf"\b\d{{1,2}}{_ORD}\.?\s+(?:of\s+)?{_MONTH}\.?\s+{_YEAR}", text):
        return "mdy"
    return "dmy"


def document_date(body: dict[str, Any], mtime_ns: int | None, *, date_order: str | None = None
                  ) -> tuple[dt.date | None, str | None]:
    """(doc_date, source) for a ``structured_json`` body; source is ``mail``, ``label``, ``place_date``,
    ``pipe_date``, ``meeting``, ``title``, ``date_line``, ``label_anywhere``, ``place_date``,
    ``date_line_anywhere``, ``mtime`` or None (nothing). ``date_order``: ``firm.date_order``."""
    found = _mail_date(body.get("mail"))
    if found is not None:
        return found, "mail"
    text = body.get("text") or ""
    head = text[:HEAD_CHARS]
    order = date_order_of(text[:20000], date_order)
    # a title ("Vergleich vom 05.03.2024"), not a numbered clause citing a contract
    title_lines = "\n".join([ln for ln in [x for x in text.splitlines() if x.strip()][:3]
                              if not re.match(r"\s*\d+[.)]\s", ln) and len(ln.split()) <= 12])
    for pattern, source, where in ((LABELLED, "label", head), (PLACE_DATE, "place_date", head),
                                   (PIPE_DATE, "pipe_date", head), (MEETING_DATE, "meeting", head),
                                   (TITLE_VOM, "title", title_lines), (DATE_LINE, "date_line", head),
                                   (PLACE_DATE, "place_date", text), (LABELLED, "label_anywhere", text),
                                   (DATE_LINE, "date_line_anywhere", text)):
        found = _first(pattern, where, order)
        if found is not None:
            return found, source
    if mtime_ns:
        return dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC).date(), "mtime"
    return None, None
