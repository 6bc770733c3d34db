"""Text analysis shared by every lexical index and by snippets: one definition of what a word is.

Search semantics (German/Dutch compounds, file names, one query semantics on both backends;
text inside ``<…>`` is text; phrases made of stop words match verbatim). Both the embedded index
(:mod:`ki.adapters.search.lexical`) and OpenSearch (:mod:`ki.adapters.search.opensearch_index`) receive the token
streams made here
(whitespace-joined, one position per word), so a word means the same on both, and :mod:`ki.adapters.search.snippets`
highlights exactly what matched.

A **word** is a maximal run of letters and digits (``[^\\W_]+``): punctuation, ``<``/``>`` (PostgreSQL's
parser reads ``<Datum einfügen>`` as a tag; here it is two words), ``_``, ``-``, ``/`` and ``.`` separate words;
each word is NFKC-normalised and casefolded (``Straße`` → ``strasse``); words longer than
:data:`MAX_WORD_CHARS` are dropped. Nothing is a stop word: a phrase such as ``"here is some text"`` matches
verbatim, and BM25's IDF gives common words their small weight.

Streams (one token per word, so positions line up, except ``parts``):

- ``exact``: the casefolded word;
- ``de`` / ``en``: its Snowball German / English stem (the German stemmer folds umlauts: ``Verträge`` →
  ``vertrag``);
- ``parts``: its compound parts (:func:`ki.adapters.search.compounds.split_compound`, German unless the text reads as
  Dutch), each stemmed, in order — ``Gewerbemietverträge`` → ``gewerb miet vertrag``; a simple word gives its
  stem. A query word matches here when its own parts occur consecutively (a phrase over parts).

File names get extra tokens (:func:`name_tokens`): ``SPA_v2_clean`` → ``spa v 2 clean``, ``ShareholderResolution``
→ ``shareholderresolution shareholder resolution``.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from ki.adapters.search.compounds import split_compound

WORD = re.compile(r"[^\W_]+")
MAX_WORD_CHARS = 64
#: Words per text read to guess its language (stop-word counts).
LANGUAGE_SAMPLE_WORDS = 400
_STOP = {
    "de": frozenset("der die das und ist nicht mit von den zu des dem ein eine einer für auf im sich wird "
                    "werden oder bei nach wir sie ich auch".split()),
    "en": frozenset("the and of to is in that for with on this be are by as or it from at not shall".split()),
    "nl": frozenset("de het een en van is dat niet op voor met zijn wordt worden ook aan bij deze naar "
                    "er om te".split()),
}
_CAMEL = re.compile(r"[A-ZÄÖÜ]?[a-zäöüß]+|[A-ZÄÖÜ]+(?![a-zäöüß])|\d+")
_LOCK = threading.Lock()


class Token(NamedTuple):
    """A word of a text: its normalised form and where it stands in the original text (``start``/``end``:
    character offsets, end exclusive)."""

    word: str
    start: int
    end: int


def normalise(word: str) -> str:
    """NFKC + casefold (``ﬁ`` → ``fi``, ``Straße`` → ``strasse``)."""
    return unicodedata.normalize("NFKC", word).casefold()


def tokens(text: str) -> Iterator[Token]:
    """The words of ``text`` with their offsets (see the module docstring)."""
    for m in WORD.finditer(text):
        w = normalise(m.group())
        if w and len(w) <= MAX_WORD_CHARS:
            yield Token(w, m.start(), m.end())


def words(text: str) -> list[str]:
    """The normalised words of ``text``."""
    return [t.word for t in tokens(text)]


@cache
def _stemmer(language: str):  # noqa: ANN202 - a PyStemmer Stemmer (not thread-safe: one per language, locked)
    import Stemmer

    return Stemmer.Stemmer({"de": "german", "en": "english", "nl": "dutch"}[language])


_STEMS: dict[tuple[str, str], str] = {}
_STEM_CACHE_MAX = 500_000


def stem(word: str, language: str) -> str:
    """The Snowball stem of a normalised word (``de``, ``en``, ``nl``); memoised."""
    key = (language, word)
    hit = _STEMS.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        if len(_STEMS) > _STEM_CACHE_MAX:
            _STEMS.clear()
        s = _STEMS[key] = _stemmer(language).stemWord(word)
    return s


def parts(word: str, language: str = "de") -> tuple[str, ...]:
    """The stemmed compound parts of a normalised word (``language`` ``de`` or ``nl``; else German)."""
    lang = language if language in ("de", "nl") else "de"
    return tuple(stem(p, lang) for p in split_compound(word, lang))


_STOP_LANGS: dict[str, tuple[str, ...]] = {}
for _lang, _words in _STOP.items():
    for _w in _words:
        _STOP_LANGS[_w] = (*_STOP_LANGS.get(_w, ()), _lang)


def guess_language(ws: Iterable[str]) -> str:
    """``de``, ``en`` or ``nl`` by stop-word counts over the first :data:`LANGUAGE_SAMPLE_WORDS` words
    (German when nothing tells)."""
    counts = {"de": 0, "en": 0, "nl": 0}
    for i, w in enumerate(ws):
        if i >= LANGUAGE_SAMPLE_WORDS:
            break
        for lang in _STOP_LANGS.get(w, ()):
            counts[lang] += 1
    best = max(counts, key=lambda lang: (counts[lang], lang == "de"))
    return best if counts[best] else "de"


@dataclass(frozen=True)
class Streams:
    """A text's token streams, each a whitespace-joined string (see the module docstring)."""

    exact: str
    de: str
    en: str
    parts: str
    language: str


