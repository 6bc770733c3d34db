"""The basis of a classification, and classifying again when a file its evidence would have read arrives.

Spec: insertion-pipeline.md "Classify" (results do not depend on processing
order). The rules find a file's matter from other files' converted text (the thread, a case
number, the folder's other files, a party's name — :func:`ki.domain.matters.evidence.infer_reference`);
a file converted *after* that decision was not read. :class:`RecordingCorpus` records every
corpus query a decision makes and the files it returned; when another file classifies, every
earlier decision whose queries would return it, and which did not see it, is taken again (its
classify row goes back to pending and the later stages wait again), so the final matters are
those of the whole estate.

Protocol, on one advisory lock per project (``classify-project``) and a per-project epoch:

* :func:`epoch` — when a classification starts, under the lock shared: the epoch it starts at.
* :func:`commit` — inside Classify's commit transaction, under the lock exclusive: bump the epoch,
  record this decision's queries; requeue *this* decision when a file classified since it started
  answers one of its queries unseen, and requeue every other decision of the project that this
  file answers unseen. A requeued classification that lands in another matter sends the file's
  later stages round again (:func:`ki.store.downstream.request_rerun_from`, called by the stage).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy.engine import Connection

from ki.domain.matters.evidence import Corpus, CorpusFile, Knowledge
from ki.domain.matters.references import own_reference
from ki.domain.ontology.terms import fold
from ki.store.classify_basis import (
    bases_touching,
    basis_file,
    files_classified_since,
    lock_project,
    next_epoch,
    read_epoch,
    record_basis,
)
from ki.store.downstream import request_rerun
from ki.store.matters import forget_classifications

STAGE = "classify_matter"
_WORD = re.compile(r"[a-z0-9]+")


def _key_word(needle: str) -> str:
    """The longest folded word of a needle (the index key a file's words are matched against)."""
    words = _WORD.findall(fold(needle))
    return max(words, key=lambda w: (len(w), w)) if words else ""


@dataclass
class Queries:
    """The corpus queries one decision made, and the files (paths) they returned."""

    under: set[str] = field(default_factory=set)
    containing: set[str] = field(default_factory=set)
    linked: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def as_json(self) -> dict[str, list[str]]:
        return {"under": sorted(self.under), "containing": sorted(self.containing), "linked": sorted(self.linked)}

    @classmethod
    def from_json(cls, data: dict[str, Any], seen: list[str] | None = None) -> Queries:
        return cls(set(data.get("under") or []), set(data.get("containing") or []), set(data.get("linked") or []),
                   set(seen or []))

    def answered_by(self, f: NewFile) -> bool:
        """Whether one of the queries returns ``f`` (the corpus's own semantics), the decision did not see it, and
        it can change the decision (a linked message always can; other files when they state a reference)."""
        if f.rel in self.seen:
            return False
        if bool(self.linked & f.mail_ids):
            return True
        if not f.contributes:
            return False
        if any(f.same_source and f.external_id.startswith(folder.rstrip("/") + "/") for folder in self.under):
            return True
        low = f.text.lower()
        return any(n.lower() in low for n in self.containing)


class RecordingCorpus:
    """A :class:`~ki.domain.matters.evidence.Corpus` that records what it was asked and what it returned."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self.queries = Queries()

    def _seen(self, files: list[CorpusFile]) -> list[CorpusFile]:
        self.queries.seen.update(f.path for f in files)
        return files

    def files_under(self, folder: str) -> list[CorpusFile]:
        self.queries.under.add(folder)
        return self._seen(self.corpus.files_under(folder))

    def files_containing(self, needle: str) -> list[CorpusFile]:
        self.queries.containing.add(needle)
        return self._seen(self.corpus.files_containing(needle))

    def emails_linked(self, message_ids: list[str]) -> list[CorpusFile]:
        self.queries.linked.update(message_ids)
        return self._seen(self.corpus.emails_linked(message_ids))


@dataclass(frozen=True)
class NewFile:
    """A classified file as the corpus queries see it.

    ``contributes``: the file states a matter reference of its own — what the folder, case-number and
    name evidence counts; a file without one cannot change such a decision, so it triggers none.
    """

    rel: str
    external_id: str
    text: str
    mail_ids: frozenset[str]
    same_source: bool = True
    contributes: bool = True


def epoch(conn: Connection, project_id: int) -> int:
    """The project's classification epoch now (run in a short transaction before the decision reads)."""
    lock_project(conn, project_id, shared=True)
    return read_epoch(conn, project_id)


def _new_file(row: Any, source_id: int, contributes: bool | None = None) -> NewFile:
    mail = row.mail or {}
    ids = {i for i in [mail.get("message_id"), mail.get("in_reply_to"), *(mail.get("references") or [])] if i}
    return NewFile(rel=row.rel, external_id=row.external_id, text=row.text or "", mail_ids=frozenset(ids),
                   same_source=row.source_id == source_id,
                   contributes=bool(row.has_reference) if contributes is None else contributes)


class Requeued(NamedTuple):
    """What :func:`commit` sent back to pending: ``count`` classify rows (this one included), and whether
    ``this_one`` — the decision being committed — is stale. A stale decision must not be recorded for reuse
    (:func:`ki.store.matters.record_classification`): its rerun would take it again instead of deciding anew."""

    count: int
    this_one: bool


def commit(conn: Connection, *, source_object_id: int, project_id: int, started_epoch: int | None,
           queries: Queries | None, knowledge: Knowledge) -> Requeued:
    """Record the basis of the classification of ``source_object_id`` and requeue what it invalidates (see
    module doc). Call it before recording the decision itself, and record that only when
    ``Requeued.this_one`` is false.

    Args:
        started_epoch: :func:`epoch` when the decision started (None: a recorded decision was reused).
        queries: the decision's corpus queries (empty: it read no other file; None: a recorded decision
            was reused, and the basis its first commit wrote stays).
        knowledge: the firm's reference formats and imported matters (whether the file states a reference).
    Returns: :class:`Requeued` — how many classifications were requeued, and whether this one was.
    """
    lock_project(conn, project_id, shared=False)
    now = next_epoch(conn, project_id)
    q = queries or Queries()
    me = basis_file(conn, source_object_id)
    if me is None:
        return Requeued(0, False)
    states = own_reference(me.rel, me.head or "", formats=knowledge.formats, known=knowledge.known) is not None
    if queries is not None:  # a reused recorded decision keeps the basis its first commit wrote
        _record(conn, source_object_id, project_id, now, q, states)
    stale: list[int] = []
    if started_epoch is not None and (q.under or q.containing or q.linked):
        for row in files_classified_since(conn, project_id, started_epoch, source_object_id):
            if q.answered_by(_new_file(row, me.source_id)):
                stale.append(source_object_id)  # a file classified meanwhile answers this decision
                break
    stale.extend(_answered(conn, project_id, _new_file(me, me.source_id, states), me))
    if not stale:
        return Requeued(0, False)
    forget_classifications(conn, stale)  # decided again, not reused
    # the later stages run again only if the matter changes
    return Requeued(request_rerun(conn, stale, STAGE), source_object_id in stale)


def _record(conn: Connection, source_object_id: int, project_id: int, now: int, q: Queries, states: bool) -> None:
    record_basis(conn, source_object_id=source_object_id, project_id=project_id, epoch=now, has_reference=states,
                 queries_json=json.dumps(q.as_json(), ensure_ascii=False), seen=sorted(q.seen),
                 folders=sorted(f.rstrip("/") for f in q.under), ids=sorted(q.linked),
                 needle_words=sorted({w for w in map(_key_word, q.containing) if w}))


def _answered(conn: Connection, project_id: int, new: NewFile, me: Any) -> list[int]:
    """The other decisions of the project the newly classified file (``new``, its row ``me``) answers unseen.

    SQL reads only decisions :meth:`Queries.answered_by` can accept (not seen; folder and needle keys only
    when the file states a reference); the replay below decides."""
    stale: list[int] = []
    prefixes: list[str] = []
    words: list[str] = []
    if new.contributes:  # otherwise only a linked message can answer a query
        parts = [p for p in me.external_id.split("/")[:-1] if p]
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        words = sorted(set(_WORD.findall(fold(new.text))))
    if not (prefixes or words or new.mail_ids):
        return stale
    for b in bases_touching(conn, project_id, me.id, rel=new.rel, prefixes=prefixes, ids=sorted(new.mail_ids),
                            words=words):
        other = NewFile(new.rel, new.external_id, new.text, new.mail_ids, same_source=b.source_id == me.source_id,
                        contributes=new.contributes)
        if Queries.from_json(b.queries, b.seen).answered_by(other):
            stale.append(int(b.source_object_id))
    return stale
