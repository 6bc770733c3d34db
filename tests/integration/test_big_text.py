"""A huge plain-text file through the real pipeline (issue 14 item 7c): every reading stage records the
bounded window it read, the document is done, and indexing is not windowed (a word from the end and one
from the middle are found). Real PostgreSQL, the default stages, the embedded defaults.

Cost: one 8 MB text, about 40-90 s on a loaded 2-core machine (convert and index dominate).
"""

from __future__ import annotations

import random

from sqlalchemy import text

from ki.adapters.search.projection import projection_for
from ki.adapters.search.search import search
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion

SIZE = 8 * 1024 * 1024
MIDDLE_WORD = "Zwischenvermerkwort"
END_WORD = "Abschlussvermerkwort"


def _big_text() -> str:
    """~8 MB: a court heading and parties, numbered paragraphs, a marker word in the middle, a dated
    signature block and a marker word at the very end."""
    rng = random.Random(7)
    words = ("Klägerin Beklagte Vertrag Werklohn Abnahme Mängel Frist Schreiben Zahlung Anspruch Gutachten "
             "Zeuge Beweis Schaden Kündigung Rechnung Vergleich Termin agreement claim notice").split()
    head = ("Landgericht Hamburg\nAz. 312 O 77/24\n\nKlageschrift\n\nin dem Rechtsstreit\n\nHansa Werft GmbH, "
            "– Klägerin –\n\ngegen\n\nElbe Logistik AG, – Beklagte –\n\nStreitwert: EUR 480.000,00\n\n")
    paras, size, n, middle = [head], len(head), 0, False
    while size < SIZE:
        n += 1
        para = f"{n}. " + " ".join(rng.choice(words) for _ in range(60)) + ".\n\n"
        if not middle and size >= SIZE // 2:
            para, middle = f"{n}. Vermerk {MIDDLE_WORD} zur Akte.\n\n", True
        paras.append(para)
        size += len(para)
    paras.append(f"Hamburg, den 14. März 2025\n\nDr. Jana Ott\nRechtsanwältin\n\n{END_WORD}\n")
    return "".join(paras)


def test_a_huge_text_is_read_in_bounded_windows_and_indexed_whole(ctx, tmp_path):
    root = tmp_path / "akte"
    root.mkdir()
    body = _big_text()
    assert body.index(MIDDLE_WORD) > 3 * 1024 * 1024
    (root / "klageschrift.txt").write_text(body, encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    assert summary.status == "completed"

    with ctx.db.engine.connect() as conn:
        states = dict(conn.execute(text("SELECT stage, status FROM processing_state")).fetchall())
    assert {s: states[s] for s in ("fetch", "convert", "classify_matter", "relate", "extract_metadata", "index")} \
        == dict.fromkeys(("fetch", "convert", "classify_matter", "relate", "extract_metadata", "index"), "done")

    [row] = list(export_rows(ctx.db))
    bound = ctx.config.pipeline.text_window
    windows = row["text_windows"]
    assert set(windows) == {"classify_matter", "relate", "extract_metadata"}
    assert len({w["total_chars"] for w in windows.values()}) == 1
    for stage, w in windows.items():
        assert w["truncated"] is True, stage
        assert abs(w["total_chars"] - len(body)) <= 2, stage  # the converted text (a final newline aside)
        assert bound.head_chars + bound.tail_chars - 4_000 <= w["read_chars"] <= bound.head_chars + bound.tail_chars
        assert (w["head_chars"], w["tail_chars"]) == (bound.head_chars, bound.tail_chars)
    # the tail is read: the signature block's date is the document's date
    assert row["doc_date"] == "2025-03-14"

    # 5,000+ chunks: let the lexical projection finish applying them (a search waits only 10 s for it)
    assert projection_for(ctx.db.engine).catch_up(block=True, timeout=600)
    with ctx.db.engine.connect() as conn:
        for word in (END_WORD, MIDDLE_WORD):
            hits = search(conn.engine, word, principals=None, operator=True, mode="lexical").hits
            assert [h.source_object_id for h in hits] == [row["object_id"]], (word, hits)

    # relate reads a huge neighbour only in its window's pages, with the same facts as the whole artifact (before:
    # every 100,000-character page, each loading the whole text — 1,200 pages for a 120 MB neighbour)
    from ki.adapters.agents.loop import AgentState
    from ki.domain.relate.documents import facts_for
    from ki.domain.relate.policy import READ_CHARS, read_whole
    from ki.domain.relate.tools import RelateTools

    with ctx.db.engine.connect() as conn:
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
        whole = facts_for(conn, row["object_id"])
    tools = RelateTools(ctx, sid, project)
    state = AgentState(tools={t.name: t for t in tools.tools()}, trace_id="t")
    read = read_whole(state, "klageschrift.txt")
    assert read is not None and whole is not None
    assert (read.text, read.text_digest, read.window, read.title) == (whole.text, whole.text_digest, whole.window,
                                                                       whole.title)
    assert read.window["truncated"] and read.ref == whole.ref
    pages = [r.arguments for r in state.tool_results if r.tool == "open_file"]
    assert len(pages) <= 4 < len(body) // READ_CHARS, pages
