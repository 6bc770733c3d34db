"""Engine back-pressure on a Hatchet batch: acknowledged triggers and the batch's shrinking window.

Revision ID: 0028_trigger_pushback
Revises: 0027_missing_since

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider; the sweeper) and docs/design-decisions.md
"Triggers the engine refuses". A member counts as released once the engine acknowledged its workflow run; a
refused trigger is retried and halves the batch's window (AIMD), each acknowledgement regrows it by one.

* ``pipeline_runs.window_limit``: the configured window (``KI_HATCHET_DOCUMENT_CONCURRENCY`` when triggered),
  the ceiling ``document_window`` regrows to; ``window_min``: the smallest window the batch fell to;
* ``pipeline_runs.trigger_refusals`` / ``last_refusal_at`` / ``last_refusal``: how often the engine refused
  (or failed to answer) a trigger of this run, when last and why;
* ``pipeline_run_object.acknowledged_at``: when the engine acknowledged the member's recorded workflow run;
  ``verified_at``: when the engine confirmed it knows that run (the sweeper's early check).
"""

from alembic import op

revision = "0028_trigger_pushback"
down_revision = "0027_missing_since"
branch_labels = None
depends_on = None


RUN_COLUMNS = """ADD COLUMN window_limit integer, ADD COLUMN window_min integer,
    ADD COLUMN trigger_refusals integer NOT NULL DEFAULT 0, ADD COLUMN last_refusal_at timestamptz,
    ADD COLUMN last_refusal text"""
MEMBER_COLUMNS = "ADD COLUMN acknowledged_at timestamptz, ADD COLUMN verified_at timestamptz"
DROP_RUN = """DROP COLUMN last_refusal, DROP COLUMN last_refusal_at, DROP COLUMN trigger_refusals,
    DROP COLUMN window_min, DROP COLUMN window_limit"""
DROP_MEMBER = "DROP COLUMN verified_at, DROP COLUMN acknowledged_at"


def upgrade() -> None:
    # the archive tables (0025_cold_history) keep their live table's columns in the same order
    op.execute(f"""
ALTER TABLE pipeline_runs {RUN_COLUMNS};
ALTER TABLE pipeline_runs_archive {RUN_COLUMNS};
ALTER TABLE pipeline_runs_archive ALTER COLUMN trigger_refusals DROP DEFAULT;
ALTER TABLE pipeline_run_object {MEMBER_COLUMNS};
ALTER TABLE pipeline_run_object_archive {MEMBER_COLUMNS};
UPDATE pipeline_run_object SET acknowledged_at = released_at WHERE workflow_run_id IS NOT NULL;
""")


def downgrade() -> None:
    op.execute(f"""
ALTER TABLE pipeline_run_object_archive {DROP_MEMBER};
ALTER TABLE pipeline_run_object {DROP_MEMBER};
ALTER TABLE pipeline_runs_archive {DROP_RUN};
ALTER TABLE pipeline_runs {DROP_RUN};
""")
