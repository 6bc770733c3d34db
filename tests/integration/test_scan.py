"""Scanning a local source: cases R09 (temp files), R10 (unmounted root), R11 (duplicates) and rescans.

DESIGN.md "Deletion confirmations" (counted per file; a missing root does not count;
an empty listing of a non-empty root tombstones nothing), "Outages are not the file's
fault", "Duplicates and permissions"; insertion-pipeline.md "Processing states" (a scan
seeds fetch pending and every later stage waiting; a changed file is requeued from fetch).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

import ki.adapters.sources.scan as scan_module
import ki.stages.convert as convert_stage
from ki.adapters.search.search import search as _search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.errors import SourceUnavailable
from ki.core.taxonomies import PIPELINE_STAGE_ORDER, SOURCE_OBJECT_DELETED, WAITING_FOR_PREVIOUS_STAGE
from ki.orchestration.quarantine import list_quarantine


def search(conn, query, *, principals=None):
    """The lexical hits of ``query`` (as the local operator unless ``principals``)."""
    return _search(conn.engine, query, principals=principals, operator=principals is None, mode="lexical").hits


def _copy_files(src: Path, dst: Path) -> Path:
    """Copy the files of ``src`` into a fresh writable folder ``dst`` (the case folders are read-only)."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        shutil.copyfile(f, dst / f.name)
    return dst


def _objects(ctx) -> dict[str, object]:
    with ctx.db.engine.connect() as conn:
        return {r.external_id: r for r in conn.execute(text(
            "SELECT id, external_id, size, mtime_ns, content_hash, scanned_hash, missing_scans, deleted_at "
            "FROM source_object"))}


def _rows(ctx, external_id: str) -> dict[str, object]:
    with ctx.db.engine.connect() as conn:
        return {r.stage: r for r in conn.execute(text("""
            SELECT ps.stage, ps.status, ps.reason, ps.attempts, ps.completions, ps.producer_version
            FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
            WHERE so.external_id = :e"""), {"e": external_id})}


def _snapshot(ctx) -> tuple:
    """Everything a scan may change, for "nothing changed" assertions."""
    with ctx.db.engine.connect() as conn:
        return tuple(tuple(map(tuple, conn.execute(text(sql)).fetchall())) for sql in (
            "SELECT * FROM source ORDER BY id",
            "SELECT * FROM source_object ORDER BY id",
            "SELECT * FROM processing_state ORDER BY id",
            "SELECT id, source_object_id, ordinal, text FROM chunk ORDER BY id",
        ))


def _run(ctx, **kw):
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0, **kw)
    assert summary.status == "completed", summary.error
    return summary


def _set_config(ctx, key: str, value) -> None:
    set_config_value(ctx.settings.data_dir, key, value)
    ctx.reload_config()


def _count(ctx, sql: str, **params) -> int:
    with ctx.db.engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


# --- R09: editor lock files, temp files and partial uploads are never documents ----------------

R09_DOCS = {
    "Lease-Unit4B.docx": "cc5c0af9096f25716d7b1719e220e22fe7c0ff3439d83d6effe1badd43716bb7",
    "scan_0041.pdf": "ca46df11083d9fbe5f38f1c83aec2c87e753702207b79cfe31ac648e0c597913",
}
R09_JUNK = {"~$ase-Unit4B.docx", ".~lock.Lease-Unit4B.docx#", "scan_0042.pdf.filepart", "~WRL0003.tmp"}


