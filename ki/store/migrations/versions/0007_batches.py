"""Batch membership of orchestrated runs: which documents a Hatchet batch reserved.

Revision ID: 0007_batches
Revises: 0001

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider: ``trigger_insertion`` reserves,
under a global advisory lock, every non-deleted object with a non-terminal stage row that is not
already owned by another active batch; the sweeper reads a batch's liveness from the newest
``processing_state.updated_at`` of its objects). One row per (run, object):

* ``workflow_run_id``: the Hatchet workflow run of that document's DAG (the run row keeps only the
  first of a bulk trigger);
* ``finished_at`` / ``outcome``: set by the DAG's final task (or its failure hook); a run is
  completed when no member is unfinished.

A member belongs to an *active* batch while its run is ``queued`` or ``running``; the partial
index serves the "unfinished members of run R" count the final task makes.
"""

from alembic import op

revision = "0007_batches"
down_revision = "0001"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE pipeline_run_object (
    run_id bigint NOT NULL REFERENCES pipeline_runs(id) ON DELETE CASCADE,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    workflow_run_id text,
    outcome text,
    finished_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, source_object_id)
);
CREATE INDEX ix_pipeline_run_object_object ON pipeline_run_object (source_object_id);
CREATE INDEX ix_pipeline_run_object_unfinished ON pipeline_run_object (run_id) WHERE finished_at IS NULL;
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS pipeline_run_object")
