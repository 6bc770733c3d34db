"""The harness of the engine-backed Hatchet tests (``tests/integration/orchestrator/``): workers as
subprocesses, waits, diagnostics, the test estate, table snapshots, and what the engine says about a
batch's DAGs. Not a test module; its fixtures live in ``tests/integration/orchestrator/conftest.py``.

Workers are ``tests/helpers/hatchet_worker.py`` subprocesses (own process group; a worker cannot live
in a daemon process) on the test's database and Hatchet namespace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.launch import wait_for_run
from ki.config.loader import set_config_value
from ki.core.taxonomies import MODEL_STAGES, PIPELINE_STAGE_ORDER
from ki.domain.context import PipelineContext
from ki.workflows.client import hatchet_client

REPO = Path(__file__).resolve().parents[2]
HELPER = REPO / "tests" / "helpers" / "hatchet_worker.py"
#: Engine tuning ki recommends (README "Hatchet"): concurrency queues are polled every 0.1-0.5 s
#: instead of 0.5-5 s, which otherwise adds seconds between the stages of a DAG.
ENGINE_TUNING = {"SCHEDULER_CONCURRENCY_POLLING_MIN_INTERVAL": "100ms",
                 "SCHEDULER_CONCURRENCY_POLLING_MAX_INTERVAL": "500ms"}
ENABLED_STAGES = [s for s in PIPELINE_STAGE_ORDER if s not in MODEL_STAGES]


class Harness:
    """Workers, waits and diagnostics of one test (its own Hatchet namespace)."""

    def __init__(self, engine, namespace: str, tmp_path: Path):
        self.engine = engine
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.workers: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start_worker(self, *, slots: int = 8, env: dict[str, str] | None = None,
                     host: str | None = None, network=None) -> subprocess.Popen:
        """A ``ki worker`` subprocess (own process group) on this test's database and namespace; with ``host``,
        in a UTS namespace of its own whose host name is ``host`` (``unshare --uts``, root): another host as
        far as claim liveness goes (``ki.core.liveness``: a holder on another host keeps the claim timeout). With
        ``network`` (a :class:`tests.helpers.netns.NetworkHosts` naming ``host``) also in that host's network
        namespace, reaching the engine, PostgreSQL and OpenSearch over its veth (``env``: :func:`network_env`)."""
        e = dict(os.environ)
        e.update({"KI_RUN_SWEEP_SECONDS": "0", "KI_HATCHET_DOCUMENT_CONCURRENCY": "64", "PYTHONPATH": str(REPO)})
        e.update(env or {})
        log = self.tmp_path / f"worker-{len(self.workers)}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            cmd = [sys.executable, str(HELPER), "--slots", str(slots), "--name", f"w{len(self.workers)}"]
            if network is not None:
                cmd = network.command(host, cmd)
            elif host:
                cmd = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *cmd]
            proc = subprocess.Popen(cmd, env=e, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.workers.append(proc)
        return proc

    def kill_worker(self, proc: subprocess.Popen) -> None:
        """SIGKILL the worker and every process it spawned."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.workers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill_worker(proc)

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def diagnostics(self, ctx: PipelineContext | None = None) -> str:
        parts = []
        for log in self.logs:
            tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        parts.append("--- engine.log\n" + "\n".join(
            self.engine.log_path.read_text(errors="replace").splitlines()[-10:]))
        if ctx is not None:
            rows = q(ctx, "SELECT stage, status, reason, count(*) FROM processing_state GROUP BY 1, 2, 3 ORDER BY 1, 2")
            runs = q(ctx, "SELECT id, kind, status, processed, workflow_name, error FROM pipeline_runs")
            parts.append(f"--- rows {rows}\n--- runs {runs}")
            stuck = q(ctx, "SELECT source_object_id, workflow_run_id, released_at FROM pipeline_run_object "
                           "WHERE finished_at IS NULL ORDER BY released_at NULLS LAST LIMIT 5")
            for oid, wid, released in stuck:
                if not wid:
                    parts.append(f"--- object {oid}: no DAG (released {released})")
                    continue
                try:
                    d = hatchet_client().runs.get(wid)
                    tasks = [(t.display_name, str(t.status), t.retry_count, t.attempt) for t in d.tasks]
                    parts.append(f"--- object {oid} run {wid} {d.run.status}: {tasks}")
                except Exception as exc:  # noqa: BLE001 - diagnostics only
                    parts.append(f"--- object {oid} run {wid}: {exc!r}")
        return "\n".join(parts)

    def wait_run(self, ctx: PipelineContext, run_id: int, timeout: float = 300) -> tuple[str, object, str | None]:
        status, counters, error = wait_for_run(ctx, run_id, timeout_seconds=timeout, poll_seconds=0.5)
        assert status == "completed", f"run {run_id} {status} ({error})\n{self.diagnostics(ctx)}"
        return status, counters, error

    def wait_workers_active(self, n: int, timeout: float = 90) -> None:
        client = hatchet_client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = client.workers.list().rows or []
            active = [w for w in rows if w.name.startswith(self.namespace) and str(w.status).endswith("ACTIVE")]
            if len(active) >= n:
                return
            time.sleep(0.5)
        raise AssertionError(f"{n} worker(s) not active after {timeout} s\n{self.diagnostics()}")