def test_r09_temp_and_lock_files_are_not_candidates(ctx, cases_dir, tmp_path):
    inbox = _copy_files(cases_dir / "R09-watch-folder-temp-files" / "inbox", tmp_path / "inbox")
    assert {p.name for p in inbox.iterdir()} == set(R09_DOCS) | R09_JUNK
    source_id = register_local_source(ctx, inbox)

    report = scan_source(ctx, source_id)
    assert (report.listed, report.new) == (2, 2)
    assert set(_objects(ctx)) == set(R09_DOCS)
    assert _count(ctx, "SELECT count(*) FROM processing_state") == 2 * len(PIPELINE_STAGE_ORDER)

    _run(ctx)
    objects = _objects(ctx)
    for name, sha in R09_DOCS.items():
        assert objects[name].content_hash == sha
        assert hashlib.sha256(ctx.blobs.read(sha)).hexdigest() == sha
        assert _rows(ctx, name)["fetch"].status == "done"
    with ctx.db.engine.connect() as conn:
        assert {r[0] for r in conn.execute(text("SELECT content_hash FROM blob"))} == set(R09_DOCS.values())
        paths = [r[0] for r in conn.execute(text("SELECT path FROM source_object"))]
    assert not any(Path(p).name in R09_JUNK for p in paths)
    assert list_quarantine(ctx) == []  # no parse attempts on the junk, so no quarantine entries either

    # the upload completes: the rename is an arrival, counted once
    (inbox / "scan_0042.pdf.filepart").rename(inbox / "scan_0042.pdf")
    report = scan_source(ctx, source_id)
    assert (report.listed, report.new, report.changed) == (3, 1, 0)
    assert set(_objects(ctx)) == set(R09_DOCS) | {"scan_0042.pdf"}
    rows = _rows(ctx, "scan_0042.pdf")
    assert rows["fetch"].status == "pending" and len(rows) == len(PIPELINE_STAGE_ORDER)
    assert scan_source(ctx, source_id).new == 0


# --- R10: an unmounted or empty root must not tombstone everything ------------------------------


def _materialise(root: Path, scan: dict) -> None:
    """Make the folder tree at ``root`` look like one scan of scans.json.

    A scan with ``root_exists: false`` moves the root aside (an unmounted share whose mount
    point is gone); an empty listing after that recreates only the empty mount point; the
    first listing with files brings the share back. Files are then written or removed so the
    tree matches the listing; unchanged files keep their bytes and mtime.
    """
    aside = root.with_name(root.name + ".unmounted")
    if not scan["root_exists"]:
        if root.exists():
            root.rename(aside)
        return
    if not root.exists() and aside.exists() and scan["files"]:
        aside.rename(root)
    elif root.exists() and not any(root.iterdir()) and aside.exists() and scan["files"]:
        root.rmdir()
        aside.rename(root)
    root.mkdir(exist_ok=True)
    wanted = {f["path"]: f["content"].encode() for f in scan["files"]}
    for path in [p for p in root.rglob("*") if p.is_file()]:
        if path.relative_to(root).as_posix() not in wanted:
            path.unlink()
    for rel, body in wanted.items():
        path = root / rel
        if not path.exists() or path.read_bytes() != body:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)


def test_r10_unmounted_root_does_not_tombstone(ctx, cases_dir, tmp_path):
    case = json.loads((cases_dir / "R10-sync-root-unmounted" / "scans.json").read_text(encoding="utf-8"))
    _set_config(ctx, "pipeline.deletion_confirmations", case["tombstone_after_identical_scans"])
    assert ctx.config.pipeline.deletion_confirmations == 3
    root = tmp_path / "mnt" / "share" / "clients"
    root.parent.mkdir(parents=True)
    _materialise(root, case["scans"][0])
    source_id = register_local_source(ctx, root)
    all_paths = {f["path"] for s in case["scans"] for f in s["files"]}

    tombstoned_so_far: set[str] = set()
    for scan in case["scans"]:
        _materialise(root, scan)
        for f in scan["files"]:  # the tree really is the listing
            assert hashlib.sha256((root / f["path"]).read_bytes()).hexdigest() == f["sha256"]
        before = _snapshot(ctx)
        streaks_before = {k: o.missing_scans for k, o in _objects(ctx).items()}
        if scan["error"]:
            with pytest.raises(SourceUnavailable):
                scan_source(ctx, source_id)
            assert _snapshot(ctx) == before, f"scan {scan['seq']}: a failed scan changed the database"
            assert scan["expect_counts_toward_n"] is False
            tombstoned_now: list[str] = []
        else:
            report = scan_source(ctx, source_id)
            tombstoned_now = sorted(report.tombstoned)
            listed = {f["path"] for f in scan["files"]}
            objects = _objects(ctx)
            if not listed and any(o.deleted_at is None for o in objects.values()):
                assert report.suspicious, f"scan {scan['seq']}: an empty listing was not flagged"
                assert {k: o.missing_scans for k, o in objects.items()} == streaks_before  # no streak change
            for path in listed:
                assert objects[path].missing_scans == 0 and objects[path].deleted_at is None
        assert tombstoned_now == sorted(scan["expect_tombstoned"]), f"scan {scan['seq']}"
        tombstoned_so_far |= set(tombstoned_now)
        live = {k for k, o in _objects(ctx).items() if o.deleted_at is not None}
        assert live == tombstoned_so_far, f"scan {scan['seq']}: tombstones {live}"
    assert tombstoned_so_far == {"Raman/lease-4b.eml"}
    objects = _objects(ctx)
    assert set(objects) == all_paths
    assert objects["Raman/lease-4b.eml"].missing_scans == 3


