"""Cold history: archive tables for finished runs, their members, attempts, audit entries and tombstoned state.

Revision ID: 0025_cold_history
Revises: 0024_depth_first_claims

Spec: work-queue.md "Indexed queue and historical work" (durable cold work history: archival keeps public ids,
provenance, usage, idempotency lookups and failed-dependency barriers; a retry restores the original item).
:mod:`ki.store.archive` moves rows here in bounded batches, each one transaction (``DELETE … RETURNING`` feeding
``INSERT``), so a killed archiver loses nothing. Each archive table is ``LIKE`` its live table (same columns in
the same order; generated columns become plain ones), so a later migration adding a column to a live table adds
it to its archive too. ``archive_bucket_counts`` holds the console buckets of the archived state rows, kept in the
same statement as each move, so the bucket counts stay exact without reading the archive.
"""

from alembic import op

revision = "0025_cold_history"
down_revision = "0024_depth_first_claims"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE pipeline_runs_archive (LIKE pipeline_runs);
ALTER TABLE pipeline_runs_archive ADD PRIMARY KEY (id);
CREATE TABLE pipeline_run_object_archive (LIKE pipeline_run_object);
ALTER TABLE pipeline_run_object_archive ADD PRIMARY KEY (run_id, source_object_id);
CREATE INDEX ix_pipeline_run_object_archive_object ON pipeline_run_object_archive (source_object_id);
CREATE TABLE work_item_attempt_archive (LIKE work_item_attempt);
ALTER TABLE work_item_attempt_archive ADD PRIMARY KEY (id);
CREATE INDEX ix_work_item_attempt_archive_row ON work_item_attempt_archive (processing_state_id, id);
CREATE TABLE audit_log_archive (LIKE audit_log);
ALTER TABLE audit_log_archive ADD PRIMARY KEY (id);
CREATE TABLE processing_state_archive (LIKE processing_state);
ALTER TABLE processing_state_archive ADD PRIMARY KEY (id);
CREATE UNIQUE INDEX uq_processing_state_archive_work_item ON processing_state_archive (work_item_id);
CREATE INDEX ix_processing_state_archive_object ON processing_state_archive (source_object_id);
CREATE TABLE archive_bucket_counts (
    stage text NOT NULL, bucket text NOT NULL, n bigint NOT NULL DEFAULT 0, PRIMARY KEY (stage, bucket)
);
CREATE TABLE archive_log (
    id bigserial PRIMARY KEY, started_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz,
    older_than_days integer NOT NULL, moved jsonb NOT NULL DEFAULT '{}'::jsonb, trigger text NOT NULL
);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE archive_log, archive_bucket_counts, processing_state_archive, audit_log_archive, "
               "work_item_attempt_archive, pipeline_run_object_archive, pipeline_runs_archive")
