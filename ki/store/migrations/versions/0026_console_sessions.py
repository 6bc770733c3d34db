"""Server-side console sessions: the page's cookie holds a session id, not the API token.

Revision ID: 0026_console_sessions
Revises: 0025_cold_history

README "Console": a sign-in makes a ``console_session`` bound to the token; the cookie carries a random
session id (only its SHA-256 is stored), which expires, is revoked at sign-out and dies with its token.
"""

from alembic import op

revision = "0026_console_sessions"
down_revision = "0025_cold_history"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE console_session (
            id bigserial PRIMARY KEY,
            session_hash char(64) NOT NULL,
            token_id bigint NOT NULL REFERENCES api_token(id) ON DELETE CASCADE,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            revoked_at timestamptz,
            CONSTRAINT uq_console_session_hash UNIQUE (session_hash)
        )""")
    op.execute("CREATE INDEX ix_console_session_token ON console_session (token_id)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS console_session")
