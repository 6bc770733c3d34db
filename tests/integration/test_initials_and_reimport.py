"""Issue 16 on real PostgreSQL through the real stage executor: persons written with initials resolve to the
matter's one full-name person in every processing order (ambiguous initials stay apart), and ``ki matters
import`` after classification re-opens exactly the files whose matter the import decides differently.

Spec: insertion-pipeline.md "Extract metadata" (resolution, roles on the matter), "Classify",
"producer_version semantics" (a re-run stage sends its later stages round again); issue 14 item 1 (order
independence). Cost: two orders of five files through fetch → extract_metadata (~15 s each), two pipeline
runs over seven files and two CLI calls (~40 s).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.orchestration.execute import run_stage_for_object

TRIBUNAL = {
    # matter 2024-0001: the claimant once in full, once by initial
    "a.txt": "Our ref: 2024-0001\nCLAIM FORM (ET1)\nClaimant: Nicola Ogilvie\nRespondent: Holloway Technologies "
             "Limited\n",
    "b.txt": "Our ref: 2024-0001\nRESPONSE FORM (ET3)\nRespondent: Holloway Technologies Limited\n"
             "Claimant: N. Ogilvie\n",
    # matter 2024-0002: two full-name Ogilvies with the initial N. — "N. Ogilvie" is neither of them for sure
    "c.txt": "Our ref: 2024-0002\nCLAIM FORM (ET1)\nClaimant: Nicola Ogilvie\nRespondent: Caldera Holdings Limited\n",
    "d.txt": "Our ref: 2024-0002\nWITNESS LIST\nClaimant: Niamh Ogilvie\nRespondent: Caldera Holdings Limited\n",
    "e.txt": "Our ref: 2024-0002\nRESPONSE FORM (ET3)\nRespondent: Caldera Holdings Limited\nClaimant: N. Ogilvie\n",
}
STAGES_BEFORE = ("fetch", "convert", "classify_matter")


def configure(ctx, **values) -> None:
    for key, value in values.items():
        set_config_value(ctx.settings.data_dir, key, value)
    ctx.reload_config()


def object_ids(ctx, root: Path) -> dict[str, int]:
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT id, external_id FROM source_object WHERE source_id = :s"), {"s": sid})
        return {r.external_id: r.id for r in rows}


def parties(ctx) -> dict[tuple[str, str], tuple[str, str]]:
    """(file, name as written) → (entity name, role); entity ids replaced by a name of the entity's rows."""
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("""
            SELECT so.external_id AS path, p.name, p.role, p.entity_id, e.name AS entity_name
            FROM document_party p JOIN source_object so ON so.id = p.source_object_id
            JOIN entity e ON e.id = p.entity_id WHERE e.kind = 'person'""")).fetchall()
    label = {}
    for r in sorted(rows, key=lambda r: (r.path, r.name)):
        label.setdefault(r.entity_id, f"{r.entity_name}@{r.path}")
    return {(r.path, r.name): (label[r.entity_id], r.role) for r in rows}


@pytest.mark.parametrize("order", [sorted(TRIBUNAL), sorted(TRIBUNAL, reverse=True)], ids=["forward", "reverse"])
def test_initials_resolve_to_the_one_full_name_person_of_the_matter_in_any_order(ctx, tmp_path, order):
    configure(ctx, **{"pipeline.stages.relate.enabled": False, "firm.name": "Ashdown Pryce LLP"})
    root = tmp_path / "tribunal"
    root.mkdir()
    for name, body in TRIBUNAL.items():
        (root / name).write_text(body, encoding="utf-8")
    ids = object_ids(ctx, root)
    for name in order:
        for stage in STAGES_BEFORE:
            run_stage_for_object(ctx, stage, ids[name])
    for name in order:  # a classification another file re-opened runs again here
        run_stage_for_object(ctx, "classify_matter", ids[name])
    for name in order:
        assert run_stage_for_object(ctx, "extract_metadata", ids[name]).kind == "done", name
    got = parties(ctx)
    nicola_1, nicola_2 = got[("a.txt", "Nicola Ogilvie")], got[("c.txt", "Nicola Ogilvie")]
    assert nicola_1[0] == "Nicola Ogilvie@a.txt"
    # one party on matter 2024-0001: the initial row points at Nicola's entity, with her role there
    assert got[("b.txt", "N. Ogilvie")] == nicola_1
    # matter 2024-0002: N. could be Nicola or Niamh — kept apart, under the name as written
    assert got[("e.txt", "N. Ogilvie")][0] == "N. Ogilvie@e.txt"
    assert got[("d.txt", "Niamh Ogilvie")][0] == "Niamh Ogilvie@d.txt"
    assert nicola_2[0] == "Nicola Ogilvie@a.txt"  # one Nicola entity across both matters
    with ctx.db.engine.connect() as conn:
        people = sorted(r.name for r in conn.execute(text("SELECT name FROM entity WHERE kind = 'person'")))
        roles = conn.execute(text("""SELECT count(*) FROM matter_party mp JOIN entity e ON e.id = mp.entity_id
                                     WHERE e.name = 'N. Ogilvie'""")).scalar_one()
    # the initials' own entity is kept (both orders create it); on matter 2024-0001 it holds no role
    assert people == ["N. Ogilvie", "Niamh Ogilvie", "Nicola Ogilvie"]
    assert roles == 1  # on 2024-0002 only
    # the same answer whichever order (the rules' roles: no document says whom the firm acts for)
    assert got == {("a.txt", "Nicola Ogilvie"): ("Nicola Ogilvie@a.txt", "counterparty"),
                   ("b.txt", "N. Ogilvie"): ("Nicola Ogilvie@a.txt", "counterparty"),
                   ("c.txt", "Nicola Ogilvie"): ("Nicola Ogilvie@a.txt", "counterparty"),
                   ("d.txt", "Niamh Ogilvie"): ("Niamh Ogilvie@d.txt", "counterparty"),
                   ("e.txt", "N. Ogilvie"): ("N. Ogilvie@e.txt", "counterparty")}

