"""Permissions read from the share: POSIX owner, group, mode and ACLs of a local folder's files.

README "Permissions" ("Permissions from the share"): a local-folder source reads who may see a file from
the file system by default (``source.config["permissions"]`` ``"share"``; ``"public"`` opens the source to
every principal, the old default). A file's readers are

* its owner ``user:NAME`` when the owner may read it, its group ``group:NAME`` when the group may;
* ``*`` (every principal) when others may read it (mode ``o+r``);
* with a POSIX access ACL (``system.posix_acl_access``), every named user and group whose entry grants
  read after the ACL's mask (the owning group's entry too, masked);

and the folders between the source root and the file must let the reader through (execute permission,
from their mode and access ACL): a folder that others cannot enter narrows ``*`` to the principals it
lets through, and a file's named readers to those the folder lets through too (compared by name: group
membership is not resolved). The root itself is the operator's choice and is not checked. Files created
in a folder with a default ACL (``setfacl -d``) get it as their access ACL from the kernel, so default
ACLs take effect through the files. Unknown ids become ``uid:N`` / ``gid:N``. Where the mount exposes an
NFSv4 or SMB ACL (``system.nfs4_acl``, ``system.cifs_acl``), that ACL is read instead of the mapped mode,
with its denies (:mod:`ki.domain.access.network_acls`).

The ACL's extended attribute is parsed here (``struct posix_acl_xattr_header`` + entries, little endian;
linux/posix_acl_xattr.h): no library, no licence question.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
import struct
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ki.core.errors import AclReadError
from ki.domain.access.network_acls import ENTER, READ, network_readers
from ki.domain.access.projection import EVERYONE, GrantLevel

#: ``source.config["permissions"]``: read from the share (the default), or open to every principal; a
#: source without the key whose configuration names ``allowed_principals`` keeps those grants alone
#: (``configured``: it never was open to everyone).
SHARE, PUBLIC, CONFIGURED = "share", "public", "configured"
MODELS = (SHARE, PUBLIC)
ACCESS_XATTR = "system.posix_acl_access"
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_READ, _EXEC = 4, 1


def permission_model(config: dict) -> str:
    """The source's permission model: its ``permissions`` key (``share`` or ``public``); without one,
    ``configured`` when the configuration names ``allowed_principals``, else ``share``."""
    if config.get("permissions") in MODELS:
        return str(config["permissions"])
    return CONFIGURED if "allowed_principals" in config else SHARE


@lru_cache(maxsize=4096)
def user_principal(uid: int) -> str:
    """``user:NAME`` of a uid (``uid:N`` when the system does not know it)."""
    try:
        return f"user:{pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid:{uid}"


@lru_cache(maxsize=4096)
def group_principal(gid: int) -> str:
    """``group:NAME`` of a gid (``gid:N`` when the system does not know it)."""
    try:
        return f"group:{grp.getgrgid(gid).gr_name}"
    except KeyError:
        return f"gid:{gid}"


def parse_acl(raw: bytes) -> list[tuple[int, int, int]]:
    """The entries ``(tag, perm, id)`` of a ``system.posix_acl_*`` attribute value.

    Raises: ValueError for a value of another version or a torn entry."""
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != 2 or (len(raw) - 4) % 8:
        raise ValueError("not a POSIX ACL (version 2) attribute")
    return [struct.unpack_from("<HHI", raw, 4 + 8 * i) for i in range((len(raw) - 4) // 8)]


def _acl(path: Path) -> list[tuple[int, int, int]] | None:
    try:
        raw = os.getxattr(path, ACCESS_XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise
    return parse_acl(raw)


def holders(path: Path, bit: int, *, unsupported: set[str] | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """Who holds permission ``bit`` (4 read, 1 execute) on ``path`` and who is denied it: (principals or
    ``{"*"}`` for others, denied principals). The denies come only from an NFSv4 or SMB ACL.

    Args: ``unsupported``: network-ACL attribute names this file system refused (kept per scan).
    Raises: OSError when the path cannot be stat'ed or its ACL read; ValueError for a malformed ACL."""
    st = os.lstat(path)
    network = network_readers(str(path), READ if bit == _READ else ENTER, user_principal(st.st_uid),
                              group_principal(st.st_gid), unsupported=unsupported)
    if network is not None:
        return network.allow, network.deny
    return _posix_holders(path, st, bit), frozenset()


def _posix_holders(path: Path, st: os.stat_result, bit: int) -> frozenset[str]:
    mode = stat.S_IMODE(st.st_mode)
    if mode & bit:  # others
        return frozenset({EVERYONE})
    out: set[str] = set()
    if mode & (bit << 6):
        out.add(user_principal(st.st_uid))
    entries = _acl(path)
    if entries is None:
        if mode & (bit << 3):
            out.add(group_principal(st.st_gid))
        return frozenset(out)
    mask = next((perm for tag, perm, _ in entries if tag == _MASK), 7)
    for tag, perm, ident in entries:
        if tag == _USER and perm & mask & bit:
            out.add(user_principal(ident))
        elif tag == _GROUP_OBJ and perm & mask & bit:
            out.add(group_principal(st.st_gid))
        elif tag == _GROUP and perm & mask & bit:
            out.add(group_principal(ident))
    return frozenset(out)


def _narrow(readers: frozenset[str], through: frozenset[str]) -> frozenset[str]:
    if EVERYONE in through:
        return readers
    if EVERYONE in readers:
        return through
    return readers & through


def share_level(root: str | Path, external_id: str, *, cache: dict | None = None) -> GrantLevel:
    """The ``share`` level of one file of a local source: its readers as the module doc says.

    Args:
        root: the source root; external_id: the file's path below it (``/`` separators).
        cache: folder → who may enter it, shared across the files of one scan or stage run.
    Raises: AclReadError (infrastructure) when the file's or a folder's permissions cannot be read.
    """
    cache = {} if cache is None else cache
    root_path = Path(root)
    parts = PurePosixPath(external_id).parts
    target = root_path.joinpath(*parts)
    try:
        unsupported = cache.setdefault(("share-unsupported", os.stat(root_path).st_dev), set())
        readers, denied = holders(target, _READ, unsupported=unsupported)
        for depth in range(1, len(parts)):
            key = ("share-x", "/".join(parts[:depth]))
            if key not in cache:
                cache[key] = holders(root_path.joinpath(*parts[:depth]), _EXEC, unsupported=unsupported)
            through, barred = cache[key]
            readers, denied = _narrow(readers, through), denied | barred
    except (OSError, ValueError) as exc:
        raise AclReadError(f"permissions of {target} cannot be read: {exc}",
                           infrastructure=f"share permissions unreadable: {target}") from exc
    return GrantLevel("share", f"share permissions of {external_id}", tuple(sorted(readers)), tuple(sorted(denied)))
