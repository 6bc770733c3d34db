"""Scanning a source into source_object and processing_state rows.

Spec: insertion-pipeline.md "Processing states" (a scan seeds one row per stage:
fetch pending, every later stage skipped + waiting_for_previous_stage) and
``pipeline.deletion_confirmations``; DESIGN.md "Deletion confirmations" (counted
per file; a scan whose root is missing does not count; an empty listing of a
root that was not empty is suspicious and tombstones nothing).

A rescan re-hashes only files whose size or mtime changed; a new content hash
requeues the object from fetch (every stage, quarantined ones included: the file
itself changed). An indexed object whose grants alone changed (source configuration,
``.ki-grants.json`` files, access_grant rows) gets its index row marked
``access_only_reindex`` (spec: "Index"; ki.domain.access.refresh.mark_access_changes).

Only a successful listing of a file's folder can report it missing (a folder
that became unreadable counts nothing toward deleting its files); every entry the listing skipped
is reported with its reason (:attr:`ScanReport.skipped`); names that are not valid UTF-8 are
stored losslessly (``external_id_raw``); one file whose row cannot be written is reported and the
rest of the scan goes on; a file parked because ki may not read it (``source_unreadable``,
:mod:`ki.store.unreadable`) is released when the scan sees its permissions change.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Connection

from ki.adapters.sources.local import ListedFile, Listing, LocalFolderConnector, SkippedEntry
from ki.adapters.sources.names import display_form
from ki.core.errors import SourceReadDenied
from ki.core.taxonomies import LANE_BACKFILL, LANE_LIVE
from ki.domain.access.refresh import mark_access_changes
from ki.domain.context import PipelineContext
from ki.store.downstream import request_rerun_from
from ki.store.object_tree import rename_tree
from ki.store.requeue import denied_fetches, requeue_from_fetch, retry_now, seed_rows
from ki.store.scan import (
    insert_objects,
    mark_seen,
    record_full_scan,
    register_local,
    reset_missing,
    set_missing,
    source_row,
    top_level_objects,
)
from ki.store.unreadable import parked_unreadable, release_unreadable

log = logging.getLogger(__name__)


#: Skip reasons of files that were in the listing (counted in ``listed``) but could not be taken.
LISTED_SKIP_REASONS = frozenset({"unreadable_file", "not_recorded"})


@dataclass
class ScanReport:
    """What one scan changed.

    Attributes:
        listed: candidate files in the listing.
        new / changed / unchanged / reappeared: object counts (``unchanged``: same content, even when
            only its size or time changed; ``reappeared``: a tombstoned document listed again, restored).
        missing: objects absent from this listing (streak incremented).
        tombstoned: external ids tombstoned by this scan.
        suspicious: True when the listing was empty for a root that had files (nothing counted).
        access_changed: indexed objects whose grants alone changed, marked ``access_only_reindex``.
        skipped: entries not taken, each with its reason (``ki.adapters.sources.local.SKIP_REASONS``, plus
            ``unreadable_file`` for a listed file whose changed bytes could not be read, and
            ``not_recorded`` for a file whose row could not be written).
        unsure: known documents not reported missing because a folder above them could not be read.
        released: files parked as unreadable whose permissions changed (or that are readable now), released.
        renamed: known documents found under a new path (same content): path updated, not re-fetched.
        deferred: files not taken yet (``defer`` / ``defer_younger_than``), as listed.
    """

    source_id: int
    listed: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    reappeared: int = 0
    missing: int = 0
    tombstoned: list[str] = field(default_factory=list)
    suspicious: bool = False
    access_changed: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    unsure: int = 0
    released: int = 0
    renamed: int = 0
    deferred: list[ListedFile] = field(default_factory=list)

    @property
    def not_taken(self) -> int:
        """Listed files this scan could not take (``unreadable_file``, ``not_recorded``): with them the
        counts add up, ``listed == new + changed + unchanged + reappeared + renamed + not_taken``."""
        return sum(1 for e in self.skipped if e.reason in LISTED_SKIP_REASONS)

    def skipped_by_reason(self) -> dict[str, int]:
        """How many entries were skipped for each reason, most frequent first."""
        counts: dict[str, int] = {}
        for e in self.skipped:
            counts[e.reason] = counts.get(e.reason, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def register_local_source(ctx: PipelineContext, root: Path, *, config: dict | None = None) -> int:
    """Get or create the ``local`` source for ``root`` (resolved absolute path). Returns source id."""
    root_s = str(root.resolve())
    with ctx.db.engine.begin() as conn:
        return register_local(conn, root_s, config)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ScanScope:
    """What a scan looks at (the defaults: the whole source, everything taken).

    Attributes:
        paths: OS-given relative paths to scan (files, and the trees of folders); None: the whole root.
        defer: display-form external ids not to take yet.
        defer_younger_than: seconds; files modified more recently are not taken yet.
        gone: OS-given relative paths the watcher saw deleted (a subset of ``paths``).
        delete_at_once_max: up to this many files of ``gone`` that the listing of their (still listed)
            folder reports missing are tombstoned by this scan, without waiting for
            ``pipeline.deletion_confirmations``; more at once count toward the confirmations as usual.
    """

    paths: tuple[str, ...] | None = None
    defer: frozenset[str] = frozenset()
    defer_younger_than: float | None = None
    gone: tuple[str, ...] = ()
    delete_at_once_max: int = 0


def seen_gone(missing: list, gone: tuple[str, ...], limit: int) -> list:
    """The rows of ``missing`` that the watcher saw vanish (their external id is a path of ``gone``, or
    below a folder of it), when there are at most ``limit`` of them; else none (a mass deletion — many at
    once, an unmounted share seen file by file — waits for ``pipeline.deletion_confirmations``)."""
    if not gone or limit <= 0:
        return []
    names = [display_form(g)[0].strip("/") for g in gone]
    seen = [r for r in missing if any(r.external_id == n or r.external_id.startswith(n + "/") for n in names)]
    return seen if len(seen) <= limit else []


def scan_source(ctx: PipelineContext, source_id: int, scope: ScanScope | None = None) -> ScanReport:
    """Scan one local source and apply the listing to the database.

    ``scope.paths``: scan only these OS-given relative paths (files, and the trees of folders; the watcher's
    settled changes) through the same rules: only the known documents at or below them can
    be new, changed, renamed or missing, and such a scan neither judges an empty listing suspicious
    nor sets the source's ``last_scan_count``. None: the whole source.

    ``scope.defer`` (display-form external ids) and ``scope.defer_younger_than`` (seconds): files named, or modified
    more recently than that, are not taken yet: they are neither new nor changed nor missing, and are
    returned in :attr:`ScanReport.deferred` (the watcher settles them first: a file still being written
    is never fetched).

    A file that is new in this listing and has the size and content hash of a known document missing
    from it is that document **renamed** (or moved inside the root): its path is updated, it is not
    fetched or converted again, and only Classify onward runs again (the path is classify evidence).

    Raises:
        SourceUnavailable: the root is missing or unreadable (before or during the listing);
            nothing is changed and the scan does not count toward deletion confirmations.
    """
    with ctx.db.engine.connect() as conn:
        src = source_row(conn, source_id)
    connector = LocalFolderConnector(src.root, src.config)
    scope = scope or ScanScope()
    paths = scope.paths
    listing = connector.scan(paths)  # raises SourceUnavailable before anything changes
    deferred = _defer(listing, set(scope.defer), scope.defer_younger_than)
    report = ScanReport(source_id=source_id, listed=len(listing), skipped=list(listing.skipped), deferred=deferred)
    with ctx.db.engine.connect() as conn:
        existing = {r.external_id: r for r in top_level_objects(conn, source_id) if listing.covers(r.external_id)}
    live_before = sum(1 for r in existing.values() if r.deleted_at is None)
    if paths is None and not listing.files and not deferred and live_before > 0:
        report.suspicious = True
        log.warning("source %s listed empty but %d documents are known: treated as an unmounted share, "
                    "nothing is tombstoned and the scan does not count", src.root, live_before)
        return report

    new_files: list[ListedFile] = []
    changed_ids, touched, reappeared_ids, present_ids = [], [], [], []
    for f in listing:
        row = existing.get(f.external_id)
        if row is None:
            new_files.append(f)
            continue
        present_ids.append(row.id)
        if row.deleted_at is not None:
            reappeared_ids.append(row.id)
            touched.append((row.id, f.size, f.mtime_ns, None))
        elif row.size != f.size or row.mtime_ns != f.mtime_ns:
            try:
                new_hash = _sha256_file(connector.path_of(f.external_id, f.raw))
            except (OSError, ValueError) as exc:  # unreadable or vanished since the listing: the next scan decides
                report.skipped.append(SkippedEntry(f.external_id, "unreadable_file", str(exc)[:200]))
                continue
            touched.append((row.id, f.size, f.mtime_ns, new_hash))
            if row.content_hash is not None and new_hash != row.content_hash:
                changed_ids.append(row.id)
            else:  # only its size or time changed, or it was never fetched (its fetch reads these bytes)
                report.unchanged += 1
        else:
            report.unchanged += 1
    listed_ids = {f.external_id for f in listing}
    absent = [r for eid, r in existing.items() if eid not in listed_ids and r.deleted_at is None]
    missing = [r for r in absent if listing.reports_missing(r.external_id)]
    report.unsure = len(absent) - len(missing)
    if report.unsure:
        log.warning("source %s: %d known document(s) below folders that could not be read are not counted "
                    "missing", src.root, report.unsure)

    renames = _renames(connector, new_files, missing)
    if renames:
        moved = {id(f) for _, f in renames}
        new_files = [f for f in new_files if id(f) not in moved]
        gone_ids = {r.id for r, _ in renames}
        missing = [r for r in missing if r.id not in gone_ids]

    lane = _lane(ctx, first=paths is None and src.last_scan_at is None,
                 arrived=len(new_files) + len(changed_ids) + len(reappeared_ids))
    with ctx.db.engine.begin() as conn:
        for row, f in renames:
            rename_tree(conn, row.id, f.external_id, f.raw, f"{src.root.rstrip('/')}/{f.external_id}",
                        size=f.size, mtime_ns=f.mtime_ns)
        if renames:
            request_rerun_from(conn, [r.id for r, _ in renames], "classify_matter", lane=lane)
        report.renamed = len(renames)
        new_ids = _insert_new(conn, source_id, src.root, new_files, report, lane)
        for oid, size, mtime, scanned in touched:
            mark_seen(conn, oid, size=size, mtime_ns=mtime, scanned_hash=scanned)
        if present_ids:
            reset_missing(conn, present_ids)
        requeue_from_fetch(conn, changed_ids + reappeared_ids, lane=lane)
        threshold = ctx.config.pipeline.deletion_confirmations
        gone: list[int] = []  # tombstoned object ids, embedded ones included
        at_once = {r.id for r in seen_gone(missing, scope.gone, scope.delete_at_once_max)}
        for r in missing:
            streak = r.missing_scans + 1
            set_missing(conn, r.id, streak)
            if streak >= threshold or r.id in at_once:
                gone += tombstone_tree(conn, r.id)
                report.tombstoned.append(r.external_id)
        if paths is None:
            record_full_scan(conn, source_id, len(listing))
        report.released = _release_readable(conn, connector, source_id, listed_ids)
    _drop_from_search_index(ctx, gone)
    with ctx.db.engine.begin() as conn:  # grants changed, bytes did not: refresh permissions only
        report.access_changed = len(mark_access_changes(conn, source_id))
    report.new = len(new_ids)
    report.changed = len(changed_ids)
    report.reappeared = len(reappeared_ids)
    report.missing = len(missing) - len(report.tombstoned)
    return report


def _lane(ctx: PipelineContext, *, first: bool, arrived: int) -> str:
    """The lane of what a scan found (DESIGN.md "Lanes"): a source's first full scan is its backfill, and
    so is a bulk arrival (more than ``pipeline.lanes.live_max_files`` documents new or changed in one
    scan: a folder copied in); any other change is ``live``."""
    return LANE_BACKFILL if first or arrived > ctx.config.pipeline.lanes.live_max_files else LANE_LIVE


def _defer(listing: Listing, names: set[str], younger_than: float | None) -> list[ListedFile]:
    """Take the files to defer out of ``listing`` (they become unsure: never missing); returns them."""
    if not names and younger_than is None:
        return []
    cutoff = time.time_ns() - int((younger_than or 0) * 1e9) if younger_than is not None else None
    kept, deferred = [], []
    for f in listing.files:
        if f.external_id in names or (cutoff is not None and f.mtime_ns > cutoff):
            deferred.append(f)
            listing.unsure.add(f.external_id)
        else:
            kept.append(f)
    listing.files = kept
    return deferred


def _renames(connector: LocalFolderConnector, new_files: list[ListedFile], missing: list) -> list[tuple]:
    """``(missing row, new file)`` pairs with the same size and content hash: one document renamed.

    Only new files whose size equals a missing, already fetched document's are hashed; each missing
    document is matched at most once."""
    by_size: dict[int, list] = {}
    for r in missing:
        if r.content_hash is not None and r.size is not None:
            by_size.setdefault(int(r.size), []).append(r)
    pairs: list[tuple] = []
    for f in new_files:
        candidates = by_size.get(f.size)
        if not candidates:
            continue
        try:
            digest = _sha256_file(connector.path_of(f.external_id, f.raw))
        except (OSError, ValueError):
            continue  # unreadable now: it is new, the next scan decides
        for r in candidates:
            if r.content_hash == digest:
                candidates.remove(r)
                pairs.append((r, f))
                break
    return pairs


def _insert_new(conn: Connection, source_id: int, root: str, files: list[ListedFile], report: ScanReport,
                lane: str) -> list[int]:
    """Insert the new files' objects and seed their rows in ``lane``; returns their ids.

    One statement for all of them; should it fail, each file is inserted on its own (a savepoint
    each), so one file whose row cannot be written is reported (``not_recorded``) and the rest of
    the scan goes on."""
    if not files:
        return []

    def insert(batch: list[ListedFile]) -> list[int]:
        ids = insert_objects(conn, source_id, root.rstrip("/"),
                             [(f.external_id, f.raw, f.size, f.mtime_ns) for f in batch])
        seed_rows(conn, ids, lane=lane)
        return ids

    try:
        with conn.begin_nested():
            return insert(files)
    except Exception as exc:  # noqa: BLE001 - isolate the file at fault below
        log.warning("inserting %d new files failed (%s); inserting them one at a time", len(files), exc)
    ids: list[int] = []
    for f in files:
        try:
            with conn.begin_nested():
                ids += insert([f])
        except Exception as exc:  # noqa: BLE001 - reported in the scan summary, the others go on
            report.skipped.append(SkippedEntry(f.external_id, "not_recorded", str(exc).splitlines()[0][:200]))
    return ids


def _release_readable(conn: Connection, connector: LocalFolderConnector, source_id: int, listed: set[str]) -> int:
    """Release the files parked as unreadable (``source_unreadable``, :mod:`ki.store.unreadable`) whose mode,
    owner or ACL changed since they were parked, or that are readable now; and make the fetches still
    failed with the older ``permission_denied`` record due now when their file is readable."""
    parked = [p for p in parked_unreadable(conn, source_id) if p.external_id in listed]
    changed = [p.row_id for p in parked if connector.permissions_changed(p.external_id, p.external_id_raw, p.details)]
    n = release_unreadable(conn, changed)
    legacy = [rid for rid, eid, raw in denied_fetches(conn, source_id, SourceReadDenied.reason)
              if eid in listed and connector.readable(eid, raw)]
    n += retry_now(conn, legacy)
    if n:
        log.info("%d file(s) that could not be read for permissions changed permissions: fetched again", n)
    return n


def _drop_from_search_index(ctx: PipelineContext, ids: list[int]) -> None:
    """Delete the OpenSearch copies of tombstoned objects (their record rows went with the tombstone,
    in the scan's transaction). Best effort: while OpenSearch cannot be reached the copies stay hidden
    (every hit is checked against the record) and are deleted when a search meets them."""
    if not ids or not getattr(ctx.config.components, "opensearch_url", None):
        return
    from ki.adapters.search.factory import backend_for

    try:
        backend_for(ctx.db, ctx.config).delete_objects(ids)
    except Exception as exc:  # noqa: BLE001 - the scan itself succeeded; see the docstring
        log.warning("%d tombstoned documents stay in OpenSearch (hidden from results) until a search meets "
                    "them: %s", len(ids), exc)


def tombstone_tree(conn: Connection, source_object_id: int) -> list[int]:
    """Tombstone an object and everything embedded in it (see ki.adapters.sources.children)."""
    from ki.adapters.sources.children import tombstone_tree as _tombstone

    return _tombstone(conn, source_object_id)
