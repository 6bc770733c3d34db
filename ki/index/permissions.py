"""Permission projection: grants at project, source, folder and document level → one allow/deny pair.

Spec: insertion-pipeline.md "Index" (every chunk carries a denormalised permission projection,
``allowed_principals`` / ``denied_principals``, compiled from source, project and document grants;
a sync that sees only an ACL change marks the index row ``access_only_reindex``); DESIGN.md
"Duplicates and permissions" (every source object keeps its own permissions).

Levels, outermost first (each may allow and deny principals):

1. **project** — ``access_grant`` rows with ``project_id`` (the source's project);
2. **source** — ``source.config["allowed_principals"]`` / ``["denied_principals"]`` (an absent
   ``allowed_principals`` key means ``["*"]``: a folder registered without grants is open to every
   principal, as before) plus ``access_grant`` rows with ``source_id``;
3. **connector ACL** — for a local folder, the ``.ki-grants.json`` files from the source root down
   to the file's folder (:mod:`ki.sources.grants`); a file may set ``"inherit": false``;
4. **document** — ``access_grant`` rows with ``source_object_id`` of the object or of any container
   it is embedded in (attachments inherit their mail's grants).

Compilation (:func:`compile_projection`): ``allowed`` accumulates the levels' allows, restarting
from empty at a level with ``inherit = false``; ``denied`` is the union of every level's denies
(an ethical wall set above cannot be lifted below). At query time a principal set ``P`` (always
including ``*``) sees a chunk iff ``allowed ∩ P ≠ ∅`` and ``denied ∩ P = ∅``: deny beats allow, and
an empty allow-list is visible to nobody (fail closed).

A failed ACL read (unreadable or malformed grants file, malformed source configuration, the
file's folder gone) raises :class:`ki.sources.grants.AclReadError`, an infrastructure error: it
is never read as "no restriction" (public) nor as "no access" (revoked); the index stage fails
and retries, and the chunks keep their previous projection.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

log = logging.getLogger(__name__)

#: The principal every caller holds: ``allowed_principals = ['*']`` is visible to everyone.
EVERYONE = "*"
#: The durable marker on an index ``processing_state`` row (spec: "access_only_reindex").
ACCESS_ONLY_REINDEX = "access_only_reindex"
MAX_PRINCIPAL_CHARS = 256


@dataclass(frozen=True)
class GrantLevel:
    """One level's grants.

    Attributes:
        scope: ``project``, ``source``, ``folder`` or ``document``.
        label: where it came from (a path, ``source 3``), for messages.
        allow / deny: principals (validated, stripped).
        inherit: False = allows of outer levels do not apply below this level (denies still do).
    """

    scope: str
    label: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    inherit: bool = True


@dataclass(frozen=True)
class AccessProjection:
    """The compiled permission fields written on every chunk of one source object.

    Attributes:
        allowed: sorted unique principals that may see the object (empty = nobody).
        denied: sorted unique principals that never see it (wins over ``allowed``).
    """

    allowed: tuple[str, ...]
    denied: tuple[str, ...] = ()

    @property
    def acl_hash(self) -> str:
        """SHA-256 hex (first 16 chars) of the projection: equal projections hash equal."""
        blob = json.dumps([list(self.allowed), list(self.denied)], separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def visible_to(self, principals: Iterable[str]) -> bool:
        """Whether a caller holding ``principals`` (``*`` is added) may see the object."""
        held = principal_set(principals)
        return bool(set(self.allowed) & set(held)) and not (set(self.denied) & set(held))


def principal_set(principals: Iterable[str]) -> tuple[str, ...]:
    """The caller's principals as the filter uses them: stripped, unique, sorted, with ``*`` added."""
    return tuple(sorted({p.strip() for p in principals if p and p.strip()} | {EVERYONE}))


def clean_principals(values: Any, *, where: str) -> tuple[str, ...]:
    """Validate a list of principals read from configuration or a grants file.

    Raises: ValueError (with ``where``) for a non-list, a non-string, an empty or overlong name.
    """
    if not isinstance(values, list | tuple):
        raise ValueError(f"{where}: expected a list of principals, got {type(values).__name__}")
    out = []
    for v in values:
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{where}: principal {v!r} is not a non-empty string")
        if len(v.strip()) > MAX_PRINCIPAL_CHARS:
            raise ValueError(f"{where}: principal longer than {MAX_PRINCIPAL_CHARS} characters")
        out.append(v.strip())
    return tuple(out)


