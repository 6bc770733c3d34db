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
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.process import ManagedProcess, cache_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    return cache_dir() / "opensearch" / OPENSEARCH_VERSION


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


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass
class OpenSearchNode(ManagedProcess):
    """A running test node. Build with :func:`start_opensearch_node`."""

    name = "OpenSearch node"
    log_tail_lines = 60

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
    #: the HTTP port asked for at start (0: a free one; :meth:`restart` with ``same_port`` keeps the last)
    http_port: int = 0
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

    # -- lifecycle -----------------------------------------------------------------
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
            str(self.http_port),
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
        # stdin is a pipe held here: the launcher exits by itself when this process dies
        self.start_seconds = self.launch(self.command(), ready=self._wait_ready, timeout=self.ready_timeout,
                                         cwd=self.workdir, stdin=subprocess.PIPE)
        self.start_rss_bytes = self.rss_bytes()
        return self

    def _read_port(self) -> bool:
        text = self.ports_file.read_text().strip() if self.ports_file.is_file() else ""
        if text.isdigit():
            self.port = int(text)
        return text.isdigit()

    def _wait_ready(self, deadline: float) -> None:
        self.wait_until(self._read_port, deadline, lambda: "its HTTP port")
        status = ["?"]

        def healthy() -> bool:
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                health = _get_json(f"{self.url}/_cluster/health?wait_for_status=yellow&timeout=2s", timeout=5)
                status[0] = health.get("status", "?")
            return status[0] in ("green", "yellow")

        self.wait_until(healthy, deadline, lambda: f"cluster health green/yellow at {self.url}, last {status[0]}")

    def restart(self, *, same_port: bool = False) -> OpenSearchNode:
        """Stop gracefully and start again on the same data: on a new HTTP port, or with ``same_port``
        on the one it had (a node that went down and came back where its clients expect it)."""
        self.stop()  # nothing to do when it is stopped already
        self.http_port = self.port if same_port else 0
        return self.start()

    def __enter__(self) -> OpenSearchNode:
        return self


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
