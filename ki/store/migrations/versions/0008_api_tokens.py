"""API tokens of ``ki serve`` (``ki token create|list|revoke``).

Revision ID: 0008_api_tokens
Revises: 0007_batches

DESIGN.md "The operator surface is one app": every request but ``/healthz`` needs a bearer token
made by ``ki token create``, stored hashed. One row per token:

* ``token_hash``: SHA-256 (hex) of the whole token; the token itself is shown once and never stored;
* ``prefix``: its first characters, so a listing can tell tokens apart without revealing them;
* ``scopes``: ``read:pipeline``, ``write:pipeline``, ``read:work_item``, ``write:work_item``,
  ``search``, ``admin``; ``principal``: the principal a token searches as (permission filtering);
* ``revoked_at``: set by ``ki token revoke`` (rows are kept: the audit log names them).

A name is unique among live (unrevoked) tokens: it is the actor the audit log records.
"""

from alembic import op

revision = "0008_api_tokens"
down_revision = "0007_batches"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE api_token (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    token_hash char(64) NOT NULL,
    prefix text NOT NULL,
    scopes text[] NOT NULL,
    principal text,
    created_by text NOT NULL DEFAULT 'cli',
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at timestamptz,
    CONSTRAINT uq_api_token_hash UNIQUE (token_hash)
);
CREATE UNIQUE INDEX uq_api_token_live_name ON api_token (name) WHERE revoked_at IS NULL;
CREATE INDEX ix_audit_log_at ON audit_log (at DESC);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_audit_log_at")
    op.execute("DROP TABLE IF EXISTS api_token")
