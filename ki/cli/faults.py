"""Ordinary faults as one readable message and a documented exit code; tracebacks go to ``ki.log``.

An unreachable ``KI_DATABASE_URL``, a bad ``KI_WORKERS``, an unreadable or unusable
``KI_DATA_DIR``, a database that stops during an insert — each is one message saying what is wrong
and what to do, the exit code below, and the traceback in the rotated log file ``ki.log`` of the data
directory (or :func:`fallback_log_path` when the data directory itself is the fault), whose path the
message names. Warnings logged while a command runs reach stderr as one line each (no traceback);
the log file has every record at INFO and above with its traceback.

Exit codes (README "Exit codes"):

====  ==========================================================================================
code  meaning
====  ==========================================================================================
0     the command did what it was asked (quarantined files are reported, not errors)
1     the run failed, or ki met an unexpected error (a bug: the traceback is in ``ki.log``)
2     usage or configuration error: a bad option, argument, environment variable or setting
3     the source folder is unavailable (nothing was changed)
4     the database cannot be reached, or stopped while the command ran
5     the data directory cannot be used (missing permissions, not a directory, ...)
6     refused because the database is in use (``ki db stop`` without ``--force``)
7     the database was migrated by a newer ki (its schema is unknown to this version; nothing changed)
8     the run was cancelled (``ki run cancel``, the console's Cancel; finished work is kept)
9     ``ki serve``: the port to listen on is in use by another process (nothing was started)
====  ==========================================================================================
"""

from __future__ import annotations

import errno
import logging
import logging.handlers
import os
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

from ki.core.errors import ConfigurationError, KiError, SchemaNewerThanCode, SourceUnavailable

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SOURCE_UNAVAILABLE = 3
EXIT_DATABASE = 4
EXIT_DATA_DIR = 5
EXIT_IN_USE = 6
EXIT_SCHEMA_NEWER = 7
EXIT_CANCELLED = 8
EXIT_PORT_IN_USE = 9

#: ``ki.log`` rotates at this size, keeping this many old files (``ki.log.1`` ...).
LOG_MAX_BYTES = 2 * 1024 * 1024
LOG_BACKUPS = 3


