"""Snippets: the matched passage with the hit highlighted, and which document fields matched.

What a hit shows (snippets of the matched passage with the hit highlighted, no added header; a hit says
which field and part matched). Matching uses the same analysis as the indexes (:mod:`ki.adapters.search.analysis`), so
what is highlighted is what matched: an exact word, a stem, a compound containing the query word
(``Gewerbe«mietvertrag»`` is shown as ``«Gewerbemietvertrag»``), a phrase's words in a row.
"""

from __future__ import annotations

from dataclasses import dataclass

from ki.adapters.search.analysis import Token, token_forms
from ki.adapters.search.query import FIELD_LABELS, Item, ParsedQuery

START, STOP = "«", "»"
WINDOW_WORDS = 30
MAX_FRAGMENTS = 2
FRAGMENT_DELIMITER = " … "
FALLBACK_CHARS = 240


@dataclass(frozen=True)
class _Forms:
    tokens: list[Token]
    exact: list[str]
    de: list[str]
    en: list[str]
    parts: list[tuple[str, ...]]


def _forms(text: str) -> _Forms:
    forms = token_forms(text)
    return _Forms([f[0] for f in forms], [f[1] for f in forms], [f[2] for f in forms], [f[3] for f in forms],
                  [f[4] for f in forms])


def _contains(seq: tuple[str, ...], sub: tuple[str, ...]) -> bool:
    n = len(sub)
    return any(seq[i:i + n] == sub for i in range(len(seq) - n + 1))


def _item_matches(f: _Forms, item: Item) -> list[int]:
    """Token positions ``item`` matches in the analysed text."""
    single = item.single
    out: list[int] = []
    if single is not None:
        head_de = single.parts_de[0] if single.parts_de else None
        head_nl = single.parts_nl[0] if len(single.parts_nl) > 1 else None
        for i in range(len(f.tokens)):
            p = f.parts[i]
            if (f.exact[i] == single.exact or f.de[i] == single.de or f.en[i] == single.en
                    or (head_de in p and _contains(p, single.parts_de))
                    or (head_nl in p and _contains(p, single.parts_nl))):
                out.append(i)
        return out
    n = len(item.forms)
    for i in range(len(f.tokens) - n + 1):
        if all(f.exact[i + j] == w.exact or f.de[i + j] == w.de for j, w in enumerate(item.forms)):
            out.extend(range(i, i + n))
    return out


def _matches(f: _Forms, parsed: ParsedQuery) -> dict[int, int]:
    """token position → index of the first query item it matches (excluded items are not highlighted)."""
    out: dict[int, int] = {}
    items = [i for g in parsed.groups for i in g.items]
    for n, item in enumerate(items):
        for pos in _item_matches(f, item):
            out.setdefault(pos, n)
    return out


def _joins(gap: str, loose: bool) -> bool:
    """Whether two marked words with ``gap`` between them are one highlight: blanks only, or (``loose``,
    a file name or another short field) no letter or digit (``3. OG (Scan).pdf`` is one name)."""
    return not gap.strip() or (loose and not any(c.isalnum() for c in gap))


def _render(text: str, f: _Forms, lo: int, hi: int, marked: dict[int, int], loose: bool = False) -> str:
    """Tokens ``lo..hi`` (inclusive) of ``text`` with the marked ones between « » (runs joined by :func:`_joins`)."""
    start = 0 if lo == 0 else f.tokens[lo].start
    end = len(text) if hi == len(f.tokens) - 1 else f.tokens[hi].end
    pieces: list[str] = []
    pos = start
    i = lo
    while i <= hi:
        if i not in marked:
            i += 1
            continue
        j = i  # a run of marked words separated by blanks only is one highlight (a phrase)
        while j + 1 <= hi and j + 1 in marked and _joins(text[f.tokens[j].end:f.tokens[j + 1].start], loose):
            j += 1
        a, b = f.tokens[i].start, f.tokens[j].end
        pieces.append(text[pos:a])
        pieces.append(f"{START}{text[a:b]}{STOP}")
        pos = b
        i = j + 1
    pieces.append(text[pos:end])
    out = " ".join("".join(pieces).split())
    if lo > 0:
        out = "… " + out
    if hi < len(f.tokens) - 1:
        out += " …"
    return out


def highlight(text: str, parsed: ParsedQuery, *, window: int = WINDOW_WORDS, loose: bool = False) -> tuple[str, bool]:
    """(snippet, matched): up to :data:`MAX_FRAGMENTS` windows of ``window`` words that hold the most distinct
    query items, matches between « ». Without a match: the passage's opening (``matched`` False).
    ``loose``: marked words separated by punctuation only are one highlight (a file name)."""
    f = _forms(text)
    marked = _matches(f, parsed)
    if not marked:
        opening = " ".join(text.split())
        return (opening[:FALLBACK_CHARS] + (" …" if len(opening) > FALLBACK_CHARS else "")), False
    positions = sorted(marked)
    fragments: list[tuple[int, int]] = []
    covered: set[int] = set()
    for _ in range(MAX_FRAGMENTS):
        best: tuple[int, int, int] | None = None  # (new items, matches, start)
        for p in positions:
            lo = max(0, p - window // 4)
            hi = min(len(f.tokens) - 1, lo + window - 1)
            if any(lo <= b and hi >= a for a, b in fragments):
                continue
            inside = [marked[q] for q in positions if lo <= q <= hi]
            score = (len(set(inside) - covered), len(inside), -lo)
            if best is None or score > best:
                best = score
                best_span = (lo, hi)
        if best is None or (fragments and best[0] == 0):
            break
        fragments.append(best_span)
        covered |= {marked[q] for q in positions if best_span[0] <= q <= best_span[1]}
    fragments.sort()
    return FRAGMENT_DELIMITER.join(_render(text, f, lo, hi, marked, loose) for lo, hi in fragments), True


def matched_fields(fields: dict[str, str], parsed: ParsedQuery) -> list[tuple[str, str]]:
    """(label, highlighted value) of each document field a query item matches, in :data:`FIELD_LABELS` order."""
    out = []
    for name, label in FIELD_LABELS.items():
        value = fields.get(name)
        if value:
            snippet, ok = highlight(value, parsed, window=60, loose=name == "name")
            if ok:
                out.append((label, snippet))
    return out


def labelled_fields(fields: dict[str, str], limit: int = FALLBACK_CHARS) -> str:
    """The document's fields as ``label: value`` in :data:`FIELD_LABELS` order, joined by `` · `` and cut
    at ``limit`` characters: what a hit on the fields shows when no field holds a query word (a match by
    meaning), so the reader sees which field says what instead of an unlabelled run of values."""
    shown = " · ".join(f"{label}: {' '.join(fields[name].split())}" for name, label in FIELD_LABELS.items()
                       if fields.get(name))
    return shown[:limit] + (" …" if len(shown) > limit else "")
