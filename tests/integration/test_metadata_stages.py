"""extract_metadata and extract_decisions on a real PostgreSQL: cases R04–R07, skips, idempotency,
requeue_ontology_outdated, one entity row under concurrency, and the model path through the gateway stub.

Spec: insertion-pipeline.md "Extract metadata", "Extract decisions", "producer_version semantics"
(requeue_ontology_outdated), "Agentic stages"; issue 5 "Tests and quality".
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.config.loader import set_config_value
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, WAITING_FOR_PREVIOUS_STAGE
from ki.domain.entities.identifiers import Identifier
from ki.domain.entities.mentions import Mention
from ki.domain.metadata.matter import MatterContext
from ki.domain.metadata.parties import resolve_parties
from ki.domain.ontology.requeue import requeue_ontology_outdated
from ki.orchestration.execute import run_stage_for_object
from tests.helpers.gateway_stub import GatewayStub, submit, tool_call

ESTATE = Path("corpus/estate-dev")
THALBACH = "Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG"
LEASE = f"{THALBACH}/2023-02-20 Mietvertrag Entwurf.docx"
SITE_PLAN = f"{THALBACH}/2023-03-20 Anlage 1 Lageplan.pdf"
INVOICE = f"{THALBACH}/2023-06-26 Rechnung RE-2023-00146.pdf"
FIRM = "Kessler Claußen Rechtsanwälte PartG mbB"


def configure(ctx, **values) -> None:
    for key, value in values.items():
        set_config_value(ctx.settings.data_dir, key, value)
    ctx.reload_config()


def only_my_stages(ctx, **extra) -> None:
    """Classify and Relate off: these tests are about metadata and decisions on their own."""
    configure(ctx, **{"pipeline.stages.classify_matter.enabled": False, "pipeline.stages.relate.enabled": False,
                      "firm.name": FIRM, "firm.aliases": ["Kessler Claußen"], **extra})


def ingest(ctx, root: Path) -> dict[str, int]:
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT id, external_id FROM source_object "
                                 "WHERE source_id = :s AND parent_id IS NULL"), {"s": sid}).fetchall()
    return {r.external_id: r.id for r in rows}


def run_all(ctx, oid: int) -> dict[str, str]:
    return {s: run_stage_for_object(ctx, s, oid).kind for s in PIPELINE_STAGE_ORDER}


def state(ctx, oid: int, stage: str) -> tuple[str, str | None]:
    with ctx.db.engine.connect() as conn:
        r = conn.execute(text("SELECT status, reason FROM processing_state WHERE source_object_id = :o AND stage = :s"),
                         {"o": oid, "s": stage}).one()
    return r.status, r.reason


def one(ctx, sql: str, **params):
    with ctx.db.engine.connect() as conn:
        return conn.execute(text(sql), params).mappings().all()


@pytest.fixture
def cases_folder(tmp_path, cases_dir) -> Path:
    root = tmp_path / "cases"
    root.mkdir()
    for case, name, target in [("R04", "input.eml", "r04.eml"), ("R05", "input.docx", "r05.docx"),
                               ("R06", "input.docx", "r06.docx"), ("R07", "input.docx", "r07.docx")]:
        shutil.copyfile(next(cases_dir.glob(f"{case}*")) / name, root / target)
    (root / "note.txt").write_text("Aktenvermerk\nTelefonat mit der Mandantin.\n", encoding="utf-8")
    return root


def test_cases_r04_to_r07_through_both_stages(ctx, cases_folder):
    only_my_stages(ctx)
    ids = ingest(ctx, cases_folder)
    for oid in ids.values():
        kinds = run_all(ctx, oid)
        assert kinds["extract_metadata"] == "done"

    r04 = one(ctx, "SELECT * FROM document_metadata WHERE source_object_id = :o", o=ids["r04.eml"])[0]
    assert r04["title"] == "Entwurf: Vergleich Müller ./. Schröder" and r04["language"] == "de"
    assert [(c["role"], c["name"], c["address"]) for c in r04["facts"]["correspondents"]] == [
        ("from", "José Núñez", "jose.nunez@example.test"), ("to", "Kanzlei Postfach", "post@kanzlei-example.test"),
        ("cc", "Zoë Ångström", "zoe.angstrom@example.test"), ("cc", "Łukasz Wiśniewski", "lukasz.w@example.test")]
    # no stored string carries a lone surrogate (they would not have inserted at all)
    for row in one(ctx, "SELECT title, facts::text AS facts FROM document_metadata") + \
            one(ctx, "SELECT name, resolution::text AS r FROM document_party") + one(ctx, "SELECT name FROM entity"):
        for value in row.values():
            assert value is None or not any(0xDC80 <= ord(ch) <= 0xDCFF for ch in value)

    r06 = one(ctx, "SELECT identifiers FROM document_metadata WHERE source_object_id = :o", o=ids["r06.docx"])[0]
    assert {"type": "matter_reference", "value": "HF-2024-0193"} in r06["identifiers"]
    parties = {r["name"] for r in one(ctx, "SELECT name FROM document_party WHERE source_object_id = :o",
                                      o=ids["r06.docx"])}
    assert {"Harbor & Finch LLP", "Meridian Freight Ltd"} <= parties
    r07 = one(ctx, "SELECT identifiers, facts FROM document_metadata WHERE source_object_id = :o", o=ids["r07.docx"])[0]
    assert {"type": "matter_reference", "value": "HF-2024-0193"} in r07["identifiers"]
    assert {"currency": "EUR", "value": "25,000", "text": "EUR 25,000"} in r07["facts"]["amounts"]

    entries = one(ctx, """SELECT e.kind, e.before_text, e.after_text FROM decision_record r
                          JOIN decision_entry e ON e.decision_record_id = r.id WHERE r.source_object_id = :o
                          ORDER BY e.ordinal""", o=ids["r05.docx"])
    assert [(e["kind"], e["before_text"], e["after_text"]) for e in entries] == [
        ("replacement", "EUR 1,200", "EUR 1,350"), ("replacement", "B", "C"),
        ("insertion", None, "Either party may terminate with 30 days notice.")]
    assert state(ctx, ids["note.txt"], "extract_decisions") == ("skipped", "no_revision_evidence")
    assert state(ctx, ids["r04.eml"], "extract_decisions") == ("skipped", "no_revision_evidence")

    # one Extraction provenance row per document, one notable_clauses artifact per content hash
    extractions = one(ctx, "SELECT source_object_id, model, trace_id FROM extraction WHERE stage = 'extract_metadata'")
    assert sorted(e["source_object_id"] for e in extractions) == sorted(ids.values())
    assert all(e["model"] == "rules" and len(e["trace_id"]) == 32 for e in extractions)
    assert one(ctx, "SELECT count(*) AS n FROM artifact WHERE kind = 'notable_clauses'")[0]["n"] == len(ids)


def test_decisions_are_idempotent_per_document_version(ctx, cases_folder):
    only_my_stages(ctx)
    oid = ingest(ctx, cases_folder)["r05.docx"]
    run_all(ctx, oid)
    record = one(ctx, "SELECT id FROM decision_record WHERE source_object_id = :o", o=oid)
    assert len(record) == 1
    with ctx.db.engine.begin() as conn:  # a re-run (e.g. after a version bump) finds the record: no-op
        conn.execute(text("UPDATE processing_state SET status = 'pending' WHERE source_object_id = :o "
                          "AND stage = 'extract_decisions'"), {"o": oid})
    assert run_stage_for_object(ctx, "extract_decisions", oid).kind == "done"
    assert one(ctx, "SELECT count(*) AS n FROM decision_record")[0]["n"] == 1
    assert one(ctx, "SELECT count(*) AS n FROM decision_entry")[0]["n"] == 3


def test_formatting_only_revisions_skip_with_no_decision_evidence(ctx, cases_folder):
    only_my_stages(ctx)
    oid = ingest(ctx, cases_folder)["note.txt"]
    for stage in ("fetch", "convert"):
        run_stage_for_object(ctx, stage, oid)
    with ctx.db.engine.begin() as conn:
        conn.execute(text("""UPDATE artifact SET body = jsonb_set(body, '{revisions}',
                             '[{"kind": "rPrChange", "text": "", "author": "A"}]'::jsonb)
                             WHERE kind = 'structured_json'"""))
    kinds = {s: run_stage_for_object(ctx, s, oid).kind for s in PIPELINE_STAGE_ORDER[2:]}
    assert kinds["extract_decisions"] == "skipped"
    assert state(ctx, oid, "extract_decisions") == ("skipped", "no_decision_evidence")


def test_requeue_ontology_outdated_retypes_exactly_the_affected_documents(ctx, shared, tmp_path):
    truth = json.loads((shared / ESTATE / "truth.json").read_text(encoding="utf-8"))
    full = tmp_path / "full.json"
    full.write_text(json.dumps(truth["ontology"]), encoding="utf-8")
    root = tmp_path / "estate"
    for rel in (LEASE, SITE_PLAN, INVOICE):
        (root / Path(rel).name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared / ESTATE / "estate" / rel, root / Path(rel).name)
    only_my_stages(ctx, **{"pipeline.ontology_file": str(full)})
    ids = ingest(ctx, root)
    for oid in ids.values():
        run_all(ctx, oid)
    types = {r["source_object_id"]: r["doc_type"] for r in one(ctx, "SELECT * FROM document_metadata")}
    lease, plan, invoice = ids[Path(LEASE).name], ids[Path(SITE_PLAN).name], ids[Path(INVOICE).name]
    assert (types[lease], types[plan], types[invoice]) == ("lease", None, "invoice")
    assert requeue_ontology_outdated(ctx) == (0, 0)  # nothing changed

    # a new scope: the contract family leaves it (the lease's node with it); everything else is unchanged
    scoped = tmp_path / "scoped.json"
    scoped.write_text(json.dumps(truth["ontology"] | {"scope": {"exclude": ["contract"]}}), encoding="utf-8")
    configure(ctx, **{"pipeline.ontology_file": str(scoped)})
    requeued, parked = requeue_ontology_outdated(ctx)
    assert requeued == 2  # the lease (node left the scope) and the site plan (untyped under another fingerprint)
    assert state(ctx, lease, "extract_metadata")[0] == "pending"
    assert state(ctx, plan, "extract_metadata")[0] == "pending"
    assert state(ctx, invoice, "extract_metadata")[0] == "done"
    assert state(ctx, lease, "extract_decisions") == ("skipped", WAITING_FOR_PREVIOUS_STAGE)
    assert state(ctx, lease, "index") == ("skipped", WAITING_FOR_PREVIOUS_STAGE)
    assert parked == 4
    for oid in (lease, plan):
        for stage in ("extract_metadata", "extract_decisions", "index"):
            run_stage_for_object(ctx, stage, oid)
    rows = {r["source_object_id"]: r for r in one(ctx, "SELECT * FROM document_metadata")}
    assert rows[lease]["doc_type"] is None and rows[lease]["doc_type_ancestors"] == []
    assert rows[lease]["ontology_fingerprint"] == rows[plan]["ontology_fingerprint"] != \
        rows[invoice]["ontology_fingerprint"]
    assert requeue_ontology_outdated(ctx) == (0, 0)  # judged under the current scope: stable


def test_two_documents_naming_the_same_new_company_at_once_make_one_entity(ctx):
    """Concurrency (issue 5): the advisory locks on the normalised names serialise the resolutions."""
    with ctx.db.engine.connect() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
    spellings = ["{n} Logistik GmbH", "{N} LOGISTIK G.m.b.H.", "{n} Logistik Gesellschaft mit beschränkter Haftung",
                 "{n} Logistik GmbH"]
    for round_no in range(5):
        company = f"Neptun{round_no}"
        names = [s.format(n=company, N=company.upper()) for s in spellings]
        barrier = threading.Barrier(len(names))
        errors: list[BaseException] = []

        def resolve(name: str, i: int, round_no: int = round_no, barrier: threading.Barrier = barrier,
                    errors: list[BaseException] = errors) -> None:
            try:
                idents = [Identifier("register_number", f"HRB {7000 + round_no}", "Amtsgericht Kiel")] if i == 0 else []
                m = Mention(name=name, kind="company", spans=[(0, len(name))], identifiers=idents)
                barrier.wait()
                with ctx.db.engine.begin() as conn:
                    resolve_parties(conn, project_id=project, source_object_id=None, mentions=[m],
                                    matter=MatterContext(), firm_name="")
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=resolve, args=(n, i)) for i, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        rows = one(ctx, "SELECT id, identity_key FROM entity WHERE name ILIKE :n", n=f"{company} %")
        assert len(rows) == 1, rows
        assert rows[0]["identity_key"] == f"neptun{round_no} logistik|gmbh"
        aliases = {r["alias"] for r in one(ctx, "SELECT alias FROM entity_alias WHERE entity_id = :e", e=rows[0]["id"])}
        assert len(aliases) == 3  # every spelling is on the ledger of the one row


def test_contained_names_on_one_matter_at_once_make_one_entity(ctx):
    """Different keys ("Triton Werke" / "Triton Werke AG") link by containment + same matter: the token locks
    serialise the two documents so the second sees the first one's entity and matter role."""
    with ctx.db.engine.connect() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
    for round_no in range(5):
        names = [f"Triton{round_no} Werke", f"Triton{round_no} Werke AG"]
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def resolve(name: str, barrier: threading.Barrier = barrier, round_no: int = round_no,
                    errors: list[BaseException] = errors) -> None:
            try:
                m = Mention(name=name, kind="company", spans=[(0, len(name))])
                barrier.wait()
                with ctx.db.engine.begin() as conn:
                    resolve_parties(conn, project_id=project, source_object_id=None, mentions=[m],
                                    matter=MatterContext(key=f"ref:2024-{round_no:04d}"), firm_name="")
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=resolve, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(one(ctx, "SELECT id FROM entity WHERE name ILIKE :n", n=f"Triton{round_no} %")) == 1


