"""Stage ``index``: chunk every textual part, embed it, and write it with its permissions to the search backend.

Spec: insertion-pipeline.md "Index": chunks by ``retrieval.chunk_chars`` / ``chunk_overlap_chars``;
each embedded with ``retrieval.embedding_model`` (with the optional context header: the chunks'
embedded header names title and type; the matter — reference and title — is embedded apart once per (blob,
matter) and blended into every passage's and clause's vector (:func:`ki.stages.index_rows.blend`), so identical
bytes filed under two matters still embed their chunks once; the profile row names title, type, matter, parties
and date); the permission projection compiled from project,
source, connector (folder grants) and document grants on every row; re-indexing diffs by ordinal
(new rows written before surplus ones are deleted); the model name and dimension recorded on the
index, another model refused before any write. DESIGN.md "Duplicates and permissions": vectors
are cached per blob (:mod:`ki.adapters.search.embedding_cache`), rows are per object.

**Access-only re-index.** A rescan that finds only an object's grants changed marks its done index
row ``access_only_reindex`` (``last_error = {"access_only_reindex": true}``, status pending; see
:func:`ki.domain.access.refresh.mark_access_changes`). The handler then recompiles the projection,
updates only the permission fields of the object's rows and bumps their ``access_version``: no
re-splitting, no embedding. A failed attempt keeps the marker (in ``last_error.details``), so the
retry is access-only too; a full re-index (new bytes, a new producer version) clears it.

**Every textual part**: :meth:`ki.adapters.convert.model.StructuredDocument.textual_parts` — the
body (the accepted view), comments (with their anchor), footnotes, endnotes, headers, footers, text boxes,
annotations, form fields, charts, SmartArt, mail headers the body lacks, attachment names and tracked
deletions (kind ``deleted``: struck text stays findable, marked and filterable) — is chunked, body first;
each row records its ``kind`` and ``meta`` (the part's key, a comment's anchor and author). The profile row
(ordinal −1, kind ``profile``) carries the document fields search ranks with boosts
(:func:`document_fields`); its text (title, type, matter, opening) is what its vector is made from.

**Streamed**: the passages are kept as positions in their parts
(:class:`ki.stages.index_rows.PassagePlan`); the rows are embedded and then written
:data:`ki.stages.index_rows.STREAM_ROWS` at a time (:class:`ki.stages.index_rows.DocumentRows`), so a 120 MB
text's ~70,000 passages, embedding inputs, vectors and rows are never all in memory. The embedding pass
commits each batch's vectors to the embedding cache (a retry after a crash embeds only what is missing); the
write reads them back per batch inside the backend's one transaction, so the object has its old rows or all
of its new ones, never half.

**Document-level rows** (:mod:`ki.stages.index_clauses`, :mod:`ki.store.finality`): the profile row belongs to
the latest final version of the object's document (the latest version when none is final; an object Relate has
not placed is its own document) and names title, type, matter, parties and date; the clause rows (ordinals
1000+, kind ``clause``) belong to the latest final version only, a draft never has any. An object that is not a
holder writes neither (its earlier ones are surplus ordinals, deleted); a holder, once written, removes them from
the document's other files (``retire_document_rows``): a new final version replaces its predecessor's.

Errors: RetryableStageError (no structured_json yet; the embedding cache lost a vector between the passes);
ClaimLost (the claim was lost while embedding); AclReadError (grants unreadable:
infrastructure, retried, never public nor revoked); EmbedderMismatch (ConfigurationError: the run
stops, nothing written); the embedder's errors (gateway outage = infrastructure).
"""

from __future__ import annotations

import re
from pathlib import PurePath, PurePosixPath
from typing import Any

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.search import query_embedder
from ki.adapters.search.backend import IndexDocument
from ki.adapters.search.embedder import identity_of
from ki.adapters.search.embedding_cache import CachedVectors, embed_rows
from ki.adapters.search.embeddings import context_header
from ki.adapters.search.factory import backend_for
from ki.core.errors import ClaimLost
from ki.core.taxonomies import ACCESS_ONLY_REINDEX, SOURCE_OBJECT_DELETED, has_access_only_marker
from ki.domain.access.load import object_projection
from ki.domain.context import StageContext, StageOutcome
from ki.stages.index_clauses import clause_rows, document_holders, profile_lines
from ki.stages.index_rows import STREAM_ROWS, DocumentRows, PassagePlan
from ki.store.chunks import indexed_hashes
from ki.store.facts import document_facts

