"""Server endpoints: health probes, metrics and server information.

The probes and /info stay open when auth is configured (load balancers and clients call them
without credentials), so to a caller the authenticate handler refuses they say only what a
probe needs: the status. Instance id, graph names, dependency states and their errors are for
callers it accepts (everyone, when no auth is configured)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from runyard import __version__
from runyard.api.deps import HealthDep, InstanceInfoDep, MetricsReportDep, is_insider
from runyard.domain.errors import ForbiddenError, UnauthorizedError
from runyard.services.health import InstanceInfo, is_ready

router = APIRouter(tags=["System"])
# /metrics: behind `metrics_guard`.
metrics_router = APIRouter(tags=["System"])
METRICS_CLOSED = (
    "/metrics is closed: with auth configured it needs a token of its own (its fairness groups "
    "name users); set RUNYARD_METRICS_TOKEN and scrape with 'Authorization: Bearer <token>'"
)
METRICS_REFUSED = "/metrics needs 'Authorization: Bearer <RUNYARD_METRICS_TOKEN>'"
FLAGS = {"assistants": True, "crons": True, "langsmith": False}

CheckDb = Annotated[
    Literal["0", "1"],
    Query(description="1: also check the database (and Redis) and name each in `services`"),
]


@router.get("/ok", responses={500: {"description": "a checked dependency is unhealthy"}})
async def ok(health: HealthDep, check_db: CheckDb = "0") -> JSONResponse:
    """Liveness, as LangGraph Platform answers it; `?check_db=1` checks storage too."""
    if check_db == "0":
        return JSONResponse({"ok": True})
    services = await health.dependency_health()
    healthy = all(state == "healthy" for state in services.values())
    return JSONResponse({"ok": healthy, "services": services}, status_code=200 if healthy else 500)


@router.get("/", include_in_schema=False)
async def root(health: HealthDep, check_db: CheckDb = "0") -> JSONResponse:
    """The same answer as /ok, for load balancers that probe the root."""
    return await ok(health, check_db)


@router.get("/health")
async def health() -> dict[str, bool]:
    """The same answer as /ok, for clients and load balancers that probe /health."""
    return {"ok": True}


@router.get("/info")
async def info(instance: InstanceInfoDep, request: Request) -> dict[str, Any]:
    """Version and capabilities; to an authenticated caller, also backends, instance and graphs."""
    if not await is_insider(request):
        return {"version": __version__, "flags": _flags(instance)}
    return {
        "version": __version__,
        "runyard": {
            "version": __version__,
            "database": instance.database,
            "queue": instance.queue,
            "instance_id": instance.instance_id,
        },
        "flags": _flags(instance),
        "graphs": instance.graph_ids,
    }


def _flags(instance: InstanceInfo) -> dict[str, bool]:
    return {**FLAGS, "langsmith": instance.langsmith_project is not None}


@router.get("/livez")
async def livez(health: HealthDep, request: Request) -> JSONResponse:
    """The event loop turns and no background loop of this instance has died."""
    body = health.liveness()
    status_code = 200 if body["status"] == "ok" else 503
    if not await is_insider(request):
        body = {"status": body["status"]}
    return JSONResponse(body, status_code=status_code)


@router.get("/readyz")
async def readyz(health: HealthDep, request: Request) -> JSONResponse:
    """Ready for traffic: storage answers within 2 s and the instance is not draining."""
    report = await health.readiness()
    ready = is_ready(report)
    body: dict[str, str] = {"status": "ok" if ready else "unavailable"}
    if await is_insider(request):
        body.update(report)
    return JSONResponse(body, status_code=200 if ready else 503)


def metrics_guard(token: str | None, auth_configured: bool) -> Callable[[Request], Awaitable[None]]:
    """The check /metrics runs: the bearer token RUNYARD_METRICS_TOKEN when one is set (401
    otherwise); with none, open without auth configured and closed (403) with it, as the
    metrics are no tenant directory. Never the users' own credentials: a tenant is no
    operator."""
    expected = token.encode() if token is not None else None

    async def require_metrics_access(request: Request) -> None:
        if expected is None:
            if auth_configured:
                raise ForbiddenError(METRICS_CLOSED)
            return
        scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), expected):
            raise UnauthorizedError(METRICS_REFUSED)

    return require_metrics_access


@metrics_router.get("/metrics", response_class=Response)
async def metrics(
    report: MetricsReportDep,
    format: Annotated[
        str, Query(description="`prometheus` (text exposition, the default) or `json`")
    ] = "prometheus",
) -> Response:
    """Prometheus metrics of this instance; `?format=json`: queue, HTTP and worker figures."""
    if format == "json":
        return JSONResponse(await report.snapshot())
    body, content_type = await report.exposition()
    return Response(body, media_type=content_type)
