"""An OOXML package (DOCX, PPTX, XLSX): zip access with size caps, part names, relationships.

Spec: conversion.md section 6 (parser settings: ``resolve_entities=False``, ``no_network=True``,
``huge_tree=False``; each member's uncompressed size capped against zip bombs).
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from dataclasses import dataclass
from urllib.parse import unquote

from lxml import etree

from ki.adapters.convert.ooxml_ns import split_tag
from ki.core.errors import UnsupportedDocument

MAX_MEMBER_BYTES = 200 * 1024 * 1024  # uncompressed size cap per zip member (zip-bomb guard)
MAX_TOTAL_BYTES = 512 * 1024 * 1024  # uncompressed bytes read from one package


@dataclass(frozen=True)
class Relationship:
    """One ``<Relationship>`` of a ``.rels`` part; ``part`` is the resolved zip member name or None."""

    rid: str
    type: str
    target: str
    external: bool
    part: str | None

    @property
    def kind(self) -> str:
        """Last segment of the relationship type (``header``, ``officeDocument``, ...), Transitional or Strict."""
        return self.type.rstrip("/").rsplit("/", 1)[-1]


class OoxmlPackage:
    """Read access to an OOXML zip (DOCX, PPTX, XLSX) with size caps, case-insensitive part names and relationships.

    Args:
        data: the package bytes; filename: used in messages.
    Raises:
        UnsupportedDocument: ``corrupt`` when the bytes are not a readable zip.
    """

    def __init__(self, data: bytes, filename: str):
        self.filename = filename
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
            raise UnsupportedDocument(f"{filename}: not a readable zip package ({exc})", reason="corrupt") from exc
        self.names = {info.filename.lower(): info for info in infos}
        self._read_total = 0
        self._types: dict[str, str] | None = None
        self.warnings: list[str] = []

    def has(self, name: str) -> bool:
        """Whether the package holds part ``name`` (case-insensitive)."""
        return name.lower() in self.names

    def read(self, name: str) -> bytes:
        """Member bytes; raises ``UnsupportedDocument(corrupt)`` beyond the caps or on a damaged member."""
        info = self.names[name.lower()]
        if info.file_size > MAX_MEMBER_BYTES:
            raise UnsupportedDocument(
                f"{self.filename}: member {name} declares {info.file_size} bytes uncompressed "
                f"(cap {MAX_MEMBER_BYTES}); refusing a possible zip bomb",
                reason="corrupt",
            )
        try:
            with self.zip.open(info) as fh:
                blob = fh.read(MAX_MEMBER_BYTES + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError) as exc:
            raise UnsupportedDocument(f"{self.filename}: member {name} unreadable ({exc})", reason="corrupt") from exc
        self._read_total += len(blob)
        if len(blob) > MAX_MEMBER_BYTES or self._read_total > MAX_TOTAL_BYTES:
            raise UnsupportedDocument(
                f"{self.filename}: member {name} inflates beyond the size cap; refusing a possible zip bomb",
                reason="corrupt",
            )
        return blob

    def xml(self, name: str) -> etree._Element:
        """Parse a member with entity resolution and network access disabled (may raise XMLSyntaxError)."""
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)
        return etree.fromstring(self.read(name), parser)

    def optional_xml(self, name: str | None) -> etree._Element | None:
        """Parse a secondary part; a missing or malformed one becomes a warning and None."""
        if not name or not self.has(name):
            return None
        try:
            return self.xml(name)
        except etree.XMLSyntaxError as exc:
            self.warnings.append(f"part {name} is not well-formed XML and was skipped ({exc})")
            return None

    def rels(self, source: str) -> list[Relationship]:
        """Relationships of ``source`` (``""`` for the package); targets resolved against the source folder."""
        folder = posixpath.dirname(source)
        rels_name = posixpath.join(folder, "_rels", posixpath.basename(source) + ".rels")
        if not self.has(rels_name):
            return []
        try:
            root = self.xml(rels_name)
        except etree.XMLSyntaxError as exc:
            self.warnings.append(f"relationships part {rels_name} is not well-formed XML ({exc})")
            return []
        out = []
        for el in root:
            if split_tag(el.tag)[1] != "Relationship":
                continue
            target = el.get("Target") or ""
            external = (el.get("TargetMode") or "").lower() == "external"
            part = None
            if not external and target:
                path = unquote(target.split("#", 1)[0])
                path = path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path)
                path = posixpath.normpath(path)
                part = self.names[path.lower()].filename if self.has(path) else None
            out.append(Relationship(el.get("Id") or "", el.get("Type") or "", target, external, part))
        return out

    def content_type(self, name: str) -> str | None:
        """The part's content type from ``[Content_Types].xml`` (Override, else Default by extension), lowercase."""
        if self._types is None:
            self._types = {}
            root = self.optional_xml("[Content_Types].xml")
            for el in root if root is not None else ():
                local = split_tag(el.tag)[1]
                if local == "Override" and el.get("PartName"):
                    self._types[el.get("PartName", "").lstrip("/").lower()] = el.get("ContentType", "")
                elif local == "Default" and el.get("Extension"):
                    self._types["*." + el.get("Extension", "").lower()] = el.get("ContentType", "")
        lower = name.lstrip("/").lower()
        found = self._types.get(lower) or self._types.get("*." + posixpath.splitext(lower)[1].lstrip("."))
        return found.lower() if found else None

    def check_dangling(self) -> None:
        """Warn about every internal relationship whose target part is missing (R07: ``Target="NULL"``)."""
        for lower, info in sorted(self.names.items()):
            if not lower.endswith(".rels") or "/_rels/" not in "/" + lower:
                continue
            folder = posixpath.dirname(posixpath.dirname(info.filename))
            source = posixpath.join(folder, posixpath.basename(info.filename)[: -len(".rels")])
            for rel in self.rels(source):
                if not rel.external and rel.part is None and not rel.target.startswith("#"):
                    self.warnings.append(
                        f"dangling relationship {rel.rid} ({rel.kind}) in {info.filename}: "
                        f"target {rel.target!r} is not in the package; ignored"
                    )


def open_package(data: bytes, filename: str, legacy: str) -> OoxmlPackage:
    """The package of an XLSX/PPTX-like file, after the checks every OOXML reader makes first.

    Raises:
        UnsupportedDocument: ``empty`` (0 bytes), ``password_required`` (an encrypted package:
            :func:`ki.adapters.convert.encryption.check_password`), ``unsupported_format`` (an OLE2 file that is not
            encrypted: the legacy binary format ``legacy`` names, e.g. ``.xls``), ``corrupt`` (not a zip).
    """
    from ki.adapters.convert.encryption import check_password
    from ki.adapters.convert.formats import CFB_MAGIC

    if not data:
        raise UnsupportedDocument(f"{filename}: empty file (0 bytes)", reason="empty")
    check_password(data, filename)
    if data.startswith(CFB_MAGIC):
        raise UnsupportedDocument(f"{filename}: an OLE2 file, not an OOXML package (a legacy {legacy}?)",
                                  reason="unsupported_format", details={"container": "cfb"})
    pkg = OoxmlPackage(data, filename)
    pkg.check_dangling()
    return pkg
