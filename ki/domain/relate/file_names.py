"""What a file's name says about the document it holds (pure): DMS numbers, versions, copies, compares.

Spec: insertion-pipeline.md "Relate" (identity, version order, redline links).
Conventions of document-management exports and file shares:

* DMS document numbers with a version: ``#4811234v3 - Title.docx``, ``4811234_3.docx``,
  ``7990945.3 - Master Services Agreement.docx``, ``Title (4811234v3).docx`` — one number is one
  document, the version orders it;
* version words: ``v2``, ``Version 3``, ``Entwurf v1``, ``versie 2``;
* copies a file system or mail client makes: ``Copy of …``, ``… - Copy (2)``, ``… - Kopie``,
  ``Kopie van …``, ``… (1)``;
* compare documents (Litera, Workshare, DeltaView): ``Comparison of v2 to v3 - SPA.pdf``,
  ``Workshare Compare - Lease v1 vs Lease v2.pdf``, and in the text ``Original document: … /
  Modified document: …`` — a redline between the versions they name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol


class References(Protocol):
    """The firm's matter-reference formats (:class:`ki.config.reference_patterns.ReferenceFormats`)."""

    def fullmatch(self, value: str) -> bool:
        """Whether ``value`` as a whole is a matter reference."""

#: A DMS document number and version inside a name (the number is 6–10 digits; a date-like number is not one),
#: optionally behind a library prefix (``DOCS-123456-v2``, ``LON_4811234_3``). A hyphen separates a version
#: only with its ``v``: ``123456-0001`` is a client-matter number, not a document.
DMS_NUMBER = re.compile(r"(?:^|(?<=[\s(\[_#-]))(?:[A-Za-z]{2,8}[-_])?#?(?P<doc>\d{6,10})(?:[-_.]?[vV]|\.|_)"
                        r"(?P<ver>\d{1,3})(?=$|[\s)\]_.,-])")
DMS_BARE = re.compile(r"(?:^|(?<=[\s(\[]))#(?P<doc>\d{6,10})(?=$|[\s)\]_.,-])")
#: Markers a copy gets from a file system or a mail client.
COPY_MARKERS = re.compile(r"(?:\s*-\s*kopie\b|\bkopie van\b|\bcopy of\b|\s-\scopy\b(?:\s*\(\d+\))?|\s*\(\d+\)\s*$|"
                          r"_copy\b|\s-\scopie\b|\bcopie de\b)", re.IGNORECASE)
NAME_VERSION = re.compile(r"(?:^|[\s_\-(])(?:v|version|versie|fassung)\s?(\d{1,3})(?=$|[\s_\-.)(])", re.IGNORECASE)
#: Words that make a file a compare (redline between two versions).
#: (``Vergleich`` is not one: in German it is also a settlement.)
COMPARE_WORDS = re.compile(r"\b(?:comparison|compare|compared|vergelijking|blackline|deltaview|litera|workshare)\b",
                           re.IGNORECASE)
COMPARE_SIDES = re.compile(r"^(?P<a>.+?)\s+(?:vs\.?|versus|to|against|gegen|gegenüber|met|mit|tegen|with|and|"
                           r"und|en)\s+(?P<b>.+)$", re.IGNORECASE)
#: Header lines of a compare report ("Original document: SPA v2.docx").
COMPARE_ORIGINAL = re.compile(r"^\s*(?:original(?:\s+document)?|originaldokument|origineel(?:\s+document)?|"
                              r"document\s+1|ursprüngliches\s+dokument|original\s+filename)\s*:\s*(?P<name>.+?)\s*$",
                              re.IGNORECASE)
COMPARE_MODIFIED = re.compile(r"^\s*(?:modified(?:\s+document)?|revised(?:\s+document)?|geändertes\s+dokument|"
                              r"gewijzigd(?:\s+document)?|document\s+2|modified\s+filename)\s*:\s*(?P<name>.+?)\s*$",
                              re.IGNORECASE)


