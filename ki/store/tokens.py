"""Every statement on ``api_token``, named, in one place.

DESIGN.md "The operator surface is one app" (tokens made by ``ki token create``, stored hashed).
Each function runs one statement on a connection the caller owns; hashing and scope rules live in
:mod:`ki.app.tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection

_COLUMNS = "id, name, prefix, scopes, principal, created_by, created_at, last_used_at, revoked_at"


@dataclass(frozen=True)
class TokenRow:
    """One ``api_token`` row without its hash (see :class:`ki.store.models_api.ApiToken`)."""

    id: int
    name: str
    prefix: str
    scopes: tuple[str, ...]
    principal: str | None
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row) -> TokenRow:
        return cls(int(row.id), row.name, row.prefix, tuple(row.scopes), row.principal, row.created_by,
                   row.created_at, row.last_used_at, row.revoked_at)


# -- name: insert_token --
INSERT_SQL = text(f"""
INSERT INTO api_token (name, token_hash, prefix, scopes, principal, created_by)
VALUES (:name, :hash, :prefix, :scopes, :principal, :created_by)
RETURNING {_COLUMNS}
""")


def insert_token(conn: Connection, *, name: str, token_hash: str, prefix: str, scopes: list[str],
                 principal: str | None, created_by: str) -> TokenRow:
    """Insert a token row; raises ``sqlalchemy.exc.IntegrityError`` when a live token has ``name``."""
    row = conn.execute(INSERT_SQL, {"name": name, "hash": token_hash, "prefix": prefix, "scopes": scopes,
                                    "principal": principal, "created_by": created_by}).one()
    return TokenRow.from_row(row)


# -- name: live_name_taken --
def live_name_taken(conn: Connection, name: str) -> bool:
    """Whether a live (unrevoked) token already carries ``name``."""
    return conn.execute(text("SELECT 1 FROM api_token WHERE name = :n AND revoked_at IS NULL"),
                        {"n": name}).first() is not None


# -- name: list_tokens --
def list_tokens(conn: Connection, *, include_revoked: bool = True) -> list[TokenRow]:
    """Every token, newest first (revoked ones too unless ``include_revoked`` is False)."""
    where = "" if include_revoked else "WHERE revoked_at IS NULL"
    rows = conn.execute(text(f"SELECT {_COLUMNS} FROM api_token {where} ORDER BY id DESC")).fetchall()
    return [TokenRow.from_row(r) for r in rows]


# -- name: revoke_token --
REVOKE_SQL = text(f"""
UPDATE api_token SET revoked_at = now() WHERE id = :id AND revoked_at IS NULL RETURNING {_COLUMNS}
""")


def revoke_token(conn: Connection, token_id: int) -> TokenRow | None:
    """Revoke a live token; returns it, or None when no live token has ``token_id``."""
    row = conn.execute(REVOKE_SQL, {"id": token_id}).first()
    return TokenRow.from_row(row) if row is not None else None


def get_token(conn: Connection, token_id: int) -> TokenRow | None:
    """The token with ``token_id`` (live or revoked), or None."""
    row = conn.execute(text(f"SELECT {_COLUMNS} FROM api_token WHERE id = :id"), {"id": token_id}).first()
    return TokenRow.from_row(row) if row is not None else None


# -- name: authenticate --
# One statement per request: find the live token by hash and refresh last_used_at at most once a
# minute (a page polling every 5 s must not write a row every time).
#: The CTE noting a ``hit`` token's use (at most once a minute); the console session lookup shares it.
TOUCH_HIT = """touch AS (UPDATE api_token t SET last_used_at = now() FROM hit
          WHERE t.id = hit.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '60 seconds'))"""
AUTHENTICATE_SQL = text(f"""
WITH hit AS (SELECT {_COLUMNS} FROM api_token WHERE token_hash = :hash AND revoked_at IS NULL),
{TOUCH_HIT}
SELECT * FROM hit
""")


def find_live_token(conn: Connection, token_hash: str) -> TokenRow | None:
    """The live token whose hash is ``token_hash`` (and note its use), or None."""
    row = conn.execute(AUTHENTICATE_SQL, {"hash": token_hash}).first()
    return TokenRow.from_row(row) if row is not None else None
