"""The imported matters of a project as the reference rules read them (:class:`KnownReferences`), cached.

Spec: insertion-pipeline.md "Classify (classify_matter)" (an imported matter list is the strongest evidence).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from ki.domain.matters.references import KnownReferences
from ki.store.matters import imported_matters, imported_matters_version

_KNOWN_CACHE: dict[tuple, KnownReferences] = {}


def known_references(conn: Connection, project_id: int) -> KnownReferences:
    """The imported matters of the project as :class:`~ki.domain.matters.references.KnownReferences` (cached per
    project until an import changes them: the key holds their count and latest ``updated_at``)."""
    count, latest = imported_matters_version(conn, project_id)
    key = (id(conn.engine), project_id, count, latest)
    cached = _KNOWN_CACHE.get(key)
    if cached is not None:
        return cached
    known = KnownReferences()
    for reference, aliases, client_number, client_name in imported_matters(conn, project_id):
        known.add(reference, aliases, client_number, client_name)
    _KNOWN_CACHE.clear()
    _KNOWN_CACHE[key] = known
    return known
