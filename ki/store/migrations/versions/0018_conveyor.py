"""The batch conveyor of orchestrated runs: which document DAGs a batch has released, and its DAG shape.

Revision ID: 0018_conveyor
Revises: 0017_watch

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider) with the decision "Hatchet DAG shape
and pacing" (DESIGN.md): ``KI_HATCHET_DOCUMENT_CONCURRENCY`` is enforced by the batch ledger, not by a
workflow-level concurrency key. A batch releases at most its window of members at once; each DAG's
final task (or failure hook) releases the next ones under the per-run advisory lock.

* ``pipeline_runs.workflow_name``: the document workflow the batch's DAGs run (derived from the
  enabled stages when the batch was triggered; a run in flight keeps it);
* ``pipeline_runs.document_window``: how many of its DAGs may be in flight at once (the
  ``KI_HATCHET_DOCUMENT_CONCURRENCY`` of the process that triggered it);
* ``pipeline_run_object.released_at`` / ``released_by``: when the conveyor released the member (its
  DAG is then triggered: in flight until ``finished_at``), and by which member's end (None: the
  batch's first window, or the sweeper). A member released but without a ``workflow_run_id`` is
  being triggered (or its releaser died: the releaser's replay, or the sweeper, triggers it).

The partial indexes serve the two reads every final task makes: the next unreleased members and
the count in flight (at most the window).
"""

from alembic import op

revision = "0018_conveyor"
down_revision = "0017_watch"
branch_labels = None
depends_on = None

DDL = """
ALTER TABLE pipeline_runs ADD COLUMN workflow_name text, ADD COLUMN document_window integer;
ALTER TABLE pipeline_run_object ADD COLUMN released_at timestamptz, ADD COLUMN released_by bigint;
UPDATE pipeline_run_object SET released_at = created_at WHERE workflow_run_id IS NOT NULL OR finished_at IS NOT NULL;
CREATE INDEX ix_pipeline_run_object_unreleased ON pipeline_run_object (run_id, source_object_id)
    WHERE released_at IS NULL AND finished_at IS NULL;
CREATE INDEX ix_pipeline_run_object_in_flight ON pipeline_run_object (run_id)
    WHERE released_at IS NOT NULL AND finished_at IS NULL;
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""DROP INDEX IF EXISTS ix_pipeline_run_object_in_flight;
                  DROP INDEX IF EXISTS ix_pipeline_run_object_unreleased;
                  ALTER TABLE pipeline_run_object DROP COLUMN released_by, DROP COLUMN released_at;
                  ALTER TABLE pipeline_runs DROP COLUMN document_window, DROP COLUMN workflow_name""")
