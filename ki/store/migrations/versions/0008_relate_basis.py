"""What each relate decision read, so a file that classifies later re-relates the files that would read it.

Revision ID: 0008_relate_basis
Revises: 0002_usage, 0003_embedded, 0004_matters, 0005_search, 0006_metadata, 0007_batches

Spec: insertion-pipeline.md "Relate"; issue 14 item 1 (results do not depend on processing order).
See :mod:`ki.relate.basis`:

* ``relate_epoch``: per matter, a counter bumped by every classification into it (under the
  matter's advisory lock);
* ``relate_basis``: per source object, the matter and epoch its latest relate started at and what
  the decision reads (``wants``, :class:`ki.relate.wants.Wants` as JSON).

This revision also joins the branches before it into one head.
"""

from alembic import op

revision = "0008_relate_basis"
down_revision = ("0002_usage", "0003_embedded", "0004_matters", "0005_search", "0006_metadata", "0007_batches")
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE relate_epoch (
    matter_id bigint PRIMARY KEY REFERENCES matter(id) ON DELETE CASCADE,
    epoch bigint NOT NULL DEFAULT 0
);

CREATE TABLE relate_basis (
    source_object_id bigint PRIMARY KEY REFERENCES source_object(id) ON DELETE CASCADE,
    matter_id bigint NOT NULL REFERENCES matter(id) ON DELETE CASCADE,
    epoch bigint NOT NULL,
    wants jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_relate_basis_matter ON relate_basis (matter_id, epoch);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("DROP TABLE relate_basis; DROP TABLE relate_epoch;")