def compile_projection(levels: Sequence[GrantLevel]) -> AccessProjection:
    """Compile levels (outermost first) into one projection (see the module docstring)."""
    allowed: set[str] = set()
    denied: set[str] = set()
    for level in levels:
        if not level.inherit:
            allowed = set()
        allowed.update(level.allow)
        denied.update(level.deny)
    return AccessProjection(tuple(sorted(allowed)), tuple(sorted(denied)))


# --- gathering the levels of one object ------------------------------------------------------------------

OBJECTS_SQL = text("""
WITH RECURSIVE chain(id, root_id, depth) AS (
    SELECT so.id, so.id, 0 FROM source_object so WHERE so.id = ANY(CAST(:ids AS bigint[]))
    UNION ALL
    SELECT c.id, p.parent_id, c.depth + 1
    FROM chain c JOIN source_object p ON p.id = c.root_id
    WHERE p.parent_id IS NOT NULL
)
SELECT c.id, array_agg(c.root_id ORDER BY c.depth) AS lineage
FROM chain c GROUP BY c.id
""")

GRANTS_SQL = text("""
SELECT project_id, source_id, source_object_id, principal, effect FROM access_grant
WHERE project_id = :project_id OR source_id = :source_id
   OR source_object_id = ANY(CAST(:object_ids AS bigint[]))
""")


@dataclass
class SourceAccess:
    """Grant data of one source, loaded once and reused for many of its objects.

    Attributes:
        source_id / project_id / kind / root / config: the source row.
        project_levels / source_levels: the compiled-in outer levels.
        document_grants: object id → (allow, deny) from ``access_grant``.
        external_ids: object id → external id; lineage: object id → [itself, container, ...].
    """

    source_id: int
    project_id: int
    kind: str
    root: str
    config: dict[str, Any]
    outer_levels: list[GrantLevel]
    document_grants: dict[int, tuple[list[str], list[str]]] = field(default_factory=dict)
    external_ids: dict[int, str] = field(default_factory=dict)
    lineage: dict[int, list[int]] = field(default_factory=dict)
    connector_cache: dict[str, Any] = field(default_factory=dict)

    def levels_for(self, source_object_id: int) -> list[GrantLevel]:
        """Every level of one object, outermost first.

        Raises: AclReadError when a grants file or the source configuration cannot be read.
        """
        from ki.sources.grants import connector_grant_levels

        lineage = self.lineage.get(source_object_id, [source_object_id])
        top = lineage[-1]
        levels = list(self.outer_levels)
        levels += connector_grant_levels(self.kind, self.root, self.config, self.external_ids[top],
                                         cache=self.connector_cache)
        for oid in reversed(lineage):  # the outermost container first
            allow, deny = self.document_grants.get(oid, ([], []))
            if allow or deny:
                levels.append(GrantLevel("document", f"object {oid}", tuple(allow), tuple(deny)))
        return levels

    def projection(self, source_object_id: int) -> AccessProjection:
        """The compiled projection of one object (raises AclReadError like :meth:`levels_for`)."""
        return compile_projection(self.levels_for(source_object_id))


def load_source_access(conn: Connection, source_id: int, object_ids: Sequence[int]) -> SourceAccess:
    """Load the grants of source ``source_id`` and of ``object_ids`` (objects of that source).

    Raises: AclReadError when ``source.config`` holds malformed principals.
    """
    from ki.sources.grants import AclReadError

    src = conn.execute(text("SELECT id, project_id, kind, root, config FROM source WHERE id = :id"),
                       {"id": source_id}).one()
    config = dict(src.config or {})
    lineage = {r.id: list(r.lineage) for r in conn.execute(OBJECTS_SQL, {"ids": list(object_ids)})}
    all_ids = sorted({i for chain in lineage.values() for i in chain} | set(object_ids))
    external_ids = dict(conn.execute(
        text("SELECT id, external_id FROM source_object WHERE id = ANY(CAST(:ids AS bigint[]))"),
        {"ids": all_ids}).fetchall())
    project = ([], [])
    source = ([], [])
    documents: dict[int, tuple[list[str], list[str]]] = {}
    for g in conn.execute(GRANTS_SQL, {"project_id": src.project_id, "source_id": source_id, "object_ids": all_ids}):
        if g.project_id is not None:
            bucket = project
        elif g.source_id is not None:
            bucket = source
        else:
            bucket = documents.setdefault(g.source_object_id, ([], []))
        (bucket[0] if g.effect == "allow" else bucket[1]).append(g.principal)
    where = f"configuration of source {source_id} ({src.root})"
    try:
        cfg_allow = clean_principals(config.get("allowed_principals", [EVERYONE]), where=where + " allowed_principals")
        cfg_deny = clean_principals(config.get("denied_principals", []), where=where + " denied_principals")
    except ValueError as exc:
        raise AclReadError(str(exc), infrastructure=f"source {source_id} grants malformed") from exc
    outer = [
        GrantLevel("project", f"project {src.project_id}", tuple(project[0]), tuple(project[1])),
        GrantLevel("source", f"source {source_id}", cfg_allow + tuple(source[0]), cfg_deny + tuple(source[1])),
    ]
    return SourceAccess(source_id=source_id, project_id=src.project_id, kind=src.kind, root=src.root, config=config,
                        outer_levels=outer, document_grants=documents, external_ids=external_ids, lineage=lineage)


