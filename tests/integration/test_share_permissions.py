"""Permissions read from the share: POSIX owner, group, mode and ACLs of real files — the real ``ki`` command.

The reproduction: a source without grants allowed ``*`` and ``ki insert`` said nothing
(``ki search Halvorsen --as nobody`` returned every hit). Now a local folder's files are visible to who may
read them on the share: owner and group by mode, everyone for ``o+r``, named users and groups of POSIX ACLs
(default ACLs of folders through the files the kernel gives them to), narrowed by folders others cannot
enter; unknown ids as ``uid:N``/``gid:N``. A mode change is an access-only re-index; ``--public`` opens a
source deliberately and ``ki insert`` / ``ki source list`` say which model a source uses. Users and groups
are created for the test (tests run as root); ``setfacl`` comes from .ci/install_acl.sh. Cost: ~60-120 s.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest
from sqlalchemy import text

pytestmark = pytest.mark.timeout(900)
KI = [sys.executable, "-m", "ki.cli"]


@pytest.fixture
def accounts():
    """{role: name} of two users and three groups made for this test (removed afterwards)."""
    tag = secrets.token_hex(3)
    names = {"alice": f"kia{tag}", "bob": f"kib{tag}", "team": f"kit{tag}", "partners": f"kip{tag}",
             "auditors": f"kiu{tag}"}
    for role in ("team", "partners", "auditors"):
        subprocess.run(["groupadd", names[role]], check=True)
    for role in ("alice", "bob"):
        subprocess.run(["useradd", "-M", "-N", "-g", names["team"], names[role]], check=True)
    try:
        yield names
    finally:
        for role in ("alice", "bob"):
            subprocess.run(["userdel", names[role]], check=False)
        for role in ("team", "partners", "auditors"):
            subprocess.run(["groupdel", names[role]], check=False)


def _write(path, body: str, mode: int, owner: str | int = 0, group: str | int = 0) -> None:
    path.write_text(body, encoding="utf-8")
    os.chmod(path, mode)
    import grp
    import pwd

    uid = owner if isinstance(owner, int) else pwd.getpwnam(owner).pw_uid
    gid = group if isinstance(group, int) else grp.getgrnam(group).gr_gid
    os.chown(path, uid, gid)


def test_permissions_come_from_the_share(accounts, db_url, data_dir, tmp_path, make_ctx):
    a = accounts
    root = tmp_path / "share"
    for folder in ("Offen", "Privat", "Wand", "Acl"):
        (root / folder).mkdir(parents=True)
    os.chmod(root / "Wand", 0o750)
    os.chown(root / "Wand", 0, __import__("grp").getgrnam(a["partners"]).gr_gid)
    _write(root / "Offen" / "offen.txt", "Offenkundig: ein offenes Schreiben.\n", 0o644)
    _write(root / "Privat" / "privat.txt", "Privatissime: nur für Alice und das Team.\n", 0o640, a["alice"], a["team"])
    _write(root / "Wand" / "wand.txt", "Wandschrank: hinter der Wand der Partner.\n", 0o644)
    _write(root / "Offen" / "bob.txt", "Bobtail: eine Notiz nur für Bob.\n", 0o600)
    subprocess.run(["setfacl", "-m", f"u:{a['bob']}:r", str(root / "Offen" / "bob.txt")], check=True)
    subprocess.run(["setfacl", "-d", "-m", f"g:{a['auditors']}:r", str(root / "Acl")], check=True)
    _write(root / "Acl" / "acl.txt", "Auditorium: für die Prüfer.\n", 0o640)  # inherits the default ACL
    _write(root / "Offen" / "fremd.txt", "Fremdling: gehört niemandem, den das System kennt.\n", 0o640, 54321, 54322)
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}

    def ki(*args: str, code: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([*KI, *args], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == code, proc.stderr[-2000:]
        return proc

    inserted = ki("insert", str(root))
    assert "1 of 6 indexed documents are readable by everyone" in inserted.stderr, inserted.stderr
    ctx = make_ctx(workers=2)

    def found(word: str, *principals: str) -> bool:
        """``ki search WORD --as P…`` in this process (the command's own search; a ``ki`` process per
        query would cost ~10 s each here), the local operator without principals."""
        from ki.adapters.search.search import search

        page = search(ctx.db, word, principals=list(principals) or None, operator=not principals, mode="lexical")
        return bool(page.hits)  # each word is in one file only

    who = {"alice": f"user:{a['alice']}", "bob": f"user:{a['bob']}", "team": f"group:{a['team']}",
           "partners": f"group:{a['partners']}", "auditors": f"group:{a['auditors']}"}
    assert found("Offenkundig", "user:nobody")
    assert not found("Privatissime", "user:nobody") and found("Privatissime", who["alice"])
    assert found("Privatissime", "user:someone", who["team"])
    assert not found("Wandschrank", "user:nobody") and found("Wandschrank", "user:x", who["partners"])
    assert not found("Bobtail", who["alice"]) and found("Bobtail", who["bob"])
    assert not found("Auditorium", "user:nobody") and found("Auditorium", "user:y", who["auditors"])
    assert found("Fremdling", "uid:54321") and found("Fremdling", "gid:54322") and not found("Fremdling", "user:z")
    assert found("Privatissime")  # the local operator (no --as) sees everything
    listed = json.loads(ki("source", "list", "--json").stdout)
    assert [s["permissions"] for s in listed] == ["share"]

    # a mode change is an access-only re-index: nothing re-converted, the permission fields rewritten
    with ctx.db.engine.connect() as conn:
        oid = conn.execute(text("SELECT id FROM source_object WHERE external_id = 'Offen/offen.txt'")).scalar_one()
        before = conn.execute(text("SELECT stage, attempts, updated_at FROM processing_state "
                                   "WHERE source_object_id = :o AND stage = 'convert'"), {"o": oid}).one()
        version = conn.execute(text("SELECT max(access_version) FROM chunk WHERE source_object_id = :o"),
                               {"o": oid}).scalar_one()
    os.chmod(root / "Offen" / "offen.txt", 0o600)
    again = ki("insert", str(root))
    assert "none is open to everyone" in again.stderr, again.stderr
    assert not found("Offenkundig", "user:nobody") and found("Offenkundig", "user:root")
    with ctx.db.engine.connect() as conn:
        after = conn.execute(text("SELECT stage, attempts, updated_at FROM processing_state "
                                  "WHERE source_object_id = :o AND stage = 'convert'"), {"o": oid}).one()
        assert after == before  # not re-converted
        assert conn.execute(text("SELECT max(access_version) FROM chunk WHERE source_object_id = :o"),
                            {"o": oid}).scalar_one() > version
        entries = conn.execute(text("SELECT count(*) FROM work_item_attempt a JOIN processing_state ps "
                                    "ON ps.id = a.processing_state_id WHERE ps.source_object_id = :o "
                                    "AND ps.stage = 'index'"), {"o": oid}).scalar_one()
        assert entries >= 2
    # --public opens it deliberately, loudly; --share closes it again
    public = ki("insert", "--public", str(root))
    assert "is public" in public.stderr and found("Privatissime", "user:nobody")
    assert [s["permissions"] for s in json.loads(ki("source", "list", "--json").stdout)] == ["public"]
    assert "public (everyone)" in ki("source", "list").stdout
    ki("insert", "--share", str(root))
    assert not found("Privatissime", "user:nobody")
