"""Start a real OpenSearch 2.19.1 node (in-process ``org.opensearch.node.Node`` subclass) for tests.

Not a test module: fixtures import :func:`start_opensearch_node`.  The launcher
(``opensearch-node/``, class ``ki.search.KiOpenSearchNode``) is built by ``.ci/install_opensearch.sh``
into ``${KI_CACHE_DIR:-~/.cache/ki}/opensearch/2.19.1/`` (``classpath.txt`` there names the launcher
jar, the Maven jars in ``~/.m2`` and the k-NN jars); ``KI_OPENSEARCH_HOME`` overrides that directory.
``KI_JAVA`` (else ``$JAVA_HOME/bin/java``, else ``java`` on PATH) picks the JVM (Java 17).

A start:

1. runs ``java -Xms512m -Xmx1g [-XX:SharedArchiveFile=node.jsa] -cp <classpath.txt>
   ki.search.KiOpenSearchNode --home WORKDIR/home --http-port 0 --ports-file WORKDIR/http.port
   --exit-on-stdin-eof`` in its own process group, stdout and
   stderr to ``WORKDIR/node.log``; stdin is a pipe this object holds, so the node exits by itself when the
   Python process dies (no orphaned JVM after a killed test run);
2. waits for the ports file (written once HTTP is bound), then for ``_cluster/health`` yellow or green.

Plugins: Netty4, analysis-common, reindex, painless, k-NN (lucene engine only: a ``knn_vector`` field
without ``method.engine: lucene`` defaults to faiss, whose native library is absent, and the first refresh
or flush of such an index fails and hangs the request). docs/opensearch-node.md has the details.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
OPENSEARCH_VERSION = "2.19.1"
INSTALL_SCRIPT = ".ci/install_opensearch.sh"
MAIN_CLASS = "ki.search.KiOpenSearchNode"

#: JVM flags: the heap asked for, plus the distribution's jvm.options entries that matter in-process.
DEFAULT_JVM_OPTS: tuple[str, ...] = (
    "-Xms512m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
    "-Djna.nosys=true",
    # OpenSearch 2.x parses dates with the COMPAT locale data (its jvm.options sets this on JDK 9+).
    "-Djava.locale.providers=SPI,COMPAT",
    "-Dio.netty.noUnsafe=true",
    "-Dio.netty.noKeySetOptimization=true",
    "-Dio.netty.recycler.maxCapacityPerThread=0",
    # keep logging alive until the node's own shutdown hook has closed the node
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.disable.jmx=true",
)


def default_home() -> Path:
    """The install script's cache directory for this OpenSearch version."""
    cache = os.environ.get("KI_CACHE_DIR") or str(Path.home() / ".cache" / "ki")
    return Path(cache) / "opensearch" / OPENSEARCH_VERSION


def opensearch_home() -> Path:
    """``$KI_OPENSEARCH_HOME`` or :func:`default_home`; must contain ``classpath.txt``.

    Raises :class:`FileNotFoundError` naming the install script when it does not.
    """
    env = os.environ.get("KI_OPENSEARCH_HOME")
    home = Path(env) if env else default_home()
    if not (home / "classpath.txt").is_file():
        raise FileNotFoundError(
            f"OpenSearch test node not built: {home / 'classpath.txt'} is missing. Build it with "
            f"`bash {INSTALL_SCRIPT}` (needs Java 17 and Maven; prints the directory), or set "
            f"KI_OPENSEARCH_HOME to such a directory."
        )
    return home


def node_classpath(home: Path | None = None) -> str:
    """The launcher's classpath (``classpath.txt``); every entry must exist."""
    home = home or opensearch_home()
    cp = (home / "classpath.txt").read_text().strip()
    missing = [p for p in cp.split(os.pathsep) if p and not Path(p).exists()]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} classpath entries of {home / 'classpath.txt'} are missing (e.g. {missing[0]}); "
            f"rebuild with `bash {INSTALL_SCRIPT}`"
        )
    return cp


