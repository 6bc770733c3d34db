"""pgvector on ki's pooled psycopg connections.

Spec: insertion-pipeline.md "Index" (each chunk's vector in PostgreSQL: ``chunk.embedding``, the embedding
cache). Used by every module that sends or reads vectors (:mod:`ki.adapters.search.postgres`,
:mod:`ki.adapters.search.embedding_cache`, :mod:`ki.adapters.search.opensearch_index`).
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy.engine import Connection

_registered: weakref.WeakSet[Any] = weakref.WeakSet()


def register_vector(conn: Connection) -> None:
    """Teach this pooled psycopg connection the ``vector`` type (numpy arrays sent in binary); once per
    DBAPI connection."""
    raw = conn.connection.driver_connection
    if raw in _registered:
        return
    from pgvector.psycopg import register_vector as _register

    _register(raw)
    _registered.add(raw)
