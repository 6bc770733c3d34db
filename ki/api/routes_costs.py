"""``GET /api/costs`` and ``GET /api/models/catalog``.

Spec: insertion-pipeline.md "The console page" (per-stage cost in the re-run dialog: GET /api/costs,
realized spend per stage from the usage ledger; stage model chip: GET /api/models/catalog).
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Query

from ki.api.auth import Identity, require_scope
from ki.api.errors import ApiError, error_responses
from ki.api.schemas import CostsOut, SpendOut
from ki.api.state import ServerState, server_state
from ki.app.catalog import stage_catalog
from ki.app.scopes import READ_PIPELINE
from ki.app.views import CatalogOut
from ki.store.usage import SpendRow, spend_by

router = APIRouter(prefix="/api", tags=["costs"])


def _spend(row: SpendRow) -> SpendOut:
    return SpendOut(key=row.key, calls=row.calls, prompt_tokens=row.prompt_tokens,
                    completion_tokens=row.completion_tokens, total_tokens=row.total_tokens,
                    cost_usd=float(row.cost_usd), unpriced_calls=row.unpriced_calls, documents=row.documents)


@router.get("/costs", response_model=CostsOut, responses=error_responses(401, 403, 422))
def get_costs(state: ServerState = Depends(server_state), _: Identity = Depends(require_scope(READ_PIPELINE)),
              since: datetime | None = Query(None, description="from this time (ISO 8601, inclusive)"),
              until: datetime | None = Query(None, description="to this time (ISO 8601, exclusive)")) -> CostsOut:
    """Realized spend per stage, per model and per matter (documents with a matter) in ``[since, until)``."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise ApiError(422, "invalid_request", f"{name} needs a time zone (e.g. 2026-01-01T00:00:00Z)")
        if value is not None and not (1970 <= value.year <= 9000):
            raise ApiError(422, "invalid_request", f"{name} is out of range")
    if since and until and since >= until:
        raise ApiError(422, "invalid_request", "since must be before until")
    with state.ctx.db.engine.connect() as conn:
        by_stage = spend_by(conn, "stage", since=since, until=until)
        by_model = spend_by(conn, "model", since=since, until=until)
        by_matter = spend_by(conn, "matter", since=since, until=until)
    return CostsOut(since=since, until=until, total_usd=float(sum(r.cost_usd for r in by_stage)),
                    by_stage=[_spend(r) for r in by_stage], by_model=[_spend(r) for r in by_model],
                    by_matter=[_spend(r) for r in by_matter])


@router.get("/models/catalog", response_model=CatalogOut, responses=error_responses(401, 403))
def get_catalog(state: ServerState = Depends(server_state),
                _: Identity = Depends(require_scope(READ_PIPELINE))) -> CatalogOut:
    """Per stage: the assigned gateway alias, the model it resolves to and its price (or why not)."""
    return stage_catalog(state.config())
