"""Relate's tools: ``list_folder(path)``, ``search_documents``, ``open_file(path, offset, max_chars)``.

Spec: insertion-pipeline.md "Relate: what the model is given". Each tool runs on its own short
database session (a relate call can spend minutes on model I/O and must not hold a transaction).
``open_file`` returns the file's ``ref`` — the only handle a submission may cite — with pageable
text (``has_more`` / ``next_offset``) and the file's own tracked-changes digest; an unconverted
file is pulled forward through the claim machinery (:mod:`ki.domain.relate.inline_conversion`) or reported with an
honest status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ki.adapters.agents.loop import Tool
from ki.config.settings import TextWindowConfig
from ki.core.errors import ToolError
from ki.core.text_window import normalised_digest
from ki.domain.context import EnsureReady, PipelineContext
from ki.domain.matters.neighbourhood import list_folder as folder_listing
from ki.domain.relate.inline_conversion import ensure_source_object_ready
from ki.domain.relate.wants import search_score
from ki.store.relate_files import embedded_file_at, file_at, file_row, searchable_documents

DIGEST_MAX_ITEMS = 40
DIGEST_MAX_CHARS = 4000
OPEN_MAX_CHARS = 100_000
#: ``open_file`` at offset 0 of a text longer than this (the reading window, ``pipeline.text_window``'s defaults)
#: also returns ``text_digest``, the whole text's :func:`ki.core.text_window.normalised_digest`.
DIGEST_FROM_CHARS = TextWindowConfig().head_chars + TextWindowConfig().tail_chars


def ref_of(oid: int) -> str:
    """The citable handle of a source object (``F<id>``)."""
    return f"F{oid}"


def oid_of(ref: str) -> int:
    """The object id of a ref; raises ValueError for anything but ``F<digits>``."""
    m = re.fullmatch(r"F(\d+)", ref or "")
    if not m:
        raise ValueError(f"not a file ref: {ref!r}")
    return int(m.group(1))


def tracked_changes_digest(revisions: list[dict[str, Any]]) -> dict[str, Any]:
    """Up to 40 revisions / 4,000 characters, longest first, with the total count and the kinds present."""
    by_kind: dict[str, int] = {}
    for r in revisions:
        by_kind[r.get("kind", "")] = by_kind.get(r.get("kind", ""), 0) + 1
    items, used = [], 0
    for r in sorted(revisions, key=lambda r: len(r.get("text") or ""), reverse=True)[:DIGEST_MAX_ITEMS]:
        snippet = (r.get("text") or "")[:500]
        if used + len(snippet) > DIGEST_MAX_CHARS:
            break
        used += len(snippet)
        items.append({"kind": r.get("kind"), "text": snippet, "author": r.get("author"), "date": r.get("date")})
    return {"total": len(revisions), "shown": len(items), "by_kind": by_kind, "items": items}


def mail_headers(mail: dict[str, Any] | None) -> dict[str, Any] | None:
    """The headers relate shows for an e-mail (ids, subject, sender, date, attachment names)."""
    if not mail:
        return None
    sender = mail.get("sender") or {}
    return {"message_id": mail.get("message_id"), "in_reply_to": mail.get("in_reply_to"),
            "references": mail.get("references") or [], "subject": mail.get("subject"),
            "from": sender.get("address"), "from_name": sender.get("name"), "date": mail.get("date"),
            "attachments": mail.get("attachments") or []}


class ListFolderArgs(BaseModel):
    """Arguments of ``list_folder``."""

    path: str = Field(default="/", description="folder path relative to the source root; '/' is the root")


class SearchDocumentsArgs(BaseModel):
    """Arguments of ``search_documents``."""

    query: str = Field(default="", max_length=500)
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0)
    matter: str | None = Field(default=None, description="restrict to one matter reference")


class OpenFileArgs(BaseModel):
    """Arguments of ``open_file``."""

    path: str = Field(description="file path relative to the source root, as listed")
    offset: int = Field(default=0, ge=0)
    max_chars: int = Field(default=12_000, ge=1, le=OPEN_MAX_CHARS)


@dataclass
class RelateTools:
    """The tools of one relate run.

    Attributes:
        ctx: the pipeline context.
        source_id / project_id: where paths resolve and where search looks.
        ensure_ready: inline conversion of an unconverted file (``StageContext.ensure_ready``, which
            goes through the executor's claim machinery); without it ``open_file`` only observes
            (``ensure_source_object_ready`` with no runner).
    """

    ctx: PipelineContext
    source_id: int
    project_id: int
    ensure_ready: EnsureReady | None = None

    def resolve(self, path: str) -> int:
        """The live object at ``path`` (relative to the root; `` » `` for an embedded one).

        Raises: ToolError when no live file has that path.
        """
        row = self._load_path(path)
        if row is None:
            raise ToolError(f"no file {path!r}; use list_folder to see what exists")
        return int(row.id)

    def _load_path(self, path: str):
        rel = path.strip().lstrip("/")
        container, _, part = rel.partition(" » ")
        with self.ctx.db.engine.connect() as conn:
            if not part:
                return file_at(conn, self.source_id, rel)
            return embedded_file_at(conn, self.source_id, container, rel)

    def _load(self, oid: int):
        with self.ctx.db.engine.connect() as conn:
            return file_row(conn, oid)

    def open_file(self, args: OpenFileArgs) -> dict[str, Any]:
        """Pageable converted text of one file with its ref, tracked-changes digest and mail headers."""
        row = self._load_path(args.path)
        if row is None:
            raise ToolError(f"no file {args.path!r}; use list_folder to see what exists")
        oid = int(row.id)
        if not row.converted:
            status, detail = (self.ensure_ready(oid) if self.ensure_ready is not None
                              else ensure_source_object_ready(self.ctx, oid))
            if status != "ok":
                return {"status": status, "path": row.rel, "detail": detail,
                        "hint": "the file cannot be read now; relate it from its own side later"}
            row = self._load(oid)
            if not row.converted:
                return {"status": "in_progress", "path": row.rel, "detail": "not converted yet"}
        full = row.text or ""
        chunk = full[args.offset: args.offset + args.max_chars]
        end = args.offset + len(chunk)
        extra: dict[str, Any] = {}
        if args.offset == 0 and len(full) > DIGEST_FROM_CHARS:
            # a reader that reads only the head and tail pages of a huge text still knows the whole one's digest
            extra["text_digest"] = normalised_digest(full)
        return {**extra,
            "status": "ok", "ref": ref_of(oid), "path": row.rel, "title": row.title,
            "format": row.format, "content_hash": row.content_hash, "matter": row.reference,
            "embedded": row.parent_id is not None, "mtime_ns": row.mtime_ns,
            "text": chunk, "offset": args.offset, "returned_chars": len(chunk), "total_chars": len(full),
            "has_more": end < len(full), "next_offset": end if end < len(full) else None,
            "tracked_changes": tracked_changes_digest(row.revisions or []),
            "mail": mail_headers(row.mail),
        }

    def search_documents(self, args: SearchDocumentsArgs) -> dict[str, Any]:
        """Rank the project's documents by title/name words and the query phrase in the text; exact totals.

        An empty query lists every document (of ``matter`` when given) by path.
        """
        q = args.query.strip()
        with self.ctx.db.engine.connect() as conn:
            rows = searchable_documents(conn, self.project_id, q, args.matter)
        ranked = []
        for r in rows:
            score = search_score(q, title=r.title, rel_path=r.rel, phrase_hit=bool(r.phrase))
            if score > 0:
                ranked.append((-score, r.rel, r))
        ranked.sort(key=lambda t: (t[0], t[1]))
        page = ranked[args.offset: args.offset + args.limit]
        return {"results": [{"path": r.rel, "title": r.title, "format": r.fmt, "matter": r.reference,
                             "content_hash": r.content_hash, "score": -s} for s, _, r in page],
                "page": {"offset": args.offset, "limit": args.limit, "total": len(ranked),
                         "has_more": args.offset + len(page) < len(ranked)}}

    def list_folder(self, args: ListFolderArgs) -> dict[str, Any]:
        """One folder: files (with full paths) and subfolders with exact totals."""
        try:
            view = folder_listing(self.ctx.db, self.source_id, args.path)
        except LookupError as exc:
            raise ToolError(str(exc)) from exc
        base = "" if view["folder"] == "/" else view["folder"] + "/"
        for f in view.get("files", []):
            f["path"] = base + f["name"]
        return view

    def tools(self) -> list[Tool]:
        """The three tools, named and described for the model."""
        return [
            Tool("list_folder", "List a folder of the source: its files (path, size, title, matter) and subfolders "
                 "with file counts. '/' lists the source root; any listed subfolder can be opened.",
                 ListFolderArgs, self.list_folder),
            Tool("search_documents", "Search the firm's documents by words of their title or name and by a phrase "
                 "in their text, optionally within one matter; an empty query lists them. Returns {results: [{path, "
                 "title, format, matter, content_hash}], page: {offset, limit, total, has_more}} with an exact total.",
                 SearchDocumentsArgs, self.search_documents),
            Tool("open_file", "Read a file's converted text from offset (at most max_chars). Returns its ref — the "
                 "only handle you may cite in the answer — and has_more/next_offset: keep reading while has_more is "
                 "true, a page is not the whole file. Also its tracked-changes digest and e-mail headers. A file that "
                 "is not converted yet may come back with status busy / in_progress / quarantined instead.",
                 OpenFileArgs, self.open_file),
        ]
