"""The date a file or folder name states (``2023-11-03 Kündigung.pdf``, ``DD report 16.05.22.docx``). Pure.

Spec: insertion-pipeline.md "Extract metadata" (``doc_date`` from content, then the file's name and its
folders' names, then — as weak evidence — the file's mtime; see :func:`ki.domain.metadata.dates.document_date`).
Firms name files by date, and many documents carry no date in their text. Forms read, in any of the
name's words:

* ISO and year first: ``2023-11-03``, ``2023_11_03``, ``2023.11.03``, ``20240117`` (eight digits, only where
  no other digit touches them and not inside a longer number);
* day first (month first with ``firm.date_order`` ``mdy``): ``05.07.2022``, ``05-07-2022``, ``5/7/2022``,
  two-digit years ``16.05.22`` / ``16-05-22`` (``00``–``69`` → 2000s, ``70``–``99`` → 1900s);
* spelled out in German, English, Dutch or French: ``3. März 2024``, ``3 March 2024``, ``March 3, 2024``,
  ``5th July 2022``, ``5 juli 2022``, ``1er juillet 2022``.

Not dates: a year and a month (``Rundschreiben 2024-01``), a matter reference (``2024-031``), a client-matter
number (``104233-0007``), a DMS document number (``4811234_3``) — none has a valid day.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ki.domain.metadata.dates import DATE, date_order_of, document_date, parse_date

#: Earliest and latest year a name's date may carry (a number outside is something else).
YEARS = (1950, 2099)
_SEP = r"[-_.]"
_YEAR_FIRST = re.compile(rf"(?<![\d.,/-])((?:19|20)\d{{2}})({_SEP}?)(\d{{2}})\2(\d{{2}})(?![\d])")
_TWO_DIGIT_YEAR = re.compile(r"(?<![\d.,/-])(\d{1,2})([./-])(\d{1,2})\2(\d{2})(?![\d]|[./-]\d)")
_SPELLED = re.compile(rf"(?<![\w]){DATE}(?![\d])")


def _valid(year: int, month: int, day: int) -> dt.date | None:
    if not YEARS[0] <= year <= YEARS[1]:
        return None
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def name_date(name: str, order: str = "dmy") -> dt.date | None:
    """The first date written in a file or folder name (the extension is ignored), or None.

    ``order``: ``dmy`` or ``mdy`` (``firm.date_order``) for numeric dates whose parts are both ≤ 12.
    ``2023-11-03 Kündigung Arbeitgeber.pdf`` → 2023-11-03; ``20240117_Schreiben.docx`` → 2024-01-17;
    ``DD report 16.05.22.docx`` → 2022-05-16; ``Protokoll vom 3. März 2024.pdf`` → 2024-03-03.
    """
    stem = re.sub(r"\.[A-Za-z0-9]{1,5}$", "", name)
    found: list[tuple[int, dt.date]] = []
    for m in _YEAR_FIRST.finditer(stem):
        date = _valid(int(m.group(1)), int(m.group(3)), int(m.group(4)))
        if date is not None:
            found.append((m.start(), date))
    for m in _SPELLED.finditer(stem):
        date = parse_date(m.group(0), order)
        if date is not None and YEARS[0] <= date.year <= YEARS[1]:
            found.append((m.start(), date))
    for m in _TWO_DIGIT_YEAR.finditer(stem):
        a, b, yy = int(m.group(1)), int(m.group(3)), int(m.group(4))
        day, month = (b, a) if order == "mdy" else (a, b)
        if month > 12 >= day:
            day, month = month, day
        date = _valid((2000 if yy < 70 else 1900) + yy, month, day)
        if date is not None:
            found.append((m.start(), date))
    return min(found, key=lambda f: f[0])[1] if found else None


def path_date(rel_path: str, order: str = "dmy") -> tuple[dt.date | None, str | None]:
    """(date, source) from a file's path relative to its source root: the file name's date (``file_name``),
    else the nearest folder name's (``folder_name``), else (None, None). An attachment's path
    (``mail.eml/attachment.pdf``) reads the attachment's name first, then the mail's, then its folders'."""
    parts = [p for p in rel_path.replace("\\", "/").split("/") if p]
    if not parts:
        return None, None
    found = name_date(parts[-1], order)
    if found is not None:
        return found, "file_name"
    for folder in reversed(parts[:-1]):
        found = name_date(folder, order)
        if found is not None:
            return found, "folder_name"
    return None, None


def mtime_date(mtime_ns: int | None) -> dt.date | None:
    """The UTC date of a modification time in nanoseconds (None for none)."""
    return dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC).date() if mtime_ns else None


def dated(body: dict[str, Any], rel_path: str, mtime_ns: int | None, *, date_order: str | None = None,
          mtime_trusted: bool = True) -> tuple[dt.date | None, str | None]:
    """(doc_date, source) of a document, strongest evidence first: its content
    (:func:`ki.domain.metadata.dates.document_date`: ``mail``, ``label``, ``place_date``, …), its file name
    (``file_name``), its folders' names (``folder_name``), then its mtime (``mtime``) — weak evidence, used
    only when ``mtime_trusted`` (False when the file's folder shares one mtime: a copy, a restore, a clone,
    a DMS export; see :func:`uniform_mtimes`); else (None, None). ``date_order``: ``firm.date_order``."""
    found, source = document_date(body, None, date_order=date_order)
    if found is not None:
        return found, source
    order = date_order_of((body.get("text") or "")[:20000], date_order)
    found, source = path_date(rel_path, order)
    if found is not None:
        return found, source
    if mtime_trusted and mtime_ns:
        return mtime_date(mtime_ns), "mtime"
    return None, None


#: Files whose mtimes all lie within this many seconds were written at once (a copy, not their authors' edits).
UNIFORM_SPREAD_S = 300
#: How many files a folder needs for its mtimes to say anything.
UNIFORM_MIN_FILES = 3


def uniform_mtimes(mtimes_ns: list[int]) -> bool | None:
    """Whether a folder's file mtimes (ns) were set at once: True when at least :data:`UNIFORM_MIN_FILES` lie
    within :data:`UNIFORM_SPREAD_S` seconds of each other, False when they spread wider, None when too few
    files to tell."""
    values = [v for v in mtimes_ns if v]
    if len(values) < UNIFORM_MIN_FILES:
        return None
    return (max(values) - min(values)) / 1e9 <= UNIFORM_SPREAD_S
