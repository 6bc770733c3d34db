"""Where a file's matter reference comes from (pure, over a :class:`Corpus`).

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate" ("a null or dangling matter id
falls back to a reference-number scan"). The scan is order-independent: it reads
the converted text of other files (never their classification) and the imported matters (fixed
before insertion), so the answer does not depend on which file a worker classified first.

Evidence, strongest first — with imported matters (:class:`~ki.domain.matters.references.KnownReferences`):

1. a reference (or alias) the firm knows, in the file's text (any part: body, header, footer, the
   mail subject; a labelled one first), then in its path;
2. a client number (labelled in the text, or in a folder name) of a client with one matter;
3. the e-mail thread, 4. a shared court case number, 5. the folder (as below), each counting the
   other files' known references first;
6. a client name of a client with one matter;
7. pattern guessing: a reference of the firm's formats in the text, then the party rule — except that
   a reference of the firm's formats behind a label or in a folder name counts right after 2 (a
   matter the list does not hold yet).

Without imported matters the order is the file's own reference by the firm's formats (text beats
path: a misfiled letter names its real matter), the thread, a case number, the folder (the nearest
folder above the file whose files carry references, when one reference dominates, ≥
:data:`FOLDER_DOMINANCE`), and an organisation named only in the files of one matter.
When a client number or name narrows the file to several matters of one client, later evidence
must pick one of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ki.config.reference_patterns import ReferenceFormats
from ki.domain.matters.references import KnownReferences, case_numbers_in, own_reference
from ki.store.corpus import CorpusFile

FOLDER_DOMINANCE = 0.8
NAME_DOMINANCE = 0.9
MAX_SCAN_FILES = 2000

LEGAL_FORM = re.compile(
    r"\b(gmbh\s*&\s*co\.?\s*kg|gmbh|g\.m\.b\.h\.|ag|se|kg|ohg|kgaa|e\.\s?v\.|ug|ltd\.?|limited|plc|llc|inc\.?|"
    r"corp\.?|b\.v\.|n\.v\.|bv|nv|ab|as|a/s|oy|s\.a\.|sa|s\.à\s?r\.l\.|s\.a\.r\.l\.|sarl|s\.r\.l\.|srl|sas|s\.p\.a\.|"
    r"llp)$",
    re.IGNORECASE,
)
#: A line's label before a name ("From:", "Parties:", "Attn.:", "Aan:").
LINE_LABEL = re.compile(r"^(?:[\w.]+(?:\s+[\w.]+){0,2})\s*:\s+")
_FORMS = (r"(?i:GmbH\s*&\s*Co\.?\s*KG|GmbH|AG|SE|KG|Ltd\.?|Limited|plc|PLC|LLP|LLC|Inc\.|B\.V\.|BV|N\.V\.|NV|"
          r"S\.A\.|SA|S\.à\s?r\.l\.|SARL|S\.r\.l\.|S\.p\.A\.|AB|A/S|Oy)")
#: A name inside running text: capitalised words (and name particles) ending in a legal form.
IN_TEXT_ORG = re.compile(r"(?<![\w&])([A-ZÄÖÜÉ][\w&'’.-]*\s+(?:(?:[A-ZÄÖÜÉ][\w&'’.-]*|van|der|den|de|von|&)\s+){0,5}?"
                         + _FORMS + r")(?![\w])")
ENUMERATION = re.compile(r"^(?:\(?\d{1,2}[.)]|\(?[a-z][.)])\s+")
FIRM_WORDS = re.compile(r"rechtsanw|attorneys|solicitors|law firm|kanzlei|partg|llp\b|notar|gericht|court",
                        re.IGNORECASE)


class Corpus(Protocol):
    """Read access to the converted files of the same source (implemented over the database)."""

    def files_under(self, folder: str) -> list[CorpusFile]:
        """Files whose path starts with ``folder + "/"`` (recursively)."""

    def files_containing(self, needle: str) -> list[CorpusFile]:
        """Files whose text contains ``needle`` (case-insensitive)."""

    def emails_linked(self, message_ids: list[str]) -> list[CorpusFile]:
        """E-mails whose Message-ID is in ``message_ids`` or whose In-Reply-To/References name one of them."""


@dataclass
class Evidence:
    """A reference and why: ``how`` is path / content / content_label / thread / case_number / folder / party."""

    reference: str
    how: str
    detail: str = ""
    support: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Knowledge:
    """What the scan knows besides the corpus: the firm's formats and the imported matters."""

    formats: ReferenceFormats | None = None
    known: KnownReferences | None = None


