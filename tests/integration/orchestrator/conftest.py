"""Fixtures of the engine-backed Hatchet tests: one hatchet-lite for the session, a namespace per test.

One engine per test session (``hatchet_engine``: its own embedded PostgreSQL, ~23 connections); each
test gets its own ki database (``make_ctx``) and its own Hatchet namespace (``hx``), and runs its
workers as subprocesses (``tests/helpers/hatchet_harness.py``). The engine binary comes from
``.ci/install_hatchet.sh`` (``scripts/test.sh`` runs it): without it the tests skip with the reason
printed, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.helpers.hatchet_engine import hatchet_binary, hatchet_database_url, start_hatchet_engine
from tests.helpers.hatchet_harness import ENGINE_TUNING, new_harness


@pytest.fixture(scope="session")
def hatchet_engine():
    """One hatchet-lite for the whole session, on its own embedded PostgreSQL (``KI_KEEP_HATCHET_DIR=1``
    keeps its directory, with ``engine/engine.log``, for a post-mortem)."""
    try:
        hatchet_binary()
    except FileNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"engine-backed tests must not skip in CI: {exc}")
        print(f"\nSKIP hatchet tests: {exc}")
        pytest.skip(str(exc))
    from ki.store.db import embedded_server_uri, stop_embedded_server

    base = Path(tempfile.mkdtemp(prefix="ki-hatchet-"))
    os.chmod(base, 0o755)
    pgdata = base / "pg"
    uri = embedded_server_uri(pgdata)
    engine = start_hatchet_engine(base / "engine", hatchet_database_url(uri, "hatchet"), extra_env=ENGINE_TUNING)
    engine.server_uri = uri  # type: ignore[attr-defined]
    try:
        yield engine
    finally:
        engine.stop()
        try:
            stop_embedded_server(pgdata)
        finally:
            if os.environ.get("KI_KEEP_HATCHET_DIR"):
                print(f"\nkept the engine's directory {base}")
            else:
                shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def hx(hatchet_engine, monkeypatch, tmp_path):
    """This test's Hatchet namespace and worker harness; the engine's client env is set."""
    harness = new_harness(hatchet_engine, tmp_path, monkeypatch)
    try:
        yield harness
    finally:
        harness.stop_all()