def test_model_path_through_the_gateway_stub(ctx, shared, tmp_path, monkeypatch, cases_dir):
    """With KI_LLM_BASE_URL set the stages call the model via chat_agent; an invented node is rejected."""
    truth = shared / ESTATE / "truth.json"
    root = tmp_path / "docs"
    root.mkdir()
    shutil.copyfile(shared / ESTATE / "estate" / LEASE, root / "lease.docx")
    shutil.copyfile(next(cases_dir.glob("R05*")) / "input.docx", root / "r05.docx")
    only_my_stages(ctx, **{"pipeline.ontology_file": str(truth)})
    ids = ingest(ctx, root)
    lease, r05 = ids["lease.docx"], ids["r05.docx"]
    with GatewayStub() as stub:
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "stub-model")
        for stage in ("fetch", "convert", "classify_matter", "relate"):
            run_stage_for_object(ctx, stage, lease)
        party = {"name": "Pfeiffer SE", "kind": "company", "role": "counterparty",
                 "identifiers": [{"type": "register_number", "value": "HRB 146754", "issuer": "Amtsgericht Hannover"}]}
        stub.push(tool_call("ontology_search", {"query": "Gewerbemietvertrag"}),
                  submit({"doc_type": "commercial_lease", "language": "de"}),  # invented: rejected
                  submit({"doc_type": "lease", "language": "de", "doc_date": "2023-02-20",
                          "title": "Gewerbemietvertrag", "parties": [party]}))
        assert run_stage_for_object(ctx, "extract_metadata", lease).kind == "done"
        reqs = stub.chat_requests()
        assert len(reqs) == 3 and {r.trace[1] for r in reqs} == {"extract_metadata"}
        feedback = [m for m in reqs[2].body["messages"] if m["role"] == "tool"][-1]["content"]
        assert "did not appear in any ontology tool result" in feedback
        meta = one(ctx, "SELECT * FROM document_metadata WHERE source_object_id = :o", o=lease)[0]
        assert (meta["doc_type"], meta["doc_type_ancestors"]) == ("lease", ["contract", "lease"])
        assert meta["language"] == "de"
        ext = one(ctx, "SELECT model, trace_id FROM extraction WHERE source_object_id = :o", o=lease)[0]
        assert ext["model"] == "stub-model" and ext["trace_id"] == reqs[0].trace[2]
        # the model's parties are resolved by rule together with what the rules found in the text
        names = {r["name"] for r in one(ctx, "SELECT name FROM document_party WHERE source_object_id = :o", o=lease)}
        assert {"Pfeiffer SE", "Thalbach Immobilien GmbH & Co. KG"} <= names

        for stage in ("fetch", "convert", "classify_matter", "relate"):
            run_stage_for_object(ctx, stage, r05)
        with ctx.db.engine.begin() as conn:
            conn.execute(text("UPDATE processing_state SET status = 'pending', last_error = NULL WHERE "
                              "source_object_id = :o AND stage = 'extract_decisions'"), {"o": r05})
        entry = {"kind": "replacement", "locus": None, "before": "EUR 1,200", "after": "EUR 1,350",
                 "change_summary": "monthly rent raised", "rationale_category": "commercial_terms",
                 "rationale_text": None, "generalizability": "deal_specific"}
        stub.push(submit({"entries": [entry], "summary": "rent"}))
        assert run_stage_for_object(ctx, "extract_decisions", r05).kind == "done"
        rec = one(ctx, "SELECT provenance FROM decision_record WHERE source_object_id = :o", o=r05)[0]
        assert rec["provenance"]["model"] == "stub-model"
        assert stub.chat_requests()[-1].trace[1] == "extract_decisions"


