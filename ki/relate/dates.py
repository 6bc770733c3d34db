"""Dates as documents write them, German and English (pure functions).

Used by the relate rules to match a citation ("Mandatsvereinbarung vom 02.02.2023",
"engagement letter dated 16 May 2022") to the document of that date, and to order versions.
"""

from __future__ import annotations

import datetime as dt
import re

MONTHS = {
    "januar": 1, "jänner": 1, "februar": 2, "märz": 3, "maerz": 3, "april": 4, "mai": 5, "juni": 6, "juli": 7,
    "august": 8, "september": 9, "oktober": 10, "november": 11, "dezember": 12,
    "january": 1, "february": 2, "march": 3, "may": 5, "june": 6, "july": 7, "october": 10, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10,
    "okt": 10, "nov": 11, "dec": 12, "dez": 12,
}
_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))

#: One regex, several forms; the named groups say which.
DATE_PATTERN = re.compile(
    r"(?<!\d)(?:"
    r"(?P<d1>\d{1,2})\.(?P<m1>\d{1,2})\.(?P<y1>(?:19|20)\d{2})"  # 20.03.2023
    r"|(?P<d2>\d{1,2})\.?\s+(?P<mn2>" + _MONTH_RE + r")\.?\s+(?P<y2>(?:19|20)\d{2})"  # 20. März 2023, 20 March 2023
    r"|(?P<mn3>" + _MONTH_RE + r")\.?\s+(?P<d3>\d{1,2}),\s+(?P<y3>(?:19|20)\d{2})"  # March 20, 2023
    r"|(?P<y4>(?:19|20)\d{2})-(?P<m4>\d{2})-(?P<d4>\d{2})"  # 2023-03-20
    r")(?!\d)",
    re.IGNORECASE,
)
#: Compact dates in file names: ``(20230620-1701)``, ``20230620``.
COMPACT_DATE = re.compile(r"(?<!\d)((?:19|20)\d{2})(\d{2})(\d{2})(?!\d)")


def _make(y: str, m: int, d: str) -> dt.date | None:
    try:
        return dt.date(int(y), int(m), int(d))
    except ValueError:
        return None


def parse_match(m: re.Match[str]) -> dt.date | None:
    """The date of one :data:`DATE_PATTERN` match (None when it is not a real calendar date)."""
    g = m.groupdict()
    if g["y1"]:
        return _make(g["y1"], int(g["m1"]), g["d1"])
    if g["y2"]:
        return _make(g["y2"], MONTHS[g["mn2"].lower()], g["d2"])
    if g["y3"]:
        return _make(g["y3"], MONTHS[g["mn3"].lower()], g["d3"])
    return _make(g["y4"], int(g["m4"]), g["d4"])


def dates_in(text: str) -> list[tuple[int, int, dt.date]]:
    """Every date in ``text`` as (start, end, date), in order."""
    out = []
    for m in DATE_PATTERN.finditer(text or ""):
        d = parse_match(m)
        if d is not None:
            out.append((m.start(), m.end(), d))
    return out


def dates_in_name(name: str) -> list[dt.date]:
    """Dates in a file name: the text forms plus compact ``YYYYMMDD``."""
    found = [d for _, _, d in dates_in(name)]
    for m in COMPACT_DATE.finditer(name):
        d = _make(m.group(1), int(m.group(2)), m.group(3))
        if d is not None:
            found.append(d)
    return found
