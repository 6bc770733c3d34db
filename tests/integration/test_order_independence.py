"""Decisions taken before a file they would read arrived are taken again (issue 14 item 1), on real PostgreSQL.

* Relate: an annex relates while the pleading that cites it is not classified yet; when the pleading
  classifies, the annex's relate row goes back to pending (``relate_basis``) and relating it again
  finds ``annex_of``. A file the decision would not read requeues nothing.
* Classify: a court letter naming only a case number classifies before any file carrying that case
  number is converted (placeholder); when such a file classifies, the letter's classification is
  taken again (``classify_basis``) and it joins the matter.
* Classify, a decision made stale while it was being taken: the letter reads the corpus before any case
  file is converted, a case file converts and classifies before the letter's decision commits; the commit
  sends the letter back to pending, and taking it again must decide anew (not reuse the stale decision on
  record) — the letter joins the matter.
* Classify, copies of one file: both copies' decisions (one artifact row, an entry each) made stale by one
  commit are both forgotten, so both are taken anew and both join the matter.
* The claim-order knob: ``pipeline.claim_order_seed`` claims in another order, the default order is
  oldest first.

Cost: about 10 s.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.orchestration.execute import run_stage_for_object
from ki.stages import classify_matter
from ki.store.claims import claim_next
from ki.store.matters import recorded_classification

REF = "2024-0153"
MATTER = f"Mandate/{REF} Keller Logistik GmbH gg. Nordwind AG"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body.encode("utf-8"))


def _oid(ctx, external_id: str) -> int:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT id FROM source_object WHERE external_id = :e"),
                            {"e": external_id}).scalar_one()


def _status(ctx, oid: int, stage: str) -> str:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT status FROM processing_state WHERE source_object_id = :o AND stage = :s"),
                            {"o": oid, "s": stage}).scalar_one()


def _run(ctx, oid: int, *stages: str) -> None:
    for stage in stages:
        assert run_stage_for_object(ctx, stage, oid).kind == "done", (oid, stage)


def _relations(ctx, oid: int) -> set[tuple[str, int]]:
    with ctx.db.engine.connect() as conn:
        return {(r.type, r.to_object_id) for r in conn.execute(
            text("SELECT type, to_object_id FROM relation WHERE from_object_id = :o"), {"o": oid})}


def test_an_annex_related_before_its_pleading_classified_is_related_again(ctx, tmp_path):
    root = tmp_path / "estate"
    _write(root, {
        f"{MATTER}/05 Anlagen/Anlage K1 Rahmenliefervertrag.txt":
            f"Anlage K1\nRahmenliefervertrag\nUnser Zeichen: {REF}\nDie Parteien vereinbaren die Lieferung.",
        f"{MATTER}/03 Schriftsätze/Klageschrift eingereicht.txt":
            f"Klageschrift\nUnser Zeichen: {REF}\nDer Vertrag liegt als Anlage K1 vor.\nHamburg, den 15.03.2024",
        f"{MATTER}/06 Rechnungen/Rechnung RE-2024-00001.txt":
            f"Rechnung Nr. RE-2024-00001\nUnser Zeichen: {REF}\nRechnungsdatum: 30.04.2024\nEUR 1.000,00.",
    })
    scan_source(ctx, register_local_source(ctx, root))
    annex = _oid(ctx, f"{MATTER}/05 Anlagen/Anlage K1 Rahmenliefervertrag.txt")
    claim = _oid(ctx, f"{MATTER}/03 Schriftsätze/Klageschrift eingereicht.txt")
    invoice = _oid(ctx, f"{MATTER}/06 Rechnungen/Rechnung RE-2024-00001.txt")
    for oid in (annex, claim, invoice):
        _run(ctx, oid, "fetch", "convert")
    _run(ctx, annex, "classify_matter", "relate")
    assert _relations(ctx, annex) == set()  # the pleading had no matter yet: not among the matter's files
    _run(ctx, invoice, "classify_matter")
    assert _status(ctx, annex, "relate") == "done"  # an invoice is nothing the annex's decision reads
    _run(ctx, claim, "classify_matter")
    assert _status(ctx, annex, "relate") == "pending"  # the pleading cites "Anlage K1": relate again
    _run(ctx, annex, "relate")
    assert _relations(ctx, annex) == {("annex_of", claim)}


def test_a_letter_classified_before_its_case_files_converted_is_classified_again(ctx, tmp_path):
    root = tmp_path / "estate"
    _write(root, {
        "Scans/Scan_0001.txt": "Arbeitsgericht Bremen\nAktenzeichen: 32 Ca 5920/22\nHinweisbeschluss\nText.",
        f"{MATTER}/04 Gericht/Ladung.txt": f"Arbeitsgericht Bremen\nAktenzeichen: 32 Ca 5920/22\n"
                                           f"Unser Zeichen: {REF}\nLadung zum Gütetermin.",
        f"{MATTER}/04 Gericht/Protokoll.txt": f"Protokoll\n32 Ca 5920/22\nUnser Zeichen: {REF}\nText.",
    })
    scan_source(ctx, register_local_source(ctx, root))
    scan = _oid(ctx, "Scans/Scan_0001.txt")
    files = [_oid(ctx, f"{MATTER}/04 Gericht/{n}") for n in ("Ladung.txt", "Protokoll.txt")]
    _run(ctx, scan, "fetch", "convert", "classify_matter", "relate")
    by_path = {r["path"]: r for r in export_rows(ctx.db)}
    assert by_path["Scans/Scan_0001.txt"]["matter_placeholder"]  # nothing else converted yet
    _run(ctx, files[0], "fetch", "convert")
    _run(ctx, files[1], "fetch", "convert", "classify_matter")
    assert _status(ctx, scan, "classify_matter") == "pending"  # a file with the case number and a reference
    _run(ctx, files[0], "classify_matter")
    assert _status(ctx, files[1], "classify_matter") == "done"  # it saw the other one (converted): nothing to redo
    assert _status(ctx, scan, "relate") == "done"  # the later stages wait for the new decision to differ …
    _run(ctx, scan, "classify_matter")
    by_path = {r["path"]: r for r in export_rows(ctx.db)}
    assert by_path["Scans/Scan_0001.txt"]["matter_reference"] == REF
    assert _status(ctx, scan, "relate") == "pending"  # … and it did: relate and the rest run again
    assert _status(ctx, scan, "extract_metadata") == "skipped"
    with ctx.db.engine.connect() as conn:  # the placeholder it left is gone
        assert conn.execute(text("SELECT count(*) FROM matter WHERE placeholder")).scalar_one() == 0


def test_a_decision_made_stale_while_it_was_taken_is_taken_anew(ctx, tmp_path, monkeypatch):
    root = tmp_path / "estate"
    _write(root, {
        "Scans/Scan_0001.txt": "Arbeitsgericht Bremen\nAktenzeichen: 32 Ca 5920/22\nHinweisbeschluss\nText.",
        f"{MATTER}/04 Gericht/Protokoll.txt": f"Protokoll\n32 Ca 5920/22\nUnser Zeichen: {REF}\nText.",
    })
    scan_source(ctx, register_local_source(ctx, root))
    scan = _oid(ctx, "Scans/Scan_0001.txt")
    case_file = _oid(ctx, f"{MATTER}/04 Gericht/Protokoll.txt")
    _run(ctx, scan, "fetch", "convert")
    original = classify_matter._commit
    meanwhile: list[int] = []

    def commit_after_the_case_file(stage_ctx, *args, **kwargs):
        # the letter has read the corpus (its case number found in no converted file) and not committed yet:
        # the case file converts and classifies now, as another worker would
        if stage_ctx.obj.id == scan and not meanwhile:
            meanwhile.append(case_file)
            _run(ctx, case_file, "fetch", "convert", "classify_matter")
        return original(stage_ctx, *args, **kwargs)

    monkeypatch.setattr(classify_matter, "_commit", commit_after_the_case_file)
    # the case file answers its case-number query: the commit sends the letter back (its claim with it)
    assert run_stage_for_object(ctx, "classify_matter", scan).kind == "claim_lost"
    assert meanwhile == [case_file]
    assert _status(ctx, scan, "classify_matter") == "pending"
    with ctx.db.engine.connect() as conn:  # the stale decision is not on record for reuse
        content_hash = conn.execute(text("SELECT content_hash FROM source_object WHERE id = :o"),
                                    {"o": scan}).scalar_one()
        assert recorded_classification(conn, content_hash, scan) is None
    _run(ctx, scan, "classify_matter")
    by_path = {r["path"]: r for r in export_rows(ctx.db)}
    assert by_path["Scans/Scan_0001.txt"]["matter_reference"] == REF
    assert _status(ctx, scan, "relate") == "pending"  # it changed matter: relate and the rest run again


def test_copies_made_stale_together_are_both_taken_anew(ctx, tmp_path):
    letter = "Arbeitsgericht Bremen\nAktenzeichen: 32 Ca 5920/22\nHinweisbeschluss\nText."
    root = tmp_path / "estate"
    _write(root, {"Scans/Scan_0001.txt": letter, "Scans/Scan_0001 - kopie.txt": letter,
                  f"{MATTER}/04 Gericht/Protokoll.txt": f"Protokoll\n32 Ca 5920/22\nUnser Zeichen: {REF}\nText."})
    scan_source(ctx, register_local_source(ctx, root))
    copies = [_oid(ctx, "Scans/Scan_0001.txt"), _oid(ctx, "Scans/Scan_0001 - kopie.txt")]
    case_file = _oid(ctx, f"{MATTER}/04 Gericht/Protokoll.txt")
    for oid in copies:
        _run(ctx, oid, "fetch", "convert", "classify_matter")  # nothing else converted: placeholder
    with ctx.db.engine.connect() as conn:
        content_hash = conn.execute(text("SELECT content_hash FROM source_object WHERE id = :o"),
                                    {"o": copies[0]}).scalar_one()
        assert all(recorded_classification(conn, content_hash, oid) for oid in copies)
    _run(ctx, case_file, "fetch", "convert", "classify_matter")  # answers both copies' case-number query
    assert [_status(ctx, oid, "classify_matter") for oid in copies] == ["pending", "pending"]
    with ctx.db.engine.connect() as conn:  # neither stale decision is left on record for reuse
        assert [recorded_classification(conn, content_hash, oid) for oid in copies] == [None, None]
    for oid in copies:
        _run(ctx, oid, "classify_matter")
    by_path = {r["path"]: r for r in export_rows(ctx.db)}
    assert [by_path[p]["matter_reference"] for p in ("Scans/Scan_0001.txt", "Scans/Scan_0001 - kopie.txt")] \
        == [REF, REF]


def test_claim_order_seed_changes_the_order_and_the_default_is_oldest_first(ctx, tmp_path):
    root = tmp_path / "estate"
    _write(root, {f"f{i:02d}.txt": f"Datei {i}" for i in range(12)})
    scan_source(ctx, register_local_source(ctx, root))

    def order(seed):  # claim one row at a time, as a worker does; roll back
        with ctx.db.engine.begin() as conn:
            claimed = [c.source_object_id for _ in range(12)
                       for c in claim_next(conn, worker="t", run_id=None, order_seed=seed)]
            conn.rollback()
        return claimed

    default = order(None)
    with ctx.db.engine.connect() as conn:
        oldest = [r.source_object_id for r in conn.execute(text(
            "SELECT source_object_id FROM processing_state WHERE status = 'pending' ORDER BY updated_at LIMIT 12"))]
    assert default == oldest
    shuffled = {tuple(order(seed)) for seed in (1, 2, 3)}
    assert len(shuffled) == 3 and tuple(default) not in shuffled
    assert order(2) == order(2)  # a seed fixes the order
