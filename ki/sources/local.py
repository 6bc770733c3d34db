"""The local-folder source connector: list, filter, stream.

Spec: insertion-pipeline.md "Fetch"; DESIGN.md "Outages are not the file's
fault". Editor lock files, temp files and partial uploads are never documents
(case R09); a missing or unreadable root is :class:`ki.errors.SourceUnavailable`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ki.errors import SourceUnavailable

IGNORED_NAMES = frozenset({"thumbs.db", "desktop.ini", ".ds_store"})
IGNORED_PREFIXES = ("~$", "~wrl", ".~lock.")
IGNORED_SUFFIXES = (".tmp", ".part", ".filepart", ".crdownload", ".partial", ".download")


def is_ignored_name(name: str) -> bool:
    """True for names that are never documents: ``~$*`` (Word owner files), ``.~lock.*#``
    (LibreOffice), ``~WRL*.tmp``, ``*.tmp``, ``*.part``, ``*.filepart``, ``*.crdownload``,
    ``Thumbs.db``, ``.DS_Store`` and other hidden dot-files."""
    lower = name.lower()
    if lower in IGNORED_NAMES or lower.startswith(IGNORED_PREFIXES) or lower.endswith(IGNORED_SUFFIXES):
        return True
    if lower.startswith(".~lock.") or (lower.startswith(".") and lower.endswith("#")):
        return True
    return lower.startswith(".")


@dataclass(frozen=True)
class ListedFile:
    """One candidate document: path relative to the root (``/`` separators), size, mtime in ns."""

    external_id: str
    size: int
    mtime_ns: int


class LocalFolderConnector:
    """Reads a folder tree. ``root`` must be an absolute path."""

    kind = "local"

    def __init__(self, root: str | Path, config: dict | None = None):
        self.root = Path(root)
        self.config = config or {}

    def check_root(self) -> None:
        """Raise SourceUnavailable when the root is missing, not a folder, or unreadable."""
        try:
            if not self.root.is_dir():
                raise SourceUnavailable(f"source root {self.root} is missing or not a folder",
                                        infrastructure=f"source root missing: {self.root}")
            with os.scandir(self.root):
                pass
        except PermissionError as exc:
            raise SourceUnavailable(f"source root {self.root} is unreadable: {exc}",
                                    infrastructure=f"source root unreadable: {self.root}") from exc
        except OSError as exc:
            if isinstance(exc, SourceUnavailable):
                raise
            raise SourceUnavailable(f"source root {self.root} cannot be listed: {exc}",
                                    infrastructure=f"source root unreadable: {self.root}") from exc

    def scan(self) -> list[ListedFile]:
        """Every candidate document below the root (ignored names and hidden folders skipped).

        Raises SourceUnavailable when the root itself is unavailable. Sub-folders that
        cannot be read are skipped (their files then count as missing only if the
        whole listing stays valid; see the deletion rule in ki.sources.scan).
        """
        self.check_root()
        out: list[ListedFile] = []
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                if folder == self.root:
                    raise
                continue
            for entry in entries:
                if is_ignored_name(entry.name):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        rel = Path(entry.path).relative_to(self.root).as_posix()
                        out.append(ListedFile(rel, st.st_size, st.st_mtime_ns))
                except OSError:
                    continue
        out.sort(key=lambda f: f.external_id)
        return out

    def path_of(self, external_id: str) -> Path:
        """Absolute path of an object; refuses ids that escape the root."""
        path = (self.root / external_id).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"{external_id!r} escapes the source root")
        return path

    @contextmanager
    def fetch(self, external_id: str) -> Iterator[BinaryIO]:
        """Open the object's bytes for streaming.

        Raises:
            SourceUnavailable: the root is missing or unreadable (an outage).
            FileNotFoundError: the file is gone while the root is present.
        """
        self.check_root()
        path = self.path_of(external_id)
        with open(path, "rb") as stream:
            yield stream
