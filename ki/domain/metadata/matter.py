"""The matter a document's parties belong to, and what the matter's folder and reference say about them.

Spec: insertion-pipeline.md "Extract metadata" (roles are roles on the matter; corroboration by the
matter; on an imported matter the practice-management client outranks any document claim).

The matter key of a document is ``matter:<id>`` when Classify assigned it to a real matter (a
placeholder ``UNASSIGNED-…`` matter groups unrelated files, so it gives no key). When Classify has not
run (its table is absent or holds no row for the object) the key falls back to the reference the
document carries in its text or path (``ref:<reference>``), else None: roles are then decided by
the document alone.

Folder hints: a matter folder names its client first — ``<client> gg. <opponent>``, ``<client> - <subject>``,
``<surname>, <first name> - <subject>`` — so a party named there gets ``client`` (or ``counterparty``
after ``gg.``/``vs.``/``./.``) with basis ``folder``; so does a folder inside a clients folder
(``Clients/<client> (<client no.>)/…``, ``Cliënten/<client>/…``, ``Mandanten/<client>/…``). A reference's
client code (``THOR-2023-013``) names the client whose name starts with it (basis ``code``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from ki.domain.entities.mentions import KnownName, Mention, find_mentions
from ki.domain.entities.names import NameKey, contained, name_key
from ki.domain.entities.patterns import SURNAME_FIRST
from ki.domain.entities.persons import parse_person
from ki.domain.matters.references import FIRM_REFERENCE, own_reference
from ki.domain.ontology.terms import fold
from ki.store.db import has_table
from ki.store.objects import assigned_matter

VERSUS = re.compile(r"\s+(?:gg\.|vs\.?|v\.|\._\.|\./\.|gegen|against)\s+", re.IGNORECASE)
SUBJECT_DASH = re.compile(r"\s+[-–]\s+")
CLIENT_CODE = re.compile(r"^([A-Z]{3,6})-(?:19|20)\d{2}-\d{3}$")
#: Folders that hold one folder per client (``Clients/<client> (<client no.>)/…``, ``Cliënten/<client>/…``, folded).
CLIENTS_FOLDERS = frozenset({"clients", "client", "mandanten", "mandant", "clienten", "klanten", "klienten",
                             "kunden", "clientes", "clientele"})
#: A client number or note in brackets after the client's name in its folder (``Robert Danvers (74625)``).
BRACKETED_TAIL = re.compile(r"\s*\([^()]*\)\s*$")
#: A dotted legal form whose last full stop the file system dropped (``B.V``, ``N.V``, ``S.A``).
DOTTED_FORM_END = re.compile(r"(?<=\.)[A-Za-z]$")


@dataclass(frozen=True)
class MatterContext:
    """Where a document's parties take their roles.

    Attributes:
        key: ``matter:<id>``, ``ref:<reference>`` or None.
        matter_id: the Matter row (Classify), if any.
        reference: the matter reference, if known.
        imported: the matter was imported from practice management (its client outranks documents).
        folder: the matter's folder (relative path), if known.
        client_name: the imported matter's client as practice management names it.
    """

    key: str | None = None
    matter_id: int | None = None
    reference: str | None = None
    imported: bool = False
    folder: str | None = None
    client_name: str | None = None

    def client_gazetteer(self) -> list[KnownName]:
        """The imported client's name as a known name of every document of the matter: found wherever the
        text writes it, whether or not another document already made it an entity (the
        parties are a function of the estate and the imported list, not of the order files came in)."""
        if not (self.imported and self.client_name and self.client_name.strip()):
            return []
        parsed = parse_person(self.client_name)
        kind = "person" if not name_key(self.client_name).form and parsed is not None and parsed.full \
            else "company"
        return [KnownName(None, self.client_name.strip(), kind)]


def matter_context(conn: Connection, source_object_id: int, rel_path: str, text_: str) -> MatterContext:
    """The :class:`MatterContext` of a source object (see module doc)."""
    if has_table(conn, "matter_assignment"):
        row = assigned_matter(conn, source_object_id)
        if row is not None:
            if row.placeholder:
                return MatterContext()
            return MatterContext(f"matter:{row.id}", row.id, row.reference, bool(row.imported), row.folder,
                                 row.client_name)
    evidence = own_reference(rel_path, text_ or "")
    if evidence is None:
        return MatterContext()
    return MatterContext(f"ref:{evidence.reference}", None, evidence.reference, False, evidence.folder)


def _folder_parties(component: str) -> list[tuple[NameKey, str]]:
    """(name key, role) of the parties a matter-folder name states."""
    name = FIRM_REFERENCE.sub(" ", component).strip(" -–")
    out: list[tuple[NameKey, str]] = []
    sides = VERSUS.split(name, maxsplit=1)
    for i, side in enumerate(sides):
        role = "client" if i == 0 else "counterparty"
        if i == 0 and len(sides) == 1:
            side = SUBJECT_DASH.split(side, maxsplit=1)[0] if SUBJECT_DASH.search(side) else ""
        else:
            side = SUBJECT_DASH.split(side, maxsplit=1)[0]
        person = SURNAME_FIRST.match(side.strip())
        if person:
            out.append((name_key(f"{person.group('first')} {person.group('last')}", kind="person"), role))
            continue
        mentions = [m for m in find_mentions(side) if m.kind in ("company", "person")]
        if mentions:
            out.append((mentions[0].key, role))
        elif len(sides) > 1 and 2 <= len(side.split()) <= 4 and all(w[:1].isupper() for w in side.split()):
            out.append((name_key(side, kind="person"), role))
    return out


def _client_folder_party(component: str) -> list[tuple[NameKey, str]]:
    """The client a folder inside a clients folder names (``Greyfriars Capital LLC (34223)``, ``Bas Brouwer``,
    ``Smit Holding B.V``): a company by its legal form, else a person's two to four capitalised words."""
    name = BRACKETED_TAIL.sub("", FIRM_REFERENCE.sub(" ", component)).strip(" -–")
    name = DOTTED_FORM_END.sub(r"\g<0>.", name)  # a folder name cannot end in a full stop: "Smit Holding B.V"
    if VERSUS.search(name) or SUBJECT_DASH.search(name):
        return _folder_parties(component)
    mentions = [m for m in find_mentions(name) if m.kind in ("company", "person")]
    if mentions:
        return [(mentions[0].key, "client")]
    words = name.split()
    parsed = parse_person(name)
    if 2 <= len(words) <= 4 and words[0][:1].isupper() and words[-1][:1].isupper() and parsed is not None \
            and parsed.full:
        return [(name_key(name, kind="person"), "client")]
    return []


