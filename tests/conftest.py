"""Shared fixtures: where the shared corpus lives, and the real PostgreSQL."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from tests.helpers.paths import shared_dir
from tests.helpers.postgres import admin_connection

# Property tests (hypothesis): no per-example deadline (a loaded machine is slow, not wrong); in CI (CI=1)
# derandomised — the same examples every run, so a failure reproduces and CI time is bounded — and without
# the example database. A test's own @settings(max_examples=...) bounds its cost in both profiles.
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def _fresh_services():
    """Every test starts without shared clients, cooldowns or parsed settings of an earlier one."""
    from ki.app import wiring

    yield
    wiring.reset()


@pytest.fixture(scope="session", autouse=True)
def _private_data_dir(tmp_path_factory):
    """A data directory of this session for code that reads ``KI_DATA_DIR`` without a test's own (the
    embedded lexical index of a test database lives under it): never the user's ~/.local/share/ki."""
    if os.environ.get("KI_DATA_DIR"):
        yield
        return
    os.environ["KI_DATA_DIR"] = str(tmp_path_factory.mktemp("ki-session-data"))
    try:
        yield
    finally:
        os.environ.pop("KI_DATA_DIR", None)


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()


@pytest.fixture(scope="session")
def real_corpus(shared: Path) -> Path:
    return shared / "corpus" / "real"


@pytest.fixture(scope="session")
def cases_dir(shared: Path) -> Path:
    return shared / "cases"


# --- real PostgreSQL -------------------------------------------------------------------------
# One embedded PostgreSQL 18 server per test session (or KI_TEST_DATABASE_URL, a libpq URI of a
# server where we may create databases). The schema is migrated once into a template database;
# each test gets its own database cloned from it.

_db_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server_uri(tmp_path_factory) -> str:
    """libpq URI of the test server's maintenance database."""
    uri = os.environ.get("KI_TEST_DATABASE_URL")
    if uri:
        return uri
    import shutil
    import tempfile

    from ki.store.db import embedded_server_uri, stop_embedded_server

    # A private folder (not pytest's rotating basetemp, which a concurrent session may prune).
    base = Path(tempfile.mkdtemp(prefix="ki-test-pg-"))
    pgdata = base / "data"
    uri = embedded_server_uri(pgdata)
    yield uri
    try:
        stop_embedded_server(pgdata)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(pg_server_uri) -> str:
    """Name of a database migrated to head, used as the template of each test database."""
    from ki.store.db import open_database, sqlalchemy_url

    name = f"ki_template_{uuid.uuid4().hex[:8]}"
    with admin_connection(pg_server_uri) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    db = open_database(sqlalchemy_url(pg_server_uri, name), pool_size=1)
    db.dispose()
    return name


@pytest.fixture
def db_url(pg_server_uri, template_db) -> str:
    """SQLAlchemy URL of a fresh, migrated database for this test."""
    from ki.store.db import sqlalchemy_url

    name = f"ki_t{os.getpid()}_{next(_db_counter)}"
    with admin_connection(pg_server_uri) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield sqlalchemy_url(pg_server_uri, name)


@pytest.fixture
def data_dir(tmp_path) -> Path:
    d = tmp_path / "ki-data"
    d.mkdir()
    return d


@pytest.fixture
def make_ctx(db_url, data_dir, monkeypatch):
    """Factory of PipelineContext objects on this test's database and data directory.

    ``make_ctx(**settings)`` accepts ProcessSettings fields (e.g. workers=2).
    """
    from ki.config.loader import ProcessSettings
    from ki.domain.context import PipelineContext
    from ki.store.db import open_database

    monkeypatch.setenv("KI_DATA_DIR", str(data_dir))
    monkeypatch.setenv("KI_DATABASE_URL", db_url)
    opened = []

    def factory(**overrides):
        settings = ProcessSettings(data_dir=data_dir, database_url=db_url, **overrides)
        ctx = PipelineContext.open(settings, db=open_database(db_url, pool_size=settings.workers + 4, migrate=False))
        opened.append(ctx)
        return ctx

    yield factory
    for ctx in opened:
        ctx.db.dispose()


@pytest.fixture
def ctx(make_ctx):
    """A PipelineContext on a fresh database (4 workers)."""
    return make_ctx()


# --- OpenSearch: one real node per test session (tests/helpers/opensearch_node.py) ---------------------


@pytest.fixture(scope="session")
def opensearch_node(tmp_path_factory):
    """A real OpenSearch 2.19.1 node shared by the whole session (built by .ci/install_opensearch.sh)."""
    from tests.helpers.opensearch_node import start_opensearch_node

    node = start_opensearch_node(tmp_path_factory.mktemp("opensearch"))
    try:
        yield node
    finally:
        node.stop()
