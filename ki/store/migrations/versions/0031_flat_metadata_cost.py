"""Indexes that keep extract_metadata's entity lookups bounded as the estate grows.

Revision ID: 0031_flat_metadata_cost
Revises: 0030_flat_stage_cost

Spec: insertion-pipeline.md "Extract metadata" (the gazetteer of entities the firm already holds; one real
company is one row across every matter). Measured with ``bench/stage_cost.py``: at 50,000 documents these
statements read every alias or every document party row per call, so a document's extraction cost grew with the
estate.

- ``ix_entity_alias_first_token``: an alias's first base token, so the gazetteer of one document
  (:func:`ki.store.entities.known_names`: the aliases all of whose tokens occur in the document) reads the aliases
  whose first token occurs in it. With a document's hundreds of tokens the planner read the whole alias table
  rather than the GIN index (16,006 aliases: ~25 ms a document, now ~0.2 ms).
- ``ix_document_party_entity``: the party rows of given entities (the names documents use for them, their former
  names, a merge), which only the ``(matter_key, entity_id)`` index could serve, read in full.
"""

from alembic import op

revision = "0031_flat_metadata_cost"
down_revision = "0030_flat_stage_cost"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_entity_alias_first_token ON entity_alias ((tokens[1]))")
    op.execute("CREATE INDEX ix_document_party_entity ON document_party (entity_id)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_document_party_entity")
    op.execute("DROP INDEX IF EXISTS ix_entity_alias_first_token")
