"""Loading the grant levels of objects: the database's grants and the connector's ACL.

Spec: insertion-pipeline.md "Index" (the projection compiled from source, project and document
grants; a failed ACL read is never read as "public" nor as "revoked"). The rules of compilation are
in :mod:`ki.domain.access.projection`; the local folder's grants files in :mod:`ki.domain.access.folder_grants`.

A failed ACL read (unreadable or malformed grants file, malformed source configuration, the
file's folder gone) raises :class:`ki.core.errors.AclReadError`, an infrastructure error: the index
stage fails and retries, and the chunks keep their previous projection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from ki.core.errors import AclReadError
from ki.domain.access.folder_grants import connector_grant_levels
from ki.domain.access.projection import EVERYONE, AccessProjection, GrantLevel, clean_principals, compile_projection
from ki.domain.access.share_permissions import PUBLIC, permission_model
from ki.store.grants import external_ids_of, grant_rows, object_lineage, source_row


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
    src = source_row(conn, source_id)
    config = dict(src.config or {})
    lineage = object_lineage(conn, list(object_ids))
    all_ids = sorted({i for chain in lineage.values() for i in chain} | set(object_ids))
    external_ids = external_ids_of(conn, all_ids)
    project = ([], [])
    source = ([], [])
    documents: dict[int, tuple[list[str], list[str]]] = {}
    for g in grant_rows(conn, src.project_id, source_id, all_ids):
        if g.project_id is not None:
            bucket = project
        elif g.source_id is not None:
            bucket = source
        else:
            bucket = documents.setdefault(g.source_object_id, ([], []))
        (bucket[0] if g.effect == "allow" else bucket[1]).append(g.principal)
    where = f"configuration of source {source_id} ({src.root})"
    try:
        open_to_all = [EVERYONE] if src.kind != "local" or permission_model(config) == PUBLIC else []
        cfg_allow = clean_principals(config.get("allowed_principals", open_to_all), where=where + " allowed_principals")
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