def test_firm_is_one_advisor_entity_and_an_imported_client_outranks_documents(ctx, tmp_path):
    """firm.name/firm.aliases → advisor (one entity whatever the spelling); a stated client is recorded on the
    matter and propagated; an imported matter's client outranks what a document claims."""
    only_my_stages(ctx)
    root = tmp_path / "letters"
    root.mkdir()
    letter = ("KESSLER CLAUSSEN\nRechtsanwälte · Partnerschaftsgesellschaft mbB\nNordlicht Handel GmbH\n"
              "Hafenstraße 1\n20457 Hamburg\nUnser Zeichen: {ref}\nHannover, 02.02.2023\nIhr Schreiben\n"
              "Sehr geehrte Damen und Herren,\nnamens unserer Mandantin, der Südwind Textil AG, weisen wir "
              "darauf hin.\n"
              "Kessler Claußen Rechtsanwälte PartG mbB · Sitz Hannover · Amtsgericht Hannover PR 521\n")
    (root / "a.txt").write_text(letter.format(ref="2024-0001"), encoding="utf-8")
    (root / "b.txt").write_text(letter.format(ref="2024-0002"), encoding="utf-8")
    ids = ingest(ctx, root)
    run_all(ctx, ids["a.txt"])
    parties = {r["name"]: r for r in one(ctx, "SELECT * FROM document_party WHERE source_object_id = :o",
                                         o=ids["a.txt"])}
    assert parties["KESSLER CLAUSSEN"]["role"] == "advisor"
    assert parties["Südwind Textil AG"]["role"] == "client"
    assert parties["Nordlicht Handel GmbH"]["role"] == "counterparty"
    firm_rows = one(ctx, "SELECT id, name FROM entity WHERE kind = 'law_firm'")
    assert [r["name"] for r in firm_rows] == [FIRM]
    aliases = {r["alias"] for r in one(ctx, "SELECT alias FROM entity_alias WHERE entity_id = :e",
                                       e=firm_rows[0]["id"])}
    assert {"KESSLER CLAUSSEN", FIRM} <= aliases

    # matter 2024-0002 was imported from practice management with Nordlicht Handel GmbH as its client
    from ki.domain.entities.store import set_matter_role

    nordlicht = parties["Nordlicht Handel GmbH"]["entity_id"]
    with ctx.db.engine.begin() as conn:
        set_matter_role(conn, "ref:2024-0002", None, nordlicht, "client", "imported", None)
    run_all(ctx, ids["b.txt"])
    roles = {r["name"]: r["role"] for r in one(ctx, "SELECT name, role FROM document_party WHERE source_object_id = :o",
                                               o=ids["b.txt"])}
    assert roles == {"KESSLER CLAUSSEN": "advisor", "Nordlicht Handel GmbH": "client",
                     "Südwind Textil AG": "counterparty"}


