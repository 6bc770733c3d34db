"""Persons written as initials and surname, and the full-name person they abbreviate (pure).

Spec: insertion-pipeline.md "Extract metadata" (one real party is one entity; anything weaker than the
resolution rules is not merged) (initial + surname persons). ``N. Ogilvie``, ``N Ogilvie``,
``Ogilvie, N.``, ``Dr. N. Ogilvie``, ``H.-P. Schmidt``, ``Boer, M. de`` are *abbreviated* names; ``Nicola
Ogilvie``, ``Marloes de Boer``, ``Nicola J. Ogilvie`` are *full* names. An abbreviated name is
compatible with a full one when the surnames are equal (folded, name particles included) and the
initials agree with the full name's given names as far as both go (``N.`` ~ ``Nicola``, ``N. J.`` ~
``Nicola Jane``, ``H.-P.`` ~ ``Hans-Peter``; ``M.`` ≁ ``Nicola``). Whether an abbreviated person *is*
the full-name one is decided per matter (:func:`expansion`: exactly one compatible full name, else
none) by :mod:`ki.domain.entities.abbreviations`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from ki.domain.ontology.terms import fold

K = TypeVar("K")

#: Salutations and titles dropped in front of a person's name (folded, without dots).
TITLES = frozenset({"mr", "mrs", "ms", "miss", "mx", "dr", "prof", "professor", "sir", "dame", "herr", "herrn",
                    "frau", "dhr", "mevr", "mevrouw", "heer", "de", "mw", "ir", "ing", "drs", "dipl", "monsieur",
                    "madame", "mme", "rechtsanwalt", "rechtsanwaeltin"})
#: Name particles that belong to the surname (``de Boer``, ``van der Berg``, ``von Arnim``).
PARTICLES = frozenset({"van", "de", "der", "den", "von", "vom", "zu", "te", "ten", "ter", "du", "da", "di", "la",
                       "le", "del", "della", "dos", "das"})
_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*\.?|\.")
#: One initial as written: ``N.``, ``N``, a run ``N.M.`` or a hyphenated pair ``H.-P.``.
_INITIALS = re.compile(r"^(?:[^\W\d_]\.-?)+$|^[^\W\d_]$")


@dataclass(frozen=True)
class PersonName:
    """A person's name split into given names (or initials) and surname, folded.

    Attributes:
        given: given names in order; an initial is one letter (``("n",)``, ``("hans-peter",)``).
        surname: surname tokens with their particles (``("de", "boer")``).
    """

    given: tuple[str, ...]
    surname: tuple[str, ...]

    @property
    def abbreviated(self) -> bool:
        """Every given name is an initial (``N. Ogilvie``)."""
        return bool(self.given) and all(len(g) == 1 for g in self.given)

    @property
    def full(self) -> bool:
        """The first given name is written out (``Nicola Ogilvie``, ``Nicola J. Ogilvie``)."""
        return bool(self.given) and len(self.given[0]) > 1

    @property
    def initials(self) -> tuple[str, ...]:
        """The initials of the given names, hyphenated ones split (``Hans-Peter`` → ``h``, ``p``)."""
        out: list[str] = []
        for g in self.given:
            out.extend(part[0] for part in g.split("-") if part)
        return tuple(out)


def _initial_letters(word: str) -> list[str] | None:
    """``N.`` → [n]; ``N.M.`` → [n, m]; ``H.-P.`` → [h, p]; ``N`` → [n]; anything else None."""
    if not _INITIALS.match(word):
        return None
    return [fold(ch) for ch in word if ch.isalpha()]


def _strip_titles(words: list[str]) -> list[str]:
    """The words without stray dots and without the titles and salutations in front."""
    words = [w for w in words if w != "."]
    while words and fold(words[0]).rstrip(".") in TITLES:
        words = words[1:]
    return words


def _split(words: list[str]) -> tuple[list[str], list[str]] | None:
    """Given-name words and surname words of a name in natural order (surname last, particles kept with it)."""
    if len(words) < 2:
        return None
    cut = len(words) - 1
    while cut > 1 and fold(words[cut - 1]).rstrip(".") in PARTICLES:
        cut -= 1
    return words[:cut], words[cut:]


@lru_cache(maxsize=65536)
def parse_person(name: str) -> PersonName | None:
    """Split a person's name as written into a :class:`PersonName` (None: not a two-part person name).

    Natural order (``Dr. N. Ogilvie``, ``Marloes de Boer``) or surname first with a comma (``Ogilvie, N.``,
    ``Boer, M. de``). Titles and salutations in front are dropped; a given-name word that is neither an
    initial nor a capitalised word makes it no person name.
    """
    raw = " ".join((name or "").split())
    if not raw or any(ch.isdigit() for ch in raw) or raw.count(",") > 1:
        return None
    if "," in raw:
        last, first = (part.strip() for part in raw.split(","))
        given_words = _strip_titles(_WORD.findall(first))
        trailing: list[str] = []
        while len(given_words) > 1 and fold(given_words[-1]).rstrip(".") in PARTICLES:
            trailing.insert(0, given_words.pop())
        surname_words = trailing + [w for w in _WORD.findall(last) if w != "."]
    else:
        split = _split(_strip_titles(_WORD.findall(raw)))
        if split is None:
            return None
        given_words, surname_words = split
    if not given_words or not surname_words:
        return None
    given: list[str] = []
    for w in given_words:
        letters = _initial_letters(w)
        if letters is not None:
            given.extend(letters)
        elif w[:1].isupper() and not w.endswith("."):
            given.append(fold(w))
        else:
            return None
    surname = tuple(fold(w).rstrip(".") for w in surname_words if w != ".")
    if not surname or len(surname[-1]) < 2 or not surname_words[-1][:1].isupper():
        return None
    return PersonName(tuple(given), surname)


def natural_order(name: str) -> str:
    """A surname-first name in natural order (``Ogilvie, N.`` → ``N. Ogilvie``, ``Boer, M. de`` → ``M. de
    Boer``); any other name unchanged."""
    raw = " ".join((name or "").split())
    if raw.count(",") != 1:
        return raw
    last, first = (part.strip() for part in raw.split(","))
    words = first.split()
    trailing: list[str] = []
    while len(words) > 1 and fold(words[-1]) in PARTICLES:
        trailing.insert(0, words.pop())
    return " ".join([*words, *trailing, last]) if words and last else raw


def abbreviates(short: PersonName, full: PersonName) -> bool:
    """Whether the abbreviated ``short`` can be the written-out ``full`` (see module doc)."""
    if not short.abbreviated or not full.full or short.surname != full.surname:
        return False
    mine, theirs = short.initials, full.initials
    n = min(len(mine), len(theirs))
    return n > 0 and mine[:n] == theirs[:n]


def is_abbreviated(name: str) -> bool:
    """``name`` is a person written with initials only (``N. Ogilvie``)."""
    parsed = parse_person(name)
    return parsed is not None and parsed.abbreviated


def expansion(short: str, full_names: Mapping[K, Iterable[str]]) -> K | None:
    """The one key whose full names ``short`` abbreviates, or None (no such key, or two or more: ambiguous).

    Args:
        short: an abbreviated name as written (``N. Ogilvie``).
        full_names: key (an entity, a mention) → the names it is written as.
    Returns: the key, when exactly one is compatible.
    """
    parsed = parse_person(short)
    if parsed is None or not parsed.abbreviated:
        return None
    found = []
    for key, names in full_names.items():
        for n in names:
            other = parse_person(n)
            if other is not None and abbreviates(parsed, other):
                found.append(key)
                break
    return found[0] if len(found) == 1 else None
