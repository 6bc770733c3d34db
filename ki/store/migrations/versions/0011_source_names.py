"""File names that are not valid UTF-8: the raw bytes beside the display form.

Revision ID: 0011_source_names
Revises: 0010_order_bases

Lossless names (``ki.adapters.sources.names``): ``source_object.external_id`` holds the display form (each
undecodable byte written ``\\xNN``), ``external_id_raw`` the exact bytes of the relative path for
names that are not valid UTF-8 (NULL otherwise), from which the file is opened.
"""

from alembic import op

revision = "0011_source_names"
down_revision = "0010_order_bases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE source_object ADD COLUMN external_id_raw bytea")


def downgrade() -> None:
    op.execute("ALTER TABLE source_object DROP COLUMN external_id_raw")
