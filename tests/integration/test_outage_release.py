"""When a dependency answers again, the rows its outage failed are due at once (``ki.store.pauses``).

Real PostgreSQL rows in the states an outage leaves them in (failed with an infrastructure fault and a backoff
still to wait; failed for the file's own fault; another stage's), a real :class:`ki.adapters.breaker.Breakers`
with the database sink attached: the breaker opens (the pause is recorded), the first success closes it (the pause
is deleted) and, in the same transaction, only the outage's rows of the stages needing the dependency are made due.
"""

from __future__ import annotations

import json

from sqlalchemy import text

from ki.adapters.breaker import BreakerPolicy, Breakers
from ki.store.pauses import PauseSink, read_pauses
from ki.store.requeue import seed_rows
from tests.helpers.postgres import insert_objects

OUTAGE = {"message": "docling answered HTTP 500", "infrastructure": "docling answered HTTP 500"}
OWN_FAULT = {"message": "HTTP 500 on this file only", "infrastructure": "docling answered HTTP 500"}


def _fail(conn, oid: int, stage: str, last_error: dict, reason: str | None = None) -> None:
    """The row as ``fail_claim`` leaves it (``reason`` is generated from ``last_error``)."""
    conn.execute(text("UPDATE processing_state SET status = 'failed', attempts = 1, "
                      "last_error = CAST(:e AS jsonb), next_retry_at = now() + interval '1 hour' "
                      "WHERE source_object_id = :o AND stage = :s"),
                 {"e": json.dumps(last_error | {"reason": reason}), "o": oid, "s": stage})


def _due(ctx) -> set[tuple[int, str]]:
    with ctx.db.engine.connect() as conn:
        return {(r.source_object_id, r.stage) for r in conn.execute(text(
            "SELECT source_object_id, stage FROM processing_state WHERE status = 'failed' AND next_retry_at <= now()"))}


def test_the_first_success_releases_the_outages_rows_of_the_stages_needing_the_dependency(ctx):
    a, b, c, d = insert_objects(ctx, 4)
    with ctx.db.engine.begin() as conn:
        seed_rows(conn, [a, b, c, d])
        _fail(conn, a, "convert", OUTAGE)
        _fail(conn, b, "convert", OUTAGE)
        _fail(conn, c, "convert", OWN_FAULT, reason="poison_suspected")  # charged to the file: waits its backoff
        _fail(conn, d, "classify_matter", OUTAGE)  # a stage that does not need docling
    breakers = Breakers(BreakerPolicy(failures=3, probe_seconds=0.05, probe_max_seconds=0.2))
    breakers.attach(PauseSink(ctx.db.engine, "test:1:0", stages={"docling": frozenset({"convert"})}))
    for oid in (a, b, a):
        breakers.failed("docling", OUTAGE["infrastructure"], subject=oid)
    with ctx.db.engine.connect() as conn:
        assert [p.dependency for p in read_pauses(conn)] == ["docling"]
    assert _due(ctx) == set()
    breakers.succeeded("docling")
    with ctx.db.engine.connect() as conn:
        assert read_pauses(conn) == []
    assert _due(ctx) == {(a, "convert"), (b, "convert")}
