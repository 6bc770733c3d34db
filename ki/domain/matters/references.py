"""Matter references in text and paths, court case numbers, placeholder slugs (pure functions).

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate" (the reference-number scan a
null or dangling matter id falls back to, and the ``UNASSIGNED-<slug>`` placeholder derived from
the top-level folder). Two kinds of knowledge find a file's reference:

* the references the firm *knows* (:class:`KnownReferences`: the imported matters' references and
  aliases, client numbers, client names) — exact strings, looked up token by token;
* the firm's reference *formats* (:class:`~ki.config.reference_patterns.ReferenceFormats`, from
  ``firm.matter_reference_patterns``): pattern guessing, which comes after.

Opposing counsel's references (``828/24 TP``), invoice numbers (``RE-2023-00146``), court case numbers
(``27 O 83/24``), DMS document numbers (``#4811234v3``) and ISO dates do not count.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ki.config.reference_patterns import LABEL_BEFORE, NUMBER_CONTEXT, TAG_BEFORE, ReferenceFormats, formats_for
from ki.domain.ontology.terms import fold

DEFAULT_FORMATS = formats_for(None)
#: The default formats as one regular expression (other domains read matter references with it).
FIRM_REFERENCE = DEFAULT_FORMATS.regex

#: German court case numbers ("27 O 83/24", "16 Ca 9417/24", "3 U 12/2023").
CASE_NUMBER = re.compile(r"(?<![\w/])(\d{1,3}\s+[A-Z][A-Za-z]{0,3}\s+\d{1,5}/(?:\d{2}|\d{4}))(?![\w/])")
#: Case numbers behind a label: "Claim No: CL-2023-000451", "Case number: 2201234/2022",
#: "Zaaknummer: C/13/712345 / HA ZA 22-123", "Geschäftsnummer: …", "rolnummer …".
CASE_LABELLED = re.compile(r"(?i:claim\s+no\.?|case\s+(?:no\.?|number)|zaaknummer|rolnummer|geschäftsnummer|"
                           r"aktenzeichen\s+des\s+gerichts|numéro\s+de\s+rôle)\s*[:.]?\s*"
                           r"(?P<v>[A-Z0-9][A-Z0-9/ .\-]{3,40}?[A-Z0-9])[ \t]*(?:$|[,;)]|\s{2})", re.MULTILINE)
#: A client number behind a label ("Client no. 104233", "cliëntnummer 27401", "Mandanten-Nr. 4711").
CLIENT_NUMBER = re.compile(r"(?i:client\s+(?:no\.?|number|nr\.?)|cli[eë]ntnummer|klantnummer|relatienummer|"
                           r"mandant(?:en)?[\s-]?(?:nr\.?|nummer)|kunden[\s-]?(?:nr\.?|nummer)|"
                           r"num[ée]ro\s+client)\s*[:.]?\s*(?P<v>[A-Z0-9][A-Z0-9.\-/]{1,20}[A-Z0-9])")
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[./_-][A-Za-z0-9]+)*")
_SERIALS = itertools.count(1)
_WORD = re.compile(r"[a-z0-9]+")
#: Legal forms left out of a client name's distinctive words (folded, dots removed).
_FORMS = {"ltd", "limited", "plc", "llp", "llc", "inc", "corp", "bv", "nv", "gmbh", "ag", "se", "kg", "co", "sa",
          "sarl", "srl", "spa", "ab", "as", "oy", "ug", "mbh", "vof", "cv", "ua"}


def references_in(text: str, formats: ReferenceFormats | None = None) -> list[str]:
    """References of the firm's formats in ``text`` that count (see :class:`~ki.config.reference_patterns.Candidate`),
    in order of first appearance, without repeats."""
    seen: dict[str, None] = {}
    for c in (formats or DEFAULT_FORMATS).candidates(text):
        if c.counts:
            seen.setdefault(c.value, None)
    return list(seen)


def case_numbers_in(text: str) -> list[str]:
    """Court case numbers in ``text`` (whitespace normalised), in order, without repeats."""
    seen: dict[str, None] = {}
    for m in CASE_NUMBER.finditer(text or ""):
        seen.setdefault(" ".join(m.group(1).split()), None)
    for m in CASE_LABELLED.finditer(text or ""):
        value = " ".join(m.group("v").split())
        if re.search(r"\d", value):
            seen.setdefault(value, None)
    return list(seen)


def name_words(name: str) -> str:
    """A name's distinctive words, folded, legal form dropped: ``HARBOUR CREST HOLDINGS LTD`` → ``harbour crest
    holdings``."""
    words = _WORD.findall(fold(name).replace(".", ""))
    while words and words[-1] in _FORMS:
        words.pop()
    return " ".join(words)


@dataclass
class KnownReferences:
    """What the firm knows about its matters (the imported ones): references and aliases → the matter's
    reference; client numbers and client names → the references of that client's matters.

    Build with :meth:`add`; empty when nothing was imported (every lookup then finds nothing).
    """

    refs: dict[str, str] = field(default_factory=dict)
    client_numbers: dict[str, set[str]] = field(default_factory=dict)
    client_names: dict[str, set[str]] = field(default_factory=dict)
    #: Identifies this knowledge for caches (with the counts: what was added since).
    serial: int = field(default_factory=lambda: next(_SERIALS))

    @property
    def version(self) -> tuple[int, int, int, int]:
        """A cache key of what this object knows now."""
        return self.serial, len(self.refs), len(self.client_numbers), len(self.client_names)

    def add(self, reference: str, aliases: Iterable[str] = (), client_number: str | None = None,
            client_name: str | None = None) -> None:
        """Know one matter."""
        for spelling in [reference, *aliases]:
            if spelling and spelling.strip():
                self.refs[spelling.strip().upper()] = reference
        if client_number and client_number.strip():
            self.client_numbers.setdefault(client_number.strip().upper(), set()).add(reference)
        words = name_words(client_name or "")
        if len(words) >= 4:
            self.client_names.setdefault(words, set()).add(reference)
            tokens = words.split()
            if 2 <= len(tokens) <= 3 and words == " ".join(_WORD.findall(fold(client_name or ""))):
                # a person ("Eleanor Ogilvie") is also written with an initial ("E. Ogilvie")
                self.client_names.setdefault(f"{tokens[0][0]} {' '.join(tokens[1:])}", set()).add(reference)

    def __bool__(self) -> bool:
        return bool(self.refs)

    def mentions(self, text: str) -> list[tuple[str, bool]]:
        """(reference, labelled) for each known reference or alias written in ``text``, in order."""
        out = []
        for m in _TOKEN.finditer(text or ""):
            token = m.group(0)
            parts = token.split("/")
            spans = [token] + (parts if len(parts) > 1 else []) + \
                ["/".join(parts[i:i + 2]) for i in range(len(parts) - 1) if len(parts) > 2]
            for span in spans:
                ref = self.refs.get(span.upper())
                if ref is not None:
                    before = text[max(0, m.start() - 48): m.start() + token.find(span)]
                    if NUMBER_CONTEXT.search(before):
                        continue
                    out.append((ref, bool(LABEL_BEFORE.search(before) or TAG_BEFORE.search(before))))
                    break
        return out

    def clients_by_number(self, text: str, path: str = "") -> set[str]:
        """References of the clients whose number the text names behind a label, or a path component
        names (``Clients/Harbour Crest (104233)/…``, ``104233 Harbour Crest/…``)."""
        found: set[str] = set()
        for m in CLIENT_NUMBER.finditer(text or ""):
            found |= self.client_numbers.get(m.group("v").upper(), set())
        for part in [p for p in path.split(" » ")[0].split("/") if p][:-1]:
            for m in re.finditer(r"\((\w[\w.-]*)\)|^(\w[\w.-]*)\s", part):
                found |= self.client_numbers.get((m.group(1) or m.group(2)).upper(), set())
        return found

    def clients_by_name(self, text: str) -> dict[str, set[str]]:
        """Client name (distinctive words) → its matters' references, for every imported client the text names."""
        if not self.client_names:
            return {}
        hay = " " + " ".join(_WORD.findall(fold(text or "").replace(".", ""))) + " "
        return {words: refs for words, refs in self.client_names.items() if f" {words} " in hay}


