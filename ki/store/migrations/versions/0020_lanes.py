"""Claim lanes: every ``processing_state`` row records why it is owed.

Revision ID: 0020_lanes
Revises: 0019_dependency_pause

DESIGN.md "Lanes"; spec work-queue.md "Lease-Based Claiming" (1. Poll: runnable items by priority
within claim lanes; bounded capacity reserved for extraction before the general queue).

* ``processing_state.lane``: ``live`` (a watcher/sync change), ``retry`` (an operator's retry),
  ``rerun`` (version bump, rerun token, ontology, re-enabled stage or released capability), ``backfill``
  (a document's first insertion). Rows that existed before this revision are ``backfill``.
* ``ix_processing_state_lane``: the claimable rows of one lane, oldest first (the claim probes one lane
  at a time, in the order the lane schedule gives).
* ``ix_processing_state_lane_model``: the same for the model stages alone (the workers reserved for
  the model stages probe it first).
"""

from alembic import op

revision = "0020_lanes"
down_revision = "0019_dependency_pause"
branch_labels = None
depends_on = None

DDL = """
ALTER TABLE processing_state ADD COLUMN lane text NOT NULL DEFAULT 'backfill'
    CONSTRAINT ck_processing_state_lane CHECK (lane IN ('live', 'retry', 'rerun', 'backfill'));
CREATE INDEX ix_processing_state_lane ON processing_state (lane, updated_at)
    WHERE status IN ('pending', 'failed');
CREATE INDEX ix_processing_state_lane_model ON processing_state (lane, updated_at)
    WHERE status IN ('pending', 'failed')
      AND stage IN ('classify_matter', 'relate', 'extract_metadata', 'extract_decisions');
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""DROP INDEX IF EXISTS ix_processing_state_lane_model;
                  DROP INDEX IF EXISTS ix_processing_state_lane;
                  ALTER TABLE processing_state DROP COLUMN lane""")
