"""A batch member re-opened after its DAG ended: ``pipeline_run_object.reopens``.

Revision ID: 0021_member_reopens
Revises: 0020_lanes

DESIGN.md "Hatchet DAG shape and pacing" (order independence on the Hatchet provider). A
later classification can re-open a finished document's relate (lane ``rerun``, ``ki.domain.relate.basis``) after that
document's DAG has ended. The next member's end then puts it back on the conveyor
(:func:`ki.store.conveyor.reopen_finished`): ``reopens`` counts those re-openings and makes the idempotency key of
the member's next DAG (``<run>:<object>:reopen<n>``) new, yet the same for a replay of the same step.
"""

from alembic import op

revision = "0021_member_reopens"
down_revision = "0020_lanes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE pipeline_run_object ADD COLUMN reopens integer NOT NULL DEFAULT 0")


def downgrade() -> None:
    op.execute("ALTER TABLE pipeline_run_object DROP COLUMN reopens")
