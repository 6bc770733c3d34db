"""Search: every textual part with its kind, the change log the lexical index follows, text inside ``<…>``.

Revision ID: 0014_search_parts
Revises: 0013_source_removed

Spec: insertion-pipeline.md "Index" (an index beside PostgreSQL kept in step with the record).

- ``chunk.kind``: the part a row holds (``body``, ``comment``, ``footnote``, ``deleted`` … — see
  ``ki.adapters.convert.model.PART_KINDS``; ``profile`` for a document's profile row at ordinal −1);
  ``chunk.meta``: the part's key, a comment's anchor and author, the profile row's document ``fields``.
- ``index_change`` + ``index_change_seq``: one row per object whose rows changed, ``seq`` bumped by every
  write (``ki.store.index_record``); seeded with every object that has rows, so a projection built from an empty
  watermark holds the whole record.
- ``search_epoch``: one UUID per database, made here: projections of another epoch are rebuilt.
- ``chunk.tsv`` reads ``<`` and ``>`` as spaces: PostgreSQL's parser takes ``<Datum einfügen>`` for an XML tag
  and indexes nothing inside (``<<Mandant>>``, ``a<b and c>d``).
"""

from alembic import op

revision = "0014_search_parts"
down_revision = "0013_source_removed"
branch_labels = None
depends_on = None

TSV = ("setweight(to_tsvector('simple'::regconfig, coalesce(title, '')), 'A') || "
       "to_tsvector('german'::regconfig, {text}) || to_tsvector('english'::regconfig, {text})")

DDL = f"""
ALTER TABLE chunk ADD COLUMN kind text NOT NULL DEFAULT 'body';
ALTER TABLE chunk ADD COLUMN meta jsonb;
UPDATE chunk SET kind = 'profile' WHERE ordinal = -1;
CREATE INDEX ix_chunk_content_hash ON chunk (content_hash);

DROP INDEX IF EXISTS ix_chunk_tsv;
ALTER TABLE chunk DROP COLUMN tsv;
ALTER TABLE chunk ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({TSV.format(text="translate(text, '<>', '  ')")}) STORED;
ALTER TABLE chunk ALTER COLUMN tsv SET STORAGE MAIN;
CREATE INDEX ix_chunk_tsv ON chunk USING gin (tsv);

CREATE SEQUENCE index_change_seq;
CREATE TABLE index_change (
    source_object_id bigint PRIMARY KEY,
    seq bigint NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_index_change_seq ON index_change (seq);
INSERT INTO index_change (source_object_id, seq)
SELECT source_object_id, nextval('index_change_seq') FROM (SELECT DISTINCT source_object_id FROM chunk) o;

CREATE TABLE search_epoch (
    epoch uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO search_epoch DEFAULT VALUES;
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute(f"""
    DROP TABLE IF EXISTS search_epoch;
    DROP TABLE IF EXISTS index_change;
    DROP SEQUENCE IF EXISTS index_change_seq;
    DROP INDEX IF EXISTS ix_chunk_tsv;
    ALTER TABLE chunk DROP COLUMN tsv;
    ALTER TABLE chunk ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({TSV.format(text="text")}) STORED;
    ALTER TABLE chunk ALTER COLUMN tsv SET STORAGE MAIN;
    CREATE INDEX ix_chunk_tsv ON chunk USING gin (tsv);
    DROP INDEX IF EXISTS ix_chunk_content_hash;
    ALTER TABLE chunk DROP COLUMN meta;
    ALTER TABLE chunk DROP COLUMN kind;
    """)