def object_projection(conn: Connection, source_id: int, source_object_id: int) -> AccessProjection:
    """The current projection of one object (project, source, connector ACL, document grants).

    Raises: AclReadError (infrastructure) when any level cannot be read.
    """
    return load_source_access(conn, source_id, [source_object_id]).projection(source_object_id)


# --- the access_only_reindex marker ----------------------------------------------------------------------


def has_access_only_marker(last_error: dict[str, Any] | None) -> bool:
    """Whether an index row's ``last_error`` carries ``access_only_reindex``.

    The scan writes ``{"access_only_reindex": true}``; a failed access-only attempt keeps it in
    ``last_error.details`` (the handler attaches it to the exception's ``details``, which the
    failure record preserves), so the retry is access-only too.
    """
    if not last_error:
        return False
    details = last_error.get("details") or {}
    return bool(last_error.get(ACCESS_ONLY_REINDEX)) or (isinstance(details, dict)
                                                         and bool(details.get(ACCESS_ONLY_REINDEX)))


# -- name: mark_access_only_reindex --
# A done index row whose object's grants changed (and nothing else) goes back to pending with the
# durable marker; its attempt budget starts afresh. Rows in any other state are left alone: a
# pending/failed full index compiles the current grants anyway.
MARK_ACCESS_ONLY_SQL = text("""
UPDATE processing_state
SET status = 'pending', attempts = 0, last_error = CAST(:marker AS jsonb), next_retry_at = NULL,
    claim_token = NULL, claimed_by = NULL, heartbeat_at = NULL, updated_at = now()
WHERE stage = 'index' AND status = 'done' AND source_object_id = ANY(CAST(:ids AS bigint[]))
RETURNING source_object_id
""")

# Live objects of a source whose index row is done, with the projection their chunks carry now.
INDEXED_ACCESS_SQL = text("""
SELECT so.id, c.allowed_principals, c.denied_principals
FROM source_object so
JOIN processing_state ps ON ps.source_object_id = so.id AND ps.stage = 'index' AND ps.status = 'done'
JOIN LATERAL (SELECT allowed_principals, denied_principals FROM chunk
              WHERE chunk.source_object_id = so.id ORDER BY ordinal LIMIT 1) c ON true
WHERE so.source_id = :sid AND so.deleted_at IS NULL
""")


def mark_access_changes(conn: Connection, source_id: int) -> list[int]:
    """Compare every indexed object's chunk projection with its current grants; mark the changed ones.

    Called by the scan after it applied the listing (objects whose bytes changed were already
    requeued from fetch, so their index rows are no longer ``done``). An object whose grants
    cannot be read is marked too: its access-only re-index then fails as an infrastructure fault
    and retries, while its chunks keep their previous projection.

    Returns: the ids of the objects marked ``access_only_reindex``.
    """
    from ki.sources.grants import AclReadError

    rows = conn.execute(INDEXED_ACCESS_SQL, {"sid": source_id}).fetchall()
    if not rows:
        return []
    try:
        access = load_source_access(conn, source_id, [r.id for r in rows])
    except AclReadError as exc:
        log.warning("grants of source %s unreadable (%s): every indexed object is marked for an access refresh",
                    source_id, exc)
        changed = [r.id for r in rows]
    else:
        changed = []
        for r in rows:
            try:
                current = access.projection(r.id)
            except AclReadError as exc:
                log.warning("grants of object %s unreadable: %s", r.id, exc)
                changed.append(r.id)
                continue
            stored = AccessProjection(tuple(sorted(r.allowed_principals or [])),
                                      tuple(sorted(r.denied_principals or [])))
            if current != stored:
                changed.append(r.id)
    if not changed:
        return []
    marked = conn.execute(MARK_ACCESS_ONLY_SQL, {"ids": changed,
                                                 "marker": json.dumps({ACCESS_ONLY_REINDEX: True})}).fetchall()
    return [r.source_object_id for r in marked]
