"""ACLs of network shares: NFSv4 (``system.nfs4_acl``) and SMB/CIFS (``system.cifs_acl``), as readers.

A firm's share is often an NFSv4 export or an SMB share mounted on the ki host. Their mounts show a POSIX
mode mapped from the real ACL, which says too little (a Windows share's files look ``0755`` to everyone);
where the mount exposes the ACL itself as an extended attribute, :func:`network_readers` reads it instead:

* **NFSv4** (RFC 7530 §6; the Linux NFS client's ``system.nfs4_acl``, XDR: ``u32 count`` then per entry
  ``u32 type, u32 flag, u32 access_mask, opaque who<>``): ``OWNER@`` is the file's owner, ``GROUP@`` its
  group, ``EVERYONE@`` is ``*``; ``name@domain`` becomes ``user:name`` (``group:name`` with the
  IDENTIFIER_GROUP flag), a numeric who ``uid:N`` / ``gid:N``. Read is ACE4_READ_DATA; a folder is entered
  with ACE4_EXECUTE.
* **SMB** (MS-DTYP §2.4.6 self-relative SECURITY_DESCRIPTOR, the ``cifs`` client's ``system.cifs_acl``): the
  DACL's ACCESS_ALLOWED / ACCESS_DENIED entries; Everyone (S-1-1-0), Authenticated Users (S-1-5-11) and
  BUILTIN\\Users (S-1-5-32-545) are ``*``, every other SID ``sid:S-1-5-21-…`` (a directory's SIDs are what an
  identity provider hands ki as principals); a descriptor without a DACL admits everyone. Read is
  FILE_READ_DATA, GENERIC_READ or GENERIC_ALL. Folders do not narrow: Windows grants "bypass traverse
  checking" to everyone by default, so a file is opened by its own ACL wherever it lies.

Entries are evaluated in order, first match deciding, as both protocols do: an entry for a principal already
decided is dead; an ``EVERYONE``-class entry decides for everyone left and ends the list. Group membership is
not resolved here, so a deny of a principal that an earlier group entry allowed is still recorded as a deny
— stricter than the share, never looser (deny beats allow in the projection). Inherit-only entries (they
only seed new children) and audit/alarm entries are skipped.

Spec: insertion-pipeline.md "Permissions" (the projection's allow and deny lists); README "Permissions".
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

EVERYONE = "*"
NFS4_XATTR = "system.nfs4_acl"
CIFS_XATTR = "system.cifs_acl"
READ, ENTER = "read", "enter"

_NFS4_ALLOW, _NFS4_DENY = 0, 1
_NFS4_INHERIT_ONLY, _NFS4_GROUP = 0x08, 0x40
_NFS4_BITS = {READ: 0x1, ENTER: 0x20}  # ACE4_READ_DATA, ACE4_EXECUTE
_SMB_ALLOW, _SMB_DENY = 0x00, 0x01
_SMB_INHERIT_ONLY = 0x08
_SMB_DACL_PRESENT = 0x0004
_SMB_READ = 0x1 | 0x80000000 | 0x10000000  # FILE_READ_DATA | GENERIC_READ | GENERIC_ALL
_SMB_EVERYONE = frozenset({"S-1-1-0", "S-1-5-11", "S-1-5-32-545"})
_SMB_CREATOR = frozenset({"S-1-3-0", "S-1-3-1"})  # CREATOR OWNER / GROUP: templates for children only


@dataclass(frozen=True)
class Readers:
    """Who may (``allow``) and who may never (``deny``) read or enter a path; ``*`` in ``allow``: everyone
    not denied. ``source``: ``nfs4`` or ``smb``, for messages."""

    allow: frozenset[str]
    deny: frozenset[str]
    source: str


def first_match(entries: list[tuple[bool, str]]) -> tuple[frozenset[str], frozenset[str]]:
    """(allow, deny) of ordered ``(allowed, principal)`` entries that concern the wanted right (module doc:
    first match decides; ``*`` decides for everyone left and ends the list)."""
    allow: set[str] = set()
    deny: set[str] = set()
    decided: set[str] = set()
    for allowed, who in entries:
        if who == EVERYONE:
            if allowed:
                allow.add(EVERYONE)
            break
        if who in decided:
            continue
        decided.add(who)
        (allow if allowed else deny).add(who)
    return frozenset(allow), frozenset(deny)


def parse_nfs4(raw: bytes) -> list[tuple[int, int, int, str]]:
    """The entries ``(type, flag, access_mask, who)`` of a ``system.nfs4_acl`` value (XDR, big endian).

    Raises: ValueError for a torn or oversized value."""
    try:
        (count,) = struct.unpack_from(">I", raw)
        if count > len(raw) // 16:
            raise ValueError(f"an NFSv4 ACL of {count} entries cannot fit {len(raw)} bytes")
        out, at = [], 4
        for _ in range(count):
            kind, flag, mask, length = struct.unpack_from(">IIII", raw, at)
            at += 16
            who = raw[at:at + length]
            if len(who) != length:
                raise ValueError("torn NFSv4 ACL entry")
            out.append((kind, flag, mask, who.decode("utf-8", "replace")))
            at += (length + 3) & ~3
    except struct.error as exc:
        raise ValueError(f"not an NFSv4 ACL: {exc}") from exc
    return out


def nfs4_readers(raw: bytes, right: str, owner: str, group: str) -> Readers:
    """:class:`Readers` of an NFSv4 ACL for ``right`` (READ or ENTER); ``owner`` / ``group``: the file's
    ``user:`` / ``group:`` principals (for OWNER@ / GROUP@). Raises: ValueError (:func:`parse_nfs4`)."""
    bit = _NFS4_BITS[right]
    entries = []
    for kind, flag, mask, who in parse_nfs4(raw):
        if kind not in (_NFS4_ALLOW, _NFS4_DENY) or flag & _NFS4_INHERIT_ONLY or not mask & bit:
            continue
        entries.append((kind == _NFS4_ALLOW, _nfs4_principal(who, bool(flag & _NFS4_GROUP), owner, group)))
    allow, deny = first_match(entries)
    return Readers(allow, deny, "nfs4")


def _nfs4_principal(who: str, is_group: bool, owner: str, group: str) -> str:
    special = {"OWNER@": owner, "GROUP@": group, "EVERYONE@": EVERYONE}
    if who in special:
        return special[who]
    name = who.split("@", 1)[0]
    if name.isdigit():
        return f"{'gid' if is_group else 'uid'}:{name}"
    return f"{'group' if is_group else 'user'}:{name}"


def sid_text(raw: bytes, at: int) -> tuple[str, int]:
    """The SID at ``raw[at:]`` as ``S-1-5-21-…`` and its length in bytes (MS-DTYP §2.4.2.2).

    Raises: ValueError for a torn SID."""
    try:
        revision, count = raw[at], raw[at + 1]
        authority = int.from_bytes(raw[at + 2:at + 8], "big")
        subs = struct.unpack_from(f"<{count}I", raw, at + 8)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"torn SID: {exc}") from exc
    return "-".join(["S", str(revision), str(authority), *map(str, subs)]), 8 + 4 * count


def smb_readers(raw: bytes) -> Readers:
    """:class:`Readers` (READ) of a self-relative SECURITY_DESCRIPTOR (``system.cifs_acl``).

    Raises: ValueError for a value that is no descriptor or a torn DACL."""
    try:
        revision, _, control, _, _, _, dacl_at = struct.unpack_from("<BBHIIII", raw)
        if revision != 1:
            raise ValueError(f"security descriptor revision {revision}")
        if not control & _SMB_DACL_PRESENT or dacl_at == 0:
            return Readers(frozenset({EVERYONE}), frozenset(), "smb")  # no DACL: no restriction
        _, _, _, count, _ = struct.unpack_from("<BBHHH", raw, dacl_at)
        entries, at = [], dacl_at + 8
        for _ in range(count):
            kind, flags, size, mask = struct.unpack_from("<BBHI", raw, at)
            if size < 8:
                raise ValueError("torn ACE")
            if kind in (_SMB_ALLOW, _SMB_DENY) and not flags & _SMB_INHERIT_ONLY and mask & _SMB_READ:
                sid, _ = sid_text(raw, at + 8)
                if sid not in _SMB_CREATOR:
                    entries.append((kind == _SMB_ALLOW, EVERYONE if sid in _SMB_EVERYONE else f"sid:{sid}"))
            at += size
    except struct.error as exc:
        raise ValueError(f"not a security descriptor: {exc}") from exc
    allow, deny = first_match(entries)
    return Readers(allow, deny, "smb")


XattrReader = Callable[[str, str], bytes]


def _getxattr(path: str, name: str) -> bytes:
    return os.getxattr(path, name, follow_symlinks=False)


def network_readers(path: str, right: str, owner: str, group: str, *, unsupported: set[str] | None = None,
                    read: XattrReader = _getxattr) -> Readers | None:
    """The :class:`Readers` of ``path`` from its NFSv4 or SMB ACL, or None when the mount exposes neither.

    Args: ``right`` READ or ENTER (an SMB folder lets everyone through: module doc); ``owner`` / ``group``
    as :func:`nfs4_readers`; ``unsupported``: attribute names this file system refused (ENOTSUP), skipped
    from then on (one set per device, kept by the caller); ``read``: how an attribute is read.
    Raises: OSError other than "no such attribute"/"not supported"; ValueError for a malformed value."""
    unsupported = set() if unsupported is None else unsupported
    for name in (NFS4_XATTR, CIFS_XATTR):
        if name in unsupported:
            continue
        try:
            raw = read(path, name)
        except OSError as exc:
            if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
                unsupported.add(name)
                continue
            if exc.errno == errno.ENODATA:
                continue
            raise
        if name == NFS4_XATTR:
            return nfs4_readers(raw, right, owner, group)
        return smb_readers(raw) if right == READ else Readers(frozenset({EVERYONE}), frozenset(), "smb")
    return None
