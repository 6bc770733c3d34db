"""Matters in the database (``matter``, ``matter_assignment``): get-or-create under an advisory lock, search,
peek, assignments.

Spec: insertion-pipeline.md "Classify (classify_matter)" (MatterAssignment; the Matter created when
none fits, "with an advisory lock per (project, reference) so parallel workers converge on one
matter"; Artifact(kind="classification") per content hash) and "Agentic stages: Classify and
Relate" (``search_matters`` by reference, title and semantic similarity over indexed chunks, with an exact
``page.total`` and offsets over the full ranking;
``peek_matter`` with ``document_count`` and ``document_titles_are_sample``; ``create_matter``
committed in its own session immediately).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ki.store.db import Database
from ki.store.locks import xact_lock
from ki.store.matter_search import EVERY_MATTER_SQL, matter_candidates, nearest_matters

CLASSIFICATION = "classification"
PEEK_TITLES = 12
#: Points of the nearest matter in the vector half of ``search_matters`` (as many as a full-text match).
SEMANTIC_POINTS = 10.0
#: How fast the vector half's points fall with the matter's rank (:func:`semantic_points`).
SEMANTIC_RANK_K = 4


@dataclass(frozen=True)
class MatterRow:
    """A matter: id, project, reference, title, placeholder flag, folder."""

    id: int
    project_id: int
    reference: str
    title: str
    placeholder: bool
    folder: str | None


def normalise_reference(reference: str) -> str:
    """Canonical spelling of a reference: stripped, inner whitespace collapsed, upper case
    (a placeholder keeps its lower-case slug: ``UNASSIGNED-e-mail-ablage``)."""
    ref = " ".join(reference.split())
    if ref.upper().startswith("UNASSIGNED-"):
        return "UNASSIGNED-" + ref[len("UNASSIGNED-"):].lower()
    return ref.upper()


def get_or_create_matter(db: Database, *, project_id: int, reference: str, title: str = "",
                         folder: str | None = None, placeholder: bool = False) -> tuple[MatterRow, bool]:
    """Get the matter ``reference`` of the project, creating it if absent; committed before returning.

    Runs in its own transaction under ``pg_advisory_xact_lock`` on (project, reference), so workers
    classifying documents of the same matter at the same moment converge on one row and see it as
    soon as this returns. A missing ``folder`` is filled in when one is given, and of two folders the
    first in code-point order is kept with the title it gives (imported titles stay), so the matter's
    folder and title do not depend on which file named it first. A reference that is an imported
    matter's alias finds that matter.

    Returns: (the matter, whether this call created it).
    Raises: ValueError for an empty reference.
    """
    ref = normalise_reference(reference)
    if not ref:
        raise ValueError("a matter reference cannot be empty")
    with db.engine.begin() as conn:
        xact_lock(conn, "matter", f"{project_id}:{ref}")
        row = conn.execute(
            text("SELECT id, project_id, reference, title, placeholder, folder FROM matter "
                 "WHERE project_id = :p AND (reference = :r OR :r = ANY(aliases)) "
                 "ORDER BY reference = :r DESC LIMIT 1"), {"p": project_id, "r": ref}).first()
        created = False
        if row is None:
            row = conn.execute(
                text("""INSERT INTO matter (project_id, reference, title, folder, placeholder)
                        VALUES (:p, :r, :t, :f, :ph)
                        RETURNING id, project_id, reference, title, placeholder, folder"""),
                {"p": project_id, "r": ref, "t": (title or ref)[:500], "f": folder, "ph": placeholder}).one()
            created = True
        elif folder and (row.folder is None or folder < row.folder):
            # the same folder (and the title it gives) whichever file names the matter first
            conn.execute(text("UPDATE matter SET folder = :f, title = CASE WHEN imported THEN title ELSE :t END, "
                              "updated_at = now() WHERE id = :id"),
                         {"f": folder, "t": (title or ref)[:500], "id": row.id})
    chosen = min(f for f in (row.folder, folder) if f) if (row.folder or folder) else None
    return MatterRow(row.id, row.project_id, row.reference, row.title, row.placeholder, chosen), created


def get_matter(conn: Connection, matter_id: int) -> MatterRow | None:
    """The matter with this id, or None."""
    row = conn.execute(text("SELECT id, project_id, reference, title, placeholder, folder FROM matter WHERE id = :i"),
                       {"i": matter_id}).first()
    return MatterRow(row.id, row.project_id, row.reference, row.title, row.placeholder, row.folder) if row else None


def add_identifiers(conn: Connection, matter_id: int, identifiers: list[str]) -> None:
    """Record court case numbers (or other identifiers) seen on the matter's documents."""
    if identifiers:
        conn.execute(text("""UPDATE matter SET identifiers = ARRAY(SELECT DISTINCT unnest(identifiers || :ids)),
                                             updated_at = now()
                             WHERE id = :id AND NOT identifiers @> :ids"""),
                     {"id": matter_id, "ids": identifiers})