_OWN_CACHE: dict[tuple, str | None] = {}
_OWN_CACHE_SIZE = 50_000


def _own_of(f: CorpusFile, kb: Knowledge) -> str | None:
    """Another file's own reference (cached: a folder's files are read again for every file classified in it)."""
    key = (f.path, hash(f.text), kb.formats.patterns if kb.formats else None,
           kb.known.version if kb.known is not None else None)
    if key not in _OWN_CACHE:
        if len(_OWN_CACHE) >= _OWN_CACHE_SIZE:
            _OWN_CACHE.clear()
        ev = own_reference(f.path, f.text, formats=kb.formats, known=kb.known)
        _OWN_CACHE[key] = ev.reference if ev is not None else None
    return _OWN_CACHE[key]


def _refs_of(files: Iterable[CorpusFile], exclude: str, kb: Knowledge) -> Counter:
    counts: Counter = Counter()
    for f in files:
        if f.path == exclude:
            continue
        ref = _own_of(f, kb)
        if ref is not None:
            counts[ref] += 1
    return counts


def _dominant(counts: Counter, share: float) -> str | None:
    total = sum(counts.values())
    if not total:
        return None
    ref, n = counts.most_common(1)[0]
    return ref if n / total >= share else None


def organisation_names(text: str, *, firm_names: Iterable[str] = (), head_lines: int = 20) -> list[str]:
    """Organisation names (ending in a legal form) in the first lines, the firm's own excluded: whole parts of
    a line ("From: Nordwind AG, Jan"), then names inside running text ("… received from Northgate Retail
    Limited.", "Parties: A Ltd and B B.V.")."""
    firm = [f.casefold() for f in firm_names if f]
    out: dict[str, None] = {}

    def keep(part: str) -> None:
        if FIRM_WORDS.search(part) or any(f in part.casefold() or part.casefold() in f for f in firm):
            return
        out.setdefault(part, None)

    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()][:head_lines]
    for line in lines:
        line = LINE_LABEL.sub("", line)
        for raw in re.split(r"[,;|·]", line):
            raw = ENUMERATION.sub("", raw.strip())  # "(1) X Ltd", "1. X B.V."
            part = raw.strip(" .")
            words = part.split()
            if 2 <= len(words) <= 8 and LEGAL_FORM.search(raw.rstrip(" ")):
                found = IN_TEXT_ORG.findall(raw)
                if len(found) <= 1:  # "A Ltd and B Ltd": the second pass splits it; "of X Ltd" is "X Ltd"
                    keep(found[0].strip(" .") if found else part)
    for line in lines:
        for m in IN_TEXT_ORG.finditer(line):
            keep(m.group(1).strip(" ."))
    return list(out)


def _within(counts: Counter, allowed: set[str] | None) -> Counter:
    return counts if allowed is None else Counter({r: n for r, n in counts.items() if r in allowed})


def _thread(path: str, mail: dict[str, Any] | None, corpus: Corpus, kb: Knowledge, firm_names) -> Counter:
    counts: Counter = Counter()
    ids = [i for i in [(mail or {}).get("message_id"), (mail or {}).get("in_reply_to"),
                       *((mail or {}).get("references") or [])] if i]
    if ids:
        for other in corpus.emails_linked(ids):
            if other.path == path:
                continue
            # the other message's own evidence, its thread aside (no recursion)
            ev = infer_reference(other.path, other.text, None, corpus, firm_names=firm_names, formats=kb.formats,
                                 known=kb.known)
            if ev is not None:
                counts[ev.reference] += 1
    return counts