@dataclass(frozen=True)
class ReferenceEvidence:
    """The matter reference a file carries itself, and where it was found.

    Attributes:
        reference: e.g. ``2024-0153``.
        source: ``content_label`` (behind a label or in a subject tag), ``content`` (anywhere in the text),
            or ``path`` (a folder or file name).
        folder: for ``path``: the path prefix up to and including the component that names it.
        known: the reference is an imported matter's (found exactly, not by pattern).
    """

    reference: str
    source: str
    folder: str | None = None
    known: bool = False


def _pick(mentions: list[tuple[str, bool]]) -> tuple[str, str] | None:
    """(reference, source): the first labelled one, else the most frequent (a tie decides nothing)."""
    labelled = [r for r, lab in mentions if lab]
    if labelled:
        return labelled[0], "content_label"
    ranked = Counter(r for r, _ in mentions).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0], "content"


def path_reference(path: str, formats: ReferenceFormats | None = None,
                   known: KnownReferences | None = None) -> ReferenceEvidence | None:
    """The deepest path component naming a reference (``Mandate/2024-0153 Keller …/x.pdf``): a known one
    first, else one of the firm's formats."""
    parts = [p for p in path.split(" » ")[0].split("/") if p]
    for use_known in ([True, False] if known else [False]):
        for i in range(len(parts) - 1, -1, -1):
            if use_known:
                found = known.mentions(parts[i])
                ref = found[0][0] if found else None
            else:
                ref = (formats or DEFAULT_FORMATS).in_name(parts[i], folder=i < len(parts) - 1)
            if ref:
                folder = "/".join(parts[: i + 1]) if i < len(parts) - 1 else "/".join(parts[:i]) or None
                return ReferenceEvidence(ref, "path", folder, known=use_known)
    return None


