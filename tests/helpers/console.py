"""What the console tests share: a small real estate, an inserted database, API clients with tokens.

The estate is one matter folder of the shared synthetic estate (9 files) plus two files every
converter refuses (a PDF that is not a PDF, a DOCX that is not a zip): a real insertion run gives
done rows in every stage, handler skips, and two deterministic quarantines at Parse.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

MATTER = "Mandate/2021-0060 Eichental Maschinenbau GmbH - Aufhebungsvertrag Unruh"
POISON = {"Eingang/kaputt.pdf": b"%PDF-1.7\nthis is not a pdf\n", "Eingang/defekt.docx": b"PK\x03\x04 truncated"}


def small_estate(shared: Path, dest: Path) -> Path:
    """Copy the small estate into ``dest`` (see module doc); returns its root."""
    root = dest / "estate"
    shutil.copytree(shared / "corpus" / "estate-dev" / "estate" / MATTER, root / MATTER)
    for rel, data in POISON.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def insert_estate(ctx, root: Path):
    """Register ``root`` as a local source, scan it and run the pipeline to idle (a real run)."""
    from ki.adapters.sources.scan import register_local_source, scan_source
    from ki.app.launch import launch_insertion

    source_id = register_local_source(ctx, root)
    scan_source(ctx, source_id)
    return launch_insertion(ctx, trigger="cli", source_id=source_id, wait_for_retries_seconds=0)


@dataclass
class Tokens:
    """Tokens of every kind a test needs: ``{name: token}``."""

    values: dict[str, str] = field(default_factory=dict)

    def header(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.values[name]}"}


def make_tokens(engine) -> Tokens:
    """reader (read:pipeline), operator (read+write:pipeline), admin, searcher (search only)."""
    from ki.app.tokens import create_token

    out = Tokens()
    for name, scopes in (("reader", ["read:pipeline"]), ("operator", ["read:pipeline", "write:pipeline"]),
                         ("admin", ["admin"]), ("searcher", ["search"])):
        out.values[name] = create_token(engine, name=name, scopes=scopes)[1]
    return out


def wait_healthy(base: str, proc, log_path, timeout: float = 60.0) -> None:  # noqa: ANN001 - a Popen
    """Wait until the ``ki serve`` process ``proc`` answers ``GET {base}/healthz`` with 200; AssertionError with the
    tail of its log at ``log_path`` when it ends or ``timeout`` passes first."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("ki serve did not start:\n" + Path(log_path).read_text()[-3000:])
        time.sleep(0.2)


def stop_served(proc, log) -> None:  # noqa: ANN001 - a Popen and its open log file
    """Terminate the ``ki serve`` process ``proc`` (killed after 20 s) and close its ``log``."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
