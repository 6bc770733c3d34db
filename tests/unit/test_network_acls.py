"""NFSv4 and SMB ACLs read as readers (ki.domain.access.network_acls).

No NFS or SMB mount exists on the test host, so the attribute values are built here byte by byte from the
protocols' own layouts (RFC 7530 §6.2.1 XDR for ``system.nfs4_acl``; MS-DTYP §2.4.6 for the self-relative
security descriptor of ``system.cifs_acl``) and handed to the reader in place of ``getxattr``.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from ki.domain.access.network_acls import (
    CIFS_XATTR,
    ENTER,
    NFS4_XATTR,
    READ,
    network_readers,
    nfs4_readers,
    parse_nfs4,
    sid_text,
    smb_readers,
)

ALLOW, DENY, AUDIT = 0, 1, 2
READ_DATA, EXECUTE, WRITE_DATA = 0x1, 0x20, 0x2
GROUP_FLAG, INHERIT_ONLY = 0x40, 0x08


def nfs4(*aces: tuple[int, int, int, str]) -> bytes:
    """XDR of an nfsace4 array: u32 count, then type, flag, mask and the who string padded to 4 bytes."""
    out = struct.pack(">I", len(aces))
    for kind, flag, mask, who in aces:
        raw = who.encode()
        out += struct.pack(">IIII", kind, flag, mask, len(raw)) + raw + b"\0" * (-len(raw) % 4)
    return out


def sid(text: str) -> bytes:
    parts = text.split("-")
    subs = [int(p) for p in parts[3:]]
    return bytes([int(parts[1]), len(subs)]) + int(parts[2]).to_bytes(6, "big") + struct.pack(f"<{len(subs)}I", *subs)


def descriptor(*aces: tuple[int, int, int, str], dacl: bool = True) -> bytes:
    """A self-relative SECURITY_DESCRIPTOR: owner BUILTIN\\Administrators, group SYSTEM, the DACL last."""
    owner, group = sid("S-1-5-32-544"), sid("S-1-5-18")
    body = b"".join(struct.pack("<BBHI", kind, flags, 8 + len(sid(who)), mask) + sid(who)
                    for kind, flags, mask, who in aces)
    acl = struct.pack("<BBHHH", 2, 0, 8 + len(body), len(aces), 0) + body
    control = 0x8000 | (0x0004 if dacl else 0)  # SE_SELF_RELATIVE | SE_DACL_PRESENT
    owner_at = 20
    group_at = owner_at + len(owner)
    dacl_at = group_at + len(group) if dacl else 0
    return struct.pack("<BBHIIII", 1, 0, control, owner_at, group_at, 0, dacl_at) + owner + group + (
        acl if dacl else b"")


def test_nfs4_owner_group_named_and_everyone_in_order() -> None:
    raw = nfs4((ALLOW, 0, READ_DATA | WRITE_DATA, "OWNER@"), (DENY, 0, READ_DATA, "mallory@firm.example"),
               (ALLOW, GROUP_FLAG, READ_DATA, "litigation@firm.example"), (ALLOW, 0, READ_DATA, "mallory@firm.example"),
               (ALLOW, 0, WRITE_DATA, "bob@firm.example"), (ALLOW, GROUP_FLAG, READ_DATA, "1002"),
               (AUDIT, 0, READ_DATA, "EVERYONE@"), (ALLOW, INHERIT_ONLY, READ_DATA, "EVERYONE@"))
    assert [entry[3] for entry in parse_nfs4(raw)][:3] == ["OWNER@", "mallory@firm.example", "litigation@firm.example"]
    readers = nfs4_readers(raw, READ, "user:anna", "group:staff")
    assert readers.allow == {"user:anna", "group:litigation", "gid:1002"}
    assert readers.deny == {"user:mallory"}  # the later allow of mallory is dead: first match decides
    assert readers.source == "nfs4"


def test_nfs4_everyone_decides_for_everyone_left() -> None:
    raw = nfs4((DENY, 0, READ_DATA, "GROUP@"), (ALLOW, 0, READ_DATA, "EVERYONE@"), (DENY, 0, READ_DATA, "bob@x"))
    readers = nfs4_readers(raw, READ, "user:anna", "group:interns")
    assert readers.allow == {"*"} and readers.deny == {"group:interns"}
    closed = nfs4((ALLOW, 0, READ_DATA, "OWNER@"), (DENY, 0, READ_DATA, "EVERYONE@"), (ALLOW, 0, READ_DATA, "bob@x"))
    assert nfs4_readers(closed, READ, "user:anna", "group:staff").allow == {"user:anna"}
    folder = nfs4((ALLOW, 0, READ_DATA, "EVERYONE@"), (ALLOW, 0, EXECUTE, "OWNER@"))
    assert nfs4_readers(folder, ENTER, "user:anna", "group:staff").allow == {"user:anna"}


def test_nfs4_torn_values_are_refused() -> None:
    raw = nfs4((ALLOW, 0, READ_DATA, "OWNER@"))
    with pytest.raises(ValueError):
        parse_nfs4(raw[:-3])
    with pytest.raises(ValueError):
        parse_nfs4(struct.pack(">I", 1_000_000) + raw[4:])
    with pytest.raises(ValueError):
        parse_nfs4(b"\0\0")


def test_smb_dacl_allows_denies_and_well_known_sids() -> None:
    associate, intern = "S-1-5-21-3623811015-3361044348-30300820-1104", "S-1-5-21-3623811015-3361044348-30300820-1105"
    raw = descriptor((DENY, 0, 0x1, intern), (ALLOW, 0, 0x1200A9, associate), (ALLOW, 0, 0x10000000, "S-1-5-32-544"),
                     (ALLOW, INHERIT_ONLY, 0x1, "S-1-1-0"), (ALLOW, 0, 0x1, "S-1-3-0"), (ALLOW, 0, 0x2, "S-1-5-11"))
    assert sid_text(sid(associate), 0) == (associate, 28)
    readers = smb_readers(raw)
    assert readers.allow == {f"sid:{associate}", "sid:S-1-5-32-544"}
    assert readers.deny == {f"sid:{intern}"} and readers.source == "smb"
    everyone = smb_readers(descriptor((DENY, 0, 0x80000000, intern), (ALLOW, 0, 0x80000000, "S-1-5-11")))
    assert everyone.allow == {"*"} and everyone.deny == {f"sid:{intern}"}
    assert smb_readers(descriptor(dacl=False)).allow == {"*"}  # no DACL: no restriction
    assert smb_readers(descriptor()).allow == frozenset()  # an empty DACL: nobody
    with pytest.raises(ValueError):
        smb_readers(descriptor((ALLOW, 0, 0x1, associate))[:-6])


def test_network_readers_on_real_files(tmp_path: Path) -> None:
    """The attribute reader stands in for a mount's getxattr; the paths, owners and errors are real."""
    doc = tmp_path / "memo.docx"
    doc.write_bytes(b"x")
    values = {NFS4_XATTR: nfs4((ALLOW, 0, READ_DATA, "OWNER@"))}
    unsupported: set[str] = set()
    calls: list[str] = []

    def read(path: str, name: str) -> bytes:
        calls.append(name)
        os.stat(path)  # a missing file raises as getxattr would
        if name in values:
            return values[name]
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    got = network_readers(str(doc), READ, "user:anna", "group:staff", unsupported=unsupported, read=read)
    assert got is not None and got.allow == {"user:anna"}
    values.clear()
    assert network_readers(str(doc), READ, "user:anna", "group:staff", unsupported=unsupported, read=read) is None
    assert unsupported == {NFS4_XATTR, CIFS_XATTR}
    calls.clear()
    assert network_readers(str(doc), READ, "user:anna", "group:staff", unsupported=unsupported, read=read) is None
    assert calls == []  # the file system said no once: not asked again
    values[CIFS_XATTR] = descriptor((ALLOW, 0, 0x1, "S-1-5-21-1-2-3-500"))
    assert network_readers(str(doc), ENTER, "u", "g", read=read).allow == {"*"}  # SMB folders let everyone through
    with pytest.raises(FileNotFoundError):
        network_readers(str(tmp_path / "gone"), READ, "u", "g", read=read)


def test_plain_files_here_fall_back_to_posix() -> None:
    """On this host's own file system neither attribute exists: the real getxattr answers so."""
    assert network_readers(__file__, READ, "user:x", "group:y") is None