PROFILE_OPENING_CHARS = 600
HEADER_TITLE_MAX_CHARS = 200
_NON_SPACE = re.compile(r"\S")
#: The line boundaries ``str.splitlines`` knows.
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def handle(ctx: StageContext) -> StageOutcome:
    """Index the object (or refresh only its permissions when the row carries ``access_only_reindex``).

    Returns done (details: rows, embedded, reused, access_version) or skipped ``no_text`` (no textual part).
    """
    db = ctx.pipeline.db
    backend = backend_for(db, ctx.config)
    with db.engine.connect() as conn:
        hashes = indexed_hashes(conn, ctx.obj.id)
    if has_access_only_marker(ctx.claim.last_error) and hashes == {ctx.obj.content_hash}:
        return _refresh_access(ctx, backend)
    return _index(ctx, backend)


def _keep_marker(exc: BaseException) -> None:
    """Attach the access-only marker to a failure so the failure record (``details``) keeps it."""
    details = getattr(exc, "details", None)
    if isinstance(details, dict):
        details[ACCESS_ONLY_REINDEX] = True
        return
    try:
        exc.details = {ACCESS_ONLY_REINDEX: True}  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions with __slots__
        pass


def _refresh_access(ctx: StageContext, backend: Any) -> StageOutcome:
    try:
        with ctx.pipeline.db.engine.connect() as conn:
            access = object_projection(conn, ctx.obj.source_id, ctx.obj.id)
        version = backend.update_access(ctx.obj.id, access)
    except Exception as exc:
        _keep_marker(exc)
        raise
    return StageOutcome(status="done", details={ACCESS_ONLY_REINDEX: True, "access_version": version})


def document_fields(ctx: StageContext, title: str | None, doc_type: str | None, matter: str | None,
                    parties: list[str]) -> dict[str, str]:
    """The profile row's searchable fields: ``title``, ``name`` (the file name; an embedded
    object's own name), ``folder`` (the folders from the source root down), ``type`` (the document type's
    labels in both languages), ``matter`` (reference and title), ``party`` (names on the document)."""
    from ki.adapters.sources.children import SEP

    top = ctx.obj.external_id.split("#", 1)[0]
    fields = {"title": title or "", "name": PurePath(ctx.obj.path.split(SEP)[-1]).name,
              "folder": " / ".join(PurePosixPath(top).parent.parts), "matter": matter or "",
              "party": "\n".join(parties)}
    if doc_type:
        labels = [doc_type.replace("_", " ")]
        try:
            from ki.domain.ontology.load import active_ontology

            node = active_ontology(ctx.config).node_view(doc_type)
            labels = [node["label"]["de"], node["label"]["en"]]
        except Exception:  # noqa: BLE001 - an unknown node (another ontology) still names its id
            pass
        fields["type"] = " / ".join(dict.fromkeys(x for x in labels if x))
    return {k: v for k, v in fields.items() if v}


def header_title(doc: StructuredDocument) -> str | None:
    """The title the embeddings see: the converter's title, else the first non-empty line of the text.

    Never the file name, so identical bytes under other names embed identically (once).
    """
    title = (doc.title or "").strip()
    if not title:
        text_ = doc.text or ""
        first = _NON_SPACE.search(text_)  # the first non-empty line, without splitting the whole text
        if first is not None:
            end = _LINE_BREAK.search(text_, first.start())
            title = text_[first.start():end.start() if end else len(text_)].strip()
    return " ".join(title.split())[:HEADER_TITLE_MAX_CHARS] or None


