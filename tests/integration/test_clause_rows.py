"""Clause rows and the one profile row per document, written by the index stage on a real PostgreSQL.

Spec: insertion-pipeline.md "Index" ("a profile embedding at ordinal −1 for the latest final version and clause
embeddings at ordinals 1000+ for final/executed versions"; re-indexing diffs by ordinal: replaced, not orphaned).
The files are the dev estate's Thalbach lease: a draft, the final DOCX and the signed PDF.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion

THALBACH = Path("corpus/estate-dev/estate/Akten/2023/"
                "Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG")
FOLDER = "Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG"
DRAFT = "2023-02-20 Mietvertrag Entwurf.docx"
FINAL = "2023-03-13 Mietvertrag Endfassung.docx"
SIGNED = "2023-03-20 Mietvertrag unterzeichnet.pdf"
LEASE_CLAUSES = [(1000, "§ 1", "Mietgegenstand", None), (1001, "§ 2", "Mietzeit", "term"),
                 (1002, "§ 3", "Miete und Nebenkosten", "payment_terms"), (1003, "§ 4", "Mietsicherheit", "security"),
                 (1004, "§ 5", "Instandhaltung", None), (1005, "§ 6", "Untervermietung", "assignment"),
                 (1006, "§ 7", "Schlussbestimmungen", "written_form")]


def copy(shared: Path, root: Path, *names: str) -> None:
    target = root / FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy2(shared / THALBACH / name, target / name)


def rows_of(ctx, name: str) -> dict[str, list]:
    """kind → [(ordinal, number, heading, clause type)] of the file's profile and clause rows."""
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("""SELECT c.ordinal, c.kind, c.meta, c.text FROM chunk c
                                    JOIN source_object so ON so.id = c.source_object_id
                                    WHERE so.external_id = :e AND c.kind IN ('profile', 'clause')
                                    ORDER BY c.ordinal"""), {"e": f"{FOLDER}/{name}"}).fetchall()
    out: dict[str, list] = {"profile": [], "clause": []}
    for r in rows:
        meta = r.meta or {}
        out[r.kind].append(r.text if r.kind == "profile" else
                           (r.ordinal, meta.get("number"), meta.get("heading"), meta.get("clause_type")))
    return out


@pytest.fixture
def lease_root(tmp_path) -> Path:
    return tmp_path / "estate"


def test_the_signed_lease_holds_the_clauses_and_the_profile_drafts_hold_neither(ctx, shared, lease_root):
    copy(shared, lease_root, DRAFT, FINAL, SIGNED)
    sid = register_local_source(ctx, lease_root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30).status == "completed"
    signed, final, draft = rows_of(ctx, SIGNED), rows_of(ctx, FINAL), rows_of(ctx, DRAFT)
    assert signed["clause"] == LEASE_CLAUSES
    assert len(signed["profile"]) == 1
    profile = signed["profile"][0]
    assert "lease" in profile.split("\n")[:3] and "2023-03-20" in profile.split("\n")
    assert "Thalbach Immobilien GmbH & Co. KG" in profile.split("\n")[3]
    assert final == {"profile": [], "clause": []}  # a superseded final version
    assert draft == {"profile": [], "clause": []}  # a draft never has clause rows


def test_a_new_final_version_takes_the_clause_rows_and_the_profile(ctx, shared, lease_root):
    copy(shared, lease_root, DRAFT)
    sid = register_local_source(ctx, lease_root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30).status == "completed"
    # no final version yet: the latest version (the draft) holds the profile, nobody holds clauses
    assert [len(rows_of(ctx, DRAFT)[k]) for k in ("profile", "clause")] == [1, 0]
    copy(shared, lease_root, FINAL)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30).status == "completed"
    final = rows_of(ctx, FINAL)
    assert [(n, h, t) for _, n, h, t in final["clause"]] == [(n, h, t) for _, n, h, t in LEASE_CLAUSES]
    assert len(final["profile"]) == 1 and rows_of(ctx, DRAFT) == {"profile": [], "clause": []}
    copy(shared, lease_root, SIGNED)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30).status == "completed"
    assert rows_of(ctx, SIGNED)["clause"] == LEASE_CLAUSES and len(rows_of(ctx, SIGNED)["profile"]) == 1
    assert rows_of(ctx, FINAL) == {"profile": [], "clause": []}  # replaced, never orphaned
    with ctx.db.engine.connect() as conn:
        per_document = conn.execute(text("""SELECT dv.document_id, count(*) FILTER (WHERE c.kind = 'profile') AS p,
                                                   count(DISTINCT c.source_object_id) FILTER (WHERE c.kind = 'clause')
                                                   AS holders
                                            FROM chunk c JOIN document_version dv
                                            ON dv.source_object_id = c.source_object_id
                                            GROUP BY dv.document_id""")).fetchall()
    assert [(r.p, r.holders) for r in per_document] == [(1, 1)]
