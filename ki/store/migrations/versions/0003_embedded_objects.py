"""Embedded objects: mail attachments and mbox messages become source objects of their own.

Revision ID: 0003_embedded
Revises: 0001
"""

from alembic import op

revision = "0003_embedded"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
    ALTER TABLE source_object
        ADD COLUMN parent_id bigint REFERENCES source_object(id) ON DELETE CASCADE,
        ADD COLUMN embedded_index integer;
    CREATE INDEX ix_source_object_parent ON source_object (parent_id) WHERE parent_id IS NOT NULL;
    """)


def downgrade() -> None:
    op.execute("""
    DROP INDEX IF EXISTS ix_source_object_parent;
    ALTER TABLE source_object DROP COLUMN IF EXISTS embedded_index, DROP COLUMN IF EXISTS parent_id;
    """)
