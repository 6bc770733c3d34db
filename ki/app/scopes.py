"""The API's scopes and what each one grants.

DESIGN.md "The operator surface is one app" (tokens with scopes):

========================  ===================================================================
``read:pipeline``         status, configuration, runs, costs, quarantine, model catalog, audit
``write:pipeline``        configuration edits, actions (start a run), quarantine retry
``read:work_item``        the work-items API (``/v1/work-items``, read)
``write:work_item``       the work-items API (retry, cancel, ...)
``search``                permission-filtered search as the token's principal
``admin``                 token management; implies every other scope
========================  ===================================================================

A ``write:X`` scope implies ``read:X``: a token that may change something may see it.
"""

from __future__ import annotations

from collections.abc import Iterable

READ_PIPELINE = "read:pipeline"
WRITE_PIPELINE = "write:pipeline"
READ_WORK_ITEM = "read:work_item"
WRITE_WORK_ITEM = "write:work_item"
SEARCH = "search"
ADMIN = "admin"

#: Every scope, in the order listings show them.
SCOPES: tuple[str, ...] = (READ_PIPELINE, WRITE_PIPELINE, READ_WORK_ITEM, WRITE_WORK_ITEM, SEARCH, ADMIN)

_IMPLIED: dict[str, frozenset[str]] = {
    ADMIN: frozenset(SCOPES),
    WRITE_PIPELINE: frozenset({WRITE_PIPELINE, READ_PIPELINE}),
    WRITE_WORK_ITEM: frozenset({WRITE_WORK_ITEM, READ_WORK_ITEM}),
}


def effective_scopes(granted: Iterable[str]) -> frozenset[str]:
    """The scopes ``granted`` amounts to, implications included (unknown names are ignored)."""
    out: set[str] = set()
    for scope in granted:
        out |= _IMPLIED.get(scope, {scope} if scope in SCOPES else set())
    return frozenset(out)


def grants(granted: Iterable[str], needed: str) -> bool:
    """Whether a token with scopes ``granted`` may do what needs ``needed``."""
    return needed in effective_scopes(granted)


def check_scope_names(names: Iterable[str]) -> list[str]:
    """Validate scope names (order kept, duplicates dropped).

    Raises:
        ValueError: an unknown scope, naming the known ones.
    """
    out: list[str] = []
    for name in names:
        if name not in SCOPES:
            raise ValueError(f"unknown scope {name!r}; scopes are {', '.join(SCOPES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"a token needs at least one scope ({', '.join(SCOPES)})")
    return out
