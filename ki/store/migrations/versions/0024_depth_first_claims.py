"""Depth-first claims: the claimable rows indexed by lane, stage and age.

Revision ID: 0024_depth_first_claims
Revises: 0023_run_cancel

docs/design-decisions.md "Depth-first claim order": within a lane the claim takes the eligible row of
the latest stage first, oldest first within that stage, probing one (lane, stage) pair at a time
(:data:`ki.store.claims.CLAIM_IN_LANES_SQL`). ``ix_processing_state_lane_stage`` is that probe's index:
one descent per pair, no row of another lane or stage walked. It replaces ``ix_processing_state_lane``
(lane, updated_at) and ``ix_processing_state_lane_model`` (the same for the model stages), which no
statement reads any more (the conveyor's ``lane = 'rerun'`` read takes the new index's first column).
"""

from alembic import op

revision = "0024_depth_first_claims"
down_revision = "0023_run_cancel"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""CREATE INDEX ix_processing_state_lane_stage ON processing_state (lane, stage, updated_at)
                      WHERE status IN ('pending', 'failed');
                  DROP INDEX IF EXISTS ix_processing_state_lane_model;
                  DROP INDEX IF EXISTS ix_processing_state_lane""")


def downgrade() -> None:
    op.execute("""CREATE INDEX ix_processing_state_lane ON processing_state (lane, updated_at)
                      WHERE status IN ('pending', 'failed');
                  CREATE INDEX ix_processing_state_lane_model ON processing_state (lane, updated_at)
                      WHERE status IN ('pending', 'failed')
                        AND stage IN ('classify_matter', 'relate', 'extract_metadata', 'extract_decisions');
                  DROP INDEX IF EXISTS ix_processing_state_lane_stage""")
