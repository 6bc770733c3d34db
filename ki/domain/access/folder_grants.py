"""Reading a connector's ACL: the local folder's per-folder grants files.

Spec: insertion-pipeline.md "Index" (the permission projection is compiled from source, project
and document grants; a failed ACL read is never read as "public" nor as "revoked": the stage fails
as infrastructure). The compilation rules are in :mod:`ki.domain.access.projection`.

The grants file
---------------
Any folder of a local-folder source (the root included) may hold a file named ``.ki-grants.json``::

    {"allow": ["group:litigation", "user:anna"], "deny": ["user:bob"], "inherit": true}

- ``allow``: principals that may see the documents in this folder and below (added to what the
  folders above allow);
- ``deny``: principals that must never see them (a deny from any level wins over every allow);
- ``inherit`` (default ``true``): ``false`` drops the allows of the project, the source and the
  folders above for this folder and below (denies from above still apply).

Every key is optional; unknown keys, non-list values, empty or non-string principals make the file
malformed. Principals are opaque strings compared exactly (``*`` means every principal). The file
itself is a dot-file, so the scan never treats it as a document.

Failure rules: a folder without a grants file adds nothing. A grants file that cannot be read,
is not valid UTF-8 JSON of the shape above, or a folder on the file's path that is missing or
unreadable raises :class:`AclReadError` (infrastructure): the document's permissions are unknown,
so it is neither published nor revoked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

from ki.core.errors import AclReadError
from ki.domain.access.projection import GrantLevel, clean_principals

GRANTS_FILE = ".ki-grants.json"
MAX_GRANTS_FILE_BYTES = 1 << 20
_KEYS = frozenset({"allow", "deny", "inherit"})


__all__ = ["GRANTS_FILE", "AclReadError", "connector_grant_levels", "local_grant_levels", "parse_grants",
           "read_folder_grants", "write_grants_file"]


def parse_grants(raw: bytes, *, where: str) -> GrantLevel:
    """Parse a grants file's bytes into a ``folder`` level.

    Raises: AclReadError for invalid UTF-8/JSON, a non-object, unknown keys or bad principals.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AclReadError(f"{where} is not valid UTF-8 JSON: {exc}", infrastructure=f"grants file malformed: {where}"
                           ) from exc
    if not isinstance(data, dict):
        raise AclReadError(f"{where} must hold a JSON object", infrastructure=f"grants file malformed: {where}")
    unknown = set(data) - _KEYS
    if unknown:
        raise AclReadError(f"{where} has unknown keys {sorted(unknown)} (allowed: allow, deny, inherit)",
                           infrastructure=f"grants file malformed: {where}")
    inherit = data.get("inherit", True)
    if not isinstance(inherit, bool):
        raise AclReadError(f"{where}: inherit must be true or false", infrastructure=f"grants file malformed: {where}")
    try:
        allow = clean_principals(data.get("allow", []), where=f"{where} allow")
        deny = clean_principals(data.get("deny", []), where=f"{where} deny")
    except ValueError as exc:
        raise AclReadError(str(exc), infrastructure=f"grants file malformed: {where}") from exc
    return GrantLevel("folder", where, allow, deny, inherit)


def read_folder_grants(folder: Path) -> GrantLevel | None:
    """The grants of one folder: None when it has no grants file.

    Raises: AclReadError when the folder is missing or unreadable, or the file cannot be read or parsed.
    """
    try:
        if not folder.is_dir():
            raise AclReadError(f"folder {folder} is missing: its grants cannot be read",
                               infrastructure=f"grants folder missing: {folder}")
        path = folder / GRANTS_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        if not path.is_file():
            raise AclReadError(f"{path} is not a regular file", infrastructure=f"grants file unreadable: {path}")
        if st.st_size > MAX_GRANTS_FILE_BYTES:
            raise AclReadError(f"{path} is larger than {MAX_GRANTS_FILE_BYTES} bytes",
                               infrastructure=f"grants file malformed: {path}")
        raw = path.read_bytes()
    except AclReadError:
        raise
    except OSError as exc:
        raise AclReadError(f"grants of {folder} cannot be read: {exc}",
                           infrastructure=f"grants file unreadable: {folder / GRANTS_FILE}") from exc
    return parse_grants(raw, where=str(path))


def local_grant_levels(root: str | Path, external_id: str, *, cache: dict[str, Any] | None = None
                       ) -> list[GrantLevel]:
    """The folder levels of a local file: the root's grants file first, then each sub-folder's.

    Args:
        root: the source root (absolute).
        external_id: the file's path relative to the root (``/`` separators).
        cache: folder → level (or None) memo shared across objects of one scan or stage run.
    Raises: AclReadError as :func:`read_folder_grants`.
    """
    cache = {} if cache is None else cache
    root_path = Path(root)
    parts = PurePosixPath(external_id).parts[:-1]
    levels: list[GrantLevel] = []
    for depth in range(len(parts) + 1):
        rel = "/".join(parts[:depth])
        if rel not in cache:
            folder = root_path.joinpath(*parts[:depth]) if depth else root_path
            cache[rel] = read_folder_grants(folder)
        level = cache[rel]
        if level is not None:
            levels.append(level)
    return levels


def connector_grant_levels(kind: str, root: str, config: dict[str, Any], external_id: str, *,
                           cache: dict[str, Any] | None = None) -> list[GrantLevel]:
    """The ACL levels the source's connector reports for one object (top-level external id): for a local
    folder, the file's permissions on the share (unless the source is ``public``;
    :mod:`ki.domain.access.share_permissions`), then its ``.ki-grants.json`` levels.

    Raises: AclReadError when the ACL cannot be read; for an unknown connector kind too (its
    grants are unknown, so nothing is published).
    """
    if kind == "local":
        from ki.domain.access.share_permissions import SHARE, permission_model, share_level

        cache = {} if cache is None else cache
        share = [share_level(root, external_id, cache=cache)] if permission_model(config) == SHARE else []
        return share + local_grant_levels(root, external_id, cache=cache)
    raise AclReadError(f"no ACL reader for source kind {kind!r}", infrastructure=f"no ACL reader for {kind}")


def write_grants_file(folder: Path, *, allow: list[str] | None = None, deny: list[str] | None = None,
                      inherit: bool = True) -> Path:
    """Write ``folder/.ki-grants.json`` atomically (tests and tools). Returns its path."""
    path = folder / GRANTS_FILE
    tmp = folder / (GRANTS_FILE + ".tmp")
    tmp.write_text(json.dumps({"allow": allow or [], "deny": deny or [], "inherit": inherit}), encoding="utf-8")
    os.replace(tmp, path)
    return path