CLIENT_FOLDER = {
    # one client folder holding two matters: the files without a reference stay in a placeholder matter
    "Clients/Robert Danvers (74625)/claim.txt": "Our ref: 2024-0001\nCLAIM FORM (ET1)\nClaimant: Robert Danvers\n"
                                                "Respondent: Holloway Media Limited\n",
    "Clients/Robert Danvers (74625)/minutes.txt": "Our ref: 2024-0002\nBOARD MINUTES\nClaimant: Robert Danvers\n",
    "Clients/Robert Danvers (74625)/articles.txt": "ARTICLES OF ASSOCIATION\nClaimant: R. Danvers\n",
    # another folder: nothing there writes the name out, so its initials stay their own entity
    "Post Room/scan.txt": "CLAIM FORM (ET1)\nClaimant: R. Danvers\n",
}


@pytest.mark.parametrize("order", [sorted(CLIENT_FOLDER), sorted(CLIENT_FOLDER, reverse=True)],
                         ids=["forward", "reverse"])
def test_initials_without_a_matter_resolve_in_their_folder_in_any_order(ctx, tmp_path, order):
    """A file Classify leaves in a placeholder matter settles its initials in its folder (english-s2's one
    duplicate entity: ``R. Danvers`` in a client folder of two matters stayed apart from ``Robert Danvers``)."""
    configure(ctx, **{"pipeline.stages.relate.enabled": False, "firm.name": "Ashdown Pryce LLP"})
    root = tmp_path / "clients"
    for name, body in CLIENT_FOLDER.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body, encoding="utf-8")
    ids = object_ids(ctx, root)
    for name in order:
        for stage in STAGES_BEFORE:
            run_stage_for_object(ctx, stage, ids[name])
    for name in order:
        run_stage_for_object(ctx, "classify_matter", ids[name])
    assert matters_of(ctx)["Clients/Robert Danvers (74625)/articles.txt"] is None  # a placeholder
    for name in order:
        assert run_stage_for_object(ctx, "extract_metadata", ids[name]).kind == "done", name
    got = {key: entity for key, (entity, _) in parties(ctx).items()}
    robert = "Robert Danvers@Clients/Robert Danvers (74625)/articles.txt"  # labelled by its first row
    assert got == {("Clients/Robert Danvers (74625)/claim.txt", "Robert Danvers"): robert,
                   ("Clients/Robert Danvers (74625)/minutes.txt", "Robert Danvers"): robert,
                   ("Clients/Robert Danvers (74625)/articles.txt", "R. Danvers"): robert,
                   ("Post Room/scan.txt", "R. Danvers"): "R. Danvers@Post Room/scan.txt"}


