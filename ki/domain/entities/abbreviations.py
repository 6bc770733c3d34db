"""Persons written with initials on a matter → the matter's one full-name person of that name.

Spec: insertion-pipeline.md "Extract metadata" (one real party is one entity; the name as written stays on
the document's party row) (``N. Ogilvie`` is ``Nicola Ogilvie`` when the matter has exactly one
compatible full-name person, see :mod:`ki.domain.entities.persons`) (the result is a function
of the matter's documents, never of their order).

A mention ``N. Ogilvie`` resolves by the ordinary rules (:mod:`ki.domain.entities.resolve`) to an entity of its
own (its *home*: identity key ``n ogilvie``) — the rules never link an initial to a first name. After
every extraction, :func:`settle_abbreviations` looks at all person party rows of the matter, under the
matter's roles lock (the last document to commit sees every other one's rows): a row written with
initials points to the one full-name person of the matter it abbreviates, else (none, or two: ``N.``
for both Nicola and Niamh Ogilvie) back to its home. The link is recorded on the row
(``resolution.abbreviation = {"home": id, "expanded": bool}``) and not on the alias ledger, because it
holds for this matter only and is decided again whenever the matter's persons change.

A document without a matter key (Classify left it in an ``UNASSIGNED-…`` placeholder, which groups
unrelated files) is settled in its *folder* instead (:class:`FolderScope`; the placeholder rule:
only files of one folder can be one another's): its initials rows point at the one compatible
full-name person any document of that folder names, whatever that document's matter. Every extraction
settles its own folder too (under the folder's lock), so a full name arriving after the initials, or
before them, gives the same rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from ki.core.like_pattern import like_escape
from ki.domain.entities.persons import expansion, parse_person
from ki.store.locks import lock_key, lock_keys_in_order
from ki.store.parties import folder_person_rows, matter_person_rows, repoint_party


@dataclass(frozen=True)
class FolderScope:
    """The folder a document lies in, as the scope of its initials when it has no matter key.

    Attributes:
        source_id: the document's source (``source.id``).
        folder: its folder as stored in ``source_object.path`` (an embedded object: its container's folder).
    """

    source_id: int
    folder: str

    @classmethod
    def of(cls, source_id: int, path: str) -> FolderScope:
        """The scope of the object at ``path`` (``/root/A/B/x.eml » att.pdf`` → ``/root/A/B``)."""
        return cls(source_id, folder_of(path))

    @property
    def lock_name(self) -> str:
        """The name the folder's lock is taken under (in :func:`lock_matters`' one ordered call)."""
        return f"folder:{self.source_id}:{self.folder}"


def folder_of(path: str) -> str:
    """The folder of a stored path; an embedded object (``container » part``) lies in its container's."""
    base = path.split(" » ", 1)[0]
    return base.rsplit("/", 1)[0] if "/" in base else ""


def lock_matters(conn: Connection, matter_keys: list[str]) -> None:
    """Take the roles lock (``matter-roles``) of every matter, in ascending key order (no deadlock between
    documents that settle two matters, as a document moved to another matter does). A folder's lock
    (:attr:`FolderScope.lock_name`) is taken in the same call, so all of an extraction's locks come in one
    order."""
    keys = sorted({lock_key("matter-roles", m) for m in matter_keys if m})
    if keys:
        lock_keys_in_order(conn, keys)


def settle_abbreviations(conn: Connection, matter_key: str) -> set[int]:
    """Point every initials-only person row of the matter at the full-name person it abbreviates, or home.

    Runs inside the extraction's transaction, after the document's party rows are written and under the
    matter's roles lock (taken here, re-entrant). A row is not moved onto an entity its document already
    names on another row (one row per document and entity). Returns the ids of the entities whose rows
    moved (both sides), to be renamed (:func:`ki.domain.entities.store.settle_entity_names`).
    """
    lock_matters(conn, [matter_key])
    rows = matter_person_rows(conn, matter_key)
    return _settle(conn, rows, rows)


def settle_folder_abbreviations(conn: Connection, scope: FolderScope) -> set[int]:
    """Point every initials-only person row of the folder's documents without a matter key at the one
    full-name person the folder's documents name (any matter), or home — :func:`settle_abbreviations`
    for the placeholder rows of one folder (see module doc).

    Runs inside the extraction's transaction after its party rows are written, under the folder's lock
    (taken here, re-entrant). Returns the ids of the entities whose rows moved.
    """
    lock_matters(conn, [scope.lock_name])
    prefix = like_escape(scope.folder) + "/%"
    rows = [r for r in folder_person_rows(conn, scope.source_id, prefix)
            if folder_of(r.path) == scope.folder]
    return _settle(conn, [r for r in rows if r.unscoped], rows)


def _settle(conn: Connection, rows: list, candidates: list) -> set[int]:
    """Move the initials rows among ``rows`` to the one full-name person of ``candidates`` they abbreviate."""
    full: dict[int, set[str]] = defaultdict(set)
    short = []
    for r in rows:
        parsed = parse_person(r.name)
        if parsed is not None and parsed.abbreviated:
            short.append(r)
    if not short:
        return set()
    for r in candidates:
        parsed = parse_person(r.name)
        if parsed is not None and not parsed.abbreviated and parsed.full:
            full[r.entity_id].add(r.name)
    on_document: dict[int, set[int]] = defaultdict(set)
    for r in candidates:
        on_document[r.source_object_id].add(r.entity_id)
    moved: set[int] = set()
    for r in short:
        home = int((r.abbreviation or {}).get("home") or r.entity_id)
        target = expansion(r.name, {e: names for e, names in full.items() if e != home}) or home
        if target != r.entity_id and target in on_document[r.source_object_id]:
            target = r.entity_id if r.entity_id == home else home
            if target in on_document[r.source_object_id]:
                continue
        if target == r.entity_id:
            continue
        note = {"home": home, "expanded": target != home}
        repoint_party(conn, r.id, target, note)
        on_document[r.source_object_id].discard(r.entity_id)
        on_document[r.source_object_id].add(target)
        moved.update((r.entity_id, target))
    return moved
