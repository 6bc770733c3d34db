"""Removed sources: ``ki source remove`` keeps the source's rows (history) and marks it removed.

Revision ID: 0013_source_removed
Revises: 0012_work_items

``ki source remove PATH|ID``: every document of the source is tombstoned, the source row
stays with ``removed_at`` set (not listed, not scanned); registering its folder again clears it.
"""

from alembic import op

revision = "0013_source_removed"
down_revision = "0012_work_items"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE source ADD COLUMN removed_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE source DROP COLUMN removed_at")
