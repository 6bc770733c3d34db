"""``ki serve`` warms the search path while it starts (lexicons, lexical indexes, embedder): ``ki.log`` says
so, without a request (``ki.cli.serve._warm_search``, ``ki.adapters.search.search.warm``). ~10-30 s."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.timeout(300)


def test_serve_warms_the_search_path_at_start(db_url, data_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {"KI_DATA_DIR": str(data_dir), "KI_DATABASE_URL": db_url}
    proc = subprocess.Popen([sys.executable, "-m", "ki.cli", "serve", "--port", str(port), "--log-level", "warning"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = data_dir / "ki.log"
    try:
        deadline = time.monotonic() + 240
        while "search path warm in" not in (log.read_text(errors="replace") if log.exists() else ""):
            assert proc.poll() is None, "ki serve ended"
            assert time.monotonic() < deadline, "the search path was not warmed"
            time.sleep(0.2)
        assert "warming the search path failed" not in log.read_text(errors="replace")
    finally:
        proc.terminate()
        proc.wait(30)