@functools.lru_cache(maxsize=65536)
def _words(value: str) -> frozenset[str]:
    """The words of ``value`` a title match counts (case-folded, three characters or more; of ``[0-9a-zäöü]``,
    which :func:`ki.store.matter_search.matter_candidates` relies on). Cached: searches read the same matters'
    titles and client names again, and they rarely change."""
    return frozenset(w for w in re.findall(r"[0-9a-zäöüß]+", value.casefold()) if len(w) >= 3)


def semantic_points(rank: int) -> float:
    """Points of the matter at ``rank`` (1 = nearest) of the vector half: ``SEMANTIC_POINTS`` for the first,
    falling as ``(k + 1) / (k + rank)`` with ``k`` = ``SEMANTIC_RANK_K`` (rank 2: 8.3, 5: 5.6, 10: 3.6) — by
    rank, not by the cosine value, whose scale differs from one embedding model to the next."""
    return SEMANTIC_POINTS * (SEMANTIC_RANK_K + 1) / (SEMANTIC_RANK_K + rank)


def search_matters(conn: Connection, *, project_id: int, query: str, limit: int = 8, offset: int = 0,
                   query_vector: Sequence[float] | None = None, every_matter: bool = False) -> dict[str, Any]:
    """Rank every matter of the project for ``query``, then cut the page.

    Score: reference named in the query (100), a case number / identifier / alias named (50), the
    client number (30), title and client-name words (up to 20), full-text match over the matter's
    indexed chunks (up to 10), and — given ``query_vector``, the query embedded with the model the index
    records — semantic similarity over the indexed chunks (up to 10, :func:`semantic_points`): the matters
    holding one of the :data:`~ki.store.matter_search.NEAREST_ROWS` rows nearest the query, placeholders aside
    (:func:`ki.store.matter_search.nearest_matters`). A matter is found by meaning so even when no word of
    the query occurs in it. An empty query lists every matter by reference.

    Returns: ``{"results": [{matter_id, reference, title, score, why, similarity?}], "page": {offset, limit,
        total, has_more}}``; ``why`` names the signals (``reference``, ``identifier``, ``client_number``,
        ``title``, ``text``, ``semantic``), ``similarity`` the cosine similarity of the matter's nearest row
        (only with ``semantic``). Every candidate is ranked before the page is cut: ``total`` counts every
        matter that scored, and an offset walks the same ranking (score, then real before placeholder, then
        reference).

        Only the matters that can score are read and ranked
        (:func:`ki.store.matter_search.matter_candidates`); ``every_matter`` reads and ranks every matter of the
        project instead — the same answer, slower (the reference the candidate filter is tested against).
    """
    q = (query or "").strip()
    nearest = nearest_matters(conn, project_id=project_id, vector=query_vector) \
        if q and query_vector is not None else []
    semantic = {mid: (rank, sim) for rank, (mid, sim) in enumerate(nearest, 1)}
    q_fold = q.casefold()
    q_words = _words(q)
    if q and not every_matter:
        rows = matter_candidates(conn, project_id=project_id, query=q, words=sorted(q_words), nearest=list(semantic))
    else:
        rows = conn.execute(EVERY_MATTER_SQL, {"q": q, "p": project_id}).fetchall()
    ranked = []
    for r in rows:
        why, score = [], 0.0
        if not q:
            score = 1.0
        else:
            if r.reference.casefold() in q_fold:
                score += 100
                why.append("reference")
            if any(i.casefold() in q_fold for i in r.identifiers or []):
                score += 50
                why.append("identifier")
            if r.client_number and re.search(rf"(?<!\w){re.escape(r.client_number.casefold())}(?!\w)", q_fold):
                score += 30
                why.append("client_number")
            t_words = (_words(r.title) | _words(r.client_name)) if q_words else frozenset()
            if q_words and t_words:
                overlap = len(q_words & t_words) / len(q_words)
                if overlap:
                    score += 20 * overlap
                    why.append("title")
            if r.text_rank:
                score += min(10.0, 10 * float(r.text_rank) + 1)
                why.append("text")
            if r.id in semantic:
                score += semantic_points(semantic[r.id][0])
                why.append("semantic")
        if score > 0:
            ranked.append((-score, r.placeholder, r.reference, r, why))
    ranked.sort(key=lambda t: t[:3])
    page = ranked[offset: offset + limit]
    return {
        "results": [{"matter_id": r.id, "reference": r.reference, "title": r.title, "score": round(-s, 3),
                     "why": why, **({"similarity": round(semantic[r.id][1], 3)} if r.id in semantic else {})}
                    for s, _, _, r, why in page],
        "page": {"offset": offset, "limit": limit, "total": len(ranked),
                 "has_more": offset + len(page) < len(ranked)},
    }