def new_harness(engine, tmp_path: Path, monkeypatch) -> Harness:
    """A harness in a fresh Hatchet namespace, with the engine's client environment set."""
    namespace = "t" + uuid.uuid4().hex[:10]
    for key, value in engine.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HATCHET_CLIENT_NAMESPACE", namespace)
    return Harness(engine, namespace, tmp_path)


def network_env(network, engine, database_url: str, opensearch_url: str | None = None) -> dict[str, str]:
    """The environment of a worker in one of ``network``'s namespaces (:class:`tests.helpers.netns.NetworkHosts`):
    the engine's gRPC and REST ports, the database and the OpenSearch node (pinned over the saved
    configuration: ``KI_COMPONENTS__OPENSEARCH_URL``) as reached through relays on the bridge."""
    return network.relay_env({**engine.env(), "KI_DATABASE_URL": database_url,
                              "KI_COMPONENTS__OPENSEARCH_URL": opensearch_url or ""})


def opensearch_index(ctx: PipelineContext, url: str):
    """Point ``ctx``'s saved configuration at the OpenSearch node ``url`` and return its search backend, with
    this test's index (one per database) dropped: the workers index into it."""
    from ki.adapters.search.factory import backend_for

    set_config_value(ctx.settings.data_dir, "components.opensearch_url", url)
    ctx.reload_config()
    backend = backend_for(ctx.db, ctx.config)
    assert backend.name == "opensearch"
    backend.drop_index()
    return backend


def indexed_and_recorded(ctx: PipelineContext, backend) -> tuple[int, int]:
    """``(documents in the OpenSearch index, chunk rows not deleted)`` after a refresh; the index is dropped."""
    chunks = q(ctx, "SELECT count(*) FROM chunk WHERE NOT is_deleted")[0][0]
    backend.client.indices.refresh(index=backend.index)
    indexed = backend.client.count(index=backend.index)["count"]
    backend.drop_index()
    return indexed, chunks


def configure(data_dir: Path, provider_name: str, *, stages: list[str] | None = None, **pipeline) -> None:
    """Save the provider and the stage set (default: model stages off) into ``data_dir``'s configuration."""
    enabled = ENABLED_STAGES if stages is None else stages
    set_config_value(data_dir, "components.orchestrator_provider", provider_name)
    for stage in PIPELINE_STAGE_ORDER:
        set_config_value(data_dir, f"pipeline.stages.{stage}.enabled", stage in enabled)
    for key, value in pipeline.items():
        set_config_value(data_dir, f"pipeline.{key}", value)


def write_docs(root: Path, n: int, *, prefix: str = "doc") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        sub = root / f"m{i % 7}"
        sub.mkdir(exist_ok=True)
        (sub / f"{prefix}{i:04d}.txt").write_text(
            f"Aktennotiz {i}\nVertrag Nummer {i:04d} zwischen Partei A{i} und Partei B{i}.\n"
            + ("Lieferung und Gewährleistung. " * (i % 5)), encoding="utf-8")


def write_mails(root: Path, n: int) -> None:
    """``n`` e-mails with a text attachment each (and the last one a forwarded mail inside): their
    convert registers embedded child objects while the batch runs."""
    from email.message import EmailMessage

    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = "a@kanzlei.example", "b@mandant.example", f"Vertrag {i}"
        msg["Message-ID"] = f"<m{i}@kanzlei.example>"
        msg.set_content(f"Anbei der Entwurf {i}.")
        msg.add_attachment(f"Anlage {i}: Lieferbedingungen.".encode(), maintype="text", subtype="plain",
                           filename=f"anlage{i}.txt")
        if i == n - 1:
            inner = EmailMessage()
            inner["From"], inner["Subject"] = "c@gegner.example", "Stellungnahme"
            inner.set_content("Wir widersprechen.")
            msg.add_attachment(inner)
        (root / f"mail{i:02d}.eml").write_bytes(bytes(msg))


def scan(ctx: PipelineContext, root: Path) -> int:
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    return sid


def q(ctx: PipelineContext, sql: str, **params) -> list:
    with ctx.db.engine.connect() as conn:
        return conn.execute(text(sql), params).fetchall()