LIST = """reference,title,client,client_number,aliases
104233-0007,Lease of Unit 4,Harbour Crest Holdings Limited,104233,104233/7
2023.0145,Huur Westpoort,Polder Holding B.V.,27401,
"""
ESTATE = {
    # placeholders the import decides: a client number in the folder, an alias, an imported reference the default
    # formats do not read, the client's name
    "Clients/Harbour Crest (104233)/memo.txt": "Attendance note\nCall with the client about the rent review.",
    "Post Room/scan-1.txt": "Our ref: 104233/7\nDear Sirs, we enclose the signed counterpart.",
    "Post Room/scan-2.txt": "Ons kenmerk: KH/2023.0145\nGeachte heer,\nBijgaand de stukken.",
    "Inbox/fax.txt": "TELEFAX\nFrom: POLDER HOLDING B.V.\nPlease call us back.",
    # the import does not change these: a reference the default formats find, a reference of another matter,
    # a precedent no matter claims
    "Matters/104233-0007 Lease/lease.txt": "Our ref: 104233-0007\nLEASE\nThe Landlord lets the Premises.",
    "Matters/2024-0117 Falcon/hot.txt": "Our ref: 2024-0117\nHeads of terms.",
    "Precedents/NDA.txt": "CONFIDENTIALITY AGREEMENT\nBETWEEN [PARTY A] and [PARTY B]",
}
REOPENED = {"Clients/Harbour Crest (104233)/memo.txt", "Post Room/scan-1.txt", "Post Room/scan-2.txt",
            "Inbox/fax.txt"}


def matters_of(ctx) -> dict[str, str | None]:
    return {r["path"]: (None if r["matter_placeholder"] else r["matter_reference"]) for r in export_rows(ctx.db)
            if not r["embedded"]}


def classify_states(ctx) -> dict[str, tuple[str, str]]:
    with ctx.db.engine.connect() as conn:
        return {r.external_id: (r.classify, r.later) for r in conn.execute(text("""
            SELECT so.external_id, c.status AS classify, coalesce(x.status || ':' || coalesce(x.reason, ''), '')
                   AS later
            FROM source_object so
            JOIN processing_state c ON c.source_object_id = so.id AND c.stage = 'classify_matter'
            JOIN processing_state x ON x.source_object_id = so.id AND x.stage = 'extract_metadata'
            WHERE so.parent_id IS NULL"""))}


def ki_cli(*args: str) -> subprocess.CompletedProcess:
    ki = str(Path(sys.executable).with_name("ki"))
    return subprocess.run([ki, *args], capture_output=True, text=True, timeout=300)


def test_an_import_after_classification_reopens_exactly_the_files_it_decides_differently(make_ctx, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("KI_FIRM__NAME", "Ashdown Pryce LLP")
    monkeypatch.delenv("KI_LLM_BASE_URL", raising=False)
    ctx = make_ctx(workers=2)
    root = tmp_path / "estate"
    for rel, body in ESTATE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    first = launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30)
    assert first.status == "completed" and first.counters.quarantined == 0
    before = matters_of(ctx)
    assert {p for p, m in before.items() if m is None} == REOPENED | {"Precedents/NDA.txt"}  # placeholders
    assert before["Matters/104233-0007 Lease/lease.txt"] == "104233-0007"

    (tmp_path / "matters.csv").write_text(LIST, encoding="utf-8")
    cli = ki_cli("matters", "import", str(tmp_path / "matters.csv"))
    assert cli.returncode == 0, cli.stderr
    assert "1 created, 1 updated, 0 unchanged, 0 refused" in cli.stdout  # 104233-0007 existed (found)
    assert "4 files re-opened for Classify" in cli.stdout, cli.stdout
    states = classify_states(ctx)
    assert {p for p, (c, _) in states.items() if c == "pending"} == REOPENED
    assert all(later == "skipped:waiting_for_previous_stage" for p, (_, later) in states.items() if p in REOPENED)
    assert all(c == "done" for p, (c, _) in states.items() if p not in REOPENED)

    again = ki_cli("matters", "import", str(tmp_path / "matters.csv"))  # idempotent: nothing new to decide
    assert again.returncode == 0, again.stderr
    assert "0 created, 0 updated, 2 unchanged" in again.stdout and "re-opened" not in again.stdout

    second = launch_insertion(ctx, source_id=sid, workers=2, wait_for_retries_seconds=30)
    assert second.status == "completed" and second.counters.quarantined == 0
    after = matters_of(ctx)
    assert after == {**before, "Clients/Harbour Crest (104233)/memo.txt": "104233-0007",
                     "Post Room/scan-1.txt": "104233-0007", "Post Room/scan-2.txt": "2023.0145",
                     "Inbox/fax.txt": "2023.0145"}
    assert all(c == "done" for c, _ in classify_states(ctx).values())
    with ctx.db.engine.connect() as conn:  # the placeholders the files left are gone
        placeholders = {r.reference for r in conn.execute(text("SELECT reference FROM matter WHERE placeholder"))}
    assert len(placeholders) == 1 and "precedents" in next(iter(placeholders)).lower(), placeholders
    third = ki_cli("matters", "import", str(tmp_path / "matters.csv"))
    assert third.returncode == 0 and "re-opened" not in third.stdout
