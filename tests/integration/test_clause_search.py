"""Search by clause, clause type, party (through the entity ledger's aliases) and finality, on both backends.

Spec: insertion-pipeline.md "Index" (clause rows for final/executed versions; every row carries the permission
projection), "Extract metadata" (parties resolved through the entity ledger and its aliases). Anna's folder
holds the dev estate's Thalbach lease (draft and signed scan), Bob's the FLUE supply agreement and NDA (signed);
each folder is readable by its owner only. Runs on the embedded backend and on OpenSearch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.search.factory import backend_for
from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.domain.access.folder_grants import write_grants_file
from ki.domain.entities.names import name_key
from ki.domain.entities.store import add_alias, party_filter_ids
from tests.helpers.search_backend import backend_on

ESTATE = Path("corpus/estate-dev/estate")
THALBACH = "Akten/2023/Thalbach Immobilien GmbH & Co. KG - Gewerbemietvertrag Büroflächen 4. OG"
FLUE = "Clients/FLUE-2023-004 Supply and NDA"
FILES = {"anna": [f"{THALBACH}/2023-02-20 Mietvertrag Entwurf.docx",
                  f"{THALBACH}/2023-03-20 Mietvertrag unterzeichnet.pdf"],
         "bob": [f"{FLUE}/Executed/Supply Agreement_signed.pdf", f"{FLUE}/Executed/NDA_fully_signed.pdf"]}
MODES = ("lexical", "vector", "hybrid")


@pytest.fixture(params=["postgres", pytest.param("opensearch", marks=pytest.mark.opensearch)])
def backend(request, ctx, monkeypatch):
    yield from backend_on(request, ctx, monkeypatch, lambda: backend_for(ctx.db, ctx.config))


@pytest.fixture
def indexed(ctx, shared, tmp_path, backend):
    set_config_value(ctx.settings.data_dir, "retrieval.embedding_model", "hashing:64")
    ctx.reload_config()
    root = tmp_path / "share"
    for who, rels in FILES.items():
        folder = root / who
        folder.mkdir(parents=True)
        write_grants_file(folder, allow=[f"user:{who}"], inherit=False)
        for rel in rels:
            shutil.copy2(shared / ESTATE / rel, folder / Path(rel).name)
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    return ctx


def hits(ctx, query: str, who: str | None, **kw) -> list[tuple[str, str, str | None, str | None]]:
    """(file name, part, clause number, clause type) of every hit."""
    if "party" in kw:
        kw["party_entities"] = party_filter_ids(ctx.db, kw["party"])
    response = search(ctx.db, query, principals=[who] if who else None, operator=who is None, config=ctx.config,
                      limit=50, **kw)
    return [(Path(h.path).name, h.part, h.clause_number, h.clause_type) for h in response.hits]


def test_clause_hits_respect_permissions_and_come_from_final_versions_only(indexed):
    ctx = indexed
    for mode in MODES:
        anna = hits(ctx, "Mietsicherheit Kaution Mieter", "user:anna", clauses=True, mode=mode)
        assert anna and {(f, p) for f, p, _, _ in anna} == {("2023-03-20 Mietvertrag unterzeichnet.pdf", "clause")}
        assert hits(ctx, "Mietsicherheit Kaution Mieter", "user:bob", clauses=True, mode="lexical") == []
        bob = hits(ctx, "liability damages", "user:bob", clauses=True, mode=mode)
        assert bob and {f for f, *_ in bob} <= {"Supply Agreement_signed.pdf", "NDA_fully_signed.pdf"}
        assert hits(ctx, "liability damages", "user:carl", clauses=True, mode=mode) == []
    assert hits(ctx, "Mietsicherheit", "user:anna", clauses=True, mode="lexical")[0][2:] == ("§ 4", "security")


def test_clause_type_filter_keeps_that_type_and_says_the_number(indexed):
    ctx = indexed
    for mode in MODES:
        got = hits(ctx, "Mieter Vermieter", "user:anna", clause_type="security", mode=mode)
        assert got == [("2023-03-20 Mietvertrag unterzeichnet.pdf", "clause", "§ 4", "security")]
        got = hits(ctx, "Party Agreement", None, clause_type="governing_law", mode=mode)
        assert sorted(got) == [("NDA_fully_signed.pdf", "clause", "4", "governing_law"),
                               ("Supply Agreement_signed.pdf", "clause", "7", "governing_law")]
        assert hits(ctx, "Party Agreement", "user:anna", clause_type="governing_law", mode=mode) == []
    with pytest.raises(ValueError, match="not a clause type"):
        search(ctx.db, "x", principals=None, operator=True, config=ctx.config, clause_type="lease")


def test_final_keeps_the_signed_lease_and_drops_the_draft(indexed):
    ctx = indexed
    everything = {f for f, *_ in hits(ctx, "Mietvertrag Mieter", "user:anna", mode="lexical")}
    assert everything == {"2023-02-20 Mietvertrag Entwurf.docx", "2023-03-20 Mietvertrag unterzeichnet.pdf"}
    for mode in MODES:
        assert {f for f, *_ in hits(ctx, "Mietvertrag Mieter", "user:anna", final=True, mode=mode)} == {
            "2023-03-20 Mietvertrag unterzeichnet.pdf"}


def test_party_is_resolved_through_the_alias_ledger(indexed):
    ctx = indexed
    with ctx.db.engine.begin() as conn:
        entity = conn.execute(text("SELECT entity_id FROM document_party WHERE name LIKE 'Pfeiffer%' LIMIT 1")).scalar()
        assert entity is not None
        add_alias(conn, entity, "Pfeiffer Holding Europe", name_key("Pfeiffer Holding Europe"), None)
    for mode in MODES:
        lease = {f for f, *_ in hits(ctx, "Mieter", "user:anna", party="Pfeiffer Holding Europe", mode=mode)}
        assert lease and lease <= {"2023-02-20 Mietvertrag Entwurf.docx", "2023-03-20 Mietvertrag unterzeichnet.pdf"}
        assert hits(ctx, "Mieter", "user:bob", party="Pfeiffer Holding Europe", mode=mode) == []
        both = hits(ctx, "Mieter", "user:anna", party="Pfeiffer Holding Europe", final=True, clauses=True, mode=mode)
        assert both and {f for f, *_ in both} == {"2023-03-20 Mietvertrag unterzeichnet.pdf"}
    response = search(ctx.db, "Mieter", principals=None, operator=True, config=ctx.config, party="Nobody Such GmbH",
                      party_entities=party_filter_ids(ctx.db, "Nobody Such GmbH"))
    assert response.hits == [] and any("no entity of that name" in n for n in response.notes)
