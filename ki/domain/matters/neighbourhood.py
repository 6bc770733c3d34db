"""Folder listings and the rendered folder neighbourhood of a file.

Spec: insertion-pipeline.md "Classify: what the model is given" ("a rendered folder neighbourhood
(the file's own folder in full plus two levels up and down; sibling folders of the ancestor spine
appear name-only with size hints)", and ``list_folder()``) and "Relate: what the model is given"
("a complete folder listing one level above and below the file's folder"; ``list_folder(path)``,
``/`` lists the source root). Each listing runs on its own short connection.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ki.store.db import Database
from ki.store.objects import folder_entries, object_titles

MAX_FILES_PER_FOLDER = 100
MAX_FILES_OWN_FOLDER = 300

@dataclass(frozen=True)
class Entry:
    """A file in a listing: object id, path relative to the root, size (bytes), matter reference."""

    id: int
    path: str
    size: int | None
    matter: str | None


def parent_folder(folder: str) -> str:
    """``a/b/c`` → ``a/b``; ``a`` → ``""`` (the root)."""
    return folder.rsplit("/", 1)[0] if "/" in folder else ""


def folder_of(rel_path: str) -> str:
    """The folder of a file (an embedded object's: its container's)."""
    base = rel_path.split(" » ", 1)[0]
    return parent_folder(base)


def load_entries(db: Database, source_id: int, folder: str) -> list[Entry]:
    """Every live top-level file below ``folder`` (``""``: the whole source)."""
    prefix = folder.strip("/") + "/" if folder.strip("/") else ""
    with db.engine.connect() as conn:
        rows = folder_entries(conn, source_id, prefix)
    return [Entry(r.id, r.external_id, r.size, r.reference) for r in rows]


def add_titles(db: Database, views: list[dict[str, Any]]) -> list[str]:
    """Fill ``title`` into the listed files of ``views`` (one query); returns the titles in listing order."""
    files = [f for v in views for f in v.get("files", [])]
    if not files:
        return []
    with db.engine.connect() as conn:
        titles = object_titles(conn, [f["id"] for f in files])
    for f in files:
        f["title"] = titles.get(f["id"])
    return [t for t in (titles.get(f["id"]) for f in files) if t]


class Tree:
    """Files grouped by folder, with recursive counts."""

    def __init__(self, entries: list[Entry]):
        self.files: dict[str, list[Entry]] = defaultdict(list)
        self.children: dict[str, set[str]] = defaultdict(set)
        self.counts: dict[str, int] = defaultdict(int)
        for e in entries:
            folder = parent_folder(e.path)
            self.files[folder].append(e)
            f = folder
            while True:
                self.counts[f] += 1
                if not f:
                    break
                up = parent_folder(f)
                self.children[up].add(f)
                f = up

    def view(self, folder: str, *, max_files: int = MAX_FILES_PER_FOLDER, list_files: bool = True) -> dict[str, Any]:
        """One folder: its files (id, name, size, title to fill, matter) and subfolders (name, files_total)."""
        files = sorted(self.files.get(folder, []), key=lambda e: e.path)
        out: dict[str, Any] = {"folder": folder or "/", "files_total": len(files),
                               "subfolders": [{"name": sub.rsplit("/", 1)[-1], "files_total": self.counts[sub]}
                                              for sub in sorted(self.children.get(folder, ()))]}
        if list_files:
            out["files"] = [{"id": e.id, "name": e.path.rsplit("/", 1)[-1], "size": e.size, "title": None,
                             "matter": e.matter} for e in files[:max_files]]
            out["files_listed"] = min(len(files), max_files)
        return out


def list_folder(db: Database, source_id: int, folder: str) -> dict[str, Any]:
    """One folder of the source (``/`` or ``""``: the root), files and subfolders with exact totals.

    Raises: LookupError when the folder holds no files at all.
    """
    folder = folder.strip().strip("/")
    tree = Tree(load_entries(db, source_id, folder))
    if folder and not tree.counts.get(folder):
        raise LookupError(f"no folder {folder!r} in this source (use list_folder('/') for the root)")
    view = tree.view(folder, max_files=MAX_FILES_OWN_FOLDER)
    add_titles(db, [view])
    for f in view.get("files", []):
        f.pop("id", None)
    return view


def neighbourhood(db: Database, source_id: int, rel_path: str, *, up: int = 2, down: int = 2) -> dict[str, Any]:
    """The file's folder in full, ``up`` ancestor levels (their other subfolders name-only with sizes) and
    ``down`` levels of subfolders.

    Returns ``{"file", "folder", "above": [views, outermost first], "own": view, "below": [views]}`` and
    ``"titles"``: titles of converted files nearby (own folder first), for the prompt.
    """
    folder = folder_of(rel_path)
    top = folder
    for _ in range(up):
        if not top:
            break
        top = parent_folder(top)
    tree = Tree(load_entries(db, source_id, top))
    above = []
    f = folder
    for _ in range(up):
        if not f:
            break
        f = parent_folder(f)
        above.append(tree.view(f, list_files=True, max_files=MAX_FILES_PER_FOLDER))
    above.reverse()
    below = []
    frontier = [folder]
    for _ in range(down):
        nxt = []
        for g in frontier:
            for sub in sorted(tree.children.get(g, ())):
                below.append(tree.view(sub))
                nxt.append(sub)
        frontier = nxt
    own = tree.view(folder, max_files=MAX_FILES_OWN_FOLDER)
    titles = add_titles(db, [own, *below, *above])
    for v in (own, *below, *above):
        for f in v.get("files", []):
            f.pop("id", None)
    return {"file": rel_path, "folder": folder or "/", "above": above, "own": own, "below": below,
            "titles": list(dict.fromkeys(titles))[:200]}
