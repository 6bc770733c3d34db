"""Which source objects a caller with a principal may see by name: operator lists filtered like search.

DESIGN.md "Duplicates and permissions" and README "Permissions": a token made with a principal (the
assistant of ``ki token create --principal``) searches as that principal; the same principal now limits
what it sees by name anywhere else — work items, failure groups' sample paths and messages, quarantine
rows and details, bulk-action samples. An object is visible when its current projection
(:func:`ki.domain.access.load.load_source_access`: project, source, connector ACL and document grants) is
visible to the principal; an object whose grants cannot be read is hidden (fail closed). Counts of
hidden objects may be shown, never their names. A token without a principal is an operator token and
sees everything (``ki token create`` says so).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from sqlalchemy.engine import Engine

from ki.core.errors import AclReadError
from ki.domain.access.load import load_source_access
from ki.store.sources import object_sources

T = TypeVar("T")


def visible_objects(engine: Engine, principal: str | None, object_ids: Iterable[int]) -> set[int]:
    """The ids among ``object_ids`` that ``principal`` may see (all of them for None: an operator).

    One grants load per source involved; objects that no longer exist are not visible."""
    ids = sorted(set(object_ids))
    if principal is None:
        return set(ids)
    out: set[int] = set()
    with engine.connect() as conn:
        by_source: dict[int, list[int]] = defaultdict(list)
        for oid, sid in object_sources(conn, ids).items():
            by_source[sid].append(oid)
        for sid, oids in by_source.items():
            try:
                access = load_source_access(conn, sid, oids)
            except AclReadError:
                continue
            for oid in oids:
                try:
                    if access.projection(oid).visible_to([principal]):
                        out.add(oid)
                except (AclReadError, KeyError):
                    continue
    return out


def split_visible(engine: Engine, principal: str | None, rows: Sequence[T], object_id: Callable[[T], int]
                  ) -> tuple[list[T], int]:
    """(the rows ``principal`` may see, in order; how many were hidden)."""
    if principal is None:
        return list(rows), 0
    seen = visible_objects(engine, principal, (object_id(r) for r in rows))
    kept = [r for r in rows if object_id(r) in seen]
    return kept, len(rows) - len(kept)
