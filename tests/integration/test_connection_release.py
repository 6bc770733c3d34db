"""A process that is done with a database holds no connection to it (CI of session 5: "too many clients").

Each insert left one idle connection per database for the life of the process: the lexical projection's
background applier (``ki.adapters.search.projection``) reconnected after the owner had disposed the engine. In a
long-lived process that opens and closes contexts (the test suite; ``ki serve`` switching data
directories) they accumulated until PostgreSQL refused clients. Real PostgreSQL, real pipeline.
"""

from __future__ import annotations

import time

from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from tests.helpers.postgres import admin_connection


def _connections_to(pg_server_uri: str, database: str) -> int:
    with admin_connection(pg_server_uri) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                           (database,)).fetchone()
    return int(row[0])


def test_disposing_a_context_right_after_an_insert_leaves_no_connection(make_ctx, pg_server_uri, tmp_path):
    root = tmp_path / "share"
    root.mkdir()
    for i in range(3):
        (root / f"note{i}.txt").write_text(f"Aktennotiz {i}: Kündigung des Mietvertrags, Kaution {i}.\n",
                                           encoding="utf-8")
    ctx = make_ctx()
    database = ctx.db.engine.url.database
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    assert launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0).status == "completed"
    ctx.db.dispose()  # at once: the index stage's last write has just asked the applier to catch up
    # the applier's debounce (0.5 s) and an apply in flight end well within this
    deadline = time.monotonic() + 10
    while _connections_to(pg_server_uri, database) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # and nothing reconnects afterwards
    assert _connections_to(pg_server_uri, database) == 0
    # the record is intact and a new context on the database finds every document
    again = make_ctx()
    assert len(search(again.db.engine, "Kündigung", principals=None, operator=True, mode="lexical").hits) == 3
