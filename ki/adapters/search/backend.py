"""The search-backend interface every index implementation provides, and what passes through it.

Spec: insertion-pipeline.md "Index" (chunk rows with a permission projection; re-index diffs by
ordinal: replaced, never orphaned, never deleted before the new chunks are written; the model
name and dimension recorded on the index); DESIGN.md "Two deployments" (PostgreSQL full text +
pgvector embedded, OpenSearch at scale, the same fusion). Implementations:
:class:`ki.adapters.search.postgres.PostgresBackend` (embedded; also the record the other backends are
synced from). Hybrid ranking (:mod:`ki.adapters.search.hybrid`) is shared: a backend only answers the two
halves, each with the same permission filter.

Ordinals: ``-1`` is a document's profile row (:data:`PROFILE_ORDINAL`, kind ``profile``: its document
fields; only the latest final version holds it, :mod:`ki.store.finality`), ``0..n-1`` the passages of its
textual parts, body first (each row's ``kind`` says which part: ``body``, ``comment``, ``footnote``, ``deleted``
… — ``ki.adapters.convert.model.PART_KINDS``), and from :func:`clause_base` (1000, or the next thousand above the
passages
of a document with more) its clause rows (kind ``clause``), on final versions only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ki.adapters.search.embedder import EmbedderIdentity
from ki.core.errors import ConfigurationError
from ki.domain.access.projection import AccessProjection
from ki.store.index_record import FilterReport

if TYPE_CHECKING:
    import numpy as np

PROFILE_ORDINAL = -1
PROFILE_KIND = "profile"
CLAUSE_KIND = "clause"
#: The first clause ordinal of a document of at most this many passages (the spec's "ordinals 1000+").
CLAUSE_ORDINAL_BASE = 1000


def clause_base(passages: int) -> int:
    """The first clause ordinal of a document of ``passages`` passages: 1000, or the next multiple of 1000 at or
    above the passage count (a document of more than 1,000 passages keeps its passage ordinals ``0..n-1``)."""
    return CLAUSE_ORDINAL_BASE * max(1, -(-passages // CLAUSE_ORDINAL_BASE))


class EmbedderMismatch(ConfigurationError):
    """Vectors of another embedder or dimension (or none) would be written into an index that
    records a different one. Raised before anything is written; the run stops with this message
    (a ConfigurationError: ki's setup, not the file, is wrong).

    Attributes: ``index`` (what the index records, or None) and ``configured`` (what was offered).
    """

    def __init__(self, index: EmbedderIdentity | None, configured: EmbedderIdentity | None, *, backend: str):
        self.index = index
        self.configured = configured
        have = str(index) if index else "no vectors"
        want = str(configured) if configured else "no vectors (retrieval.embedding_model=none)"
        super().__init__(
            f"the {backend} search index holds {have}, but retrieval.embedding_model gives {want}; nothing was "
            f"written. Set retrieval.embedding_model back, or drop the index's vectors with "
            f"`ki index reset-vectors` and re-index (ki config set pipeline.stages.index.rerun_token "
            f"<new token>, then ki insert)")


@dataclass(frozen=True)
class ChunkRow:
    """One row of a document in the index.

    Attributes:
        ordinal: -1 profile, 0..n-1 passages, :func:`clause_base` + i clauses.
        text: the passage (lexical half; snippets); for the profile row the text its vector is made from.
        embedding: float32 ``(dimension,)`` L2-normalised, or None when the index has no vectors.
        kind: the part (``body``, ``comment``, ``footnote``, ``deleted`` …; ``profile`` for ordinal -1).
        meta: JSON facts of the part: ``key`` (its ``parts`` key), ``anchor`` / ``author`` (comments);
            the profile row's ``fields`` (``title``, ``name``, ``folder``, ``type``, ``matter``, ``party``, ``date``);
            a clause row's ``clause_type`` (a clause-facet node or None), ``number``, ``heading`` and ``span``
            (start and end offsets in the body text).
    """

    ordinal: int
    text: str
    embedding: np.ndarray | None = None
    kind: str = "body"
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class IndexDocument:
    """Everything a backend writes for one source object (one re-index = one call).

    Attributes:
        source_object_id / content_hash: the object and the bytes its rows were made from.
        title: shown in hits and weighted in the lexical half (the file name when nothing better).
        rows: every row the object must have after the write; other ordinals are surplus. A sequence may
            build its rows on demand (:class:`ki.stages.index_rows.DocumentRows`): backends slice it in
            batches and read the ordinals with :func:`row_ordinals`, so a huge document is never whole in memory.
        access: the permission projection written on every row.
        embedder: identity of the rows' vectors; None when the rows carry none.
    """

    source_object_id: int
    content_hash: str
    title: str | None
    rows: Sequence[ChunkRow]
    access: AccessProjection
    embedder: EmbedderIdentity | None = None


def row_ordinals(rows: Sequence[ChunkRow]) -> list[int]:
    """The ordinals of ``rows`` in order; from the sequence's own ``ordinals()`` when it has one (rows built
    on demand are then not built for it)."""
    ordinals = getattr(rows, "ordinals", None)
    return list(ordinals()) if callable(ordinals) else [r.ordinal for r in rows]


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`SearchBackend.write_document` changed: rows ``upserted`` (new or changed),
    ``unchanged`` and ``deleted`` (surplus ordinals), and the object's ``access_version``.
    ``skipped_deleted``: the object was tombstoned meanwhile, so nothing was written (its rows removed)."""

    upserted: int
    unchanged: int
    deleted: int
    access_version: int
    skipped_deleted: bool = False


