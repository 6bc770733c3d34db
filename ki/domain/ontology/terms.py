"""Folding, tokenising and matching of German/English terms (pure).

Shared by the ontology search (labels and synonyms against a query or a title) and the
entity-name rules. Folding makes ``Claußen``/``CLAUSSEN``, ``Büro``/``Buero`` and
``Non-Disclosure``/``non disclosure`` compare equal.

Matching a term (a label or synonym, one or more tokens) against a token sequence knows
three kinds, strongest first:

* ``exact`` — the term's tokens occur contiguously;
* ``inflected`` — the same, with a German/English inflection on the last token
  (``Aufhebungsvertrags``, ``agreements``);
* ``compound`` — a one-token term of at least :data:`MIN_COMPOUND` letters is the head of a
  German compound (``Terminsladung`` ends with ``ladung``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "æ": "ae", "ø": "oe", "œ": "oe"})
_TOKEN = re.compile(r"[a-z0-9]+")
#: Endings a German or English word takes without changing what it names.
INFLECTIONS = ("s", "es", "e", "en", "n", "er", "ern")
#: Shortest one-token term that may match as the head of a compound.
MIN_COMPOUND = 5


def fold(value: str) -> str:
    """Case-fold, spell umlauts and ß out (``ä`` → ``ae``), drop other diacritics.

    ``fold("Kessler Claußen") == fold("KESSLER CLAUSSEN") == "kessler claussen"``.
    """
    value = unicodedata.normalize("NFC", value or "").casefold().translate(_UMLAUTS)
    value = unicodedata.normalize("NFKD", value)
    return "".join(ch for ch in value if not unicodedata.combining(ch))


def tokens(value: str) -> list[str]:
    """Folded alphanumeric tokens: ``"Non-Disclosure Agreement"`` → ``["non", "disclosure", "agreement"]``."""
    return _TOKEN.findall(fold(value))


@dataclass(frozen=True)
class TermMatch:
    """Where a term matched a token sequence.

    Attributes:
        start: index of the first matched token.
        length: number of tokens of the term.
        kind: ``exact``, ``inflected`` or ``compound``.
    """

    start: int
    length: int
    kind: str

    @property
    def strength(self) -> float:
        """1.0 exact, 0.9 inflected, 0.7 compound head."""
        return {"exact": 1.0, "inflected": 0.9, "compound": 0.7}[self.kind]


def _token_matches(term_tok: str, tok: str, *, last: bool) -> str | None:
    if tok == term_tok:
        return "exact"
    if last and len(term_tok) >= 3 and tok.startswith(term_tok) and tok[len(term_tok):] in INFLECTIONS:
        return "inflected"
    return None


def find_term(term: list[str], seq: list[str]) -> TermMatch | None:
    """The first (leftmost) match of the term tokens ``term`` in ``seq``, or None.

    A one-token term also matches as the head of a compound (``ladung`` in ``terminsladung``,
    optionally inflected) when it has at least :data:`MIN_COMPOUND` letters.
    """
    n = len(term)
    if n == 0 or n > len(seq):
        return None
    for i in range(len(seq) - n + 1):
        kinds = []
        for j, term_tok in enumerate(term):
            kind = _token_matches(term_tok, seq[i + j], last=j == n - 1)
            if kind is None:
                break
            kinds.append(kind)
        else:
            return TermMatch(i, n, "inflected" if "inflected" in kinds else "exact")
    if n == 1 and len(term[0]) >= MIN_COMPOUND:
        head = term[0]
        for i, tok in enumerate(seq):
            if len(tok) > len(head) + 2:
                for ending in ("", *INFLECTIONS):
                    if tok.endswith(head + ending) and len(tok) - len(head) - len(ending) >= 3:
                        return TermMatch(i, 1, "compound")
    return None
