"""Stage ``extract_metadata`` (console: Extract metadata): type, date, language, title, parties, identifiers.

Spec: insertion-pipeline.md "Extract metadata" (runs on every version, drafts included; sole owner of
document typing) and "Agentic stages" (same loop-and-validator mechanics as Classify/Relate against the
ontology; its context is the single document). Steps:

1. read the structured_json artifact (missing → RetryableStageError) and the active ontology;
2. read the document by rule (:func:`ki.domain.metadata.policy.read_document`) with the firm's names and the
   aliases of entities the firm already holds that occur in it (its gazetteer) — of a huge text only its
   bounded window (``pipeline.text_window``, :mod:`ki.core.text_window`; recorded as ``text_window`` in
   the Extraction provenance); the date comes from the content, else the file and folder names, else the
   mtime unless the folder's files share one mtime (:func:`ki.domain.metadata.path_dates.dated`);
3. decide with the model (``chat_agent`` with the ontology tools, ``search_entities`` and — when the
   clause facet is active — ``clause_search``) when ``KI_LLM_BASE_URL`` is set, else with the rules
   policy through the same tools; validators accept only visited, in-scope node ids;
4. in one transaction: resolve parties by rule under name locks, decide roles on the matter, write
   document_metadata, document_party and the Extraction row; store the notable_clauses artifact.

No transaction or lock is held while the model (or the policy) decides.
"""

from __future__ import annotations

import json
from typing import Any

from ki.core.text_window import windowed_body
from ki.domain.context import StageContext, StageOutcome
from ki.domain.entities.abbreviations import FolderScope
from ki.domain.entities.identifiers import Identifier, unique
from ki.domain.entities.mentions import KnownName, Mention
from ki.domain.entities.names import is_party_name, name_key
from ki.domain.entities.store import known_names
from ki.domain.entities.tools import search_entities_tool
from ki.domain.metadata.amounts import find_amounts
from ki.domain.metadata.matter import MatterContext, code_hint, folder_hints, matter_context
from ki.domain.metadata.parties import resolve_parties, settle_parties
from ki.domain.metadata.path_dates import UNIFORM_MIN_FILES, uniform_mtimes
from ki.domain.metadata.policy import MetadataRulesPolicy, Reading, mention_text, read_document
from ki.domain.metadata.schema import MetadataResult, make_validators
from ki.domain.ontology import active_ontology
from ki.domain.ontology.model import Ontology
from ki.domain.ontology.terms import tokens
from ki.domain.ontology.tools import ontology_tools
from ki.stages.agentic import gateway_configured, run_agent
from ki.store.metadata import MetadataRow, folder_mtimes, write_extraction, write_metadata, write_notable_clauses
from ki.store.sources import project_of_source

TEXT_CHARS = 12_000

SYSTEM = (
    "You extract the metadata of one legal document. Type it against the firm's document-type ontology: walk it "
    "with ontology_roots / ontology_children / ontology_node or find candidates with ontology_search, and submit "
    "as doc_type only a node id a tool returned (null when no type fits — an honest null is better than a guess). "
    "Give language (de/en), the date the document states for itself (letter date, draft 'Stand', signature date, "
    "register 'Abruf'), its own title, and every identifier as written. Parties are the legal parties (companies "
    "and natural persons who are parties), the law firms (ours and opposing counsel) and the court of the "
    "proceedings — not people who merely sign or act for a party, not a register court that only issues a number. "
    "Look each party up with search_entities and give entity_id only when a result clearly is that party; role is "
    "what the document says about the party's side (client = the party our firm acts for). When clause_search is "
    "offered, list notable clauses typed with ids it returns. Finish with submit_result."
)


def _rel_path(ctx: StageContext) -> str:
    root = ctx.obj.source_root.rstrip("/")
    path = ctx.obj.path
    return path[len(root) + 1:] if path.startswith(root + "/") else path