class DataDirUnusable(KiError):
    """``KI_DATA_DIR`` is not a directory ki can create, read and write (exit 5)."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class DatabaseUnavailable(KiError):
    """The database cannot be reached or stopped answering (exit 4). ``during`` says when."""

    def __init__(self, detail: str, *, external: bool, during: str = "connecting"):
        super().__init__(detail)
        self.detail = detail
        self.external = external
        self.during = during


@dataclass(frozen=True)
class Fault:
    """What the user is told about one failed command.

    Attributes:
        code: the exit code (module table).
        what: one line — what is wrong.
        todo: one line — what to do about it.
    """

    code: int
    what: str
    todo: str


def data_dir() -> Path:
    """The data directory ``KI_DATA_DIR`` names (its default when unset), read without loading the settings
    (:func:`ki.config.data_dir.data_dir`): the log is found even when another variable is the fault."""
    from ki.config.data_dir import data_dir as configured

    return configured().expanduser()


def check_data_dir(path: Path) -> None:
    """Create ``path`` if missing and check ki can read and write it.

    Raises:
        DataDirUnusable: it is a file, cannot be created, or cannot be listed. (Writing is checked where
            ki writes: a denied write inside it is an ``OSError`` that :func:`classify` reports as exit 5.)
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise DataDirUnusable(path, "exists and is not a directory") from exc
    except OSError as exc:
        raise DataDirUnusable(path, f"cannot be created ({exc.strerror or exc})") from exc
    if not path.is_dir():
        raise DataDirUnusable(path, "exists and is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise DataDirUnusable(path, "is not readable by this user")


def fallback_log_path() -> Path:
    """Where ``ki.log`` goes when the data directory cannot hold it: ``$TMPDIR/ki-<uid>/ki.log``."""
    return Path(tempfile.gettempdir()) / f"ki-{os.getuid()}" / "ki.log"


def _writable_log(path: Path) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
        return True
    except OSError:
        return False


def log_path() -> Path:
    """``<data_dir>/ki.log`` when the data directory can hold it, else :func:`fallback_log_path`."""
    own = data_dir() / "ki.log"
    if _writable_log(own):
        return own
    return fallback_log_path()


class _QuietRotatingHandler(logging.handlers.RotatingFileHandler):
    """A rotating ``ki.log`` that never prints logging's own errors to stderr."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        pass


class _OneLine(logging.Formatter):
    """``LEVEL name: message`` without the traceback (that is in ``ki.log``)."""

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().strip().splitlines() or [""]
        line = f"{record.levelname} {record.name}: {lines[0]}" + (" …" if len(lines) > 1 else "")
        if record.exc_info and record.exc_info[1] is not None:
            line += f" ({type(record.exc_info[1]).__name__}; details in ki.log)"
        return line


class _OncePerWindow(logging.Filter):
    """Lets one record per (logger, message template) through every ``window`` seconds: a worker pool
    that retries against a stopped database says so once, not eight times a second."""

    def __init__(self, window: float = 30.0):
        super().__init__()
        self.window = window
        self._last: dict[tuple[str, object], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)
        last = self._last.get(key)
        if last is not None and record.created - last < self.window:
            return False
        self._last[key] = record.created
        return True


_file_handler: logging.Handler | None = None
_command = "ki"
#: Set by :func:`database_opened`: a database fault after it is the database stopping, not unreachable.
_opened = False


def running(command: str) -> None:
    """Name the command this process runs (``ki insert``), for the messages."""
    global _command
    _command = command


def database_opened() -> None:
    """Record that the command reached the database: a later database fault is reported as the
    database stopping while it ran, not as unreachable."""
    global _opened
    _opened = True
_stderr_handler: logging.Handler | None = None


def configure_logging(stderr_level: int = logging.WARNING) -> None:
    """Route logging: every record at INFO+ with its traceback to ``ki.log`` (rotated), and records at
    ``stderr_level``+ to stderr as one line each. Calling it again changes only the stderr level
    (``ki worker`` and ``ki serve`` show INFO)."""
    global _file_handler, _stderr_handler
    root = logging.getLogger()
    if _stderr_handler is None:
        _stderr_handler = logging.StreamHandler()
        _stderr_handler.setFormatter(_OneLine())
        _stderr_handler.addFilter(_OncePerWindow())
        root.addHandler(_stderr_handler)
        _file_handler = _QuietRotatingHandler(log_path(), maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS,
                                              encoding="utf-8", delay=True)
        _file_handler.setLevel(logging.INFO)
        _file_handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
        root.addHandler(_file_handler)
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
    _stderr_handler.setLevel(stderr_level)
    root.setLevel(min(stderr_level, logging.INFO))


def record_traceback(exc: BaseException) -> Path:
    """Append ``exc``'s traceback to ``ki.log``; returns the file's path (the fallback when needed)."""
    text = "".join(traceback.format_exception(exc))
    path = log_path()
    for candidate in (path, fallback_log_path()):
        try:
            candidate.parent.mkdir(parents=True, exist_ok=True)
            handler = _QuietRotatingHandler(candidate, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS,
                                            encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(message)s"))
            handler.emit(logging.LogRecord("ki.cli", logging.ERROR, "", 0, "%s", (text.rstrip(),), None))
            handler.close()
            return candidate
        except OSError:
            continue
    return path


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _database_fault(exc: BaseException) -> DatabaseUnavailable | None:
    """The database fault in ``exc``'s chain, as :class:`DatabaseUnavailable` (None when there is none)."""
    import psycopg
    from sqlalchemy.exc import DBAPIError, OperationalError

    for e in _chain(exc):
        if isinstance(e, DatabaseUnavailable):
            return e
        lost = isinstance(e, DBAPIError) and e.connection_invalidated
        if isinstance(e, OperationalError | psycopg.OperationalError) or lost:
                return DatabaseUnavailable(_first_line(e), external=False,
                                       during=f"ran `{_command}`" if _opened else "connecting")
    return None


def classify(exc: BaseException) -> Fault:
    """The :class:`Fault` a failed command reports for ``exc`` (exit 1 for anything unexpected)."""
    for e in _chain(exc):
        if isinstance(e, DataDirUnusable):
            return Fault(EXIT_DATA_DIR, f"the data directory {e}",
                         "set KI_DATA_DIR to a directory you can write, or fix its permissions")
        if isinstance(e, SchemaNewerThanCode):
            return Fault(EXIT_SCHEMA_NEWER, str(e),
                         "use the newer ki that migrated it (update this installation), "
                         "or point KI_DATA_DIR / KI_DATABASE_URL at another database; nothing was changed")
    db = _database_fault(exc)
    if db is not None:
        from ki.config.process import ProcessSettings, current

        try:
            external = bool(current(ProcessSettings).database_url)
        except ConfigurationError:
            external = db.external
        where = "KI_DATABASE_URL" if external else "the embedded PostgreSQL"
        if db.during == "connecting":
            what = f"cannot reach the database ({where}): {db.detail}"
            todo = ("check that the server at KI_DATABASE_URL is running and the URL, user and password are "
                    "right, or unset KI_DATABASE_URL to use the embedded database" if external else
                    "check the data directory's free space and permissions, then run the command again")
        else:
            what = f"the database ({where}) stopped answering while ki {db.during}: {db.detail}"
            todo = ("run the command again when the server at KI_DATABASE_URL is back" if external else
                    "run the command again: it restarts the embedded PostgreSQL") + \
                "; finished work is kept and the rest resumes where it stopped"
        return Fault(EXIT_DATABASE, what, todo)
    for e in _chain(exc):
        if isinstance(e, SourceUnavailable):
            return Fault(EXIT_SOURCE_UNAVAILABLE, f"source unavailable: {e}",
                         "nothing was changed; run again when the folder is back")
        if isinstance(e, ConfigurationError):
            return Fault(EXIT_USAGE, f"configuration error: {e}",
                         "fix or unset the variable or setting named above "
                         "(`ki config show` lists the effective configuration)")
        if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EROFS, errno.ENOSPC, errno.ENOTDIR):
            return Fault(EXIT_DATA_DIR, f"cannot use {e.filename or 'a file'}: {e.strerror}",
                         "check the data directory's permissions and free space (KI_DATA_DIR)")
    return Fault(EXIT_FAILED, f"unexpected error: {type(exc).__name__}: {_first_line(exc)}",
                 "this is a bug in ki; please report it with the log file named below")


def report(exc: BaseException, console) -> int:
    """Print ``exc`` as its :class:`Fault` on ``console`` (stderr), record the traceback; return the exit code.

    Output (three lines, markup of names escaped)::

        ki: cannot reach the database (KI_DATABASE_URL): connection refused ...
        what to do: check that the server at KI_DATABASE_URL is running ...
        details: /home/me/.local/share/ki/ki.log
    """
    fault = classify(exc)
    path = record_traceback(exc)
    console.print(f"[red]ki:[/] {escape(fault.what)}", highlight=False, soft_wrap=True)
    console.print(f"what to do: {escape(fault.todo)}", highlight=False, soft_wrap=True)
    console.print(f"details: {escape(str(path))}", highlight=False, soft_wrap=True)
    return fault.code
