"""Issue 14 item 7e: the index stage streams a big text — chunk → embed → write a bounded batch at a time — and
the process's memory stays within a bound computed from the file's size.

A 12 MB plain text goes through the real pipeline (embedded PostgreSQL, the default stages, the hashing
embedder so that vectors are made, cached and written). The test counts, on the real engine, the statements
that store vectors in the embedding cache and that write chunk rows: one per batch, never one for the whole
document; checks that the rows are exactly the chunks of the converted text (ordinals, texts, vectors); and
samples this process's resident size while the pipeline runs: its peak above the start must stay under
:data:`PER_MB` MB per MB of text plus :data:`SLACK_MB` (measured: see the note in ``bench/bigfile.py``; the
code before streaming needed about twice that). Conversion runs in a worker process, which is not counted.

Cost: about 30-60 s on a quiet 2-core machine, longer under load (convert and the model stages dominate).
"""

from __future__ import annotations

import math
import random
import threading

import numpy as np
from sqlalchemy import event, text

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.search.chunking import chunk_spans
from ki.adapters.search.embeddings import HashingEmbedder, context_header, embedding_input
from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.memory import resident_mb
from ki.stages.index import header_title
from ki.stages.index_rows import STREAM_ROWS, blend
from ki.store.chunk_rows import WRITE_BATCH_ROWS
from ki.store.facts import fact_sources

SIZE = 12 * 1024 * 1024
#: The bound on this process's peak resident size above its start, per MB of text, plus a constant.
PER_MB = 6.0
SLACK_MB = 160.0


def _text() -> str:
    rng = random.Random(11)
    words = ("Klägerin Beklagte Vertrag Werklohn Abnahme Mängel Frist Schreiben Zahlung Anspruch Gutachten "
             "Zeuge Beweis Schaden Kündigung Rechnung Vergleich Termin agreement claim notice").split()
    paras, size, n = ["Landgericht Köln\nAz. 5 O 12/25\n\nKlageschrift\n\n"], 0, 0
    while size < SIZE:
        n += 1
        para = f"{n}. " + " ".join(rng.choice(words) for _ in range(rng.randint(20, 90))) + ".\n\n"
        paras.append(para)
        size += len(para)
    paras.append("Köln, den 2. Mai 2025\n\nSchlusswortmarke\n")
    return "".join(paras)


class _Peak(threading.Thread):
    """This process's resident size sampled every 20 ms: ``peak`` (MiB)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = resident_mb() or 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, resident_mb() or 0.0)
            self.stop.wait(0.02)


def test_the_index_stage_streams_a_big_text_in_batches_within_a_memory_bound(ctx, tmp_path):
    set_config_value(ctx.settings.data_dir, "retrieval.embedding_model", "hashing")
    ctx.reload_config()
    root = tmp_path / "akte"
    root.mkdir()
    body = _text()
    (root / "klageschrift.txt").write_text(body, encoding="utf-8")
    del body
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)

    statements = {"store": 0, "write": 0}

    def count(conn, cursor, statement, parameters, context, executemany):  # noqa: ARG001 - SQLAlchemy's signature
        if statement.lstrip().startswith("INSERT INTO embedding_cache"):
            statements["store"] += 1
        elif statement.lstrip().startswith("INSERT INTO chunk"):
            statements["write"] += 1

    event.listen(ctx.db.engine, "before_cursor_execute", count)
    sampler = _Peak()
    start = sampler.peak
    sampler.start()
    try:
        summary = launch_insertion(ctx, source_id=sid, wait_for_retries_seconds=0)
    finally:
        sampler.stop.set()
        sampler.join()
        event.remove(ctx.db.engine, "before_cursor_execute", count)
    assert summary.status == "completed"

    with ctx.db.engine.connect() as conn:
        oid, status = conn.execute(text("SELECT source_object_id, status FROM processing_state "
                                        "WHERE stage = 'index'")).one()
        doc = StructuredDocument.model_validate(conn.execute(text(
            "SELECT body FROM artifact WHERE kind = 'structured_json'")).scalar_one())
        doc_type = conn.execute(text(f"SELECT {fact_sources(conn).type_value(':o')}"), {"o": oid}).scalar()
        rows = conn.execute(text("SELECT ordinal, text, embedding::text AS emb FROM chunk ORDER BY ordinal")).fetchall()
    assert status == "done"
    converted = doc.text
    spans = chunk_spans(converted, chunk_chars=ctx.config.retrieval.chunk_chars,
                        overlap_chars=ctx.config.retrieval.chunk_overlap_chars)
    assert len(spans) > 5 * STREAM_ROWS  # the file is big enough to need many batches
    assert [r.ordinal for r in rows] == list(range(-1, len(spans)))
    assert all(r.text == converted[s:e] for r, (s, e) in zip(rows[1:], spans, strict=True))

    # one statement per batch: vectors stored per stream batch, rows upserted per write batch
    assert statements["store"] == math.ceil(len(rows) / STREAM_ROWS), statements
    assert statements["write"] == math.ceil(len(rows) / WRITE_BATCH_ROWS), statements

    # the vectors written are the ones of the exact inputs (header + chunk), blended with the matter header's
    # vector when the file has a matter (ki.stages.index_rows.blend), spot-checked
    embedder = HashingEmbedder()
    header = context_header(title=header_title(doc), doc_type=doc_type)
    with ctx.db.engine.connect() as conn:
        matter = conn.execute(text(f"SELECT {fact_sources(conn).matter_value(':o', with_title=True)}"),
                              {"o": oid}).scalar()
    mv = embedder.embed_passages([context_header(title=None, matter=matter)])[0] if matter else None
    for r in (rows[1], rows[len(rows) // 2], rows[-1]):
        want = blend(embedder.embed_passages([embedding_input(r.text, header)])[0], mv)
        got = np.array([float(x) for x in r.emb.strip("[]").split(",")], dtype=np.float32)
        assert np.allclose(got, want, atol=1e-6), r.ordinal

    mb = len(converted.encode("utf-8")) / (1 << 20)
    bound = PER_MB * mb + SLACK_MB
    assert sampler.peak - start <= bound, (f"the pipeline grew this process by {sampler.peak - start:.0f} MB for a "
                                           f"{mb:.1f} MB text (bound {bound:.0f} MB)")