def peek_matter(conn: Connection, matter_id: int) -> dict[str, Any] | None:
    """One matter: references, practice area, kind, folders, ``document_count`` (the true total) and a
    sample of document titles with ``document_titles_are_sample``. None when the matter does not exist."""
    m = conn.execute(text("""SELECT id, reference, title, practice_area, kind, folder, identifiers, placeholder,
                                    imported FROM matter WHERE id = :i"""), {"i": matter_id}).first()
    if m is None:
        return None
    count = int(conn.execute(text("""SELECT count(*) FROM matter_assignment ma JOIN source_object so
                                     ON so.id = ma.source_object_id AND so.deleted_at IS NULL
                                     WHERE ma.matter_id = :i"""), {"i": matter_id}).scalar_one())
    titles = [r.title for r in conn.execute(text("""
        SELECT DISTINCT ON (coalesce(a.body->>'title', so.external_id)) coalesce(a.body->>'title', so.external_id)
               AS title
        FROM matter_assignment ma JOIN source_object so ON so.id = ma.source_object_id AND so.deleted_at IS NULL
        LEFT JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
        WHERE ma.matter_id = :i LIMIT :n"""), {"i": matter_id, "n": PEEK_TITLES})]
    folders = [r.folder for r in conn.execute(text("""
        SELECT regexp_replace(so.external_id, '/[^/]*$', '') AS folder, count(*) AS n
        FROM matter_assignment ma JOIN source_object so ON so.id = ma.source_object_id AND so.deleted_at IS NULL
        WHERE ma.matter_id = :i AND so.parent_id IS NULL GROUP BY 1 ORDER BY n DESC, 1 LIMIT 10"""),
        {"i": matter_id})]
    return {"matter_id": m.id, "references": [m.reference, *(m.identifiers or [])], "title": m.title,
            "practice_area": m.practice_area, "kind": m.kind, "placeholder": m.placeholder, "imported": m.imported,
            "folders": ([m.folder] if m.folder and m.folder not in folders else []) + folders,
            "document_count": count, "document_titles": titles,
            "document_titles_are_sample": count > len(titles)}


@dataclass(frozen=True)
class Assignment:
    """A source object's current matter assignment."""

    matter_id: int
    reference: str
    content_hash: str | None
    method: str


