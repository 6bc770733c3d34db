"""The local-folder source connector: list, filter, stream.

Spec: insertion-pipeline.md "Fetch"; DESIGN.md "Outages are not the file's fault" and "Deletion
confirmations". Editor lock files, temp files and partial uploads are never documents (case
R09); a missing or unreadable root is :class:`ki.core.errors.SourceUnavailable`. Outages and names:

* a listing says which folders it read (:class:`Listing`): a folder that cannot be read, or an
  entry that cannot be examined, makes every path below it *unsure*, so only a successful listing
  of the parent can report a file missing (:meth:`Listing.reports_missing`);
* FIFOs, sockets, devices, symlinks leaving the root, broken symlinks and symlink loops are
  skipped with a reason (:data:`SKIP_REASONS`), never silently; symlinks that stay inside the
  root are followed;
* names that are not valid UTF-8 are kept losslessly (:mod:`ki.adapters.sources.names`);
* a fetch failure is diagnosed (:meth:`LocalFolderConnector.diagnose`): the root and the file's
  folder are checked again, so an outage is never blamed on the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ki.adapters.sources.names import display_form, os_name
from ki.core.errors import SourceEscaped, SourceReadDenied, SourceReadFailed, SourceUnavailable

IGNORED_NAMES = frozenset({"thumbs.db", "desktop.ini", ".ds_store"})
IGNORED_SUFFIXES = (".tmp", ".part", ".filepart", ".crdownload", ".partial", ".download")

#: Opens of a file reported missing while its root and folder are present, before it is blamed.
OPEN_ATTEMPTS = 3

#: Why a listing skipped an entry (``SkippedEntry.reason``; the scan summary counts them).
SKIP_REASONS = ("fifo", "socket", "device", "symlink_outside_root", "broken_symlink", "symlink_loop",
                "unreadable_folder", "unreadable_entry", "name_collision")


def ignore_reason(name: str) -> str | None:
    """Why a file or folder name is never a document, or None when it may be one (case R09):

    ``editor_lock`` (``~$*`` Word owner files, ``.~lock.*#`` LibreOffice, ``.*#``), ``temp_file``
    (``~WRL*``, ``*.tmp``), ``partial_upload`` (``*.part``, ``*.filepart``, ``*.crdownload``, ``*.partial``,
    ``*.download``), ``system_file`` (``Thumbs.db``, ``desktop.ini``, ``.DS_Store``), ``hidden`` (other dot-files).
    """
    lower = name.lower()
    if lower.startswith(("~$", ".~lock.")) or (lower.startswith(".") and lower.endswith("#")):
        return "editor_lock"
    if lower.startswith("~wrl") or lower.endswith(".tmp"):
        return "temp_file"
    if lower.endswith(IGNORED_SUFFIXES):
        return "partial_upload"
    if lower in IGNORED_NAMES:
        return "system_file"
    if lower.startswith("."):
        return "hidden"
    return None


def is_ignored_name(name: str) -> bool:
    """True for names that are never documents (:func:`ignore_reason` names one)."""
    return ignore_reason(name) is not None


@dataclass(frozen=True)
class ListedFile:
    """One candidate document.

    Attributes:
        external_id: path relative to the root (``/`` separators), display form.
        size / mtime_ns: from the listing (bytes, nanoseconds).
        raw: the path's bytes when it is not valid UTF-8 (:mod:`ki.adapters.sources.names`), else None.
    """

    external_id: str
    size: int
    mtime_ns: int
    raw: bytes | None = None


@dataclass(frozen=True)
class SkippedEntry:
    """An entry a listing did not take: its relative path (display form), reason, and detail."""

    path: str
    reason: str
    detail: str = ""


@dataclass
class Listing:
    """What one listing of a source saw.

    Attributes:
        files: the candidate documents, by external id.
        skipped: entries not taken, each with a :data:`SKIP_REASONS` reason.
        folders_listed: relative folders (display form, ``""`` = the root) read successfully.
        unsure: relative paths (folders that could not be read, entries that could not be
            examined) below which nothing can be reported missing.
        scope: for a scoped listing (``scan(under=...)``), the relative paths it was asked for
            (display form); None for a listing of the whole root.
    """

    files: list[ListedFile] = field(default_factory=list)
    skipped: list[SkippedEntry] = field(default_factory=list)
    folders_listed: set[str] = field(default_factory=set)
    unsure: set[str] = field(default_factory=set)
    scope: set[str] | None = None
    _ids: set[str] = field(default_factory=set, repr=False)

    def covers(self, external_id: str) -> bool:
        """True when this listing speaks for ``external_id``: a full listing speaks for every path; a
        scoped one (:attr:`scope`: the paths it was asked for) for those paths and what is below them."""
        if self.scope is None:
            return True
        parts = external_id.split("/")
        return any("/".join(parts[:n]) in self.scope for n in range(1, len(parts) + 1))

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[ListedFile]:
        return iter(self.files)

    def add(self, f: ListedFile) -> None:
        """Take a file; a second file with the same display form (a valid name that spells another's
        escaped bytes) is skipped as ``name_collision``, the first one stays."""
        if f.external_id in self._ids:
            self.skip(f.external_id, "name_collision", "another file's name reads the same when shown escaped",
                      unsure=True)
            return
        self._ids.add(f.external_id)
        self.files.append(f)

    def skip(self, rel: str, reason: str, detail: str = "", *, unsure: bool = False) -> None:
        """Record a skipped entry (``unsure``: nothing below it may count as missing)."""
        self.skipped.append(SkippedEntry(rel, reason, detail))
        if unsure:
            self.unsure.add(rel)

    def reports_missing(self, external_id: str) -> bool:
        """True when this listing proves ``external_id`` absent: the path itself and none of its
        folders is unsure, so a successful listing of its folder (or of the folder where its path
        ends) did not contain it. DESIGN.md "Deletion confirmations"."""
        parts = external_id.split("/")
        return not any("/".join(parts[:n]) in self.unsure for n in range(1, len(parts) + 1))


class _PathEntry:
    """The part of :class:`os.DirEntry` that :meth:`LocalFolderConnector._take` uses, for a path."""

    def __init__(self, path: str):
        self.path = path

    def is_symlink(self) -> bool:
        return os.path.islink(self.path)

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return os.stat(self.path, follow_symlinks=follow_symlinks)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


_SPECIAL = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"))


def _special_reason(mode: int) -> str:
    for test, reason in _SPECIAL:
        if test(mode):
            return reason
    return "device"


def permission_evidence(path: Path, shown: str) -> dict:
    """What a scan compares to see a file's permissions change: ``path`` (``shown``), ``mode`` (octal text),
    ``uid``, ``gid`` and ``ctime_ns`` (``stat``; just ``{"path"}`` when it cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"path": shown}
    return {"path": shown, "mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid, "gid": st.st_gid,
            "ctime_ns": st.st_ctime_ns}


class LocalFolderConnector:
    """Reads a folder tree. ``root`` must be an absolute path."""

    kind = "local"

    def __init__(self, root: str | Path, config: dict | None = None):
        self.root = Path(root)
        self.config = config or {}

    def check_root(self) -> None:
        """Raise SourceUnavailable when the root is missing, not a folder, or unreadable."""
        self._check_folder(self.root, what="source root")

    @staticmethod
    def _check_folder(folder: Path, *, what: str) -> None:
        try:
            if not folder.is_dir():
                raise SourceUnavailable(f"{what} {folder} is missing or not a folder",
                                        infrastructure=f"{what} missing: {folder}")
            with os.scandir(folder):
                pass
        except PermissionError as exc:
            raise SourceUnavailable(f"{what} {folder} is unreadable: {exc}",
                                    infrastructure=f"{what} unreadable: {folder}") from exc
        except OSError as exc:
            if isinstance(exc, SourceUnavailable):
                raise
            raise SourceUnavailable(f"{what} {folder} cannot be listed: {exc}",
                                    infrastructure=f"{what} unreadable: {folder}") from exc

    def scan(self, under: Collection[str] | None = None) -> Listing:
        """Every candidate document below the root (ignored names and hidden folders skipped).

        ``under``: list only these OS-given relative paths (``/`` separators; files, and the trees of
        folders), as the watcher does for the changes it saw; the listing's
        :attr:`Listing.scope` then says which known documents it speaks for. None: the whole root.

        Raises SourceUnavailable when the root itself is unavailable (before or during the
        listing). A sub-folder that cannot be read is recorded (``unreadable_folder``, unsure), as
        is every other entry that is not a regular file or folder inside the root.
        """
        self.check_root()
        root_real = os.path.realpath(self.root)
        listing = Listing()
        top = os.stat(self.root)
        chain = frozenset({(top.st_dev, top.st_ino)})
        stack: list[tuple[str, str, frozenset[tuple[int, int]]]] = []
        if under is None:
            stack.append(("", str(self.root), chain))
        else:
            listing.scope = set()
            for rel in sorted({r.strip("/") for r in under} - {""}):
                self._take_path(rel, chain, root_real, listing, stack)
        while stack:
            rel, folder, chain = stack.pop()
            shown = display_form(rel)[0]
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError as exc:
                if not rel:
                    raise SourceUnavailable(f"source root {self.root} cannot be listed: {exc}",
                                            infrastructure=f"source root unreadable: {self.root}") from exc
                listing.skip(shown, "unreadable_folder", exc.strerror or str(exc), unsure=True)
                continue
            listing.folders_listed.add(shown)
            for entry in entries:
                if is_ignored_name(entry.name):
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    self._take(entry, child, chain, root_real, listing, stack)
                except OSError as exc:  # vanished or unreadable while examined: unsure, never missing
                    listing.skip(display_form(child)[0], "unreadable_entry", exc.strerror or str(exc), unsure=True)
        self.check_root()  # a share that went away during the listing: nothing of it may count
        listing.files.sort(key=lambda f: f.external_id)
        return listing

    def _take_path(self, rel: str, chain: frozenset[tuple[int, int]], root_real: str, listing: Listing,
                   stack: list) -> None:
        """Examine one relative path of a scoped listing: it joins the scope; a file is listed, a folder
        pushed; an absent path is proven absent only when its nearest present folder can be listed."""
        shown = display_form(rel)[0]
        if any(is_ignored_name(part) for part in rel.split("/")):
            return
        listing.scope.add(shown)
        path = os.path.join(self.root, rel)
        try:
            os.lstat(path)
        except FileNotFoundError:
            folder = os.path.dirname(path)
            while not os.path.isdir(folder) and _inside(folder, str(self.root)) and folder != str(self.root):
                folder = os.path.dirname(folder)
            try:
                with os.scandir(folder):
                    pass
            except OSError as exc:
                listing.skip(shown, "unreadable_folder", exc.strerror or str(exc), unsure=True)
            return
        except OSError as exc:
            listing.skip(shown, "unreadable_entry", exc.strerror or str(exc), unsure=True)
            return
        self._take(_PathEntry(path), rel, chain, root_real, listing, stack)

    @staticmethod
    def _take(entry: os.DirEntry, rel: str, chain: frozenset[tuple[int, int]], root_real: str, listing: Listing,
              stack: list) -> None:
        """Examine one entry: a file is listed, a folder pushed, anything else skipped with a reason."""
        shown, raw = display_form(rel)
        if entry.is_symlink():
            try:
                target = os.path.realpath(entry.path, strict=True)
            except FileNotFoundError:
                listing.skip(shown, "broken_symlink", os.readlink(entry.path))
                return
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    listing.skip(shown, "symlink_loop", os.readlink(entry.path))
                    return
                raise
            if not _inside(target, root_real):
                listing.skip(shown, "symlink_outside_root", os.fsdecode(target))
                return
            st = os.stat(entry.path)
        else:
            st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in chain:
                listing.skip(shown, "symlink_loop", "points at a folder above it")
                return
            stack.append((rel, entry.path, chain | {key}))
        elif stat.S_ISREG(st.st_mode):
            listing.add(ListedFile(shown, st.st_size, st.st_mtime_ns, raw))
        else:
            listing.skip(shown, _special_reason(st.st_mode))

    def path_of(self, external_id: str, raw: bytes | None = None) -> Path:
        """Absolute path of an object (``raw``: its stored bytes when its name is not UTF-8).

        Raises SourceEscaped for an id that resolves outside the root (e.g. a symlink retargeted
        since the scan)."""
        path = (self.root / os_name(external_id, raw)).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise SourceEscaped(f"{external_id!r} resolves outside the source root {self.root} (to {path})")
        return path

    def diagnose(self, external_id: str, raw: bytes | None, exc: OSError) -> Exception:
        """The classified error for a failed open or read of a file.

        The root and the file's folder are checked again first: either missing or unreadable is an
        outage (SourceUnavailable). Then: permission denied on the file → SourceReadDenied (a
        source fault retried as an outage, released when a rescan finds it readable); the file gone
        while its folder is present → FileNotFoundError (deterministic, the spec's rule); any
        other I/O error → SourceReadFailed (an outage).
        """
        try:
            self.check_root()
            self._check_folder((self.root / os_name(external_id, raw)).parent, what="source folder")
        except SourceUnavailable as outage:
            return outage
        path = self.root / external_id
        if isinstance(exc, PermissionError):
            return SourceReadDenied(f"permission denied reading {path}: {exc.strerror}; it waits until a scan "
                                    "sees its permissions change (or finds it readable)",
                                    infrastructure=f"permission denied: {path}",
                                    details=permission_evidence(self.root / os_name(external_id, raw), str(path)))
        if isinstance(exc, FileNotFoundError):
            try:
                empty = not any(True for _ in os.scandir(self.root))
            except OSError as gone:
                return SourceUnavailable(f"source root {self.root} cannot be listed: {gone}",
                                         infrastructure=f"source root unreadable: {self.root}")
            if empty:  # an unmounted share's empty mount point
                return SourceUnavailable(f"source root {self.root} is empty while {path} is expected in it "
                                         "(an unmounted share?)", infrastructure=f"source root empty: {self.root}")
            return FileNotFoundError(exc.errno, f"{path} is gone while its folder is present", str(path))
        return SourceReadFailed(f"reading {path} failed: {exc}",
                                infrastructure=f"source read error ({errno.errorcode.get(exc.errno or 0, 'EIO')}): "
                                               f"{path}")

    def permissions_changed(self, external_id: str, raw: bytes | None, recorded: dict) -> bool:
        """Whether the file's mode, owner or ACL changed since ``recorded`` (:func:`permission_evidence` of
        when it was parked: its ``st_ctime_ns`` moves with each of them), or it is readable now."""
        now = permission_evidence(self.root / os_name(external_id, raw), "")
        keys = ("mode", "uid", "gid", "ctime_ns")
        if "ctime_ns" not in now:
            return False  # gone or unlistable: the scan's deletion rules decide
        return any(now.get(k) != recorded.get(k) for k in keys) or self.readable(external_id, raw)

    def readable(self, external_id: str, raw: bytes | None = None) -> bool:
        """True when the file can be opened for reading now (a rescan releases permission faults)."""
        try:
            with open(self.path_of(external_id, raw), "rb"):
                return True
        except (OSError, SourceEscaped):
            return False

    @contextmanager
    def fetch(self, external_id: str, raw: bytes | None = None) -> Iterator[BinaryIO]:
        """Open the object's bytes for streaming.

        A failed open is diagnosed; a missing file under a present root and folder is tried again
        (:data:`OPEN_ATTEMPTS` in all: a share that flapped between the open and the checks) before
        it is blamed; a failed read is diagnosed the same way.
        Raises:
            SourceUnavailable: the root or the file's folder is missing or unreadable (an outage).
            SourceReadDenied: the file cannot be read for permissions (an outage-like source fault).
            SourceReadFailed: another I/O error (an outage).
            FileNotFoundError: the file is gone while its folder is present.
            SourceEscaped: the name now resolves outside the root.
        """
        self.check_root()
        stream = None
        for attempt in range(OPEN_ATTEMPTS):
            try:
                stream = open(self.path_of(external_id, raw), "rb")  # noqa: SIM115 - closed below
                break
            except OSError as exc:
                failure = self.diagnose(external_id, raw, exc)
                if isinstance(failure, SourceUnavailable) or not isinstance(failure, FileNotFoundError) \
                        or attempt == OPEN_ATTEMPTS - 1:
                    raise failure from exc
                # root and folder were present when checked: the share may have flapped between the
                # open and the check, so the file is not blamed before a few more tries
        assert stream is not None
        with stream:
            yield _DiagnosedStream(stream, lambda e: self.diagnose(external_id, raw, e))


class _DiagnosedStream:
    """A read-only stream whose read errors are turned into the connector's classified errors."""

    def __init__(self, stream: BinaryIO, diagnose):
        self._stream = stream
        self._diagnose = diagnose

    def read(self, size: int = -1) -> bytes:
        try:
            return self._stream.read(size)
        except OSError as exc:
            raise self._diagnose(exc) from exc
