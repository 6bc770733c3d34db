"""Searchable from the start: ``ki insert`` of a few hundred files makes its first document searchable
long before the run ends, and documents keep becoming searchable at a steady rate (docs/design-decisions.md
"Depth-first claim order"), driven as the real ``ki`` command on the embedded PostgreSQL.

Measured as fractions of the run (from its first claim to its last outcome, read from the attempt
history), never as times: the machine's speed and load change the times, not the order. The claim order
that ran every stage for the whole estate before the next (oldest row first) made the first document
searchable after ~6/7 of the run. (~2-5 min on a loaded 2-core machine.)
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

pytestmark = pytest.mark.timeout(1200)

FILES = 240


def _write_estate(root) -> None:
    """``FILES`` small letters and notes in 12 matter folders (every stage has work for each)."""
    for i in range(FILES):
        folder = root / f"2024-{i % 12 + 1:04d} Mandant {i % 12}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"Schreiben {i:03d}.txt").write_text(
            f"Az. 2024-{i % 12 + 1:04d}\nSehr geehrte Damen und Herren,\n"
            f"wir bestätigen den Eingang Ihres Schreibens Nr. {i} über die Lieferung von {i} Einheiten.\n"
            "Mit freundlichen Grüßen\n", encoding="utf-8")


def test_the_first_document_is_searchable_long_before_the_run_ends(ki):
    estate = ki.base / "estate"
    _write_estate(estate)
    ki("insert", str(estate), extra={"KI_WORKERS": "2"}, timeout=1100)

    from ki.store.db import DATABASE_NAME, embedded_server_uri, sqlalchemy_url

    engine = create_engine(sqlalchemy_url(embedded_server_uri(ki.data_dir / "pg"), DATABASE_NAME))
    try:
        with engine.connect() as conn:
            run = conn.execute(text("""
                SELECT extract(epoch FROM min(started_at)) AS t0, extract(epoch FROM max(finished_at)) AS t1
                FROM work_item_attempt""")).one()
            searchable = [float(t) for t in conn.execute(text("""
                SELECT extract(epoch FROM finished_at) FROM work_item_attempt
                WHERE stage = 'index' AND outcome = 'done' ORDER BY finished_at""")).scalars()]
    finally:
        engine.dispose()
    assert len(searchable) == FILES
    span = float(run.t1) - float(run.t0)
    first = (searchable[0] - float(run.t0)) / span
    assert first <= 0.1, f"the first document became searchable at {first:.0%} of the run"
    # a steady rate: by the middle of the run, a good part of the estate is searchable already
    by_half = sum(1 for t in searchable if t <= float(run.t0) + span / 2)
    assert by_half >= FILES * 0.3, f"{by_half} of {FILES} searchable at half the run"
    # and the search finds it
    hits = ki("search", "Lieferung von 7 Einheiten", "--json").stdout
    assert "Schreiben 007.txt" in hits