def read_assignment(conn: Connection, source_object_id: int) -> Assignment | None:
    """The object's assignment, or None when Classify has not assigned it."""
    row = conn.execute(text("""SELECT ma.matter_id, m.reference, ma.content_hash, ma.method
                               FROM matter_assignment ma JOIN matter m ON m.id = ma.matter_id
                               WHERE ma.source_object_id = :o"""), {"o": source_object_id}).first()
    return Assignment(row.matter_id, row.reference, row.content_hash, row.method) if row else None


def write_assignment(conn: Connection, *, source_object_id: int, matter_id: int, content_hash: str | None,
                     method: str, provenance: dict[str, Any]) -> None:
    """Create or replace the object's MatterAssignment."""
    conn.execute(text("""
        INSERT INTO matter_assignment (source_object_id, matter_id, content_hash, method, provenance)
        VALUES (:o, :m, :h, :me, CAST(:p AS jsonb))
        ON CONFLICT (source_object_id) DO UPDATE
        SET matter_id = EXCLUDED.matter_id, content_hash = EXCLUDED.content_hash, method = EXCLUDED.method,
            provenance = EXCLUDED.provenance, updated_at = now()"""),
        {"o": source_object_id, "m": matter_id, "h": content_hash, "me": method,
         "p": json.dumps(provenance, default=str)})


def record_classification(conn: Connection, *, content_hash: str, source_object_id: int, producer_version: str,
                          decision: dict[str, Any]) -> None:
    """Store the decision in the content's ``classification`` artifact (one per content hash; one entry
    per object holding that content, since the path is evidence too)."""
    entry = json.dumps(decision, default=str)
    conn.execute(text("""
        INSERT INTO artifact (content_hash, kind, producer, producer_version, body)
        VALUES (:h, :k, 'ki.classify_matter', :v,
                jsonb_build_object('objects', jsonb_build_object(CAST(:o AS text), CAST(:b AS jsonb))))
        ON CONFLICT (content_hash, kind) DO UPDATE
        SET body = jsonb_set(CASE WHEN artifact.body ? 'objects' THEN artifact.body
                                  ELSE jsonb_build_object('objects', '{}'::jsonb) END,
                             ARRAY['objects', CAST(:o AS text)], CAST(:b AS jsonb), true),
            producer_version = EXCLUDED.producer_version"""),
        {"h": content_hash, "k": CLASSIFICATION, "v": producer_version, "o": str(source_object_id), "b": entry})


def recorded_classification(conn: Connection, content_hash: str, source_object_id: int) -> dict[str, Any] | None:
    """The decision stored for this object and content, or None."""
    row = conn.execute(text("SELECT body->'objects'->CAST(:o AS text) AS entry FROM artifact "
                            "WHERE content_hash = :h AND kind = :k"),
                       {"h": content_hash, "k": CLASSIFICATION, "o": str(source_object_id)}).first()
    return row.entry if row and row.entry else None


# ------------------------------------------------------------ practice-management import
UPSERT_IMPORTED_SQL = text("""
INSERT INTO matter (project_id, reference, title, client_name, client_number, opened, closed, practice_area, kind,
                    responsible, aliases, imported)
VALUES (:p, :r, :t, :cn, :cno, :o, :c, :pa, :k, :resp, :al, true)
ON CONFLICT (project_id, reference) DO UPDATE
SET title = EXCLUDED.title, client_name = EXCLUDED.client_name, client_number = EXCLUDED.client_number,
    opened = EXCLUDED.opened, closed = EXCLUDED.closed, practice_area = EXCLUDED.practice_area,
    kind = coalesce(EXCLUDED.kind, matter.kind), responsible = EXCLUDED.responsible, aliases = EXCLUDED.aliases,
    imported = true, placeholder = false, updated_at = now()
WHERE (matter.title, matter.client_name, matter.client_number, matter.opened, matter.closed, matter.practice_area,
       matter.responsible, matter.aliases, matter.imported)
      IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.client_name, EXCLUDED.client_number, EXCLUDED.opened,
                        EXCLUDED.closed, EXCLUDED.practice_area, EXCLUDED.responsible, EXCLUDED.aliases, true)
   OR (EXCLUDED.kind IS NOT NULL AND matter.kind IS DISTINCT FROM EXCLUDED.kind)
RETURNING (xmax = 0) AS inserted
""")