def content_reference(text: str, *, head_chars: int = 8000, formats: ReferenceFormats | None = None,
                      known: KnownReferences | None = None) -> ReferenceEvidence | None:
    """The reference the text states: a known one first (labelled, else the most frequent), else one of the
    firm's formats (labelled, else the most frequent unlabelled one that counts)."""
    head = (text or "")[:head_chars]
    if known:
        picked = _pick(known.mentions(head))
        if picked:
            return ReferenceEvidence(picked[0], picked[1], known=True)
    cands = [c for c in (formats or DEFAULT_FORMATS).candidates(head) if c.counts]
    picked = _pick([(c.value, c.labelled or c.tagged) for c in cands])
    if picked and known and picked[0] in known.refs:
        return ReferenceEvidence(known.refs[picked[0]], picked[1], known=True)
    return ReferenceEvidence(picked[0], picked[1]) if picked else None


def own_reference(path: str, text: str, *, formats: ReferenceFormats | None = None,
                  known: KnownReferences | None = None) -> ReferenceEvidence | None:
    """The file's own reference: what its text states beats where it is filed (a misfiled letter names its
    real matter), and the path decides when the text names none; known references before patterns."""
    if known:
        text_known = _pick(known.mentions((text or "")[:8000]))
        if text_known:
            return ReferenceEvidence(text_known[0], text_known[1], known=True)
        path_known = path_reference(path, formats, known)
        if path_known is not None and path_known.known:
            return path_known
    return content_reference(text, formats=formats, known=known) or path_reference(path, formats)


def slug(value: str, *, max_len: int = 48) -> str:
    """ASCII slug: ``Akten`` → ``akten``, ``E-Mail-Ablage`` → ``e-mail-ablage``, empty → ``root``."""
    for a, b in (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("Ä", "Ae"), ("Ö", "Oe"), ("Ü", "Ue"), ("ß", "ss")):
        value = value.replace(a, b)
    value = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode().lower()
    out = re.sub(r"[^a-z0-9]+", "-", value).strip("-")[:max_len].strip("-")
    return out or "root"


def placeholder_reference(path: str) -> str:
    """``UNASSIGNED-<slug of the top-level folder>`` (spec: stable placeholder reference)."""
    parts = [p for p in path.split("/") if p]
    top = parts[0] if len(parts) > 1 else ""
    return f"UNASSIGNED-{slug(top)}"


def is_placeholder(reference: str) -> bool:
    """Whether ``reference`` is a placeholder (``UNASSIGNED-…``)."""
    return reference.upper().startswith("UNASSIGNED-")


def title_from_folder(folder: str | None, reference: str) -> str:
    """A matter title from its folder name without the reference (``2024-0153 Keller gg. X`` → ``Keller gg. X``)."""
    if not folder:
        return reference
    name = folder.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(re.escape(reference), "", name, flags=re.IGNORECASE)
    name = re.sub(r"\s+", " ", name).strip(" -–_")
    return name or reference
