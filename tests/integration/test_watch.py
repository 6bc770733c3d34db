"""The folder watcher on real folders with real events (issue 19 item 2, cases R09/R10).

Each test starts the watcher as ``ki watch`` does (:func:`ki.cli.watch.start_watcher`: ``launch_sync`` with
the settled paths, handing off to a background insertion run) on a temp folder, with a 1 s settle window,
and waits (bounded) for the database to show the outcome. Real PostgreSQL, real inotify or polling;
about 2 minutes in all on a quiet machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from ki.adapters.sources.mounts import mount_fs_type, watch_mode_for
from ki.adapters.sources.scan import register_local_source
from ki.app.launcher import RunLauncher
from ki.cli.app import app as cli_app
from ki.cli.watch import start_watcher
from ki.config.loader import set_config_value

pytestmark = pytest.mark.timeout(240)

SETTLE = 1.0


def _text(i: int | str) -> str:
    return f"Aktennotiz {i}: Lieferung und Gewährleistung, Vertrag {i}.\n"


def _q(ctx, sql: str, **params) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text(sql), params).fetchall()


def _wait(cond: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout} s")


def _indexed(ctx, external_id: str) -> bool:
    return bool(_q(ctx, """SELECT 1 FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                           WHERE so.external_id = :e AND so.deleted_at IS NULL AND ps.stage = 'index'
                             AND ps.status = 'done'""", e=external_id))


def _completions(ctx, external_id: str, stage: str) -> int:
    rows = _q(ctx, """SELECT ps.completions FROM processing_state ps JOIN source_object so
                      ON so.id = ps.source_object_id WHERE so.external_id = :e AND ps.stage = :s""",
              e=external_id, s=stage)
    return int(rows[0][0]) if rows else 0


class Watching:
    """A running watcher on ``root`` (stopped by :meth:`stop`)."""

    def __init__(self, ctx, root: Path, *, mode: str | None = None):
        self.ctx = ctx
        self.launcher = RunLauncher(ctx)
        self.watcher, self.stop_event, self.thread = start_watcher(ctx, self.launcher, [root], mode=mode)
        self.sw = self.watcher.sources[0]

    def settled(self, timeout: float = 60.0) -> None:
        """Wait until nothing is pending or in flight and the background insertion run ended."""
        _wait(lambda: self.sw.state == "watching" and self.sw.last_full_scan_at is not None, timeout, "first rescan")
        _wait(lambda: not self.sw.settler.pending and not self.sw.settler._inflight and not self.sw._retry
              and self.launcher.active_run_id is None, timeout, "settled")

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        self.launcher.wait_idle(60)


@pytest.fixture
def wctx(ctx):
    set_config_value(ctx.settings.data_dir, "pipeline.watch.settle_seconds", SETTLE)
    ctx.reload_config()
    return ctx


@pytest.fixture
def watching(wctx, tmp_path):
    started: list[Watching] = []

    def start(root: Path, **kw) -> Watching:
        root.mkdir(parents=True, exist_ok=True)
        w = Watching(wctx, root, **kw)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def _three_documents_watched(wctx, watching, tmp_path) -> tuple[Path, Watching]:
    """``share/d0..d2.txt`` watched and inserted; returns (root, the watcher)."""
    root = tmp_path / "share"
    root.mkdir()
    for i in range(3):
        (root / f"d{i}.txt").write_text(_text(i), encoding="utf-8")
    w = watching(root)
    _wait(lambda: all(_indexed(wctx, f"d{i}.txt") for i in range(3)), what="indexed")
    w.settled()
    return root, w


def test_half_written_file_once_and_bursts_once_and_r09_names_never(wctx, watching, tmp_path):
    root = tmp_path / "share"
    w = watching(root)
    w.settled()
    # a file written in two halves, seconds apart (longer than the settle window is not needed: the
    # second half arrives within it) is fetched once, complete
    data = _text("halves") * 200
    with open(root / "scan.txt", "w", encoding="utf-8") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
        time.sleep(SETTLE * 0.6)
        fh.write(data[len(data) // 2:])
    # a copy that fires CREATE + many MODIFY + ATTRIB events is queued once
    with open(root / "copy.txt", "w", encoding="utf-8") as fh:
        for i in range(40):
            fh.write(_text(i))
            fh.flush()
    os.utime(root / "copy.txt")
    os.chmod(root / "copy.txt", 0o644)
    # R09: editor lock files, partial uploads and temp files are never documents
    for name in ("~$Vertrag.docx", ".~lock.Vertrag.docx#", "~WRL0001.tmp", "upload.pdf.part", "x.crdownload",
                 "Thumbs.db"):
        (root / name).write_bytes(b"not a document")
    _wait(lambda: _indexed(wctx, "scan.txt") and _indexed(wctx, "copy.txt"), what="both indexed")
    w.settled()
    rows = _q(wctx, "SELECT external_id, content_hash FROM source_object ORDER BY external_id")
    assert [r.external_id for r in rows] == ["copy.txt", "scan.txt"]
    assert dict(rows)["scan.txt"] == hashlib.sha256(data.encode()).hexdigest()  # complete bytes
    assert _completions(wctx, "scan.txt", "fetch") == 1 and _completions(wctx, "copy.txt", "fetch") == 1
    assert w.sw.files_queued == 2 and w.sw.settler.duplicates == 0
    assert w.sw.settler.ignored["editor_lock"] >= 2 and w.sw.settler.ignored["partial_upload"] >= 2
    assert w.sw.settler.ignored["temp_file"] >= 1 and w.sw.settler.ignored["system_file"] >= 1
    # a touch that changes nothing is not handed on again
    os.chmod(root / "copy.txt", 0o640)
    time.sleep(SETTLE * 2 + 0.5)
    w.settled()
    assert w.sw.files_queued == 2
    # watcher health in the database, shown by ki status
    w.watcher.write_health()
    result = CliRunner().invoke(cli_app, ["status"])
    assert result.exit_code == 0, result.output
    assert "watched sources" in result.output and "watching" in result.output and "editor_lock" in result.output


def test_moves_renames_and_deletions(wctx, watching, tmp_path):
    set_config_value(wctx.settings.data_dir, "pipeline.deletion_confirmations", 2)
    root = tmp_path / "share"
    root.mkdir()
    (root / "a.txt").write_text(_text("a"), encoding="utf-8")
    outside = tmp_path / "incoming"
    (outside / "sub").mkdir(parents=True)
    for i in range(3):
        (outside / "sub" / f"in{i}.txt").write_text(_text(f"in{i}"), encoding="utf-8")
    w = watching(root)
    _wait(lambda: _indexed(wctx, "a.txt"), what="a.txt indexed by the start rescan")
    w.settled()
    # a directory moved in from outside is scanned; a file created inside it afterwards is seen
    shutil.move(str(outside), str(root / "incoming"))
    time.sleep(0.3)
    (root / "incoming" / "sub" / "later.txt").write_text(_text("later"), encoding="utf-8")
    names = [f"incoming/sub/in{i}.txt" for i in range(3)] + ["incoming/sub/later.txt"]
    _wait(lambda: all(_indexed(wctx, n) for n in names), what="moved-in folder indexed")
    w.settled()
    # a rename inside the root keeps the document: same object, path updated, no re-conversion
    (oid,) = _q(wctx, "SELECT id FROM source_object WHERE external_id = 'a.txt'")[0]
    converts = _completions(wctx, "a.txt", "convert")
    os.rename(root / "a.txt", root / "incoming" / "renamed.txt")
    _wait(lambda: _indexed(wctx, "incoming/renamed.txt"), what="renamed document indexed")
    w.settled()
    row = _q(wctx, "SELECT id, path, deleted_at FROM source_object WHERE external_id = 'incoming/renamed.txt'")[0]
    assert row.id == oid and row.path == f"{root}/incoming/renamed.txt" and row.deleted_at is None
    assert _completions(wctx, "incoming/renamed.txt", "convert") == converts
    assert not _q(wctx, "SELECT 1 FROM source_object WHERE external_id = 'a.txt'")
    # a deletion the watcher saw, its folder still listed, is tombstoned at once (no confirmations to wait for)
    os.remove(root / "incoming" / "sub" / "in0.txt")
    _wait(lambda: _q(wctx, "SELECT deleted_at FROM source_object WHERE external_id = 'incoming/sub/in0.txt'"
                     )[0][0] is not None, what="tombstone at once")
    # more at once than pipeline.watch.delete_at_once_max is a mass deletion: it goes through
    # deletion_confirmations, one confirmation from the event, not a tombstone
    w.sw.delete_at_once_max = 1
    os.remove(root / "incoming" / "sub" / "in1.txt")
    os.remove(root / "incoming" / "sub" / "in2.txt")
    two = "external_id IN ('incoming/sub/in1.txt', 'incoming/sub/in2.txt')"
    _wait(lambda: [r[0] for r in _q(wctx, f"SELECT missing_scans FROM source_object WHERE {two}")] == [1, 1],
          what="first confirmation of both")
    assert [r[0] for r in _q(wctx, f"SELECT deleted_at FROM source_object WHERE {two}")] == [None, None]
    w.sw._next_rescan = 0.0  # the periodic full rescan, now: the second confirmation tombstones them
    _wait(lambda: all(r[0] is not None for r in _q(wctx, f"SELECT deleted_at FROM source_object WHERE {two}")),
          what="tombstones after the second confirmation")
    assert all(_indexed(wctx, n) for n in names[3:])


def test_vanished_root_pauses_and_resumes_without_tombstones(wctx, watching, tmp_path):
    root, w = _three_documents_watched(wctx, watching, tmp_path)
    hidden = tmp_path / "unmounted"
    root.rename(hidden)  # the share goes away
    _wait(lambda: w.sw.state == "paused", what="paused")
    assert "unavailable" in w.sw.paused_reason
    w.watcher.write_health()
    health = _q(wctx, "SELECT state, paused_reason FROM source_watch")[0]
    assert health.state == "paused" and "unavailable" in health.paused_reason
    root.mkdir()  # replaced by an empty folder: resumed, the rescan's empty listing tombstones nothing
    _wait(lambda: w.sw.state == "watching", what="resumed")
    w.settled()
    assert not _q(wctx, "SELECT 1 FROM source_object WHERE deleted_at IS NOT NULL OR missing_scans > 0")
    root.rmdir()
    hidden.rename(root)  # the share is back
    _wait(lambda: w.sw.state == "watching" and w.sw._identity == (os.stat(root).st_dev, os.stat(root).st_ino),
          what="watching the returned root")
    (root / "new.txt").write_text(_text("new"), encoding="utf-8")
    _wait(lambda: _indexed(wctx, "new.txt"), what="new file after the return")
    assert not _q(wctx, "SELECT 1 FROM source_object WHERE deleted_at IS NOT NULL")
    assert all(_completions(wctx, f"d{i}.txt", "fetch") == 1 for i in range(3))


def test_polling_mode_and_a_stopped_observer_is_restarted(wctx, watching, tmp_path):
    set_config_value(wctx.settings.data_dir, "pipeline.watch.poll_seconds", 0.3)
    wctx.reload_config()
    root = tmp_path / "share"
    w = watching(root, mode="poll")  # no native events: the observer polls
    assert w.sw.mode == "poll"
    w.settled()
    (root / "polled.txt").write_text(_text("polled"), encoding="utf-8")
    _wait(lambda: _indexed(wctx, "polled.txt"), what="polled file indexed")
    # the polling observer stops (as paperless-ngx's did, silently): detected, restarted, rescanned
    w.sw._observer_stop.set()
    _wait(lambda: w.sw.restarts == 1, what="observer restarted")
    (root / "after.txt").write_text(_text("after"), encoding="utf-8")
    _wait(lambda: _indexed(wctx, "after.txt"), what="file after the restart indexed")
    assert _completions(wctx, "polled.txt", "fetch") == 1


def test_watcher_killed_and_restarted_misses_nothing_and_redoes_nothing(wctx, watching, tmp_path):
    root, first = _three_documents_watched(wctx, watching, tmp_path)
    first.stop()
    before = _q(wctx, "SELECT id, stage, completions, updated_at FROM processing_state ORDER BY id")
    # while no watcher runs: one file arrives, one changes
    (root / "while_down.txt").write_text(_text("down"), encoding="utf-8")
    (root / "d1.txt").write_text(_text("changed") * 3, encoding="utf-8")
    second = watching(root)
    _wait(lambda: _indexed(wctx, "while_down.txt"), what="file that arrived while down")
    second.settled()
    assert _completions(wctx, "d1.txt", "fetch") == 2  # changed: fetched again
    after = {(r.id, r.stage): r for r in _q(wctx, "SELECT id, stage, completions, updated_at FROM processing_state")}
    d1 = {r[0] for r in _q(wctx, "SELECT ps.id FROM processing_state ps JOIN source_object so "
                                 "ON so.id = ps.source_object_id WHERE so.external_id = 'd1.txt'")}
    for r in before:  # nothing else redone
        if r.id not in d1:
            assert (after[(r.id, r.stage)].completions, after[(r.id, r.stage)].updated_at) == (r.completions,
                                                                                                 r.updated_at)


def test_watch_mode_from_the_mount_table(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/sda1 / ext4 rw 0 0\n"
                      "//filer/akten /mnt/akten cifs rw 0 0\n"
                      "filer:/export /mnt/nfs\\040share nfs4 rw 0 0\n", encoding="utf-8")
    assert mount_fs_type("/mnt/akten/2024", mounts_file=str(mounts)) == "cifs"
    assert mount_fs_type("/mnt/nfs share/x", mounts_file=str(mounts)) == "nfs4"
    assert mount_fs_type("/home", mounts_file=str(mounts)) == "ext4"
    assert watch_mode_for(tmp_path, {"watch_mode": "poll"}) == ("poll", "watch_mode setting")
    assert watch_mode_for(tmp_path)[0] == "native"  # the test machine's temp dir is a local file system
    with pytest.raises(ValueError):
        watch_mode_for(tmp_path, {"watch_mode": "sometimes"})


def test_rescan_defers_young_files(wctx, tmp_path):
    """The full rescan does not take a file modified within the settle window (it goes to the settler)."""
    from ki.adapters.sources.scan import ScanScope, scan_source

    root = tmp_path / "share"
    root.mkdir()
    (root / "old.txt").write_text(_text("old"), encoding="utf-8")
    os.utime(root / "old.txt", (time.time() - 60, time.time() - 60))
    (root / "young.txt").write_text(_text("young"), encoding="utf-8")
    sid = register_local_source(wctx, root)
    report = scan_source(wctx, sid, ScanScope(defer_younger_than=30))
    assert report.new == 1 and [f.external_id for f in report.deferred] == ["young.txt"]
    assert [r[0] for r in _q(wctx, "SELECT external_id FROM source_object")] == ["old.txt"]
