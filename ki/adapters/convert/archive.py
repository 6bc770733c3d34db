"""ZIP archives: each member a document of its own, under the zip-bomb, traversal and encryption guards.

Spec: DESIGN.md "Converter routing" (containers) — a ``.zip`` bundle of exhibits is a container like a
mail: every member file becomes a child document (:mod:`ki.adapters.sources.children`) named by its path inside
the archive (``Anlagen/Anlage 1.pdf``); an archive inside it is a container again, to the nesting bound
of :data:`ki.adapters.convert.embedded.MAX_NESTING`. A member is refused, with a reason, never the archive:

* ``encrypted`` — the member is encrypted (ZIP's traditional or AES encryption; no password is known);
* ``too_large`` — it declares, or inflates to, more than :data:`~ki.adapters.convert.ooxml_package.MAX_MEMBER_BYTES`,
  it inflates more than :data:`MAX_RATIO` times its compressed size, or the archive's members together pass
  :data:`~ki.adapters.convert.ooxml_package.MAX_TOTAL_BYTES` (a zip bomb);
* ``unsafe_path`` — its name is absolute or climbs out of the archive (``../``), a path-traversal name;
* ``corrupt`` — its data is damaged (CRC, deflate stream) or uses a compression method not supported here.

The archive's own document (format ``zip``) is its table of contents: one line per member with its size,
refused members with their reason (``metadata["refused"]``).
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from dataclasses import dataclass

from ki.adapters.convert.model import StructuredDocument
from ki.adapters.convert.ooxml_package import MAX_MEMBER_BYTES, MAX_TOTAL_BYTES
from ki.core.errors import UnsupportedDocument

CONVERTER = "ki.zip"
CONVERTER_VERSION = "1"
#: A member inflating more than this many times its compressed size (and past 1 MiB) is a zip bomb.
MAX_RATIO = 200
#: Members listed (and extracted) per archive; more are reported as a warning.
MAX_MEMBERS = 1000


@dataclass(frozen=True)
class Member:
    """One archive member: ``path`` inside the archive, ``size`` (declared, bytes), and either its ``data`` or
    the ``refused`` reason (``encrypted``, ``too_large``, ``unsafe_path``, ``corrupt``) with ``detail``."""

    path: str
    size: int
    data: bytes | None = None
    refused: str | None = None
    detail: str = ""


def safe_member_path(name: str) -> str | None:
    """The member's path inside the archive, normalised (``\\`` as ``/``, ``./`` dropped), or None when the
    name is absolute (``/etc/passwd``, ``C:\\…``) or climbs out of the archive (``../``)."""
    path = name.replace("\\", "/")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return posixpath.join(*parts)


def _open(data: bytes, filename: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise UnsupportedDocument(f"{filename}: not a readable zip archive ({exc})", reason="corrupt") from exc


def _name(info: zipfile.ZipInfo) -> str:
    """The member name. zipfile reads a name without the UTF-8 flag as cp437; one whose bytes are valid UTF-8
    (macOS and 7-Zip write UTF-8 without setting the flag) is read as UTF-8 instead."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def read_members(data: bytes, filename: str) -> tuple[list[Member], list[str]]:
    """The file members of a zip archive in archive order (folders left out), and warnings; an accepted
    member carries its bytes, a refused one its reason (bounded as the module says).

    Raises:
        UnsupportedDocument: ``corrupt`` when the bytes are not a readable zip archive.
    """
    archive = _open(data, filename)
    warnings: list[str] = []
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if len(infos) > MAX_MEMBERS:
        warnings.append(f"only the first {MAX_MEMBERS} of {len(infos)} members were read")
    members: list[Member] = []
    total = 0
    for info in infos[:MAX_MEMBERS]:
        raw = _name(info)
        path = safe_member_path(raw)
        size = info.file_size
        if path is None:
            members.append(Member(raw, size, refused="unsafe_path", detail="absolute or climbing out of the archive"))
        elif info.flag_bits & 0x1:
            members.append(Member(path, size, refused="encrypted", detail="the member is password-protected"))
        elif size > MAX_MEMBER_BYTES or (size > 1 << 20 and size > MAX_RATIO * max(info.compress_size, 1)):
            members.append(Member(path, size, refused="too_large",
                                  detail=f"declares {size} bytes from {info.compress_size} compressed"))
        elif total + size > MAX_TOTAL_BYTES:
            members.append(Member(path, size, refused="too_large",
                                  detail=f"the archive's members pass {MAX_TOTAL_BYTES} bytes together"))
        else:
            members.append(_read(archive, info, path))
            total += len(members[-1].data or b"")
    return members, warnings


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> Member:
    """Inflate one member, never past its declared size (a lying header is a bomb, not a longer file)."""
    try:
        with archive.open(info) as fh:
            blob = fh.read(min(MAX_MEMBER_BYTES, info.file_size) + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError, ValueError) as exc:
        reason = "encrypted" if "encrypted" in str(exc).lower() else "corrupt"
        return Member(path, info.file_size, refused=reason, detail=str(exc)[:200])
    if len(blob) > info.file_size:
        return Member(path, info.file_size, refused="too_large", detail="inflates past its declared size")
    return Member(path, info.file_size, data=blob)


def convert_zip(data: bytes, filename: str) -> StructuredDocument:
    """The archive's own document: its table of contents (format ``zip``); its members are children.

    ``text``: one line per member (``path (size bytes)``; a refused one ``path: refused, reason (detail)``).
    ``metadata``: ``members`` (file members listed), ``refused`` (``[{path, reason, detail}]``).

    Raises:
        UnsupportedDocument: ``corrupt`` (not a readable zip), ``empty`` (no file member).
    """
    members, warnings = read_members(data, filename)
    if not members:
        raise UnsupportedDocument(f"{filename}: the archive holds no file", reason="empty")
    lines = [f"{m.path}: refused, {m.refused} ({m.detail})" if m.refused else f"{m.path} ({m.size} bytes)"
             for m in members]
    refused = [{"path": m.path, "reason": m.refused, "detail": m.detail} for m in members if m.refused]
    warnings += [f"member {r['path']} refused: {r['reason']} ({r['detail']})" for r in refused]
    return StructuredDocument(text="\n".join(lines) + "\n", format="zip", converter=CONVERTER,
                              converter_version=CONVERTER_VERSION, title=filename, warnings=warnings,
                              metadata={"members": len(members), "refused": refused})