def folder_hints(rel_path: str, matter_folder: str | None, mentions: list[Mention]) -> None:
    """Add ``(role, "folder")`` hints to mentions the matter folder names (see module doc); a folder inside a
    clients folder (:data:`CLIENTS_FOLDERS`) names the client."""
    parts = [p for p in rel_path.split(" » ")[0].split("/")[:-1] if p]
    for parent, component in zip(parts, parts[1:], strict=False):
        if fold(parent).strip() in CLIENTS_FOLDERS:
            _hint_folder(_client_folder_party(component), mentions)
    if matter_folder:
        folder_parts = [p for p in matter_folder.split("/") if p]
        candidates = folder_parts[-1:] if folder_parts else []
    else:
        candidates = parts
    named: list[tuple[NameKey, str]] = []
    for component in candidates:
        if VERSUS.search(component) or SUBJECT_DASH.search(component):
            named = _folder_parties(component)
            if named:
                break
    _hint_folder(named, mentions)


def _hint_folder(named: list[tuple[NameKey, str]], mentions: list[Mention]) -> None:
    for key, role in named:
        for m in mentions:
            if m.kind in ("company", "person") and (m.key.key == key.key or contained(m.key, key)):
                if (role, "folder") not in m.hints:
                    m.hints.append((role, "folder"))


def code_hint(reference: str | None, mentions: list[Mention]) -> None:
    """Add ``("client", "code")`` to the one party whose name starts with the reference's client code."""
    m = CLIENT_CODE.match(reference or "")
    if not m:
        return
    code = fold(m.group(1))
    hits = [x for x in mentions if x.kind in ("company", "person") and x.key.base
            and "".join(x.key.base).startswith(code)]
    if len({h.key.key for h in hits}) == 1:
        for h in hits:
            if ("client", "code") not in h.hints:
                h.hints.append(("client", "code"))
