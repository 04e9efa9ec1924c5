"""Server endpoints: health probes, metrics and server information."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from runyard import __version__
from runyard.api.deps import RuntimeDep
from runyard.services.health import is_ready, liveness, readiness

router = APIRouter(tags=["System"])


@router.get("/ok")
async def ok() -> dict[str, bool]:
    """Liveness, as LangGraph Platform answers it."""
    return {"ok": True}


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
        "flags": {"assistants": True, "crons": True, "langsmith": False},
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
async def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus metrics of this instance, in the text exposition format."""
    body, content_type = await runtime.metrics.render(runtime.queue)
    return Response(body, media_type=content_type)
