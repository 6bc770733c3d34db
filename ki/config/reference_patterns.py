"""The firm's matter-reference formats (``firm.matter_reference_patterns``) and the contexts that mark a
number as a reference, in German, English, Dutch and French. Pure.

Reference formats are configuration, not code. A pattern is a template:

* ``YYYY`` a year (19xx/20xx), ``YY`` two digits, ``N`` one digit (``NNNN`` four),
* ``CODE`` two to six capital letters, ``A`` one capital letter,
* any other character stands for itself (``-``, ``.``, ``/``, ``M``),
* or a regular expression after ``re:`` (``re:[A-Z]{3}\\d{5}``).

:data:`DEFAULT_PATTERNS` covers the common forms (``2024-0153``, client-matter ``104233-0007``,
``M-1234``, ``HARB-2023-017``) and the short year-number forms (``2024-031``, ``2024/031``, ``031/24``,
``24-0031``). A pattern of digits only (``YYYYNNNN``) is too like other numbers (register numbers,
dates) to count on its own: it counts behind a reference label, in a subject tag or at the start of a
folder name. A *short* pattern — digits and separators, fewer than eight digits (``YYYY-NNN``,
``NNN/YY``) — is as like invoice, case and opposing counsel's numbers (``828/24 TP``): it counts only at
the start of a folder name or behind the firm's own reference label (``Unser Zeichen``, ``Our ref``,
``Ons kenmerk``, ``Notre référence``, ``Matter no.``), never behind "your reference". A number inside a
DMS document number (``#4811234v3``, ``4811234_3``, ``LON\\4811234.3``) is a document number, not a
matter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_PATTERNS: tuple[str, ...] = ("YYYY-NNNN", "NNNNNN-NNNN", "M-NNNN", "CODE-YYYY-NNN", "YYYY-NNN", "YYYY/NNN",
                                     "YYYY/NNNN", "NNN/YY", "NNNN/YY", "YY-NNNN", "YY/NNNN")

#: Labels that mark the number after them as a reference ("Our ref: RJW/104233-0007", "Ons kenmerk:").
LABEL = (r"(?:unser(?:e)?\s+zeichen|ihr(?:e)?\s+zeichen|unser\s+az\.?|ihr\s+az\.?|az\.|aktenzeichen|"
         r"mandat(?:s)?(?:nummer|nr\.?)?|akte(?:nnummer|nnr\.?)?|"
         r"our\s+ref(?:erence)?|your\s+ref(?:erence)?|matter(?:\s+(?:no\.?|number|ref(?:erence)?))?|"
         r"client[\s/-]matter(?:\s+(?:no\.?|number))?|file\s+ref(?:erence)?|our\s+file|"
         r"ons\s+kenmerk|uw\s+kenmerk|kenmerk|dossier(?:nummer|nr\.?)?|"
         r"notre\s+r[ée]f(?:[ée]rence)?\.?|votre\s+r[ée]f(?:[ée]rence)?\.?|n/r[ée]f\.?|v/r[ée]f\.?)")
#: The other side's reference labels ("Ihr Zeichen", "Your ref", "Uw kenmerk", "Votre référence").
THEIR_LABEL = (r"(?:ihr(?:e)?\s+zeichen|ihr\s+az\.?|your\s+ref(?:erence)?|uw\s+kenmerk|votre\s+r[ée]f(?:[ée]rence)?\.?|"
               r"v/r[ée]f\.?)")
#: A label, then initials before the reference ("RJW/", "KH/PB/").
LABEL_BEFORE = re.compile(LABEL + r"\s*(?:is|ist|est|lautet)?\s*[:.]?\s*(?:[A-Z]{1,4}/){0,3}$", re.IGNORECASE)
THEIR_LABEL_BEFORE = re.compile(THEIR_LABEL + r"\s*(?:is|ist|est|lautet)?\s*[:.]?\s*(?:[A-Z]{1,4}/){0,3}$",
                                re.IGNORECASE)
#: A subject tag around the reference: "[104233-0007]", "[#2023.0145]", "[DMS#…]", "(ons kenmerk 2023.0145)".
TAG_BEFORE = re.compile(r"[\[(]\s*(?:#|dms\s*#|ref\.?:?\s*|" + LABEL + r"\s*:?\s*)?$", re.IGNORECASE)
TAG_AFTER = re.compile(r"^\s*[\])]")
#: Words that make a reference-shaped number something else ("Invoice 2024-0117", "Tel. 030-1234").
NUMBER_CONTEXT = re.compile(r"(rechnung|invoice|factuur|declaratie(?:nummer)?|facture|nr\.?|no\.?|nummer|number|"
                            r"tel\.?|fax|iban|kvk(?:-nummer)?|company\s+number|registered\s+number|hrb|hra)"
                            r"\s*[:.]?\s*$", re.IGNORECASE)
#: A DMS document number around the match: "#4811234v3", "4811234_3", "LON\4811234.3", "…v3".
DMS_BEFORE = re.compile(r"(?:(?<!\[)#|\\)\s*$")
DMS_AFTER = re.compile(r"^(?:v\d|_\d)")

_TOKENS = [("YYYY", r"(?:19|20)\d{2}"), ("CODE", r"[A-Z]{2,6}"), ("YY", r"\d{2}"), ("N", r"\d"), ("A", r"[A-Z]")]


class PatternError(ValueError):
    """A reference pattern that does not compile."""


def template_regex(template: str) -> str:
    """The regular expression of one pattern template (see module doc).

    Raises:
        PatternError: an empty template or an invalid ``re:`` expression.
    """
    t = template.strip()
    if not t:
        raise PatternError("an empty matter reference pattern")
    if t.startswith("re:"):
        try:
            re.compile(t[3:])
        except re.error as exc:
            raise PatternError(f"matter reference pattern {template!r}: {exc}") from exc
        if nested_quantifier(t[3:]):
            raise PatternError(f"matter reference pattern {template!r} repeats a repeated part (like (a+)+): "
                               "it can take exponential time on some texts; repeat the part once (a+)")
        return f"(?:{t[3:]})"
    out, i = [], 0
    while i < len(t):
        for token, rx in _TOKENS:
            if t.startswith(token, i):
                out.append(rx)
                i += len(token)
                break
        else:
            out.append(re.escape(t[i]))
            i += 1
    return "".join(out)


def nested_quantifier(expression: str) -> bool:
    """Whether a (compiling) regular expression repeats a part holding a variable repeat — ``(a+)+``,
    ``(\\d{1,3}-)*``, ``(\\d{2,})+`` —, the shape of catastrophic backtracking. A fixed count
    (``(\\d{2}-)+``), a possessive repeat or an atomic group inside is not flagged."""
    from re import _constants as c  # the stdlib's own parser of the expression
    from re import _parser

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT)

    def repeats_inside(items) -> bool:  # noqa: ANN001 - sre parse items
        for op, arg in items:
            if op in repeats and arg[1] > 1 and arg[0] != arg[1]:  # a variable repeat ({2} is fixed)
                return True
            if op == c.SUBPATTERN and repeats_inside(arg[3]):
                return True
            if op == c.BRANCH and any(repeats_inside(b) for b in arg[1]):
                return True
        return False

    def walk(items) -> bool:  # noqa: ANN001
        for op, arg in items:
            if op in repeats:
                if arg[1] > 1 and repeats_inside(arg[2]):
                    return True
                if walk(arg[2]):
                    return True
            elif op == c.SUBPATTERN and walk(arg[3]):
                return True
            elif op == c.BRANCH and any(walk(b) for b in arg[1]):
                return True
            elif op in (c.ATOMIC_GROUP, c.POSSESSIVE_REPEAT):
                continue
        return False

    return walk(_parser.parse(expression))


def is_bare(template: str) -> bool:
    """Whether a template is digits only (``YYYYNNNN``): it needs a label, a tag or a folder name to count."""
    t = template.strip()
    return not t.startswith("re:") and bool(re.fullmatch(r"(?:YYYY|YY|N)+", t))


def is_short(template: str) -> bool:
    """Whether a template is digits and separators of fewer than eight digits (``YYYY-NNN``, ``NNN/YY``,
    ``YY-NNNN``): it counts only at the start of a folder name or behind the firm's own reference label."""
    t = template.strip()
    if t.startswith("re:") or is_bare(t) or not re.fullmatch(r"(?:YYYY|YY|N|[-/._])+", t):
        return False
    return len(re.sub(r"[^YN]", "", t)) < 8


