"""``GET /api/session``, the token endpoints (scope ``admin``) and ``GET /api/audit``.

DESIGN.md "The operator surface is one app" (tokens with scopes, writes audited with the token's
name as actor). Tokens made here are the same as ``ki token create``'s; the token is shown once.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query

from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.schemas import AuditPage, TokenCreate, TokenCreated, TokenOut, WhoAmI
from ki.api.state import ServerState, server_state
from ki.app import tokens as token_service
from ki.app.scopes import ADMIN, READ_PIPELINE
from ki.domain.access.visibility import visible_objects
from ki.store import audit
from ki.store import tokens as token_store

router = APIRouter(prefix="/api", tags=["access"])


@router.get("/session", response_model=WhoAmI, responses=error_responses(401))
def whoami(identity: Identity = Depends(require_scope(None))) -> WhoAmI:
    """The token this request authenticated with: name, scopes, principal, bearer or cookie."""
    return WhoAmI(name=identity.name, scopes=sorted(identity.scopes), principal=identity.principal, via=identity.via)


@router.get("/tokens", response_model=list[TokenOut], responses=error_responses(401, 403))
def list_tokens(state: ServerState = Depends(server_state), _: Identity = Depends(require_scope(ADMIN))
                ) -> list[TokenOut]:
    """Every token, newest first (never a token or its hash)."""
    with state.ctx.db.engine.connect() as conn:
        return [TokenOut(**token_service.token_json(r)) for r in token_store.list_tokens(conn)]


@router.post("/tokens", status_code=201, response_model=TokenCreated, responses=error_responses(401, 403, 422))
def create_token(body: TokenCreate, state: ServerState = Depends(server_state),
                 identity: Identity = Depends(require_scope(ADMIN))) -> TokenCreated:
    """Make a token (shown once in the answer); audited with the admin token's name."""
    try:
        row, token = token_service.create_token(state.ctx.db.engine, name=body.name, scopes=body.scopes,
                                                principal=body.principal, created_by=identity.name)
    except ValueError as exc:
        raise ApiError(422, "invalid_token_request", str(exc)) from exc
    return TokenCreated(id=row.id, token=token, name=row.name, scopes=list(row.scopes))


@router.delete("/tokens/{token_id}", response_model=TokenOut, responses=error_responses(401, 403, 404))
def revoke_token(token_id: int = Path(ge=1, le=2**63 - 1), state: ServerState = Depends(server_state),
                 identity: Identity = Depends(require_scope(ADMIN))) -> TokenOut:
    """Revoke a live token; it fails from the next request on."""
    try:
        row = token_service.revoke(state.ctx.db.engine, token_id, actor=identity.name)
    except LookupError as exc:
        raise ApiError(404, "not_found", str(exc)) from exc
    return TokenOut(**token_service.token_json(row))


def _unnamed(entry: audit.AuditEntry) -> audit.AuditEntry:
    """An entry about no file as a principal's token sees it: a bulk action's path filter (a folder name the
    operator typed, perhaps a walled matter's) is left out."""
    flt = entry.details.get("filter")
    if isinstance(flt, dict) and "path_prefix" in flt:
        return entry.model_copy(update={"details": {**entry.details, "filter": {**flt, "path_prefix": None}}})
    return entry


@router.get("/audit", response_model=AuditPage, responses=error_responses(401, 403))
def get_audit(state: ServerState = Depends(server_state),
              identity: Identity = Depends(require_scope(READ_PIPELINE)),
              action: str | None = Query(None, max_length=100, description="e.g. quarantine_retry, config_update"),
              limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=10_000_000)) -> AuditPage:
    """Who did what, newest first. A token with a principal gets no entry about a file that principal may not
    see (``hidden`` counts them on this page; their details name the file)."""
    with state.ctx.db.engine.connect() as conn:
        rows, total = audit.recent_audit(conn, limit=limit, offset=offset, action=action)
    about = [r for r in rows if r.source_object_id is not None]
    seen = visible_objects(state.ctx.db.engine, identity.principal, (r.source_object_id for r in about))
    shown = [_unnamed(r) if identity.principal else r
             for r in rows if r.source_object_id is None or r.source_object_id in seen]
    return AuditPage(entries=shown, total=total, limit=limit, offset=offset, hidden=len(rows) - len(shown))
