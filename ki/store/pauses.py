"""The open circuit breakers in PostgreSQL (``dependency_pause``; :mod:`ki.adapters.breaker`).

A process running stages records the breakers it opens (:class:`PauseSink`, attached to
``ki.adapters.breaker.BREAKERS`` by the local runner) and reads the others' (:func:`read_pauses`), so every
process pauses the stages of a dependency one of them found down, and ``ki status`` / the console's
``/api/status`` say so. The first success anywhere deletes the row, and makes the rows the outage failed due at
once (:func:`release_outage_retries`): a file refused or failed by the outage does not wait out its backoff after
the dependency answers again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine


@dataclass(frozen=True)
class Pause:
    """An open breaker as shown to users: the dependency, since when (UTC), the fault that opened it,
    the next probe (UTC), how many probes failed."""

    dependency: str
    since: datetime
    reason: str
    next_probe_at: datetime
    probes: int = 0

    def describe(self) -> str:
        """``paused: gateway unavailable since 2026-12-01 20:31:02 UTC``."""
        return f"paused: {self.dependency} unavailable since {self.since:%Y-%m-%d %H:%M:%S} UTC"

UPSERT_SQL = text("""
INSERT INTO dependency_pause (dependency, since, reason, next_probe_at, probes, paused_by, updated_at)
VALUES (:dependency, :since, :reason, :next_probe_at, :probes, :paused_by, now())
ON CONFLICT (dependency) DO UPDATE SET
    since = least(dependency_pause.since, excluded.since), reason = excluded.reason,
    next_probe_at = excluded.next_probe_at, probes = greatest(dependency_pause.probes, excluded.probes),
    paused_by = excluded.paused_by, updated_at = now()
""")
READ_SQL = text("SELECT dependency, since, reason, next_probe_at, probes FROM dependency_pause ORDER BY dependency")


def record_pause(conn: Connection, pause: Pause, *, paused_by: str | None) -> None:
    """Record (or update) an open breaker; the earliest ``since`` of all processes is kept."""
    conn.execute(UPSERT_SQL, {"dependency": pause.dependency, "since": pause.since, "reason": pause.reason[:500],
                              "next_probe_at": pause.next_probe_at, "probes": pause.probes, "paused_by": paused_by})


def clear_pause(conn: Connection, dependency: str) -> bool:
    """Delete the breaker of ``dependency`` (it answered); True when one was recorded."""
    return conn.execute(text("DELETE FROM dependency_pause WHERE dependency = :d"),
                        {"d": dependency}).rowcount > 0


# -- name: release_outage_retries --
# The failed rows of the given stages waiting out an infrastructure fault (the dependency's, not the file's:
# no reason) become due now.
RELEASE_SQL = text("""
UPDATE processing_state SET next_retry_at = now(), updated_at = now()
WHERE status = 'failed' AND stage = ANY(CAST(:stages AS text[])) AND reason IS NULL
  AND next_retry_at > now() AND last_error ->> 'infrastructure' IS NOT NULL
""")


def release_outage_retries(conn: Connection, stages: frozenset[str] | set[str]) -> int:
    """Make the ``failed`` rows of ``stages`` whose last fault was an infrastructure fault due now (the
    dependency answers again); returns the rows released. A row failed by another dependency's outage is released
    too: its stage is still paused while that one is down, so it is not claimed before it answers."""
    if not stages:
        return 0
    return conn.execute(RELEASE_SQL, {"stages": sorted(stages)}).rowcount


def read_pauses(conn: Connection) -> list[Pause]:
    """Every recorded open breaker, by dependency."""
    return [Pause(r.dependency, r.since, r.reason, r.next_probe_at, int(r.probes)) for r in conn.execute(READ_SQL)]


class PauseSink:
    """A :class:`ki.adapters.breaker.BreakerSink` writing to ``engine``'s database, each event in its own
    transaction. ``worker`` (``host:pid:start``) is recorded as ``paused_by``."""

    def __init__(self, engine: Engine, worker: str | None = None,
                 stages: Mapping[str, frozenset[str]] | None = None) -> None:
        self._engine = engine
        self._worker = worker
        self._stages = dict(stages or {})  # dependency -> the stages that need it

    def opened(self, pause: Pause) -> None:
        """Record the open breaker (or its rescheduled probe)."""
        with self._engine.begin() as conn:
            record_pause(conn, pause, paused_by=self._worker)

    def closed(self, dependency: str) -> None:
        """Delete the breaker of ``dependency`` and release the rows of its stages that the outage failed
        (:func:`release_outage_retries`), in one transaction."""
        with self._engine.begin() as conn:
            clear_pause(conn, dependency)
            release_outage_retries(conn, self._stages.get(dependency, frozenset()))
