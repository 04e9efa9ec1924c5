"""The error answers each route can give, declared in the OpenAPI document with their real body.

Every error Runyard answers is `{"detail": "<what to change>"}` (validation failures add the
raw `errors` list). Clients generated from /openapi.json rely on the declared statuses and
bodies, so they are derived here, in one place, from what the route can raise.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    """The body of every error answer."""

    detail: str = Field(description="What went wrong and what to change.")
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="Validation failures only: each problem, as pydantic reports it."
    )


# Creating runs and crons names an assistant (and maybe a thread) in the body, searching
# assistants may name a graph: 404 if unknown.
NAMES_A_RESOURCE = frozenset(
    {
        "/assistants",
        "/assistants/search",
        "/assistants/count",
        "/runs",
        "/runs/stream",
        "/runs/wait",
        "/runs/crons",
        "/runs/batch",
        "/threads/prune",
    }
)
# Where a ConflictError can come from: existing ids, busy threads, idempotency, cancels.
CONFLICTS = frozenset(
    {
        ("POST", "/threads"),
        ("POST", "/assistants"),
        ("POST", "/runs"),
        ("POST", "/runs/stream"),
        ("POST", "/runs/wait"),
        ("POST", "/threads/{thread_id}/runs"),
        ("POST", "/threads/{thread_id}/runs/stream"),
        ("POST", "/threads/{thread_id}/runs/wait"),
        ("POST", "/threads/{thread_id}/runs/{run_id}/cancel"),
        ("POST", "/runs/cancel"),
        ("POST", "/threads/{thread_id}/state"),
        ("POST", "/console/api/runs/{run_id}/cancel"),
        ("POST", "/console/api/webhooks/{delivery_id}/retry"),
    }
)
# Where a plain RunyardError (400) can come from: state updates LangGraph refuses.
BAD_REQUESTS = frozenset({("POST", "/threads"), ("POST", "/threads/{thread_id}/state")})

DESCRIPTIONS = {
    400: "The request cannot be applied to the resource as it is.",
    401: "No valid credentials (when the server declares auth handlers).",
    403: "The auth handlers refuse this action to this user.",
    404: "The resource does not exist, or the caller may not see it.",
    409: "The request conflicts with the resource's current state.",
    413: "The request body is larger than RUNYARD_MAX_BODY_BYTES.",
    422: "The request is malformed or its values cannot be used.",
    503: "The database is unavailable or busy; retry shortly.",
}


def error_responses(
    method: str, path: str, *, authenticated: bool, has_body: bool, has_params: bool
) -> dict[int | str, dict[str, Any]]:
    """The error statuses a route can answer, each with the ErrorBody schema."""
    statuses: set[int] = set()
    if authenticated:
        statuses |= {401, 403, 503}
    if has_body or has_params:
        statuses.add(422)
    if has_body:
        statuses.add(413)
    if authenticated and ("{" in path or path in NAMES_A_RESOURCE or path == "/runs/cancel"):
        statuses.add(404)
    if (method, path) in CONFLICTS:
        statuses.add(409)
    if (method, path) in BAD_REQUESTS:
        statuses.add(400)
    return {
        status: {"model": ErrorBody, "description": DESCRIPTIONS[status]}
        for status in sorted(statuses)
    }