def _firm_names(ctx: StageContext) -> list[str]:
    firm = ctx.config.firm
    return [n for n in [firm.name, *firm.aliases] if n and n.strip()]


def _project_id(conn, ctx: StageContext) -> int:
    return project_of_source(conn, ctx.obj.source_id)


def _gazetteer(conn, project_id: int, text_: str) -> list[KnownName]:
    return [KnownName(e, alias, kind) for e, alias, kind in known_names(conn, project_id, tokens(text_[:200_000]))]


def _user_payload(ctx: StageContext, rel_path: str, body: dict[str, Any], reading: Reading) -> str:
    text_ = body.get("text") or ""
    return json.dumps({"path": rel_path, "format": body.get("format"), "title": reading.title,
                       "mail": body.get("mail"), "text": text_[:TEXT_CHARS], "text_truncated": len(text_) > TEXT_CHARS,
                       "rules_found_parties": [m.name for m in reading.mentions]}, ensure_ascii=False, default=str)


def _merge_agent_parties(result: MetadataResult, reading: Reading, firm_names: list[str]
                         ) -> tuple[list[Mention], dict[int, int]]:
    """The rule mentions plus the model's parties the rules missed; the model's roles count as inferred
    (roles are decided by rule); a party named like the firm is the firm; a name without a proper-name head
    (:func:`ki.domain.entities.names.is_party_name`) is no party."""
    firm_keys = {name_key(n, kind="law_firm").key for n in firm_names}
    mentions = list(reading.mentions)
    suggested: dict[int, int] = {}
    by_key = {m.key.key: m for m in mentions}
    for p in result.parties:
        key = name_key(p.name, kind=p.kind)
        if key.empty or not is_party_name(p.name, kind=p.kind):  # a description or a role label
            continue
        m = by_key.get(key.key)
        if m is None:
            end = 10**9 + len(mentions)  # after every mention the rules found
            is_firm = name_key(p.name, kind="law_firm").key in firm_keys
            m = Mention(name=p.name, kind="law_firm" if is_firm else p.kind, spans=[(end, end)], is_firm=is_firm,
                        source="agent")
            mentions.append(m)
            by_key[key.key] = m
        for ident in p.identifiers:
            new = Identifier(ident.type, ident.value, ident.issuer)
            if new not in m.identifiers:
                m.identifiers.append(new)
        if p.role and (p.role, "inferred") not in m.hints:
            m.hints.append((p.role, "inferred"))
        if p.entity_id is not None:
            suggested[id(m)] = p.entity_id
    return mentions, suggested


def _correspondents(mail: dict[str, Any] | None) -> list[dict[str, str]]:
    """An e-mail's participants as decoded (``{role: from/to/cc, name, address}``; case R04)."""
    if not mail:
        return []
    out = []
    for role, addrs in (("from", [mail.get("sender")]), ("to", mail.get("to") or []), ("cc", mail.get("cc") or [])):
        out.extend({"role": role, "name": a.get("name") or "", "address": a.get("address") or ""} for a in addrs if a)
    return out


def _decide(ctx: StageContext, onto: Ontology, project_id: int, rel_path: str, body: dict[str, Any],
            reading: Reading):
    tools = [*ontology_tools(onto), search_entities_tool(ctx.pipeline.db, project_id)]
    return run_agent(ctx, system=SYSTEM, user=_user_payload(ctx, rel_path, body, reading), tools=tools,
                     result_model=MetadataResult, validators=make_validators(onto),
                     policy=MetadataRulesPolicy(reading), max_turns=16)