def test_rescan_rehashes_only_what_changed_and_requeues_changed_content(ctx, tmp_path, monkeypatch):
    root = tmp_path / "akten"
    root.mkdir()
    docs = {
        "keep.txt": "Gutachten zur Apfelkuchenbäckerei Sommer.\n",
        "touch.txt": "Protokoll der Eigentümerversammlung Birnbaum.\n",
        "change.txt": "Mahnung Kirschgarten erste Fassung.\n",
    }
    for name, body in docs.items():
        (root / name).write_text(body, encoding="utf-8")
    source_id = register_local_source(ctx, root)
    assert scan_source(ctx, source_id).new == 3
    _run(ctx)
    fetched = _objects(ctx)
    for name, body in docs.items():
        assert fetched[name].content_hash == hashlib.sha256(body.encode()).hexdigest()
    before = {name: _rows(ctx, name) for name in docs}

    hashed: list[Path] = []
    real_sha = scan_module._sha256_file

    def spy(path: Path) -> str:
        hashed.append(Path(path))
        return real_sha(path)

    monkeypatch.setattr(scan_module, "_sha256_file", spy)

    # 1. nothing changed: nothing is re-hashed, nothing requeued
    report = scan_source(ctx, source_id)
    assert (report.unchanged, report.changed, report.new) == (3, 0, 0)
    assert hashed == []
    assert {name: _rows(ctx, name) for name in docs} == before

    # 2. touched but identical: re-hashed once, recorded, not requeued
    st = (root / "touch.txt").stat()
    os.utime(root / "touch.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    report = scan_source(ctx, source_id)
    assert [p.name for p in hashed] == ["touch.txt"]
    assert (report.changed, report.unchanged) == (0, 3)  # same content: unchanged
    assert {name: _rows(ctx, name) for name in docs} == before
    touched = _objects(ctx)["touch.txt"]
    assert touched.mtime_ns == st.st_mtime_ns + 5_000_000_000
    assert touched.content_hash == touched.scanned_hash == fetched["touch.txt"].content_hash

    # 3. changed content: requeued from fetch with fresh budgets; the others stay done
    hashed.clear()
    new_body = b"Mahnung Kirschgarten zweite Fassung mit Zitronenfalter-Klausel.\n"
    (root / "change.txt").write_bytes(new_body)
    report = scan_source(ctx, source_id)
    assert [p.name for p in hashed] == ["change.txt"]
    assert (report.changed, report.unchanged) == (1, 2)
    rows = _rows(ctx, "change.txt")
    assert (rows["fetch"].status, rows["fetch"].attempts) == ("pending", 0)
    for stage in PIPELINE_STAGE_ORDER[1:]:
        assert (rows[stage].status, rows[stage].reason, rows[stage].attempts) == (
            "skipped", WAITING_FOR_PREVIOUS_STAGE, 0), stage
    assert {name: _rows(ctx, name) for name in ("keep.txt", "touch.txt")} == {
        name: before[name] for name in ("keep.txt", "touch.txt")}

    _run(ctx)
    new_hash = hashlib.sha256(new_body).hexdigest()
    assert _objects(ctx)["change.txt"].content_hash == new_hash
    assert ctx.blobs.read(new_hash) == new_body
    # every enabled stage ran again: done, or skipped by its own handler (a .txt has no revisions to decide on)
    assert {s: (r.status, r.reason) for s, r in _rows(ctx, "change.txt").items()
            if ctx.config.pipeline.stage(s).enabled} == {
        s: ("skipped", "no_revision_evidence") if s == "extract_decisions" else ("done", None)
        for s in PIPELINE_STAGE_ORDER if ctx.config.pipeline.stage(s).enabled}
    with ctx.db.engine.connect() as conn:
        assert [h.path for h in search(conn, "Zitronenfalter")] == [str((root / "change.txt").resolve())]
        # the first version's text is gone from the index (replaced by ordinal, nothing orphaned)
        old_chunks = conn.execute(text("SELECT count(*) FROM chunk WHERE text LIKE '%erste Fassung%'")).scalar_one()
        assert old_chunks == 0


def test_tombstones_leave_search_and_skip_pending_rows(ctx, tmp_path):
    _set_config(ctx, "pipeline.deletion_confirmations", 2)
    root = tmp_path / "ablage"
    root.mkdir()
    (root / "a.txt").write_text("Vermerk über den Zitronenbaum im Innenhof.\n", encoding="utf-8")
    (root / "b.txt").write_text("Vermerk über die Garage.\n", encoding="utf-8")
    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    _run(ctx)
    with ctx.db.engine.connect() as conn:
        assert len(search(conn, "Zitronenbaum")) == 1

    (root / "a.txt").unlink()
    report = scan_source(ctx, source_id)
    assert (report.missing, report.tombstoned) == (1, [])
    with ctx.db.engine.connect() as conn:  # one absence is not a deletion yet
        assert len(search(conn, "Zitronenbaum")) == 1
    report = scan_source(ctx, source_id)
    assert report.tombstoned == ["a.txt"]
    a_id = _objects(ctx)["a.txt"].id
    with ctx.db.engine.connect() as conn:
        assert search(conn, "Zitronenbaum") == []
        assert len(search(conn, "Garage")) == 1
    assert _count(ctx, "SELECT count(*) FROM chunk WHERE source_object_id = :o", o=a_id) == 0

    # a file that is tombstoned before it was ever fetched: its pending rows end skipped
    (root / "c.txt").write_text("Kurzlebiger Entwurf.\n", encoding="utf-8")
    assert scan_source(ctx, source_id).new == 1
    (root / "c.txt").unlink()
    scan_source(ctx, source_id)
    assert scan_source(ctx, source_id).tombstoned == ["c.txt"]
    assert _rows(ctx, "c.txt")["fetch"].status == "pending"
    _run(ctx)
    rows = _rows(ctx, "c.txt")
    assert {s: (r.status, r.reason) for s, r in rows.items()} == {
        s: ("skipped", SOURCE_OBJECT_DELETED) for s in PIPELINE_STAGE_ORDER}
    assert list_quarantine(ctx) == []
    assert _count(ctx, "SELECT count(*) FROM processing_state WHERE status IN ('failed', 'quarantined')") == 0


# --- R11: the same bytes arrive twice at once --------------------------------------------------

R11_SAME = "e0bb3300296949b8a8ebda508f40de1bcd044795b631405c882983c58363b1b5"
R11_CORRECTED = "621fa98835365c03ef7e85650aca43a18cd3b304064c71474bff393da17c4fa7"


def _count_conversions(monkeypatch) -> list[str]:
    """Count convert_bytes calls; each takes a moment so concurrent converters of one blob overlap."""
    calls: list[str] = []
    real = convert_stage.convert_bytes

    def slow_convert(data, name, config, **kwargs):
        calls.append(name)
        time.sleep(0.3)
        return real(data, name, config, **kwargs)

    monkeypatch.setattr(convert_stage, "convert_bytes", slow_convert)
    return calls


def test_r11_identical_files_are_stored_and_converted_once(make_ctx, cases_dir, tmp_path, monkeypatch):
    ctx = make_ctx(workers=4)
    drop = _copy_files(cases_dir / "R11-duplicate-same-bytes" / "drop", tmp_path / "drop")
    conversions = _count_conversions(monkeypatch)

    # two watchers register the folder at the same instant: the unique-constraint race is absorbed
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def register() -> None:
        try:
            barrier.wait()
            scan_source(ctx, register_local_source(ctx, drop))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=register) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count(ctx, "SELECT count(*) FROM source") == 1
    assert _count(ctx, "SELECT count(*) FROM source_object") == 3
    assert _count(ctx, "SELECT count(*) FROM processing_state") == 3 * len(PIPELINE_STAGE_ORDER)

    summary = _run(ctx, workers=4)
    assert (summary.counters.retried, summary.counters.quarantined) == (0, 0)
    with ctx.db.engine.connect() as conn:
        blobs = {r[0] for r in conn.execute(text("SELECT content_hash FROM blob"))}
        artifacts = conn.execute(text(
            "SELECT content_hash FROM artifact WHERE kind = 'structured_json' ORDER BY content_hash")).fetchall()
        hashes = dict(conn.execute(text("SELECT external_id, content_hash FROM source_object")).fetchall())
        bad = conn.execute(text(
            "SELECT count(*) FROM processing_state WHERE status IN ('failed', 'quarantined', 'running')")).scalar_one()
        chunks = dict(conn.execute(text(
            "SELECT so.external_id, count(*) FROM chunk c JOIN source_object so ON so.id = c.source_object_id "
            "GROUP BY so.external_id")).fetchall())
    assert blobs == {R11_SAME, R11_CORRECTED}
    assert hashes == {"Invoice-0117.pdf": R11_SAME, "Invoice-0117 (1).pdf": R11_SAME,
                      "Invoice-0117-corrected.pdf": R11_CORRECTED}
    assert [a[0] for a in artifacts] == sorted([R11_SAME, R11_CORRECTED])
    assert len(conversions) == 2, conversions  # parse ran once per blob
    assert bad == 0
    assert set(chunks) == set(hashes)  # every copy is indexed with its own permissions

    with ctx.db.engine.connect() as conn:
        hits = search(conn, "Invoice Keller")
    assert sorted(h.content_hash for h in hits) == sorted([R11_SAME, R11_CORRECTED])  # the pair collapsed
    assert len({h.source_object_id for h in hits}) == 2


def test_r11_duplicates_keep_their_own_permissions(ctx, cases_dir, tmp_path, monkeypatch):
    drop = cases_dir / "R11-duplicate-same-bytes" / "drop"
    conversions = _count_conversions(monkeypatch)
    (tmp_path / "alice").mkdir()
    (tmp_path / "bob").mkdir()
    shutil.copyfile(drop / "Invoice-0117.pdf", tmp_path / "alice" / "Invoice-0117.pdf")
    shutil.copyfile(drop / "Invoice-0117 (1).pdf", tmp_path / "bob" / "Invoice-0117 (1).pdf")
    for who in ("alice", "bob"):
        scan_source(ctx, register_local_source(ctx, tmp_path / who, config={"allowed_principals": [who]}))
    _run(ctx)
    assert len(conversions) == 1

    def paths(principals):
        with ctx.db.engine.connect() as conn:
            return [Path(h.path).parent.name for h in search(conn, "Invoice", principals=principals)]

    assert paths(["alice"]) == ["alice"]
    assert paths(["bob"]) == ["bob"]
    assert len(paths(["alice", "bob"])) == 1  # may see both: shown once
    assert len(paths(None)) == 1
    assert paths(["carol"]) == []
