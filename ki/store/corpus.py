"""The converted files of a project, read for evidence (:class:`DbCorpus` is a
:class:`ki.domain.matters.evidence.Corpus`; :class:`CorpusFile` is the row it returns).

Each query runs on its own short connection (no transaction is held across a model call) and
reads only converted text (the ``structured_json`` artifact: the mail subject, every part, the body —
:func:`evidence_text`), never other files' classification,
so the evidence is the same whichever order workers classify in. Paths are relative to the
source root; an embedded object's path is its container's followed by `` » name``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from ki.core.like_pattern import like_escape
from ki.store.db import Database
from ki.store.objects import REL_PATH

HEAD_CHARS = 6000
MAX_ROWS = 2000
#: How much of each file's text :meth:`DbCorpus.files_containing` searches (and the classify basis reads to
#: decide whether a newly classified file answers such a query): the first 2 million characters. A bound,
#: so one huge text does not make every query of the project lowercase all of it.
CONTAINING_CHARS = 2_000_000


def _evidence_sql(body_text: str) -> str:
    """The text a file's evidence is read from: the mail subject, every other part (headers, footers,
    notes …), then the body (the SQL expression ``body_text``) — a reference may be in any of them."""
    return f"""concat_ws(E'\\n', a.body->'mail'->>'subject',
    (SELECT string_agg(p.value, E'\\n' ORDER BY p.key) FROM jsonb_each_text(
        CASE WHEN jsonb_typeof(a.body->'parts') = 'object' THEN a.body->'parts' ELSE '{{}}'::jsonb END) p),
    {body_text})"""


#: The lower-cased text :meth:`DbCorpus.files_containing` searches; the expression of ``ix_artifact_text_trgm``
#: (the same literal length, or the planner cannot use the index).
CONTAINING_TEXT = f"lower(left(a.body->>'text', {CONTAINING_CHARS}))"
#: SQL escaping a string expression (``{}``) for LIKE with ``ESCAPE '\'``: backslash, ``%`` and ``_``.
_LIKE_ESCAPED_SQL = r"replace(replace(replace({}, '\', '\\'), '%', '\%'), '_', '\_')"


#: :func:`_evidence_sql` of the whole body text.
EVIDENCE_TEXT = _evidence_sql("a.body->>'text'")
#: The first ``:head`` characters of :data:`EVIDENCE_TEXT` without concatenating a huge body whole first.
EVIDENCE_HEAD = _evidence_sql("left(a.body->>'text', :head)")

_BASE = f"""
SELECT {REL_PATH} AS rel, left({EVIDENCE_HEAD}, :head) AS head, a.body->'mail' AS mail
FROM source_object so
JOIN source s ON s.id = so.source_id
JOIN artifact a ON a.content_hash = so.content_hash AND a.kind = 'structured_json'
WHERE s.project_id = :p AND so.deleted_at IS NULL
"""


@dataclass(frozen=True)
class CorpusFile:
    """Another converted file: its path (relative to the source root), text head and mail headers."""

    path: str
    text: str
    mail: dict[str, Any] | None = None


class DbCorpus:
    """Evidence queries over the converted files of one project.

    Args:
        db: the database.
        project_id: the project whose sources are searched.
        source_id: folder queries (:meth:`files_under`) stay inside this source.
    """

    def __init__(self, db: Database, *, project_id: int, source_id: int):
        self.db = db
        self.project_id = project_id
        self.source_id = source_id

    def _rows(self, where: str, params: dict) -> list[CorpusFile]:
        sql = text(_BASE + where + " ORDER BY so.id LIMIT :lim")
        with self.db.engine.connect() as conn:
            rows = conn.execute(sql, {"p": self.project_id, "head": HEAD_CHARS, "lim": MAX_ROWS, **params})
            return [CorpusFile(r.rel, r.head or "", _mail(r.mail)) for r in rows]

    def files_under(self, folder: str) -> list[CorpusFile]:
        """Converted files below ``folder`` (recursively) in this source (a prefix match on the relative path:
        ``ix_source_object_source_external``)."""
        return self._rows(r" AND so.source_id = :s AND so.external_id LIKE :prefix ESCAPE '\'",
                          {"s": self.source_id, "prefix": like_escape(folder.rstrip("/") + "/") + "%"})

    def files_containing(self, needle: str) -> list[CorpusFile]:
        """Converted files of the project whose text (its first :data:`CONTAINING_CHARS`) contains ``needle``
        (case-insensitive; the trigram index ``ix_artifact_text_trgm`` finds the candidates)."""
        return self._rows(f" AND {CONTAINING_TEXT} LIKE '%' || {_LIKE_ESCAPED_SQL.format('lower(:n)')} || '%' "
                          r"ESCAPE '\'", {"n": needle})

    def emails_linked(self, message_ids: list[str]) -> list[CorpusFile]:
        """Messages whose Message-ID is one of ``message_ids`` or that reply to / reference one."""
        return self._rows("""
            AND a.body ? 'mail' AND (a.body->'mail'->>'message_id' = ANY(:ids)
                 OR a.body->'mail'->>'in_reply_to' = ANY(:ids)
                 OR (jsonb_typeof(a.body->'mail'->'references') = 'array'
                     AND (a.body->'mail'->'references') ?| CAST(:ids AS text[])))""", {"ids": message_ids})


def evidence_text(body: dict) -> str:
    """A ``structured_json`` body's evidence text, as :data:`EVIDENCE_TEXT` reads it in SQL: the mail
    subject, the other parts, then the body text."""
    parts = body.get("parts") if isinstance(body.get("parts"), dict) else {}
    subject = (body.get("mail") or {}).get("subject")
    return "\n".join(x for x in [subject, *(str(parts[k]) for k in sorted(parts)), body.get("text") or ""] if x)


def _mail(value) -> dict | None:
    if not value:
        return None
    return {"message_id": value.get("message_id"), "in_reply_to": value.get("in_reply_to"),
            "references": list(value.get("references") or []), "subject": value.get("subject")}
