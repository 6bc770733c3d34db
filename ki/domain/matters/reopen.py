"""Files a practice-management import decides differently: their Classify re-opened through the state machine.

Spec: insertion-pipeline.md "producer_version semantics" (a stage run again sends every stage derived from
it round again: "re-running one without invalidating what was derived from it would leave the document
half-old") and "Classify" (imported matters are authoritative; ``ki matters import`` after
``ki insert``). The import changes what the rules know (:class:`~ki.domain.matters.references.KnownReferences`:
references, aliases, client numbers, client names). For every classified file, :func:`reopen_after_import`
asks the rules' evidence (:func:`ki.domain.matters.evidence.infer_reference`, over the same converted text and
corpus Classify reads) what they say with the knowledge before and after the import; a file whose answer
changed (``UNASSIGNED-…`` → the imported matter, a pattern-found reference → the imported matter it is an
alias of, a client number that now names one matter) has its recorded decision forgotten and its
``classify_matter`` row put back to pending, every later stage back to waiting
(:func:`ki.store.downstream.request_rerun_from`, lane ``rerun``); the next run classifies it again as any file.
Nothing is updated by hand. Re-importing the same list changes no knowledge, so it re-opens nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ki.config.reference_patterns import ReferenceFormats
from ki.core.taxonomies import LANE_RERUN
from ki.core.text_window import window_text, windowed_body
from ki.domain.matters.evidence import infer_reference
from ki.domain.matters.references import KnownReferences, is_placeholder
from ki.store.corpus import DbCorpus, evidence_text
from ki.store.db import Database
from ki.store.downstream import request_rerun_from
from ki.store.matters import forget_classifications, normalise_reference
from ki.store.objects import classified_objects, structured_body

STAGE = "classify_matter"

@dataclass
class ReopenReport:
    """What :func:`reopen_after_import` found.

    Attributes:
        examined: classified files whose evidence was read.
        changed: (path, reference before, reference after) of the files the import decides differently
            (None: no evidence, the placeholder).
        reopened: ``classify_matter`` rows put back to pending (a row already pending or failed runs anyway
            and is not counted).
    """

    examined: int = 0
    changed: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    reopened: int = 0


def _inputs(db: Database, oid: int, parent_id: int | None, *, head_chars: int, tail_chars: int
            ) -> tuple[str, dict | None] | None:
    """The text and mail headers Classify decides from (its bounded window, the container's after it)."""
    with db.engine.connect() as conn:
        own_body = structured_body(conn, oid)
        parent = structured_body(conn, parent_id) if parent_id is not None else None
    if own_body is None:
        return None
    body, _ = windowed_body(own_body, head_chars=head_chars, tail_chars=tail_chars)
    own = evidence_text(body)
    parent_body = parent if parent is not None else {}
    parent_text = window_text(parent_body.get("text"), head_chars=head_chars, tail_chars=tail_chars)[0] \
        if parent is not None else ""
    return own + ("\n" + parent_text if parent_text else ""), body.get("mail") or parent_body.get("mail")


def reopen_after_import(db: Database, *, project_id: int, before: KnownReferences, after: KnownReferences,
                        formats: ReferenceFormats | None, firm_names: Sequence[str] = (), head_chars: int,
                        tail_chars: int, progress: Callable[[int, int], None] | None = None) -> ReopenReport:
    """Re-open Classify for the files the import decides differently (see module doc).

    Args:
        before / after: the imported matters as the rules knew them before and after the import.
        formats: the firm's reference formats (``firm.matter_reference_patterns``; None: the defaults).
        firm_names: ``firm.name`` and ``firm.aliases`` (never a client).
        head_chars / tail_chars: ``pipeline.text_window`` (the part of a huge text Classify reads).
        progress: called with (files examined, files in all) now and then.
    Returns: :class:`ReopenReport`. Cost: two evidence readings per classified file whose current matter
    differs from what the rules now say (one for the others); no model is called.
    """
    report = ReopenReport()
    if (before.refs, before.client_numbers, before.client_names) == (after.refs, after.client_numbers,
                                                                      after.client_names):
        return report  # the import changed nothing the rules read
    with db.engine.connect() as conn:
        files = classified_objects(conn, project_id)
    stale: list[int] = []
    corpora: dict[int, DbCorpus] = {}
    for i, f in enumerate(files, 1):
        inputs = _inputs(db, f.id, f.parent_id, head_chars=head_chars, tail_chars=tail_chars)
        if progress is not None and (i % 50 == 0 or i == len(files)):
            progress(i, len(files))
        if inputs is None:
            continue
        report.examined += 1
        corpus = corpora.setdefault(f.source_id, DbCorpus(db, project_id=project_id, source_id=f.source_id))

        def says(known: KnownReferences, f=f, inputs=inputs, corpus=corpus) -> str | None:
            ev = infer_reference(f.rel, inputs[0], inputs[1], corpus, firm_names=firm_names, formats=formats,
                                 known=known)
            return ev.reference if ev is not None else None

        now = says(after)
        now = normalise_reference(now) if now is not None else None
        current = None if is_placeholder(f.reference) else f.reference
        if now == current:
            continue  # already where the import would put it
        then = says(before)
        then = normalise_reference(then) if then is not None else None
        if then != now:
            report.changed.append((f.rel, then, now))
            stale.append(int(f.id))
    if stale:
        with db.engine.begin() as conn:
            forget_classifications(conn, stale)  # decided again, not reused
            report.reopened = request_rerun_from(conn, stale, STAGE, lane=LANE_RERUN)
    return report
