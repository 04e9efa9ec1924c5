"""Server endpoints: health probes, metrics and server information."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from runyard import __version__
from runyard.api.deps import RuntimeDep
from runyard.services.health import dependency_health, is_ready, liveness, readiness
from runyard.services.metrics_report import metrics_snapshot

router = APIRouter(tags=["System"])

CheckDb = Annotated[
    Literal["0", "1"],
    Query(description="1: also check the database (and Redis) and name each in `services`"),
]


@router.get("/ok", responses={500: {"description": "a checked dependency is unhealthy"}})
async def ok(runtime: RuntimeDep, check_db: CheckDb = "0") -> JSONResponse:
    """Liveness, as LangGraph Platform answers it; `?check_db=1` checks storage too."""
    if check_db == "0":
        return JSONResponse({"ok": True})
    services = await dependency_health(runtime)
    healthy = all(state == "healthy" for state in services.values())
    return JSONResponse({"ok": healthy, "services": services}, status_code=200 if healthy else 500)


@router.get("/", include_in_schema=False)
async def root(runtime: RuntimeDep, check_db: CheckDb = "0") -> JSONResponse:
    """The same answer as /ok, for load balancers that probe the root."""
    return await ok(runtime, check_db)


@router.get("/health")
async def health() -> dict[str, bool]:
    """The same answer as /ok, for clients and load balancers that probe /health."""
    return {"ok": True}


@router.get("/info")
async def info(runtime: RuntimeDep) -> dict[str, Any]:
    """Version, capabilities and backends of this instance."""
    return {
        "version": __version__,
        "runyard": {
            "version": __version__,
            "database": runtime.dialect,
            "queue": "redis" if runtime.settings.redis_url else "in-process",
            "instance_id": runtime.instance_id,
        },
        "flags": {
            "assistants": True,
            "crons": True,
            "langsmith": runtime.langsmith_project is not None,
        },
        "graphs": runtime.graphs.ids(),
    }


@router.get("/livez")
async def livez(runtime: RuntimeDep) -> JSONResponse:
    """The event loop turns and no background loop of this instance has died."""
    body = liveness(runtime)
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Ready for traffic: storage answers within 2 s and the instance is not draining."""
    report = await readiness(runtime)
    ready = is_ready(report)
    return JSONResponse(
        {"status": "ok" if ready else "unavailable", **report}, status_code=200 if ready else 503
    )


@router.get("/metrics", response_class=Response)
async def metrics(
    runtime: RuntimeDep,
    format: Annotated[
        str, Query(description="`prometheus` (text exposition, the default) or `json`")
    ] = "prometheus",
) -> Response:
    """Prometheus metrics of this instance; `?format=json`: queue, HTTP and worker figures."""
    if format == "json":
        return JSONResponse(await metrics_snapshot(runtime))
    body, content_type = await runtime.metrics.render(runtime.queue)
    return Response(body, media_type=content_type)
