"""Unknown query parameters are refused, not ignored: a misspelt filter must not widen a request.

``POST /v1/work-items/cancel?knd=convert`` would otherwise be a cancel with an empty filter. The app
adds :func:`refuse_unknown_query` as a dependency of every route: a query parameter the route does not
declare (its own or one of its dependencies') is a 422 ``unknown_parameter`` naming the ones it takes.
Request bodies do the same through their models (``extra="forbid"``).
"""

from __future__ import annotations

from fastapi import Request

from ki.api.errors import ApiError

_ALLOWED: dict[int, frozenset[str]] = {}


def _declared(route: object) -> frozenset[str] | None:
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return None
    key = id(route)
    if key not in _ALLOWED:
        names: set[str] = set()
        stack = [dependant]
        while stack:
            current = stack.pop()
            names.update(p.alias for p in current.query_params)
            stack.extend(current.dependencies)
        _ALLOWED[key] = frozenset(names)
    return _ALLOWED[key]


async def refuse_unknown_query(request: Request) -> None:
    """A FastAPI dependency: 422 ``unknown_parameter`` when the query string names a parameter the
    matched route does not declare (routes without a dependant — mounts, static files — are left alone).
    Async: it reads nothing but the request, so it runs on the event loop (no worker-thread hop per request)."""
    allowed = _declared(request.scope.get("route"))
    if allowed is None:
        return
    unknown = sorted(set(request.query_params.keys()) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise ApiError(422, "unknown_parameter", f"unknown query parameter(s) {', '.join(map(repr, unknown))}; "
                                                 f"this route takes: {takes}",
                       fields={name: ["unknown query parameter"] for name in unknown})
