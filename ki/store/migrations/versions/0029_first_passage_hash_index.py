"""The identical-copies lookup reads each object's first passage: the profile row is no longer on every object.

Revision ID: 0029_first_passage_hash_index
Revises: 0028_trigger_pushback

Spec: insertion-pipeline.md "Index" (the profile row at ordinal −1 belongs to the latest final version only).
The search's "also at" query (:data:`ki.store.index_record._ALSO_AT`) found an object's identical copies through
their
profile rows; a draft's copies have none now, so it reads ordinal 0 — every object with text has a first passage —
through a partial index of one entry per indexed object, as ``ix_chunk_profile_content_hash`` was.
"""

from alembic import op

revision = "0029_first_passage_hash_index"
down_revision = "0028_trigger_pushback"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_chunk_profile_content_hash")
    op.execute("CREATE INDEX ix_chunk_first_content_hash ON chunk (content_hash) WHERE ordinal = 0")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_chunk_first_content_hash")
    op.execute("CREATE INDEX ix_chunk_profile_content_hash ON chunk (content_hash) WHERE ordinal = -1")
