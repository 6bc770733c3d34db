"""The sync hand-off's insertion run, and the folder watcher's health per source.

Revision ID: 0017_watch
Revises: 0016_work_item_signature

Spec: insertion-pipeline.md "Orchestration" (a sync run hands off to an insertion run;
the sync run records the insertion run's id, null when it handed off nothing) and the
watcher health (per source: mode, last event, last full scan, files seen / queued / ignored with
reasons, paused and why), written by ``ki watch`` and read by ``ki status`` and the console.
"""

from alembic import op

revision = "0017_watch"
down_revision = "0016_work_item_signature"
branch_labels = None
depends_on = None

DDL = """
ALTER TABLE pipeline_runs ADD COLUMN insertion_run_id bigint REFERENCES pipeline_runs(id) ON DELETE SET NULL;

CREATE TABLE source_watch (
    source_id integer PRIMARY KEY REFERENCES source(id) ON DELETE CASCADE,
    mode text NOT NULL,
    state text NOT NULL,
    paused_reason text,
    watcher text,
    last_event_at timestamptz,
    last_full_scan_at timestamptz,
    files_seen bigint NOT NULL DEFAULT 0,
    files_queued bigint NOT NULL DEFAULT 0,
    files_ignored bigint NOT NULL DEFAULT 0,
    ignored_reasons jsonb NOT NULL DEFAULT '{}'::jsonb,
    restarts integer NOT NULL DEFAULT 0,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE source_watch; ALTER TABLE pipeline_runs DROP COLUMN insertion_run_id;")
