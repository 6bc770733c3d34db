"""Reference numbers, court case numbers and placeholder slugs (pure functions).

Spec: insertion-pipeline.md "Agentic stages: Classify and Relate" (the reference-number scan a
null or dangling matter id falls back to, and the ``UNASSIGNED-<slug>`` placeholder derived from
the top-level folder). Only the firm's own reference styles count as matter references:
``YYYY-NNNN`` (``2024-0153``) and ``CODE-YYYY-NNN`` (``HARB-2023-017``). Opposing counsel's
references (``828/24 TP``), invoice numbers (``RE-2023-00146``), court case numbers
(``27 O 83/24``) and ISO dates do not match.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

#: The firm's own matter-reference styles.
FIRM_REFERENCE = re.compile(r"(?<![\w-])((?:19|20)\d{2}-\d{4}|[A-Z]{2,6}-(?:19|20)\d{2}-\d{3})(?![\w-])")

#: A reference written behind a label ("Unser Zeichen: 2024-0153", "Our ref: HARB-2023-017", "Az.: ...").
LABELLED_REFERENCE = re.compile(
    r"(?:unser(?:e)?\s+zeichen|ihr(?:e)?\s+zeichen|unser\s+az\.?|ihr\s+az\.?|az\.|aktenzeichen|our\s+ref(?:erence)?|"
    r"your\s+ref(?:erence)?|matter\s+(?:no\.?|number)|mandat(?:s)?(?:nummer|nr\.?)?)\s*[:.]?\s*"
    r"((?:19|20)\d{2}-\d{4}|[A-Z]{2,6}-(?:19|20)\d{2}-\d{3})(?![\w-])",
    re.IGNORECASE,
)

#: Words that make a reference-shaped number something else ("Invoice 2024-0117", "Rechnung Nr. 2024-0117").
NUMBER_CONTEXT = re.compile(r"(rechnung|invoice|nr\.?|no\.?|nummer|number|#|tel\.?|fax)\s*:?\s*$", re.IGNORECASE)

#: German court case numbers ("27 O 83/24", "16 Ca 9417/24", "3 U 12/2023").
CASE_NUMBER = re.compile(r"(?<![\w/])(\d{1,3}\s+[A-Z][A-Za-z]{0,3}\s+\d{1,5}/(?:\d{2}|\d{4}))(?![\w/])")


def references_in(text: str) -> list[str]:
    """Firm-style references in ``text``, in order of first appearance, without repeats."""
    seen: dict[str, None] = {}
    for m in FIRM_REFERENCE.finditer(text or ""):
        seen.setdefault(m.group(1).upper(), None)
    return list(seen)


def labelled_references(text: str) -> list[str]:
    """References written behind a label (``Unser Zeichen:``, ``Our ref:``, ``Az.:``), in order."""
    seen: dict[str, None] = {}
    for m in LABELLED_REFERENCE.finditer(text or ""):
        seen.setdefault(m.group(1).upper(), None)
    return list(seen)


def case_numbers_in(text: str) -> list[str]:
    """Court case numbers in ``text`` (whitespace normalised), in order, without repeats."""
    seen: dict[str, None] = {}
    for m in CASE_NUMBER.finditer(text or ""):
        seen.setdefault(" ".join(m.group(1).split()), None)
    return list(seen)


@dataclass(frozen=True)
class ReferenceEvidence:
    """The matter reference a file carries itself, and where it was found.

    Attributes:
        reference: e.g. ``2024-0153``.
        source: ``content_label`` (behind a label in the text), ``content`` (anywhere in the text),
            or ``path`` (a folder or file name).
        folder: for ``path``: the path prefix up to and including the component that names it.
    """

    reference: str
    source: str
    folder: str | None = None


def path_reference(path: str) -> ReferenceEvidence | None:
    """The deepest path component naming a firm reference (``Mandate/2024-0153 Keller …/x.pdf``)."""
    parts = [p for p in path.split("/") if p]
    for i in range(len(parts) - 1, -1, -1):
        refs = references_in(parts[i])
        if refs:
            folder = "/".join(parts[: i + 1]) if i < len(parts) - 1 else "/".join(parts[:i]) or None
            return ReferenceEvidence(refs[0], "path", folder)
    return None


def content_reference(text: str, *, head_chars: int = 8000) -> ReferenceEvidence | None:
    """The reference the text states: a labelled one first, else the most frequent unlabelled one."""
    head = (text or "")[:head_chars]
    labelled = labelled_references(head)
    if labelled:
        return ReferenceEvidence(labelled[0], "content_label")
    counts = Counter(m.group(1).upper() for m in FIRM_REFERENCE.finditer(head)
                     if not NUMBER_CONTEXT.search(head[max(0, m.start() - 24): m.start()]))
    if not counts:
        return None
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None  # two references cited equally often: the text alone does not decide
    return ReferenceEvidence(ranked[0][0], "content")


def own_reference(path: str, text: str) -> ReferenceEvidence | None:
    """The file's own reference: what its text states beats where it is filed (a misfiled letter
    names its real matter), and the path decides when the text names none."""
    return content_reference(text) or path_reference(path)


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
