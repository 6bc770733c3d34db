"""The migrated schema and the SQLAlchemy models agree; the fast-path head list is Alembic's."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from ki.store.db import MIGRATIONS_DIR, schema_is_current
from ki.store.migrations import head_revisions
from ki.store.models import Base


def test_head_revisions_match_alembic():
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    assert set(ScriptDirectory.from_config(cfg).get_heads()) == set(head_revisions())


def test_models_match_migrated_schema(db_url):
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            assert schema_is_current(conn)
            assert conn.execute(text("SELECT name FROM project")).scalars().all() == ["default"]
    finally:
        engine.dispose()
    # Server defaults and computed expressions are compared loosely by Alembic; table, column,
    # nullability, index and constraint differences must be none.
    assert diffs == [], diffs
