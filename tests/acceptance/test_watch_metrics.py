"""``ki watch`` as an IT team runs it: its metrics port, what it prints per file, and a restart.

The real command with ``KI_METRICS_PORT``: the files dropped into the watched folder are named as they are
handed over to a sync, a file the converters refuse is named with its stage and reason once its run ends, the
port serves the counters of what this process executed and the gauges of the durable state; after a restart
the counters start again at 0 while the gauges read the same rows.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.ki_command import KI, KiUser, private_folder
from tests.helpers.process import free_ports

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def user() -> Iterator[KiUser]:
    with private_folder("ki-watch-metrics-") as base:
        yield KiUser(base)


class Output:
    """Lines a process writes to stdout and stderr, collected by a thread each."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        for stream in (proc.stdout, proc.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = [line for line in self.lines if needle in line]
            if found:
                return found[0]
            time.sleep(0.1)
        with self._lock:
            raise AssertionError(f"{needle!r} not printed in {timeout} s:\n" + "\n".join(self.lines[-40:]))


@contextmanager
def watching(user: KiUser, folder: Path, port: int) -> Iterator[Output]:
    proc = subprocess.Popen([*KI, "watch", str(folder)], env=user.env | {"KI_METRICS_PORT": str(port)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    output = Output(proc)
    try:
        output.wait_for("watching ")
        yield output
    finally:
        proc.terminate()
        proc.wait(120)
    assert not any("Traceback" in line for line in output.lines), "\n".join(output.lines)


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
    assert response.status_code == 200
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def keyed(samples: dict[tuple, float], *labels: str) -> dict[tuple, float]:
    """``samples`` keyed by the values of ``labels``, in that order."""
    return {tuple(dict(k)[name] for name in labels): v for k, v in samples.items()}


def test_watch_names_files_serves_metrics_and_restarts_clean(user, tmp_path):
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "Vermerk.txt").write_text("Vermerk zur Besprechung mit dem Mandanten.", encoding="utf-8")
    user("insert", str(folder))
    user("config", "set", "pipeline.watch.settle_seconds", "0.5")
    (port,) = free_ports(1)
    with watching(user, folder, port) as output:
        output.wait_for(f"metrics on http://127.0.0.1:{port}/metrics")
        (folder / "Neu.txt").write_text("Ein neues Schreiben an die Gegenseite.", encoding="utf-8")
        (folder / "kaputt.pdf").write_bytes(b"%PDF-1.7\nthis is not a pdf\n")
        output.wait_for(f"handed over to a sync: {folder / 'Neu.txt'}")
        line = output.wait_for("quarantined: ")
        assert str(folder / "kaputt.pdf") in line and "(convert, corrupt)" in line
        output.wait_for("quarantined, 0 retried")  # the run's line: it has ended
        samples = scrape(port)
        executions = keyed(samples["ki_stage_executions_total"], "stage", "outcome")
        assert executions[("convert", "quarantined")] == 1 and executions[("fetch", "done")] == 2
        assert samples["ki_watch_files_total"][(("event", "handed_over"),)] == 2
        rows = keyed(samples["ki_processing_state_rows"], "stage", "bucket")
        up = list(samples["ki_watcher_up"].values())
    assert rows[("fetch", "done")] == 3 and rows[("convert", "quarantined")] == 1
    assert up == [1.0]

    with watching(user, folder, port) as output:  # a restart: counters from 0, the same durable state
        output.wait_for(f"metrics on http://127.0.0.1:{port}/metrics")
        samples = scrape(port)
    assert "ki_stage_executions_total" not in samples or not any(samples["ki_stage_executions_total"].values())
    assert keyed(samples["ki_processing_state_rows"], "stage", "bucket") == rows
