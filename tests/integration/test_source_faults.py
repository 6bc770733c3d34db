"""Outages are never blamed on files; one bad name never blocks a folder (issue 14 items 4 and 5).

Real reproductions: a share that flaps (its root renamed away and back by a thread while the run
fetches), an unmounted share's empty mount point, a sub-folder and a file without read permission
(``ki insert`` as a real process without the DAC capabilities when the tests run as root, so the
kernel's permission checks apply), names that are not UTF-8, FIFOs, sockets, symlinks leaving the
root, broken symlinks and loops, and a path too long for the unique index.

DESIGN.md "Outages are not the file's fault", "Deletion confirmations", "Quarantine reasons".
Cost: ~1-2 min at load 30 (three short ``ki insert`` processes; the rest in-process, fetch only).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.errors import QUARANTINE_REASONS
from ki.core.taxonomies import PIPELINE_STAGE_ORDER
from tests.helpers.unprivileged import unprivileged, user_context

KI_SCRIPT = Path(sys.executable).parent / "ki"
KI = [str(KI_SCRIPT)] if KI_SCRIPT.exists() else [sys.executable, "-m", "ki.cli"]


def _fetch_only(ctx) -> None:
    """Switch off every stage after fetch: these tests are about reading the source."""
    for stage in PIPELINE_STAGE_ORDER[1:]:
        set_config_value(ctx.settings.data_dir, f"pipeline.stages.{stage}.enabled", False)
    set_config_value(ctx.settings.data_dir, "pipeline.retry_base_seconds", 0.05)
    ctx.reload_config()


def _fetch_rows(ctx) -> dict[str, tuple]:
    with ctx.db.engine.connect() as conn:
        return {r.external_id: (r.status, r.reason, r.last_error) for r in conn.execute(text("""
            SELECT so.external_id, ps.status, ps.reason, ps.last_error FROM processing_state ps
            JOIN source_object so ON so.id = ps.source_object_id WHERE ps.stage = 'fetch'"""))}


def _quarantined(ctx) -> list[tuple]:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text("SELECT source_object_id, stage, reason FROM processing_state "
                                 "WHERE status = 'quarantined'")).fetchall()


# --- item 4: a share that disappears mid-run is an outage, never 34 quarantined files ----------------


def test_a_flapping_share_quarantines_nothing(make_ctx, tmp_path):
    ctx = make_ctx(workers=4, infrastructure_retry_max_seconds=0.2)
    _fetch_only(ctx)
    root = tmp_path / "share" / "akten"
    root.mkdir(parents=True)
    for i in range(40):
        (root / f"brief-{i:02d}.txt").write_text(f"Schreiben Nummer {i}\n" * 50, encoding="utf-8")
    source_id = register_local_source(ctx, root)
    assert scan_source(ctx, source_id).new == 40

    aside = root.with_name("akten.away")
    stop = threading.Event()
    flaps = [0]

    def flap() -> None:  # the share goes away for 30 ms, comes back for 10 ms, over and over
        while not stop.is_set():
            root.rename(aside)
            time.sleep(0.03)
            aside.rename(root)
            flaps[0] += 1
            time.sleep(0.01)

    flapper = threading.Thread(target=flap, daemon=True)
    flapper.start()
    try:
        summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0.5)
    finally:
        stop.set()
        flapper.join()
    assert flaps[0] > 3
    assert _quarantined(ctx) == []
    rows = _fetch_rows(ctx)
    outages = [e for e, (status, _, err) in rows.items() if status == "failed"]
    for eid in outages:  # whatever the flapping left unfinished waits as an outage, never the file's fault
        err = rows[eid][2]
        assert err["infrastructure"] and err["reason"] == "source_missing", err
    assert summary.counters.retried > 0, "the flapping never hit a fetch: the test proves nothing"

    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=5)  # the share is back
    assert summary.status == "completed"
    assert {status for status, _, _ in _fetch_rows(ctx).values()} == {"done"}
    assert _quarantined(ctx) == []


def test_an_empty_mount_point_is_an_outage_not_missing_files(make_ctx, tmp_path):
    """An unmounted share leaves its mount point behind, empty: the root is present and readable, the
    files are gone — at fetch that is the share's outage, not 3 files' ``source_missing``."""
    ctx = make_ctx(workers=2, infrastructure_retry_max_seconds=0.2)
    _fetch_only(ctx)
    root = tmp_path / "mnt" / "share"
    (root / "Akte").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "Akte/c.txt"):
        (root / name).write_text("Vertrag\n", encoding="utf-8")
    scan_source(ctx, register_local_source(ctx, root))
    mounted = root.with_name("share.mounted")
    root.rename(mounted)
    root.mkdir()  # the empty mount point
    launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    rows = _fetch_rows(ctx)
    assert _quarantined(ctx) == []
    assert {status for status, _, _ in rows.values()} == {"failed"}
    assert {err["infrastructure"] for _, _, err in rows.values()} >= {f"source root empty: {root}"}

    root.rmdir()
    mounted.rename(root)
    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=5)
    assert summary.status == "completed"
    assert {status for status, _, _ in _fetch_rows(ctx).values()} == {"done"}


def test_a_vanished_folder_is_an_outage_and_a_file_deleted_alone_is_source_missing(make_ctx, tmp_path):
    ctx = make_ctx(workers=2, infrastructure_retry_max_seconds=0.2)
    _fetch_only(ctx)
    root = tmp_path / "ablage"
    (root / "Mandant").mkdir(parents=True)
    (root / "bleibt.txt").write_text("bleibt\n", encoding="utf-8")
    (root / "weg.txt").write_text("weg\n", encoding="utf-8")
    (root / "Mandant" / "akte.txt").write_text("akte\n", encoding="utf-8")
    scan_source(ctx, register_local_source(ctx, root))
    (root / "Mandant").rename(tmp_path / "Mandant.elsewhere")  # the folder goes (a sub-share unmounted)
    (root / "weg.txt").unlink()  # one file deleted on its own, its folder present
    launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    rows = _fetch_rows(ctx)
    assert rows["bleibt.txt"][0] == "done"
    status, reason, err = rows["Mandant/akte.txt"]
    assert (status, reason) == ("failed", "source_missing")
    assert err["infrastructure"] == f"source folder missing: {root / 'Mandant'}"
    status, reason, err = rows["weg.txt"]
    assert (status, reason, err["deterministic"]) == ("quarantined", "source_missing", True)  # the spec's rule

    (tmp_path / "Mandant.elsewhere").rename(root / "Mandant")
    launch_insertion(ctx, trigger="test", wait_for_retries_seconds=5)
    assert _fetch_rows(ctx)["Mandant/akte.txt"][0] == "done"


# --- item 4: permissions, with the kernel's own checks ---------------------------------------------------


@pytest.fixture
def user_ctx(db_url):
    """A context whose data directory (and ``place`` for estates) another user can reach: as root the
    tests run ``ki insert`` as a user the kernel's permission checks apply to (:func:`_ki_insert`)."""
    with user_context(db_url) as ctx:
        yield ctx


