"""German and Dutch decompounding with a dictionary shipped in the repository (nothing loaded at run time).

Search semantics (a query part finds the compounds that contain it, ranked below exact matches, on both
backends). The lexicons (``ki/adapters/search/data/lexicon_{de,nl}.txt.gz``; provenance and licences in
``ki/adapters/search/data/NOTICE.md``; built by ``scripts/build_compound_lexicon.py``) hold casefolded words: German
noun lemmas (Wikidata Lexemes, CC0), Dutch words (OpenTaal, BSD-3-Clause).

:func:`split_compound` segments a word into dictionary words:

- a *head* (the last part) is a lexicon word, or has the stem of one (``flächen``, ``anwälte``), and is not a
  derivational suffix (``-schaft``, ``-ung`` …);
- a *modifier* is a lexicon word, the same without its final ``e`` (``Miete`` → ``miet``), the stem of a
  frequent verb (``liefern`` → ``liefer``: ``ki/adapters/search/data/modifiers_de.txt.gz``), or a productive prefix
  (``unter``, ``haupt``, ``gegen`` …), optionally followed by a linking element (German ``s``,
  ``es``, ``n``, ``en``, ``e``, ``er``, ``ens``; Dutch ``s``, ``e``, ``en``);
- parts are at least :data:`MIN_FREE_PART` characters, or one of a few common short words (``amt``, ``bau``);
  a four-letter lexicon word must be frequent (:data:`SHORT_WORD_MAX_BAND`);
- the segmentation with the fewest parts wins (then the one with the longest parts), and (German) each part
  is split again, so the result is the finest segmentation:
  ``untermietvertrag`` → ``unter`` ``miet`` ``vertrag``; ``kündigungsschreiben`` → ``kündigung`` ``schreiben``.

A word that has no such segmentation (or is shorter than :data:`MIN_SPLIT_CHARS`) is its own only part.
The splitter works on casefolded words and is memoised per word (see :func:`split_compound`).
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import marshal
import os
import sys
import threading
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import Path

log = logging.getLogger(__name__)

#: Languages with a lexicon.
LANGUAGES = ("de", "nl")
MIN_PART = 3
#: A lexicon word of :data:`MIN_FREE_PART` characters is a part only with a band at most this (German bands:
#: 10 = most frequent … 60), which keeps rare lemmas such as ``Stel`` or ``Lung`` from splitting ``Stellung``.
SHORT_WORD_MAX_BAND = 30
#: Parts shorter than this must be one of :data:`SHORT_PARTS` (the lexicons hold many odd short lemmas).
MIN_FREE_PART = 4
SHORT_PARTS = {
    "de": frozenset({"amt", "bau", "tag", "zug", "weg", "rat", "tat", "ort", "art", "not", "end", "hof", "gas",
                     "see", "tal", "eis", "tor", "neu", "alt", "aus", "auf", "bei", "ein", "mit", "vor", "ehe",
                     "geld", "erb", "ost", "süd", "rad", "ruf", "lohn", "kur", "bad", "zins"}),
    "nl": frozenset({"dag", "weg", "raad", "huis", "vee", "tol", "oud", "vol", "rit", "hof"}),
}
MIN_SPLIT_CHARS = 7
MAX_SPLIT_CHARS = 60
#: Languages whose parts are split again (German: ``untermiet`` → ``unter`` ``miet``). Dutch is not: its
#: lexicon holds every word, function words included, so a second split over-splits (``over`` ``een`` ``komst``).
REFINE = frozenset({"de"})
LINKS = {"de": ("", "s", "es", "n", "en", "e", "er", "ens"), "nl": ("", "s", "e", "en")}
#: Derivational suffixes that look like nouns but never head a compound.
NOT_HEADS = {
    "de": frozenset({"schaft", "schaften", "ung", "ungen", "heit", "keit", "tum", "nis", "ling", "chen", "lein",
                     "ion", "tion", "ität", "erei", "bar", "sam", "haft", "lich", "isch", "los", "ier"}),
    "nl": frozenset({"heid", "ing", "schap", "tje", "je", "lijk", "isme", "baar", "loos", "achtig"}),
}
#: Productive prefixes and particles that modify a compound without being nouns themselves.
PREFIXES = {
    "de": frozenset({"unter", "ober", "über", "vor", "nach", "neben", "gegen", "zwischen", "haupt", "sonder",
                     "gesamt", "teil", "klein", "groß", "gross", "neu", "alt", "rück", "voll", "wieder", "mit",
                     "aus", "auf", "bei", "ein", "zusatz", "nachtrags", "sammel", "einzel", "mehr", "fremd",
                     "eigen", "erst", "end", "gewerbe", "wohn", "frist", "fristlos"}),
    "nl": frozenset({"onder", "boven", "over", "voor", "na", "tegen", "tussen", "hoofd", "neven", "mede",
                     "groot", "klein", "nieuw", "oud", "terug", "vol", "eind", "zelf"}),
}

_LOCK = threading.Lock()


def _bands(language: str) -> dict[str, int]:
    """word → frequency band (German: 10 most frequent … 60; Dutch words carry none: 0)."""
    if language not in LANGUAGES:
        raise KeyError(language)
    raw = files("ki.adapters.search").joinpath("data", f"lexicon_{language}.txt.gz").read_bytes()
    out: dict[str, int] = {}
    for line in gzip.decompress(raw).decode("utf-8").split("\n"):
        word, _, band = line.partition("\t")
        if word:
            out[word] = int(band) if band else 0
    return out


def _lexicon_of(bands: dict[str, int], language: str) -> frozenset[str]:
    return frozenset(w for w, band in bands.items()
                     if len(w) >= MIN_FREE_PART + 1 or band <= SHORT_WORD_MAX_BAND or w in SHORT_PARTS[language])


def _verb_stems(language: str) -> set[str]:
    """Stems of frequent verbs (German: ``liefer``, ``kauf``, ``zahl``): modifiers only (``Liefervertrag``)."""
    if language != "de":
        return set()
    raw = files("ki.adapters.search").joinpath("data", "modifiers_de.txt.gz").read_bytes()
    out = set()
    for line in gzip.decompress(raw).decode("utf-8").split("\n"):
        word, _, band = line.partition("\t")
        if word and int(band or 99) <= SHORT_WORD_MAX_BAND:
            out.add(word)
    return out


@cache
def _stemmer(language: str):  # noqa: ANN202 - a PyStemmer Stemmer
    import Stemmer

    return Stemmer.Stemmer({"de": "german", "nl": "dutch"}[language])


#: Bumped when what :func:`_derive` computes changes (the cache key also holds the data files and the rules).
_DERIVED_VERSION = 1


def _cache_file(language: str) -> Path | None:
    """The cache file of ``language``'s derived sets: its name hashes everything they are derived from (the
    packaged data, the rules of this module, the interpreter's marshal format, PyStemmer's version), so a
    stale file is never read. None when the packaged data cannot be read."""
    try:
        import Stemmer

        data = files("ki.adapters.search").joinpath("data")
        key = hashlib.sha256(repr((_DERIVED_VERSION, sys.version, marshal.version, getattr(Stemmer, "__version__", ""),
                                   MIN_FREE_PART, SHORT_WORD_MAX_BAND, sorted(SHORT_PARTS[language]),
                                   sorted(PREFIXES[language]), sorted(NOT_HEADS[language]))).encode())
        key.update(data.joinpath(f"lexicon_{language}.txt.gz").read_bytes())
        if language == "de":
            key.update(data.joinpath("modifiers_de.txt.gz").read_bytes())
    except (OSError, ImportError):
        return None
    import platformdirs

    return Path(platformdirs.user_cache_dir("ki")) / "lexicon" / f"{language}-{key.hexdigest()[:24]}.marshal"


def _derive(language: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    words = _lexicon_of(_bands(language), language)
    truncated = {w[:-1] for w in words if w.endswith("e") and len(w) > MIN_FREE_PART}
    modifiers = frozenset(words | truncated | PREFIXES[language] | _verb_stems(language))
    heads = frozenset(_stemmer(language).stemWords([w for w in words if w not in NOT_HEADS[language]]))
    return words, modifiers, heads


@cache
def _derived(language: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(lexicon, modifiers, head stems) of ``language``, read once per process.

    Deriving them (reading the lexicon, stemming every word) costs ~0.3 s of CPU for German and ~0.9 s for
    Dutch — most of a cold ``ki search``. They are kept in a per-user cache file (:func:`_cache_file`,
    ``marshal``: ~0.05 s to read both) written on first use; a cache that cannot be read or written is
    recomputed, never an error. Raises KeyError for a language without a lexicon.
    """
    if language not in LANGUAGES:
        raise KeyError(language)
    path = _cache_file(language)
    if path is not None:
        try:
            words, modifiers, heads = marshal.loads(path.read_bytes())
            if all(isinstance(x, frozenset) for x in (words, modifiers, heads)):
                return words, modifiers, heads
        except (OSError, ValueError, EOFError, TypeError):
            pass
    derived = _derive(language)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(marshal.dumps(derived))
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("the compound lexicon cache %s could not be written: %s", path, exc)
    return derived


