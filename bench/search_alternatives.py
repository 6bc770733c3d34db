"""Rankings and query forms the search benches compare ki's choices with, for the record of why (issue 15).

- :func:`postgres_native`: PostgreSQL's own ranking on the record (why the embedded lexical half is tantivy).
- :func:`os_variants`: OpenSearch query forms and index states on the same index (why ki's rounds ask for rows
  without ``collapse`` and without a hit count).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import numpy as np
from _common import percentile
from _search_timing import overlap, segments, timed_run


def postgres_native(db: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]]) -> dict[str, Any]:
    """What PostgreSQL's own ranking costs on the same record: ``ts_rank_cd`` over every match, and the old
    1,000-row cap in table order (which is fast because it ranks a thousand rows, and not the top k)."""
    from sqlalchemy import text

    acl = "c.allowed_principals && CAST(:p AS text[]) AND NOT c.denied_principals && CAST(:p AS text[])"
    q_sql = ("websearch_to_tsquery('german', :q) || websearch_to_tsquery('english', :q) "
             "|| websearch_to_tsquery('simple', :q)")
    full = text(f"SELECT c.source_object_id, ts_rank_cd(c.tsv, q) AS s FROM chunk c, (SELECT {q_sql}) q(q) "
                f"WHERE c.tsv @@ q AND {acl} ORDER BY s DESC LIMIT 30")
    capped = text(f"WITH m AS MATERIALIZED (SELECT c.source_object_id, c.tsv FROM chunk c, (SELECT {q_sql}) q(q) "
                  f"WHERE c.tsv @@ q AND {acl} LIMIT 1000) SELECT m.source_object_id, ts_rank_cd(m.tsv, q) AS s "
                  f"FROM m, (SELECT {q_sql}) q(q) ORDER BY s DESC LIMIT 30")
    res: dict[str, Any] = {}
    for name, sql in (("ts_rank_cd_every_match", full), ("ts_rank_cd_first_1000", capped)):
        lat: dict[str, list[float]] = defaultdict(list)
        with db.engine.connect() as conn:
            conn.execute(text("SET statement_timeout = '20s'"))
            for (cls, q), h in list(zip(queries, held, strict=True))[:120]:
                t = time.perf_counter()
                try:
                    conn.execute(sql, {"q": q, "p": list(h)}).fetchall()
                    lat[cls].append((time.perf_counter() - t) * 1000)
                except Exception as exc:  # noqa: BLE001 - the timeout: recorded as 20 s
                    if "statement timeout" not in str(exc) and "canceling" not in str(exc):
                        raise
                    conn.rollback()
                    conn.execute(text("SET statement_timeout = '20s'"))
                    lat[cls].append(20_000.0)
        res[name] = {c: {"p50_ms": round(percentile(v, 50)), "p95_ms": round(percentile(v, 95))}
                     for c, v in sorted(lat.items())}
        print(f"  PostgreSQL {name}: {res[name]}", flush=True)
    return res


def os_variants(backend: Any, engine: Any, queries: list[tuple[str, str]], held: list[tuple[str, ...]],
                 classes: list[str], osr: list[list[int]]) -> dict[str, Any]:
    """The same queries under other query forms and index states, for the record of the choice: the earlier
    ``collapse`` rounds vs ki's rows rounds (:func:`ki.adapters.search.opensearch_index.lexical_body`), concurrent
    segment
    search ``all`` vs ``none``, before and after a force merge to one segment. Agreement: overlap@10 with ki's
    form (the same exact ranking, so ≈ 1.0 up to ties)."""
    import ki.adapters.search.opensearch as osmod
    from ki.adapters.search.opensearch_index import _HIT_READ, to_dsl

    def collapsed(node: Any, size: int) -> dict[str, Any]:
        return {"size": size, **_HIT_READ, "query": to_dsl(node), "collapse": {"field": "content_hash"}}

    rows_form = osmod.lexical_body
    out: dict[str, Any] = {}

    def measure(name: str) -> None:
        got, out[name] = timed_run(backend, engine, queries, held, classes, warm=30)
        agree = [v for v in (overlap(g, o) for g, o in zip(got, osr, strict=True)) if v is not None]
        out[name] |= {"overlap_with_rows_form": round(float(np.mean(agree)), 3), "segments": segments(backend)}
        print(f"  variant {name}: {out[name]}", flush=True)

    def mode(m: str) -> None:
        backend.client.indices.put_settings(index=backend.both,
                                            body={"index": {"search.concurrent_segment_search.mode": m}})

    try:
        for merged in (False, True):
            if merged:
                t = time.perf_counter()
                backend.client.indices.forcemerge(index=backend.both, max_num_segments=1, request_timeout=7200)
                out["force_merge_s"] = round(time.perf_counter() - t, 1)
            for m in ("all", "none"):
                mode(m)
                for form, fn in (("rows", rows_form), ("collapse", collapsed)):
                    osmod.lexical_body = fn
                    measure(f"{form}/{m}/{'merged' if merged else 'as-loaded'}")
    finally:
        osmod.lexical_body = rows_form
        mode("all")
    return out
