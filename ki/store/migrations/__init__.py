"""Alembic migrations of ki's schema (explicit DDL, one file per revision).

Independent features may add migrations on separate branches from a common
parent; ki upgrades to ``heads``. :func:`head_revisions` reads the revision ids
from the version files without importing Alembic, so a process whose database is
current skips Alembic entirely (``tests/integration/test_migrations.py`` checks it
agrees with Alembic's own view).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

VERSIONS_DIR = Path(__file__).parent / "versions"
_REVISION = re.compile(r'^revision\s*=\s*["\']([^"\']+)["\']', re.M)
_DOWN = re.compile(r"^down_revision\s*=\s*(.+)$", re.M)
_ID = re.compile(r'["\']([^"\']+)["\']')


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    """The revision ids that no other revision names as its parent."""
    revisions, parents = _revisions_and_parents()
    return frozenset(revisions - parents)


def known_revisions() -> frozenset[str]:
    """Every revision id this code has a migration for (a database at another one was migrated by a
    newer ki)."""
    return frozenset(_revisions_and_parents()[0])


@lru_cache(maxsize=1)
def _revisions_and_parents() -> tuple[frozenset[str], frozenset[str]]:
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in VERSIONS_DIR.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        rev = _REVISION.search(source)
        if not rev:
            continue
        revisions.add(rev.group(1))
        down = _DOWN.search(source)
        if down:
            parents.update(_ID.findall(down.group(1)))
    return frozenset(revisions), frozenset(parents)
