"""Server endpoints: liveness and server information."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app import __version__
from app.api.deps import RuntimeDep
from app.services.health import readiness

router = APIRouter(tags=["System"])


@router.get("/ok")
async def ok() -> dict[str, bool]:
    """Liveness, as LangGraph Platform answers it."""
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
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "graphs": runtime.graphs.ids(),
    }


@router.get("/livez")
async def livez(runtime: RuntimeDep) -> JSONResponse:
    """The event loop turns and no background loop of this instance has died."""
    healthy = runtime.healthy()
    body = {"status": "ok" if healthy else "failing", "loops_alive": healthy}
    return JSONResponse(body, status_code=200 if healthy else 503)


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    """Ready for traffic: storage answers within 2 s and the instance is not draining."""
    report = await readiness(runtime)
    ready = all(value == "ok" for value in report.values())
    return JSONResponse(
        {"status": "ok" if ready else "unavailable", **report}, status_code=200 if ready else 503
    )
