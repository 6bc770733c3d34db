"""A run can be cancelled: ``pipeline_runs.cancel_requested_at`` / ``cancelled_by``.

Revision ID: 0023_run_cancel
Revises: 0022_profile_hash_index

``ki run cancel`` and ``POST /api/runs/{id}/cancel`` (:mod:`ki.store.cancel`) record the request on the run row;
the process executing the run (the local runner, or the Hatchet conveyor and tasks) reads it, stops claiming for
that run and ends it ``cancelled``. The row keeps who asked and when.
"""

from alembic import op

revision = "0023_run_cancel"
down_revision = "0022_profile_hash_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE pipeline_runs ADD COLUMN cancel_requested_at timestamptz")
    op.execute("ALTER TABLE pipeline_runs ADD COLUMN cancelled_by text")


def downgrade() -> None:
    op.execute("ALTER TABLE pipeline_runs DROP COLUMN cancelled_by")
    op.execute("ALTER TABLE pipeline_runs DROP COLUMN cancel_requested_at")
