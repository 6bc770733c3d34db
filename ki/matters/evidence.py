"""Where a file's matter reference comes from when the file does not state it (pure, over a :class:`Corpus`).

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate" ("a null or dangling matter id
falls back to a reference-number scan"). The scan is order-independent: it reads the converted text
of other files (never their classification), so the answer does not depend on which file a worker
happened to classify first. Evidence, strongest first:

1. the file's own reference (text beats path: a misfiled letter names its real matter);
2. the e-mail thread: messages this one replies to, or that reply to it, or copies of it;
3. a court case number the file shares with files that carry a reference;
4. the folder: the nearest folder above the file whose files carry references, when one
   reference dominates (≥ :data:`FOLDER_DOMINANCE`);
5. an organisation named only in the files of one matter (the "client unique" case).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ki.matters.references import case_numbers_in, own_reference

FOLDER_DOMINANCE = 0.8
NAME_DOMINANCE = 0.9
MAX_SCAN_FILES = 2000

LEGAL_FORM = re.compile(
    r"\b(gmbh\s*&\s*co\.?\s*kg|gmbh|g\.m\.b\.h\.|ag|se|kg|ohg|kgaa|e\.\s?v\.|ug|ltd\.?|limited|plc|llc|inc\.?|"
    r"corp\.?|b\.v\.|n\.v\.|ab|as|a/s|oy|s\.a\.|s\.r\.l\.|sas|s\.p\.a\.)$",
    re.IGNORECASE,
)
FIRM_WORDS = re.compile(r"rechtsanw|attorneys|solicitors|law firm|kanzlei|partg|llp\b|notar|gericht|court",
                        re.IGNORECASE)


@dataclass(frozen=True)
class CorpusFile:
    """Another converted file: its path (relative to the source root), text head and mail headers."""

    path: str
    text: str
    mail: dict[str, Any] | None = None


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


def _refs_of(files: Iterable[CorpusFile], exclude: str) -> Counter:
    counts: Counter = Counter()
    for f in files:
        if f.path == exclude:
            continue
        ev = own_reference(f.path, f.text)
        if ev is not None:
            counts[ev.reference] += 1
    return counts


def _dominant(counts: Counter, share: float) -> str | None:
    total = sum(counts.values())
    if not total:
        return None
    ref, n = counts.most_common(1)[0]
    return ref if n / total >= share else None


def organisation_names(text: str, *, firm_names: Iterable[str] = (), head_lines: int = 20) -> list[str]:
    """Organisation names (ending in a legal form) in the first lines, the firm's own excluded."""
    firm = [f.casefold() for f in firm_names if f]
    out: dict[str, None] = {}
    for line in [ln.strip() for ln in (text or "").splitlines() if ln.strip()][:head_lines]:
        line = re.sub(r"^(from|von|an|to|absender|für|for)\s*:\s*", "", line, flags=re.IGNORECASE)
        for part in re.split(r"[,;|·]", line):
            part = part.strip(" .")
            words = part.split()
            if not (2 <= len(words) <= 8) or not LEGAL_FORM.search(part.rstrip(".") + ("." if part.endswith(".")
                                                                                      else "")):
                continue
            if FIRM_WORDS.search(part) or any(f in part.casefold() or part.casefold() in f for f in firm):
                continue
            out.setdefault(part, None)
    return list(out)


def infer_reference(path: str, text: str, mail: dict[str, Any] | None, corpus: Corpus, *,
                    firm_names: Iterable[str] = ()) -> Evidence | None:
    """The matter reference the evidence points to, or None (abstain). See the module docstring for the order."""
    own = own_reference(path, text)
    if own is not None:
        return Evidence(own.reference, own.source, own.folder or "")
    if mail:
        ids = [i for i in [mail.get("message_id"), mail.get("in_reply_to"), *(mail.get("references") or [])] if i]
        if ids:
            counts = Counter()
            for other in corpus.emails_linked(ids):
                if other.path == path:
                    continue
                # the other message's own evidence, its thread aside (no recursion)
                ev = infer_reference(other.path, other.text, None, corpus, firm_names=firm_names)
                if ev is not None:
                    counts[ev.reference] += 1
            ref = _dominant(counts, FOLDER_DOMINANCE)
            if ref:
                return Evidence(ref, "thread", "messages of the same thread", dict(counts))
    for case in case_numbers_in(text[:8000]):
        counts = _refs_of(corpus.files_containing(case), path)
        ref = _dominant(counts, FOLDER_DOMINANCE)
        if ref:
            return Evidence(ref, "case_number", case, dict(counts))
    parts = [p for p in path.split(" » ", 1)[0].split("/") if p][:-1]
    for depth in range(len(parts), 0, -1):
        folder = "/".join(parts[:depth])
        if depth == 1 and len(parts) > 1:
            break  # a top-level folder (Mandate/, Akten/) holds many matters: never a matter by itself
        counts = _refs_of(corpus.files_under(folder)[:MAX_SCAN_FILES], path)
        if not counts:
            continue
        ref = _dominant(counts, FOLDER_DOMINANCE)
        if ref and (counts[ref] >= 2 or len(counts) == 1):
            return Evidence(ref, "folder", folder, dict(counts))
        break
    for name in organisation_names(text, firm_names=firm_names):
        counts = _refs_of(corpus.files_containing(name), path)
        ref = _dominant(counts, NAME_DOMINANCE)
        if ref and len(counts) == 1:
            return Evidence(ref, "party", name, dict(counts))
    return None
