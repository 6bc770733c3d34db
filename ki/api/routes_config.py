"""``GET /api/config``, ``PUT /api/config`` and the stage re-run preview.

Spec: insertion-pipeline.md "The console page" (stage and run settings: GET /api/config → edits →
PUT /api/config; Save / Save and re-run; the "Re-run all files" dialog), "Configuration" (an
env-pinned field refuses the edit with 409) and "What save re-runs and what it does not"
(:mod:`ki.app.config_view`). A stale version → 409, an invalid value → 422 with field
errors; nothing is written in either case. A saved edit and its audit entry are one outcome
(:mod:`ki.store.config_journal`).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Header, Path, Query

from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.schemas import ConfigSaved, ConfigUpdate
from ki.api.state import ServerState, server_state
from ki.app.config_edits import apply_config_changes
from ki.app.config_view import describe_config, edit_audit, flat_values, requires_run
from ki.app.preview import rerun_preview
from ki.app.scopes import READ_PIPELINE, WRITE_PIPELINE
from ki.app.views import ConfigOut, RerunPreview

router = APIRouter(prefix="/api", tags=["configuration"])

StageId = Literal["fetch", "convert", "classify_matter", "relate", "extract_metadata", "extract_decisions", "index"]


@router.get("/config", response_model=ConfigOut, responses=error_responses(401, 403))
def get_config(state: ServerState = Depends(server_state),
               _: Identity = Depends(require_scope(READ_PIPELINE))) -> ConfigOut:
    """The effective configuration: each field's value, default, range or choices, source and env pin."""
    return describe_config(state.ctx.settings.data_dir, state.config())


def _version(body: ConfigUpdate, if_match: str | None) -> str:
    if body.version:
        return body.version
    if if_match:
        return if_match.strip().removeprefix("W/").strip('"')
    raise ApiError(428, "version_required", "send the configuration version you edited (the 'version' field of "
                                            "GET /api/config) in the body or as If-Match")


@router.put("/config", response_model=ConfigSaved, responses=error_responses(401, 403, 409, 422, 428))
def put_config(body: ConfigUpdate, state: ServerState = Depends(server_state),
               identity: Identity = Depends(require_scope(WRITE_PIPELINE)),
               if_match: str | None = Header(default=None, alias="If-Match", max_length=200),
               dry_run: bool = Query(False, description="check the edit and say whether it requires a run; "
                                                        "write nothing")) -> ConfigSaved:
    """Apply a partial update all or nothing; say whether it requires a run (and why)."""
    expected = _version(body, if_match)
    before = flat_values(state.config())
    checked, version = apply_config_changes(state.ctx.settings.data_dir, body.changes, expected_version=expected,
                                            dry_run=dry_run,
                                            audit=edit_audit(state.ctx.db.engine, identity.name, list(body.changes)))
    after = flat_values(checked)
    changed = [k for k in body.changes if before.get(k) != after.get(k)]
    reasons = list(dict.fromkeys(r for k in changed if (r := requires_run(k, before.get(k), after.get(k)))))
    if not dry_run:
        state.config()  # reload now: the next status read shows the new enabled set
        state.changed()
    return ConfigSaved(version=version, changed=changed, requires_run=bool(reasons), reasons=reasons, dry_run=dry_run)


@router.get("/stages/{stage}/rerun-preview", response_model=RerunPreview, responses=error_responses(401, 403))
def get_rerun_preview(stage: StageId = Path(description="a stage id"), state: ServerState = Depends(server_state),
                      _: Identity = Depends(require_scope(READ_PIPELINE))) -> RerunPreview:
    """What "Re-run all files" of ``stage`` would re-run, what it spent so far and what it will cost."""
    return rerun_preview(state.ctx, state.config(), stage)
