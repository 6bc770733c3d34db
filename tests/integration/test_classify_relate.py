"""Classify and Relate on real PostgreSQL: tools (exact page totals), create_matter under concurrency,
the pipeline end to end on a small estate, export, parked intents, inline conversion.

Spec: insertion-pipeline.md "Classify", "Relate", "Agentic stages: Classify and Relate".
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion
from ki.core.errors import RetryableStageError, ToolError
from ki.domain.relate.inline_conversion import ensure_source_object_ready
from ki.domain.relate.tools import OpenFileArgs, RelateTools, SearchDocumentsArgs
from ki.orchestration.execute import ready_for, run_stage_for_object
from ki.store.matters import get_or_create_matter, peek_matter, search_matters

REF = "2024-0153"
MATTER = f"Mandate/{REF} Keller Logistik GmbH gg. Nordwind AG"
BODY = ("§ 1 Gegenstand Die Klägerin liefert der Beklagten Waren aus dem Rahmenliefervertrag. "
        "§ 2 Forderung Die Beklagte schuldet den Kaufpreis in Höhe von EUR 48.000,00 nebst Zinsen. "
        "§ 3 Beweis Der Vertrag liegt als Anlage K1 vor; die Rechnung als Anlage K2. "
        "§ 4 Antrag Die Beklagte wird verurteilt, an die Klägerin EUR 48.000,00 zu zahlen.")


def eml(message_id: str, subject: str, body: str, *, in_reply_to: str | None = None, date: str) -> str:
    head = ["From: Jan Keller <jan@keller.example>", "To: Anna Roth <anna@kanzlei.example>",
            f"Subject: {subject}", f"Date: {date}", f"Message-ID: <{message_id}>"]
    if in_reply_to:
        head += [f"In-Reply-To: <{in_reply_to}>", f"References: <{in_reply_to}>"]
    return "\r\n".join(head + ["Content-Type: text/plain; charset=utf-8", "", body, ""])


def write_estate(root: Path) -> None:
    files = {
        f"{MATTER}/00 Mandat/Mandatsvereinbarung.txt":
            f"Kanzlei Roth\nUnser Zeichen: {REF}\nHannover, 02.02.2024\nMandatsvereinbarung\nWir übernehmen es.",
        f"{MATTER}/03 Schriftsätze/Klageschrift Entwurf v1.txt":
            "ENTWURF v1 – Stand: 01.03.2024\nKlageschrift\n" + BODY,
        f"{MATTER}/03 Schriftsätze/Klageschrift Entwurf v1 - Kopie.txt":
            "ENTWURF v1 – Stand: 01.03.2024\nKlageschrift\n" + BODY,
        f"{MATTER}/03 Schriftsätze/Klageschrift eingereicht.txt":
            "Klageschrift\n" + BODY.replace("48.000,00", "49.000,00") + "\nHamburg, den 15.03.2024",
        f"{MATTER}/05 Anlagen/Anlage K1 Rahmenliefervertrag.txt":
            "Anlage K1\nRahmenliefervertrag\nDie Parteien vereinbaren die Lieferung von Waren.",
        f"{MATTER}/06 Rechnungen/Rechnung RE-2024-00001.txt":
            "Rechnung Nr. RE-2024-00001\nRechnungsdatum: 30.04.2024\nFür unsere Tätigkeit gemäß "
            "Mandatsvereinbarung vom 02.02.2024 berechnen wir EUR 1.000,00.",
        f"{MATTER}/01 Korrespondenz/a.eml": eml("a1@keller.example", "Klage gegen Nordwind", "Bitte einreichen.",
                                                 date="Mon, 04 Mar 2024 10:00:00 +0100"),
        f"{MATTER}/01 Korrespondenz/b.eml": eml("b2@kanzlei.example", "AW: Klage gegen Nordwind", "Wird erledigt.",
                                                 in_reply_to="a1@keller.example",
                                                 date="Mon, 04 Mar 2024 12:00:00 +0100"),
        "Eingang/Notiz.txt": "Bitte Rückruf wegen Parkplatz.",
    }
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode("utf-8"))


@pytest.fixture
def estate(tmp_path) -> Path:
    root = tmp_path / "estate"
    write_estate(root)
    return root


def _oid(ctx, external_id: str) -> int:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT id FROM source_object WHERE external_id = :e"),
                            {"e": external_id}).scalar_one()


def _project(ctx) -> int:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()


def _tools(ctx, sid: int) -> RelateTools:
    """The relate tools as the stage builds them (inline conversion through the executor)."""
    return RelateTools(ctx, sid, _project(ctx), ensure_ready=ready_for(ctx))


def test_estate_end_to_end_and_export(ctx, estate):
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=3, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    rows = {r["path"]: r for r in export_rows(ctx.db)}
    ks = f"{MATTER}/03 Schriftsätze/"
    assert {r["matter_reference"] for p, r in rows.items() if p.startswith(MATTER)} == {REF}
    assert rows["Eingang/Notiz.txt"]["matter_reference"] == "UNASSIGNED-eingang"
    assert rows["Eingang/Notiz.txt"]["matter_placeholder"] is True
    v1, copy, filed = (rows[ks + n] for n in ("Klageschrift Entwurf v1.txt", "Klageschrift Entwurf v1 - Kopie.txt",
                                              "Klageschrift eingereicht.txt"))
    assert copy["duplicate_of"] == ks + "Klageschrift Entwurf v1.txt" and v1["duplicate_of"] is None
    assert v1["document_id"] == copy["document_id"] == filed["document_id"]
    assert (v1["version_order"], copy["version_order"], filed["version_order"]) == (1, 1, 2)
    assert filed["is_final"] is True
    annex = rows[f"{MATTER}/05 Anlagen/Anlage K1 Rahmenliefervertrag.txt"]
    assert {"type": "annex_of", "target": ks + "Klageschrift eingereicht.txt"} in annex["relations"]
    invoice = rows[f"{MATTER}/06 Rechnungen/Rechnung RE-2024-00001.txt"]
    assert invoice["relations"] == [{"type": "references", "target": f"{MATTER}/00 Mandat/Mandatsvereinbarung.txt"}]
    a, b = rows[f"{MATTER}/01 Korrespondenz/a.eml"], rows[f"{MATTER}/01 Korrespondenz/b.eml"]
    assert a["thread_id"] is not None and a["thread_id"] == b["thread_id"]
    assert b["relations"] == [{"type": "responds_to", "target": f"{MATTER}/01 Korrespondenz/a.eml"}]
    with ctx.db.engine.connect() as conn:  # the classification artifact, one per content hash
        n = conn.execute(text("SELECT count(*) FROM artifact WHERE kind = 'classification'")).scalar_one()
        assert n == len({r["object_id"] for r in rows.values()}) - 1  # the two identical drafts share one
        assert conn.execute(text("SELECT count(*) FROM document d WHERE NOT EXISTS "
                                 "(SELECT 1 FROM document_version v WHERE v.document_id = d.id)")).scalar_one() == 0
    # a second run changes nothing
    again = launch_insertion(ctx, source_id=sid, workers=2)
    assert again.counters.processed == 0
    assert {r["path"]: r for r in export_rows(ctx.db)} == rows


def test_relate_waits_for_classify(ctx, estate):
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    oid = _oid(ctx, "Eingang/Notiz.txt")
    for stage in ("fetch", "convert"):
        assert run_stage_for_object(ctx, stage, oid).kind == "done"
    from ki.domain.context import SourceObjectView, StageContext
    from ki.stages import relate
    from ki.store.claims import Claim

    sctx = StageContext(pipeline=ctx, claim=Claim(0, oid, "relate", 1, __import__("uuid").uuid4()),
                        obj=SourceObjectView.load(ctx.db, oid))
    with pytest.raises(RetryableStageError, match="matter assignment missing"):
        relate.handle(sctx)


def test_search_matters_ranks_everything_before_the_page_is_cut(ctx):
    project = _project(ctx)
    for i in range(23):
        get_or_create_matter(ctx.db, project_id=project, reference=f"2024-{i:04d}", title=f"Keller Logistik {i}")
    get_or_create_matter(ctx.db, project_id=project, reference="2023-0999", title="Nordwind Lease")
    with ctx.db.engine.connect() as conn:
        pages = [search_matters(conn, project_id=project, query="Keller Logistik", limit=8, offset=o)
                 for o in (0, 8, 16)]
        assert [p["page"]["total"] for p in pages] == [23, 23, 23]
        assert [p["page"]["has_more"] for p in pages] == [True, True, False]
        ids = [r["matter_id"] for p in pages for r in p["results"]]
        assert len(ids) == len(set(ids)) == 23
        exact = search_matters(conn, project_id=project, query="re 2024-0007 Keller", limit=3)
        assert exact["results"][0]["reference"] == "2024-0007" and "reference" in exact["results"][0]["why"]
        assert search_matters(conn, project_id=project, query="", limit=100)["page"]["total"] == 24


def test_peek_matter_counts_every_document_and_says_titles_are_a_sample(ctx, estate):
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    launch_insertion(ctx, source_id=sid, workers=3, wait_for_retries_seconds=30)
    with ctx.db.engine.connect() as conn:
        mid = conn.execute(text("SELECT id FROM matter WHERE reference = :r"), {"r": REF}).scalar_one()
        peek = peek_matter(conn, mid)
        total = conn.execute(text("SELECT count(*) FROM matter_assignment WHERE matter_id = :m"),
                             {"m": mid}).scalar_one()
    assert peek["document_count"] == total > 0
    assert len(peek["document_titles"]) <= 12
    assert peek["document_titles_are_sample"] is (total > len(peek["document_titles"]))
    assert MATTER in peek["folders"][0]


def test_create_matter_from_two_threads_converges_on_one_matter(ctx):
    project = _project(ctx)
    barrier = threading.Barrier(8)
    got: list[int] = []

    def create() -> None:
        barrier.wait()
        matter, _ = get_or_create_matter(ctx.db, project_id=project, reference="harb-2023-017 ", title="SPA")
        got.append(matter.id)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(got) == 8 and len(set(got)) == 1
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM matter WHERE reference = 'HARB-2023-017'")).scalar_one() == 1


def test_open_file_pages_with_has_more_and_search_documents_has_exact_totals(ctx, estate):
    long_text = "\n".join(f"Zeile {i}: " + "Text " * 20 for i in range(400))
    (estate / "Eingang" / "Lang.txt").write_text(long_text, encoding="utf-8")
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    launch_insertion(ctx, source_id=sid, workers=3, wait_for_retries_seconds=30)
    tools = _tools(ctx, sid)
    first = tools.open_file(OpenFileArgs(path="Eingang/Lang.txt", max_chars=10_000))
    assert first["status"] == "ok" and first["ref"].startswith("F")
    assert first["has_more"] is True and first["next_offset"] == 10_000 and first["total_chars"] > 10_000
    text_read, page = first["text"], first
    while page["has_more"]:
        page = tools.open_file(OpenFileArgs(path="Eingang/Lang.txt", offset=page["next_offset"], max_chars=10_000))
        text_read += page["text"]
    assert page["next_offset"] is None and len(text_read) == first["total_chars"]
    pages = [tools.search_documents(SearchDocumentsArgs(query="", matter=REF, limit=3, offset=o)) for o in (0, 3, 6)]
    total = pages[0]["page"]["total"]
    assert total == 8 and all(p["page"]["total"] == total for p in pages)
    assert len({r["path"] for p in pages for r in p["results"]}) == total
    with pytest.raises(ToolError, match="no file"):
        tools.open_file(OpenFileArgs(path="Eingang/nope.txt"))
    listing = tools.list_folder(type("A", (), {"path": "/"})())
    assert {s["name"] for s in listing["subfolders"]} == {"Mandate", "Eingang"}


def test_open_file_pulls_an_unconverted_neighbour_forward_through_its_own_rows(ctx, estate):
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    target = _oid(ctx, "Eingang/Notiz.txt")
    tools = _tools(ctx, sid)
    opened = tools.open_file(OpenFileArgs(path="Eingang/Notiz.txt"))
    assert opened["status"] == "ok" and "Parkplatz" in opened["text"]
    with ctx.db.engine.connect() as conn:
        states = dict(conn.execute(text("SELECT stage, status FROM processing_state WHERE source_object_id = :o"),
                                   {"o": target}).fetchall())
    assert states["fetch"] == states["convert"] == "done" and states["classify_matter"] == "pending"
    # an inline conversion observes a claim held elsewhere instead of duplicating it
    other = _oid(ctx, f"{MATTER}/00 Mandat/Mandatsvereinbarung.txt")
    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE processing_state SET status = 'running', claim_token = gen_random_uuid(), "
                          "heartbeat_at = now() WHERE source_object_id = :o AND stage = 'fetch'"), {"o": other})
    assert ensure_source_object_ready(ctx, other, budget_seconds=0.3)[0] == "in_progress"
    with ctx.db.engine.begin() as conn:
        conn.execute(text("UPDATE processing_state SET status = 'quarantined', claim_token = NULL "
                          "WHERE source_object_id = :o AND stage = 'fetch'"), {"o": other})
    assert ensure_source_object_ready(ctx, other, budget_seconds=0.3)[0] == "quarantined"


def test_a_decision_against_an_unclassified_target_is_parked_and_replayed(ctx, estate):
    sid = register_local_source(ctx, estate)
    scan_source(ctx, sid)
    ks = f"{MATTER}/03 Schriftsätze/"
    original = _oid(ctx, ks + "Klageschrift Entwurf v1.txt")
    copy = _oid(ctx, ks + "Klageschrift Entwurf v1 - Kopie.txt")
    for oid in (original, copy):
        for stage in ("fetch", "convert"):
            assert run_stage_for_object(ctx, stage, oid).kind == "done"
    assert run_stage_for_object(ctx, "classify_matter", copy).kind == "done"
    # the copy relates while the original it duplicates has no matter yet: the decision is parked
    assert run_stage_for_object(ctx, "relate", copy).kind == "done"
    with ctx.db.engine.connect() as conn:
        parked = conn.execute(text("SELECT from_object_id, to_object_id, kind FROM relation_intent")).fetchall()
        assert [(r.from_object_id, r.to_object_id, r.kind) for r in parked] == [(copy, original, "duplicate_of")]
        assert conn.execute(text("SELECT duplicate_of FROM document_version WHERE source_object_id = :o"),
                            {"o": copy}).scalar_one() is None
    assert run_stage_for_object(ctx, "classify_matter", original).kind == "done"  # replays the intent
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM relation_intent")).scalar_one() == 0
        rows = {r.source_object_id: r for r in conn.execute(text(
            "SELECT source_object_id, document_id, duplicate_of FROM document_version"))}
        assert conn.execute(text("SELECT count(*) FROM document")).scalar_one() == 1  # the copy's own was folded
    assert rows[copy].duplicate_of == original and rows[copy].document_id == rows[original].document_id


def test_r11_same_bytes_are_duplicates_and_the_corrected_invoice_a_version(ctx, cases_dir):
    sid = register_local_source(ctx, cases_dir / "R11-duplicate-same-bytes" / "drop")
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    rows = {r["path"]: r for r in export_rows(ctx.db)}
    original, copy = rows["Invoice-0117.pdf"], rows["Invoice-0117 (1).pdf"]
    corrected = rows["Invoice-0117-corrected.pdf"]
    assert copy["duplicate_of"] == "Invoice-0117.pdf" and original["duplicate_of"] is None
    assert corrected["duplicate_of"] is None
    assert corrected["document_id"] == original["document_id"]  # SHOULD: proposed as a version
    assert {r["matter_reference"] for r in rows.values()} == {"UNASSIGNED-root"}  # 2024-0117 is an invoice number


def test_r01_bracketed_message_ids_thread_into_one_thread(ctx, cases_dir):
    sid = register_local_source(ctx, cases_dir / "R01-msgid-square-brackets")
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    rows = {r["path"]: r for r in export_rows(ctx.db) if r["path"].endswith(".eml")}
    assert len(rows) == 3 and len({r["thread_id"] for r in rows.values()}) == 1
    assert rows["2-reply-odd-msgid.eml"]["relations"] == [{"type": "responds_to", "target": "1-root.eml"}]
    assert rows["3-reply-to-odd.eml"]["relations"] == [{"type": "responds_to", "target": "2-reply-odd-msgid.eml"}]
    with ctx.db.engine.connect() as conn:
        ids = conn.execute(text("SELECT message_id FROM communication_thread_member ORDER BY message_id")).scalars()
        assert "[a7f3c2].5e91d04b.2c77a.9f1eSMTPIN_ADDED_[b2]@[c9].EUR01.PROD.MAILHOST.TEST" in list(ids)
