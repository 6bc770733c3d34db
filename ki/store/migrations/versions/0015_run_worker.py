"""The process that runs a local run: ``pipeline_runs.worker`` (``host:pid:start``).

Revision ID: 0015_run_worker
Revises: 0014_search_parts

Dead local runs (``ki.core.liveness``, ``ki.orchestration.run_sweep``): a local run records the process
running it; its heartbeat is ``updated_at`` (its counters are written about every second). A run
whose process ended on this host, or that is silent for ``KI_RUN_SILENT_MINUTES``, is failed with
the recorded cause; the next run adopts its remaining work.
"""

from alembic import op

revision = "0015_run_worker"
down_revision = "0014_search_parts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE pipeline_runs ADD COLUMN worker text")


def downgrade() -> None:
    op.execute("ALTER TABLE pipeline_runs DROP COLUMN worker")
