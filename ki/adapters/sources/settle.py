"""Turning one source's file-system events into settled candidates (prior-art.md §8).

A path an event names is *pending* until it has had no events and an unchanged size and mtime for
``settle_seconds`` (a scanner writing a file in pieces, a copy in progress: never taken half-written);
then it is opened for reading once, and a busy or locked file (EBUSY, permission denied mid-copy) stays
pending and is tried again, never handed on. Many events for one path make one pending entry, and a
path whose size and mtime are those of its last sync is not handed on again (an ATTRIB after a copy,
a touch that changed nothing), so one arriving file yields one candidate. A folder that appears (moved
into the root) is expanded into its files; a path that is gone is handed on as it is, so the scan
counts it toward ``deletion_confirmations`` (never straight to a tombstone). Names that are never
documents (R09) are counted by reason and never pending.

Paths are OS-given (``str`` with surrogate escapes), relative to the root, ``/``-separated.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ki.adapters.sources.local import ignore_reason

#: Signatures of synced paths remembered for de-duplication (oldest forgotten first).
SYNCED_MEMORY = 200_000


@dataclass
class Pending:
    """One path waiting to settle: the last size/mtime seen, when it last had an event, since when its
    size/mtime is unchanged, and why it was last found busy (None: not busy)."""

    last_event: float
    stable_since: float
    size: int | None = None
    mtime_ns: int | None = None
    busy: str | None = None


@dataclass
class Settler:
    """The pending paths of one source root and what became of them (module doc).

    Attributes:
        seen: distinct paths events named (a path pending again after its sync counts again).
        ignored: ``{reason: count}`` of event paths that are never documents.
        duplicates: settled paths not handed on because nothing changed since their last sync.
        busy: times a settled file could not be opened and was kept pending.
    """

    root: Path
    settle_seconds: float
    pending: dict[str, Pending] = field(default_factory=dict)
    seen: int = 0
    ignored: Counter = field(default_factory=Counter)
    duplicates: int = 0
    busy: int = 0
    _synced: OrderedDict = field(default_factory=OrderedDict)
    _inflight: dict[str, tuple[int, int] | None] = field(default_factory=dict)

    def note(self, rel: str, now: float) -> bool:
        """An event named ``rel`` at ``now`` (monotonic s). Returns False when the name is ignored."""
        rel = rel.strip("/")
        if not rel or rel == ".":
            return False
        reason = next((r for r in map(ignore_reason, rel.split("/")) if r), None)
        if reason is not None:
            self.ignored[reason] += 1
            return False
        p = self.pending.get(rel)
        if p is None:
            self.seen += 1
            self.pending[rel] = Pending(last_event=now, stable_since=now)
        else:
            p.last_event = now
        return True

    def ready(self, now: float) -> list[str]:
        """The paths that settled by ``now``: files complete and readable, paths that are gone. Each leaves
        the pending set and is in flight until :meth:`done`."""
        out: list[str] = []
        for rel, p in list(self.pending.items()):
            path = os.path.join(self.root, rel)
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if now - p.last_event >= self.settle_seconds:
                    del self.pending[rel]
                    self._inflight[rel] = None
                    out.append(rel)
                continue
            except OSError as exc:  # a folder on the way unreadable for a moment: try again later
                self._keep_busy(p, exc, now)
                continue
            if stat.S_ISDIR(st.st_mode):
                del self.pending[rel]
                self._expand(rel, path, now)
                continue
            sig = (st.st_size, st.st_mtime_ns)
            if sig != (p.size, p.mtime_ns):
                # the first look stands for the state at the event (so the two halves of a rename, one
                # event batch, settle in the same tick and reach the same scan); a change restarts the clock
                first = p.size is None
                p.size, p.mtime_ns = sig
                p.stable_since = p.last_event if first else now
                if not first or now - p.last_event < self.settle_seconds:
                    continue
            if now - max(p.last_event, p.stable_since) < self.settle_seconds:
                continue
            try:
                with open(path, "rb") as fh:
                    fh.read(1)
            except OSError as exc:  # EBUSY / EACCES while the writer holds it: retried, not quarantined
                self._keep_busy(p, exc, now)
                continue
            del self.pending[rel]
            if self._synced.get(rel) == sig:
                self.duplicates += 1
                continue
            self._inflight[rel] = sig
            out.append(rel)
        return out

    def done(self, rels: list[str], *, synced: bool, now: float) -> None:
        """The sync of ``rels`` ended: remember their signatures (``synced``) or make them pending again."""
        for rel in rels:
            sig = self._inflight.pop(rel, None)
            if not synced:
                self.pending.setdefault(rel, Pending(last_event=now - self.settle_seconds, stable_since=now))
            elif sig is None:
                self._synced.pop(rel, None)
            else:
                self._synced[rel] = sig
                self._synced.move_to_end(rel)
                while len(self._synced) > SYNCED_MEMORY:
                    self._synced.popitem(last=False)

    def clear(self) -> None:
        """Forget what is pending (the root went away: a rescan on its return sees everything)."""
        self.pending.clear()
        self._inflight.clear()

    def _keep_busy(self, p: Pending, exc: OSError, now: float) -> None:
        p.busy = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        p.stable_since = now
        self.busy += 1

    def _expand(self, rel: str, path: str, now: float) -> None:
        """A folder appeared: every file below it becomes pending (its events may predate the watch)."""
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if ignore_reason(d) is None]
            base = os.path.relpath(folder, self.root).replace(os.sep, "/")
            for name in files:
                self.note(f"{base}/{name}", now)