@dataclass
class ImportReport:
    """What ``ki matters import`` did: counts, and the rows it refused (line, message)."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    refused: list[tuple[int, str]] | None = None


def import_matters(db: Database, *, project_id: int, rows: list[tuple[int, Any]]) -> ImportReport:
    """Create or update the imported matters (``rows``: (line, :class:`~ki.domain.matters.matter_list.ImportedMatter`)).

    Idempotent: a matter is found by its normalised reference (one row per reference, so re-importing
    updates and never duplicates); an unchanged row is not written. A row is refused when its reference
    or an alias is already another matter's reference or alias, or repeats an earlier row of the list.
    One transaction, under the same advisory locks as :func:`get_or_create_matter`.
    """
    report = ImportReport(refused=[])
    seen: dict[str, int] = {}
    with db.engine.begin() as conn:
        for line, row in rows:
            ref = normalise_reference(row.reference)
            aliases = sorted({normalise_reference(a) for a in row.aliases} - {ref})
            clash = next((s for s in [ref, *aliases] if s in seen), None)
            if clash is not None:
                report.refused.append((line, f"{clash} is already on line {seen[clash]} of the list"))
                continue
            for spelling in [ref, *aliases]:
                xact_lock(conn, "matter", f"{project_id}:{spelling}")
            other = conn.execute(text("""
                SELECT reference FROM matter WHERE project_id = :p AND reference <> :r
                  AND (reference = ANY(:all) OR aliases && :all) LIMIT 1"""),
                {"p": project_id, "r": ref, "all": [ref, *aliases]}).first()
            if other is not None:
                report.refused.append((line, f"{ref}: a reference or alias of it is matter {other.reference}'s"))
                continue
            seen.update({s: line for s in [ref, *aliases]})
            done = conn.execute(UPSERT_IMPORTED_SQL, {
                "p": project_id, "r": ref, "t": (row.title or ref)[:500], "cn": row.client,
                "cno": row.client_number, "o": row.opened, "c": row.closed, "pa": row.practice_area, "k": row.kind,
                "resp": row.responsible, "al": aliases}).first()
            if done is None:
                report.unchanged += 1
            elif done.inserted:
                report.created += 1
            else:
                report.updated += 1
    return report


def list_matters(conn: Connection, *, project_id: int) -> list[dict[str, Any]]:
    """Every matter of the project with its facts and file count, by reference."""
    rows = conn.execute(text("""
        SELECT m.reference, m.title, m.client_name, m.client_number, m.opened, m.closed, m.practice_area, m.kind,
               m.responsible, m.aliases, m.imported, m.placeholder, m.folder,
               (SELECT count(*) FROM matter_assignment ma JOIN source_object so ON so.id = ma.source_object_id
                 AND so.deleted_at IS NULL WHERE ma.matter_id = m.id) AS files
        FROM matter m WHERE m.project_id = :p ORDER BY m.placeholder, m.reference"""), {"p": project_id})
    return [{"reference": r.reference, "title": r.title, "client": r.client_name, "client_number": r.client_number,
             "opened": r.opened.isoformat() if r.opened else None, "closed": r.closed.isoformat() if r.closed else None,
             "practice_area": r.practice_area, "kind": r.kind, "responsible": r.responsible,
             "aliases": list(r.aliases or []), "imported": r.imported, "placeholder": r.placeholder,
             "folder": r.folder, "files": int(r.files)} for r in rows]


def imported_matters_version(conn: Connection, project_id: int) -> tuple[int, Any]:
    """(count, latest ``updated_at``) of the project's imported matters: changes whenever an import does."""
    row = conn.execute(text("SELECT count(*), max(updated_at) FROM matter WHERE project_id = :p AND imported"),
                       {"p": project_id}).one()
    return int(row[0]), row[1]


