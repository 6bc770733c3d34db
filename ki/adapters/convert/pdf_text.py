"""The text of one PDF page from PDFium's characters and their positions.

PDFium already returns right-to-left runs in logical order (its text page applies the bidi
algorithm to each line) and decomposes Arabic presentation forms, lam-alef included, after
reordering. What its plain text gets wrong, and this module fixes with the characters' boxes:

* a hyphenated line end comes back as U+FFFE (the character is ``0x02``, ``FPDFText_IsHyphen``)
  with the line break swallowed: the marker is removed and the word stays joined; a U+00AD soft
  hyphen never shows and is removed anywhere;
* a generated space between two letters whose gap is no wider than the line's letter spacing
  (tracked or letter-spaced text, per-glyph positioning) is dropped;
* two letters of a right-to-left script with a word-sized gap and no space between them get one
  (PDFium inserts none on its right-to-left path);
* presentation forms and compatibility ligatures (U+FB00–U+FB4F, U+FB50–U+FDFF, U+FE70–U+FEFF:
  ``ﬁ``, Hebrew and Arabic forms) are NFKC-normalised.

A word gap is a horizontal gap between two characters on the same line that exceeds the median
gap of the neighbouring letter pairs by :data:`WORD_GAP_EM` of the font size, both between their
advance boxes (``FPDFText_GetLooseCharBox``) and between their ink boxes (``FPDFText_GetCharBox``).
Boxes are read only around the characters concerned.
"""

from __future__ import annotations

import bisect
import ctypes
import re
import statistics
import unicodedata

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ki.adapters.convert.model import clean_text

#: Extra gap, in em of the font size, that makes a gap between letters a word space.
WORD_GAP_EM = 0.12
#: Neighbouring letter pairs on each side whose gaps give the line's letter spacing.
NEIGHBOURS = 4

_DROP_MARKS = dict.fromkeys(map(ord, "\ufffe\x02\xad"))  # hyphenation markers, soft hyphens
_PRESENTATION = re.compile("[\ufb00-\ufb4f\ufb50-\ufdff\ufe70-\ufeff]+")
_RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")


class _Boxes:
    """Advance (loose) and ink (tight) boxes and font sizes of a text page's characters, read on demand."""

    def __init__(self, textpage: pdfium.PdfTextPage):
        self._tp = textpage
        self._cache: dict[tuple[int, bool], tuple[float, float, float, float, float] | None] = {}
        self._rect = pdfium_c.FS_RECTF()
        self._edges = [ctypes.c_double() for _ in range(4)]

    def get(self, i: int, ink: bool = False) -> tuple[float, float, float, float, float] | None:
        """``(left, right, bottom, top, font_size)`` of character ``i`` (its ink box when ``ink``), or None."""
        key = (i, ink)
        if key not in self._cache:
            if ink:
                left, right, bottom, top = self._edges
                ok = pdfium_c.FPDFText_GetCharBox(self._tp, i, left, right, bottom, top)
                edges = (left.value, right.value, bottom.value, top.value)
            else:
                ok = pdfium_c.FPDFText_GetLooseCharBox(self._tp, i, ctypes.byref(self._rect))
                r = self._rect
                edges = (r.left, r.right, r.bottom, r.top)
            size = float(pdfium_c.FPDFText_GetFontSize(self._tp, i))
            self._cache[key] = (edges[0], edges[1], min(edges[2:]), max(edges[2:]), size) if ok else None
        return self._cache[key]

    def gap(self, a: int, b: int, ink: bool = False) -> float | None:
        """Horizontal gap between characters ``a`` and ``b`` on one line (either direction), else None."""
        box_a, box_b = self.get(a, ink), self.get(b, ink)
        if box_a is None or box_b is None:
            return None
        height = min(box_a[3] - box_a[2], box_b[3] - box_b[2])
        overlap = min(box_a[3], box_b[3]) - max(box_a[2], box_b[2])
        if ink and height <= 0:
            return max(box_b[0] - box_a[1], box_a[0] - box_b[1])  # a flat glyph (a dash): trust the line
        if height <= 0 or overlap < 0.5 * height:
            return None  # not on one line
        return max(box_b[0] - box_a[1], box_a[0] - box_b[1])


