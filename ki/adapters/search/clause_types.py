"""Typing clauses against the ontology's clause facet: the model's answer when it gave one, rules otherwise. Pure.

Spec: insertion-pipeline.md "Extract metadata" (notable clauses typed against the clause facet) and "Index"
(clause rows). Order of evidence for one clause (:func:`clause_type`):

1. the ``notable_clauses`` artifact of Extract metadata names the clause's heading (the model's typing when a
   model is configured, the rules policy's otherwise) — used when its node is in the facet;
2. the facet's own labels and synonyms found in the heading (``Ontology.search_clauses``, score ≥
   :data:`MIN_SCORE`, the rules policy's threshold);
3. :data:`KEYWORDS`: Dutch and French clause titles and common German/English ones the built-in facet lacks,
   mapped to the built-in facet's ids (used only when that id is in the active facet);
4. the same two searches over the clause's first sentence when there is no heading (``§ 4`` alone).

Nothing found: the clause is written untyped (``clause_type`` null), still searchable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: A heading must match a clause node this well (the rules policy's ``CLAUSE_MIN_SCORE``).
MIN_SCORE = 0.6

#: Titles the built-in facet's labels and synonyms lack (nl, fr and frequent de/en), by facet id.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "termination": ("opzegging", "beëindiging", "ontbinding", "résiliation", "resiliation", "beendigung",
                    "aufhebung", "kündigungsfrist"),
    "term": ("looptijd", "duur", "durée", "duree", "huurtermijn", "inkrafttreten", "vertragslaufzeit"),
    "liability": ("aansprakelijkheid", "responsabilité", "responsabilite", "limitation de responsabilité"),
    "indemnity": ("vrijwaring", "indemnisation", "garantie de passif"),
    "warranties": ("garanties", "garantie", "warranty", "déclarations", "gewährleistungen", "mängelhaftung"),
    "confidentiality": ("geheimhouding", "vertrouwelijkheid", "confidentialité", "confidentialite"),
    "contractual_penalty": ("boete", "boetebeding", "clause pénale", "pénalité"),
    "non_compete": ("concurrentiebeding", "non-concurrence", "non concurrence", "non-competition",
                    "non-solicitation", "wettbewerb"),
    "change_of_control": ("zeggenschapswijziging", "changement de contrôle"),
    "governing_law": ("toepasselijk recht", "droit applicable", "loi applicable", "governing law", "rechtswahl"),
    "jurisdiction": ("bevoegde rechter", "geschillen", "juridiction", "tribunal compétent", "litiges", "disputes",
                     "schiedsgericht", "arbitrage"),
    "payment_terms": ("betaling", "prijs", "koopprijs", "huurprijs", "vergoeding", "paiement", "prix", "loyer",
                      "honoraires", "preise", "price", "miete", "entgelt", "honorar"),
    "price_adjustment": ("indexering", "indexation", "indexierung", "wertsicherung", "preisanpassung"),
    "security": ("zekerheid", "waarborgsom", "bankgarantie", "dépôt de garantie", "sûreté", "kaution",
                 "mietsicherheit", "sicherheitsleistung"),
    "assignment": ("overdracht", "cessie", "onderhuur", "cession", "sous-location", "abtretung", "untervermietung"),
    "severability": ("nietigheid", "divisibilité", "nullité partielle", "salvatorisch"),
    "written_form": ("slotbepalingen", "wijzigingen", "dispositions finales", "dispositions générales",
                     "intégralité", "schlussbestimmungen", "übrige bestimmungen", "sonstiges", "final provisions",
                     "entire agreement"),
    "force_majeure": ("overmacht", "force majeure"),
    "data_protection": ("gegevensbescherming", "privacy", "avg", "protection des données", "rgpd"),
    "severance": ("ontslagvergoeding", "transitievergoeding", "indemnité de licenciement", "abfindung"),
}

_TOKEN = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
_FIRST_SENTENCE = re.compile(r"^(.{20,240}?[.;:])(\s|$)", re.DOTALL)


def _keyword(text: str, facet: set[str]) -> str | None:
    """The facet id whose keyword occurs in ``text`` as whole words (leftmost, then longest), or None."""
    low = " " + " ".join(_TOKEN.findall(text.lower())) + " "
    best: tuple[int, int, str] | None = None
    for node, words in KEYWORDS.items():
        if node not in facet:
            continue
        for w in words:
            at = low.find(" " + " ".join(_TOKEN.findall(w)) + " ")
            if at >= 0 and (best is None or (at, -len(w)) < best[:2]):
                best = (at, -len(w), node)
    return best[2] if best else None


def _search(onto: Any, text: str, facet: set[str]) -> str | None:
    if not text.strip():
        return None
    hits = onto.search_clauses(text[:500])
    if hits and hits[0].score >= MIN_SCORE:
        return hits[0].node.id
    return _keyword(text, facet)


def clause_type(heading: str, body: str, onto: Any, notable: Mapping[str, str] | None = None) -> str | None:
    """The clause-facet node id of a clause (see the module docstring), or None.

    Args:
        heading: the clause's title without its number (``Limitation of Liability``).
        body: the clause's text (its first sentence is read when the heading names nothing).
        onto: the active :class:`ki.domain.ontology.model.Ontology`; an inactive facet types nothing.
        notable: normalised heading → node id from the ``notable_clauses`` artifact (:func:`notable_types`).
    """
    if onto is None or not onto.clause_facet_active:
        return None
    facet = set(onto.clauses.nodes)
    key = normalise_heading(heading)
    if notable and key and notable.get(key) in facet:
        return notable[key]
    found = _search(onto, heading, facet)
    if found is None and not heading.strip():
        lines = body.split("\n", 1)
        rest = lines[1] if len(lines) > 1 else ""
        m = _FIRST_SENTENCE.match(" ".join(rest.split()))
        found = _search(onto, m.group(1) if m else rest[:240], facet)
    return found


def normalise_heading(heading: str) -> str:
    """A heading as the artifact and the splitter both see it: number and punctuation dropped, lower case."""
    return " ".join(_TOKEN.findall((heading or "").lower()))


def notable_types(clauses: list[dict[str, Any]] | None) -> dict[str, str]:
    """normalised heading → clause type, from a ``notable_clauses`` artifact body's entries (``locus``,
    ``clause_type``); entries without a locus are left out."""
    out: dict[str, str] = {}
    for c in clauses or []:
        key = normalise_heading(str(c.get("locus") or ""))
        if key and c.get("clause_type"):
            out.setdefault(key, str(c["clause_type"]))
    return out
