"""Running ki as a process the kernel's permission checks apply to (the tests run as root, which reads
every file whatever its mode bits): a data directory another user can reach, and the command line that
runs as that user.

Used by the permission tests of the scan (tests/integration/test_source_faults.py, issue 14 item 4) and
of the watcher (tests/integration/test_watch_permissions.py, issue 19).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def user_context(db_url: str) -> Iterator:
    """A PipelineContext whose data directory (and ``ctx.place`` for estates) another user can reach."""
    from ki.config.loader import ProcessSettings
    from ki.domain.context import PipelineContext
    from ki.store.db import open_database

    place = Path(tempfile.mkdtemp(prefix="ki-perm-"))
    place.chmod(0o755)
    (place / "data").mkdir(mode=0o777)
    ctx = PipelineContext.open(ProcessSettings(data_dir=place / "data", database_url=db_url),
                               db=open_database(db_url, pool_size=4, migrate=False))
    ctx.place = place  # type: ignore[attr-defined]
    try:
        yield ctx
    finally:
        ctx.db.dispose()
        shutil.rmtree(place, ignore_errors=True)


def unprivileged(ctx, cmd: list[str]) -> list[str]:
    """``cmd`` as a process the kernel's permission checks apply to. As root: as the user owning the
    database's socket folder (it can reach the server; ``setpriv``, util-linux), after opening the
    data directory to it; as anyone else: unchanged."""
    if os.geteuid() != 0:
        return cmd
    from sqlalchemy.engine import make_url

    host = make_url(ctx.settings.database_url).query.get("host")
    owner = os.stat(host) if isinstance(host, str) and os.path.isdir(host) else None
    uid, gid = (owner.st_uid, owner.st_gid) if owner is not None and owner.st_uid != 0 else (65534, 65534)
    for folder, dirs, files in os.walk(ctx.settings.data_dir):
        for name in dirs + files:
            os.chmod(os.path.join(folder, name), 0o777 if name in dirs else 0o666)
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *cmd]
