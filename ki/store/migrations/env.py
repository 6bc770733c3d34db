"""Alembic environment: runs ki's migrations on the connection ki hands over."""

from __future__ import annotations

from alembic import context

import ki.store.models_usage  # noqa: F401
from ki.store.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=target_metadata, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
