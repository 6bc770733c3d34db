"""Initial schema: sources, objects, blobs, artifacts, processing_state, runs, audit, chunks.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE project (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO project (name) VALUES ('default');

CREATE TABLE source (
    id serial PRIMARY KEY,
    project_id integer NOT NULL REFERENCES project(id),
    kind text NOT NULL,
    root text NOT NULL,
    config jsonb NOT NULL DEFAULT '{}'::jsonb,
    last_scan_at timestamptz,
    last_scan_count integer,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_source_kind_root UNIQUE (kind, root)
);

CREATE TABLE source_object (
    id bigserial PRIMARY KEY,
    source_id integer NOT NULL REFERENCES source(id),
    external_id text NOT NULL,
    path text NOT NULL,
    size bigint,
    mtime_ns bigint,
    content_hash varchar(64),
    scanned_hash varchar(64),
    missing_scans integer NOT NULL DEFAULT 0,
    deleted_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_source_object_external UNIQUE (source_id, external_id)
);

CREATE TABLE blob (
    content_hash varchar(64) PRIMARY KEY,
    size bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE artifact (
    id bigserial PRIMARY KEY,
    content_hash varchar(64) NOT NULL,
    kind text NOT NULL,
    producer text NOT NULL,
    producer_version text NOT NULL,
    body jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_artifact_hash_kind UNIQUE (content_hash, kind)
);

CREATE TABLE processing_state (
    id bigserial PRIMARY KEY,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    stage text NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    claim_token uuid,
    claimed_by text,
    claimed_at timestamptz,
    heartbeat_at timestamptz,
    next_retry_at timestamptz,
    producer_version text,
    last_error jsonb,
    reason text GENERATED ALWAYS AS (last_error->>'reason') STORED,
    completions integer NOT NULL DEFAULT 0,
    run_id bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_processing_state_object_stage UNIQUE (source_object_id, stage),
    CONSTRAINT ck_processing_state_status
        CHECK (status IN ('pending', 'running', 'done', 'failed', 'quarantined', 'skipped'))
);
CREATE INDEX ix_processing_state_claimable ON processing_state (updated_at)
    WHERE status IN ('pending', 'failed');
CREATE INDEX ix_processing_state_running ON processing_state (heartbeat_at) WHERE status = 'running';
CREATE INDEX ix_processing_state_stage_status ON processing_state (stage, status, reason);

CREATE TABLE pipeline_runs (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    label text NOT NULL,
    provider text NOT NULL,
    status text NOT NULL,
    source_id integer REFERENCES source(id),
    trigger text NOT NULL DEFAULT 'cli',
    workflow_run_id text,
    processed integer NOT NULL DEFAULT 0,
    done integer NOT NULL DEFAULT 0,
    skipped integer NOT NULL DEFAULT 0,
    retried integer NOT NULL DEFAULT 0,
    quarantined integer NOT NULL DEFAULT 0,
    error text,
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX uq_pipeline_runs_active_sync ON pipeline_runs (source_id)
    WHERE kind = 'sync' AND status IN ('queued', 'running');

CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    actor text NOT NULL,
    action text NOT NULL,
    source_object_id bigint,
    details jsonb NOT NULL DEFAULT '{}'::jsonb
);

CREATE TABLE chunk (
    id bigserial PRIMARY KEY,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    content_hash varchar(64) NOT NULL,
    ordinal integer NOT NULL,
    text text NOT NULL,
    title text,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple'::regconfig, coalesce(title, '')), 'A') ||
        to_tsvector('german'::regconfig, text) || to_tsvector('english'::regconfig, text)
    ) STORED,
    allowed_principals text[] NOT NULL DEFAULT '{}'::text[],
    denied_principals text[] NOT NULL DEFAULT '{}'::text[],
    access_version integer NOT NULL DEFAULT 0,
    is_deleted boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_chunk_object_ordinal UNIQUE (source_object_id, ordinal)
);
CREATE INDEX ix_chunk_tsv ON chunk USING gin (tsv);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    for table in ("chunk", "audit_log", "pipeline_runs", "processing_state", "artifact", "blob",
                  "source_object", "source", "project"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