def test_homonyms_stay_two_rows_and_the_second_records_the_first(ctx):
    """Two companies sharing a name are kept apart by a contradicting register number; the new row names the
    known same-name candidate on provenance.resolution; a bare mention on a matter goes to that matter's one."""
    with ctx.db.engine.connect() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()

    def resolve(name: str, matter: str, *idents: Identifier):
        m = Mention(name=name, kind="company", spans=[(0, len(name))], identifiers=list(idents))
        with ctx.db.engine.begin() as conn:
            return resolve_parties(conn, project_id=project, source_object_id=None, mentions=[m],
                                   matter=MatterContext(key=matter), firm_name="")[0]

    first = resolve("Rheintal AG", "ref:A", Identifier("register_number", "HRB 18864", "Amtsgericht Düsseldorf"))
    bare_b = resolve("RHEINTAL AG", "ref:B")  # before matter B's own register number is known
    second = resolve("Rheintal Aktiengesellschaft", "ref:B",
                     Identifier("register_number", "HRB 154873", "Amtsgericht Leipzig"))
    assert first.entity_id != second.entity_id
    assert second.resolution == {"rule": "new", "same_name_candidates": [first.entity_id],
                                 "contradicted": [first.entity_id], "corroboration": None, "claims": [],
                                 "is_firm": False, "relinked_from": [first.entity_id]}
    rows = one(ctx, "SELECT id, identity_key, provenance FROM entity ORDER BY id")
    assert [r["identity_key"] for r in rows] == ["rheintal|ag", "rheintal|ag#register_number:HRB154873@leipzig"]
    assert rows[1]["provenance"]["resolution"]["same_name_candidates"] == [first.entity_id]
    assert bare_b.entity_id == first.entity_id  # the only candidate then …
    # … and matter B's name-only link follows once B's register number proves which company B's is
    on_b = one(ctx, "SELECT entity_id FROM matter_party WHERE matter_key = 'ref:B'")
    assert on_b == [{"entity_id": second.entity_id}]
    assert resolve("Rheintal AG", "ref:B").entity_id == second.entity_id
    assert resolve("Rheintal AG", "ref:A").entity_id == first.entity_id