def _folder(path: str, corpus: Corpus, kb: Knowledge, allowed: set[str] | None) -> Evidence | None:
    parts = [p for p in path.split(" » ", 1)[0].split("/") if p][:-1]
    for depth in range(len(parts), 0, -1):
        folder = "/".join(parts[:depth])
        if depth == 1 and len(parts) > 1:
            break  # a top-level folder (Mandate/, Akten/) holds many matters: never a matter by itself
        counts = _within(_refs_of(corpus.files_under(folder)[:MAX_SCAN_FILES], path, kb), allowed)
        if not counts:
            continue
        ref = _dominant(counts, FOLDER_DOMINANCE)
        if ref and (counts[ref] >= 2 or len(counts) == 1):
            return Evidence(ref, "folder", folder, dict(counts))
        break
    return None


def infer_reference(path: str, text: str, mail: dict[str, Any] | None, corpus: Corpus, *,
                    firm_names: Iterable[str] = (), formats: ReferenceFormats | None = None,
                    known: KnownReferences | None = None) -> Evidence | None:
    """The matter reference the evidence points to, or None (abstain). See the module docstring for the order.

    ``formats``: the firm's reference formats (None: the defaults); ``known``: the imported matters (None or
    empty: none imported)."""
    kb = Knowledge(formats, known)
    own = own_reference(path, text, formats=formats, known=known)
    allowed: set[str] | None = None
    if known:
        if own is not None and own.known:
            return Evidence(own.reference, own.source, own.folder or "")
        by_number = known.clients_by_number(text[:8000], path)
        if len(by_number) == 1:
            return Evidence(next(iter(by_number)), "client_number")
        allowed = by_number or None
        if own is not None and own.source in ("content_label", "path") and (allowed is None or
                                                                            own.reference in allowed):
            return Evidence(own.reference, own.source, own.folder or "")  # stated, just not imported (yet)
    elif own is not None:
        return Evidence(own.reference, own.source, own.folder or "")
    thread = _dominant(_within(_thread(path, mail, corpus, kb, firm_names), allowed), FOLDER_DOMINANCE)
    if thread:
        return Evidence(thread, "thread", "messages of the same thread")
    for case in case_numbers_in(text[:8000]):
        counts = _within(_refs_of(corpus.files_containing(case), path, kb), allowed)
        ref = _dominant(counts, FOLDER_DOMINANCE)
        if ref:
            return Evidence(ref, "case_number", case, dict(counts))
    folder = _folder(path, corpus, kb, allowed)
    if folder is not None:
        return folder
    if known:
        named = known.clients_by_name(text[:8000])
        refs = set().union(*named.values()) if named else set()
        refs = refs & allowed if allowed is not None else refs
        if len(named) == 1 and len(refs) == 1:
            return Evidence(next(iter(refs)), "client_name", next(iter(named)))
        if own is not None and (allowed is None or own.reference in allowed):
            return Evidence(own.reference, own.source, own.folder or "")
    common: set[str] | None = None
    for name in organisation_names(text, firm_names=firm_names):
        counts = _within(_refs_of(corpus.files_containing(name), path, kb), allowed)
        ref = _dominant(counts, NAME_DOMINANCE)
        if ref and len(counts) == 1:
            return Evidence(ref, "party", name, dict(counts))
        if counts:
            common = set(counts) if common is None else common & set(counts)
    if common is not None and len(common) == 1:  # the parties together name one matter ("A Ltd and B B.V.")
        return Evidence(next(iter(common)), "party", "the parties named together")
    return None  # (a client with several matters and nothing that picks one among them)
