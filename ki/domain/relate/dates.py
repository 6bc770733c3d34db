"""Dates as documents write them, for the relate rules (pure functions).

Used to match a citation ("Mandatsvereinbarung vom 02.02.2023", "the lease agreement dated 24th
October 2022", "overeenkomst van 31 maart 2023") to the document of that date, and to order
versions. The date grammar is :mod:`ki.domain.metadata.dates`'s (German, English, Dutch and French month
names, English ordinals, numeric dates with ``.``, ``/`` or ``-``); a text that writes its dates the
American way (``July 5, 2022``) reads numeric dates month first (:func:`ki.domain.metadata.dates.date_order_of`).
PDF text layers wrap lines anywhere, so a date broken across a line ("24th\\nOctober 2022") is one date.
"""

from __future__ import annotations

import datetime as dt
import re

from ki.domain.metadata.dates import DATE, date_order_of, parse_date

#: One date expression (whitespace inside it may be a line break).
DATE_PATTERN = re.compile(rf"(?<![\d/.-])(?:{DATE})(?!\d)")
#: Compact dates in file names: ``(20230620-1701)``, ``20230620``.
COMPACT_DATE = re.compile(r"(?<!\d)((?:19|20)\d{2})(\d{2})(\d{2})(?!\d)")


def _make(y: str, m: str, d: str) -> dt.date | None:
    try:
        return dt.date(int(y), int(m), int(d))
    except ValueError:
        return None


def parse_match(m: re.Match[str], order: str = "dmy") -> dt.date | None:
    """The date of one :data:`DATE_PATTERN` match (None when it is not a real calendar date)."""
    return parse_date(m.group(0), order)


def dates_in(text: str, *, order: str | None = None) -> list[tuple[int, int, dt.date]]:
    """Every date in ``text`` as (start, end, date), in order. ``order``: ``dmy``/``mdy`` for numeric dates
    (default: from the text itself)."""
    text = text or ""
    how = order or date_order_of(text, None)
    out = []
    for m in DATE_PATTERN.finditer(text):
        d = parse_match(m, how)
        if d is not None:
            out.append((m.start(), m.end(), d))
    return out


def dates_in_name(name: str) -> list[dt.date]:
    """Dates in a file name: the text forms plus compact ``YYYYMMDD``."""
    found = [d for _, _, d in dates_in(name, order="dmy")]
    for m in COMPACT_DATE.finditer(name):
        d = _make(m.group(1), m.group(2), m.group(3))
        if d is not None:
            found.append(d)
    return found
