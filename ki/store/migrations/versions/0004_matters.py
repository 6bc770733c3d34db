"""Matters, matter assignments, documents and versions, relations, threads, parked relation intents.

Revision ID: 0004_matters
Revises: 0001

Spec: insertion-pipeline.md "Classify (classify_matter)" (MatterAssignment, Matter created under an
advisory lock per (project, reference)), "Relate (relate)" (Document and DocumentVersion rows,
supersedes edges, redline_against pointers, Relation rows, CommunicationThread membership,
RelationIntent rows parked for targets without a matter).
"""

from alembic import op

revision = "0004_matters"
down_revision = "0001"
branch_labels = None
depends_on = None

DDL = """
CREATE TABLE matter (
    id bigserial PRIMARY KEY,
    project_id integer NOT NULL REFERENCES project(id),
    reference text NOT NULL,
    title text NOT NULL DEFAULT '',
    practice_area text,
    kind text,
    imported boolean NOT NULL DEFAULT false,
    placeholder boolean NOT NULL DEFAULT false,
    folder text,
    identifiers text[] NOT NULL DEFAULT '{}'::text[],
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_matter_project_reference UNIQUE (project_id, reference)
);

CREATE TABLE matter_assignment (
    source_object_id bigint PRIMARY KEY REFERENCES source_object(id) ON DELETE CASCADE,
    matter_id bigint NOT NULL REFERENCES matter(id),
    content_hash varchar(64),
    method text NOT NULL,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_matter_assignment_matter ON matter_assignment (matter_id);

CREATE TABLE document (
    id bigserial PRIMARY KEY,
    matter_id bigint REFERENCES matter(id),
    title text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_document_matter ON document (matter_id);

CREATE TABLE document_version (
    id bigserial PRIMARY KEY,
    document_id bigint NOT NULL REFERENCES document(id) ON DELETE CASCADE,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    content_hash varchar(64),
    version_order integer,
    version_key text,
    version_label text,
    rendition text,
    duplicate_of bigint REFERENCES source_object(id) ON DELETE SET NULL,
    supersedes bigint REFERENCES source_object(id) ON DELETE SET NULL,
    redline_against bigint REFERENCES source_object(id) ON DELETE SET NULL,
    is_final boolean NOT NULL DEFAULT false,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_document_version_object UNIQUE (source_object_id)
);
CREATE INDEX ix_document_version_document ON document_version (document_id);
CREATE INDEX ix_document_version_hash ON document_version (content_hash);

CREATE TABLE relation (
    id bigserial PRIMARY KEY,
    from_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    to_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    type text NOT NULL,
    provenance jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_relation UNIQUE (from_object_id, to_object_id, type),
    CONSTRAINT ck_relation_type CHECK (type IN ('annex_of', 'responds_to', 'references', 'amends'))
);
CREATE INDEX ix_relation_to ON relation (to_object_id);

CREATE TABLE communication_thread (
    id bigserial PRIMARY KEY,
    matter_id bigint REFERENCES matter(id),
    subject text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE communication_thread_member (
    id bigserial PRIMARY KEY,
    thread_id bigint NOT NULL REFERENCES communication_thread(id) ON DELETE CASCADE,
    source_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    message_id text,
    parent_message_id text,
    parent_object_id bigint REFERENCES source_object(id) ON DELETE SET NULL,
    subject_key text,
    sent_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_thread_member_object UNIQUE (source_object_id)
);
CREATE INDEX ix_thread_member_thread ON communication_thread_member (thread_id);
CREATE INDEX ix_thread_member_message ON communication_thread_member (message_id);
CREATE INDEX ix_thread_member_parent ON communication_thread_member (parent_message_id);

CREATE TABLE relation_intent (
    id bigserial PRIMARY KEY,
    from_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    to_object_id bigint NOT NULL REFERENCES source_object(id) ON DELETE CASCADE,
    kind text NOT NULL,
    from_content_hash varchar(64),
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uq_relation_intent UNIQUE (from_object_id, to_object_id, kind)
);
CREATE INDEX ix_relation_intent_to ON relation_intent (to_object_id);
"""


def upgrade() -> None:
    op.execute(DDL)


def downgrade() -> None:
    for table in ("relation_intent", "communication_thread_member", "communication_thread", "relation",
                  "document_version", "document", "matter_assignment", "matter"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
