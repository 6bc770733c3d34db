"""The Relate rules policy: gather the neighbours through the tools, decide with
:func:`ki.domain.relate.policy_decide.decide`.

DESIGN.md "Two deployments"; spec: insertion-pipeline.md "Relate" and "Agentic stages". The policy
lists the documents of the file's matter (``search_documents`` with an empty query, paged to the
exact total) and opens what a careful reader would: the files with identical bytes, the messages
the file's headers name, its own attachments, the documents whose name or title reduces to the
same document name, those whose title or name carries a word the file cites them by (or the file
name it cites), for an annex those mentioning its label (``search_documents`` by phrase), and for
an e-mail the messages with the same subject. Each is read in full with ``open_file`` (paging
while ``has_more``), so every ref in the answer comes from an ``open_file`` result and passes the
same validators as a model's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ki.adapters.agents.loop import AgentState, Tool
from ki.config.settings import TextWindowConfig
from ki.core.errors import ToolError
from ki.core.text_window import TextWindow, window_of_parts
from ki.domain.relate.facts import FileFacts
from ki.domain.relate.policy_decide import decide
from ki.domain.relate.schema import RelateResult
from ki.domain.relate.tools import DIGEST_FROM_CHARS
from ki.domain.relate.wants import Wants, listed_facts

PAGE = 100
READ_CHARS = 100_000


def facts_from_open(result: dict[str, Any], text: str, reference_patterns: tuple[str, ...] = (),
                    windowed: tuple[TextWindow, str] | None = None) -> FileFacts:
    """FileFacts of a file read with ``open_file`` (``text``: all its pages joined, or with ``windowed`` =
    (bound, whole text's digest) its reading window; ``reference_patterns``: the firm's matter-reference
    formats, see :class:`FileFacts`)."""
    body = {"format": result.get("format"), "title": result.get("title"), "text": text,
            "revisions": [{"kind": k} for k, n in (result.get("tracked_changes") or {}).get("by_kind", {}).items()
                          for _ in range(n)]}
    mail = result.get("mail")
    if mail:
        body["mail"] = {"message_id": mail.get("message_id"), "in_reply_to": mail.get("in_reply_to"),
                        "references": mail.get("references"), "subject": mail.get("subject"),
                        "date": mail.get("date"),
                        "sender": {"address": mail.get("from"), "name": mail.get("from_name")},
                        "attachments": mail.get("attachments")}
    return FileFacts.from_artifact(ref=result["ref"], path=result["path"], body=body,
                                   mtime_ns=result.get("mtime_ns"), content_hash=result.get("content_hash") or "",
                                   embedded=bool(result.get("embedded")), matter=result.get("matter"),
                                   reference_patterns=reference_patterns, windowed=windowed)


def _read(state: AgentState, path: str, start: int, end: int) -> str:
    """Characters ``start`` to ``end`` of ``path``'s text, page by page (``open_file``)."""
    parts, offset = [], start
    while offset < end:
        page = state.call("open_file", path=path, offset=offset, max_chars=min(READ_CHARS, end - offset))
        if not page.get("text"):
            break
        parts.append(page["text"])
        offset += len(page["text"])
    return "".join(parts)


def read_whole(state: AgentState, path: str, reference_patterns: tuple[str, ...] = ()) -> FileFacts | None:
    """Open ``path`` and page through what the rules read of it; None when it cannot be read now (status
    busy/in_progress/...). A text longer than the reading window (:data:`ki.domain.relate.tools.DIGEST_FROM_CHARS`:
    ``pipeline.text_window``'s defaults, as :meth:`FileFacts.from_artifact` windows every text) is read only in
    the window's pages — its head and its tail — with the whole text's digest from the first page: the same
    facts as reading every page, without paging through the middle (a 120 MB neighbour took 1,200 pages, each
    loading the whole text: tens of minutes per relate of every file in its matter)."""
    try:
        first = state.call("open_file", path=path, offset=0, max_chars=READ_CHARS)
    except ToolError:
        return None
    if first.get("status") != "ok":
        return None
    total = int(first.get("total_chars") or 0)
    if total > DIGEST_FROM_CHARS and first.get("text_digest"):
        bound_config = TextWindowConfig()
        head, tail = bound_config.head_chars, bound_config.tail_chars
        head_part = first["text"] + _read(state, path, len(first["text"]), head)
        window, bound = window_of_parts(head_part[:head], _read(state, path, total - tail, total), total,
                                        head_chars=head, tail_chars=tail)
        return facts_from_open(first, window, reference_patterns, windowed=(bound, first["text_digest"]))
    parts = [first["text"]]
    page = first
    while page.get("has_more"):
        page = state.call("open_file", path=path, offset=page["next_offset"], max_chars=READ_CHARS)
        parts.append(page["text"])
    return facts_from_open(first, "".join(parts), reference_patterns)


@dataclass
class RelateRulesPolicy:
    """Relate one file by the rules.

    Args:
        me: the current file's facts (from its own artifact, with ``original_text``).
        matter: its matter reference.
        extra_paths: files the payload names besides the matter's documents (identical bytes,
            messages named in the headers, attachments).
        wants: what the decision reads (:class:`ki.domain.relate.wants.Wants`, recorded on the file's relate
            basis); default ``Wants.of(me)``.
    """

    me: FileFacts
    matter: str
    extra_paths: Sequence[str] = ()
    wants: Wants | None = None
    pool: list[FileFacts] | None = field(default=None, init=False)

    def _search_all(self, state: AgentState, query: str) -> list[dict[str, Any]]:
        out, offset = [], 0
        while True:
            found = state.call("search_documents", query=query, matter=self.matter, limit=PAGE, offset=offset)
            out.extend(found["results"])
            if not found["page"]["has_more"]:
                return out
            offset += PAGE

    def gather(self, state: AgentState) -> list[FileFacts]:
        """List the matter, choose the plausible candidates (:meth:`Wants.by_listing`), open each once."""
        wants = self.wants or Wants.of(self.me)
        pool: dict[str, FileFacts] = {}
        for path in self.extra_paths:  # copies, named messages, attachments: their bytes select their twins
            facts = read_whole(state, path, self.me.reference_patterns)
            if facts is not None and facts.ref != self.me.ref:
                pool[path] = facts
        held = {f.content_hash for f in pool.values()}
        paths: dict[str, None] = {}
        for listed in self._search_all(state, ""):
            if wants.by_listing(listed_facts(listed), held_hashes=held):
                paths[listed["path"]] = None
        if self.me.annex_label:
            for listed in self._search_all(state, self.me.annex_label):
                paths[listed["path"]] = None
        for path in paths:
            if path in pool or path == self.me.path:
                continue
            facts = read_whole(state, path, self.me.reference_patterns)
            if facts is not None and facts.ref != self.me.ref:
                pool[path] = facts
        return list(pool.values())

    def decide(self, tools: Sequence[Tool], state: AgentState) -> RelateResult:
        """Gather once, then decide (a later round after a rejection decides on the same evidence)."""
        if self.pool is None:
            self.pool = self.gather(state)
        return decide(self.me, self.pool)
