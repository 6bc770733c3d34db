"""A mail with 200 attachments through the real pipeline (embedded PostgreSQL): never quarantined, every
attachment related (issue 14 item 6 — the relate schema allowed 50 relations, so such a mail was quarantined
at relate as a ValidationError counted as the file's fault).

Cost: 65-71 s at load average 25-30 (about 20 s on a quiet machine) (201 files through every stage with 4 workers).
"""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion
from ki.store.status import rows_by_stage

ATTACHMENTS = 200
MAIL = "Mandate/2024-0153 Keller Logistik GmbH gg. Nordwind AG/01 Korrespondenz/Unterlagen.eml"


def big_mail(n: int) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Jan Keller <jan@keller.example>"
    msg["To"] = ", ".join(f"Empfänger {i} <r{i}@kanzlei.example>" for i in range(60))
    msg["Subject"] = "Unterlagen zum Verfahren 2024-0153 – vollständig"
    msg["Date"] = "Mon, 04 Mar 2024 10:00:00 +0100"
    msg["Message-ID"] = "<unterlagen@keller.example>"
    msg.set_content("Sehr geehrte Frau Roth,\nanbei alle Belege.\nUnser Zeichen: 2024-0153\n")
    for i in range(n):
        msg.add_attachment(f"Beleg {i}\nLieferschein Nr. LS-{i:05d} über {i + 1} Paletten.\n".encode(),
                           maintype="text", subtype="plain", filename=f"Beleg_{i:03d}.txt")
    return bytes(msg)


def test_a_mail_with_200_attachments_is_related_to_each_and_never_quarantined(ctx, tmp_path: Path):
    root = tmp_path / "estate"
    (root / MAIL).parent.mkdir(parents=True)
    (root / MAIL).write_bytes(big_mail(ATTACHMENTS))
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=4, wait_for_retries_seconds=30)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    rows = {r["path"]: r for r in export_rows(ctx.db)}
    attachments = sorted(p for p in rows if p.startswith(MAIL + " » "))
    assert len(attachments) == ATTACHMENTS
    relations = rows[MAIL]["relations"]
    assert sorted(r["target"] for r in relations) == attachments
    assert {r["type"] for r in relations} == {"references"}
    with ctx.db.engine.connect() as conn:
        stages = rows_by_stage(conn, rows[MAIL]["object_id"])
    assert stages["relate"].status == "done" and stages["relate"].attempts == 1  # right the first time
