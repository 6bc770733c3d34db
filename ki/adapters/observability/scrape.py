"""The metrics read from PostgreSQL when Prometheus scrapes: the durable state, not this process's events.

Spec: insertion-pipeline.md "Processing states and console buckets" (the eight buckets, counted by the one
bucket query); prior-art §8 (per-state gauges computed at scrape time, oldest-pending age). Every process
that serves metrics reports the same values here, because they come from the rows, so a restart changes
nothing in them (the counters of :mod:`ki.adapters.observability.metrics` start again at 0, as Prometheus expects).

One scrape reads, on one connection: the bucket counts (the one full count; the caller may pass cached ones),
the oldest runnable row per stage and lane and the failed rows due (index probes), the rows waiting for a retry
or a reason, the open circuit breakers, the spending cap, the watched sources' health and the active runs. The
whole read is cached for :data:`CACHE_SECONDS`, so scrapers polling at once cost one read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.engine import Engine

from ki.store.pauses import read_pauses
from ki.store.queue_age import QueueAge, Waiting, oldest_runnable, waiting_rows
from ki.store.runs import RunRow, active_runs
from ki.store.status import bucket_counts
from ki.store.watch import WatchHealth, watch_health

#: A scrape answers from a read at most this old (s).
CACHE_SECONDS = 1.0

BucketCounts = dict[str, dict[str, int]]


@dataclass(frozen=True)
class StateSnapshot:
    """One read of the durable state (see the module doc); ``at`` is when it was taken (UTC)."""

    buckets: BucketCounts
    queue: list[QueueAge]
    due: dict[str, int]
    waiting: list[Waiting]
    paused: list[tuple[str, datetime]]
    watched: list[WatchHealth]
    runs: list[RunRow]
    at: datetime
    budget: dict | None = None


class StateCollector(Collector):
    """A prometheus-client collector of the gauges read from PostgreSQL (thread-safe).

    Args:
        engine: the database.
        counts: returns the bucket counts (``{stage: {bucket: n}}``) when the caller keeps its own cache;
            default: the bucket query on the scrape's connection.
        budget: returns the reached spending cap (``ki.orchestration.budget.budget_wait``: ``cap``, ``waiting``
            …) or None; default: no budget gauges.
        clock: monotonic seconds (tests inject one).
    """

    def __init__(self, engine: Engine, *, counts: Callable[[], BucketCounts] | None = None,
                 budget: Callable[[], dict | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self._counts = counts
        self._budget = budget
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, StateSnapshot] | None = None

    def snapshot(self) -> StateSnapshot:
        """The newest read, reading again when it is older than :data:`CACHE_SECONDS`."""
        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] <= CACHE_SECONDS:
                return self._cached[1]
            with self.engine.connect() as conn:
                buckets = self._counts() if self._counts is not None else bucket_counts(conn)
                queue, due = oldest_runnable(conn)
                snap = StateSnapshot(buckets=buckets, queue=queue, due=due, waiting=waiting_rows(conn, buckets),
                                     paused=[(p.dependency, p.since) for p in read_pauses(conn)],
                                     watched=watch_health(conn), runs=active_runs(conn), at=datetime.now(UTC),
                                     budget=self._budget() if self._budget is not None else None)
            self._cached = (self._clock(), snap)
            return snap

    def describe(self) -> list:
        """Nothing up front: the families are read at scrape time (keeps registration free of I/O)."""
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The gauges of :meth:`snapshot` (names in ``docs/metrics.md``)."""
        snap = self.snapshot()
        rows = GaugeMetricFamily("ki_processing_state_rows", "processing_state rows per stage and console bucket "
                                 "(the one bucket query).", labels=["stage", "bucket"])
        for stage, buckets in snap.buckets.items():
            for bucket, n in buckets.items():
                rows.add_metric([stage, bucket], n)
        yield rows
        runnable = GaugeMetricFamily("ki_queue_runnable_rows", "Rows runnable now (pending, or failed with the "
                                     "retry due) per stage.", labels=["stage"])
        for stage, buckets in snap.buckets.items():
            if n := buckets.get("pending", 0) + snap.due.get(stage, 0):
                runnable.add_metric([stage], n)
        age = GaugeMetricFamily("ki_queue_oldest_runnable_age_seconds", "Age of the oldest runnable row per stage "
                                "and claim lane (how long it has waited to be claimed).", labels=["stage", "lane"])
        for q in snap.queue:
            age.add_metric([q.stage, q.lane], q.oldest_seconds)
        yield runnable
        yield age
        waiting = GaugeMetricFamily("ki_waiting_rows", "Rows owed but not runnable now, by stage and why "
                                    "(waiting_for_previous_stage, run_after, budget, source_unreadable).",
                                    labels=["stage", "reason"])
        for w in snap.waiting:
            waiting.add_metric([w.stage, w.reason], w.rows)
        yield waiting
        paused = GaugeMetricFamily("ki_dependency_paused", "1 while the dependency's circuit breaker pauses the "
                                   "stages that need it.", labels=["dependency"])
        since = GaugeMetricFamily("ki_dependency_paused_since_timestamp_seconds", "Unix time the dependency's "
                                  "pause began.", labels=["dependency"])
        for dependency, began in snap.paused:
            paused.add_metric([dependency], 1)
            since.add_metric([dependency], began.timestamp())
        yield paused
        yield since
        reached = GaugeMetricFamily("ki_budget_reached", "1 while a spending cap (pipeline.budget.daily_usd or "
                                    "run_usd) holds the model stages.", labels=["cap"])
        held = GaugeMetricFamily("ki_budget_held_rows", "Model-stage rows a claim would take now, held by the reached "
                                 "spending cap.", labels=["cap"])
        if snap.budget is not None:
            reached.add_metric([str(snap.budget.get("cap"))], 1)
            held.add_metric([str(snap.budget.get("cap"))], int(snap.budget.get("waiting") or 0))
        yield reached
        yield held
        yield from _watch_families(snap.watched)
        yield from _run_families(snap.runs)


