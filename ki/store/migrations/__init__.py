"""Alembic migrations of ki's schema (explicit DDL, one file per revision).

``HEAD_REVISION`` lets a process skip Alembic entirely when the database is
current; ``tests/integration/test_migrations.py`` checks it equals Alembic's head.
"""

HEAD_REVISION = "0001"
