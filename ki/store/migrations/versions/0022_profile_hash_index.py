"""The identical-copies lookup reads profile rows only: ``ix_chunk_content_hash`` becomes partial.

Revision ID: 0022_profile_hash_index
Revises: 0021_member_reopens

Search's "also at" for identical copies, within its p95 target. The search's "also at" query
(:data:`ki.store.index_record._ALSO_AT`) looks up the profile row (ordinal −1) of each hit's content; an index on
every
row's ``content_hash`` made it read every passage of every copy from the table to find the one profile row (a
100-page document: hundreds of rows per hit, most of them not in memory). The partial index holds one entry per
indexed object and is the only reader of ``content_hash`` on ``chunk``.
"""

from alembic import op

revision = "0022_profile_hash_index"
down_revision = "0021_member_reopens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_chunk_content_hash")
    op.execute("CREATE INDEX ix_chunk_profile_content_hash ON chunk (content_hash) WHERE ordinal = -1")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_chunk_profile_content_hash")
    op.execute("CREATE INDEX ix_chunk_content_hash ON chunk (content_hash)")
