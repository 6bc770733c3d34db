"""Usage ledger: one row per model-gateway call (tokens, latency, cost).

Revision ID: 0002_usage
Revises: 0001

Spec: insertion-pipeline.md "The console page" (GET /api/costs: realized spend per
stage from the usage ledger). ``source_object_id`` carries no foreign key on
purpose: spend stays on the books when a document is deleted.
"""

from alembic import op

revision = "0002_usage"
down_revision = "0001"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE model_usage (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    stage text NOT NULL,
    model text NOT NULL,
    source_object_id bigint,
    trace_id text,
    prompt_tokens integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    total_tokens integer NOT NULL DEFAULT 0,
    cost_usd numeric(18, 8),
    latency_ms integer
);
CREATE INDEX ix_model_usage_stage_at ON model_usage (stage, at);
CREATE INDEX ix_model_usage_source_object ON model_usage (source_object_id);
CREATE INDEX ix_model_usage_trace ON model_usage (trace_id);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS model_usage")
