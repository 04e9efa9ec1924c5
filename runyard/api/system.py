"""Server endpoints: health probes, metrics and server information.

The probes and /info stay open when auth is configured (load balancers and clients call them
without credentials), so to a caller the authenticate handler refuses they say only what a
probe needs: the status. Instance id, graph names, dependency states and their errors are for
callers it accepts (everyone, when no auth is configured)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from runyard import __version__
from runyard.api.deps import RuntimeDep, is_insider
from runyard.services.health import is_ready, liveness, readiness

router = APIRouter(tags=["System"])
# /metrics: open, or behind auth with RUNYARD_AUTH_METRICS_AND_DOCS.
metrics_router = APIRouter(tags=["System"])
FLAGS = {"assistants": True, "crons": True, "langsmith": False}


@router.get("/ok")
async def ok() -> dict[str, bool]:
    """Liveness, as LangGraph Platform answers it."""
    return {"ok": True}


@router.get("/health")
async def health() -> dict[str, bool]:
    """The same answer as /ok, for clients and load balancers that probe /health."""
    return {"ok": True}


@router.get("/info")
async def info(runtime: RuntimeDep, request: Request) -> dict[str, Any]:
    """Version and capabilities; to an authenticated caller, also backends, instance and graphs."""
    if not await is_insider(request):
        return {"version": __version__, "flags": FLAGS}
    return {
        "version": __version__,
        "runyard": {
            "version": __version__,
            "database": runtime.dialect,
            "queue": "redis" if runtime.settings.redis_url else "in-process",
            "instance_id": runtime.instance_id,
        },
        "flags": FLAGS,
        "graphs": runtime.graphs.ids(),
    }


@router.get("/livez")
async def livez(runtime: RuntimeDep, request: Request) -> JSONResponse:
    """The event loop turns and no background loop of this instance has died."""
    body = liveness(runtime)
    status_code = 200 if body["status"] == "ok" else 503
    if not await is_insider(request):
        body = {"status": body["status"]}
    return JSONResponse(body, status_code=status_code)


@router.get("/readyz")
async def readyz(runtime: RuntimeDep, request: Request) -> JSONResponse:
    """Ready for traffic: storage answers within 2 s and the instance is not draining."""
    report = await readiness(runtime)
    ready = is_ready(report)
    body: dict[str, str] = {"status": "ok" if ready else "unavailable"}
    if await is_insider(request):
        body.update(report)
    return JSONResponse(body, status_code=200 if ready else 503)


@metrics_router.get("/metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics of this instance, in the text exposition format."""
    body, content_type = await runtime.metrics.render(runtime.queue)
    return Response(body, media_type=content_type)