def imported_matters(conn: Connection, project_id: int) -> list[tuple[str, list[str], str | None, str | None]]:
    """(reference, aliases, client number, client name) of every imported matter of the project, by reference."""
    return [(r.reference, list(r.aliases or []), r.client_number, r.client_name) for r in conn.execute(text(
        "SELECT reference, aliases, client_number, client_name FROM matter "
        "WHERE project_id = :p AND imported ORDER BY reference"), {"p": project_id})]


def default_project_id(conn: Connection) -> int:
    """The ``default`` project's id (the one ``ki insert`` registers sources in)."""
    return int(conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one())


def forget_classifications(conn: Connection, source_object_ids: list[int]) -> None:
    """Drop the recorded decisions of these objects (their content's ``classification`` entries), so the
    next Classify decides again instead of reusing them (:mod:`ki.domain.matters.basis`). Copies of one
    content share one artifact row: every entry of the objects given is dropped from it in one update (an
    ``UPDATE … FROM`` joined once per object would apply only one of a row's joined objects)."""
    conn.execute(text("""
        UPDATE artifact a SET body = jsonb_set(a.body, '{objects}', (a.body->'objects') - f.keys)
        FROM (SELECT so.content_hash, array_agg(CAST(so.id AS text)) AS keys FROM source_object so
              WHERE so.id = ANY(CAST(:o AS bigint[])) GROUP BY so.content_hash) f
        WHERE a.content_hash = f.content_hash AND a.kind = :k AND jsonb_typeof(a.body->'objects') = 'object'"""),
        {"o": sorted(set(source_object_ids)), "k": CLASSIFICATION})


def drop_unused_placeholder(conn: Connection, matter_id: int | None) -> bool:
    """Delete a placeholder (``UNASSIGNED-…``) matter no file is assigned to any more (its last file was
    classified into a real matter), so the matters left do not depend on the order files classified in.
    Documents and threads that pointed to it point nowhere until Relate writes them again. Returns
    whether it was deleted.

    Call it after the caller's own assignment moved away. Serialised per matter by a transaction-level
    advisory lock, so of two files leaving the placeholder at once the second to take it sees the first's
    committed move (without the lock each saw the other's old assignment and neither dropped it)."""
    if matter_id is None:
        return False
    xact_lock(conn, "matter-drop", str(matter_id))
    gone = conn.execute(text("""
        SELECT 1 FROM matter m WHERE m.id = :m AND m.placeholder AND NOT m.imported
          AND NOT EXISTS (SELECT 1 FROM matter_assignment a WHERE a.matter_id = m.id)"""), {"m": matter_id}).first()
    if gone is None:
        return False
    conn.execute(text("UPDATE document SET matter_id = NULL WHERE matter_id = :m"), {"m": matter_id})
    conn.execute(text("UPDATE communication_thread SET matter_id = NULL WHERE matter_id = :m"), {"m": matter_id})
    conn.execute(text("DELETE FROM matter_party WHERE matter_id = :m"), {"m": matter_id})
    conn.execute(text("DELETE FROM matter WHERE id = :m"), {"m": matter_id})
    return True


def note_matter_kind(conn: Connection, matter_id: int, *, practice_area: str | None, kind: str | None) -> None:
    """Fill a created matter's practice area and kind where they are still empty (an imported matter keeps
    what practice management says)."""
    conn.execute(text("""UPDATE matter SET practice_area = coalesce(practice_area, :pa),
                         kind = coalesce(kind, :k), updated_at = now() WHERE id = :id AND NOT imported"""),
                 {"pa": practice_area, "k": kind, "id": matter_id})


def settle_matter_folder(conn: Connection, matter_id: int, folder: str, title: str) -> None:
    """The matter's folder is the first (by path order) folder that names its reference, whichever file
    names it first; a created matter's title follows that folder (``title``, ≤ 500 chars)."""
    conn.execute(text("""UPDATE matter SET folder = :f, updated_at = now(),
                         title = CASE WHEN imported THEN title ELSE :t END
                         WHERE id = :id AND (folder IS NULL OR folder > :f)"""),
                 {"f": folder, "t": title, "id": matter_id})
