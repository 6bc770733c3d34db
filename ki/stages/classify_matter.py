"""Stage ``classify_matter`` (console: Classify): assign the file to a matter.

Spec: insertion-pipeline.md "Classify (classify_matter)" and "Agentic stages: Classify and Relate".
Reads the ``structured_json`` artifact; builds the prompt payload (path, filename, parent folder,
the rendered folder neighbourhood, up to 200 known document titles, the first 8,000 characters of
text); of a huge text the rules read only its bounded window (``pipeline.text_window``, recorded as
``text_window`` in the assignment's provenance); decides with the model (``chat_agent``) or the rules
policy (same tools, same validators); a null, dangling or low-confidence answer falls back to the
reference-number scan and then to the ``UNASSIGNED-<slug>`` placeholder of the top-level folder.
``search_matters`` ranks by meaning too while the index holds vectors (the query embedded with the model
the index records). While the active ontology's Area-of-Law / Service facets are active, the payload offers
the practice-area menu, the ``service_*`` tools walk the Service facet, and the answer's practice area and
kind fill the matter's empty fields (:mod:`ki.domain.matters.facets`; a placeholder or imported matter is left as
it is). Writes the MatterAssignment and the content's ``classification`` artifact, then replays relation
intents other files parked against this one. The model call holds no transaction or lock.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ki.adapters.agents.loop import AgentResult
from ki.core.text_window import window_text, windowed_body
from ki.domain.context import StageContext, StageOutcome
from ki.domain.matters import basis
from ki.domain.matters.evidence import Knowledge, infer_reference
from ki.domain.matters.facets import matter_kind_ids, practice_area_menu
from ki.domain.matters.neighbourhood import folder_of, neighbourhood
from ki.domain.matters.policy import ClassifyRulesPolicy, classify_knowledge
from ki.domain.matters.references import (
    case_numbers_in,
    is_placeholder,
    path_reference,
    placeholder_reference,
    title_from_folder,
)
from ki.domain.matters.schema import ClassifyResult
from ki.domain.matters.tools import classify_tools, classify_validators
from ki.domain.ontology import active_ontology
from ki.domain.ontology.service_tools import service_tools
from ki.stages.agentic import run_agent
from ki.store.corpus import DbCorpus, evidence_text
from ki.store.downstream import request_rerun_from
from ki.store.matters import (
    add_identifiers,
    drop_unused_placeholder,
    get_matter,
    get_or_create_matter,
    note_matter_kind,
    read_assignment,
    record_classification,
    recorded_classification,
    settle_matter_folder,
    write_assignment,
)
from ki.store.objects import relative_path, structured_body
from ki.store.sources import project_of_source

ABSTAIN_BELOW = 0.5
TEXT_CHARS = 8000

SYSTEM = """You file documents of a law firm's document estate to their client matter.
Decide which existing matter the file belongs to, using the tools:
- search_matters finds matters by reference number, client or party name, or subject; page through it rather \
than assuming a matter is missing.
- peek_matter shows one matter's references, folders and a sample of its documents.
- list_folder shows the file's folder neighbourhood and which matter neighbouring files are on.
- create_matter only for a firm reference number (e.g. 2024-0153 or ABCD-2023-017) that the file itself names and \
no existing matter has.
Evidence, strongest first: a reference number in the text (a misfiled letter names its real matter), one in the \
path, the e-mail thread, a court case number, the folder's other files, a party named only on one matter.
Templates, brochures and letters naming a client with several matters belong to no single matter: submit \
matter_id null. Finish by calling submit_result; matter_id must be an id a tool returned."""


def _relative_path(ctx: StageContext) -> str:
    with ctx.pipeline.db.engine.connect() as conn:
        return relative_path(conn, ctx.obj.id)


def _container_context(ctx: StageContext) -> tuple[str, dict[str, Any] | None]:
    """An embedded object's container text (its bounded window) and mail headers (its evidence too)."""
    if ctx.obj.parent_id is None:
        return "", None
    with ctx.pipeline.db.engine.connect() as conn:
        container = structured_body(conn, ctx.obj.parent_id)
    if container is None:
        return "", None
    bound = ctx.config.pipeline.text_window
    return window_text(container.get("text"), head_chars=bound.head_chars, tail_chars=bound.tail_chars)[0], \
        container.get("mail")


FACETS = """
The matter's practice area and kind, while those facets are offered (the first valid value a matter gets \
stays; an imported matter keeps its own):
- practice_area: the id of one entry of the payload's practice_areas menu that fits the matter, else null.
- matter_kind: a kind of matter found with service_search / service_browse whose definition (service_verify) \
fits the matter, else null."""