@dataclass(frozen=True)
class Candidate:
    """A reference-shaped number in a text: ``labelled`` behind a reference label, ``tagged`` in a subject
    tag, ``bare`` of a digits-only pattern, ``number_context`` behind "Invoice", "Tel." and the like;
    ``short`` of a short pattern (:func:`is_short`), ``theirs`` behind the other side's label."""

    value: str
    start: int
    labelled: bool
    tagged: bool
    bare: bool
    number_context: bool
    short: bool = False
    theirs: bool = False

    @property
    def counts(self) -> bool:
        """Whether the candidate counts as a reference mention at all."""
        if self.short:
            return self.labelled and not self.theirs and not self.number_context
        return (self.labelled or self.tagged or not self.bare) and not self.number_context


class ReferenceFormats:
    """Compiled ``firm.matter_reference_patterns`` (None or empty: :data:`DEFAULT_PATTERNS`).

    Raises:
        PatternError: a pattern does not compile.
    """

    def __init__(self, patterns: Sequence[str] | None = None):
        self.patterns = tuple(p for p in (patterns or DEFAULT_PATTERNS) if p.strip()) or DEFAULT_PATTERNS
        groups = [f"(?P<p{i}>{template_regex(p)})" for i, p in enumerate(self.patterns)]
        self.bare = {f"p{i}" for i, p in enumerate(self.patterns) if is_bare(p) or is_short(p)}
        self.short = {f"p{i}" for i, p in enumerate(self.patterns) if is_short(p)}
        # group 1 is the whole reference (other domains read ``m.group(1)``); p<i> says which pattern matched
        self.regex = re.compile(r"(?<![\w.\\-])((?:" + "|".join(groups) + r"))(?![\w-]|\.\d)")

    def candidates(self, text: str) -> Iterator[Candidate]:
        """Every reference-shaped number of ``text`` (DMS document numbers left out), in order."""
        for m in self.regex.finditer(text or ""):
            before, after = text[max(0, m.start() - 48): m.start()], text[m.end(): m.end() + 3]
            if DMS_BEFORE.search(before) or DMS_AFTER.match(after):
                continue
            tagged = bool(TAG_BEFORE.search(before) and TAG_AFTER.match(text[m.end(): m.end() + 4]))
            which = next(k for k, v in m.groupdict().items() if v is not None)
            yield Candidate(m.group(1).upper(), m.start(), bool(LABEL_BEFORE.search(before)), tagged,
                            which in self.bare, bool(NUMBER_CONTEXT.search(before)), short=which in self.short,
                            theirs=bool(THEIR_LABEL_BEFORE.search(before)))

    def fullmatch(self, value: str) -> bool:
        """Whether ``value`` is, as a whole, a reference of these formats."""
        m = self.regex.fullmatch(value.strip())
        return m is not None

    def in_name(self, name: str, *, folder: bool) -> str | None:
        """The reference a folder or file name carries: the first candidate; a digits-only one only at the
        start of a folder name."""
        for c in self.candidates(name):
            if c.number_context:
                continue
            if c.bare and not (folder and c.start == 0):
                continue
            return c.value
        return None


@lru_cache(maxsize=32)
def formats_for(patterns: tuple[str, ...] | None) -> ReferenceFormats:
    """The (cached) :class:`ReferenceFormats` of a pattern tuple."""
    return ReferenceFormats(patterns)


