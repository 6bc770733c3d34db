"""A small estate on disk, registered, scanned and converted: the start of a stage test.

Real components only: the files are written, ``ki``'s local source registered and scanned, and fetch and
convert run for every object through :func:`ki.orchestration.execute.run_stage_for_object`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text


def converted_estate(ctx: Any, root: Path, files: dict[str, str]) -> tuple[dict[str, int], int]:
    """Write ``files`` (relative path → UTF-8 text) under ``root``, register and scan it, fetch and convert every
    object. Returns (relative path → source object id, the default project's id). Fails the test when a stage
    does not finish."""
    from ki.adapters.sources.scan import register_local_source, scan_source
    from ki.orchestration.execute import run_stage_for_object

    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    sid = register_local_source(ctx, root)
    scan_source(ctx, sid)
    with ctx.db.engine.connect() as conn:
        oids = dict(conn.execute(text("SELECT external_id, id FROM source_object WHERE source_id = :s"),
                                 {"s": sid}).fetchall())
        project = conn.execute(text("SELECT id FROM project WHERE name = 'default'")).scalar_one()
    for oid in oids.values():
        for stage in ("fetch", "convert"):
            assert run_stage_for_object(ctx, stage, oid).kind == "done"
    return oids, project
