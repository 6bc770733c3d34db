"""Summaries that tell the truth, quarantine list/retry, ``ki worker`` without an engine and a database
migrated by a newer ki (issue 21, bullets "Summaries that tell the truth" and 6), driven as the real
``ki`` command on a fresh data directory and the embedded PostgreSQL.

test_insert_summaries_and_quarantine_retry: two sources, five inserts/syncs of a few small files (a
corrupt PDF quarantines in convert), three retries (~2-4 min on a loaded 2-core machine).
test_worker_without_engine_and_newer_schema: no pipeline run (~20-40 s).
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.timeout(900)

BROKEN_PDF = b"%PDF-1.4\nnot a pdf at all\n"


def _database(ki):
    """An engine on ki's database in the user's embedded PostgreSQL (what the ``ki`` commands use)."""
    from ki.store.db import DATABASE_NAME, embedded_server_uri, sqlalchemy_url

    return create_engine(sqlalchemy_url(embedded_server_uri(ki.data_dir / "pg"), DATABASE_NAME))


def _count(ki, sql: str) -> int:
    engine = _database(ki)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def test_insert_summaries_and_quarantine_retry(ki):
    ki("config", "set", "pipeline.deletion_confirmations", "2")
    ki("config", "set", "pipeline.auto_insert_after_sync", "false")
    other = ki.base / "folders" / "other"
    other.mkdir(parents=True)
    (other / "kaputt.pdf").write_bytes(BROKEN_PDF)
    ki("insert", str(other))  # a quarantine of another source: never in the estate's summaries

    estate = ki.base / "folders" / "estate"
    estate.mkdir()
    for name in ("a", "b", "c", "r"):
        (estate / f"{name}.txt").write_text(f"Akte {name}: Liefervertrag zwischen A und B.\n")
    (estate / "broken.pdf").write_bytes(BROKEN_PDF)
    first = ki("insert", str(estate)).stderr.splitlines()
    assert f"scanned {estate}: 5 files: 5 new, 0 changed, 0 unchanged, 0 restored; 0 tombstoned" in first
    at = first.index("quarantined by this run: 1 file (`ki quarantine list` for all):")
    assert first[at + 1].startswith(f"  {estate / 'broken.pdf'}  [Parse (convert)] corrupt: broken.pdf: "
                                    "PDFium cannot open")
    assert str(other) not in "\n".join(first)

    (estate / "r.txt").unlink()
    assert f"scanned {estate}: 4 files: 0 new, 0 changed, 4 unchanged, 0 restored; 1 missing, tombstoned after 1 " \
           "more scan; 0 tombstoned" in ki("sync", str(estate)).stderr.splitlines()
    assert f"scanned {estate}: 4 files: 0 new, 0 changed, 4 unchanged, 0 restored; 1 tombstoned" in \
        ki("sync", str(estate)).stderr.splitlines()

    (estate / "n.txt").write_text("Neue Akte: Kaufvertrag.\n")  # added
    (estate / "b.txt").write_text("Akte b: Liefervertrag zwischen A und B, geändert am 3. März.\n")  # changed
    (estate / "c.txt").unlink()  # deleted: missing, awaiting confirmation
    (estate / "r.txt").write_text("Akte r: Liefervertrag zwischen A und B.\n")  # restored
    last = ki("insert", str(estate)).stderr.splitlines()
    assert f"scanned {estate}: 5 files: 1 new, 1 changed, 2 unchanged, 1 restored; 1 missing, tombstoned after 1 " \
           "more scan; 0 tombstoned" in last
    assert "1 file of this source stays quarantined from earlier runs (`ki quarantine list`, `ki quarantine retry " \
           "ID`)" in last
    assert not any(line.startswith("quarantined by this run") for line in last)
    assert str(other) not in "\n".join(last)

    entries = {e["path"]: e for e in json.loads(ki("quarantine", "list", "--json").stdout)}
    assert sorted(entries) == sorted([str(estate / "broken.pdf"), str(other / "kaputt.pdf")])
    mine, theirs = entries[str(estate / "broken.pdf")], entries[str(other / "kaputt.pdf")]
    listing = ki("quarantine", "list").stdout.splitlines()
    assert f"{mine['source_object_id']:>7}  Parse (convert): corrupt, 1 attempt: {estate / 'broken.pdf'}" in listing

    runs = "SELECT count(*) FROM pipeline_runs"
    audits = "SELECT count(*) FROM audit_log"
    before = (_count(ki, runs), _count(ki, audits))
    assert ki("quarantine", "retry", "999999", code=2).stderr.splitlines() == [
        "no such object: 999999 (`ki quarantine list` shows the quarantined files and their ids)"]
    assert (_count(ki, runs), _count(ki, audits)) == before  # nothing written

    later = ki.base / "folders" / "later"
    later.mkdir()
    for i in range(3):
        (later / f"brief-{i}.txt").write_text(f"Brief {i} an die Gegenseite.\n")
    ki("sync", str(later))  # auto-insert is off: three fetches wait, unrelated to the retry
    oid = mine["source_object_id"]
    retry = ki("quarantine", "retry", str(oid), "--stage", "index")
    said = retry.stdout.splitlines()  # text, not JSON: released, invalidated, previous error, outcome
    assert said[0].startswith(f"released Parse (convert) of object {oid} with a fresh budget of ")
    assert said[1] == ("invalidated: Classify (classify_matter), Relate, Extract metadata (extract_metadata), "
                       "Extract decisions (extract_decisions), Index")
    assert said[2].startswith("previous error: corrupt: broken.pdf: PDFium cannot open")
    assert said[3] == f"outcome: object {oid} was quarantined again (1 stage execution; `ki quarantine list` says why)"
    assert not retry.stdout.lstrip().startswith("{")
    lines = retry.stderr.splitlines()
    assert lines[0] == ("released convert instead of index: convert is the earliest quarantined stage of object "
                        f"{oid}; index needs its output and runs after it")
    assert lines[1] == "the original failure was deterministic: it will quarantine again unless the file changed"
    assert lines[2].endswith(f": 1 stage executions of object {oid} (0 done, 0 skipped, 0 retried, 1 quarantined)")
    assert lines[2].startswith("run ") and " completed: " in lines[2]
    stages = json.loads(ki("status", "--json").stdout)["stages"]
    assert stages["fetch"]["pending"] == 3  # the retry did not run (or wait for) the other source's work

    toid = theirs["source_object_id"]
    early_run = ki("quarantine", "retry", str(toid), "--stage", "fetch", "--no-run", "--json")
    assert json.loads(early_run.stdout)["released_stage"] == "convert"  # --json: the record
    early = early_run.stderr.splitlines()
    assert early[0] == (f"released convert instead of fetch: fetch of object {toid} is done, not quarantined; convert "
                        "is its quarantined stage")
    assert ki("quarantine", "retry", str(toid), "--no-run", code=2).stderr.splitlines() == [
        f"source object {toid} has no quarantined stage"]


def test_worker_without_engine_and_newer_schema(ki):
    for name in [k for k in ki.env if k.startswith("HATCHET_CLIENT_")]:
        del ki.env[name]
    log = ki.data_dir / "ki.log"
    assert ki("worker", code=2).stderr.splitlines() == [
        "ki: `ki worker` cannot serve a Hatchet engine: no Hatchet engine is configured: HATCHET_CLIENT_TOKEN is "
        "not set",
        "what to do: either start a Hatchet engine and set HATCHET_CLIENT_TOKEN (and HATCHET_CLIENT_HOST_PORT) to "
        "its token, then `ki config set components.orchestrator_provider hatchet` (README, section Hatchet); or go "
        "without a worker: components.orchestrator_provider is local, so `ki insert` already runs every stage in "
        "its own process",
        f"details: {log}"]
    ki("config", "set", "components.orchestrator_provider", "hatchet")
    assert ki("worker", code=2).stderr.splitlines()[1] == (
        "what to do: either start a Hatchet engine and set HATCHET_CLIENT_TOKEN (and HATCHET_CLIENT_HOST_PORT) to "
        "its token (README, section Hatchet); or go without a worker: `ki config set "
        "components.orchestrator_provider local` and `ki insert` runs every stage in its own process")
    pinned = ki("worker", code=2, extra={"KI_COMPONENTS__ORCHESTRATOR_PROVIDER": "hatchet"}).stderr.splitlines()
    assert pinned[1].endswith("or go without a worker: unset KI_COMPONENTS__ORCHESTRATOR_PROVIDER (it pins the "
                              "provider to hatchet) and `ki insert` runs every stage in its own process")

    ki("status")  # creates and migrates the database
    engine = _database(ki)
    try:
        with engine.begin() as conn:
            (head,) = conn.execute(text("SELECT version_num FROM alembic_version")).scalars()
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    finally:
        engine.dispose()
    assert ki("status", code=7).stderr.splitlines() == [
        f"ki: the database was migrated by a newer ki (schema revision 9999_from_the_future; this ki knows up to "
        f"{head})",
        "what to do: use the newer ki that migrated it (update this installation), or point KI_DATA_DIR / "
        "KI_DATABASE_URL at another database; nothing was changed",
        f"details: {log}"]
    assert _count(ki, "SELECT count(*) FROM alembic_version WHERE version_num = '9999_from_the_future'") == 1
