"""A search never pays for a whole backlog of the full-text projection (ki.adapters.search.projection).

Real PostgreSQL and the real tantivy projection. Seven documents are written to the record only (as a crashed
insert or a restored database leaves them: logged, not applied); a projection in a fresh directory is then
seven objects behind. ``catch_up(max_objects=3)`` applies exactly three; a search applies at most
``SEARCH_CATCH_UP_OBJECTS`` (3 here), answers with a note saying how far behind the index still is, and leaves
the rest to the process's background applier, after which every document is found and the note is gone.
"""

from __future__ import annotations

import re

from ki.adapters.search import projection as projection_module
from ki.adapters.search.backend import PROFILE_ORDINAL, ChunkRow, IndexDocument
from ki.adapters.search.postgres import PostgresBackend
from ki.adapters.search.search import search_with_backend
from ki.domain.access.projection import AccessProjection
from ki.store.index_record import changes_after
from tests.helpers.outage import wait_until
from tests.helpers.postgres import insert_objects

OPEN = AccessProjection(("*",))
WORD = "Zebrafinkenzucht"


def _record_only(ctx, n: int, root: str = "/objects") -> list[int]:
    oids = insert_objects(ctx, n, root=root)
    record = PostgresBackend(ctx.db, lexical=False)  # the record and its change log, no projection
    for oid in oids:
        rows = [ChunkRow(PROFILE_ORDINAL, f"f{oid}.txt", None, "profile", {"fields": {"name": f"f{oid}.txt"}}),
                ChunkRow(0, f"Kaufvertrag {oid}: {WORD} im Vertragsgebiet.")]
        record.write_document(IndexDocument(oid, f"{oid:064d}", f"f{oid}.txt", rows, OPEN))
    return oids


def test_catch_up_applies_no_more_than_it_is_given(make_ctx, tmp_path):
    ctx = make_ctx()
    _record_only(ctx, 7)
    proj = projection_module.projection_for(ctx.db.engine, tmp_path / "lexical")
    try:
        assert proj.catch_up(block=True, timeout=60, max_objects=3) is False
        with ctx.db.engine.connect() as conn:
            assert len(changes_after(conn, proj.watermark(), 100)) == 4
        assert proj.catch_up(block=True, timeout=60) is True
        with ctx.db.engine.connect() as conn:
            assert changes_after(conn, proj.watermark(), 100) == []
    finally:
        proj.close()


def test_a_search_applies_a_bounded_share_and_says_the_index_is_behind(make_ctx, tmp_path, monkeypatch):
    ctx = make_ctx()
    oids = _record_only(ctx, 7)
    monkeypatch.setattr(projection_module, "SEARCH_CATCH_UP_OBJECTS", 3)
    backend = PostgresBackend(ctx.db, index_root=tmp_path / "lexical")
    try:
        first = search_with_backend(backend, ctx.db.engine, WORD, mode="lexical", limit=20)
        assert backend.lexical_lag >= 4, backend.lexical_lag
        assert first.hits  # what it applied is found already (the background applier may have added more)
        proj = backend.projection()
        assert wait_until(lambda: not proj.behind(), 120, step=0.2), "the background applier did not catch up"
        later = PostgresBackend(ctx.db, index_root=tmp_path / "lexical")
        second = search_with_backend(later, ctx.db.engine, WORD, mode="lexical", limit=20)
        assert later.lexical_lag == 0
        assert sorted(h.source_object_id for h in second.hits) == sorted(oids)
    finally:
        backend.projection().close()


def test_the_answer_names_the_lag(make_ctx, tmp_path, monkeypatch):
    """Through :func:`ki.adapters.search.search.search` (what ``ki search``, /v1/search and MCP call): the note."""
    from ki.adapters.search.search import search

    ctx = make_ctx()
    _record_only(ctx, 7)
    monkeypatch.setattr(projection_module, "SEARCH_CATCH_UP_OBJECTS", 3)
    monkeypatch.setattr(projection_module, "default_root", lambda: tmp_path / "lexical")
    response = search(ctx.db, WORD, principals=None, operator=True, mode="lexical", config=ctx.config)
    notes = [n for n in response.notes if "catching up" in n]
    assert len(notes) == 1 and re.search(r"catching up: \d+ recent changes are not searchable", notes[0]), notes
    projection_module.projection_for(ctx.db.engine, tmp_path / "lexical").close()



def test_a_server_search_answers_at_once_while_another_process_applies(make_ctx, tmp_path):
    """``ki serve``'s searches (``index_wait=False``) do not queue behind another process's applier: while one holds
    the apply lock they answer from what is applied and name the lag; the first search after it let go finds all."""
    import subprocess
    import sys
    import time

    ctx = make_ctx()
    root = tmp_path / "lexical"
    proj = projection_module.projection_for(ctx.db.engine, root)
    try:
        assert proj.catch_up(block=True, timeout=60)  # an index exists, empty and current
        oids = _record_only(ctx, 3)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
                                   "print('held', flush=True); sys.stdin.read()", str(proj.directory / "apply.lock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            server = PostgresBackend(ctx.db, index_root=root, index_wait=False)
            started = time.monotonic()
            during = search_with_backend(server, ctx.db.engine, WORD, mode="lexical", limit=20)
            assert time.monotonic() - started < projection_module.SEARCH_WAIT_SECONDS / 2
            assert during.hits == [] and server.lexical_lag == 3
        finally:
            holder.communicate("", timeout=30)
        after = PostgresBackend(ctx.db, index_root=root, index_wait=False)
        found = search_with_backend(after, ctx.db.engine, WORD, mode="lexical", limit=20)
        assert after.lexical_lag == 0 and sorted(h.source_object_id for h in found.hits) == sorted(oids)
    finally:
        proj.close()


def test_catch_up_until_stops_at_the_seq_it_was_given(make_ctx, tmp_path, monkeypatch):
    """``until``: what a search waits for is the log as it stood when the search began. A caller whose ``seq``
    the watermark has reached applies nothing (the applier it waited for did its work); one that is behind
    applies up to its ``seq`` and begins no batch after it (batches of one object here)."""
    from ki.store.index_record import log_head

    monkeypatch.setattr(projection_module, "BATCH_OBJECTS", 1)
    ctx = make_ctx()
    _record_only(ctx, 3)
    with ctx.db.engine.connect() as conn:
        first_head = log_head(conn)
    _record_only(ctx, 4, root="/later")  # logged after "the search began"
    proj = projection_module.projection_for(ctx.db.engine, tmp_path / "lexical", large_passages=10_000)
    try:
        assert proj.catch_up(block=True, timeout=60, until=first_head) is True
        assert proj.watermark() == first_head
        with ctx.db.engine.connect() as conn:
            assert len(changes_after(conn, proj.watermark(), 100)) == 4
            head = log_head(conn)
        assert proj.catch_up(block=True, timeout=60, until=first_head) is True  # reached: nothing applied
        assert proj.watermark() == first_head
        assert proj.catch_up(block=True, timeout=60, until=head) is True
        assert proj.watermark() == head
    finally:
        proj.close()