def _is_word_gap(boxes: _Boxes, pair: tuple[int, int], neighbours: list[tuple[int, int]]) -> bool | None:
    """Whether the gap between the characters of ``pair`` is a word space; None when positions are unknown.

    It is when, with the advance boxes and with the ink boxes alike, it exceeds the median gap of
    the ``neighbours`` pairs (the line's letter spacing) by :data:`WORD_GAP_EM` of the font size: a
    producer placing glyphs by their advances and one placing them by their ink (wrong ``/W``
    widths, joined Arabic forms whose ink overhangs the advance) both leave word gaps in both.
    """
    box = boxes.get(pair[0])
    if box is None:
        return None
    size = box[4] or (box[3] - box[2])
    verdicts = []
    for ink in (False, True):
        gap = boxes.gap(*pair, ink=ink)
        if gap is None:
            continue
        local = [g for g in (boxes.gap(*p, ink=ink) for p in neighbours) if g is not None]
        spacing = statistics.median(local) if local else 0.0
        verdicts.append(gap > spacing + WORD_GAP_EM * size)
    return all(verdicts) if verdicts else None


def _chars(textpage: pdfium.PdfTextPage, n: int) -> str:
    raw = textpage.get_text_range(errors="surrogatepass")
    if len(raw) == n:
        return raw
    return "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i) or 0xFFFD) for i in range(n))


_BETWEEN_LETTERS = re.compile(r"(?<=[^\W_]) (?=[^\W_])")
_LETTER_PAIR = re.compile(r"(?=[^\W_][^\W_])")


def textpage_text(textpage: pdfium.PdfTextPage) -> str:
    """The page's text with the fixes of the module docstring; ``"\\n"`` line ends, UTF-8-safe."""
    n = textpage.count_chars()
    if n <= 0:
        return ""
    raw = _chars(textpage, n)
    boxes = _Boxes(textpage)
    # Generated spaces between two letters: candidates for letter spacing.
    spaced = [m.start() for m in _BETWEEN_LETTERS.finditer(raw) if pdfium_c.FPDFText_IsGenerated(textpage, m.start())]
    # Consecutive letters as drawn: adjacent, or separated by one generated space.
    pairs = [(m.start(), m.start() + 1) for m in _LETTER_PAIR.finditer(raw)] + [(i - 1, i + 1) for i in spaced]
    pairs.sort()
    starts = [p[0] for p in pairs]

    def neighbours(k: int) -> list[tuple[int, int]]:
        return pairs[max(0, k - NEIGHBOURS) : k] + pairs[k + 1 : k + 1 + NEIGHBOURS]

    drop: set[int] = set()
    insert: set[int] = set()
    if spaced:
        for i in spaced:
            k = bisect.bisect_left(starts, i - 1)
            while k < len(pairs) and pairs[k] != (i - 1, i + 1):
                k += 1
            if k < len(pairs) and _is_word_gap(boxes, pairs[k], neighbours(k)) is False:
                drop.add(i)
    if _RTL.search(raw):
        for k, (a, b) in enumerate(pairs):
            if b == a + 1 and (_RTL.match(raw[a]) or _RTL.match(raw[b])) and _is_word_gap(boxes, (a, b), neighbours(k)):
                insert.add(b)
    if drop or insert:
        raw = "".join((" " + ch if i in insert else ch) for i, ch in enumerate(raw) if i not in drop)
    text = raw.translate(_DROP_MARKS)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")  # pair halves
    text = _PRESENTATION.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    return clean_text(text)


def page_text(page: pdfium.PdfPage) -> str:
    """The text layer of one page (call with :data:`~ki.adapters.convert.pdf_open.PDFIUM_LOCK` held)."""
    textpage = page.get_textpage()
    try:
        return textpage_text(textpage)
    finally:
        textpage.close()
