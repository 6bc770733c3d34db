"""Search: pgvector, chunk vectors, the index's embedder record, the embedding cache, access grants.

Revision ID: 0005_search
Revises: 0001

Spec: insertion-pipeline.md "Index" (embeddings with retrieval.embedding_model; the model name
and dimension recorded on the index; permission projection compiled from source, project and
document grants) and DESIGN.md "Duplicates and permissions" (identical bytes embedded once per
blob, every source object keeps its own permissions).

- ``chunk.embedding``: an untyped ``vector`` (the dimension is per index, recorded in
  ``index_meta``); the HNSW index ``ix_chunk_embedding_hnsw`` on ``(embedding::halfvec(d))``
  with ``halfvec_cosine_ops`` is created by :mod:`ki.adapters.search.postgres` when the first vectors are
  written, because only then is ``d`` known.
- ``index_meta``: one row per search index (``default``): embedder name and dimension.
- ``embedding_cache``: vectors by (embedder, content hash, ordinal, ``input_sha256`` = SHA-256 of the
  exact text embedded, context header included). Chunk inputs depend on the bytes only, so every
  copy of a blob reuses them; a profile row naming another matter is a different input.
- ``access_grant``: project-, source- and document-level grants (allow / deny a principal);
  exactly one scope column is set.
"""

from alembic import op

revision = "0005_search"
down_revision = "0001"
branch_labels = None
depends_on = None

DDL = """
CREATE EXTENSION IF NOT EXISTS vector;

ALTER TABLE chunk ADD COLUMN embedding vector;
-- Keep the tsvector in the row (compressed if need be) rather than out of line: ranking reads it for
-- every matching chunk, and a TOAST fetch per row was most of the lexical half's time at 100,000 chunks.
ALTER TABLE chunk ALTER COLUMN tsv SET STORAGE MAIN;
CREATE INDEX ix_chunk_allowed_principals ON chunk USING gin (allowed_principals);

CREATE TABLE index_meta (
    name text PRIMARY KEY,
    embedder text NOT NULL,
    dimension integer NOT NULL CHECK (dimension > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE embedding_cache (
    embedder text NOT NULL,
    content_hash varchar(64) NOT NULL,
    ordinal integer NOT NULL,
    input_sha256 varchar(64) NOT NULL,
    embedding vector NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (embedder, content_hash, ordinal, input_sha256)
);

CREATE TABLE access_grant (
    id bigserial PRIMARY KEY,
    project_id integer REFERENCES project(id) ON DELETE CASCADE,
    source_id integer REFERENCES source(id) ON DELETE CASCADE,
    source_object_id bigint REFERENCES source_object(id) ON DELETE CASCADE,
    principal text NOT NULL CHECK (principal <> ''),
    effect text NOT NULL CHECK (effect IN ('allow', 'deny')),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_access_grant_one_scope CHECK (num_nonnulls(project_id, source_id, source_object_id) = 1)
);
CREATE INDEX ix_access_grant_project ON access_grant (project_id) WHERE project_id IS NOT NULL;
CREATE INDEX ix_access_grant_source ON access_grant (source_id) WHERE source_id IS NOT NULL;
CREATE INDEX ix_access_grant_object ON access_grant (source_object_id) WHERE source_object_id IS NOT NULL;
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""
    DROP TABLE IF EXISTS access_grant;
    DROP TABLE IF EXISTS embedding_cache;
    DROP TABLE IF EXISTS index_meta;
    DROP INDEX IF EXISTS ix_chunk_embedding_hnsw;
    DROP INDEX IF EXISTS ix_chunk_allowed_principals;
    ALTER TABLE chunk DROP COLUMN IF EXISTS embedding;
    ALTER TABLE chunk ALTER COLUMN tsv SET STORAGE EXTENDED;
    """)
