"""``source_object.missing_since``: when a scan first found a live file missing from its share.

Revision ID: 0027_missing_since
Revises: 0026_console_sessions

A file missing from a listing stays searchable until ``pipeline.deletion_confirmations`` scans agree (an
unmounted share must not delete anything); meanwhile every search hit of it says "missing from the share
since …" (ki.adapters.search.search). The column is set with the first missing scan and cleared whenever the file is
listed again (``missing_scans`` back to 0) or restored.
"""

from alembic import op

revision = "0027_missing_since"
down_revision = "0026_console_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE source_object ADD COLUMN missing_since timestamptz")
    op.execute("UPDATE source_object SET missing_since = updated_at WHERE missing_scans > 0 AND deleted_at IS NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE source_object DROP COLUMN missing_since")