def _ki_insert(ctx, root: Path) -> str:
    """Run ``ki insert ROOT`` as an unprivileged process; returns what it printed (stdout + stderr)."""
    return _ki(ctx, "insert", str(root), both=True)


def _ki(ctx, *args: str, both: bool = False) -> str:
    """Run ``ki ARGS`` as an unprivileged process; returns its stdout (``both``: stderr + stdout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env |= {"KI_DATA_DIR": str(ctx.settings.data_dir), "KI_DATABASE_URL": ctx.settings.database_url,
            "KI_INSERT_WAIT_RETRY_SECONDS": "0", "KI_INFRASTRUCTURE_RETRY_MAX_SECONDS": "0.2", "COLUMNS": "200",
            "HOME": str(ctx.settings.data_dir)}
    proc = subprocess.run(unprivileged(ctx, [*KI, *args]), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stderr + proc.stdout if both else proc.stdout


def test_unreadable_subfolder_never_counts_toward_deleting_its_files(user_ctx):
    ctx = user_ctx
    tmp_path = ctx.place
    _fetch_only(ctx)
    set_config_value(ctx.settings.data_dir, "pipeline.deletion_confirmations", 1)  # the strictest setting
    ctx.reload_config()
    root = tmp_path / "akten"
    (root / "Geheim").mkdir(parents=True)
    (root / "offen.txt").write_text("offen\n", encoding="utf-8")
    (root / "Geheim" / "vertrag.txt").write_text("vertrag\n", encoding="utf-8")
    (root / "Geheim" / "anlage.txt").write_text("anlage\n", encoding="utf-8")
    first = _ki_insert(ctx, root)
    assert "3 files: 3 new" in first, first
    (root / "Geheim").chmod(0)
    try:
        for _ in range(3):
            out = _ki_insert(ctx, root)
            assert "0 tombstoned" in out, out
            assert "skipped 1 entry: 1 unreadable_folder" in out, out
            assert "Geheim  [unreadable_folder] Permission denied" in out, out
            assert "2 known document(s) below folders that could not be read were not counted missing" in out
            with ctx.db.engine.connect() as conn:
                alive = dict(conn.execute(text("SELECT external_id, deleted_at IS NULL FROM source_object")).all())
                streaks = conn.execute(text("SELECT max(missing_scans) FROM source_object")).scalar_one()
            assert alive == {"offen.txt": True, "Geheim/vertrag.txt": True, "Geheim/anlage.txt": True}
            assert streaks == 0
    finally:
        (root / "Geheim").chmod(0o755)
    # only a successful listing of its folder reports a file missing
    (root / "Geheim" / "anlage.txt").unlink()
    out = _ki_insert(ctx, root)
    assert "1 tombstoned" in out, out


def test_a_file_ki_may_not_read_waits_parked_until_its_permissions_change(user_ctx):
    """A mode-000 file is parked waiting with reason ``source_unreadable`` (never failed and retried by
    every run, never quarantined), listed with its path by ``ki status`` and ``ki source list``; a scan
    that sees its mode change releases it and it is fetched."""
    ctx = user_ctx
    tmp_path = ctx.place
    _fetch_only(ctx)
    root = tmp_path / "akten"
    root.mkdir()
    (root / "offen.txt").write_text("offen\n", encoding="utf-8")
    locked = root / "gesperrt.txt"
    locked.write_text("gesperrt\n", encoding="utf-8")
    locked.chmod(0)
    try:
        _ki_insert(ctx, root)
        status, reason, err = _fetch_rows(ctx)["gesperrt.txt"]
        assert (status, reason) == ("skipped", "source_unreadable")
        assert err["infrastructure"] == f"permission denied: {locked.resolve()}"
        assert err["details"]["mode"] == "0o0" and err["details"]["path"] == str(locked.resolve())
        assert _quarantined(ctx) == []
        with ctx.db.engine.connect() as conn:
            attempts = conn.execute(text("SELECT attempts FROM processing_state WHERE stage = 'fetch' "
                                         "AND status = 'skipped'")).scalar_one()
        out = _ki_insert(ctx, root)  # still locked: a rescan does not retry it
        assert _fetch_rows(ctx)["gesperrt.txt"][:2] == ("skipped", "source_unreadable")
        with ctx.db.engine.connect() as conn:
            assert conn.execute(text("SELECT attempts FROM processing_state WHERE stage = 'fetch' "
                                     "AND status = 'skipped'")).scalar_one() == attempts
        assert "changed permissions" not in out
        shown = _ki(ctx, "status")
        assert "1 file ki may not read (waiting until its permissions change)" in shown, shown
        assert str(locked.resolve()) in shown and "mode 0o0" in shown
        listed = json.loads(_ki(ctx, "source", "list", "--json"))
        assert listed[0]["unreadable"] == 1
        assert "1 waiting: ki may not read" in _ki(ctx, "source", "list")
    finally:
        locked.chmod(0o644)
    out = _ki_insert(ctx, root)
    assert "1 file(s) that could not be read for permissions changed permissions" in out, out
    assert _fetch_rows(ctx)["gesperrt.txt"][0] == "done"
    assert _quarantined(ctx) == []


# --- item 5: names that are not UTF-8, entries that are not files ----------------------------------------


def _write(path: bytes, body: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)


def test_latin1_names_are_stored_losslessly_and_one_bad_entry_blocks_nothing(make_ctx, tmp_path):
    ctx = make_ctx(workers=2)
    _fetch_only(ctx)
    root = tmp_path / "samba"
    root.mkdir()
    broot = os.fsencode(root)
    os.mkdir(broot + b"/Vertr\xe4ge")  # Latin-1 "Verträge"
    _write(broot + b"/Vertr\xe4ge/K\xfcndigung M\xfcller.txt", b"Kuendigung des Mietvertrags\n")
    _write(broot + b"/caf\xe9.txt", b"Rechnung Cafe\n")
    _write(broot + b"/caf\\xe9.txt", b"a valid name that reads like the other one escaped\n")
    (root / "gültig.txt").write_text("ein gültiger UTF-8-Name\n", encoding="utf-8")
    os.mkfifo(root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    outside = tmp_path / "outside.txt"
    outside.write_text("not in the source\n", encoding="utf-8")
    (root / "raus.txt").symlink_to(outside)
    (root / "kaputt.txt").symlink_to(root / "gibt-es-nicht.txt")
    (root / "Vertr\udce4ge" / "zurueck").symlink_to(root)  # a loop back to the root
    (root / "im-root.txt").symlink_to(root / "gültig.txt")  # stays inside: followed
    (root / "schleife").symlink_to(root / "schleife")  # a link to itself
    # a path too long for the unique index (btree rows are limited to 2,704 bytes): its row cannot be written
    deep = root
    for i in range(14):  # incompressible names: PostgreSQL compresses long index values before refusing them
        deep = deep / "".join(hashlib.sha256(f"{i}:{j}".encode()).hexdigest() for j in range(4))[:230]
    deep.mkdir(parents=True)
    (deep / "tief.txt").write_text("tief\n", encoding="utf-8")
    try:
        report = scan_source(ctx, register_local_source(ctx, root))
    finally:
        sock.close()
    skipped = {(e.path, e.reason) for e in report.skipped}
    long_id = (deep / "tief.txt").relative_to(root).as_posix()
    assert skipped == {
        ("pipe", "fifo"), ("sock", "socket"), ("raus.txt", "symlink_outside_root"),
        ("kaputt.txt", "broken_symlink"), ("schleife", "symlink_loop"),
        ("Vertr\\xe4ge/zurueck", "symlink_loop"), ("caf\\xe9.txt", "name_collision"),
        (long_id, "not_recorded"),
    }, skipped
    assert report.new == 4  # the Latin-1 name, one of the two café files, gültig.txt, im-root.txt
    with ctx.db.engine.connect() as conn:
        stored = {r.external_id: (bytes(r.external_id_raw) if r.external_id_raw is not None else None)
                  for r in conn.execute(text("SELECT external_id, external_id_raw FROM source_object"))}
    assert stored["Vertr\\xe4ge/K\\xfcndigung M\\xfcller.txt"] == b"Vertr\xe4ge/K\xfcndigung M\xfcller.txt"
    assert stored["gültig.txt"] is None and stored["im-root.txt"] is None
    assert len(stored) == 4

    summary = launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    assert summary.status == "completed"
    rows = _fetch_rows(ctx)
    assert {e: r[0] for e, r in rows.items()} == {e: "done" for e in stored}
    with ctx.db.engine.connect() as conn:
        hashes = dict(conn.execute(text("SELECT external_id, content_hash FROM source_object")).all())
    assert ctx.blobs.read(hashes["Vertr\\xe4ge/K\\xfcndigung M\\xfcller.txt"]) == b"Kuendigung des Mietvertrags\n"
    assert hashes["im-root.txt"] == hashes["gültig.txt"]

    # a rescan changes nothing and reports the same skips
    again = scan_source(ctx, report.source_id)
    assert (again.new, again.changed, again.missing, again.tombstoned) == (0, 0, 0, [])
    assert {(e.path, e.reason) for e in again.skipped} == skipped


def test_the_scan_summary_names_what_it_skipped(user_ctx):
    ctx = user_ctx
    tmp_path = ctx.place
    _fetch_only(ctx)
    root = tmp_path / "eingang"
    root.mkdir()
    (root / "brief.txt").write_text("Brief\n", encoding="utf-8")
    os.mkfifo(root / "fifo")
    outside = tmp_path / "anderswo.txt"
    outside.write_text("woanders\n", encoding="utf-8")
    (root / "weg").symlink_to(outside)
    (root / "kreis").symlink_to(root / "kreis")  # a symlink loop
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(root / "sock"))
    try:
        out = _ki_insert(ctx, root)
    finally:
        listener.close()
    assert "skipped 4 entries: 1 fifo, 1 socket, 1 symlink_loop, 1 symlink_outside_root" in out, out
    assert "fifo  [fifo]" in out and f"weg  [symlink_outside_root] {outside.resolve()}" in out
    assert "sock  [socket]" in out and "kreis  [symlink_loop]" in out


# --- every quarantine names its reason ------------------------------------------------------------------


def test_every_quarantine_names_a_reason(ctx, tmp_path):
    """DESIGN.md "Quarantine reasons": a quarantine is never reasonless (the null reason of a
    deterministic ValueError and of the attempt limit is gone)."""
    root = tmp_path / "gemischt"
    root.mkdir()
    (root / "kaputt.pdf").write_bytes(b"%PDF-1.7 not really a pdf")
    (root / "leer.docx").write_bytes(b"")
    (root / "gut.txt").write_text("Ein Vermerk.\n", encoding="utf-8")
    scan_source(ctx, register_local_source(ctx, root))
    launch_insertion(ctx, trigger="test", wait_for_retries_seconds=0)
    rows = _quarantined(ctx)
    assert rows, "nothing quarantined: the test proves nothing"
    assert all(reason in QUARANTINE_REASONS for _, _, reason in rows), rows
    with ctx.db.engine.connect() as conn:
        errors = [json.dumps(e) for e in conn.execute(text(
            "SELECT last_error FROM processing_state WHERE status = 'quarantined'")).scalars()]
    assert all('"reason": null' not in e for e in errors)
