"""A change of an API token is announced: ``NOTIFY ki_api_token`` from the changing transaction.

Revision ID: 0032_token_change_notices
Revises: 0031_flat_metadata_cost

``ki serve`` keeps the tokens it authenticated in memory (:mod:`ki.app.token_cache`) and forgets them all when a
token changes, whichever process changes it (``ki token revoke``, the API, an operator's SQL). The trigger is
statement-level and fires on every change of a column authentication reads (not on ``last_used_at``, which every
authentication refreshes once a minute); PostgreSQL delivers the notice when the transaction commits, and only
then.
"""

from alembic import op

revision = "0032_token_change_notices"
down_revision = "0031_flat_metadata_cost"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE FUNCTION ki_api_token_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('ki_api_token', TG_OP);
            RETURN NULL;
        END $$""")
    op.execute("""
        CREATE TRIGGER api_token_changed
        AFTER UPDATE OF id, name, token_hash, prefix, scopes, principal, created_by, created_at, revoked_at
              OR DELETE OR TRUNCATE ON api_token
        FOR EACH STATEMENT EXECUTE FUNCTION ki_api_token_changed()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS api_token_changed ON api_token")
    op.execute("DROP FUNCTION IF EXISTS ki_api_token_changed()")