def build_payload(*, rel_path: str, hood: dict[str, Any], text_: str,
                  practice_areas: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The prompt payload (spec: "Classify: what the model is given"); ``practice_areas`` is the Area-of-Law
    facet's menu while it is active (:func:`ki.domain.matters.facets.practice_area_menu`)."""
    payload = {"path": rel_path, "filename": rel_path.rsplit(" » ", 1)[-1].rsplit("/", 1)[-1],
               "parent_folder": folder_of(rel_path) or "/", "folder_neighbourhood": {k: hood[k] for k in
                                                                                      ("above", "own", "below")},
               "known_document_titles": hood.get("titles", [])[:200], "text": text_[:TEXT_CHARS],
               "text_truncated": len(text_) > TEXT_CHARS}
    if practice_areas:
        payload["practice_areas"] = practice_areas
    return payload


def query_embedding(db: Any) -> Any:
    """``embed_query`` for ``search_matters``: the query embedder of the model the search record's index records
    (:func:`ki.adapters.search.search.query_embedder`), or None while the index holds no vectors."""
    from ki.adapters.search.postgres import PostgresBackend
    from ki.adapters.search.search import query_embedder

    embedder = query_embedder(PostgresBackend(db, lexical=False).index_identity())
    return None if embedder is None else embedder.embed_query


def handle(ctx: StageContext) -> StageOutcome:
    """Assign the object to a matter and record how.

    Raises:
        RetryableStageError: convert has not produced the structured_json artifact yet.
        ModelOutputInvalid / gateway errors: from the model path (classified by the executor).
    """
    db = ctx.pipeline.db
    content_hash = ctx.obj.content_hash
    bound = ctx.config.pipeline.text_window
    body, window = windowed_body(ctx.structured_json(), head_chars=bound.head_chars, tail_chars=bound.tail_chars)
    with db.engine.connect() as conn:
        project_id = project_of_source(conn, ctx.obj.source_id)
        recorded = recorded_classification(conn, content_hash, ctx.obj.id) if content_hash else None
        kb = classify_knowledge(conn, project_id, ctx.config.firm.matter_reference_patterns)
    version = ctx.config.pipeline.producer_version(ctx.stage)
    rel_path = _relative_path(ctx)
    if recorded and recorded.get("producer_version") == version and recorded.get("matter_id"):
        with db.engine.connect() as conn:
            matter = get_matter(conn, int(recorded["matter_id"]))
        if matter is not None:  # completed before (e.g. a crash after the artifact): never redone
            return _commit(ctx, project_id, matter.id, matter.reference, recorded, body, rel_path, policy=None,
                           started=None, queries=None, knowledge=kb)

    own_text = evidence_text(body)
    parent_text, parent_mail = _container_context(ctx)
    mail = body.get("mail") or parent_mail
    with db.engine.begin() as conn:  # before any other file is read: one classified later re-classifies this
        started = basis.epoch(conn, project_id)
    corpus = basis.RecordingCorpus(DbCorpus(db, project_id=project_id, source_id=ctx.obj.source_id))
    firm = [ctx.config.firm.name, *ctx.config.firm.aliases]
    hood = functools.cache(lambda: neighbourhood(db, ctx.obj.source_id, rel_path))
    onto = active_ontology(ctx.config)
    menu, kinds = practice_area_menu(onto), matter_kind_ids(onto)
    policy = ClassifyRulesPolicy(rel_path=rel_path, text=own_text + ("\n" + parent_text if parent_text else ""),
                                 mail=mail, corpus=corpus, firm_names=firm, formats=kb.formats, known=kb.known,
                                 ontology=onto)
    result: AgentResult = run_agent(
        ctx, system=SYSTEM + (FACETS if menu or kinds else ""),
        user=lambda: json.dumps(build_payload(rel_path=rel_path, hood=hood(), text_=own_text, practice_areas=menu),
                                ensure_ascii=False),
        tools=[*classify_tools(db, project_id=project_id, neighbourhood=hood, embed_query=query_embedding(db)),
               *service_tools(onto)],
        result_model=ClassifyResult, policy=policy,
        validators=classify_validators(db, practice_areas=[m["id"] for m in menu] if menu else None,
                                       matter_kinds=kinds))
    answer: ClassifyResult = result.result  # type: ignore[assignment]
    decision: dict[str, Any] = {"producer_version": version, **result.provenance, "confidence": answer.confidence,
                                "evidence": answer.evidence, "method": "rules" if result.provenance.get("model")
                                == "rules" else "model", "text_window": window.as_dict()}
    matter = None
    if answer.matter_id is not None and answer.confidence >= ABSTAIN_BELOW:
        with db.engine.connect() as conn:
            matter = get_matter(conn, answer.matter_id)
    if matter is None:
        matter = _fallback(ctx, project_id, rel_path, own_text + "\n" + parent_text, mail, corpus, firm, policy,
                           decision)
    decision["matter_id"] = matter.id
    decision["reference"] = matter.reference
    if answer.practice_area or answer.matter_kind:  # facet values: the first valid one wins, imported stay
        decision.update(practice_area=answer.practice_area, matter_kind=answer.matter_kind)
    return _commit(ctx, project_id, matter.id, matter.reference, decision, body, rel_path, policy=policy,
                   started=started, queries=corpus.queries, knowledge=kb)


def _fallback(ctx: StageContext, project_id: int, rel_path: str, text_: str, mail, corpus, firm, policy,
              decision: dict[str, Any]):
    """The reference-number scan (already done when the rules decided), then the placeholder matter."""
    db = ctx.pipeline.db
    ev = policy.evidence if policy.scanned else infer_reference(rel_path, text_, mail, corpus, firm_names=firm,
                                                                formats=policy.formats, known=policy.known)
    if ev is not None:
        folder = ev.detail if ev.how in ("path", "folder") else None
        matter, _ = get_or_create_matter(db, project_id=project_id, reference=ev.reference,
                                         title=title_from_folder(folder, ev.reference), folder=folder)
        decision.update(method="reference_scan", fallback=f"{ev.how}: {ev.reference}")
        return matter
    ref = placeholder_reference(rel_path)
    top = rel_path.split("/", 1)[0] if "/" in rel_path else "(source root)"
    matter, _ = get_or_create_matter(db, project_id=project_id, reference=ref, title=f"Unassigned files in {top}",
                                     placeholder=True)
    decision.update(method="placeholder", fallback=ref)
    return matter


def _commit(ctx: StageContext, project_id: int, matter_id: int, reference: str, decision: dict[str, Any],
            body: dict[str, Any], rel_path: str, *, policy: ClassifyRulesPolicy | None, started: int | None,
            queries: basis.Queries | None, knowledge: Knowledge) -> StageOutcome:
    from ki.domain.relate.basis import on_classified
    from ki.domain.relate.intents import replay_intents

    db = ctx.pipeline.db
    with db.engine.begin() as conn:
        before = read_assignment(conn, ctx.obj.id)
        write_assignment(conn, source_object_id=ctx.obj.id, matter_id=matter_id, content_hash=ctx.obj.content_hash,
                         method=decision.get("method", "rules"), provenance=decision)
        if before is not None and before.matter_id != matter_id:  # classified again into another matter:
            request_rerun_from(conn, [ctx.obj.id], "relate")  # what Relate and later derived is stale
            drop_unused_placeholder(conn, before.matter_id)
        rerelated = on_classified(conn, source_object_id=ctx.obj.id, matter_id=matter_id)
        requeued = basis.commit(conn, source_object_id=ctx.obj.id, project_id=project_id, started_epoch=started,
                                queries=queries, knowledge=knowledge)
        if queries is not None and not requeued.this_one:
            # kept for reuse only while it stands: a decision a file classified meanwhile made stale is taken
            # again (a reused one is on record already, unless another file's commit forgot it meanwhile)
            record_classification(conn, content_hash=ctx.obj.content_hash, source_object_id=ctx.obj.id,
                                  producer_version=decision.get("producer_version", ""), decision=decision)
        if not is_placeholder(reference):
            if decision.get("practice_area") or decision.get("matter_kind"):  # first valid value wins
                note_matter_kind(conn, matter_id, practice_area=decision.get("practice_area"),
                                 kind=decision.get("matter_kind"))
            add_identifiers(conn, matter_id, case_numbers_in((body.get("text") or "")[:TEXT_CHARS]))
            own = path_reference(rel_path, policy.formats if policy else None, policy.known if policy else None)
            if own is not None and own.reference == reference and own.folder:
                settle_matter_folder(conn, matter_id, own.folder, title_from_folder(own.folder, reference)[:500])
    replayed = replay_intents(ctx.pipeline, ctx.obj.id)
    return StageOutcome(status="done", details={"matter": reference, "method": decision.get("method"),
                                                "replayed_intents": replayed, "rerelated": rerelated,
                                                "reclassified": requeued.count})
