"""Archival passes: ``ki archive`` and the daily pass of ``ki serve`` / ``ki worker`` (cold history).

Spec: work-queue.md "Indexed queue and historical work"; docs/design-decisions.md "Cold history". A pass moves,
kind by kind, bounded batches (``batch_size`` rows, each batch its own transaction: :mod:`ki.store.archive`) of
what is older than ``pipeline.archive_after_days`` (or ``older_than_days``) until a batch finds nothing left, and
records itself in ``archive_log``. A pass killed mid-way has moved whole batches only; the next pass goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from ki.domain.context import PipelineContext
from ki.store import archive

log = logging.getLogger(__name__)

#: How often the daily archiver checks whether a pass is due (s), and how far apart passes are (s).
CHECK_SECONDS = 3600.0
PASS_EVERY_SECONDS = 86_400.0


@dataclass
class ArchiveReport:
    """What one pass moved (rows), its batches, and its wall time (s)."""

    runs: int = 0
    run_members: int = 0
    attempts: int = 0
    audit_entries: int = 0
    state_rows: int = 0
    state_attempts: int = 0
    batches: int = 0
    seconds: float = 0.0

    @property
    def moved(self) -> int:
        """Every row the pass moved."""
        return (self.runs + self.run_members + self.attempts + self.audit_entries + self.state_rows
                + self.state_attempts)


def archive_history(ctx: PipelineContext, *, older_than_days: int | None = None, batch_size: int = 5000,
                    trigger: str = "cli", now: datetime | None = None,
                    on_batch: Callable[[ArchiveReport], None] | None = None) -> ArchiveReport:
    """Move everything older than ``older_than_days`` (default ``pipeline.archive_after_days``) to the archive.

    ``on_batch`` is called after each committed batch (progress). Returns the :class:`ArchiveReport`.
    Raises: ValueError for ``older_than_days`` < 0 or ``batch_size`` < 1 (nothing is moved).
    """
    days = ctx.config.pipeline.archive_after_days if older_than_days is None else older_than_days
    if days < 0 or batch_size < 1:
        raise ValueError("older_than_days must be >= 0 and batch_size >= 1")
    cutoff = (now or datetime.now(UTC)) - timedelta(days=days)
    report = ArchiveReport()
    started = time.perf_counter()
    with ctx.db.engine.begin() as conn:
        log_id = archive.start_log(conn, days, trigger)

    def drain(step: Callable[..., object], fields: tuple[str, ...]) -> None:
        while True:
            with ctx.db.engine.begin() as conn:
                moved = step(conn, cutoff, batch_size)
            counts = moved if isinstance(moved, tuple) else (moved,)
            for name, n in zip(fields, counts, strict=True):
                setattr(report, name, getattr(report, name) + int(n))
            report.batches += 1
            if on_batch is not None:
                on_batch(report)
            if not counts[0]:
                return

    drain(archive.move_tombstoned, ("state_rows", "state_attempts"))
    drain(archive.move_attempts, ("attempts",))
    drain(archive.move_runs, ("runs", "run_members"))
    drain(archive.move_audit, ("audit_entries",))
    report.seconds = time.perf_counter() - started
    with ctx.db.engine.begin() as conn:
        archive.finish_log(conn, log_id, {k: v for k, v in asdict(report).items() if k != "seconds"})
    return report


class DailyArchiver(threading.Thread):
    """The daily pass of a long-running process (``ki serve``, ``ki worker``): every :data:`CHECK_SECONDS` it runs
    :func:`archive_history` when no pass finished within :data:`PASS_EVERY_SECONDS` (any process's: read from
    ``archive_log``). Several processes passing at once is harmless (the batches skip each other's locked rows)."""

    def __init__(self, ctx: PipelineContext, *, check_seconds: float = CHECK_SECONDS,
                 every_seconds: float = PASS_EVERY_SECONDS):
        super().__init__(name="ki-archiver", daemon=True)
        self.ctx = ctx
        self.check_seconds = check_seconds
        self.every_seconds = every_seconds
        self.stop_event = threading.Event()
        self.passes: list[ArchiveReport] = []

    def due(self) -> bool:
        """True when no pass finished within :attr:`every_seconds`."""
        with self.ctx.db.engine.connect() as conn:
            last = archive.last_finished_pass(conn)
        return last is None or (datetime.now(UTC) - last).total_seconds() >= self.every_seconds

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                if self.due():
                    self.ctx.reload_config()
                    report = archive_history(self.ctx, trigger="daily")
                    self.passes.append(report)
                    log.info("archival pass: %d rows moved in %.1f s", report.moved, report.seconds)
            except Exception as exc:  # noqa: BLE001 - keep the timer alive through a database blip
                log.warning("archival pass failed: %s", exc)
            self.stop_event.wait(self.check_seconds)

    def stop(self) -> None:
        """End the timer (a pass in progress finishes its batch)."""
        self.stop_event.set()