def lexicon(language: str) -> frozenset[str]:
    """The casefolded words of ``language``'s lexicon (``de`` or ``nl``) that may be compound parts; read
    once per process. A four-letter word must be frequent (band ≤ :data:`SHORT_WORD_MAX_BAND`).

    Raises: KeyError for a language without a lexicon; OSError when the packaged file is missing.
    """
    return _derived(language)[0]


def _modifiers(language: str) -> frozenset[str]:
    return _derived(language)[1]


def _head_stems(language: str) -> frozenset[str]:
    """Stems of the lexicon words that may head a compound (inflected heads match by stem: ``flächen``,
    ``anwälte``)."""
    return _derived(language)[2]


def _is_head(tail: str, language: str) -> bool:
    if tail in NOT_HEADS[language]:
        return False
    return tail in lexicon(language) or _stemmer(language).stemWord(tail) in _head_stems(language)


def _segment(word: str, language: str) -> tuple[str, ...] | None:
    """The best segmentation of ``word`` into at least two parts, or None."""
    modifiers = _modifiers(language)
    links = LINKS[language]
    short = SHORT_PARTS[language]
    n = len(word)
    memo: dict[int, tuple[str, ...] | None] = {}

    def rank(parts: tuple[str, ...]) -> tuple[int, int]:
        return len(parts), -sum(len(p) ** 2 for p in parts)

    def split_here(i: int, found: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The best of ``found`` and every (modifier, link, rest) segmentation of word[i:]."""
        for j in range(i + MIN_PART, n - MIN_PART + 1):
            part = word[i:j]
            if part not in modifiers or (len(part) < MIN_FREE_PART and part not in short):
                continue
            for link in links:
                k = j + len(link)
                if n - k < MIN_PART or not word.startswith(link, j):
                    continue
                rest = best(k)
                if rest is not None:
                    cand = (part, *rest)
                    if found is None or rank(cand) < rank(found):
                        found = cand
        return found

    def best(i: int) -> tuple[str, ...] | None:
        """Best segmentation of word[i:] (one part allowed)."""
        if i not in memo:
            tail = word[i:]
            whole = (tail,) if (len(tail) >= MIN_FREE_PART or tail in short) and _is_head(tail, language) else None
            memo[i] = split_here(i, whole)
        return memo[i]

    return split_here(0, None)  # at least two parts at the top


@lru_cache(maxsize=200_000)
def split_compound(word: str, language: str = "de") -> tuple[str, ...]:
    """The finest segmentation of a casefolded ``word`` into lexicon parts (see the module docstring).

    Returns ``(word,)`` when the word is not a compound of ``language`` (or too short / too long to try).
    Parts keep their surface spelling (``miet``, not ``miete``); callers stem them. Pure and memoised.
    """
    if not (MIN_SPLIT_CHARS <= len(word) <= MAX_SPLIT_CHARS) or not word.isalpha():
        return (word,)
    with _LOCK:  # the lexicon loads once; the DP itself is pure
        lexicon(language)
    seg = _segment(word, language)
    if seg is None:
        return (word,)
    if language not in REFINE:
        return seg
    out: list[str] = []
    for part in seg:
        out.extend(split_compound(part, language) if len(part) >= MIN_SPLIT_CHARS else (part,))
    return tuple(out)