def _date_like(number: str) -> bool:
    return len(number) == 8 and number[:2] in ("19", "20") and 1 <= int(number[4:6]) <= 12 and \
        1 <= int(number[6:8]) <= 31


@dataclass(frozen=True)
class DmsNumber:
    """A DMS document number and its version (None when the name gives no version)."""

    number: str
    version: int | None


def dms_number(stem: str, references: References | None = None) -> DmsNumber | None:
    """The DMS document number (and version) a file name carries, or None.

    ``references``: the firm's configured matter-reference formats; a number they match as a whole
    (``123456.001`` when the firm writes ``NNNNNN.NNN``) is the matter's reference, not a document number.
    """
    for m in DMS_NUMBER.finditer(stem):
        if references is not None and references.fullmatch(m.group(0).lstrip("#")):
            continue
        if not _date_like(m.group("doc")):
            return DmsNumber(m.group("doc"), int(m.group("ver")))
    m = DMS_BARE.search(stem)
    return DmsNumber(m.group("doc"), None) if m and not _date_like(m.group("doc")) else None


def strip_dms(stem: str) -> str:
    """The name without its DMS number (``7990945.3 - Master Services Agreement`` → ``Master Services Agreement``)."""
    def drop(m: re.Match[str]) -> str:
        return m.group(0) if _date_like(m.group("doc")) else " "

    s = DMS_BARE.sub(drop, DMS_NUMBER.sub(drop, stem))
    s = re.sub(r"\(\s*\)|\[\s*\]", " ", s)
    return re.sub(r"^[\s#_\-–]+|[\s_\-–]+$", "", s)


def name_version(stem: str, references: References | None = None) -> int | None:
    """The version a name states: the DMS version, else ``v2`` / ``Version 3`` / ``versie 2`` (``references``:
    as for :func:`dms_number`)."""
    dms = dms_number(stem, references)
    if dms is not None and dms.version is not None:
        return dms.version
    m = NAME_VERSION.search(stem)
    return int(m.group(1)) if m else None


def has_copy_marker(stem: str) -> bool:
    """``- Kopie``, ``(1)``, ``Copy of``, ``- Copy (2)``...: a name a copy gets."""
    return bool(COPY_MARKERS.search(stem))


@dataclass(frozen=True)
class Compare:
    """A compare document: the file names (or name stems) of the original and the modified version, and their
    version numbers (None when not stated)."""

    original: str | None
    modified: str | None
    from_version: int | None
    to_version: int | None


def _side_version(side: str | None) -> int | None:
    return name_version(side) if side else None


def compare_of(stem: str, head_lines: list[str]) -> Compare | None:
    """The compare a file is, from its name (``Comparison of v2 to v3 - SPA``, ``Lease v1 vs Lease v2``) or the
    report header in its first lines (``Original document: … / Modified document: …``); None otherwise."""
    original = modified = None
    for line in head_lines[:10]:
        m = COMPARE_ORIGINAL.match(line)
        if m and original is None:
            original = m.group("name").strip()
        m = COMPARE_MODIFIED.match(line)
        if m and modified is None:
            modified = m.group("name").strip()
    named = bool(COMPARE_WORDS.search(stem))
    if original is None and modified is None and not named:
        return None
    a = b = None
    if named:
        rest = COMPARE_WORDS.sub(" ", stem)
        rest = re.sub(r"^[\s\-–:_]*(?:of|between|van|von)?\s*", "", rest, flags=re.IGNORECASE)
        sides = COMPARE_SIDES.match(rest.strip())
        if sides:
            a, b = sides.group("a").strip(" -–"), sides.group("b").strip(" -–")
    from_v = _side_version(original) or _side_version(a)
    to_v = _side_version(modified) or _side_version(b)
    if original is None and modified is None and from_v is None and to_v is None:
        return None if not named else Compare(None, None, None, None)
    return Compare(original or a, modified or b, from_v, to_v)