def _watch_families(watched: list[WatchHealth]) -> Iterator[GaugeMetricFamily]:
    up = GaugeMetricFamily("ki_watcher_up", "1 while the source's folder watcher is watching (0: paused, stopped "
                           "or stale).", labels=["source_id", "mode"])
    files = GaugeMetricFamily("ki_watcher_files", "Files the source's watcher has seen, queued and ignored since "
                              "it started.", labels=["source_id", "kind"])
    for w in watched:
        up.add_metric([str(w.source_id), w.mode], 1 if w.state == "watching" else 0)
        for kind, n in (("seen", w.files_seen), ("queued", w.files_queued), ("ignored", w.files_ignored)):
            files.add_metric([str(w.source_id), kind], n)
    yield up
    yield files


def _run_families(runs: list[RunRow]) -> Iterator[GaugeMetricFamily]:
    active = GaugeMetricFamily("ki_active_runs", "Runs queued or running, by kind and provider.",
                               labels=["kind", "provider"])
    progress = GaugeMetricFamily("ki_active_run_stage_executions", "Stage executions of the active runs so far "
                                 "(the run counters, a Hatchet batch's progress included), by provider and counter.",
                                 labels=["kind", "provider", "counter"])
    by_kind: dict[tuple[str, str], int] = {}
    sums: dict[tuple[str, str, str], int] = {}
    for run in runs:
        by_kind[(run.kind, run.provider)] = by_kind.get((run.kind, run.provider), 0) + 1
        for counter in ("processed", "done", "skipped", "retried", "quarantined"):
            key = (run.kind, run.provider, counter)
            sums[key] = sums.get(key, 0) + int(getattr(run, counter))
    for (kind, provider), n in sorted(by_kind.items()):
        active.add_metric([kind, provider], n)
    for labels, n in sorted(sums.items()):
        progress.add_metric(list(labels), n)
    yield active
    yield progress