@dataclass(frozen=True)
class SearchFilters:
    """The filter both halves of a search apply.

    Attributes:
        principals: the caller's principals with ``*`` (see permissions.principal_set); None only for
            the local operator (CLI without ``--as``: all grants). The HTTP API never passes None.
        matter: a matter reference (``2024-0153``) or id, or None.
        doc_type: an ontology node id; matches the document type or any of its ancestors.
        since: documents dated on or after this day (the document date; before Extract metadata has read a
            document, its file mtime; a document it found undated is left out).
        kinds: search only these parts (``deleted``, ``comment`` …; ``profile`` = the document fields; ``clause``
            = clause rows), or None for all; not_kinds: never these.
        clause_types: clause rows of these clause-facet nodes only (the caller expands a node to its
            descendants), or None.
        party_entities: documents naming one of these entities as a party (the caller resolves a name through
            the entity ledger and its aliases), or None; party: the name asked for (reports only).
        final: only final/executed versions (:mod:`ki.store.finality`).
    """

    principals: tuple[str, ...] | None
    matter: str | None = None
    doc_type: str | None = None
    since: date | None = None
    kinds: tuple[str, ...] | None = None
    not_kinds: tuple[str, ...] = ()
    clause_types: tuple[str, ...] | None = None
    party_entities: tuple[int, ...] | None = None
    party: str | None = None
    final: bool = False


@dataclass(frozen=True)
class RankedChunk:
    """One row a half returned, best first: ``score`` is the half's own (BM25 or cosine similarity);
    ``tier`` (lexical half): 1 = the row matches every group of the query, 2 = some
    (:mod:`ki.adapters.search.query`)."""

    source_object_id: int
    ordinal: int
    content_hash: str
    score: float
    tier: int = 1


@runtime_checkable
class SearchBackend(Protocol):
    """A search index (spec: "Index"; notes/opensearch.md §2.3, §3, §6).

    Every method may raise the backend's infrastructure errors (an outage: retried, never a
    document's fault). Search methods never return a row whose ``allowed_principals`` misses every
    one of ``filters.principals`` or whose ``denied_principals`` holds one of them, nor a row of a
    tombstoned object.
    """

    name: str

    def index_identity(self) -> EmbedderIdentity | None:
        """The embedder (name, dimension) the index records, or None while it holds no vectors."""
        ...

    def generation(self) -> tuple[int, int]:
        """Where the index stands: equal generations rank a query the same (what a search answer may be shared
        by). The record's change-log head (every write, delete and access change of rows is a new head) and, for
        the embedded full-text projection, the change it has applied up to (-1 where there is none)."""
        ...

    def ensure_embedder(self, identity: EmbedderIdentity | None) -> None:
        """Refuse ``identity`` unless the index records the same one; record it on an index without one.

        ``identity`` None (no vectors) is refused by an index that records an embedder.
        Raises: EmbedderMismatch before anything else is written.
        """
        ...

    def write_document(self, doc: IndexDocument) -> WriteResult:
        """Make the object's rows exactly ``doc.rows``: upsert every ordinal first, then delete surplus
        ordinals (never deleted before the new rows are written; readers never see the object vanish).

        Raises: EmbedderMismatch when ``doc.embedder`` differs from the index's record.
        """
        ...

    def delete_object(self, source_object_id: int) -> int:
        """Remove every row of a tombstoned object. Returns rows removed."""
        ...

    def retire_document_rows(self, source_object_ids: list[int]) -> int:
        """Remove the profile and clause rows of objects that no longer hold them (a newer final version of
        their document does: :mod:`ki.store.finality`); their passages stay. Returns rows removed."""
        ...

    def update_access(self, source_object_id: int, access: AccessProjection) -> int | None:
        """Rewrite only the permission fields of the object's rows and bump ``access_version``.

        Returns the new access_version, or None when the object has no rows.
        """
        ...

    def search_lexical(self, query: str, filters: SearchFilters, k: int) -> list[RankedChunk]:
        """The best row of each of the ``k`` best distinct contents matching ``query`` (the semantics of
        :mod:`ki.adapters.search.query`: every row that matches is ranked, exact top k), best first."""
        ...

    def search_vector(self, vector: np.ndarray, filters: SearchFilters, k: int) -> list[RankedChunk]:
        """Up to ``k`` rows nearest to ``vector`` (float32 ``(dimension,)``) by cosine, nearest first;
        [] when the index holds no vectors."""
        ...

    def filter_report(self, filters: SearchFilters) -> FilterReport:
        """Which of ``filters`` (parts, matter, type, since) are applied, and notes for those ignored."""
        ...
