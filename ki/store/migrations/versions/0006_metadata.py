"""Metadata, entities and decisions: document_metadata, entity (+ alias ledger, identifiers),
matter_party, document_party, extraction, decision_record, decision_entry.

Revision ID: 0006_metadata
Revises: 0001

Spec: insertion-pipeline.md "Extract metadata" and "Extract decisions"; its own branch, so it does not
depend on the Classify/Relate tables (rows are keyed by source_object_id and content hash; document
version ids are nullable columns without a foreign key). See ki/store/models_metadata.py.
"""

from alembic import op

revision = "0006_metadata"
down_revision = "0001"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE entity (
    id bigserial PRIMARY KEY,
    project_id integer NOT NULL REFERENCES project(id),
    kind text NOT NULL,
    name text NOT NULL,
    identity_key text NOT NULL,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_entity_project_identity UNIQUE (project_id, identity_key)
);

CREATE TABLE entity_alias (
    id bigserial PRIMARY KEY,
    entity_id bigint NOT NULL REFERENCES entity(id) ON DELETE CASCADE,
    alias text NOT NULL,
    alias_key text NOT NULL,
    tokens text[] NOT NULL DEFAULT '{}'::text[],
    source_object_id bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_entity_alias_entity_alias UNIQUE (entity_id, alias)
);
CREATE INDEX ix_entity_alias_key ON entity_alias (alias_key);
CREATE INDEX ix_entity_alias_tokens ON entity_alias USING gin (tokens);

CREATE TABLE entity_identifier (
    id bigserial PRIMARY KEY,
    entity_id bigint NOT NULL REFERENCES entity(id) ON DELETE CASCADE,
    type text NOT NULL,
    value text NOT NULL,
    value_key text NOT NULL,
    issuer text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_entity_identifier_entity_type_value UNIQUE (entity_id, type, value_key)
);
CREATE INDEX ix_entity_identifier_lookup ON entity_identifier (type, value_key);

CREATE TABLE matter_party (
    id bigserial PRIMARY KEY,
    matter_key text NOT NULL,
    matter_id bigint,
    entity_id bigint NOT NULL REFERENCES entity(id) ON DELETE CASCADE,
    role text NOT NULL,
    basis text NOT NULL,
    rank integer NOT NULL,
    source_object_id bigint,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_matter_party_matter_entity UNIQUE (matter_key, entity_id)
);
CREATE INDEX ix_matter_party_entity ON matter_party (entity_id);

CREATE TABLE document_metadata (
    source_object_id bigint PRIMARY KEY REFERENCES source_object(id) ON DELETE CASCADE,
    content_hash varchar(64) NOT NULL,
    document_version_id bigint,
    matter_key text,
    doc_type text,
    doc_type_ancestors text[] NOT NULL DEFAULT '{}'::text[],
    ontology_version text NOT NULL,
    ontology_fingerprint text NOT NULL,
    language text,
    doc_date date,
    doc_date_source text,
    title text,
    identifiers jsonb NOT NULL DEFAULT '[]'::jsonb,
    facts jsonb NOT NULL DEFAULT '{}'::jsonb,
    producer_version text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_document_metadata_doc_type ON document_metadata (doc_type);
CREATE INDEX ix_document_metadata_fingerprint ON document_metadata (ontology_fingerprint) WHERE doc_type IS NULL;

CREATE TABLE document_party (
    id bigserial PRIMARY KEY,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    entity_id bigint NOT NULL REFERENCES entity(id) ON DELETE CASCADE,
    ordinal integer NOT NULL,
    name text NOT NULL,
    role text NOT NULL,
    role_basis text NOT NULL,
    matter_key text,
    identifiers jsonb NOT NULL DEFAULT '[]'::jsonb,
    resolution jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT uq_document_party_object_entity UNIQUE (source_object_id, entity_id)
);
CREATE INDEX ix_document_party_matter_entity ON document_party (matter_key, entity_id);

CREATE TABLE extraction (
    id bigserial PRIMARY KEY,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    stage text NOT NULL,
    content_hash varchar(64) NOT NULL,
    producer_version text NOT NULL,
    model text NOT NULL,
    trace_id text,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_extraction_object_stage UNIQUE (source_object_id, stage)
);

CREATE TABLE decision_record (
    id bigserial PRIMARY KEY,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    content_hash varchar(64) NOT NULL,
    document_version_id bigint,
    redline_against_version_id bigint,
    redline_against_source_object_id bigint,
    summary text,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_decision_record_object_hash UNIQUE (source_object_id, content_hash)
);
CREATE UNIQUE INDEX uq_decision_record_version ON decision_record (document_version_id)
    WHERE document_version_id IS NOT NULL;

CREATE TABLE decision_entry (
    id bigserial PRIMARY KEY,
    decision_record_id bigint NOT NULL REFERENCES decision_record(id) ON DELETE CASCADE,
    ordinal integer NOT NULL,
    kind text NOT NULL,
    locus text,
    before_text text,
    after_text text,
    change_summary text NOT NULL,
    rationale_category text NOT NULL,
    rationale_text text,
    generalizability text NOT NULL,
    author text,
    changed_at timestamptz,
    CONSTRAINT uq_decision_entry_record_ordinal UNIQUE (decision_record_id, ordinal)
);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    op.execute("""
    DROP TABLE IF EXISTS decision_entry;
    DROP TABLE IF EXISTS decision_record;
    DROP TABLE IF EXISTS extraction;
    DROP TABLE IF EXISTS document_party;
    DROP TABLE IF EXISTS document_metadata;
    DROP TABLE IF EXISTS matter_party;
    DROP TABLE IF EXISTS entity_identifier;
    DROP TABLE IF EXISTS entity_alias;
    DROP TABLE IF EXISTS entity;
    """)