def java_binary() -> str:
    env = os.environ.get("KI_JAVA")
    if env:
        return env
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").is_file():
        return str(Path(java_home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise FileNotFoundError("no java on PATH (the OpenSearch test node needs Java 17); set KI_JAVA or JAVA_HOME")
    return found


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass
class OpenSearchNode:
    """A running test node. Build with :func:`start_opensearch_node`."""

    workdir: Path
    classpath: str
    java: str
    jvm_opts: tuple[str, ...] = DEFAULT_JVM_OPTS
    settings: dict[str, str] = field(default_factory=dict)
    #: AppCDS archive written by the install script (``node.jsa`` beside ``classpath.txt``)
    cds_archive: Path | None = None
    ready_timeout: float = 90.0
    process: subprocess.Popen[bytes] | None = None
    port: int = 0
    #: seconds from ``java`` exec until ``_cluster/health`` was yellow/green
    start_seconds: float = 0.0
    #: resident memory right after the last start
    start_rss_bytes: int = 0

    # -- addresses -----------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        """``path.home`` of the node (data under ``home/data``, OpenSearch's own files under ``home/logs``)."""
        return self.workdir / "home"

    @property
    def log_path(self) -> Path:
        return self.workdir / "node.log"

    @property
    def ports_file(self) -> Path:
        return self.workdir / "http.port"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    # -- lifecycle -----------------------------------------------------------------
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        cmd = [
            self.java,
            *self.jvm_opts,
            *self.cds_opts(),
            "-cp",
            self.classpath,
            MAIN_CLASS,
            "--home",
            str(self.home),
            "--http-port",
            "0",
            "--ports-file",
            str(self.ports_file),
            "--exit-on-stdin-eof",
        ]
        for key, value in self.settings.items():
            cmd += ["-E", f"{key}={value}"]
        return cmd

    def cds_opts(self) -> list[str]:
        """``-XX:SharedArchiveFile`` when the install script left ``node.jsa`` (AppCDS: faster start).

        The archive only fits the classpath and JDK it was made with; otherwise the JVM warns in the log
        and starts without it. ``KI_OPENSEARCH_CDS=0`` turns it off.
        """
        if self.cds_archive is None or os.environ.get("KI_OPENSEARCH_CDS", "1") == "0":
            return []
        if not self.cds_archive.is_file():
            return []
        return [f"-XX:SharedArchiveFile={self.cds_archive}", "-Xshare:auto"]

    def start(self) -> OpenSearchNode:
        if self.is_running():
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports_file.unlink(missing_ok=True)
        t0 = time.monotonic()
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        try:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        try:
            self._wait_ready(t0 + self.ready_timeout)
        except BaseException:
            self.kill()
            raise
        self.start_seconds = time.monotonic() - t0
        self.start_rss_bytes = self.rss_bytes()
        return self

    def _check_alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(
                f"OpenSearch node exited with {self.process.returncode} during startup; "
                f"log {self.log_path}:\n{_tail(self.log_path)}"
            )

    def _wait_ready(self, deadline: float) -> None:
        while True:
            self._check_alive()
            text = self.ports_file.read_text().strip() if self.ports_file.is_file() else ""
            if text.isdigit():
                self.port = int(text)
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"OpenSearch node bound no HTTP port within {self.ready_timeout:.0f}s; "
                    f"log {self.log_path}:\n{_tail(self.log_path)}"
                )
            time.sleep(0.2)
        status = "?"
        while True:
            self._check_alive()
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                health = _get_json(f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=2s", timeout=5)
                status = health.get("status", "?")
                if status in ("green", "yellow"):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"OpenSearch node at {self.url} not green/yellow within {self.ready_timeout:.0f}s "
                    f"(last status {status}); log {self.log_path}:\n{_tail(self.log_path)}"
                )
            time.sleep(0.2)

    def _signal_group(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def _close_stdin(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop (SIGTERM: the launcher's shutdown hook closes the node), SIGKILL after ``timeout``."""
        if self.process is None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        self._close_stdin()
        self.process = None

    def kill(self) -> None:
        """SIGKILL the node (crash simulation)."""
        if self.process is None:
            return
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self._close_stdin()
        self.process = None

    def restart(self) -> OpenSearchNode:
        """Stop gracefully and start again on the same data (a new HTTP port)."""
        self.stop()
        return self.start()

    def rss_bytes(self) -> int:
        """Resident memory of the JVM (Linux ``/proc``); 0 when not running."""
        if not self.is_running():
            return 0
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> OpenSearchNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_opensearch_node(
    workdir: Path,
    *,
    settings: Mapping[str, str] | None = None,
    jvm_opts: Sequence[str] | None = None,
    ready_timeout: float = 90.0,
) -> OpenSearchNode:
    """Start a single-node OpenSearch 2.19.1 cluster with its data and logs under ``workdir``.

    ``settings`` are extra node settings (``-E key=value``); ``jvm_opts`` replaces
    :data:`DEFAULT_JVM_OPTS`. Returns once ``_cluster/health`` is yellow or green (``ready_timeout``
    seconds at most, else :class:`TimeoutError` with the log's tail); ``.url`` is
    ``http://127.0.0.1:PORT``, ``.stop()`` ends it. Raises :class:`FileNotFoundError` (naming
    ``.ci/install_opensearch.sh``) when the node has not been built.
    """
    home = opensearch_home()
    node = OpenSearchNode(
        workdir=Path(workdir),
        classpath=node_classpath(home),
        java=java_binary(),
        jvm_opts=tuple(jvm_opts) if jvm_opts is not None else DEFAULT_JVM_OPTS,
        settings=dict(settings or {}),
        cds_archive=home / "node.jsa",
        ready_timeout=ready_timeout,
    )
    return node.start()