_ANALYSED: dict[str, tuple[str, str, str, str]] = {}
#: raw word → (its :func:`_analyse` forms, its German parts as a tuple): what :func:`token_forms` reads.
_PARTS: dict[str, tuple[tuple[str, str, str, str], tuple[str, ...]]] = {}
_EMPTY = ("", "", "", "")


def _analyse(raw: str) -> tuple[str, str, str, str]:
    """(exact, de stem, en stem, space-joined German parts) of a raw word; memoised per raw word."""
    hit = _ANALYSED.get(raw)
    if hit is None:
        w = normalise(raw)
        if not w or len(w) > MAX_WORD_CHARS:
            hit = _EMPTY
        else:
            hit = (w, stem(w, "de"), stem(w, "en"), " ".join(parts(w, "de")))
        with _LOCK:
            if len(_ANALYSED) > _STEM_CACHE_MAX:
                _ANALYSED.clear()
            _ANALYSED[raw] = hit
    return hit


def streams(text: str, *, language: str | None = None) -> Streams:
    """Analyse ``text`` into its streams; ``language`` (``de``/``en``/``nl``) is guessed when None."""
    analysed = [a for a in map(_analyse, WORD.findall(text)) if a[0]]
    lang = language or guess_language(a[0] for a in analysed[:LANGUAGE_SAMPLE_WORDS])
    exact = " ".join(a[0] for a in analysed)
    if lang == "nl":
        split = " ".join(" ".join(parts(a[0], "nl")) for a in analysed)
    else:
        split = " ".join(a[3] for a in analysed)
    return Streams(exact, " ".join(a[1] for a in analysed), " ".join(a[2] for a in analysed), split, lang)


def token_forms(text: str) -> list[tuple[Token, str, str, str, tuple[str, ...]]]:
    """Each word of ``text`` with its offsets and its (exact, de stem, en stem, German parts) — the forms
    :func:`streams` indexes, read from the same memo (snippets highlight what matched)."""
    out = []
    for m in WORD.finditer(text):
        raw = m.group()
        parts_of = _PARTS.get(raw)
        if parts_of is None:
            a = _analyse(raw)
            parts_of = _PARTS[raw] = (a, tuple(a[3].split()))  # bounded like _ANALYSED
            if len(_PARTS) > _STEM_CACHE_MAX:
                _PARTS.clear()
        a, parts_ = parts_of
        if a[0]:
            out.append((Token(a[0], m.start(), m.end()), a[0], a[1], a[2], parts_))
    return out


def name_tokens(name: str) -> list[str]:
    """Tokens of a file or folder name: its words plus their camel-case and letter/digit pieces
    (``SPA_v2_clean.docx`` → ``spa v2 v 2 clean docx``)."""
    out: list[str] = []
    for m in WORD.finditer(name):
        raw = m.group()
        w = normalise(raw)
        if not w or len(w) > MAX_WORD_CHARS:
            continue
        out.append(w)
        pieces = [normalise(p) for p in _CAMEL.findall(raw)]
        if len(pieces) > 1:
            out.extend(p for p in pieces if p)
    return out


@dataclass(frozen=True)
class WordForms:
    """What one query word matches: ``exact``, the ``de`` / ``en`` stems, and its compound parts
    (``parts_de``, ``parts_nl``: stemmed; a phrase over the ``parts`` stream)."""

    word: str
    exact: str
    de: str
    en: str
    parts_de: tuple[str, ...]
    parts_nl: tuple[str, ...]

    @property
    def is_compound(self) -> bool:
        return len(self.parts_de) > 1 or len(self.parts_nl) > 1


def word_forms(word: str) -> WordForms:
    """The forms of a normalised query word."""
    return WordForms(word, word, stem(word, "de"), stem(word, "en"), parts(word, "de"), parts(word, "nl"))
