"""A configuration edit and its audit entry, together: a write-ahead record replayed at start.

The saved configuration is a file (``config.json``) and the audit log is a table, so one transaction
cannot hold both. :func:`commit` makes them one outcome instead:

1. the audit entry is written, with a fresh ``edit_id`` and the new file's version, to
   ``config.json.pending`` (fsync'd);
2. the new file replaces the old one atomically (``os.replace``, fsync'd);
3. the audit entry is inserted; if that fails, the old file is put back and the error raised (nothing
   changed);
4. the record is removed.

A process killed between 2 and 4 leaves the record behind: :func:`replay_pending` (run when any ``ki``
process opens its context) inserts its audit entry when the saved file is the one the record names
and no entry with its ``edit_id`` exists, and drops the record when the file is not (the edit never
took). So a saved change is always audited, and an unaudited change is never left saved.
Callers hold :func:`edit_lock`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from ki.config.loader import config_path
from ki.config.settings import KiConfig
from ki.store import audit as audit_log

#: The audit action of a configuration edit.
ACTION = "config_update"


@dataclass(frozen=True)
class EditAudit:
    """Who edits and how the edit is recorded: ``engine`` (ki's database), ``actor`` (a token name, or
    ``cli:<OS user>``) and ``details(before, after)`` → the entry's JSON details."""

    engine: Engine
    actor: str
    details: Callable[[KiConfig, KiConfig], dict[str, Any]]


def pending_path(data_dir: Path) -> Path:
    """The write-ahead record of an edit in progress."""
    return data_dir / (config_path(data_dir).name + ".pending")


@contextlib.contextmanager
def edit_lock(data_dir: Path) -> Iterator[None]:
    """An exclusive ``flock`` of ``config.json.lock``: edits and the replay serialise across processes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / (config_path(data_dir).name + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def version_of(raw: bytes) -> str:
    """The version of saved-file bytes: the first 16 hex digits of their SHA-256."""
    return hashlib.sha256(raw).hexdigest()[:16]


def _write(path: Path, raw: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, raw)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def commit(data_dir: Path, saved: dict[str, Any], *, audit: EditAudit | None, before: KiConfig,
           after: KiConfig) -> str:
    """Write ``saved`` as the configuration file, audited as the module doc says; returns its version.

    Raises: whatever the audit insert raised (the previous file is back in place).
    """
    path = config_path(data_dir)
    raw = json.dumps(saved, indent=2, sort_keys=True).encode("utf-8")
    version = version_of(raw)
    if audit is None:
        _write(path, raw)
        return version
    record = {"edit_id": uuid.uuid4().hex, "version": version, "actor": audit.actor,
              "details": {**audit.details(before, after), "version": version}}
    record["details"]["edit_id"] = record["edit_id"]
    previous = path.read_bytes() if path.exists() else None
    pending = pending_path(data_dir)
    _write(pending, json.dumps(record).encode("utf-8"))
    _write(path, raw)
    try:
        with audit.engine.begin() as conn:
            audit_log.record_audit(conn, actor=audit.actor, action=ACTION, details=record["details"])
    except BaseException:
        if previous is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, previous)
        pending.unlink(missing_ok=True)
        raise
    pending.unlink(missing_ok=True)
    return version


def replay_pending(data_dir: Path, engine: Engine) -> str | None:
    """Finish or drop an edit a killed process left half done (see the module doc).

    Returns: ``"audited"`` (the saved edit got its entry now), ``"dropped"`` (the edit never took),
    ``"done"`` (its entry existed already) or None (no record).
    """
    pending = pending_path(data_dir)
    if not pending.exists():
        return None
    with edit_lock(data_dir):
        try:
            record = json.loads(pending.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pending.unlink(missing_ok=True)  # torn while being written: the file was not replaced yet
            return "dropped"
        path = config_path(data_dir)
        current = version_of(path.read_bytes()) if path.exists() else None
        outcome = "dropped"
        if current == record.get("version"):
            with engine.begin() as conn:
                if audit_log.has_entry(conn, action=ACTION, edit_id=record["edit_id"]):
                    outcome = "done"
                else:
                    audit_log.record_audit(conn, actor=record["actor"], action=ACTION,
                                           details={**record["details"], "replayed": True})
                    outcome = "audited"
        pending.unlink(missing_ok=True)
        return outcome