def handle(ctx: StageContext) -> StageOutcome:
    """Extract the metadata of one source object (see module doc).

    Raises:
        RetryableStageError: no structured_json artifact yet.
        ConfigurationError: ``pipeline.ontology_file`` is unusable (the run stops, no document is blamed).
        ModelOutputInvalid / gateway errors: from the model path.
    """
    db = ctx.pipeline.db
    content_hash = ctx.obj.content_hash
    bound = ctx.config.pipeline.text_window
    body, window = windowed_body(ctx.structured_json(), head_chars=bound.head_chars, tail_chars=bound.tail_chars)
    onto = active_ontology(ctx.config)
    rel_path = _rel_path(ctx)
    firm_names = _firm_names(ctx)
    text_ = mention_text(body)
    with db.engine.connect() as conn:
        project_id = _project_id(conn, ctx)
        matter: MatterContext = matter_context(conn, ctx.obj.id, rel_path, body.get("text") or "")
        known = _gazetteer(conn, project_id, text_) + matter.client_gazetteer()
    reading = read_document(body, rel_path, ctx.obj.mtime_ns, firm_names=firm_names, known=known,
                            date_order=ctx.config.firm.date_order)
    if reading.doc_date_source == "mtime":  # weak evidence: not when the folder's files were written at once
        with db.engine.connect() as conn:
            copied = uniform_mtimes(folder_mtimes(conn, ctx.obj.source_id, ctx.obj.source_root, ctx.obj.path,
                                                  min_files=UNIFORM_MIN_FILES))
        if copied:
            reading.doc_date, reading.doc_date_source = None, None
    folder_hints(rel_path, matter.folder, reading.mentions)
    code_hint(matter.reference, reading.mentions)

    agent = _decide(ctx, onto, project_id, rel_path, body, reading)
    result = agent.result
    assert isinstance(result, MetadataResult)
    mentions, suggested = (reading.mentions, {}) if not gateway_configured() else \
        _merge_agent_parties(result, reading, firm_names)
    identifiers = unique([*reading.identifiers, *(Identifier(i.type, i.value, i.issuer) for i in result.identifiers)])
    doc_type = result.doc_type
    version = ctx.config.pipeline.producer_version(ctx.stage)
    row = MetadataRow(
        content_hash=content_hash, matter_key=matter.key, doc_type=doc_type,
        doc_type_ancestors=onto.ancestors(doc_type) if doc_type else [], ontology_version=onto.version,
        ontology_fingerprint=onto.fingerprint, language=result.language or reading.language,
        doc_date=result.doc_date or reading.doc_date,
        doc_date_source=reading.doc_date_source if result.doc_date in (None, reading.doc_date) else "agent",
        title=result.title or reading.title, identifiers=[i.as_dict() for i in identifiers],
        facts={"typing": result.reasoning, "matter_reference": matter.reference,
               "correspondents": _correspondents(body.get("mail")), "amounts": find_amounts(body.get("text") or "")},
        producer_version=version)
    provenance = {**agent.provenance, "stage": ctx.stage, "ontology": {"version": onto.version,
                  "fingerprint": onto.fingerprint, "source": onto.source}, "tool_calls": agent.state.tool_calls,
                  "rejections": agent.state.rejections[-5:], "text_window": window.as_dict()}
    with db.engine.begin() as conn:
        parties = resolve_parties(conn, project_id=project_id, source_object_id=ctx.obj.id, mentions=mentions,
                                  matter=matter, firm_name=ctx.config.firm.name, agent_entity_ids=suggested)
        left = write_metadata(conn, ctx.obj.id, row, parties)
        settle_parties(conn, parties, matter, previous_matters=left,
                       folder=FolderScope.of(ctx.obj.source_id, ctx.obj.path))
        write_extraction(conn, source_object_id=ctx.obj.id, stage=ctx.stage, content_hash=content_hash,
                         producer_version=version, provenance=provenance)
        write_notable_clauses(conn, content_hash, clauses=[c.model_dump() for c in result.notable_clauses],
                              facet_version=f"{onto.version}:clauses" if onto.clause_facet_active else None,
                              producer_version=version)
    return StageOutcome(status="done", details={"doc_type": doc_type, "parties": len(parties)})
