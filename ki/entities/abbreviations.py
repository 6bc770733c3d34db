"""Persons written with initials on a matter → the matter's one full-name person of that name.

Spec: insertion-pipeline.md "Extract metadata" (one real party is one entity; the name as written stays on
the document's party row); issue 16 (``N. Ogilvie`` is ``Nicola Ogilvie`` when the matter has exactly one
compatible full-name person, see :mod:`ki.entities.persons`); issue 14 item 1 (the result is a function
of the matter's documents, never of their order).

A mention ``N. Ogilvie`` resolves by the ordinary rules (:mod:`ki.entities.resolve`) to an entity of its
own (its *home*: identity key ``n ogilvie``) — the rules never link an initial to a first name. After
every extraction, :func:`settle_abbreviations` looks at all person party rows of the matter, under the
matter's roles lock (the last document to commit sees every other one's rows): a row written with
initials points to the one full-name person of the matter it abbreviates, else (none, or two: ``N.``
for both Nicola and Niamh Ogilvie) back to its home. The link is recorded on the row
(``resolution.abbreviation = {"home": id, "expanded": bool}``) and not on the alias ledger, because it
holds for this matter only and is decided again whenever the matter's persons change.
"""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.entities.persons import expansion, parse_person
from ki.store.locks import lock_key

_PERSON_ROWS_SQL = text("""
SELECT p.id, p.source_object_id, p.entity_id, p.name, p.resolution->'abbreviation' AS abbreviation
FROM document_party p JOIN entity e ON e.id = p.entity_id
WHERE p.matter_key = :m AND e.kind = 'person'
ORDER BY p.id
""")


def lock_matters(conn: Connection, matter_keys: list[str]) -> None:
    """Take the roles lock (``matter-roles``) of every matter, in ascending key order (no deadlock between
    documents that settle two matters, as a document moved to another matter does)."""
    keys = sorted({lock_key("matter-roles", m) for m in matter_keys if m})
    if keys:
        conn.execute(text("SELECT count(pg_advisory_xact_lock(k)) FROM (SELECT unnest(CAST(:keys AS bigint[])) AS k "
                          "ORDER BY 1) AS ordered"), {"keys": keys})


def settle_abbreviations(conn: Connection, matter_key: str) -> set[int]:
    """Point every initials-only person row of the matter at the full-name person it abbreviates, or home.

    Runs inside the extraction's transaction, after the document's party rows are written and under the
    matter's roles lock (taken here, re-entrant). A row is not moved onto an entity its document already
    names on another row (one row per document and entity). Returns the ids of the entities whose rows
    moved (both sides), to be renamed (:func:`ki.entities.store.settle_entity_names`).
    """
    lock_matters(conn, [matter_key])
    rows = conn.execute(_PERSON_ROWS_SQL, {"m": matter_key}).fetchall()
    full: dict[int, set[str]] = defaultdict(set)
    short = []
    for r in rows:
        parsed = parse_person(r.name)
        if parsed is None:
            continue
        if parsed.abbreviated:
            short.append(r)
        elif parsed.full:
            full[r.entity_id].add(r.name)
    on_document: dict[int, set[int]] = defaultdict(set)
    for r in rows:
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
        conn.execute(text("""UPDATE document_party SET entity_id = :e,
                             resolution = resolution || jsonb_build_object('abbreviation', CAST(:note AS jsonb))
                             WHERE id = :id"""), {"e": target, "note": json.dumps(note), "id": r.id})
        on_document[r.source_object_id].discard(r.entity_id)
        on_document[r.source_object_id].add(target)
        moved.update((r.entity_id, target))
    return moved
