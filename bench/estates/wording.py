"""Filling wording templates: ``{client}``, ``{cp}``, ``{firm}``, ``{oc}``, ``{court}``, ``{target}`` write the
entity's name through ``doc.name`` (so the party is recorded); ``{ref}`` writes the matter reference
through ``doc.ident``; ``{title}``, ``{contact}`` (client contact's first name), ``{lawyer}`` (the
responsible lawyer's first name) and any keyword given are plain values. Lines that are empty
strings become blank paragraphs.
"""

from __future__ import annotations

import string
from typing import Any

from bench.estates.model import Doc

_ENTITIES = {"client": "client", "cp": "cp", "oc": "oc", "court": "court", "target": "target"}


class _Values(dict):
    def __init__(self, b: Any, doc: Doc, extra: dict[str, Any]):
        super().__init__(extra)
        self.b, self.doc = b, doc

    def __missing__(self, key: str) -> str:
        b, m = self.b, self.b.m
        if key in _ENTITIES:
            return self.doc.name(getattr(m, _ENTITIES[key]))
        if key == "firm":
            return self.doc.name(b.firm, variant=b.est.firm_name)
        if key == "ref":
            return self.doc.ident("matter_reference", m.ref)
        if key == "title":
            return m.title
        if key == "contact":
            return m.client.people[0].first
        if key == "lawyer":
            return m.lawyers[0].first
        raise KeyError(key)


def fill(b: Any, doc: Doc, template: str, **extra: Any) -> str:
    """``template`` with its placeholders filled (see module doc)."""
    return string.Formatter().vformat(template, (), _Values(b, doc, extra))


def write(b: Any, doc: Doc, lines: list[str], **extra: Any) -> None:
    """Write each template line as a paragraph ("" → a blank paragraph)."""
    for line in lines:
        if line:
            doc.p(fill(b, doc, line, **extra))
        else:
            doc.blank()
