"""The ``ki`` command as a user drives it, on the embedded PostgreSQL under the data directory.

Every command runs as its own process with ``KI_DATA_DIR`` set and no ``KI_DATABASE_URL``,
so the first command starts the embedded server under ``<data_dir>/pg`` and later ones
reuse it (DESIGN.md "Two deployments"; ki/store/db.py). The module's fixture stops that
server with ``ki db stop`` when the module ends.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from ki.config.settings import UNIMPLEMENTED_STAGES
from ki.core.taxonomies import BUCKETS, PIPELINE_STAGE_ORDER

# `ki insert` of the estate runs every stage; give a loaded CI machine room.
pytestmark = pytest.mark.timeout(1200)

KI_SCRIPT = Path(sys.executable).parent / "ki"
KI = [str(KI_SCRIPT)] if KI_SCRIPT.exists() else [sys.executable, "-m", "ki.cli"]


@dataclass
class Cli:
    """A user's shell: a data directory, an environment without ``KI_DATABASE_URL``, the ``ki`` command."""

    data_dir: Path
    estate: Path
    env: dict[str, str]
    first_status: list[subprocess.CompletedProcess]

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*KI, *args], env=self.env | (env or {}), capture_output=True, text=True,
                              timeout=timeout)
        if check:
            assert proc.returncode == 0, f"ki {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-4000:]}"
        return proc

    def json(self, *args: str) -> object:
        return json.loads(self.run(*args).stdout)

    def postmaster_pid(self) -> int | None:
        pidfile = self.pgdata / "postmaster.pid"
        return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _spawn(cli_env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([*KI, *args], env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def cli(tmp_path_factory, shared) -> Cli:
    base = tmp_path_factory.mktemp("ki-cli")
    data_dir = base / "data"
    estate = base / "estate"
    shutil.copytree(shared / "corpus" / "estate-dev" / "estate", estate, copy_function=shutil.copyfile)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_")}
    env.update({"KI_DATA_DIR": str(data_dir), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    if os.environ.get("KI_SHARED_DIR"):
        env["KI_SHARED_DIR"] = os.environ["KI_SHARED_DIR"]

    # the very first commands on a fresh data directory, started at the same time:
    # one starts the embedded server, the other reuses it
    procs = [_spawn(env, "status", "--json") for _ in range(2)]
    first = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        first.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    session = Cli(data_dir=data_dir, estate=estate, env=env, first_status=first)
    yield session

    stop = subprocess.run([*KI, "db", "stop"], env=env, capture_output=True, text=True, timeout=120)
    pid = session.postmaster_pid()
    if _alive(pid):  # ki db stop failed: do not leave our server behind
        os.kill(pid, signal.SIGTERM)
        pytest.fail(f"`ki db stop` left the embedded server {pid} running: {stop.stdout} {stop.stderr[-2000:]}")


@pytest.fixture(scope="module")
def inserted(cli) -> subprocess.CompletedProcess:
    return cli.run("insert", str(cli.estate), timeout=900)


def _estate_files(cli: Cli) -> int:
    return sum(1 for p in cli.estate.rglob("*") if p.is_file())


def test_first_two_commands_share_one_embedded_server(cli):
    for proc in cli.first_status:
        assert proc.returncode == 0, proc.stderr[-4000:]
        stages = json.loads(proc.stdout)["stages"]
        assert set(stages) == set(PIPELINE_STAGE_ORDER)
        assert all(sum(b.values()) == 0 for b in stages.values())
    pid = cli.postmaster_pid()
    assert _alive(pid)
    log = (cli.pgdata / "log").read_text(errors="replace")
    assert log.count("database system is ready to accept connections") == 1, log[-3000:]
    assert "lock file" not in log


def test_insert_scans_and_runs_the_estate(cli, inserted):
    n = _estate_files(cli)
    assert n > 100
    assert f"{n} files: {n} new" in " ".join(inserted.stderr.split())
    assert "completed in" in inserted.stderr and "stage executions" in inserted.stderr
    assert "documents by stage" in inserted.stdout
    # inserting again finds nothing new and nothing to do
    again = cli.run("insert", str(cli.estate))
    text = " ".join(again.stderr.split())
    assert f"{n} files: 0 new, 0 changed, {n} unchanged, 0 restored; 0 tombstoned" in text
    assert "0 stage executions" in text


def test_status_json_counts_every_document(cli, inserted):
    n = _estate_files(cli)
    stages = cli.json("status", "--json")["stages"]
    assert set(stages) == set(PIPELINE_STAGE_ORDER)
    quarantined = len(cli.json("quarantine", "list", "--json"))
    # one row per (document, stage); documents are the files plus what they embed (mail attachments)
    documents = sum(stages["fetch"].values())
    assert documents >= n
    for stage, buckets in stages.items():
        assert set(buckets) == set(BUCKETS)
        assert sum(buckets.values()) == documents, stage
        assert buckets["pending"] == buckets["running"] == buckets["failed"] == 0, (stage, buckets)
        if stage in UNIMPLEMENTED_STAGES:
            assert buckets["disabled"] + buckets["skipped"] == documents, (stage, buckets)
    assert stages["extract_metadata"]["done"] + stages["extract_metadata"]["skipped"] + \
        stages["extract_metadata"]["disabled"] >= documents - quarantined
    assert stages["fetch"]["done"] == documents
    assert sum(b["quarantined"] for b in stages.values()) == quarantined
    assert stages["index"]["done"] + stages["index"]["skipped"] > documents * 0.9


def test_search_returns_hits_with_path_snippet_score(cli, inserted):
    hits = cli.json("search", "Mietvertrag", "--json")["hits"]
    assert len(hits) >= 3
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    for h in hits:
        assert Path(h["path"]).is_file() and Path(h["path"]).is_relative_to(cli.estate)
        assert "«" in h["snippet"] and "mietvertrag" in h["snippet"].lower()
    assert len({h["content_hash"] for h in hits}) == len(hits)  # identical content shown once
    human = cli.run("search", "Mietvertrag", "--limit", "3")
    assert "local operator" in human.stderr
    assert human.stdout.count("score") == 3


def test_quarantine_list_json(cli, inserted):
    entries = cli.json("quarantine", "list", "--json")
    assert isinstance(entries, list)
    for e in entries:
        assert {"source_object_id", "path", "stage", "attempts", "error"} <= set(e)
        assert "traceback" not in e["error"]
        assert e["error"].get("reason") or e["error"].get("class")


def test_config_set_then_show(cli):
    done = cli.run("config", "set", "pipeline.max_file_mb", "64")
    assert "pipeline.max_file_mb = 64" in done.stdout
    shown = cli.json("config", "show")
    assert shown["config"]["pipeline"]["max_file_mb"] == 64
    assert shown["env_pinned"] == {}
    assert Path(shown["data_dir"]) == cli.data_dir
    assert json.loads((cli.data_dir / "config.json").read_text())["pipeline"]["max_file_mb"] == 64


def test_config_set_refuses_an_env_pinned_field(cli):
    cli.run("config", "set", "pipeline.max_file_mb", "64")
    pin = {"KI_PIPELINE__MAX_FILE_MB": "1"}
    refused = cli.run("config", "set", "pipeline.max_file_mb", "5", env=pin, check=False)
    assert refused.returncode != 0
    message = " ".join(refused.stderr.split())
    assert "pinned" in message and "KI_PIPELINE__MAX_FILE_MB" in message
    pinned = json.loads(cli.run("config", "show", env=pin).stdout)
    assert pinned["config"]["pipeline"]["max_file_mb"] == 1
    assert pinned["env_pinned"] == {"pipeline.max_file_mb": "KI_PIPELINE__MAX_FILE_MB"}
    assert cli.json("config", "show")["config"]["pipeline"]["max_file_mb"] == 64  # the saved value is untouched


def test_next_command_recovers_after_kill_9_of_the_server(cli, inserted):
    before = cli.json("status", "--json")
    pid = cli.postmaster_pid()
    assert _alive(pid)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid)

    after = cli.run("status", "--json", timeout=120)  # at once: no waiting for the OS to reap the server
    assert json.loads(after.stdout) == before
    new_pid = cli.postmaster_pid()
    assert new_pid != pid and _alive(new_pid)
    assert cli.json("search", "Mietvertrag", "--json")


def test_db_stop_stops_the_embedded_server(cli):
    cli.run("status", "--json")
    pid = cli.postmaster_pid()
    assert _alive(pid)
    assert cli.run("db", "stop").stdout.strip() == "stopped"
    assert not _alive(pid)
    assert cli.run("db", "stop").stdout.strip() == "not running"
