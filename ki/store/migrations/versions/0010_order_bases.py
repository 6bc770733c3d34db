"""What each classify and relate decision read, so a file that arrives later re-runs the decisions that would read it.

Revision ID: 0010_order_bases
Revises: 0002_usage, 0003_embedded, 0005_search, 0006_metadata, 0008_api_tokens, 0009_matter_import

Spec: insertion-pipeline.md "Classify" and "Relate" (results do not depend on
processing order). See :mod:`ki.domain.matters.basis` and :mod:`ki.domain.relate.basis`:

* ``classify_epoch``: per project, a counter bumped by every classification (under the project's
  advisory lock);
* ``classify_basis``: per source object, the epoch it classified at, whether it states a matter
  reference of its own (``has_reference``: only such a file can change another's folder, case-number
  or name evidence), the corpus queries its decision
  made (``queries``), the files they returned (``seen``) and index keys for finding the decisions a
  newly classified file answers (``folders``, ``ids``, ``needle_words``);

* ``relate_epoch``: per matter, a counter bumped by every classification into it (under the
  matter's advisory lock);
* ``relate_basis``: per source object, the matter and epoch its latest relate started at and what
  the decision reads (``wants``, :class:`ki.domain.relate.wants.Wants` as JSON).

This revision also joins the branches before it into one head.
"""

from alembic import op

revision = "0010_order_bases"
down_revision = ("0002_usage", "0003_embedded", "0005_search", "0006_metadata", "0008_api_tokens", "0009_matter_import")
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE classify_epoch (
    project_id integer PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
    epoch bigint NOT NULL DEFAULT 0
);

CREATE TABLE classify_basis (
    source_object_id bigint PRIMARY KEY REFERENCES source_object(id) ON DELETE CASCADE,
    project_id integer NOT NULL REFERENCES project(id) ON DELETE CASCADE,
    classified_epoch bigint NOT NULL,
    has_reference boolean NOT NULL DEFAULT false,
    queries jsonb NOT NULL DEFAULT '{}'::jsonb,
    seen text[] NOT NULL DEFAULT '{}'::text[],
    folders text[] NOT NULL DEFAULT '{}'::text[],
    ids text[] NOT NULL DEFAULT '{}'::text[],
    needle_words text[] NOT NULL DEFAULT '{}'::text[]
);
CREATE INDEX ix_classify_basis_epoch ON classify_basis (project_id, classified_epoch);
CREATE INDEX ix_classify_basis_folders ON classify_basis USING gin (folders);
CREATE INDEX ix_classify_basis_ids ON classify_basis USING gin (ids);
CREATE INDEX ix_classify_basis_words ON classify_basis USING gin (needle_words);

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
    op.execute("DROP TABLE relate_basis, relate_epoch, classify_basis, classify_epoch")
