"""Wording templates of the text modules, filled against a matter builder.

Placeholders: ``{client}``, ``{cp}``, ``{oc}``, ``{court}``, ``{target}``, ``{employer}``, ``{employee}``
write the entity's name through ``doc.name`` (so the party is recorded); the upper-case key
(``{CLIENT}``) writes its capitals spelling; ``{client_desc}`` the contract description (name, form,
register number — the text module's ``describe``); ``{firm}`` the firm's full name; ``{letterhead}``
its letterhead; ``{ref}`` the matter reference and ``{case}`` the court case number (through
``doc.ident``); ``{client_reg}`` / ``{target_reg}`` a register number ('' when there is none);
``{contact}`` / ``{lawyer}`` first names, ``{lawyer_full}``, ``{director}``, ``{title}``, ``{client_number}``;
``{firm_variant}`` a spelling of the firm its configuration does not list; ``{client_former}`` (any role) a
renamed company's former name ('' for one never renamed);
any keyword given is a plain value. A date value takes a style (``{d:ordinal}``, ``{d:numeric}``,
``{d:plain}``, ``{d:short}``; no style = the firm's long style). A line starting ``?key `` is written
only when ``key`` is not empty; ``""`` is a blank paragraph; ``#text`` a bold line, ``=text`` a title.
"""

from __future__ import annotations

import datetime as dt
import string
from typing import Any

from bench.estates.model import Doc

_ROLES = ("client", "cp", "oc", "court", "target", "employer", "employee")


class _Formatter(string.Formatter):
    def __init__(self, b: Any, doc: Doc):
        self.b, self.doc = b, doc

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, dt.date):
            return self.b.fmt_date(value, self.doc.lang, format_spec or "long")
        return super().format_field(value, format_spec)


class _Values(dict):
    def __init__(self, b: Any, doc: Doc, extra: dict[str, Any]):
        super().__init__(extra)
        self.b, self.doc = b, doc

    def entity(self, role: str):
        m = self.b.m
        return m.x[role] if role in ("employer", "employee") else getattr(m, role)

    def __missing__(self, key: str) -> Any:
        b, m, doc = self.b, self.b.m, self.doc
        if key.lower() in _ROLES and self.entity(key.lower()) is None:
            return ""
        if key in _ROLES:
            return doc.name(self.entity(key))
        if key.lower() in _ROLES:
            e = self.entity(key.lower())
            upper = e.name.upper()
            return doc.name(e, variant=upper if upper in e.variants else None)
        if key.endswith("_desc"):
            return b.texts.describe(b, doc, self.entity(key[:-5]))
        if key.endswith("_reg"):
            e = self.entity(key[:-4])
            reg = e.register if e is not None else None
            return doc.ident("register_number", reg["value"], reg["issuer"], e) if reg else ""
        values = {"firm": lambda: doc.name(b.firm, variant=b.est.firm_name),
                  "letterhead": lambda: doc.name(b.firm, variant=b.est.letterhead),
                  "ref": lambda: doc.ident("matter_reference", m.ref),
                  "case": lambda: doc.ident("case_number", m.case_numbers[0], m.court.name),
                  "title": lambda: m.title, "contact": lambda: m.client.people[0].first,
                  "lawyer": lambda: m.lawyers[0].first, "lawyer_full": lambda: m.lawyers[0].full,
                  "director": lambda: (m.target or m.client).people[0].full,
                  "client_number": lambda: m.client_number,
                  "client_address": lambda: m.client.address,
                  "firm_variant": lambda: doc.name(b.firm, variant=b.est.firm_variants[(len(doc.lines()) + len(
                      m.ref)) % len(b.est.firm_variants)]) if b.est.firm_variants else doc.name(b.firm)}
        if key.endswith("_former"):  # a renamed company's former name ('' for one never renamed)
            e = self.entity(key[:-7])
            former = getattr(e, "former_names", None) if e is not None else None
            return doc.name(e, variant=former[0]) if former else ""
        if key in values:
            return values[key]()
        raise KeyError(key)


def fill(b: Any, doc: Doc, template: str, **extra: Any) -> str:
    """``template`` with its placeholders filled (see module doc)."""
    return _Formatter(b, doc).vformat(template, (), _Values(b, doc, extra))


def write(b: Any, doc: Doc, lines: list[str], **extra: Any) -> None:
    """Write template lines as paragraphs (see module doc for ``?key``, ``""``, ``#`` and ``=``)."""
    for line in lines:
        if line.startswith("?"):
            key, line = line[1:].split(" ", 1)
            if not fill(b, doc, "{" + key + "}", **extra):
                continue
        if not line:
            doc.blank()
        elif line.startswith("#"):
            doc.p(fill(b, doc, line[1:], **extra), bold=True)
        elif line.startswith("="):
            doc.p(fill(b, doc, line[1:], **extra), style="Title")
        else:
            doc.p(fill(b, doc, line, **extra))
