"""Work items: a stable uuid per processing_state row and the append-only attempt history.

Revision ID: 0012_work_items
Revises: 0011_source_names

DESIGN.md "Work items" (``work_item:<uuid>``, every attempt kept, a retry never erases a
failure). See :mod:`ki.store.attempts` (the writes, in the same statement as each outcome) and
:mod:`ki.store.work_items` (the reads and actions):

* ``processing_state.work_item_id``: the row's public uuid (``work_item:<uuid>``), never changed;
* ``work_item_attempt``: one row per finished attempt of a (document, stage) — started (the claim),
  finished, worker, run, outcome (``done``, ``skipped``, ``failed``, ``quarantined``, ``stale``),
  error class, reason, message (<= 2,000 chars), infrastructure reason, error signature, duration,
  producer_version — and one per operator action (``retried``, ``cancelled``, with the actor).
  Rows are never updated (a trigger refuses it); they go only with their processing_state row. No
  foreign key: its check would be one more lookup on the claim path, and the trigger
  ``work_item_attempt_gone`` deletes the history with the row instead.
* ``ix_processing_state_signature``: the groups read ``(stage, last_error->>'signature')`` of the
  failed and quarantined rows only.
"""

from alembic import op

revision = "0012_work_items"
down_revision = "0011_source_names"
branch_labels = None
depends_on = None

DDL = """
ALTER TABLE processing_state ADD COLUMN work_item_id uuid NOT NULL DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX uq_processing_state_work_item ON processing_state (work_item_id);
CREATE INDEX ix_processing_state_signature ON processing_state (stage, (last_error->>'signature'))
    WHERE status IN ('failed', 'quarantined');

CREATE TABLE work_item_attempt (
    id bigserial PRIMARY KEY,
    processing_state_id bigint NOT NULL,
    source_object_id bigint NOT NULL,
    stage text NOT NULL,
    attempt integer NOT NULL,
    outcome text NOT NULL,
    started_at timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    worker text,
    run_id bigint,
    actor text,
    error_class text,
    reason text,
    message text,
    infrastructure text,
    signature text,
    duration_seconds double precision,
    producer_version text
);
CREATE INDEX ix_work_item_attempt_row ON work_item_attempt (processing_state_id, id);
CREATE INDEX ix_work_item_attempt_signature ON work_item_attempt (stage, signature, finished_at)
    WHERE signature IS NOT NULL;

CREATE FUNCTION work_item_attempt_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'work_item_attempt is append-only';
END $$;
CREATE TRIGGER work_item_attempt_no_update BEFORE UPDATE ON work_item_attempt
    FOR EACH ROW EXECUTE FUNCTION work_item_attempt_append_only();

CREATE FUNCTION work_item_attempt_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM work_item_attempt WHERE processing_state_id = OLD.id;
    RETURN OLD;
END $$;
CREATE TRIGGER processing_state_history_gone AFTER DELETE ON processing_state
    FOR EACH ROW EXECUTE FUNCTION work_item_attempt_gone();
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""
        DROP TRIGGER IF EXISTS processing_state_history_gone ON processing_state;
        DROP FUNCTION IF EXISTS work_item_attempt_gone();
        DROP TABLE IF EXISTS work_item_attempt;
        DROP FUNCTION IF EXISTS work_item_attempt_append_only();
        DROP INDEX IF EXISTS ix_processing_state_signature;
        DROP INDEX IF EXISTS uq_processing_state_work_item;
        ALTER TABLE processing_state DROP COLUMN IF EXISTS work_item_id;
    """)
