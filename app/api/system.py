"""Server endpoints: liveness and server information."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app import __version__
from app.api.deps import RuntimeDep

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