def profile_text(title: str | None, doc_type: str | None, matter: str | None, text_: str,
                 extra: list[str] | None = None) -> str:
    """The profile row (ordinal −1): title, type, matter, the ``extra`` lines (parties, date:
    :func:`ki.stages.index_clauses.profile_lines`) and the opening of the text (≤ 600 chars)."""
    opening = _normalised_opening(text_, PROFILE_OPENING_CHARS + 1)
    if len(opening) > PROFILE_OPENING_CHARS:
        cut = opening.rfind(" ", 0, PROFILE_OPENING_CHARS)
        opening = opening[: cut if cut > PROFILE_OPENING_CHARS // 2 else PROFILE_OPENING_CHARS]
    return "\n".join(p for p in (title, doc_type, matter, *(extra or []), opening) if p)


def _normalised_opening(text_: str, chars: int) -> str:
    """A prefix of ``" ".join(text_.split())`` at least ``chars`` long (or all of it), read from a growing
    prefix of ``text_`` — never the whole of a huge text (the collapsed prefix of a prefix is a prefix)."""
    size = 4 * chars
    while True:
        opening = " ".join(text_[:size].split())
        if len(opening) >= chars or size >= len(text_):
            return opening
        size *= 4


def stage_embedder(ctx: StageContext) -> Any:
    """The process's embedder for ``retrieval.embedding_model``
    (:func:`ki.adapters.search.query_embedder.stage_embedder`)."""
    return query_embedder.stage_embedder(ctx.config.retrieval, ctx.pipeline.db)


def _index(ctx: StageContext, backend: Any) -> StageOutcome:
    """Chunk, embed and write the object's rows, :data:`STREAM_ROWS` at a time.

    Two passes over the passages' positions: the embedding pass stores each batch's vectors in the
    embedding cache (committed per batch, no transaction open while the model runs; a retry after a crash
    reuses what was stored); the write builds the rows a batch at a time, their vectors read back from the
    cache, in the backend's single transaction (a crash leaves the object's earlier rows, never half of the
    new ones).
    """
    content_hash = ctx.obj.content_hash
    db = ctx.pipeline.db
    retrieval = ctx.config.retrieval
    doc = ctx.structured()
    embedder = stage_embedder(ctx)
    identity = identity_of(embedder)
    backend.ensure_embedder(identity)  # refuse another model before reading grants or embedding anything
    plan = PassagePlan.of(doc.textual_parts(), chunk_chars=retrieval.chunk_chars,
                          overlap_chars=retrieval.chunk_overlap_chars)
    with db.engine.connect() as conn:
        access = object_projection(conn, ctx.obj.source_id, ctx.obj.id)
        doc_type, matter, parties, doc_date = document_facts(conn, ctx.obj.id)
        holders = document_holders(conn, ctx.obj.id)
        clauses = (clause_rows(conn, ctx.config, content_hash, doc.text or "", passages=len(plan),
                               chunk_chars=retrieval.chunk_chars) if ctx.obj.id in holders.clauses else None)
    title = doc.title or PurePath(ctx.obj.path).stem
    if not len(plan):
        result = backend.write_document(IndexDocument(ctx.obj.id, content_hash, title, [], access, identity))
        return StageOutcome(status="skipped", reason="no_text", details={"deleted": result.deleted})
    htitle = header_title(doc)
    full_text = doc.text or ""
    opening = full_text if _NON_SPACE.search(full_text) else plan.text(0)
    fields = document_fields(ctx, doc.title or htitle, doc_type, matter, parties)
    # The chunks' embedded header names title and type: both belong to the bytes, so every copy of a
    # blob embeds its passages identically (once). The matter, a property of where a copy is filed, is
    # embedded apart, once per (blob, matter), and blended into each row's vector (index_rows.blend).
    header = (context_header(title=htitle, doc_type=doc_type)
              if embedder is not None and retrieval.embedding_context_header else "")
    profile = (profile_text(htitle, doc_type, matter, opening, profile_lines(parties, doc_date))
               if ctx.obj.id in holders.profile else None)
    matter_header = (context_header(title=None, matter=matter)
                     if embedder is not None and retrieval.embedding_context_header and matter else "")
    rows = DocumentRows(profile, {"fields": fields}, plan, header=header, clauses=clauses, matter_header=matter_header)
    del doc, full_text, opening  # the parts' texts stay (the plan points into them); nothing else of the body
    embedded = reused = 0
    if embedder is not None:
        for inputs in rows.input_batches(STREAM_ROWS):
            if ctx.renew() is False:
                raise ClaimLost("the claim was lost while the index stage embedded the document")
            res = embed_rows(db, embedder, content_hash, inputs, batch_size=retrieval.embedding_batch_size)
            embedded, reused = embedded + res.embedded, reused + res.reused
        rows = rows.with_vectors(CachedVectors(db, embedder.name, int(embedder.dimension), content_hash))
    result = backend.write_document(IndexDocument(ctx.obj.id, content_hash, title, rows, access, identity))
    if result.skipped_deleted:
        return StageOutcome(status="skipped", reason=SOURCE_OBJECT_DELETED)
    retired = 0
    if ctx.obj.id in holders.profile:  # the document's earlier holders give up their profile and clause rows
        retired = backend.retire_document_rows(sorted(holders.siblings - holders.profile))
    return StageOutcome(status="done", details={"rows": len(rows), "embedded": embedded, "reused": reused,
                                                "clauses": len(clauses or ()), "profile": profile is not None,
                                                "retired": retired, "access_version": result.access_version})
