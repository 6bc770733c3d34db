"""The open circuit breakers: which dependency is paused, since when, and the next probe.

Revision ID: 0019_dependency_pause
Revises: 0018_conveyor

Circuit breakers (:mod:`ki.adapters.breaker`): after consecutive infrastructure faults of a dependency (the model
gateway, Docling Serve, OpenSearch, a source root) the stages that need it stop claiming. A process
that opens a breaker records it here, so ``ki status``, the console's ``/api/status`` and the other
processes see it (``paused: gateway unavailable since …``); the first success deletes the row.
"""

from alembic import op

revision = "0019_dependency_pause"
down_revision = "0018_conveyor"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE dependency_pause (
    dependency text PRIMARY KEY,
    since timestamptz NOT NULL,
    reason text NOT NULL DEFAULT '',
    next_probe_at timestamptz NOT NULL,
    probes integer NOT NULL DEFAULT 0,
    paused_by text,
    updated_at timestamptz NOT NULL DEFAULT now()
);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS dependency_pause")
