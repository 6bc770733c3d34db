"""Indexes that keep classify's evidence queries and relate's lookups bounded as the estate grows.

Revision ID: 0030_flat_stage_cost
Revises: 0029_first_passage_hash_index

Spec: insertion-pipeline.md "Classify" (evidence from other converted files) and "Relate" (identical copies).
Measured with ``bench/stage_cost.py``: at 10,000 and 50,000 documents these statements read every row of
``source_object`` or every converted text per call, so a document's classification cost grew with the estate.

- ``ix_source_object_content_hash``: the identical-copies lookup (``so.content_hash = :h``,
  :func:`ki.store.objects.identical_files`) and the joins from an artifact back to its objects.
- ``ix_source_object_source_external``: a folder's files (``external_id LIKE 'folder/%'`` within one source,
  :meth:`ki.store.corpus.DbCorpus.files_under`); ``text_pattern_ops`` so the prefix match uses it under any
  collation.
- ``ix_artifact_text_trgm`` (``pg_trgm``): a trigram index of the lower-cased first 2,000,000 characters of each
  converted text, so "files whose text contains X" (:meth:`ki.store.corpus.DbCorpus.files_containing`) reads the
  candidate texts only; the LIKE is rechecked on each, so the answer is the same as a full scan's.
- ``ix_artifact_mail_message_id``, ``ix_artifact_mail_in_reply_to``, ``ix_artifact_mail_references``: the
  messages linked to a set of Message-IDs (:meth:`ki.store.corpus.DbCorpus.emails_linked`: one of three
  conditions, so each needs its index or the OR reads every converted text).
- ``ix_thread_member_parent_object``: the threads naming a message (:func:`ki.store.threads.threads_naming`), whose
  OR's third arm (``parent_object_id``) had no index, so the whole member table was read.
"""

from alembic import op

revision = "0030_flat_stage_cost"
down_revision = "0029_first_passage_hash_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute("CREATE INDEX ix_source_object_content_hash ON source_object (content_hash)")
    op.execute("CREATE INDEX ix_source_object_source_external ON source_object (source_id, external_id "
               "text_pattern_ops)")
    op.execute("CREATE INDEX ix_artifact_text_trgm ON artifact USING gin "
               "(lower(left(body ->> 'text', 2000000)) gin_trgm_ops) WHERE kind = 'structured_json'")
    op.execute("CREATE INDEX ix_artifact_mail_message_id ON artifact (((body -> 'mail') ->> 'message_id')) "
               "WHERE kind = 'structured_json'")
    op.execute("CREATE INDEX ix_artifact_mail_in_reply_to ON artifact (((body -> 'mail') ->> 'in_reply_to')) "
               "WHERE kind = 'structured_json'")
    op.execute("CREATE INDEX ix_artifact_mail_references ON artifact USING gin (((body -> 'mail') -> 'references')) "
               "WHERE kind = 'structured_json'")
    op.execute("CREATE INDEX ix_thread_member_parent_object ON communication_thread_member (parent_object_id) "
               "WHERE parent_object_id IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_thread_member_parent_object")
    op.execute("DROP INDEX IF EXISTS ix_artifact_mail_references")
    op.execute("DROP INDEX IF EXISTS ix_artifact_mail_in_reply_to")
    op.execute("DROP INDEX IF EXISTS ix_artifact_mail_message_id")
    op.execute("DROP INDEX IF EXISTS ix_artifact_text_trgm")
    op.execute("DROP INDEX IF EXISTS ix_source_object_source_external")
    op.execute("DROP INDEX IF EXISTS ix_source_object_content_hash")
