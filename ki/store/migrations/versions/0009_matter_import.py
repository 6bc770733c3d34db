"""Matters imported from practice management: client, client number, dates, responsible lawyer, aliases.

Revision ID: 0009_matter_import
Revises: 0004_matters (the branch of the matter table; ki upgrades to heads)

``ki matters import``: an imported matter (``imported`` set) carries what the
practice-management system knows — ``client_name``, ``client_number``, ``opened`` / ``closed``,
``responsible`` and ``aliases`` (other spellings of the reference, found in documents like the
reference itself). The GIN index serves "which matter has this alias".
"""

from alembic import op

revision = "0009_matter_import"
down_revision = "0004_matters"
branch_labels = None
depends_on = None

DDL = """
ALTER TABLE matter
    ADD COLUMN client_name text,
    ADD COLUMN client_number text,
    ADD COLUMN opened date,
    ADD COLUMN closed date,
    ADD COLUMN responsible text,
    ADD COLUMN aliases text[] NOT NULL DEFAULT '{}'::text[];
CREATE INDEX ix_matter_aliases ON matter USING gin (aliases);
CREATE INDEX ix_matter_client_number ON matter (project_id, client_number) WHERE client_number IS NOT NULL;
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""DROP INDEX IF EXISTS ix_matter_client_number; DROP INDEX IF EXISTS ix_matter_aliases;
                  ALTER TABLE matter DROP COLUMN aliases, DROP COLUMN responsible, DROP COLUMN closed,
                  DROP COLUMN opened, DROP COLUMN client_number, DROP COLUMN client_name""")
