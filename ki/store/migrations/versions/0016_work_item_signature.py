"""The failure signature as a stored column of processing_state, indexed for the failure groups.

Revision ID: 0016_work_item_signature
Revises: 0015_run_worker

spec/work-queue.md "Inspect and retry failed work" (``GET /v1/work-items/groups``, the ``signature`` filter):
``signature`` is generated from
``last_error->>'signature'`` (as ``reason`` is from ``last_error->>'reason'``), so grouping and
filtering the failing rows reads the row, never the error object with its traceback. The index holds
what the groups count (``id``, ``source_object_id``, ``updated_at``) and replaces 0012's expression index.
``ix_source_object_path_prefix`` serves the ``path_prefix`` filter (``LIKE 'prefix%'``).
"""

from alembic import op

revision = "0016_work_item_signature"
down_revision = "0015_run_worker"
branch_labels = None
depends_on = None

DDL = """
DROP INDEX IF EXISTS ix_processing_state_signature;
ALTER TABLE processing_state ADD COLUMN signature text GENERATED ALWAYS AS (last_error->>'signature') STORED;
CREATE INDEX ix_processing_state_signature ON processing_state (stage, signature, id)
    INCLUDE (source_object_id, updated_at) WHERE status IN ('failed', 'quarantined');
CREATE INDEX ix_source_object_path_prefix ON source_object (path text_pattern_ops);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""
        DROP INDEX IF EXISTS ix_source_object_path_prefix;
        DROP INDEX IF EXISTS ix_processing_state_signature;
        ALTER TABLE processing_state DROP COLUMN IF EXISTS signature;
        CREATE INDEX ix_processing_state_signature ON processing_state (stage, (last_error->>'signature'))
            WHERE status IN ('failed', 'quarantined');
    """)
