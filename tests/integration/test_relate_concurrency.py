"""Relate under concurrency: files that reference each other relating at the same moment do not
deadlock; a file whose content or matter changes while its agent runs is retried against the new state.

Spec: insertion-pipeline.md "Relate" (sorted per-file advisory locks; re-validation of claim,
content hash and matter assignment after the model call) and "Failure modes" (a file whose content
changes mid-relate).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sqlalchemy import text

import ki.domain.relate.materialize as materialize_mod
import ki.stages.relate as relate_stage
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.orchestration.execute import run_stage_for_object
from ki.store.matters import get_or_create_matter

MATTER = "Mandate/2024-0153 Keller gg. Nordwind"
PAIRS = 4


FILLER = ["Die Lieferung vom Januar war mangelhaft und wurde gerügt.", "Wir bitten um Zahlung binnen zwei Wochen.",
          "Der Termin zur mündlichen Verhandlung wurde verlegt.", "Die Gegenseite hat einen Vergleich angeboten.",
          "Unsere Mandantin ist zu Gesprächen bereit.", "Die Unterlagen liegen dem Gericht vor.",
          "Bitte bestätigen Sie den Eingang dieses Schreibens.", "Die Kosten trägt die unterliegende Partei."]


def _letter(own_date: str, cites: str, topic: str, seed: int) -> str:
    body = " ".join(FILLER[(seed + k) % len(FILLER)] for k in range(0, len(FILLER), 3))
    return (f"Kanzlei Roth\nUnser Zeichen: 2024-0153\nHannover, {own_date}\n{topic}\nSehr geehrte Damen und Herren,\n"
            f"Bezug nehmend auf unser Schreiben vom {cites} teilen wir mit: {body}")


def _estate(root: Path) -> list[str]:
    names = []
    for i in range(PAIRS):
        a, b = f"2024-03-{10 + i:02d}", f"2024-04-{10 + i:02d}"
        da, db_ = f"{10 + i:02d}.03.2024", f"{10 + i:02d}.04.2024"
        first = _letter(da, db_, f"Schreiben Nr. {i} an Nordwind", 2 * i)
        files = {f"{MATTER}/Korrespondenz/{a} Schreiben {i}.txt": first,
                 f"{MATTER}/Korrespondenz/{b} Schreiben {i}.txt":
                     _letter(db_, da, f"Antwort Nr. {i} an Keller", 2 * i + 1),
                 f"{MATTER}/Kopien/{a} Schreiben {i}.txt": first}
        for rel, body in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(body, encoding="utf-8")
            names.append(rel)
    return names


def _oids(ctx) -> dict[str, int]:
    with ctx.db.engine.connect() as conn:
        return dict(conn.execute(text("SELECT external_id, id FROM source_object WHERE parent_id IS NULL")).fetchall())


def _prepare(ctx, root: Path) -> dict[str, int]:
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    oids = _oids(ctx)
    for oid in oids.values():
        for stage in ("fetch", "convert", "classify_matter"):
            assert run_stage_for_object(ctx, stage, oid).kind == "done"
    return oids


def test_files_that_reference_each_other_relate_concurrently_without_deadlock(make_ctx, tmp_path, monkeypatch):
    ctx = make_ctx(workers=8)
    root = tmp_path / "estate"
    _estate(root)
    oids = _prepare(ctx, root)
    barrier = threading.Barrier(len(oids), timeout=30)
    original = materialize_mod._apply
    entered: set[int] = set()
    guard = threading.Lock()

    def synchronised(conn, claim, plan):
        with guard:
            first = plan.oid not in entered
            entered.add(plan.oid)
        if first:  # every file reaches its lock acquisition at the same moment
            barrier.wait()
        return original(conn, claim, plan)

    monkeypatch.setattr(materialize_mod, "_apply", synchronised)
    results: dict[int, str] = {}
    threads = [threading.Thread(target=lambda o=o: results.__setitem__(o, run_stage_for_object(ctx, "relate", o).kind))
               for o in oids.values()]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "relate threads hung (deadlock?)"
    assert time.monotonic() - started < 120
    assert sorted(results.values()) == ["done"] * len(oids), results
    with ctx.db.engine.connect() as conn:
        rel = {(r.from_object_id, r.to_object_id) for r in conn.execute(
            text("SELECT from_object_id, to_object_id FROM relation WHERE type = 'references'"))}
        dups = conn.execute(text("SELECT count(*) FROM document_version WHERE duplicate_of IS NOT NULL")).scalar_one()
    for i in range(PAIRS):
        a = oids[f"{MATTER}/Korrespondenz/2024-03-{10 + i:02d} Schreiben {i}.txt"]
        b = oids[f"{MATTER}/Korrespondenz/2024-04-{10 + i:02d} Schreiben {i}.txt"]
        assert (a, b) in rel and (b, a) in rel  # each cites the other
    assert dups == PAIRS  # each copy is a duplicate of its original


def test_content_change_mid_relate_is_retried_against_the_new_state(ctx, tmp_path, monkeypatch):
    root = tmp_path / "estate"
    names = _estate(root)
    oids = _prepare(ctx, root)
    target_name = names[0]
    target = oids[target_name]
    new_body = "Kanzlei Roth\nUnser Zeichen: 2024-0153\nHannover, 01.06.2024\nAktennotiz\nGeänderter Inhalt ohne Bezug."
    real = relate_stage.run_agent
    calls = []

    def change_file_then_decide(sctx, **kw):
        if sctx.obj.id == target and not calls:
            calls.append(1)
            (root / target_name).write_text(new_body, encoding="utf-8")
            scan_source(sctx.pipeline, sctx.obj.source_id)  # sees the change: requeues the file from fetch
        return real(sctx, **kw)

    monkeypatch.setattr(relate_stage, "run_agent", change_file_then_decide)
    assert run_stage_for_object(ctx, "relate", target).kind == "claim_lost"
    with ctx.db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM document_version WHERE source_object_id = :o"),
                            {"o": target}).scalar_one() == 0  # nothing of the stale decision was written
    summary = launch_insertion(ctx, workers=2, wait_for_retries_seconds=30)
    assert summary.status == "completed"
    with ctx.db.engine.connect() as conn:
        h = conn.execute(text("SELECT content_hash FROM source_object WHERE id = :o"), {"o": target}).scalar_one()
        row = conn.execute(text("SELECT content_hash FROM document_version WHERE source_object_id = :o"),
                           {"o": target}).one()
        out = conn.execute(text("SELECT count(*) FROM relation WHERE from_object_id = :o"), {"o": target}).scalar_one()
        state = conn.execute(text("SELECT status FROM processing_state WHERE source_object_id = :o "
                                  "AND stage = 'relate'"),
                             {"o": target}).scalar_one()
    assert row.content_hash == h and state == "done"
    assert out == 0  # the new content cites nothing


def test_matter_change_mid_relate_fails_retryably_and_the_retry_succeeds(ctx, tmp_path, monkeypatch):
    root = tmp_path / "estate"
    names = _estate(root)
    oids = _prepare(ctx, root)
    target = oids[names[1]]
    real = relate_stage.run_agent

    def reassign_then_decide(sctx, **kw):
        result = real(sctx, **kw)
        if sctx.obj.id == target and sctx.claim.attempts == 1:
            with sctx.pipeline.db.engine.connect() as conn:
                project = conn.execute(text("SELECT id FROM project")).scalar_one()
            other, _ = get_or_create_matter(sctx.pipeline.db, project_id=project, reference="2024-0999")
            with sctx.pipeline.db.engine.begin() as conn:
                conn.execute(text("UPDATE matter_assignment SET matter_id = :m WHERE source_object_id = :o"),
                             {"m": other.id, "o": target})
        return result

    monkeypatch.setattr(relate_stage, "run_agent", reassign_then_decide)
    assert run_stage_for_object(ctx, "relate", target).kind == "retry"
    with ctx.db.engine.begin() as conn:
        err = conn.execute(text("SELECT last_error FROM processing_state WHERE source_object_id = :o "
                                "AND stage = 'relate'"), {"o": target}).scalar_one()
        assert err["class"] == "RetryableStageError" and "matter assignment changed" in err["message"]
        conn.execute(text("UPDATE processing_state SET next_retry_at = now() WHERE source_object_id = :o "
                          "AND stage = 'relate'"), {"o": target})
    assert run_stage_for_object(ctx, "relate", target).kind == "done"
    with ctx.db.engine.connect() as conn:
        doc_matter = conn.execute(text("SELECT d.matter_id, m.reference FROM document_version v JOIN document d "
                                       "ON d.id = v.document_id JOIN matter m ON m.id = d.matter_id "
                                       "WHERE v.source_object_id = :o"), {"o": target}).one()
    assert doc_matter.reference == "2024-0999"