def execute(ctx: PipelineContext, sql: str, **params) -> None:
    with ctx.db.engine.begin() as conn:
        conn.execute(text(sql), params)


def new_database(pg_server_uri: str, template_db: str) -> str:
    """A second fresh migrated database on the test server (SQLAlchemy URL)."""
    from ki.store.db import sqlalchemy_url
    from tests.helpers.postgres import admin_connection

    name = f"ki_hx_{uuid.uuid4().hex[:8]}"
    with admin_connection(pg_server_uri) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    return sqlalchemy_url(pg_server_uri, name)


def snapshot(ctx: PipelineContext) -> dict[str, list[tuple]]:
    """Every table the pipeline writes, without ids, run ids and timestamps, keyed by path."""
    return {
        "source_object": q(ctx, "SELECT path, external_id, size, content_hash, scanned_hash, deleted_at IS NULL "
                                "FROM source_object ORDER BY path"),
        "processing_state": q(ctx, """SELECT so.path, ps.stage, ps.status, ps.reason, ps.attempts, ps.completions,
                                      ps.producer_version, ps.last_error, ps.claim_token IS NULL
                                      FROM processing_state ps JOIN source_object so ON so.id = ps.source_object_id
                                      ORDER BY so.path, ps.stage"""),
        "blob": q(ctx, "SELECT content_hash, size FROM blob ORDER BY content_hash"),
        "artifact": q(ctx, "SELECT content_hash, kind, producer, producer_version, body::text FROM artifact "
                           "ORDER BY content_hash, kind"),
        "chunk": q(ctx, """SELECT so.path, c.ordinal, c.content_hash, c.text, c.title, c.allowed_principals,
                           c.denied_principals, c.access_version, c.is_deleted, c.embedding::text
                           FROM chunk c JOIN source_object so ON so.id = c.source_object_id
                           ORDER BY so.path, c.ordinal"""),
    }


def engine_dags(namespace: str, run_id: int) -> list:
    """The engine's workflow runs (DAGs) of batch ``run_id`` in this namespace (the run list, any status)."""
    listing = hatchet_client().runs.list(additional_metadata={"ki_run_id": str(run_id)}, only_tasks=False,
                                         limit=1000)
    return [r for r in listing.rows or [] if (r.display_name or "").startswith(namespace)]


def engine_run(workflow_run_id: str, *, ready=lambda details: True, timeout: float = 60.0):
    """The engine's details of a workflow run (``hatchet_client().runs.get``), waiting up to ``timeout`` s
    until the engine's read model knows it and ``ready(details)`` holds: that model (its OLAP tables) is
    written from a buffer, so a DAG ki recorded as finished can be unknown (404) or show unfinished tasks
    for a moment after the run completed (seen in CI: 404 for a finished member's DAG). Raises the last
    NotFoundException, or AssertionError when ``ready`` never held."""
    from hatchet_sdk.clients.rest.exceptions import NotFoundException

    deadline = time.monotonic() + timeout
    while True:
        try:
            details = hatchet_client().runs.get(workflow_run_id)
            if ready(details):
                return details
            if time.monotonic() >= deadline:
                shown = [(t.display_name, str(t.status)) for t in details.tasks]
                raise AssertionError(f"run {workflow_run_id}: {shown}")
        except NotFoundException:
            if time.monotonic() >= deadline:
                raise
        time.sleep(0.5)


def dags_per_member(namespace: str, run_id: int) -> Counter:
    """How many engine DAGs each (object id, attempt) of batch ``run_id`` has: a count above 1 is a
    member triggered twice (a sweeper replacement carries an attempt token of its own)."""
    return Counter((d.additional_metadata.get("ki_object_id"), d.additional_metadata.get("ki_attempt", ""))
                   for d in engine_dags(namespace, run_id))


def peak_in_flight(namespace: str, ctx: PipelineContext, run_id: int) -> int:
    """The most DAGs of batch ``run_id`` in flight at once: each DAG from its creation in the engine (the
    run list's ``created_at``) to the end ki recorded for its document (``pipeline_run_object.finished_at``,
    committed before the DAG's final task triggers a successor)."""
    ended = {wid: fin for wid, fin in q(ctx, "SELECT workflow_run_id, finished_at FROM pipeline_run_object "
                                             "WHERE run_id = :r", r=run_id)}
    events: list[tuple[datetime, int]] = []
    for dag in engine_dags(namespace, run_id):
        wid = str(dag.workflow_run_external_id)
        if ended.get(wid) is None:
            continue  # a DAG the sweeper superseded (not the member's recorded one)
        events += [(dag.created_at, 1), (ended[wid], -1)]
    peak = now = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        now += step
        peak = max(peak, now)
    return peak
